//! The one trait every store back-end implements, so the engine, the server
//! and the commands never know which store they have: the local folder
//! ([`Store`](crate::Store): SQLite + tantivy) or PostgreSQL (crate
//! `rlm-store-pg`).
//!
//! The required methods are what differs between back-ends (lookups,
//! full-text search, vectors); hybrid retrieval, file expansion and slices
//! are written once on top of them (the provided methods). Writing (an
//! indexing run) is shared too: each back-end feeds its own transaction from
//! [`ingest`](crate::ingest::ingest).

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::embed::Embedder;
use crate::error::CorpusError;
use crate::fts::SearchHit;
use crate::hybrid::{
    ExpandOptions, ExpandedFile, ExpandedFiles, HybridHit, HybridResults, RRF_K, RetrievalMode,
    SearchOptions,
};
use crate::language::LanguageShare;
use crate::records::{Chunk, Document, StoreStats};
use crate::vector::{EmbedOptions, EmbedProgress, EmbedReport, RetrievalError, VectorStatus};

/// A store of documents and chunks that can be searched and cited.
///
/// All methods block (a database round trip, a file read or CPU work): from
/// async code call them in `tokio::task::spawn_blocking`.
pub trait CorpusStore: Send + Sync + std::fmt::Debug {
    /// Where the store is, for messages: a folder, or a PostgreSQL URL
    /// without its password.
    fn location(&self) -> String;

    /// The store as `Any`, so a caller that needs one back-end's own API
    /// (the local store's folder) can get it back with `Arc::downcast`.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;

    /// Totals of the store.
    fn stats(&self) -> Result<StoreStats, CorpusError>;

    /// The languages of the store's documents, the most common first
    /// (empty for a back-end that does not detect languages).
    fn languages(&self) -> Result<Vec<LanguageShare>, CorpusError> {
        Ok(Vec::new())
    }

    /// Where this store keeps model replies for reuse
    /// ([`ReplyCache`](crate::ReplyCache)); `None` for a store that keeps
    /// none (one built in memory). Opened on first use: an error says why
    /// the cache cannot be used (a read-only folder), and the caller goes on
    /// without it.
    fn reply_cache(&self) -> Result<Option<Arc<dyn crate::ReplyCache>>, CorpusError> {
        Ok(None)
    }

    /// All documents, ordered by path.
    fn documents(&self) -> Result<Vec<Document>, CorpusError>;

    /// The document with this id.
    fn document(&self, doc_id: &str) -> Result<Option<Document>, CorpusError>;

    /// The document with this corpus-relative path.
    fn document_by_path(&self, path: &str) -> Result<Option<Document>, CorpusError>;

    /// The whole extracted text of a document ([`CorpusError::UnknownId`]
    /// when there is none).
    fn document_text(&self, doc_id: &str) -> Result<String, CorpusError>;

    /// A document's chunks in order, with their text.
    fn chunks_of(&self, doc_id: &str) -> Result<Vec<Chunk>, CorpusError>;

    /// The chunk with this id, with its text.
    fn chunk(&self, chunk_id: &str) -> Result<Option<Chunk>, CorpusError>;

    /// The 1-based document line on which `quote` starts in chunk
    /// `chunk_id`: `None` for an empty quote, an unknown chunk or a quote
    /// the chunk does not hold verbatim. (A model's citation resolves to its
    /// chunk, not to the line its quote is on.)
    fn quote_line(&self, chunk_id: &str, quote: &str) -> Option<u32> {
        if quote.is_empty() {
            return None;
        }
        let chunk = self.chunk(chunk_id).ok()??;
        let at = chunk.text.find(quote)?;
        Some(chunk.line_start + chunk.text[..at].matches('\n').count() as u32)
    }

