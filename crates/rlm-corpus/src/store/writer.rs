//! Writing a store: walk → extract → chunk → commit, under the store's
//! exclusive write lock. Reading is in `reader.rs`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use rlm_lockfile::{LockError, PidLock};
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::{
    DB_FILE, FORMAT_VERSION, FTS_DIR, SCHEMA, Store, StoreStats, check_version, chunk_id,
    document_id, open_db,
};
use crate::chunk::{ChunkSpan, DEFAULT_CHUNK_CHARS, MIN_CHUNK_CHARS, chunk_text};
use crate::error::CorpusError;
use crate::extract::{DocKind, Extracted, Extraction, SkipReason, extract};
use crate::fts::{FtsChunk, FullText};
use crate::walk::{FileEntry, walk};

const LOCK_FILE: &str = "write.lock";
/// Files are read and extracted in batches of about this many bytes, which
/// bounds the memory of one indexing run independently of corpus size.
const BATCH_BYTES: u64 = 32 * 1024 * 1024;

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
    /// Chunks written by this run.
    pub chunks_written: u64,
    /// Bytes read and extracted by this run.
    pub bytes_processed: u64,
    /// Totals after the run.
    pub totals: Option<StoreStats>,
    /// Wall time of the run in milliseconds.
    pub elapsed_ms: u64,
    /// Why the full-text index could not be opened, when this run recreated
    /// it from the documents' text in SQLite (a damaged `fulltext/` folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fulltext_recreated: Option<String>,
}

/// The exclusive write lock of a store (`write.lock`, holding the writer's
/// pid), released on drop.
pub(crate) struct WriteLock {
    _lock: PidLock,
}

impl WriteLock {
    /// Takes the lock without waiting; a held lock is [`CorpusError::Locked`]
    /// naming the holder's pid.
    pub(crate) fn acquire(dir: &Path) -> Result<WriteLock, CorpusError> {
        match PidLock::acquire(dir.join(LOCK_FILE)) {
            Ok(lock) => Ok(WriteLock { _lock: lock }),
            Err(LockError::Held { pid }) => Err(CorpusError::Locked {
                path: dir.to_path_buf(),
                pid,
            }),
            Err(LockError::Io { source, .. }) => Err(not_writable(dir, source)),
        }
    }

    /// True when another process holds the lock now.
    pub(crate) fn is_held(dir: &Path) -> bool {
        PidLock::is_held(dir.join(LOCK_FILE))
    }
}

fn not_writable(dir: &Path, source: std::io::Error) -> CorpusError {
    CorpusError::NotWritable {
        path: dir.to_path_buf(),
        source,
    }
}

/// A file read and extracted during indexing.
struct Processed {
    entry: FileEntry,
    hash: String,
    outcome: ProcessOutcome,
}

enum ProcessOutcome {
    Indexed(Extracted, Vec<ChunkSpan>),
    Skipped(SkipReason),
    Failed(String),
}

/// What the store knew about a path before this run.
struct Known {
    id: String,
    root: String,
    size: u64,
    mtime_ns: i64,
    hash: String,
}

