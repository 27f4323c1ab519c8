//! Hybrid retrieval (BM25 + vectors, fused by reciprocal rank) and the
//! expansion of entry chunks to whole files, in order: the first two steps of
//! the `pipeline` flow (high-recall retrieval of entry chunks, then chunk →
//! file expansion).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::embed::Embedder;
use crate::store::{Chunk, Document, Store};
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
/// Files kept by [`Store::expand_files`] unless configured (`RLM_MAX_FILES`).
pub const DEFAULT_MAX_FILES: usize = 20;
/// Chunks kept by [`Store::expand_files`] unless configured (`RLM_MAX_CHUNKS`).
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
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "bm25" => Ok(RetrievalMode::Bm25),
            "vector" => Ok(RetrievalMode::Vector),
            "hybrid" => Ok(RetrievalMode::Hybrid),
            other => Err(format!(
                "unknown search mode {other:?}: use bm25, vector or hybrid"
            )),
        }
    }
}

/// Options of [`Store::search_hybrid`].
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

/// The answer of [`Store::search_hybrid`], with what shaped it.
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

impl Store {
    /// Retrieves the best chunks for `query`. `embedder` embeds the query for
    /// vector and hybrid modes and must be the model the store was embedded
    /// with (see [`Store::embedding_model`]). BM25 mode ignores it.
    ///
    /// Hybrid fuses the two ranked lists (each [`SearchOptions::effective_candidates`]
    /// deep) by reciprocal rank fusion with k = 60, then drops chunks whose
    /// text repeats an earlier hit's.
    pub fn search_hybrid(
        &self,
        query: &str,
        opts: &SearchOptions,
        embedder: Option<&dyn Embedder>,
    ) -> Result<HybridResults, RetrievalError> {
        if opts.k == 0 {
            return Err(RetrievalError::InvalidOption(
                "k must be at least 1".to_string(),
            ));
        }
        if query.trim().is_empty() {
            return Err(crate::CorpusError::EmptyQuery.into());
        }
        let k = opts.effective_k();
        let depth = opts.effective_candidates();
        let mut vectors = None;
        let vector_list = if opts.mode == RetrievalMode::Bm25 {
            Vec::new()
        } else {
            let Some((model, dim)) = self.embedding_model()? else {
                return Err(RetrievalError::NoEmbeddings {
                    store: self.dir().display().to_string(),
                });
            };
            let Some(embedder) = embedder else {
                return Err(RetrievalError::NoEmbedder {
                    mode: opts.mode.as_str().to_string(),
                    model,
                });
            };
            if embedder.model_id() != model || embedder.dimension() != dim {
                return Err(RetrievalError::ModelMismatch {
                    store: self.dir().display().to_string(),
                    stored: model,
                    stored_dim: dim,
                    requested: embedder.model_id().to_string(),
                    requested_dim: embedder.dimension(),
                });
            }
            // The loaded matrix holds exactly the current vectors; counting
            // them in SQLite on every query would cost more than the scan.
            let Some(matrix) = self.vector_matrix()? else {
                return Err(RetrievalError::NoEmbeddings {
                    store: self.dir().display().to_string(),
                });
            };
            vectors = Some(VectorStatus {
                model: Some(model.clone()),
                dimension: Some(dim),
                embedded: matrix.ids.len() as u64,
                chunks: self.stats()?.chunks,
            });
            let q = embedder.embed(&[query])?;
            let q = q
                .into_iter()
                .next()
                .ok_or_else(|| RetrievalError::EmbedderContract {
                    model: model.clone(),
                    detail: "no vector for the query".to_string(),
                })?;
            self.search_vector(&q, depth, opts.effective_min_similarity())?
        };
        let bm25_list = if opts.mode == RetrievalMode::Vector {
            Vec::new()
        } else {
            self.search(query, depth)?
        };

        // Fuse: every chunk's RRF score over the lists it appears in.
        let mut fused: HashMap<String, HybridHit> = HashMap::new();
        for (rank, h) in bm25_list.into_iter().enumerate() {
            let rank = rank as u32 + 1;
            fused.insert(
                h.chunk_id.clone(),
                HybridHit {
                    chunk_id: h.chunk_id,
                    doc_id: h.doc_id,
                    path: h.path,
                    ordinal: h.ordinal,
                    score: match opts.mode {
                        RetrievalMode::Hybrid => 1.0 / (RRF_K + rank as f32),
                        _ => h.score,
                    },
                    bm25_rank: Some(rank),
                    bm25_score: Some(h.score),
                    vector_rank: None,
                    vector_score: None,
                    snippet: h.snippet,
                    text: h.text,
                },
            );
        }
        for (rank, (chunk_id, sim)) in vector_list.into_iter().enumerate() {
            let rank = rank as u32 + 1;
            let rrf = 1.0 / (RRF_K + rank as f32);
            let entry = fused.entry(chunk_id.clone()).or_insert_with(|| HybridHit {
                chunk_id,
                doc_id: String::new(),
                path: String::new(),
                ordinal: 0,
                score: 0.0,
                bm25_rank: None,
                bm25_score: None,
                vector_rank: None,
                vector_score: None,
                snippet: String::new(),
                text: String::new(),
            });
            entry.vector_rank = Some(rank);
            entry.vector_score = Some(sim);
            entry.score = match opts.mode {
                RetrievalMode::Hybrid => entry.score + rrf,
                _ => sim,
            };
        }
        let mut ranked: Vec<HybridHit> = fused.into_values().collect();
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| {
                    a.bm25_rank
                        .unwrap_or(u32::MAX)
                        .cmp(&b.bm25_rank.unwrap_or(u32::MAX))
                })
                .then_with(|| a.chunk_id.cmp(&b.chunk_id))
        });

        // De-duplicate by text and fill in vector-only hits, up to k.
        let mut seen_text: HashSet<blake3::Hash> = HashSet::new();
        let mut duplicates_dropped = 0;
        let mut hits = Vec::with_capacity(k.min(ranked.len()));
        let mut paths: HashMap<String, String> = HashMap::new();
        for mut h in ranked {
            if hits.len() == k {
                break;
            }
            if h.path.is_empty() {
                let Some(chunk) = self.chunk(&h.chunk_id)? else {
                    continue; // Deleted since the vectors were loaded.
                };
                if !paths.contains_key(&chunk.doc_id) {
                    let path = self
                        .document(&chunk.doc_id)?
                        .map(|d| d.path)
                        .unwrap_or_default();
                    paths.insert(chunk.doc_id.clone(), path);
                }
                h.path = paths[&chunk.doc_id].clone();
                h.doc_id = chunk.doc_id;
                h.ordinal = chunk.ordinal;
                h.snippet = excerpt(&chunk.text);
                h.text = chunk.text;
            }
            let normalized: String = h.text.split_whitespace().collect::<Vec<_>>().join(" ");
            if !seen_text.insert(blake3::hash(normalized.as_bytes())) {
                duplicates_dropped += 1;
                continue;
            }
            hits.push(h);
        }
        Ok(HybridResults {
            hits,
            mode: opts.mode,
            k,
            high_recall: opts.high_recall,
            duplicates_dropped,
            vectors,
        })
    }
}

