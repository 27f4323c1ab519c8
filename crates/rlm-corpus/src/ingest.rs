//! The indexing pipeline every store back-end shares: walk → read and
//! extract (in parallel, in batches) → chunk → hand each change to the
//! back-end's [`IndexSink`]. The back-end owns the transaction around it: the
//! local store writes one SQLite transaction plus one tantivy commit, the
//! PostgreSQL store one database transaction (crate `rlm-store-pg`).
//!
//! Incremental: a file with the size and mtime the store knows is trusted
//! without reading; a changed one is re-hashed and replaced only when its
//! content changed; files gone from an indexed folder are removed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::chunk::{ChunkSpan, MIN_CHUNK_CHARS, chunk_text};
use crate::error::CorpusError;
use crate::extract::{DocKind, Extracted, Extraction, SkipReason, extract};
use crate::index_options::{IndexOptions, IndexProgress, IndexReport};
use crate::records::document_id;
use crate::walk::{FileEntry, Walked, walk};

/// Files are read and extracted in batches of about this many bytes, which
/// bounds the memory of one indexing run independently of corpus size.
const BATCH_BYTES: u64 = 32 * 1024 * 1024;

/// What a store knew about a path before this run (keyed by the path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownDocument {
    /// Document id.
    pub id: String,
    /// The indexed root (folder name) the path was found under.
    pub root: String,
    /// File size recorded.
    pub size: u64,
    /// File mtime recorded, ns since the epoch.
    pub mtime_ns: i64,
    /// BLAKE3 hash of the file's bytes.
    pub hash: String,
}

/// A document's fields as stored (its id derives from `path`).
#[derive(Debug, Clone, Copy)]
pub struct DocumentRow<'a> {
    /// Corpus-relative path.
    pub path: &'a str,
    /// The indexed root it was found under.
    pub root: &'a str,
    /// How the text was extracted.
    pub kind: DocKind,
    /// File size in bytes.
    pub size_bytes: u64,
    /// File mtime, ns since the epoch.
    pub mtime_ns: i64,
    /// BLAKE3 hash of the file's bytes (hex).
    pub hash: &'a str,
    /// First heading, HTML title, or file name.
    pub title: &'a str,
    /// Invalid UTF-8 was replaced.
    pub lossy: bool,
    /// The extracted text.
    pub text: &'a str,
}

/// A document to write, with its chunk spans over its text.
#[derive(Debug)]
pub struct NewDocument<'a> {
    /// Stable id ([`document_id`] of the path).
    pub id: &'a str,
    /// Its fields.
    pub row: DocumentRow<'a>,
    /// Its chunks, in order (chunk `i` has ordinal `i`).
    pub spans: &'a [ChunkSpan],
}