impl Store {
    /// Indexes `paths` into the store at `dir`, creating it when absent.
    pub fn index(
        dir: &Path,
        paths: &[PathBuf],
        opts: &IndexOptions,
        progress: &mut dyn FnMut(IndexProgress),
    ) -> Result<IndexReport, CorpusError> {
        let started = Instant::now();
        if opts.chunk_chars < MIN_CHUNK_CHARS {
            return Err(CorpusError::InvalidOption(format!(
                "chunk size {} is below the minimum of {MIN_CHUNK_CHARS} characters",
                opts.chunk_chars
            )));
        }
        if paths.is_empty() {
            return Err(CorpusError::InvalidOption(
                "no paths given: name at least one file or folder to index".into(),
            ));
        }
        for p in paths {
            if std::fs::symlink_metadata(p).is_err() {
                return Err(CorpusError::PathNotFound(p.clone()));
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| not_writable(dir, e))?;
        let lock = WriteLock::acquire(dir)?;
        let is_new = !dir.join(DB_FILE).exists();
        let mut conn = open_db(dir)?;
        if is_new {
            conn.execute_batch(SCHEMA)?;
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('format_version', ?1), ('generation', '0')",
                [FORMAT_VERSION.to_string()],
            )?;
        }
        let generation = check_version(dir, &conn)?;
        let mut report = IndexReport::default();
        let (fts, committed) = open_fulltext_for_writing(dir, opts.rebuild, &mut report)?;
        let fts_stale = committed != Some(generation);

        let walked = walk(paths, opts, dir, progress)?;
        report.errors.extend(walked.errors);
        for (path, reason) in walked.skipped {
            *report.skipped.entry(reason.to_string()).or_default() += 1;
            report.skipped_files.push((path, reason.to_string()));
        }

        let known = load_known(&conn)?;
        let roots: HashSet<&str> = walked.roots.iter().map(String::as_str).collect();
        let seen: HashSet<&str> = walked.files.iter().map(|f| f.rel_path.as_str()).collect();
        let mut removed: Vec<&Known> = known
            .iter()
            .filter(|(path, k)| roots.contains(k.root.as_str()) && !seen.contains(path.as_str()))
            .map(|(_, k)| k)
            .collect();

        // Unchanged size and mtime: trust it without reading (like make and rsync).
        let mut to_read = Vec::new();
        for f in &walked.files {
            match known.get(&f.rel_path) {
                Some(k) if !opts.rebuild && k.size == f.size && k.mtime_ns == f.mtime_ns => {
                    report.unchanged += 1;
                }
                _ => to_read.push(f.clone()),
            }
        }

        let total_bytes: u64 = to_read.iter().map(|f| f.size).sum();
        let tx = conn.transaction()?;
        let mut writer = fts.writer()?;
        if fts_stale || opts.rebuild {
            writer.delete_all()?;
        }
        let mut indexable = report.unchanged;
        let mut done_bytes = 0;
        let mut reinserted: HashSet<String> = HashSet::new();
        // Reading and extracting the next batch (on all cores) overlaps with
        // writing the current one (serial: SQLite and the index writer's queue).
        // If writing fails and returns early, the receiver is dropped and the
        // producer stops after its current batch.
        let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Vec<Processed>>(1);
        let files = to_read.clone();
        let (chunk_chars, max_file_bytes) = (opts.chunk_chars, opts.max_file_bytes);
        let producer = std::thread::spawn(move || {
            for batch in batches(&files) {
                let processed: Vec<Processed> = batch
                    .par_iter()
                    .map(|f| process_file(f, chunk_chars, max_file_bytes))
                    .collect();
                if batch_tx.send(processed).is_err() {
                    break;
                }
            }
        });
        for processed in batch_rx {
            progress(IndexProgress::Processing {
                done_bytes,
                total_bytes,
            });
            for p in processed {
                done_bytes += p.entry.size;
                let path = p.entry.rel_path.clone();
                let previous = known.get(&path);
                match p.outcome {
                    ProcessOutcome::Failed(msg) => {
                        // Keep any previously indexed version: nothing stored is lost.
                        if previous.is_some() {
                            indexable += 1;
                        }
                        report.errors.push((path, msg));
                    }
                    ProcessOutcome::Skipped(reason) => {
                        if let Some(k) = previous {
                            removed.push(k);
                        }
                        *report.skipped.entry(reason.to_string()).or_default() += 1;
                        report.skipped_files.push((path, reason.to_string()));
                    }
                    ProcessOutcome::Indexed(ex, spans) => {
                        indexable += 1;
                        report.bytes_processed += p.entry.size;
                        if let Some(k) = previous {
                            if k.hash == p.hash && !opts.rebuild && !fts_stale {
                                // Touched but identical: only remember the new mtime.
                                tx.execute(
                                    "UPDATE documents SET mtime_ns = ?1 WHERE id = ?2",
                                    params![p.entry.mtime_ns, k.id],
                                )?;
                                report.unchanged += 1;
                                continue;
                            }
                            delete_document(&tx, &k.id)?;
                            writer.delete_document(&k.id);
                            report.updated += 1;
                        } else {
                            report.added += 1;
                        }
                        if ex.lossy {
                            report.lossy_files.push(path.clone());
                        }
                        report.chunks_written +=
                            insert_document(&tx, &writer, &p.entry, &p.hash, &ex, &spans)?;
                        reinserted.insert(document_id(&path));
                    }
                }
            }
        }
        if producer.join().is_err() {
            return Err(CorpusError::Internal("a file reader thread crashed".into()));
        }
        progress(IndexProgress::Processing {
            done_bytes,
            total_bytes,
        });

        if indexable == 0 {
            // Refuse before committing anything: the previous store stays as it was.
            let detail = if report.skipped_files.is_empty() && report.errors.is_empty() {
                "no files found".to_string()
            } else {
                let mut parts: Vec<String> = report
                    .skipped
                    .iter()
                    .map(|(r, n)| format!("{n} skipped as {r}"))
                    .collect();
                if !report.errors.is_empty() {
                    parts.push(format!("{} unreadable", report.errors.len()));
                }
                parts.join(", ")
            };
            return Err(CorpusError::EmptyCorpus {
                paths: paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                detail,
            });
        }

        for k in &removed {
            delete_document(&tx, &k.id)?;
            writer.delete_document(&k.id);
            report.removed += 1;
        }
        if fts_stale || opts.rebuild {
            // The full-text index was cleared: re-add the documents this run did not write.
            add_all_chunks(&tx, &writer, |id| !reinserted.contains(id))?;
        }
        progress(IndexProgress::Committing);
        let next = generation + 1;
        test_pause("before_db_commit");
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'generation'",
            [next.to_string()],
        )?;
        tx.commit()?;
        test_pause("between_commits");
        writer.commit(next)?;
        fts.reload()?;
        let store = Store::from_parts(dir, conn, fts);
        report.totals = Some(store.stats()?);
        drop(lock);
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Rebuilds the full-text index from the documents in SQLite and
    /// records `generation` in it (the caller holds the write lock).
    pub(super) fn rebuild_fulltext(&self, generation: u64) -> Result<(), CorpusError> {
        let mut writer = self.fts.writer()?;
        writer.delete_all()?;
        {
            let conn = self.db();
            add_all_chunks(&conn, &writer, |_| true)?;
        }
        writer.commit(generation)?;
        self.fts.reload()
    }
}

