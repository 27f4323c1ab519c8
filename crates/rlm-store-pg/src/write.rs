//! Indexing into PostgreSQL: the shared pipeline of `rlm-corpus`
//! ([`ingest`]) feeding one transaction. Rows are bulk-loaded with `COPY`
//! in batches of a few MB; deletions and mtime updates go first in each
//! batch. The generation is bumped in the same transaction, so a run that is
//! killed (or fails) leaves the previous generation exactly as it was: the
//! server rolls back a transaction whose connection dies.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rlm_corpus::ingest::{IndexSink, KnownDocument, NewDocument, check_run, ingest, test_pause};
use rlm_corpus::{CorpusError, IndexOptions, IndexProgress, IndexReport, chunk_id};

use crate::bm25;
use crate::db::{Db, Param};
use crate::languages::Configurations;
use crate::schema::migrate;

/// Advisory lock key held by a writer (an index or embedding run) for the
/// length of its transaction: one writer at a time, as the local store's
/// `write.lock`.
pub(crate) const WRITE_LOCK: i64 = 0x726c_6d5f_7772_6974; // "rlm_writ"

/// How long a writer waits for another writer's lock before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Rows are sent when a batch holds this many bytes of COPY data.
const FLUSH_BYTES: usize = 8 * 1024 * 1024;

/// Indexes `paths` into the PostgreSQL store at `url` (creating its tables
/// when absent): one transaction, incremental as the local store.
pub fn index(
    url: &str,
    paths: &[PathBuf],
    opts: &IndexOptions,
    progress: &mut dyn FnMut(IndexProgress),
) -> Result<IndexReport, CorpusError> {
    let started = Instant::now();
    check_run(paths, opts)?;
    let db = Db::connect(url, &format!("rlm index (pid {})", std::process::id()))?;
    // PostgreSQL 14+: the server checks every second that this client is
    // still there, even mid-statement, so a killed run's transaction (and
    // its lock) ends within a second. Older servers do not know the
    // setting; they notice at the statement's end.
    let _ = db.batch("SET client_connection_check_interval = 1000");
    migrate(&db, true)?;
    db.batch("BEGIN")?;
    match index_in_transaction(&db, paths, opts, progress) {
        Ok(mut report) => {
            test_pause("before_db_commit");
            db.batch("COMMIT")?;
            // Fresh planner statistics for the searches (outside the
            // transaction: losing them to a kill loses nothing).
            if report.chunks_written > 0 || report.removed > 0 {
                db.batch("ANALYZE rlm_chunks, rlm_lexemes")?;
            }
            report.totals = Some(crate::read::stats(&db)?);
            report.languages = crate::languages::languages(&db)?;
            report.elapsed_ms = started.elapsed().as_millis() as u64;
            Ok(report)
        }
        Err(e) => {
            let _ = db.batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Takes the writer's lock for the open transaction, or says who holds it.
/// A writer that was just killed may hold it until the server notices (at
/// most its current statement, or a second on PostgreSQL 14+), so the lock
/// is retried for [`LOCK_WAIT`] before giving up.
fn lock_for_writing(db: &Db) -> Result<(), CorpusError> {
    let started = Instant::now();
    loop {
        let row = db.query_opt(
            "SELECT pg_try_advisory_xact_lock($1)",
            vec![Box::new(WRITE_LOCK)],
        )?;
        if row.map(|r| r.get::<_, bool>(0)).unwrap_or(false) {
            return Ok(());
        }
        if started.elapsed() >= LOCK_WAIT {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let holder = db
        .query_opt(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND ((l.classid::bigint << 32) | l.objid::bigint) = $1",
            vec![Box::new(WRITE_LOCK)],
        )
        .ok()
        .flatten()
        .map(|r| r.get::<_, String>(0))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "another rlm".to_string());
    Err(CorpusError::Backend(format!(
        "PostgreSQL store {} is being written by {holder} (waited {} s): wait for it to finish (or stop it) and retry",
        db.location(),
        LOCK_WAIT.as_secs()
    )))
}

fn index_in_transaction(
    db: &Db,
    paths: &[PathBuf],
    opts: &IndexOptions,
    progress: &mut dyn FnMut(IndexProgress),
) -> Result<IndexReport, CorpusError> {
    lock_for_writing(db)?;
    let generation: i64 = db
        .query_opt(
            "SELECT value::bigint FROM rlm_meta WHERE key = 'generation'",
            vec![],
        )?
        .map(|r| r.get(0))
        .unwrap_or(0);
    let known = load_known(db)?;
    // Into an empty store, the full-text index is built once at the end:
    // GIN builds in bulk far faster than it takes rows one batch at a time
    // (a batch's cost grew with the index, 2.6 s → 9 s per 8 MB at 1M
    // chunks). Dropping it locks the table until the commit, so a search
    // of a store that is being indexed for the first time waits for it.
    let bulk = known.is_empty();
    if bulk {
        db.batch("DROP INDEX rlm_chunks_tsv")?;
    }
    bm25::begin_counting(db)?;
    let mut sink = PgSink {
        db,
        configurations: Configurations::load(db)?,
        deletes: Vec::new(),
        touches: Vec::new(),
        documents: Vec::new(),
        chunks: Vec::new(),
        inserted: Vec::new(),
    };
    let ingested = ingest(paths, opts, None, &known, opts.rebuild, &mut sink, progress)?;
    sink.flush()?;
    progress(IndexProgress::Committing);
    if bulk {
        db.batch(
            "SET LOCAL maintenance_work_mem = '256MB';
             CREATE INDEX rlm_chunks_tsv ON rlm_chunks USING gin (tsv)",
        )?;
    }
    bm25::finish_counting(db)?;
    db.execute(
        "UPDATE rlm_meta SET value = $1 WHERE key = 'generation'",
        vec![Box::new((generation + 1).to_string())],
    )?;
    Ok(ingested.report)
}

fn load_known(db: &Db) -> Result<HashMap<String, KnownDocument>, CorpusError> {
    let rows = db.query(
        "SELECT path, id, root, size_bytes, mtime_ns, hash FROM rlm_documents",
        vec![],
    )?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                KnownDocument {
                    id: r.get(1),
                    root: r.get(2),
                    size: r.get::<_, i64>(3) as u64,
                    mtime_ns: r.get(4),
                    hash: r.get(5),
                },
            )
        })
        .collect())
}