/// Where an indexing run writes. Calls come in the order the run decides
/// them; nothing is visible to readers until the back-end commits, after
/// [`ingest`] returns.
pub trait IndexSink {
    /// A known file was touched but its content is identical: record the new mtime.
    fn touch(&mut self, doc_id: &str, mtime_ns: i64) -> Result<(), CorpusError>;
    /// Removes a document and its chunks (replaced, skipped now, or gone).
    fn delete(&mut self, doc_id: &str) -> Result<(), CorpusError>;
    /// Adds a document and its chunks (its id is not in the store, or was
    /// deleted earlier in this run).
    fn insert(&mut self, doc: &NewDocument<'_>) -> Result<(), CorpusError>;
}

/// What [`ingest`] did, for the back-end's commit.
#[derive(Debug, Default)]
pub struct Ingested {
    /// The report so far (`totals` and `elapsed_ms` are the caller's).
    pub report: IndexReport,
    /// Ids of the documents this run inserted.
    pub inserted: HashSet<String>,
}

/// Checks the options and paths of a run before anything is opened.
pub fn check_run(paths: &[PathBuf], opts: &IndexOptions) -> Result<(), CorpusError> {
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
    Ok(())
}

/// Walks `paths`, compares with `known` and writes every change to `sink`.
/// `rewrite_all` re-inserts unchanged-hash files too (a rebuild, or a
/// back-end whose derived index must be refilled). `skip_dir` is left out of
/// the walk (a local store's own folder). An empty corpus is refused before
/// anything is deleted, so the caller can roll back with nothing lost.
pub fn ingest(
    paths: &[PathBuf],
    opts: &IndexOptions,
    skip_dir: Option<&Path>,
    known: &HashMap<String, KnownDocument>,
    rewrite_all: bool,
    sink: &mut dyn IndexSink,
    progress: &mut dyn FnMut(IndexProgress),
) -> Result<Ingested, CorpusError> {
    let mut report = IndexReport::default();
    let walked = walk(paths, opts, skip_dir, progress)?;
    let members_of = members_by_file(&walked, known);
    let (to_read, removed) = triage(walked, known, &members_of, opts, &mut report);
    let total_bytes: u64 = to_read.iter().map(|f| f.size).sum();
    let mut run = Run {
        known,
        members_of,
        rewrite_all,
        indexable: report.unchanged,
        report,
        removed,
        inserted: HashSet::new(),
    };
    let mut done_bytes = 0;
    let (producer, batch_rx) = read_in_background(to_read, opts);
    for processed in batch_rx {
        progress(IndexProgress::Processing {
            done_bytes,
            total_bytes,
        });
        for p in processed {
            done_bytes += p.entry.size;
            run.apply(p, sink)?;
        }
    }
    if producer.join().is_err() {
        return Err(CorpusError::Internal("a file reader thread crashed".into()));
    }
    progress(IndexProgress::Processing {
        done_bytes,
        total_bytes,
    });

    if run.indexable == 0 {
        // Refuse before committing anything: the previous store stays as it was.
        return Err(empty_corpus(paths, &run.report));
    }
    for k in &run.removed {
        sink.delete(&k.id)?;
        run.report.removed += 1;
    }
    Ok(Ingested {
        report: run.report,
        inserted: run.inserted,
    })
}

/// The known documents that are members of a walked file (an archive's
/// members, a mailbox's messages, attachments): their path is the file's
/// path, `/`, and a name. Keyed by the file's path.
fn members_by_file<'k>(
    walked: &Walked,
    known: &'k HashMap<String, KnownDocument>,
) -> HashMap<String, Vec<&'k KnownDocument>> {
    let files: HashSet<&str> = walked.files.iter().map(|f| f.rel_path.as_str()).collect();
    let mut members: HashMap<String, Vec<&'k KnownDocument>> = HashMap::new();
    for (path, k) in known {
        // The longest prefix that is a walked file: a file is never also a
        // folder, so it is the container.
        let container = path
            .match_indices('/')
            .map(|(i, _)| &path[..i])
            .rfind(|prefix| files.contains(prefix));
        if let Some(container) = container {
            members.entry(container.to_string()).or_default().push(k);
        }
    }
    members
}

/// The documents a file gave last time: itself and its members.
fn previous_of<'k>(
    path: &str,
    known: &'k HashMap<String, KnownDocument>,
    members_of: &HashMap<String, Vec<&'k KnownDocument>>,
) -> Vec<&'k KnownDocument> {
    known
        .get(path)
        .into_iter()
        .chain(members_of.get(path).into_iter().flatten().copied())
        .collect()
}

/// Sorts the walked files: skips and walk errors go to `report`, files with
/// the size and mtime the store knows are counted unchanged (trusted without
/// reading, like make and rsync). Returns the files to read and the known
/// documents gone from the indexed roots.
fn triage<'k>(
    walked: Walked,
    known: &'k HashMap<String, KnownDocument>,
    members_of: &HashMap<String, Vec<&'k KnownDocument>>,
    opts: &IndexOptions,
    report: &mut IndexReport,
) -> (Vec<FileEntry>, Vec<&'k KnownDocument>) {
    report.errors.extend(walked.errors);
    for (path, reason) in walked.skipped {
        *report.skipped.entry(reason.to_string()).or_default() += 1;
        report.skipped_files.push((path, reason.to_string()));
    }
    let roots: HashSet<&str> = walked.roots.iter().map(String::as_str).collect();
    let seen: HashSet<&str> = walked.files.iter().map(|f| f.rel_path.as_str()).collect();
    let is_member: HashSet<&str> = members_of
        .values()
        .flatten()
        .map(|k| k.id.as_str())
        .collect();
    let removed = known
        .iter()
        .filter(|(path, k)| {
            roots.contains(k.root.as_str())
                && !seen.contains(path.as_str())
                && !is_member.contains(k.id.as_str())
        })
        .map(|(_, k)| k)
        .collect();
    let mut to_read = Vec::new();
    for f in &walked.files {
        let previous = previous_of(&f.rel_path, known, members_of);
        let same = !previous.is_empty()
            && previous
                .iter()
                .all(|k| k.size == f.size && k.mtime_ns == f.mtime_ns);
        if same && !opts.rebuild {
            report.unchanged += previous.len() as u64;
        } else {
            to_read.push(f.clone());
        }
    }
    (to_read, removed)
}

