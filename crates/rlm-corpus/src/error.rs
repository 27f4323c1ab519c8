//! Errors of the corpus store. Each message names the path or input and says
//! what to do, because it is shown to a user as-is.

use std::path::{Path, PathBuf};

/// Everything that can go wrong opening, indexing or searching a store.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A path given to index does not exist.
    #[error("path {0} does not exist: check the spelling, or run from the folder that contains it")]
    PathNotFound(PathBuf),
    /// Nothing indexable was found.
    #[error(
        "nothing to index under {paths}: {detail} (use --verbose to list skipped files, or --include to widen the selection)"
    )]
    EmptyCorpus {
        /// The paths given, joined for display.
        paths: String,
        /// What was found instead.
        detail: String,
    },
    /// The folder is not a store.
    #[error("{0} is not an rlm store: run `rlm index <paths> --store {0}` to create one")]
    NotAStore(PathBuf),
    /// The store was written by another version of rlm.
    #[error("store {path} has format version {found}, this rlm reads version {expected}: {hint}")]
    FormatVersion {
        /// The store folder.
        path: PathBuf,
        /// Version found in the store.
        found: u32,
        /// Version this build reads.
        expected: u32,
        /// What to do about it.
        hint: &'static str,
    },
    /// Another process holds the store's write lock.
    #[error(
        "store {path} is locked by pid {pid}: wait for that `rlm index` to finish (or stop it) and retry"
    )]
    Locked {
        /// The store folder.
        path: PathBuf,
        /// The pid written by the lock holder, or "unknown".
        pid: String,
    },
    /// The store folder cannot be created or written.
    #[error(
        "store folder {path} is not writable ({source}): choose another --store or fix its permissions"
    )]
    NotWritable {
        /// The store folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A query was empty.
    #[error("the query is empty: give some words to search for")]
    EmptyQuery,
    /// An id named neither a chunk nor a document.
    #[error("no chunk or document with id {0:?} in this store: `rlm docs` lists document ids")]
    UnknownId(String),
    /// A byte range does not fit the document.
    #[error(
        "byte range {start}..{end} is outside document {doc_id} ({len} bytes) or not on a character boundary"
    )]
    BadRange {
        /// The document.
        doc_id: String,
        /// Requested start.
        start: u64,
        /// Requested end.
        end: u64,
        /// Length of the document text.
        len: u64,
    },
    /// A chunking or option value is out of range.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A bug: something that should not happen did.
    #[error("internal error: {0}; nothing was committed (please report this)")]
    Internal(String),
    /// A file-system error on a named path.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// SQLite failed; the message says what to do for the kind of failure.
    #[error("store database error: {}", sqlite_message(.0))]
    Sqlite(#[from] rusqlite::Error),
    /// The full-text index failed.
    #[error("search index error: {0} (if it persists, run `rlm index --rebuild` on the store)")]
    Index(String),
    /// The full-text index was written by an rlm that analyzed every text
    /// as English; it is rebuilt from the store's documents when the store
    /// is next opened by a process that can write it.
    #[error(
        "the search index in {0} was written by an older rlm and must be rebuilt: run `rlm index --rebuild` on the store (or open it once where no other rlm is indexing it)"
    )]
    FulltextOutdated(PathBuf),
    /// A store back-end other than the local folder failed (PostgreSQL): its
    /// own one-line message, naming the store and what to do.
    #[error("{0}")]
    Backend(String),
}

/// A SQLite error with the advice that fits it: a full disk or a locked
/// file is not a damaged store, and deleting a healthy store loses it.
fn sqlite_message(e: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode;
    let advice = match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => {
            "the disk is full: free some space and retry (what was committed before is kept)"
        }
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            "check that the store folder and its store.sqlite can be read and written"
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "another process is using the store: retry when it is done"
        }
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            "store.sqlite is damaged or not a database: move the store folder away and re-create it with `rlm index <paths> --store <folder>`"
        }
        _ => return e.to_string(),
    };
    format!("{e} ({advice})")
}

impl CorpusError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> CorpusError {
        CorpusError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn index(e: impl std::fmt::Display) -> CorpusError {
        CorpusError::Index(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> CorpusError {
        CorpusError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            None,
        ))
    }

    #[test]
    fn a_full_disk_is_not_called_a_damaged_store() {
        let full = failure(rusqlite::ffi::SQLITE_FULL).to_string();
        assert!(full.contains("disk is full"), "{full}");
        assert!(
            !full.contains("re-create") && !full.contains("delete"),
            "{full}"
        );
        let broken = failure(rusqlite::ffi::SQLITE_NOTADB).to_string();
        assert!(broken.contains("move the store folder away"), "{broken}");
        let busy = failure(rusqlite::ffi::SQLITE_BUSY).to_string();
        assert!(busy.contains("retry"), "{busy}");
    }
}
