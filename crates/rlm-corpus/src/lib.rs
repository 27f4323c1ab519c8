//! `rlm-corpus`: files → documents → ordered chunks, the on-disk store, and
//! BM25 retrieval.
//!
//! ```no_run
//! use rlm_corpus::{IndexOptions, Store};
//! use std::path::{Path, PathBuf};
//!
//! let report = Store::index(
//!     Path::new(".rlm"),
//!     &[PathBuf::from("contracts")],
//!     &IndexOptions::default(),
//!     &mut |_progress| {},
//! )?;
//! println!("{} added, {} unchanged", report.added, report.unchanged);
//! let store = Store::open(Path::new(".rlm"))?;
//! for hit in store.search("termination notice period", 10)? {
//!     println!("{} {} {:.2} {}", hit.chunk_id, hit.path, hit.score, hit.snippet);
//! }
//! # Ok::<(), rlm_corpus::CorpusError>(())
//! ```
//!
//! A store is a folder holding `store.sqlite` (documents with their extracted
//! text, chunk spans, format version) and `fulltext/` (a tantivy index of chunk
//! text). See [`Store`] for how the two stay consistent. [`Store::in_memory`]
//! builds the same store from texts, in memory (nothing on disk).

#![warn(missing_docs)]

mod backend;
pub mod chunk;
pub mod compound;
pub mod embed;
mod error;
pub mod eval;
pub mod extract;
mod extracted;
mod fts;
pub mod html;
mod hybrid;
mod index_options;
pub mod ingest;
pub mod language;
pub mod ocr;
mod office;
pub mod pdf;
mod records;
pub mod reply_cache;
mod snippet;
mod store;
mod vector;
mod walk;

pub use backend::{CorpusStore, TextPage};
pub use chunk::{ChunkSpan, DEFAULT_CHUNK_CHARS, chunk_text};
pub use embed::{EmbedError, Embedder, EmbeddingSettings, EmbeddingsChoice};
pub use error::CorpusError;
pub use extract::{DocKind, SkipReason};
pub use hybrid::{
    DEFAULT_K, DEFAULT_MAX_CHUNKS, DEFAULT_MAX_FILES, DEFAULT_MIN_SIMILARITY, ExpandOptions,
    ExpandedFile, ExpandedFiles, HIGH_RECALL_K, HIGH_RECALL_MIN_SIMILARITY, HybridHit,
    HybridResults, RRF_K, RetrievalMode, SearchOptions,
};
pub use reply_cache::{CachedReply, FolderReplyCache, ReplyCache, ReplyCacheStats};
pub use store::{
    Chunk, Document, FORMAT_VERSION, IndexOptions, IndexProgress, IndexReport, MemoryDocument,
    SearchHit, Store, StoreStats, chunk_id, document_id,
};
pub use vector::{
    EmbedOptions, EmbedProgress, EmbedReport, RetrievalError, VectorStatus, embed_checked,
    exact_top_k, push_vector_bytes, vector_to_bytes,
};