/// Reads and extracts `to_read` in batches on a background thread (each
/// batch on all cores), so that it overlaps with writing the previous batch
/// (serial: the sink). If writing fails and the receiver is dropped, the
/// thread stops after its current batch.
fn read_in_background(
    to_read: Vec<FileEntry>,
    opts: &IndexOptions,
) -> (
    std::thread::JoinHandle<()>,
    std::sync::mpsc::Receiver<Vec<Processed>>,
) {
    let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Vec<Processed>>(1);
    let (chunk_chars, max_file_bytes) = (opts.chunk_chars, opts.max_file_bytes);
    let producer = std::thread::spawn(move || {
        for batch in batches(&to_read) {
            let processed: Vec<Processed> = batch
                .par_iter()
                .map(|f| process_file(f, chunk_chars, max_file_bytes))
                .collect();
            if batch_tx.send(processed).is_err() {
                break;
            }
        }
    });
    (producer, batch_rx)
}

/// The state of an indexing run while processed files are written.
struct Run<'k> {
    known: &'k HashMap<String, KnownDocument>,
    /// Known members of each file that holds several documents.
    members_of: HashMap<String, Vec<&'k KnownDocument>>,
    rewrite_all: bool,
    report: IndexReport,
    /// Files that are (or stay) in the corpus: none means an empty corpus.
    indexable: u64,
    /// Known documents to delete at the end.
    removed: Vec<&'k KnownDocument>,
    /// Ids of the documents inserted.
    inserted: HashSet<String>,
}

impl<'k> Run<'k> {
    /// Writes what reading one file found to `sink`.
    fn apply(&mut self, p: Processed, sink: &mut dyn IndexSink) -> Result<(), CorpusError> {
        let path = p.entry.rel_path.clone();
        let previous = previous_of(&path, self.known, &self.members_of);
        match p.outcome {
            ProcessOutcome::Failed(msg) => {
                // Keep any previously indexed version: nothing stored is lost.
                self.indexable += previous.len() as u64;
                self.report.errors.push((path, msg));
                Ok(())
            }
            ProcessOutcome::Skipped(reason) => {
                self.removed.extend(previous);
                self.skip(path, &reason);
                Ok(())
            }
            ProcessOutcome::Indexed(ex, spans) => {
                self.write(&p.entry, &p.hash, previous, vec![(path, ex, spans)], sink)
            }
            ProcessOutcome::Many(members) => {
                let mut docs = Vec::new();
                for (member_path, outcome) in members {
                    match outcome {
                        ProcessOutcome::Indexed(ex, spans) => docs.push((member_path, ex, spans)),
                        ProcessOutcome::Skipped(reason) => self.skip(member_path, &reason),
                        ProcessOutcome::Failed(msg) => self.report.errors.push((member_path, msg)),
                        // Members arrive flattened (see `Extraction::Many`).
                        ProcessOutcome::Many(_) => {}
                    }
                }
                if docs.is_empty() {
                    self.removed.extend(previous);
                    return Ok(());
                }
                self.write(&p.entry, &p.hash, previous, docs, sink)
            }
        }
    }

    fn skip(&mut self, path: String, reason: &SkipReason) {
        if let SkipReason::NoTextLayer(n) | SkipReason::NoTextFound(n) = reason {
            self.report.pages_without_text += u64::from(*n);
        }
        *self.report.skipped.entry(reason.to_string()).or_default() += 1;
        self.report.skipped_files.push((path, reason.to_string()));
    }

