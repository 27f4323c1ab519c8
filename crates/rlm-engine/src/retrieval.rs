//! Retrieval shared by the `rag` and `pipeline` flows: stage-1 retrieval
//! (BM25, or hybrid BM25 + vectors when the store has embeddings), the
//! expansion of entry chunks to whole files in document order with the
//! `RLM_MAX_FILES` / `RLM_MAX_CHUNKS` caps reported when they cut, and the
//! excerpts shown when no model can write the answer.

use serde_json::json;

use rlm_corpus::{CorpusError, Embedder, RetrievalError, RetrievalMode, SearchOptions};

use crate::answer::{ExpansionReport, Intent, RetrievalReport};
use crate::config::FlowsConfig;
use crate::run::{ROOT_AGENT, Run};
use crate::text::head;

/// Why retrieval gave the `rag` and `pipeline` flows nothing to work on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RetrieveError {
    /// The full-text search failed.
    #[error("retrieval failed: {0}")]
    Search(CorpusError),
    /// Expanding the entry chunks to their files failed.
    #[error("file expansion failed: {0}")]
    Expand(RetrievalError),
}

/// One chunk of an expanded file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FileChunk {
    /// Stable chunk id.
    pub(crate) id: String,
    /// Position in the document.
    pub(crate) ordinal: u32,
    /// The text.
    pub(crate) text: String,
    /// True when stage-1 retrieval returned this chunk.
    pub(crate) entry: bool,
}

/// One expanded file.
#[derive(Debug, Clone)]
pub(crate) struct FileWork {
    pub(crate) doc_id: String,
    pub(crate) path: String,
    /// Position in retrieval order.
    pub(crate) rank: usize,
    pub(crate) entry_chunk_ids: Vec<String>,
    /// Chunks in document order.
    pub(crate) chunks: Vec<FileChunk>,
}

/// One retrieved chunk.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) chunk_id: String,
    pub(crate) ordinal: u32,
    pub(crate) path: String,
    pub(crate) text: String,
}

/// Hybrid retrieval (BM25 + vectors fused by RRF, `Store::search_hybrid`)
/// when an embedder is given and the store has embeddings, else BM25. A
/// hybrid failure (model mismatch, embedder down) falls back to BM25 with a
/// `fallback` event. The "High recall mode on" log line is a `retrieval` step.
pub(crate) fn stage1(
    fx: &Run,
    query: &str,
    k: usize,
    high_recall: bool,
    embedder: Option<&dyn Embedder>,
) -> Result<(Vec<Hit>, RetrievalReport), RetrieveError> {
    let store = fx.corpus().store();
    let embedded = store.embedding_model().ok().flatten().is_some();
    if let (Some(e), true) = (embedder, embedded) {
        let opts = SearchOptions {
            mode: RetrievalMode::Hybrid,
            k,
            high_recall,
            ..SearchOptions::default()
        };
        match store.search_hybrid(query, &opts, Some(e)) {
            Ok(r) => {
                for line in r.log_lines() {
                    fx.step(ROOT_AGENT, "retrieval", line, json!({"k": r.k}));
                }
                let report = RetrievalReport {
                    mode: "hybrid".into(),
                    k: r.k,
                    high_recall,
                    query: query.to_string(),
                    hits: r.hits.len(),
                    error: None,
                };
                let hits = r
                    .hits
                    .into_iter()
                    .map(|h| Hit {
                        chunk_id: h.chunk_id,
                        ordinal: h.ordinal,
                        path: h.path,
                        text: h.text,
                    })
                    .collect();
                return Ok((hits, report));
            }
            Err(err) => fx.fallback(
                ROOT_AGENT,
                "retrieval",
                &format!("hybrid retrieval failed ({err}); BM25 only"),
            ),
        }
    }
    let hits = store.search(query, k).map_err(RetrieveError::Search)?;
    if high_recall {
        fx.step(
            ROOT_AGENT,
            "retrieval",
            format!("High recall mode on (k = {k})"),
            json!({"k": k}),
        );
    }
    let report = RetrievalReport {
        mode: "bm25".into(),
        k,
        high_recall,
        query: query.to_string(),
        hits: hits.len(),
        error: None,
    };
    let hits = hits
        .into_iter()
        .map(|h| Hit {
            chunk_id: h.chunk_id,
            ordinal: h.ordinal,
            path: h.path,
            text: h.text,
        })
        .collect();
    Ok((hits, report))
}