    /// The `k` best chunks for `query` by the back-end's full-text ranking
    /// (BM25 locally; `ts_rank` in PostgreSQL). An empty query is
    /// [`CorpusError::EmptyQuery`].
    fn search(&self, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError>;

    /// The embedding model recorded in the store and its dimension, if any.
    fn embedding_model(&self) -> Result<Option<(String, usize)>, RetrievalError>;

    /// How many chunks have a vector of their current text.
    fn vector_status(&self) -> Result<VectorStatus, RetrievalError>;

    /// The `k` chunks most similar to `query` (a normalized vector of the
    /// store's model), best first, with cosine similarity ≥ `min_similarity`.
    fn search_vector(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>, RetrievalError>;

    /// How many vectors a vector search scans now (those of the current
    /// text of every chunk), or `None` when the store has none.
    fn searchable_vectors(&self) -> Result<Option<u64>, RetrievalError>;

    /// Embeds every chunk without a vector of its current text (see
    /// [`Store::embed_chunks`](crate::Store::embed_chunks) for the rules).
    fn embed_chunks(
        &self,
        embedder: &dyn Embedder,
        opts: &EmbedOptions,
        progress: &mut dyn FnMut(EmbedProgress),
    ) -> Result<EmbedReport, RetrievalError>;

    /// The text of a document between two byte offsets.
    fn slice(&self, doc_id: &str, start: u64, end: u64) -> Result<String, CorpusError> {
        let text = self.document_text(doc_id)?;
        slice_text(doc_id, &text, start, end)
    }

    /// Up to `limit` bytes of a document's text from byte `offset`, both
    /// moved back to character boundaries; a page smaller than one character
    /// still holds that character, so paging always moves forward.
    fn text_page(&self, doc_id: &str, offset: u64, limit: u64) -> Result<TextPage, CorpusError> {
        let text = self.document_text(doc_id)?;
        let total = text.len();
        let at = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).min(total);
        let start = text.floor_char_boundary(at(offset));
        let mut end = text.floor_char_boundary(at(start as u64 + limit));
        if end == start && start < total {
            end = text.ceil_char_boundary(start + 1);
        }
        Ok(TextPage {
            start: start as u64,
            end: end as u64,
            total_bytes: total as u64,
            content: text[start..end].to_string(),
        })
    }

    /// Retrieves the best chunks for `query`. `embedder` embeds the query for
    /// vector and hybrid modes and must be the model the store was embedded
    /// with (see [`CorpusStore::embedding_model`]). BM25 mode ignores it.
    ///
    /// Hybrid fuses the two ranked lists (each [`SearchOptions::effective_candidates`]
    /// deep) by reciprocal rank fusion with k = 60, then drops chunks whose
    /// text repeats an earlier hit's.
    fn search_hybrid(
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
            return Err(CorpusError::EmptyQuery.into());
        }
        let k = opts.effective_k();
        let depth = opts.effective_candidates();
        let (vector_list, vectors) = if opts.mode == RetrievalMode::Bm25 {
            (Vec::new(), None)
        } else {
            let (list, status) = vector_candidates(self, query, opts, embedder, depth)?;
            (list, Some(status))
        };
        let bm25_list = if opts.mode == RetrievalMode::Vector {
            Vec::new()
        } else {
            self.search(query, depth)?
        };
        let ranked = fuse(bm25_list, vector_list, opts.mode);
        let (hits, duplicates_dropped) = distinct_hits(self, ranked, k)?;
        Ok(HybridResults {
            hits,
            mode: opts.mode,
            k,
            high_recall: opts.high_recall,
            duplicates_dropped,
            vectors,
        })
    }