/// The full-text index of a store whose write lock is held, and the
/// generation of its last commit. The index is derived data (SQLite holds
/// every document's text), so with `rebuild`, or when it cannot be opened
/// (a damaged `fulltext/` folder: unreadable meta.json, truncated segments),
/// it is deleted and created empty; its generation (none) then disagrees with
/// SQLite's and the run re-adds every document, as after a kill between the
/// two commits. The reason is recorded in `report`.
fn open_fulltext_for_writing(
    dir: &Path,
    rebuild: bool,
    report: &mut IndexReport,
) -> Result<(FullText, Option<u64>), CorpusError> {
    let fts_dir = dir.join(FTS_DIR);
    if !rebuild {
        let opened = FullText::open_or_create(&fts_dir)
            .and_then(|fts| fts.committed_generation().map(|g| (fts, g)));
        match opened {
            Ok(found) => return Ok(found),
            Err(CorpusError::Index(e)) => report.fulltext_recreated = Some(e),
            Err(e) => report.fulltext_recreated = Some(e.to_string()),
        }
    }
    match std::fs::remove_dir_all(&fts_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(CorpusError::io(&fts_dir, e));
        }
        _ => {}
    }
    let fts = FullText::open_or_create(&fts_dir)?;
    Ok((fts, None))
}

fn load_known(conn: &Connection) -> Result<HashMap<String, Known>, CorpusError> {
    let mut stmt =
        conn.prepare("SELECT path, id, root, size_bytes, mtime_ns, hash FROM documents")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            Known {
                id: r.get(1)?,
                root: r.get(2)?,
                size: r.get::<_, i64>(3)? as u64,
                mtime_ns: r.get(4)?,
                hash: r.get(5)?,
            },
        ))
    })?;
    Ok(rows.collect::<Result<HashMap<_, _>, _>>()?)
}

fn delete_document(conn: &Connection, doc_id: &str) -> Result<(), CorpusError> {
    conn.execute("DELETE FROM chunks WHERE doc_id = ?1", [doc_id])?;
    conn.execute("DELETE FROM documents WHERE id = ?1", [doc_id])?;
    Ok(())
}

fn insert_document(
    conn: &Connection,
    writer: &crate::fts::FtsWriter,
    entry: &FileEntry,
    hash: &str,
    ex: &Extracted,
    spans: &[ChunkSpan],
) -> Result<u64, CorpusError> {
    let title = ex.title.clone().unwrap_or_else(|| {
        Path::new(&entry.rel_path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| entry.rel_path.clone())
    });
    insert_rows(
        conn,
        writer,
        &DocumentRow {
            path: &entry.rel_path,
            root: &entry.root,
            kind: ex.kind,
            size_bytes: entry.size,
            mtime_ns: entry.mtime_ns,
            hash,
            title: &title,
            lossy: ex.lossy,
            text: &ex.text,
        },
        spans,
    )
}

/// One document as stored: its row in `documents` (its chunks come apart).
pub(super) struct DocumentRow<'a> {
    pub path: &'a str,
    pub root: &'a str,
    pub kind: DocKind,
    pub size_bytes: u64,
    pub mtime_ns: i64,
    pub hash: &'a str,
    pub title: &'a str,
    pub lossy: bool,
    pub text: &'a str,
}

