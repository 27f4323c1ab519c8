//! The corpus as the REPL sees it: a snapshot of the store's documents with
//! their texts, the `context` value in either shape, and the store lookups
//! citation verification and `search()` need.

use std::collections::HashMap;
use std::sync::Arc;

use rlm_corpus::{CorpusError, CorpusStore, Store};
use rlm_sandbox::{InputValue, Piece, SourceDocument, TextSource};
use serde::{Deserialize, Serialize};

use crate::citations::{CitationSource, SourceChunk};
use crate::values::ConfigError;

/// How `context` is shaped in the REPL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextShape {
    /// One string, each document preceded by `[DOCUMENT i: path]` (the paper's shape).
    #[default]
    String,
    /// A list of per-document strings (`context[i]` is document i).
    List,
}

impl std::str::FromStr for ContextShape {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "string" | "str" => Ok(ContextShape::String),
            "list" => Ok(ContextShape::List),
            other => Err(format!("unknown context shape {other:?}; use string or list").into()),
        }
    }
}

/// Why [`Corpus::document_text`] has no text for a document.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// No document has this index.
    #[error("there is no document {0}")]
    NoSuchDocument(usize),
    /// The store could not give the document's text.
    #[error("cannot read the text of {path}: {source}")]
    Unreadable {
        /// The document's corpus-relative path.
        path: String,
        /// The store's error.
        source: CorpusError,
    },
}

/// One document of the snapshot.
#[derive(Debug, Clone)]
pub struct CorpusDocument {
    /// Position (the `i` of `[DOCUMENT i: ...]`, `documents[i]`, `context[i]`).
    pub index: usize,
    /// Stable document id.
    pub id: String,
    /// Corpus-relative path.
    pub path: String,
    /// Characters of text.
    pub chars: u64,
    /// Chunks in the store.
    pub chunk_count: u32,
}

/// The documents of a store, listed once per question. Texts stay in the
/// store and are read one at a time when a sandbox interpreter starts (see
/// [`Corpus::texts`]), so a 100 MB corpus is never held by the engine.
#[derive(Debug)]
pub struct Corpus {
    store: Arc<dyn CorpusStore>,
    docs: Vec<CorpusDocument>,
    index_of: HashMap<String, usize>,
}

/// The header line written before each document in the string shape.
pub fn document_header(index: usize, path: &str) -> String {
    format!("[DOCUMENT {index}: {path}]")
}

impl Corpus {
    /// Lists the store's documents (their texts are read on demand). The
    /// store is any back-end: the local folder or PostgreSQL.
    pub fn load(store: Arc<dyn CorpusStore>) -> Result<Self, CorpusError> {
        let mut docs = Vec::new();
        for (index, d) in store.documents()?.into_iter().enumerate() {
            docs.push(CorpusDocument {
                index,
                chars: d.chars,
                chunk_count: d.chunk_count,
                id: d.id,
                path: d.path,
            });
        }
        let index_of = docs.iter().map(|d| (d.id.clone(), d.index)).collect();
        Ok(Corpus {
            store,
            docs,
            index_of,
        })
    }

    /// A corpus over documents given in memory (no store folder): they are
    /// chunked at `chunk_chars` and indexed as `rlm index` would
    /// ([`Store::in_memory`]), so search, grounding and citations (chunk ids
    /// resolving to byte spans of these texts) work as over a store on disk.
    pub fn in_memory(
        docs: &[rlm_corpus::MemoryDocument],
        chunk_chars: usize,
    ) -> Result<Self, CorpusError> {
        Corpus::load(Arc::new(Store::in_memory(docs, chunk_chars)?))
    }

    /// Sets the 1-based line of each source that has none: a model's own
    /// citation resolves to its chunk, not to the line its quote is on.
    pub fn fill_source_lines(&self, sources: &mut [crate::citations::Source]) {
        for s in sources.iter_mut().filter(|s| s.line.is_none()) {
            if let Some(id) = &s.chunk_id {
                s.line = self.store.quote_line(id, &s.quote);
            }
        }
    }