/// Buffers one batch of changes and sends it: deletions, mtime updates,
/// then documents and chunks by `COPY`.
struct PgSink<'a> {
    db: &'a Db,
    /// The text search configurations of the server (a chunk's is its
    /// document's language's).
    configurations: Configurations,
    deletes: Vec<String>,
    touches: Vec<(String, i64)>,
    /// `COPY rlm_documents` rows (text format).
    documents: Vec<u8>,
    /// `COPY rlm_chunks` rows (text format).
    chunks: Vec<u8>,
    /// The documents of this batch's rows (their lexemes are counted once
    /// their chunks are in).
    inserted: Vec<String>,
}

impl PgSink<'_> {
    fn flush(&mut self) -> Result<(), CorpusError> {
        if !self.deletes.is_empty() {
            let ids = std::mem::take(&mut self.deletes);
            bm25::count(self.db, &ids, -1)?;
            // Chunks go with their document (ON DELETE CASCADE).
            self.db.execute(
                "DELETE FROM rlm_documents WHERE id = ANY($1)",
                vec![Box::new(ids) as Param],
            )?;
        }
        if !self.touches.is_empty() {
            let (ids, mtimes): (Vec<String>, Vec<i64>) =
                std::mem::take(&mut self.touches).into_iter().unzip();
            self.db.execute(
                "UPDATE rlm_documents d SET mtime_ns = t.mtime
                 FROM unnest($1::text[], $2::bigint[]) AS t(id, mtime) WHERE d.id = t.id",
                vec![Box::new(ids) as Param, Box::new(mtimes)],
            )?;
        }
        if !self.documents.is_empty() {
            self.db.copy_in(
                "rlm_documents (id, path, root, kind, size_bytes, mtime_ns, chars, hash, title, chunk_count, lossy, text, language)",
                std::mem::take(&mut self.documents),
            )?;
        }
        if !self.chunks.is_empty() {
            self.db.copy_in(
                "rlm_chunks (id, doc_id, ordinal, byte_start, byte_end, line_start, line_end, page, heading, body, location, lang_cfg)",
                std::mem::take(&mut self.chunks),
            )?;
        }
        let inserted = std::mem::take(&mut self.inserted);
        bm25::count(self.db, &inserted, 1)?;
        Ok(())
    }
}

