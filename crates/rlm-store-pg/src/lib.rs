//! `rlm-store-pg`: the PostgreSQL store of `rlm`, for stores shared by
//! several machines or `rlm serve` nodes. It implements
//! [`rlm_corpus::CorpusStore`] exactly as the local folder store does
//! (documents, chunks with byte and line spans, full-text search, vectors,
//! lookups for citations), so the engine never knows which store it has.
//!
//! ```no_run
//! use rlm_corpus::{CorpusStore, IndexOptions};
//! use rlm_store_pg::PgStore;
//! use std::path::PathBuf;
//!
//! let url = "postgres://rlm@127.0.0.1:5432/rlm";
//! let report = PgStore::index(url, &[PathBuf::from("contracts")], &IndexOptions::default(), &mut |_| {})?;
//! println!("{} added, {} unchanged", report.added, report.unchanged);
//! let store = PgStore::open(url)?;
//! for hit in store.search("termination notice period", 10)? {
//!     println!("{} {} {:.3} {}", hit.chunk_id, hit.path, hit.score, hit.snippet);
//! }
//! # Ok::<(), rlm_corpus::CorpusError>(())
//! ```
//!
//! - `schema.rs`: the tables as versioned migrations, applied by `rlm`.
//! - `write.rs`: an indexing run as one transaction, rows bulk-loaded by `COPY`.
//! - `read.rs`: lookups and full-text search.
//! - `languages.rs`: each document's language and the text search
//!   configuration its chunks are analyzed with.
//! - `compounds.rs`: compound words in queries of compounding languages.
//! - `bm25.rs`: BM25 ranking in PostgreSQL over term statistics kept at
//!   index time, scoring a bounded set of candidates.
//! - `replies.rs`: the reply cache (model replies kept for reuse).
//! - `vectors.rs`: embeddings (stored as bytes, searched exactly in process).
//! - `db.rs`: the connection, with a blocking API safe from any thread.

#![warn(missing_docs)]

mod bm25;
mod compounds;
mod languages;
// Public for rlm-cluster (the server state of several `rlm serve` nodes),
// which shares this connection type; not part of the store's API.
#[doc(hidden)]
pub mod db;
mod read;
mod replies;
mod schema;
#[doc(hidden)]
pub mod testing;
mod vectors;
mod write;

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use rlm_corpus::{
    Chunk, CorpusError, CorpusStore, Document, EmbedOptions, EmbedProgress, EmbedReport, Embedder,
    IndexOptions, IndexProgress, IndexReport, RetrievalError, SearchHit, StoreStats, VectorStatus,
};

pub use bm25::{Budget, Ranked};
pub use db::is_postgres_url;
pub use schema::SCHEMA_VERSION;

/// An open PostgreSQL store: one connection (queries from several threads
/// are pipelined on it).
pub struct PgStore {
    db: Arc<db::Reconnecting>,
    vectors: vectors::VectorCache,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.db.location())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Opens the store in the database at `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`),
    /// applying schema migrations this build has and the store lacks. A
    /// database without an rlm store, or with a newer schema, is an error.
    pub fn open(url: &str) -> Result<PgStore, CorpusError> {
        let application_name = format!("rlm (pid {})", std::process::id());
        let db = db::Db::connect(url, &application_name)?;
        schema::migrate(&db, false)?;
        Ok(PgStore {
            // A lookup after PostgreSQL restarted connects again (the one
            // that met the ended connection failed).
            db: Arc::new(db::Reconnecting::new(url, application_name, db)),
            vectors: Default::default(),
        })
    }

    /// Indexes `paths` into the store at `url`, creating its tables when
    /// absent: incremental (unchanged files are not re-read), one
    /// transaction (a killed run changes nothing), one writer at a time.
    pub fn index(
        url: &str,
        paths: &[PathBuf],
        opts: &IndexOptions,
        progress: &mut dyn FnMut(IndexProgress),
    ) -> Result<IndexReport, CorpusError> {
        write::index(url, paths, opts, progress)
    }

    /// The generation of the last committed indexing run (0 before the first).
    pub fn generation(&self) -> Result<u64, CorpusError> {
        let row = self.db.query_opt(
            "SELECT value::bigint FROM rlm_meta WHERE key = 'generation'",
            vec![],
        )?;
        Ok(row.map(|r| r.get::<_, i64>(0)).unwrap_or(0) as u64)
    }

    /// The `k` best chunk ids for `query` by BM25 within `budget` (how
    /// many chunks may be scored), and whether they are exactly BM25's top
    /// `k`. [`CorpusStore::search`] is this with [`Budget::default`], plus
    /// each chunk's row and snippet.
    pub fn rank(&self, query: &str, k: usize, budget: Budget) -> Result<Ranked, CorpusError> {
        if query.trim().is_empty() {
            return Err(CorpusError::EmptyQuery);
        }
        bm25::rank(&*self.db.get()?, &query.replace('\0', " "), k, budget)
    }
}

impl CorpusStore for PgStore {
    fn location(&self) -> String {
        self.db.location().to_string()
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }

    fn stats(&self) -> Result<StoreStats, CorpusError> {
        read::stats(&*self.db.get()?)
    }

    fn languages(&self) -> Result<Vec<rlm_corpus::language::LanguageShare>, CorpusError> {
        languages::languages(&*self.db.get()?)
    }

    fn reply_cache(&self) -> Result<Option<Arc<dyn rlm_corpus::ReplyCache>>, CorpusError> {
        Ok(Some(Arc::new(replies::PgReplyCache {
            db: self.db.clone(),
        })))
    }

    fn documents(&self) -> Result<Vec<Document>, CorpusError> {
        read::documents(&*self.db.get()?)
    }

    fn document(&self, doc_id: &str) -> Result<Option<Document>, CorpusError> {
        read::document(&*self.db.get()?, doc_id)
    }

    fn document_by_path(&self, path: &str) -> Result<Option<Document>, CorpusError> {
        read::document_by_path(&*self.db.get()?, path)
    }

    fn document_text(&self, doc_id: &str) -> Result<String, CorpusError> {
        read::document_text(&*self.db.get()?, doc_id)
    }

    fn chunks_of(&self, doc_id: &str) -> Result<Vec<Chunk>, CorpusError> {
        read::chunks_of(&*self.db.get()?, doc_id)
    }

    fn chunk(&self, chunk_id: &str) -> Result<Option<Chunk>, CorpusError> {
        read::chunk(&*self.db.get()?, chunk_id)
    }

    fn search(&self, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError> {
        read::search(&*self.db.get()?, query, k)
    }

    fn embedding_model(&self) -> Result<Option<(String, usize)>, RetrievalError> {
        vectors::embedding_model(&*self.db.get()?)
    }

    fn vector_status(&self) -> Result<VectorStatus, RetrievalError> {
        vectors::vector_status(&*self.db.get()?)
    }

    fn search_vector(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>, RetrievalError> {
        vectors::search_vector(&*self.db.get()?, &self.vectors, query, k, min_similarity)
    }

    fn searchable_vectors(&self) -> Result<Option<u64>, RetrievalError> {
        vectors::searchable(&*self.db.get()?, &self.vectors)
    }

    fn embed_chunks(
        &self,
        embedder: &dyn Embedder,
        opts: &EmbedOptions,
        progress: &mut dyn FnMut(EmbedProgress),
    ) -> Result<EmbedReport, RetrievalError> {
        vectors::embed_chunks(&*self.db.get()?, embedder, opts, progress)
    }
}