/// The stage-1 query: the question plus the intent's entity and attribute
/// words it does not already hold (BM25 ORs terms, so they only add recall).
pub(crate) fn stage1_query(question: &str, intent: &Intent) -> String {
    let mut q = question.trim().to_string();
    let lower = q.to_lowercase();
    for w in format!("{} {}", intent.entity, intent.attribute).split_whitespace() {
        let wl = w.to_lowercase();
        if wl.chars().count() >= 3 && !lower.contains(&wl) && !q.to_lowercase().contains(&wl) {
            q.push(' ');
            q.push_str(w);
        }
    }
    q
}

/// Retrieves entry chunks (high recall unless `RLM_LOW_RECALL_MODE`) and
/// expands them to whole files within the caps (`Store::expand_files`).
pub(crate) fn retrieve_and_expand(
    fx: &Run,
    question: &str,
    intent: &Intent,
    cfg: &FlowsConfig,
    embedder: Option<&dyn Embedder>,
) -> Result<(Vec<FileWork>, RetrievalReport, ExpansionReport), RetrieveError> {
    let high_recall = !cfg.low_recall_mode;
    let k = if high_recall {
        cfg.high_recall_k
    } else {
        cfg.rag_k
    };
    let query = stage1_query(question, intent);
    let store = fx.corpus().store().clone();
    let (hits, retrieval) = stage1(fx, &query, k, high_recall, embedder)?;
    fx.step(
        ROOT_AGENT,
        "retrieval",
        format!(
            "Stage-1 retrieval ({}, k = {k}): {} entry chunks",
            retrieval.mode,
            hits.len()
        ),
        json!(retrieval),
    );
    // rlm-corpus's `expand_files`: files in order of their best entry chunk,
    // all chunks in document order, a file that does not fit whole keeps the
    // chunks nearest its entry chunks.
    let caps = rlm_corpus::ExpandOptions {
        max_files: cfg.max_files,
        max_chunks: cfg.max_chunks,
    };
    let entry_ids: Vec<&str> = hits.iter().map(|h| h.chunk_id.as_str()).collect();
    let expanded = store
        .expand_files(&entry_ids, &caps)
        .map_err(RetrieveError::Expand)?;
    let mut exp = ExpansionReport {
        files: 0,
        total_chunks: expanded.total_chunks,
        files_dropped: expanded.files_dropped,
        chunks_dropped: expanded.chunks_dropped,
        max_files: cfg.max_files,
        max_chunks: cfg.max_chunks,
    };
    let files: Vec<FileWork> = expanded
        .files
        .into_iter()
        .enumerate()
        .map(|(rank, f)| FileWork {
            chunks: f
                .chunks
                .into_iter()
                .map(|c| FileChunk {
                    entry: f.entry_chunk_ids.contains(&c.id),
                    id: c.id,
                    ordinal: c.ordinal,
                    text: c.text,
                })
                .collect(),
            doc_id: f.document.id,
            path: f.document.path,
            rank,
            entry_chunk_ids: f.entry_chunk_ids,
        })
        .collect();
    exp.files = files.len();
    fx.step(
        ROOT_AGENT,
        "expansion",
        format!(
            "Files expanded: {}, total chunks: {}",
            exp.files, exp.total_chunks
        ),
        json!(exp),
    );
    if exp.files_dropped > 0 || exp.chunks_dropped > 0 {
        fx.step(
            ROOT_AGENT,
            "caps",
            format!(
                "caps cut {} file(s) and {} chunk(s) (RLM_MAX_FILES={}, RLM_MAX_CHUNKS={})",
                exp.files_dropped, exp.chunks_dropped, cfg.max_files, cfg.max_chunks
            ),
            json!(exp),
        );
    }
    Ok((files, retrieval, exp))
}

/// Without a model: the start of each passage with its citation marker.
pub(crate) fn excerpts(chunks: &[FileChunk]) -> String {
    chunks
        .iter()
        .map(|c| {
            let one: String = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("- {}… [[chunk:{}]]", head(&one, 200), c.id)
        })
        .collect::<Vec<_>>()
        .join("\n")
}
