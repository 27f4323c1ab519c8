//! Hybrid retrieval (BM25 + vectors, fused by reciprocal rank) and the
//! expansion of entry chunks to whole files, in order: the first two steps of
//! the `pipeline` flow (high-recall retrieval of entry chunks, then chunk →
//! file expansion).

use serde::{Deserialize, Serialize};

use crate::records::{Chunk, Document};
use crate::vector::{RetrievalError, VectorStatus};

/// `k` when none is given.
pub const DEFAULT_K: usize = 10;
/// `k` in high-recall mode: retrieval over-fetches 200 chunks and lets the
/// RLM narrow them down.
pub const HIGH_RECALL_K: usize = 200;
/// The constant of reciprocal rank fusion: `score = Σ 1 / (RRF_K + rank)`.
pub const RRF_K: f32 = 60.0;
/// Vector hits below this cosine similarity are dropped in normal mode.
pub const DEFAULT_MIN_SIMILARITY: f32 = 0.1;
/// … and in high-recall mode (no cut: every vector ranks).
pub const HIGH_RECALL_MIN_SIMILARITY: f32 = -1.0;
/// Files kept by [`CorpusStore::expand_files`](crate::CorpusStore::expand_files) unless configured (`RLM_MAX_FILES`).
pub const DEFAULT_MAX_FILES: usize = 20;
/// Chunks kept by [`CorpusStore::expand_files`](crate::CorpusStore::expand_files) unless configured (`RLM_MAX_CHUNKS`).
pub const DEFAULT_MAX_CHUNKS: usize = 500;

/// Which retriever ranks the chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
    /// Full-text BM25 only.
    Bm25,
    /// Embedding similarity only.
    Vector,
    /// Both, fused by reciprocal rank.
    #[default]
    Hybrid,
}

impl RetrievalMode {
    /// `bm25`, `vector` or `hybrid`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Bm25 => "bm25",
            RetrievalMode::Vector => "vector",
            RetrievalMode::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for RetrievalMode {
    type Err = RetrievalError;

    fn from_str(s: &str) -> Result<Self, RetrievalError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "bm25" => Ok(RetrievalMode::Bm25),
            "vector" => Ok(RetrievalMode::Vector),
            "hybrid" => Ok(RetrievalMode::Hybrid),
            other => Err(RetrievalError::UnknownMode(other.to_string())),
        }
    }
}

/// Options of [`CorpusStore::search_hybrid`](crate::CorpusStore::search_hybrid).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    /// Which retriever(s).
    pub mode: RetrievalMode,
    /// Results wanted (raised to [`HIGH_RECALL_K`] in high-recall mode).
    pub k: usize,
    /// High-recall mode (`rlm search --high-recall`): more results, no
    /// similarity cut.
    pub high_recall: bool,
    /// Depth of each ranked list before fusion; default `max(3·k, 50)`.
    pub candidates: Option<usize>,
    /// Cosine cut for vector hits; default [`DEFAULT_MIN_SIMILARITY`]
    /// ([`HIGH_RECALL_MIN_SIMILARITY`] in high-recall mode).
    pub min_similarity: Option<f32>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            mode: RetrievalMode::Hybrid,
            k: DEFAULT_K,
            high_recall: false,
            candidates: None,
            min_similarity: None,
        }
    }
}

impl SearchOptions {
    /// Options for `mode` with the defaults otherwise.
    pub fn new(mode: RetrievalMode) -> SearchOptions {
        SearchOptions {
            mode,
            ..SearchOptions::default()
        }
    }

    /// The number of results returned at most.
    pub fn effective_k(&self) -> usize {
        if self.high_recall {
            self.k.max(HIGH_RECALL_K)
        } else {
            self.k
        }
    }

    /// Depth of each ranked list before fusion.
    pub fn effective_candidates(&self) -> usize {
        self.candidates
            .unwrap_or_else(|| (self.effective_k() * 3).max(50))
            .max(self.effective_k())
    }

    /// The cosine similarity below which vector hits are dropped.
    pub fn effective_min_similarity(&self) -> f32 {
        self.min_similarity.unwrap_or(if self.high_recall {
            HIGH_RECALL_MIN_SIMILARITY
        } else {
            DEFAULT_MIN_SIMILARITY
        })
    }
}