    /// Writes the documents one file gave, replacing those it gave before
    /// (unless its content is what the store holds).
    fn write(
        &mut self,
        entry: &FileEntry,
        hash: &str,
        previous: Vec<&'k KnownDocument>,
        docs: Vec<(String, Extracted, Vec<ChunkSpan>)>,
        sink: &mut dyn IndexSink,
    ) -> Result<(), CorpusError> {
        self.report.bytes_processed += entry.size;
        if !previous.is_empty() && !self.rewrite_all && previous.iter().all(|k| k.hash == hash) {
            // Touched but identical: only remember the new mtime.
            for k in &previous {
                sink.touch(&k.id, entry.mtime_ns)?;
            }
            self.indexable += previous.len() as u64;
            self.report.unchanged += previous.len() as u64;
            return Ok(());
        }
        for k in &previous {
            sink.delete(&k.id)?;
        }
        let before: HashSet<&str> = previous.iter().map(|k| k.id.as_str()).collect();
        // Members the file no longer holds (a message deleted from a mailbox).
        let now: HashSet<String> = docs.iter().map(|(path, ..)| document_id(path)).collect();
        self.report.removed += before.iter().filter(|id| !now.contains(**id)).count() as u64;
        for (path, ex, spans) in docs {
            self.indexable += 1;
            let id = document_id(&path);
            if before.contains(id.as_str()) {
                self.report.updated += 1;
            } else {
                self.report.added += 1;
            }
            if ex.lossy {
                self.report.lossy_files.push(path.clone());
            }
            self.report.pages_without_text += u64::from(ex.scanned.without_text);
            self.report.pages_read_by_ocr += u64::from(ex.scanned.read_by_ocr);
            let title = ex.title.clone().unwrap_or_else(|| {
                Path::new(&path)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| path.clone())
            });
            sink.insert(&NewDocument {
                id: &id,
                row: DocumentRow {
                    path: &path,
                    root: &entry.root,
                    kind: ex.kind,
                    size_bytes: entry.size,
                    mtime_ns: entry.mtime_ns,
                    hash,
                    title: &title,
                    lossy: ex.lossy,
                    text: &ex.text,
                },
                spans: &spans,
            })?;
            self.report.chunks_written += spans.len() as u64;
            self.inserted.insert(id);
        }
        Ok(())
    }
}

/// The refusal of a run that would leave the corpus empty, saying what was
/// skipped or unreadable.
fn empty_corpus(paths: &[PathBuf], report: &IndexReport) -> CorpusError {
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
    CorpusError::EmptyCorpus {
        paths: paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        detail,
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
    /// The documents of a file that holds several, each with its path.
    Many(Vec<(String, ProcessOutcome)>),
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
    let outcome = outcome_of(
        extract(&entry.abs_path, &bytes),
        chunk_chars,
        &entry.rel_path,
    );
    done(hash, outcome)
}

/// What an extraction gives to write: text with its chunks, or why not;
/// the members of a file that holds several under `path/`.
fn outcome_of(extraction: Extraction, chunk_chars: usize, path: &str) -> ProcessOutcome {
    match extraction {
        Extraction::Text(ex) => {
            let spans = chunk_text(
                &ex.text,
                chunk_chars,
                ex.sections.as_deref(),
                ex.kind.has_headings(),
            );
            ProcessOutcome::Indexed(ex, spans)
        }
        Extraction::Skipped(r) => ProcessOutcome::Skipped(r),
        Extraction::Failed(e) => ProcessOutcome::Failed(e.to_string()),
        Extraction::Many(members) => ProcessOutcome::Many(
            members
                .into_iter()
                .map(|m| {
                    let member_path = if m.name.is_empty() {
                        path.to_string()
                    } else {
                        format!("{path}/{}", m.name)
                    };
                    let outcome = outcome_of(m.extraction, chunk_chars, &member_path);
                    (member_path, outcome)
                })
                .collect(),
        ),
    }
}

/// Test hook: `RLM_TEST_PAUSE=<stage>:<ms>` sleeps at a named stage of an
/// indexing run, so tests can kill the process exactly there and prove the
/// store survives. Unset in normal use; costs one env lookup per run.
pub fn test_pause(stage: &str) {
    if let Ok(spec) = std::env::var("RLM_TEST_PAUSE")
        && let Some((name, ms)) = spec.split_once(':')
        && name == stage
    {
        eprintln!("rlm: test pause at {stage}");
        std::thread::sleep(std::time::Duration::from_millis(ms.parse().unwrap_or(0)));
    }
}