/// The first ~160 characters on one line.
fn excerpt(text: &str) -> String {
    let head: String = text.chars().take(160).collect();
    head.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Caps of [`Store::expand_files`]: files and chunks kept at most
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

impl Store {
    /// Expands retrieved chunks to their files with all chunks of each file in
    /// document order. Files come in the order of their best entry
    /// chunk. At most `opts.max_files` files and `opts.max_chunks` chunks are
    /// kept: a file that does not fit whole keeps the chunks nearest its entry
    /// chunks (marked `truncated`), and what was cut is counted in the result.
    /// Unknown chunk ids are an error.
    pub fn expand_files<'a>(
        &self,
        entry_chunk_ids: impl IntoIterator<Item = &'a str>,
        opts: &ExpandOptions,
    ) -> Result<ExpandedFiles, RetrievalError> {
        if opts.max_files == 0 || opts.max_chunks == 0 {
            return Err(RetrievalError::InvalidOption(
                "RLM_MAX_FILES and RLM_MAX_CHUNKS must be at least 1".to_string(),
            ));
        }
        // Group entry chunks by document, documents in first-seen order.
        let mut order: Vec<String> = Vec::new();
        let mut entries: HashMap<String, Vec<(String, u32)>> = HashMap::new();
        for id in entry_chunk_ids {
            let chunk = self
                .chunk(id)?
                .ok_or_else(|| crate::CorpusError::UnknownId(id.to_string()))?;
            let list = entries.entry(chunk.doc_id.clone()).or_default();
            if list.is_empty() {
                order.push(chunk.doc_id.clone());
            }
            if !list.iter().any(|(c, _)| c == id) {
                list.push((id.to_string(), chunk.ordinal));
            }
        }
        let mut out = ExpandedFiles {
            files: Vec::new(),
            total_chunks: 0,
            files_dropped: 0,
            chunks_dropped: 0,
            caps: *opts,
        };
        for doc_id in order {
            let document = self
                .document(&doc_id)?
                .ok_or_else(|| crate::CorpusError::UnknownId(doc_id.clone()))?;
            let budget = opts.max_chunks - out.total_chunks;
            if out.files.len() == opts.max_files || budget == 0 {
                out.files_dropped += 1;
                out.chunks_dropped += document.chunk_count as usize;
                continue;
            }
            let mut chunks = self.chunks_of(&doc_id)?;
            let entry = &entries[&doc_id];
            let truncated = chunks.len() > budget;
            if truncated {
                // Keep the chunks closest to any entry chunk, then restore document order.
                let distance = |c: &Chunk| {
                    entry
                        .iter()
                        .map(|(_, o)| c.ordinal.abs_diff(*o))
                        .min()
                        .unwrap_or(0)
                };
                out.chunks_dropped += chunks.len() - budget;
                chunks.sort_by_key(|c| (distance(c), c.ordinal));
                chunks.truncate(budget);
                chunks.sort_by_key(|c| c.ordinal);
            }
            out.total_chunks += chunks.len();
            out.files.push(ExpandedFile {
                document,
                entry_chunk_ids: entry.iter().map(|(id, _)| id.clone()).collect(),
                chunks,
                truncated,
            });
        }
        Ok(out)
    }
}