/// One retrieved chunk with where each retriever ranked it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HybridHit {
    /// The chunk found.
    pub chunk_id: String,
    /// Its document.
    pub doc_id: String,
    /// The document's corpus-relative path.
    pub path: String,
    /// The chunk's ordinal in its document.
    pub ordinal: u32,
    /// The ranking score: fused RRF score (hybrid), BM25 score or cosine similarity.
    pub score: f32,
    /// 1-based rank in the BM25 list, when it was there.
    pub bm25_rank: Option<u32>,
    /// BM25 score, when ranked by BM25.
    pub bm25_score: Option<f32>,
    /// 1-based rank in the vector list, when it was there.
    pub vector_rank: Option<u32>,
    /// Cosine similarity, when ranked by vectors.
    pub vector_score: Option<f32>,
    /// A short excerpt (BM25 marks matched terms `**like this**`).
    pub snippet: String,
    /// The chunk's full text.
    pub text: String,
}

/// The answer of [`CorpusStore::search_hybrid`](crate::CorpusStore::search_hybrid), with what shaped it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HybridResults {
    /// Best first, at most `k`.
    pub hits: Vec<HybridHit>,
    /// The mode used.
    pub mode: RetrievalMode,
    /// The `k` applied (after high recall).
    pub k: usize,
    /// Whether high-recall mode was on.
    pub high_recall: bool,
    /// Chunks dropped because an earlier hit had the same text.
    pub duplicates_dropped: usize,
    /// Vector coverage of the store, when vectors were searched.
    pub vectors: Option<VectorStatus>,
}

impl HybridResults {
    /// The lines to log for this search: `High recall mode on (k = …)` when
    /// high recall is on, and a warning when some chunks have no vector.
    pub fn log_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.high_recall {
            lines.push(format!("High recall mode on (k = {})", self.k));
        }
        if let Some(v) = &self.vectors
            && !v.complete()
        {
            lines.push(format!(
                "{} of {} chunks have no embedding and were ranked by BM25 only: run `rlm index` with --embeddings",
                v.chunks - v.embedded,
                v.chunks
            ));
        }
        lines
    }
}

/// Caps of [`CorpusStore::expand_files`](crate::CorpusStore::expand_files): files and chunks kept at most
/// (`RLM_MAX_FILES`, `RLM_MAX_CHUNKS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpandOptions {
    /// Files kept at most, in rank order.
    pub max_files: usize,
    /// Chunks kept at most over all files.
    pub max_chunks: usize,
}

impl Default for ExpandOptions {
    fn default() -> Self {
        ExpandOptions {
            max_files: DEFAULT_MAX_FILES,
            max_chunks: DEFAULT_MAX_CHUNKS,
        }
    }
}

impl ExpandOptions {
    /// Defaults overridden by `RLM_MAX_FILES` and `RLM_MAX_CHUNKS`.
    pub fn from_env() -> Result<ExpandOptions, RetrievalError> {
        Self::from_env_with(|k| std::env::var(k).ok())
    }

    /// [`ExpandOptions::from_env`] with an explicit environment.
    pub fn from_env_with(
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ExpandOptions, RetrievalError> {
        let mut opts = ExpandOptions::default();
        for (name, slot) in [
            ("RLM_MAX_FILES", &mut opts.max_files),
            ("RLM_MAX_CHUNKS", &mut opts.max_chunks),
        ] {
            if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
                *slot = v
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        RetrievalError::InvalidOption(format!(
                            "{name}={v:?} must be a whole number of at least 1"
                        ))
                    })?;
            }
        }
        Ok(opts)
    }
}

/// One file grown from its entry chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpandedFile {
    /// The document.
    pub document: Document,
    /// The retrieved chunks that led to this file, in retrieval order.
    pub entry_chunk_ids: Vec<String>,
    /// Its chunks in document order (all of them unless `truncated`).
    pub chunks: Vec<Chunk>,
    /// True when the chunk cap left only the chunks nearest the entry chunks.
    pub truncated: bool,
}

/// Entry chunks expanded to whole files, with what the caps cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpandedFiles {
    /// Files in the order of their best entry chunk.
    pub files: Vec<ExpandedFile>,
    /// Chunks over all files.
    pub total_chunks: usize,
    /// Files left out by the caps.
    pub files_dropped: usize,
    /// Chunks left out by the caps (of kept and dropped files).
    pub chunks_dropped: usize,
    /// The caps applied.
    pub caps: ExpandOptions,
}

impl ExpandedFiles {
    /// The log line of an expansion: `Files expanded: X, total chunks: Y`.
    pub fn log_line(&self) -> String {
        format!(
            "Files expanded: {}, total chunks: {}",
            self.files.len(),
            self.total_chunks
        )
    }

    /// What the caps cut, when they cut anything.
    pub fn cut_message(&self) -> Option<String> {
        if self.files_dropped == 0 && self.chunks_dropped == 0 {
            return None;
        }
        Some(format!(
            "caps cut {} file(s) and {} chunk(s) (RLM_MAX_FILES={}, RLM_MAX_CHUNKS={})",
            self.files_dropped, self.chunks_dropped, self.caps.max_files, self.caps.max_chunks
        ))
    }
}
