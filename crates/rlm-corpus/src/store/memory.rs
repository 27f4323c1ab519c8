//! A store held in memory: documents given as texts (a library's caller, the
//! Python package's `context`), chunked and indexed exactly as `rlm index`
//! does it, in an in-memory SQLite database and a RAM tantivy index. Nothing
//! touches the disk; everything that reads a store (lookups, BM25 search,
//! chunk spans for citations, embeddings) works on it unchanged.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::Connection;

use super::writer::{DocumentRow, insert_rows};
use super::{FORMAT_VERSION, SCHEMA, Store};
use crate::chunk::{MIN_CHUNK_CHARS, chunk_text};
use crate::error::CorpusError;
use crate::extract::DocKind;
use crate::fts::FullText;

/// What [`Store::dir`] names for an in-memory store.
const MEMORY_DIR: &str = "<in-memory>";
/// The longest document name.
const MAX_PATH_CHARS: usize = 4096;
/// Contexts up to this size are indexed by a single small writer.
const SMALL_CONTEXT_BYTES: usize = 4 << 20;
/// tantivy's smallest heap for one indexing thread.
const SMALL_WRITER_HEAP_BYTES: usize = 15_000_000;

/// One document given as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryDocument {
    /// Its name, used as its corpus-relative path (the document id derives
    /// from it, citations and `[DOCUMENT i: path]` headers show it). A name
    /// ending in `.md` or `.markdown` gets Markdown heading tracking.
    pub path: String,
    /// The text, stored as given (no extraction).
    pub text: String,
}

impl MemoryDocument {
    /// A document named `path` holding `text`.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        MemoryDocument {
            path: path.into(),
            text: text.into(),
        }
    }
}

impl Store {
    /// A store held in memory over `docs`, chunked at `chunk_chars` (at least
    /// 64) and indexed for full-text search; [`Store::documents`] lists them
    /// in the order given (a store on disk lists by path). Names must be unique,
    /// not blank, at most 4,096 characters and free of control characters;
    /// at least one document must hold text (empty ones are kept, with no
    /// chunks).
    pub fn in_memory(docs: &[MemoryDocument], chunk_chars: usize) -> Result<Store, CorpusError> {
        if chunk_chars < MIN_CHUNK_CHARS {
            return Err(CorpusError::InvalidOption(format!(
                "chunk size {chunk_chars} is below the minimum of {MIN_CHUNK_CHARS} characters"
            )));
        }
        check_names(docs)?;
        if docs.iter().all(|d| d.text.trim().is_empty()) {
            return Err(CorpusError::InvalidOption(
                "every document is empty: give at least one document with some text".into(),
            ));
        }
        let mut conn = Connection::open_in_memory()?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.execute_batch(SCHEMA)?;
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('format_version', ?1), ('generation', '1')",
            [FORMAT_VERSION.to_string()],
        )?;
        let fts = FullText::in_ram()?;
        // A small context is indexed by one thread with tantivy's smallest
        // heap: starting four threads and their arenas cost more than the
        // indexing itself (three short texts: 14.9 ms → 9.0 ms, release).
        let bytes: usize = docs.iter().map(|d| d.text.len()).sum();
        let writer = if bytes <= SMALL_CONTEXT_BYTES {
            fts.writer_with(1, SMALL_WRITER_HEAP_BYTES)?
        } else {
            fts.writer()?
        };
        let tx = conn.transaction()?;
        for d in docs {
            let markdown = is_markdown(&d.path);
            let spans = chunk_text(&d.text, chunk_chars, None, markdown);
            let hash = blake3::hash(d.text.as_bytes()).to_hex().to_string();
            let row = DocumentRow {
                path: &d.path,
                root: "",
                kind: if markdown {
                    DocKind::Markdown
                } else {
                    DocKind::Text
                },
                size_bytes: d.text.len() as u64,
                mtime_ns: 0,
                hash: &hash,
                title: title_of(d),
                lossy: false,
                text: &d.text,
            };
            insert_rows(&tx, &writer, &row, &spans)?;
        }
        tx.commit()?;
        writer.commit(1)?;
        fts.reload()?;
        Ok(Store {
            dir: PathBuf::from(MEMORY_DIR),
            db: Mutex::new(conn),
            fts,
            vectors: Default::default(),
            in_memory: true,
            replies: Mutex::new(None),
        })
    }
}

fn check_names(docs: &[MemoryDocument]) -> Result<(), CorpusError> {
    if docs.is_empty() {
        return Err(CorpusError::InvalidOption(
            "no documents given: pass at least one".into(),
        ));
    }
    let mut seen = HashSet::with_capacity(docs.len());
    for (i, d) in docs.iter().enumerate() {
        let bad = |what: &str| {
            CorpusError::InvalidOption(format!(
                "document {i}'s name {:?} {what}",
                d.path.chars().take(80).collect::<String>()
            ))
        };
        if d.path.trim().is_empty() {
            return Err(bad("is blank: give every document a name"));
        }
        if d.path.chars().count() > MAX_PATH_CHARS {
            return Err(bad("is longer than 4096 characters"));
        }
        if d.path.chars().any(char::is_control) {
            return Err(bad(
                "holds a control character (newline, tab, ...): names are one line",
            ));
        }
        if !seen.insert(d.path.as_str()) {
            return Err(bad("is used twice: document names must be unique"));
        }
    }
    Ok(())
}

fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown")
}

/// The first Markdown heading of a Markdown document, else its name.
fn title_of(d: &MemoryDocument) -> &str {
    if is_markdown(&d.path)
        && let Some(h) = d
            .text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim())
            .filter(|h| !h.is_empty())
    {
        return h;
    }
    &d.path
}