    /// The store behind the snapshot.
    pub fn store(&self) -> &Arc<dyn CorpusStore> {
        &self.store
    }

    /// The store when it is a local folder store (`None` for PostgreSQL):
    /// for callers that need the folder itself (indexing into it).
    pub fn local_store(&self) -> Option<Arc<Store>> {
        Arc::clone(&self.store).into_any().downcast::<Store>().ok()
    }

    /// The documents in order.
    pub fn documents(&self) -> &[CorpusDocument] {
        &self.docs
    }

    /// Total characters of all documents.
    pub fn total_chars(&self) -> u64 {
        self.docs.iter().map(|d| d.chars).sum()
    }

    /// Index of a document id.
    pub fn index_of(&self, doc_id: &str) -> Option<usize> {
        self.index_of.get(doc_id).copied()
    }

    /// The text of document `index`, read from the store.
    pub fn document_text(&self, index: usize) -> Result<String, DocumentError> {
        let d = self
            .docs
            .get(index)
            .ok_or(DocumentError::NoSuchDocument(index))?;
        self.store
            .document_text(&d.id)
            .map_err(|source| DocumentError::Unreadable {
                path: d.path.clone(),
                source,
            })
    }

    /// The document whose whole text is `text`, if one is (the same number
    /// of characters first, so only a likely one is read).
    pub fn document_with_text(&self, text: &str) -> Option<usize> {
        let chars = text.chars().count() as u64;
        self.docs
            .iter()
            .filter(|d| d.chars == chars)
            .find(|d| self.document_text(d.index).is_ok_and(|t| t == text))
            .map(|d| d.index)
    }

    /// Where each chunk of document `index` starts (byte offset, chunk id),
    /// in order.
    pub fn chunk_starts(&self, index: usize) -> Result<Vec<(u64, String)>, DocumentError> {
        let d = self
            .docs
            .get(index)
            .ok_or(DocumentError::NoSuchDocument(index))?;
        let chunks = self
            .store
            .chunks_of(&d.id)
            .map_err(|source| DocumentError::Unreadable {
                path: d.path.clone(),
                source,
            })?;
        Ok(chunks.into_iter().map(|c| (c.byte_start, c.id)).collect())
    }

    /// The document texts as a sandbox [`TextSource`] (text `i` = document `i`),
    /// read from the store while an interpreter starts.
    pub fn texts(self: &Arc<Self>) -> Arc<dyn TextSource> {
        Arc::new(CorpusTexts(Arc::clone(self)))
    }

    /// `context` in the given shape, built by the sandbox worker from
    /// [`Corpus::texts`]: in the string shape each document is
    /// `[DOCUMENT i: path]`, a newline, its text and a blank line.
    pub fn context_value(&self, shape: ContextShape) -> InputValue {
        match shape {
            ContextShape::String => {
                let mut pieces = Vec::with_capacity(self.docs.len() * 3);
                for d in &self.docs {
                    pieces.push(Piece::Literal(format!(
                        "{}\n",
                        document_header(d.index, &d.path)
                    )));
                    pieces.push(Piece::Text(d.index));
                    pieces.push(Piece::Literal("\n\n".into()));
                }
                InputValue::Assembled(pieces)
            }
            ContextShape::List => InputValue::SourceTexts,
        }
    }

    /// Characters of `context` in the given shape (as the first message
    /// reports them), counted from the same pieces the worker joins.
    pub fn context_chars(&self, shape: ContextShape) -> u64 {
        match self.context_value(shape) {
            InputValue::Assembled(pieces) => pieces
                .iter()
                .map(|p| match p {
                    Piece::Literal(text) => text.chars().count() as u64,
                    Piece::Text(i) => self.docs[*i].chars,
                })
                .sum(),
            _ => self.total_chars(),
        }
    }

