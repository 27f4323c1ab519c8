//! The options, progress and report of an indexing run, shared by every
//! store back-end (the walk reads the options; `ingest.rs` fills the report).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::chunk::DEFAULT_CHUNK_CHARS;
use crate::records::StoreStats;

/// Options of an indexing run.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Target chunk size in characters.
    pub chunk_chars: usize,
    /// Only index files matching one of these globs (all when empty).
    pub include: Vec<String>,
    /// Never index files matching these globs.
    pub exclude: Vec<String>,
    /// Index hidden files and folders too.
    pub hidden: bool,
    /// Ignore .gitignore / .ignore rules.
    pub no_ignore: bool,
    /// Files larger than this are skipped.
    pub max_file_bytes: u64,
    /// Re-extract and re-index everything, even unchanged files.
    pub rebuild: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            chunk_chars: DEFAULT_CHUNK_CHARS,
            include: Vec::new(),
            exclude: Vec::new(),
            hidden: false,
            no_ignore: false,
            max_file_bytes: 512 * 1024 * 1024,
            rebuild: false,
        }
    }
}

/// Progress of an indexing run, for progress bars.
#[derive(Debug, Clone, Copy)]
pub enum IndexProgress {
    /// Walking: files found so far.
    Walking {
        /// Files found.
        found: u64,
    },
    /// Reading and extracting files that are new or changed.
    Processing {
        /// Bytes processed.
        done_bytes: u64,
        /// Bytes to process.
        total_bytes: u64,
    },
    /// Writing the commit.
    Committing,
}

/// What an indexing run did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IndexReport {
    /// Documents indexed for the first time.
    pub added: u64,
    /// Documents whose content changed and were replaced.
    pub updated: u64,
    /// Documents found unchanged.
    pub unchanged: u64,
    /// Documents removed because their file is gone.
    pub removed: u64,
    /// Skipped files by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Skipped files: (path, reason).
    pub skipped_files: Vec<(String, String)>,
    /// Files with invalid UTF-8 that was replaced.
    pub lossy_files: Vec<String>,
    /// Files that could not be read or parsed: (path, message). They keep any
    /// previously indexed version.
    pub errors: Vec<(String, String)>,
    /// PDF pages without a text layer (scans) that stayed without text:
    /// no OCR engine is installed, or it found no text.
    #[serde(default)]
    pub pages_without_text: u64,
    /// Scanned PDF pages whose text OCR read.
    #[serde(default)]
    pub pages_read_by_ocr: u64,
    /// Chunks written by this run.
    pub chunks_written: u64,
    /// Bytes read and extracted by this run.
    pub bytes_processed: u64,
    /// Totals after the run.
    pub totals: Option<StoreStats>,
    /// The store's languages after the run, the most common first (empty
    /// for a back-end that does not detect them).
    #[serde(default)]
    pub languages: Vec<crate::language::LanguageShare>,
    /// Wall time of the run in milliseconds.
    pub elapsed_ms: u64,
    /// Why the full-text index could not be opened, when this run recreated
    /// it from the documents' text in SQLite (a damaged `fulltext/` folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fulltext_recreated: Option<String>,
}
