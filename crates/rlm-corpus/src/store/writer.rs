//! Writing a store: walk → extract → chunk → commit, under the store's
//! exclusive write lock. Reading is in `reader.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rlm_lockfile::{LockError, PidLock};
use rusqlite::{Connection, params};

use super::{
    FORMAT_VERSION, FTS_DIR, SCHEMA, Store, check_version, chunk_id, document_id, open_db,
};
use crate::chunk::ChunkSpan;
use crate::error::CorpusError;
use crate::fts::{FtsChunk, FtsWriter, FullText};
use crate::index_options::{IndexOptions, IndexProgress, IndexReport};
pub(super) use crate::ingest::DocumentRow;
use crate::ingest::{IndexSink, KnownDocument, NewDocument, check_run, ingest, test_pause};

const LOCK_FILE: &str = "write.lock";

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

impl Store {
    /// Indexes `paths` into the store at `dir`, creating it when absent.
    pub fn index(
        dir: &Path,
        paths: &[PathBuf],
        opts: &IndexOptions,
        progress: &mut dyn FnMut(IndexProgress),
    ) -> Result<IndexReport, CorpusError> {
        let started = Instant::now();
        check_run(paths, opts)?;
        std::fs::create_dir_all(dir).map_err(|e| not_writable(dir, e))?;
        let lock = WriteLock::acquire(dir)?;
        let mut conn = open_db(dir)?;
        // A store.sqlite with no tables (a 0-byte file) is started afresh,
        // as `rlm index` says to do when reading it fails.
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        if tables == 0 {
            conn.execute_batch(SCHEMA)?;
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('format_version', ?1), ('generation', '0')",
                [FORMAT_VERSION.to_string()],
            )?;
        }
        let generation = check_version(dir, &conn)?;
        super::upgrade_schema(&conn)?;
        let mut recreated = None;
        let (fts, committed) = open_fulltext_for_writing(dir, opts.rebuild, &mut recreated)?;
        let fts_stale = committed != Some(generation);

        let known = load_known(&conn)?;
        let tx = conn.transaction()?;
        let mut writer = fts.writer()?;
        if fts_stale || opts.rebuild {
            writer.delete_all()?;
        }
        let ingested = {
            let mut sink = LocalSink {
                tx: &tx,
                writer: &writer,
            };
            ingest(
                paths,
                opts,
                Some(dir),
                &known,
                fts_stale || opts.rebuild,
                &mut sink,
                progress,
            )?
        };
        let mut report = ingested.report;
        report.fulltext_recreated = recreated;
        if fts_stale || opts.rebuild {
            // The full-text index was cleared: re-add the documents this run did not write.
            add_all_chunks(&tx, &writer, |id| !ingested.inserted.contains(id))?;
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
        report.languages = store.languages()?;
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
/// two commits. The reason is recorded in `recreated`.
pub(super) fn open_fulltext_for_writing(
    dir: &Path,
    rebuild: bool,
    recreated: &mut Option<String>,
) -> Result<(FullText, Option<u64>), CorpusError> {
    let fts_dir = dir.join(FTS_DIR);
    let opened = FullText::open_or_create(&fts_dir)
        .and_then(|fts| fts.committed_generation().map(|g| (fts, g)));
    match opened {
        // A rebuild empties and refills the index it opened: readers keep
        // the committed one until the new one commits (never an empty index).
        Ok((fts, _)) if rebuild => return Ok((fts, None)),
        Ok(found) => return Ok(found),
        // Asked for, a rebuild of a damaged index is no recovery to report.
        Err(_) if rebuild => {}
        Err(CorpusError::Index(e)) => *recreated = Some(e),
        Err(CorpusError::FulltextOutdated(_)) => {
            *recreated = Some(
                "it was written by an older rlm, which analyzed every text as English".to_string(),
            )
        }
        Err(e) => *recreated = Some(e.to_string()),
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

fn load_known(conn: &Connection) -> Result<HashMap<String, KnownDocument>, CorpusError> {
    let mut stmt =
        conn.prepare("SELECT path, id, root, size_bytes, mtime_ns, hash FROM documents")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            KnownDocument {
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

/// The local store's side of an indexing run: rows into the open SQLite
/// transaction, chunk text into the tantivy writer (committed after it).
struct LocalSink<'a> {
    tx: &'a Connection,
    writer: &'a FtsWriter,
}

impl IndexSink for LocalSink<'_> {
    fn touch(&mut self, doc_id: &str, mtime_ns: i64) -> Result<(), CorpusError> {
        self.tx.execute(
            "UPDATE documents SET mtime_ns = ?1 WHERE id = ?2",
            params![mtime_ns, doc_id],
        )?;
        Ok(())
    }

    fn delete(&mut self, doc_id: &str) -> Result<(), CorpusError> {
        self.tx
            .execute("DELETE FROM chunks WHERE doc_id = ?1", [doc_id])?;
        self.tx
            .execute("DELETE FROM documents WHERE id = ?1", [doc_id])?;
        self.writer.delete_document(doc_id);
        Ok(())
    }

    fn insert(&mut self, doc: &NewDocument<'_>) -> Result<(), CorpusError> {
        insert_rows(self.tx, self.writer, &doc.row, doc.spans)?;
        Ok(())
    }
}

/// Inserts a document, its chunk rows and its chunks' text in the full-text
/// writer; returns the number of chunks.
pub(super) fn insert_rows(
    conn: &Connection,
    writer: &FtsWriter,
    row: &DocumentRow<'_>,
    spans: &[ChunkSpan],
) -> Result<u64, CorpusError> {
    let id = document_id(row.path);
    let language = crate::language::detect(row.text);
    conn.execute(
        "INSERT INTO documents (id, path, root, kind, size_bytes, mtime_ns, chars, hash, title,
                                chunk_count, lossy, text)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            id,
            row.path,
            row.root,
            row.kind.as_str(),
            row.size_bytes as i64,
            row.mtime_ns,
            row.text.chars().count() as i64,
            row.hash,
            row.title,
            spans.len() as i64,
            row.lossy,
            row.text,
        ],
    )?;
    let mut stmt = conn.prepare_cached(
        "INSERT INTO chunks (id, doc_id, ordinal, byte_start, byte_end, line_start, line_end,
                             page, heading, location)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
            s.location,
        ])?;
        writer.add(&FtsChunk {
            chunk_id: &cid,
            doc_id: &id,
            path: row.path,
            ordinal: ordinal as u32,
            text: &row.text[s.byte_start..s.byte_end],
            language,
        })?;
    }
    Ok(spans.len() as u64)
}

/// Adds the chunks of every stored document accepted by `keep` to the full-text index.
fn add_all_chunks(
    conn: &Connection,
    writer: &FtsWriter,
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
        let language = crate::language::detect(&text);
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
                language,
            })?;
        }
    }
    Ok(())
}