    /// Expands retrieved chunks to their files with all chunks of each file in
    /// document order. Files come in the order of their best entry
    /// chunk. At most `opts.max_files` files and `opts.max_chunks` chunks are
    /// kept: a file that does not fit whole keeps the chunks nearest its entry
    /// chunks (marked `truncated`), and what was cut is counted in the result.
    /// Unknown chunk ids are an error.
    fn expand_files(
        &self,
        entry_chunk_ids: &[&str],
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
        for &id in entry_chunk_ids {
            let chunk = self
                .chunk(id)?
                .ok_or_else(|| CorpusError::UnknownId(id.to_string()))?;
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
                .ok_or_else(|| CorpusError::UnknownId(doc_id.clone()))?;
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

/// `text[start..end]` of document `doc_id`, or [`CorpusError::BadRange`].
/// A page of a document's text ([`CorpusStore::text_page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPage {
    /// Byte offset of the page in the text.
    pub start: u64,
    /// Byte offset just past the page.
    pub end: u64,
    /// Length of the whole text in bytes.
    pub total_bytes: u64,
    /// The page's text.
    pub content: String,
}

pub(crate) fn slice_text(
    doc_id: &str,
    text: &str,
    start: u64,
    end: u64,
) -> Result<String, CorpusError> {
    let bad = || CorpusError::BadRange {
        doc_id: doc_id.to_string(),
        start,
        end,
        len: text.len() as u64,
    };
    let (s, e) = (
        usize::try_from(start).map_err(|_| bad())?,
        usize::try_from(end).map_err(|_| bad())?,
    );
    text.get(s..e).map(str::to_string).ok_or_else(bad)
}

/// The `depth` chunks nearest to `query` by vector, after checking that the
/// store has vectors of `embedder`'s model, with the vector coverage of the
/// store (for [`HybridResults::vectors`]).
fn vector_candidates<S: CorpusStore + ?Sized>(
    store: &S,
    query: &str,
    opts: &SearchOptions,
    embedder: Option<&dyn Embedder>,
    depth: usize,
) -> Result<(Vec<(String, f32)>, VectorStatus), RetrievalError> {
    let Some((model, dim)) = store.embedding_model()? else {
        return Err(RetrievalError::NoEmbeddings {
            store: store.location(),
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
            store: store.location(),
            stored: model,
            stored_dim: dim,
            requested: embedder.model_id().to_string(),
            requested_dim: embedder.dimension(),
        });
    }
    let Some(embedded) = store.searchable_vectors()? else {
        return Err(RetrievalError::NoEmbeddings {
            store: store.location(),
        });
    };
    let status = VectorStatus {
        model: Some(model.clone()),
        dimension: Some(dim),
        embedded,
        chunks: store.stats()?.chunks,
    };
    // The query form: models such as e5 embed queries and passages apart.
    let q = embedder.embed_queries(&[query])?;
    let q = q
        .into_iter()
        .next()
        .ok_or_else(|| RetrievalError::EmbedderContract {
            model: model.clone(),
            detail: "no vector for the query".to_string(),
        })?;
    let list = store.search_vector(&q, depth, opts.effective_min_similarity())?;
    Ok((list, status))
}

/// Every chunk of the two ranked lists with its score, best first: the RRF
/// score over the lists it appears in (hybrid), or the one list's score.
/// Vector-only hits have no document, path or text yet.
fn fuse(
    bm25_list: Vec<SearchHit>,
    vector_list: Vec<(String, f32)>,
    mode: RetrievalMode,
) -> Vec<HybridHit> {
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
                score: match mode {
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
        entry.score = match mode {
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
    ranked
}

/// The first `k` of `ranked` whose text does not repeat an earlier one's
/// (whitespace aside), vector-only hits filled in from the store, and how
/// many were dropped as repeats.
fn distinct_hits<S: CorpusStore + ?Sized>(
    store: &S,
    ranked: Vec<HybridHit>,
    k: usize,
) -> Result<(Vec<HybridHit>, usize), RetrievalError> {
    let mut seen_text: HashSet<blake3::Hash> = HashSet::new();
    let mut duplicates_dropped = 0;
    let mut hits = Vec::with_capacity(k.min(ranked.len()));
    let mut paths: HashMap<String, String> = HashMap::new();
    for mut h in ranked {
        if hits.len() == k {
            break;
        }
        if h.path.is_empty() {
            let Some(chunk) = store.chunk(&h.chunk_id)? else {
                continue; // Deleted since the vectors were loaded.
            };
            if !paths.contains_key(&chunk.doc_id) {
                let path = store
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
    Ok((hits, duplicates_dropped))
}

/// The first ~160 characters on one line.
fn excerpt(text: &str) -> String {
    let head: String = text.chars().take(160).collect();
    head.split_whitespace().collect::<Vec<_>>().join(" ")
}
