//! The on-disk store: documents and chunks in SQLite, chunk text in tantivy.
//!
//! Writing is kept apart from reading, as in tantivy: `writer.rs` walks the
//! paths, extracts and chunks the files and commits them under the store's
//! write lock ([`Store::index`]); `reader.rs` answers lookups and searches on
//! an open store; `vectors.rs` embeds chunks and loads their vectors for
//! search (built on `vector.rs`). This module holds what all share: the
//! [`Store`] handle, opening a store, the schema and its format-version check,
//! and the row types.
//!
//! Atomicity: one indexing run is one SQLite transaction plus one tantivy
//! commit. Both record a *generation* number; SQLite commits first. If the
//! process dies between the two commits, the generations disagree on the next
//! open and the full-text index is rebuilt from SQLite, which holds every
//! document's text. If it dies before the SQLite commit, neither changed.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::CorpusError;
use crate::fts::FullText;
use rusqlite::{Connection, OptionalExtension};

mod corpus_store;
mod memory;
mod reader;
mod vectors;
mod writer;

pub use crate::fts::SearchHit;
pub use crate::index_options::{IndexOptions, IndexProgress, IndexReport};
pub use crate::records::{Chunk, Document, StoreStats, chunk_id, document_id};
pub use memory::MemoryDocument;
pub(crate) use writer::WriteLock;

/// The store format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const DB_FILE: &str = "store.sqlite";
const FTS_DIR: &str = "fulltext";

/// An open store.
pub struct Store {
    dir: PathBuf,
    db: Mutex<Connection>,
    fts: FullText,
    /// Chunk vectors loaded for vector search (see `vectors.rs`).
    pub(crate) vectors: crate::vector::VectorCache,
    /// Built by [`Store::in_memory`]: no folder, nothing on disk.
    in_memory: bool,
    /// `replies.sqlite`, opened on first use ([`Store::reply_cache`]).
    replies: Mutex<Option<std::sync::Arc<crate::FolderReplyCache>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

fn open_db(dir: &Path) -> Result<Connection, CorpusError> {
    let conn = Connection::open(dir.join(DB_FILE))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    kind TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    chars INTEGER NOT NULL,
    hash TEXT NOT NULL,
    title TEXT NOT NULL,
    chunk_count INTEGER NOT NULL,
    lossy INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    byte_start INTEGER NOT NULL,
    byte_end INTEGER NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    page INTEGER,
    heading TEXT,
    location TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_by_doc ON chunks(doc_id, ordinal);
";

fn read_meta(conn: &Connection, key: &str) -> Result<Option<String>, CorpusError> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?)
}

/// Adds what a store written by an older build of this format lacks, in
/// place (nothing stored changes): the chunks' `location` column. Old
/// chunks keep no location; their page, if any, still names their place.
fn upgrade_schema(conn: &Connection) -> Result<(), CorpusError> {
    let has_location: bool = conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('chunks') WHERE name = 'location'",
        [],
        |r| r.get(0),
    )?;
    if !has_location {
        conn.execute_batch("ALTER TABLE chunks ADD COLUMN location TEXT")?;
    }
    Ok(())
}

fn check_version(dir: &Path, conn: &Connection) -> Result<u64, CorpusError> {
    let has_meta: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
        [],
        |r| r.get(0),
    )?;
    let version = if has_meta {
        read_meta(conn, "format_version")?
    } else {
        None
    };
    let Some(version) = version else {
        return Err(CorpusError::NotAStore(dir.to_path_buf()));
    };
    let found: u32 = version.parse().unwrap_or(0);
    if found != FORMAT_VERSION {
        let hint = if found > FORMAT_VERSION {
            "it was written by a newer rlm; upgrade rlm to read it"
        } else {
            "it was written by an older rlm; re-create it with `rlm index <paths> --store <new folder>`"
        };
        return Err(CorpusError::FormatVersion {
            path: dir.to_path_buf(),
            found,
            expected: FORMAT_VERSION,
            hint,
        });
    }
    Ok(read_meta(conn, "generation")?
        .and_then(|g| g.parse().ok())
        .unwrap_or(0))
}

/// A full-text index in the current form for the store at `dir`, whose
/// index was written in an older one: recreated empty under the write lock
/// as a writer recreates an index it cannot open, then refilled by
/// [`Store::open`]'s repair (its generation, none, disagrees with
/// SQLite's). Fails, saying what to do, while another process holds the
/// lock.
fn upgrade_fulltext(dir: &Path) -> Result<FullText, CorpusError> {
    let _lock =
        WriteLock::acquire(dir).map_err(|_| CorpusError::FulltextOutdated(dir.join(FTS_DIR)))?;
    // Another process may have upgraded it while this one waited: then it
    // opens as it is.
    writer::open_fulltext_for_writing(dir, false, &mut None).map(|(fts, _)| fts)
}

impl Store {
    /// Opens an existing store for reading and searching.
    pub fn open(dir: &Path) -> Result<Store, CorpusError> {
        if !dir.join(DB_FILE).is_file() {
            return Err(CorpusError::NotAStore(dir.to_path_buf()));
        }
        let conn = open_db(dir)?;
        let generation = check_version(dir, &conn)?;
        upgrade_schema(&conn)?;
        let fts = match FullText::open_or_create(&dir.join(FTS_DIR)) {
            Err(CorpusError::FulltextOutdated(_)) => upgrade_fulltext(dir)?,
            other => other?,
        };
        let store = Store::from_parts(dir, conn, fts);
        if store.fts.committed_generation()? != Some(generation) && !WriteLock::is_held(dir) {
            // An earlier run died between its two commits: repair if we can
            // take the lock. If we cannot write, searches still work on the
            // older full-text index.
            if let Ok(lock) = WriteLock::acquire(dir) {
                store.rebuild_fulltext(generation)?;
                drop(lock);
            }
        }
        Ok(store)
    }

    /// The store folder (`<in-memory>` for [`Store::in_memory`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True for a store built by [`Store::in_memory`].
    pub fn is_in_memory(&self) -> bool {
        self.in_memory
    }

    pub(crate) fn db(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock only means another thread panicked mid-query;
        // SQLite itself is still consistent.
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's reply cache (`replies.sqlite` in its folder), opened on
    /// first use; `None` for a store built in memory.
    pub fn reply_cache(
        &self,
    ) -> Result<Option<std::sync::Arc<dyn crate::ReplyCache>>, CorpusError> {
        if self.in_memory {
            return Ok(None);
        }
        let mut slot = self.replies.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(std::sync::Arc::new(crate::FolderReplyCache::open(
                &self.dir,
            )?));
        }
        Ok(slot
            .clone()
            .map(|c| c as std::sync::Arc<dyn crate::ReplyCache>))
    }

    /// A store handle over an open database and full-text index.
    fn from_parts(dir: &Path, conn: Connection, fts: FullText) -> Store {
        Store {
            dir: dir.to_path_buf(),
            db: Mutex::new(conn),
            fts,
            vectors: Default::default(),
            in_memory: false,
            replies: Mutex::new(None),
        }
    }
}