/// Writes a document's row, its chunks' rows and their full-text entries;
/// returns the number of chunks. Used by indexing and by in-memory stores.
pub(super) fn insert_rows(
    conn: &Connection,
    writer: &crate::fts::FtsWriter,
    doc: &DocumentRow<'_>,
    spans: &[ChunkSpan],
) -> Result<u64, CorpusError> {
    let id = document_id(doc.path);
    conn.execute(
        "INSERT INTO documents (id, path, root, kind, size_bytes, mtime_ns, chars, hash, title,
                                chunk_count, lossy, text)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            id,
            doc.path,
            doc.root,
            doc.kind.as_str(),
            doc.size_bytes as i64,
            doc.mtime_ns,
            doc.text.chars().count() as i64,
            doc.hash,
            doc.title,
            spans.len() as i64,
            doc.lossy,
            doc.text,
        ],
    )?;
    let mut stmt = conn.prepare_cached(
        "INSERT INTO chunks (id, doc_id, ordinal, byte_start, byte_end, line_start, line_end,
                             page, heading)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    for (ordinal, s) in spans.iter().enumerate() {
        let cid = chunk_id(&id, ordinal as u32);
        stmt.execute(params![
            cid,
            id,
            ordinal as i64,
            s.byte_start as i64,
            s.byte_end as i64,
            s.line_start,
            s.line_end,
            s.page,
            s.heading,
        ])?;
        writer.add(&FtsChunk {
            chunk_id: &cid,
            doc_id: &id,
            path: doc.path,
            ordinal: ordinal as u32,
            text: &doc.text[s.byte_start..s.byte_end],
        })?;
    }
    Ok(spans.len() as u64)
}

/// Adds the chunks of every stored document accepted by `keep` to the full-text index.
fn add_all_chunks(
    conn: &Connection,
    writer: &crate::fts::FtsWriter,
    keep: impl Fn(&str) -> bool,
) -> Result<(), CorpusError> {
    let mut docs = conn.prepare("SELECT id, path, text FROM documents")?;
    let mut spans = conn.prepare_cached(
        "SELECT ordinal, byte_start, byte_end FROM chunks WHERE doc_id = ?1 ORDER BY ordinal",
    )?;
    let mut rows = docs.query([])?;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        if !keep(&id) {
            continue;
        }
        let path: String = row.get(1)?;
        let text: String = row.get(2)?;
        let list = spans
            .query_map([&id], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u32,
                    r.get::<_, i64>(1)? as usize,
                    r.get::<_, i64>(2)? as usize,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (ordinal, start, end) in list {
            writer.add(&FtsChunk {
                chunk_id: &chunk_id(&id, ordinal),
                doc_id: &id,
                path: &path,
                ordinal,
                text: text.get(start..end).unwrap_or_default(),
            })?;
        }
    }
    Ok(())
}

fn batches(files: &[FileEntry]) -> Vec<&[FileEntry]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, f) in files.iter().enumerate() {
        bytes += f.size;
        if bytes >= BATCH_BYTES {
            out.push(&files[start..=i]);
            start = i + 1;
            bytes = 0;
        }
    }
    if start < files.len() {
        out.push(&files[start..]);
    }
    out
}

fn process_file(entry: &FileEntry, chunk_chars: usize, max_bytes: u64) -> Processed {
    let done = |hash: String, outcome| Processed {
        entry: entry.clone(),
        hash,
        outcome,
    };
    if entry.size > max_bytes {
        return done(String::new(), ProcessOutcome::Skipped(SkipReason::TooLarge));
    }
    let bytes = match std::fs::read(&entry.abs_path) {
        Ok(b) => b,
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (fix its permissions, or leave it out with --exclude)"
            } else {
                ""
            };
            return done(
                String::new(),
                ProcessOutcome::Failed(format!("cannot read: {e}{hint}")),
            );
        }
    };
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let outcome = match extract(&entry.abs_path, &bytes) {
        Extraction::Text(ex) => {
            let spans = chunk_text(
                &ex.text,
                chunk_chars,
                ex.page_starts.as_deref(),
                ex.kind == DocKind::Markdown,
            );
            ProcessOutcome::Indexed(ex, spans)
        }
        Extraction::Skipped(r) => ProcessOutcome::Skipped(r),
        Extraction::Failed(m) => ProcessOutcome::Failed(m),
    };
    done(hash, outcome)
}

/// Test hook: `RLM_TEST_PAUSE=<stage>:<ms>` sleeps at a named stage of an
/// indexing run, so tests can kill the process exactly there and prove the
/// store survives. Unset in normal use; costs one env lookup per run.
fn test_pause(stage: &str) {
    if let Ok(spec) = std::env::var("RLM_TEST_PAUSE")
        && let Some((name, ms)) = spec.split_once(':')
        && name == stage
    {
        eprintln!("rlm: test pause at {stage}");
        std::thread::sleep(std::time::Duration::from_millis(ms.parse().unwrap_or(0)));
    }
}