impl IndexSink for PgSink<'_> {
    fn touch(&mut self, doc_id: &str, mtime_ns: i64) -> Result<(), CorpusError> {
        self.touches.push((doc_id.to_string(), mtime_ns));
        Ok(())
    }

    fn delete(&mut self, doc_id: &str) -> Result<(), CorpusError> {
        // A document inserted earlier in this batch is never deleted later in
        // it (the pipeline handles each path once, removals last), so sending
        // deletions before insertions keeps the order that matters.
        self.deletes.push(doc_id.to_string());
        Ok(())
    }

    fn insert(&mut self, doc: &NewDocument<'_>) -> Result<(), CorpusError> {
        let d = &doc.row;
        let text = d.text;
        let tiled = tiles(text, doc.spans);
        // The folder store's detector, so both stores agree.
        let language = rlm_corpus::language::detect(text);
        let cfg = self.configurations.for_language(language);
        let mut row = Row::new(&mut self.documents);
        row.text(doc.id)
            .text(d.path)
            .text(d.root)
            .text(d.kind.as_str())
            .int(d.size_bytes as i64)
            .int(d.mtime_ns)
            .int(text.chars().count() as i64)
            .text(d.hash)
            .text(d.title)
            .int(doc.spans.len() as i64)
            .raw(if d.lossy { "t" } else { "f" })
            .opt_text((!tiled).then_some(text))
            .text(language)
            .end();
        self.inserted.push(doc.id.to_string());
        for (ordinal, s) in doc.spans.iter().enumerate() {
            let body = text.get(s.byte_start..s.byte_end).ok_or_else(|| {
                CorpusError::Internal(format!(
                    "chunk {ordinal} of {} is not on character boundaries",
                    d.path
                ))
            })?;
            let mut row = Row::new(&mut self.chunks);
            row.text(&chunk_id(doc.id, ordinal as u32))
                .text(doc.id)
                .int(ordinal as i64)
                .int(s.byte_start as i64)
                .int(s.byte_end as i64)
                .int(i64::from(s.line_start))
                .int(i64::from(s.line_end))
                .opt_int(s.page.map(i64::from))
                .opt_text(s.heading.as_deref())
                .text(body)
                .opt_text(s.location.as_deref())
                .text(cfg)
                .end();
        }
        if self.documents.len() + self.chunks.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }
}

/// True when the spans cover `text` exactly, in order, with no gap: then
/// the text is the chunks' bodies joined and is not stored twice.
fn tiles(text: &str, spans: &[rlm_corpus::ChunkSpan]) -> bool {
    let mut at = 0;
    for s in spans {
        if s.byte_start != at {
            return false;
        }
        at = s.byte_end;
    }
    at == text.len()
}

/// One row of `COPY … FROM STDIN` text format.
struct Row<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Row<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Row { out, first: true }
    }

    fn sep(&mut self) {
        if !self.first {
            self.out.push(b'\t');
        }
        self.first = false;
    }

    fn raw(&mut self, value: &str) -> &mut Self {
        self.sep();
        self.out.extend_from_slice(value.as_bytes());
        self
    }

    fn int(&mut self, value: i64) -> &mut Self {
        self.raw(&value.to_string())
    }

    fn opt_int(&mut self, value: Option<i64>) -> &mut Self {
        match value {
            Some(v) => self.int(v),
            None => self.raw("\\N"),
        }
    }

    /// Text with COPY's escapes. PostgreSQL's text type cannot hold NUL:
    /// it is stored as a space (one byte, so every byte span stays exact).
    fn text(&mut self, value: &str) -> &mut Self {
        self.sep();
        escape_into(self.out, value);
        self
    }

    fn opt_text(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(v) => self.text(v),
            None => self.raw("\\N"),
        }
    }

    fn end(&mut self) {
        self.out.push(b'\n');
    }
}

/// Appends `value` escaped for COPY's text format. Multi-byte UTF-8
/// sequences never contain these ASCII bytes, so a byte scan is exact.
fn escape_into(out: &mut Vec<u8>, value: &str) {
    for &b in value.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0 => out.push(b' '),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_what_copy_reads_as_syntax() {
        let mut out = Vec::new();
        escape_into(&mut out, "a\\b\tc\nd\re\0f é");
        assert_eq!(out, "a\\\\b\\tc\\nd\\re f é".as_bytes());
        let mut out = Vec::new();
        Row::new(&mut out)
            .text("x")
            .opt_text(None)
            .int(-3)
            .opt_int(Some(7))
            .end();
        assert_eq!(out, b"x\t\\N\t-3\t7\n");
    }

    #[test]
    fn only_spans_without_gaps_tile_a_text() {
        use rlm_corpus::chunk_text;
        let text = "one two three\n\nfour five six seven eight\n".repeat(40);
        let spans = chunk_text(&text, 64, None, false);
        assert!(spans.len() > 3);
        assert!(tiles(&text, &spans));
        assert!(!tiles(&text, &spans[1..]));
        assert!(!tiles(&text, &spans[..spans.len() - 1]));
        assert!(tiles("", &[]));
    }
}
