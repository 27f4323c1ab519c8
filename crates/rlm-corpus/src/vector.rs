//! Vector search independent of the store: the errors and report types of
//! embedding, the in-memory matrix of a store's vectors with its cache, and
//! exact top-k similarity over it. Loading vectors from SQLite and embedding
//! chunks are [`Store`](crate::Store) methods in `store/vectors.rs`, which
//! builds on this module (never the reverse).
//!
//! Search is exact: one pass of dot products over all normalized vectors held
//! contiguously in memory. The pass is memory-bound (1.5 KB per chunk at 384
//! dimensions): ~12 ms per 50k chunks, ~250 ms per million, with perfect
//! recall and no index to build, update or tune. Numbers: docs/benchmarks.md.

use std::sync::{Arc, Mutex, MutexGuard};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::embed::{EmbedError, Embedder, dot};
use crate::error::CorpusError;

/// Below this many vectors one thread scans faster than rayon can split.
const PARALLEL_SCAN_MIN: usize = 32_768;

/// Errors of embedding and hybrid retrieval.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    /// The store failed.
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// Vector or hybrid search on a store without embeddings.
    #[error(
        "store {store} has no embeddings: run `rlm index <paths> --store {store} --embeddings local` (or `--embeddings provider`) first, or search with --mode bm25"
    )]
    NoEmbeddings {
        /// The store folder.
        store: String,
    },
    /// Vector or hybrid search without an embedder for the query.
    #[error(
        "--mode {mode} needs the embedding model that indexed the store ({model}) to embed the query; configure it (RLM_EMBED_MODEL for local) or search with --mode bm25"
    )]
    NoEmbedder {
        /// The mode asked for.
        mode: String,
        /// The store's model.
        model: String,
    },
    /// Vectors of another model are in the store.
    #[error(
        "store {store} holds embeddings of {stored} ({stored_dim} dimensions), not {requested} ({requested_dim} dimensions): use the same model, or replace them all with `rlm index <paths> --store {store} --embeddings <choice> --rebuild`"
    )]
    ModelMismatch {
        /// The store folder.
        store: String,
        /// Model recorded in the store.
        stored: String,
        /// Its dimension.
        stored_dim: usize,
        /// Model offered now.
        requested: String,
        /// Its dimension.
        requested_dim: usize,
    },
    /// An embedder broke its contract (wrong count or length of vectors).
    #[error("embedder {model} returned {detail}")]
    EmbedderContract {
        /// The model.
        model: String,
        /// What was wrong.
        detail: String,
    },
    /// A search or expansion option is out of range.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A search mode other than bm25, vector or hybrid (as given, lowercased).
    #[error("unknown search mode {0:?}: use bm25, vector or hybrid")]
    UnknownMode(String),
}

impl From<rusqlite::Error> for RetrievalError {
    fn from(e: rusqlite::Error) -> Self {
        RetrievalError::Corpus(CorpusError::Sqlite(e))
    }
}

/// Options of [`Store::embed_chunks`](crate::Store::embed_chunks).
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbedOptions {
    /// Drop every stored vector first, allowing a change of model.
    pub replace: bool,
}

/// Progress of an embedding run.
#[derive(Debug, Clone, Copy)]
pub struct EmbedProgress {
    /// Chunks embedded so far in this run.
    pub done: u64,
    /// Chunks this run embeds.
    pub total: u64,
}

/// What an embedding run did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EmbedReport {
    /// Model id recorded in the store.
    pub model: String,
    /// Vector length.
    pub dimension: usize,
    /// Chunks embedded by this run.
    pub embedded: u64,
    /// Chunks of changed documents whose text was unchanged: vector kept.
    pub reused: u64,
    /// Chunks that already had a current vector.
    pub unchanged: u64,
    /// Vectors of chunks that no longer exist, deleted.
    pub removed: u64,
    /// Embedder calls made.
    pub calls: u64,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
}

/// How much of a store has vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorStatus {
    /// Model id recorded in the store, if any vectors were ever written.
    pub model: Option<String>,
    /// Vector length.
    pub dimension: Option<usize>,
    /// Chunks with a vector of their current text.
    pub embedded: u64,
    /// All chunks.
    pub chunks: u64,
}

