//! Text embedders: the vector side of hybrid retrieval.
//!
//! Three implementations of [`Embedder`] ship with the crate. Two run a
//! model in-process on the CPU from files on disk (no download at run time),
//! over the same BERT forward pass: [`MiniLmEmbedder`] (all-MiniLM-L6-v2,
//! English) and [`E5Embedder`] (multilingual-e5-small, about 100 languages;
//! [`local_model_for_languages`] picks between them). [`ProviderEmbedder`]
//! calls an OpenAI-compatible `/v1/embeddings` endpoint. All return
//! L2-normalized vectors, so a dot product is the cosine similarity.
//!
//! Some models embed a query differently from the text it should find (e5
//! prefixes `"query: "` or `"passage: "`): whoever embeds a search query calls
//! [`Embedder::embed_queries`], and chunks go through [`Embedder::embed`].

mod bert;
mod e5;
mod minilm;
mod provider;
mod sentencepiece;
mod settings;
mod wordpiece;

pub use e5::{
    E5_DIMENSION, E5_MAX_TOKENS, E5_MODEL_FILE, E5_MODEL_ID, E5_PASSAGE_PREFIX, E5_QUERY_PREFIX,
    E5Embedder,
};
pub use minilm::{MINILM_DIMENSION, MINILM_MAX_TOKENS, MINILM_MODEL_ID, MiniLmEmbedder};
pub use provider::{DEFAULT_PROVIDER_MODEL, ProviderEmbedder, ProviderEmbedderConfig};
pub use sentencepiece::{METASPACE, SentencePieceTokenizer, UnigramVocab};
pub use settings::{
    EmbeddingSettings, EmbeddingsChoice, LocalModel, LocalModelChoice, local_model_for_languages,
};
pub use wordpiece::WordPieceTokenizer;

/// Turns texts into fixed-size, L2-normalized vectors.
///
/// Implementations block (CPU work or HTTP); from async code call them inside
/// `tokio::task::spawn_blocking`.
pub trait Embedder: Send + Sync {
    /// Stable name of the model, recorded in the store so that vectors of
    /// different models are never mixed, e.g. `local:all-MiniLM-L6-v2` or
    /// `provider:text-embedding-3-small`.
    fn model_id(&self) -> &str;

    /// Length of every vector returned.
    fn dimension(&self) -> usize;

    /// How many texts one [`Embedder::embed`] call should carry.
    fn batch_size(&self) -> usize {
        32
    }

    /// One normalized vector per text, in order: the texts searched in
    /// (chunks, passages).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// One normalized vector per search query, in order. Models trained
    /// with an instruction or prefix for queries (multilingual-e5-small's
    /// `"query: "`) override this; for the others a query is embedded like
    /// any text.
    fn embed_queries(&self, queries: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(queries)
    }
}

/// Everything that can go wrong loading or calling an embedder.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The local all-MiniLM-L6-v2 folder is missing or incomplete.
    #[error(
        "embedding model not found: {0} (run crates/rlm-corpus/scripts/fetch-minilm.sh, then set RLM_EMBED_MODEL, or `[embeddings] model_path` in rlm.toml, to the folder it prints: all-MiniLM-L6-v2's config.json, vocab.txt and model.safetensors)"
    )]
    ModelNotFound(String),
    /// The local multilingual-e5-small folder is missing or incomplete.
    #[error(
        "multilingual-e5-small not found: {0} (run crates/rlm-corpus/scripts/fetch-e5.sh, then set RLM_EMBED_E5_MODEL, or `[embeddings] e5_model_path` in rlm.toml, to the folder it prints, which holds e5-small-q4.bin)"
    )]
    E5ModelNotFound(String),
    /// `--embeddings` (or `RLM_EMBEDDINGS`) names no embedder.
    #[error("unknown embeddings choice {0:?}: use local, provider or none")]
    UnknownChoice(String),
    /// A vocabulary lacks a token the tokenizer needs (`[CLS]`, `[SEP]`,
    /// `[UNK]`).
    #[error("the vocabulary has no {0} token")]
    MissingToken(String),
    /// The local model files are unreadable or not the expected model.
    #[error("embedding model at {path} is unusable: {detail}")]
    BadModel {
        /// The model folder.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// The provider could not be reached.
    #[error(
        "embeddings endpoint {url} is unreachable ({detail}): check RLM_BASE_URL and that the server is running"
    )]
    Unreachable {
        /// The URL called.
        url: String,
        /// The transport error.
        detail: String,
    },
    /// The provider answered with an error status.
    #[error("embeddings endpoint {url} answered HTTP {status}: {detail}")]
    Status {
        /// The URL called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The provider's message and what to do.
        detail: String,
    },
    /// The provider's answer is not what the protocol says.
    #[error("embeddings endpoint {url} sent a malformed answer: {detail}")]
    Malformed {
        /// The URL called.
        url: String,
        /// What is wrong.
        detail: String,
    },
    /// The configuration cannot work.
    #[error("embeddings configuration: {0}")]
    Config(String),
}

/// Scales `v` to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product written so LLVM vectorizes it: eight independent accumulators.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}