    /// `documents` for the REPL (texts from [`Corpus::texts`]).
    pub fn document_records(&self) -> InputValue {
        InputValue::SourceDocuments(
            self.docs
                .iter()
                .map(|d| SourceDocument {
                    index: d.index as u64,
                    name: d.path.clone(),
                    id: d.id.clone(),
                    chars: d.chars,
                    chunk_count: u64::from(d.chunk_count),
                    text: d.index,
                })
                .collect(),
        )
    }

    /// `search(query, k)` for the REPL: hits as JSON records.
    pub fn search_json(&self, query: &str, k: usize) -> Result<serde_json::Value, CorpusError> {
        let hits = self.store.search(query, k)?;
        Ok(serde_json::Value::Array(
            hits.into_iter()
                .map(|h| {
                    serde_json::json!({
                        "chunk_id": h.chunk_id,
                        "doc_index": self.index_of(&h.doc_id),
                        "path": h.path,
                        "score": h.score,
                        // The window around the best-matching terms, unmarked
                        // (quotes copied from it must be verbatim).
                        "snippet": h.snippet.replace("**", ""),
                        "text": h.text,
                    })
                })
                .collect(),
        ))
    }

    /// The top `k` full-text hits for `query`, each as one line: its
    /// document, the character offsets of the window around the match in
    /// the document, and the window's text (for hints to the model).
    pub fn match_windows(&self, query: &str, k: usize) -> Vec<String> {
        let Ok(hits) = self.store.search(query, k) else {
            return Vec::new();
        };
        hits.into_iter()
            .filter_map(|h| {
                let index = self.index_of(&h.doc_id)?;
                let chunk = self.store.chunk(&h.chunk_id).ok().flatten()?;
                let window = h.snippet.replace("**", "");
                let text = self.document_text(index).ok()?;
                let chunk_start = text
                    .get(..chunk.byte_start as usize)
                    .map_or(0, |t| t.chars().count());
                let within = chunk
                    .text
                    .find(window.trim())
                    .map_or(0, |b| chunk.text[..b].chars().count());
                let start = chunk_start + within;
                Some(format!(
                    "- {} characters {start}-{}: \"{}\"",
                    document_header(index, &h.path),
                    start + window.trim().chars().count(),
                    window.trim()
                ))
            })
            .collect()
    }

    fn source_chunk(&self, c: rlm_corpus::Chunk) -> Option<SourceChunk> {
        let doc_index = self.index_of(&c.doc_id)?;
        let location = c.place();
        Some(SourceChunk {
            id: c.id,
            path: self.docs[doc_index].path.clone(),
            doc_id: c.doc_id,
            doc_index,
            byte_start: c.byte_start,
            byte_end: c.byte_end,
            location,
            text: c.text,
        })
    }
}

/// [`Corpus`] texts handed to the sandbox one document at a time.
#[derive(Debug)]
struct CorpusTexts(Arc<Corpus>);

impl TextSource for CorpusTexts {
    fn count(&self) -> usize {
        self.0.docs.len()
    }

    fn text(&self, index: usize) -> Result<String, rlm_sandbox::TextSourceError> {
        Ok(self.0.document_text(index)?)
    }
}

impl CitationSource for Corpus {
    fn chunk(&self, id: &str) -> Option<SourceChunk> {
        self.store
            .chunk(id)
            .ok()
            .flatten()
            .and_then(|c| self.source_chunk(c))
    }

    fn document_count(&self) -> usize {
        self.docs.len()
    }

    fn document_path(&self, index: usize) -> Option<String> {
        self.docs.get(index).map(|d| d.path.clone())
    }

    fn document_chunks(&self, index: usize) -> Vec<SourceChunk> {
        let Some(d) = self.docs.get(index) else {
            return Vec::new();
        };
        self.store
            .chunks_of(&d.id)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| self.source_chunk(c))
            .collect()
    }
}