impl VectorStatus {
    /// True when every chunk has a current vector.
    pub fn complete(&self) -> bool {
        self.embedded == self.chunks
    }
}

/// All current vectors of a store, contiguous, row `i` belonging to `ids[i]`.
pub(crate) struct VectorMatrix {
    /// The store generations the vectors were loaded at.
    pub(crate) key: (String, String),
    pub(crate) dim: usize,
    pub(crate) ids: Vec<String>,
    pub(crate) data: Vec<f32>,
}

/// The vectors of the last search, reloaded when the store changes.
#[derive(Default)]
pub(crate) struct VectorCache {
    matrix: Mutex<Option<Arc<VectorMatrix>>>,
}

impl VectorCache {
    /// The cached matrix, locked while the caller checks or reloads it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Arc<VectorMatrix>>> {
        self.matrix.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Exact top-k by dot product: score every row, then partial selection.
pub(crate) fn top_k(
    m: &VectorMatrix,
    query: &[f32],
    k: usize,
    min_similarity: f32,
) -> Vec<(String, f32)> {
    exact_top_k(&m.ids, &m.data, m.dim, query, k, min_similarity)
}

/// The `k` rows most similar to `query` by dot product (cosine for
/// normalized vectors), best first, each at least `min_similarity`: row `i`
/// is `data[i * dim..(i + 1) * dim]` and belongs to `ids[i]`. Exact: every
/// row is scored (in parallel past 32,768 rows). For back-ends that hold
/// their vectors in memory (the local store, PostgreSQL without pgvector).
pub fn exact_top_k(
    ids: &[String],
    data: &[f32],
    dim: usize,
    query: &[f32],
    k: usize,
    min_similarity: f32,
) -> Vec<(String, f32)> {
    if dim == 0 || query.len() != dim {
        return Vec::new();
    }
    let n = ids.len().min(data.len() / dim);
    let data = &data[..n * dim];
    let scores: Vec<f32> = if n >= PARALLEL_SCAN_MIN {
        data.par_chunks_exact(dim)
            .with_min_len(4096)
            .map(|row| dot(row, query))
            .collect()
    } else {
        data.chunks_exact(dim).map(|row| dot(row, query)).collect()
    };
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&i| scores[i as usize] >= min_similarity)
        .collect();
    let by_score = |a: &u32, b: &u32| {
        scores[*b as usize]
            .total_cmp(&scores[*a as usize])
            .then(a.cmp(b))
    };
    if order.len() > k && k > 0 {
        order.select_nth_unstable_by(k - 1, by_score);
        order.truncate(k);
    }
    order.truncate(k);
    order.sort_unstable_by(by_score);
    order
        .into_iter()
        .map(|i| (ids[i as usize].clone(), scores[i as usize]))
        .collect()
}

/// Embeds `texts` in batches of the embedder's size, checking its contract
/// (one vector per text, each of its dimension); `calls` counts the calls.
/// Shared by every store's `embed_chunks`.
pub fn embed_checked(
    embedder: &dyn Embedder,
    texts: &[&str],
    calls: &mut u64,
) -> Result<Vec<Vec<f32>>, RetrievalError> {
    let model = embedder.model_id();
    let dim = embedder.dimension();
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(embedder.batch_size().max(1)) {
        let got = embedder.embed(batch)?;
        *calls += 1;
        if got.len() != batch.len() {
            return Err(RetrievalError::EmbedderContract {
                model: model.to_string(),
                detail: format!("{} vectors for {} texts", got.len(), batch.len()),
            });
        }
        if let Some(v) = got.iter().find(|v| v.len() != dim) {
            return Err(RetrievalError::EmbedderContract {
                model: model.to_string(),
                detail: format!("a vector of {} dimensions, expected {dim}", v.len()),
            });
        }
        vectors.extend(got);
    }
    Ok(vectors)
}

/// A vector as stores keep it: its `f32`s as little-endian bytes.
pub fn vector_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Appends the vector stored in `bytes` to `out`; false (nothing appended)
/// when it is not `dim` floats long (written under another dimension).
pub fn push_vector_bytes(bytes: &[u8], dim: usize, out: &mut Vec<f32>) -> bool {
    if bytes.len() != dim * 4 {
        return false;
    }
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    );
    true
}
