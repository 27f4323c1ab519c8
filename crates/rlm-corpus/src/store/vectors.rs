//! Chunk embeddings in the store: embedding chunks, the store's vector status,
//! and loading its vectors for exact search (the search itself is in
//! `vector.rs`).
//!
//! Vectors live in SQLite (`chunk_embeddings`: chunk id, the document hash and
//! chunk-text hash they were computed from, little-endian f32 blob). The model
//! id and dimension are recorded in `meta`; vectors of two models never mix.

use std::sync::Arc;
use std::time::Instant;

use rusqlite::{OptionalExtension, params};

use super::{Store, WriteLock};
use crate::embed::Embedder;
use crate::error::CorpusError;
use crate::vector::{
    EmbedOptions, EmbedProgress, EmbedReport, RetrievalError, VectorMatrix, VectorStatus,
    embed_checked, push_vector_bytes, top_k, vector_to_bytes,
};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS chunk_embeddings (
    chunk_id TEXT PRIMARY KEY,
    doc_hash TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL
);";
const META_MODEL: &str = "embedding_model";
const META_DIM: &str = "embedding_dim";
const META_GENERATION: &str = "embedding_generation";
/// Texts embedded between two SQLite commits: an interrupted run keeps what it did.
const COMMIT_EVERY: usize = 256;

fn meta(conn: &rusqlite::Connection, key: &str) -> Result<Option<String>, CorpusError> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?)
}

fn set_meta(conn: &rusqlite::Connection, key: &str, value: &str) -> Result<(), CorpusError> {
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, value],
    )?;
    Ok(())
}

fn has_table(conn: &rusqlite::Connection) -> Result<bool, CorpusError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunk_embeddings'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// A chunk whose vector is missing or was computed from an older document.
struct Stale {
    chunk_id: String,
    doc_id: String,
    byte_start: usize,
    byte_end: usize,
    doc_hash: String,
    old_text_hash: Option<String>,
}

/// A chunk waiting for its vector.
struct Pending {
    chunk_id: String,
    doc_hash: String,
    text_hash: String,
    text: String,
}

impl Store {
    /// The embedding model recorded in the store and its dimension, if any.
    pub fn embedding_model(&self) -> Result<Option<(String, usize)>, RetrievalError> {
        let conn = self.db();
        let model = meta(&conn, META_MODEL)?;
        let dim = meta(&conn, META_DIM)?.and_then(|d| d.parse().ok());
        Ok(model.zip(dim))
    }

    /// How many chunks have a vector of their current text.
    pub fn vector_status(&self) -> Result<VectorStatus, RetrievalError> {
        let chunks = self.stats()?.chunks;
        let conn = self.db();
        let model = meta(&conn, META_MODEL)?;
        let dimension = meta(&conn, META_DIM)?.and_then(|d| d.parse().ok());
        let embedded: i64 = if has_table(&conn)? {
            conn.query_row(
                "SELECT count(*) FROM chunk_embeddings e JOIN chunks c ON c.id = e.chunk_id
                 JOIN documents d ON d.id = c.doc_id WHERE e.doc_hash = d.hash",
                [],
                |r| r.get(0),
            )?
        } else {
            0
        };
        Ok(VectorStatus {
            model,
            dimension,
            embedded: embedded as u64,
            chunks,
        })
    }

    /// Embeds every chunk that has no vector of its current text, in batches of
    /// [`Embedder::batch_size`], committing as it goes (an interrupted run
    /// keeps its work; the next run resumes). Chunks of a changed document
    /// whose own text did not change keep their vector. Vectors of chunks that
    /// no longer exist are deleted. Refuses a model other than the store's
    /// unless `opts.replace`.
    pub fn embed_chunks(
        &self,
        embedder: &dyn Embedder,
        opts: &EmbedOptions,
        progress: &mut dyn FnMut(EmbedProgress),
    ) -> Result<EmbedReport, RetrievalError> {
        let started = Instant::now();
        // An in-memory store has no folder to lock and no other writer.
        let _lock = if self.in_memory {
            None
        } else {
            Some(WriteLock::acquire(self.dir())?)
        };
        let model = embedder.model_id().to_string();
        let dim = embedder.dimension();
        if dim == 0 {
            return Err(RetrievalError::EmbedderContract {
                model,
                detail: "a dimension of 0".into(),
            });
        }
        let mut report = EmbedReport {
            model: model.clone(),
            dimension: dim,
            ..EmbedReport::default()
        };
        let stale = self.start_embedding(&model, dim, opts, &mut report)?;
        let total_chunks = self.stats()?.chunks;
        report.unchanged = total_chunks.saturating_sub(stale.len() as u64);

        let total = stale.len() as u64;
        progress(EmbedProgress { done: 0, total });
        let mut pending: Vec<Pending> = Vec::new();
        let mut reused: Vec<(String, String)> = Vec::new();
        let mut done = 0u64;
        let mut doc_text: Option<(String, String)> = None;
        for s in stale {
            if doc_text.as_ref().is_none_or(|(id, _)| *id != s.doc_id) {
                doc_text = Some((s.doc_id.clone(), self.document_text(&s.doc_id)?));
            }
            let text = doc_text
                .as_ref()
                .and_then(|(_, t)| t.get(s.byte_start..s.byte_end))
                .unwrap_or_default()
                .to_string();
            let text_hash = blake3::hash(text.as_bytes()).to_hex().to_string();
            if s.old_text_hash.as_deref() == Some(text_hash.as_str()) {
                reused.push((s.chunk_id, s.doc_hash));
                continue;
            }
            pending.push(Pending {
                chunk_id: s.chunk_id,
                doc_hash: s.doc_hash,
                text_hash,
                text,
            });
            if pending.len() >= COMMIT_EVERY.max(embedder.batch_size()) {
                done += self.embed_and_store(embedder, &mut pending, &mut report)?;
                progress(EmbedProgress { done, total });
            }
        }
        done += self.embed_and_store(embedder, &mut pending, &mut report)?;
        self.keep_reused(&reused)?;
        report.reused = reused.len() as u64;
        done += report.reused;
        progress(EmbedProgress { done, total });
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Checks that the store holds no vectors of another model than `model`
    /// (or drops them all if `opts.replace`), records the model, deletes the
    /// vectors of chunks that no longer exist (counted in `report`) and
    /// lists the chunks without a vector of their current document.
    fn start_embedding(
        &self,
        model: &str,
        dim: usize,
        opts: &EmbedOptions,
        report: &mut EmbedReport,
    ) -> Result<Vec<Stale>, RetrievalError> {
        let conn = self.db();
        conn.execute_batch(SCHEMA)?;
        if let Some((stored, stored_dim)) = meta(&conn, META_MODEL)?
            .zip(meta(&conn, META_DIM)?.and_then(|d| d.parse::<usize>().ok()))
            && (stored != model || stored_dim != dim)
            && !opts.replace
        {
            return Err(RetrievalError::ModelMismatch {
                store: self.dir().display().to_string(),
                stored,
                stored_dim,
                requested: model.to_string(),
                requested_dim: dim,
            });
        }
        if opts.replace {
            conn.execute("DELETE FROM chunk_embeddings", [])?;
        }
        set_meta(&conn, META_MODEL, model)?;
        set_meta(&conn, META_DIM, &dim.to_string())?;
        report.removed = conn.execute(
            "DELETE FROM chunk_embeddings WHERE chunk_id NOT IN (SELECT id FROM chunks)",
            [],
        )? as u64;
        let mut stmt = conn.prepare(
            "SELECT c.id, c.doc_id, c.byte_start, c.byte_end, d.hash, e.text_hash
                 FROM chunks c JOIN documents d ON d.id = c.doc_id
                 LEFT JOIN chunk_embeddings e ON e.chunk_id = c.id
                 WHERE e.chunk_id IS NULL OR e.doc_hash != d.hash
                 ORDER BY c.doc_id, c.ordinal",
        )?;
        let stale = stmt
            .query_map([], |r| {
                Ok(Stale {
                    chunk_id: r.get(0)?,
                    doc_id: r.get(1)?,
                    byte_start: r.get::<_, i64>(2)? as usize,
                    byte_end: r.get::<_, i64>(3)? as usize,
                    doc_hash: r.get(4)?,
                    old_text_hash: r.get(5)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(stale)
    }

    /// Points the vectors of chunks whose text did not change (`reused`:
    /// chunk id, document hash) at their document's new hash.
    fn keep_reused(&self, reused: &[(String, String)]) -> Result<(), RetrievalError> {
        let mut conn = self.db();
        let tx = conn.transaction()?;
        for (id, doc_hash) in reused {
            tx.execute(
                "UPDATE chunk_embeddings SET doc_hash = ?1 WHERE chunk_id = ?2",
                [doc_hash, id],
            )?;
        }
        bump_generation(&tx)?;
        tx.commit()?;
        Ok(())
    }

    fn embed_and_store(
        &self,
        embedder: &dyn Embedder,
        pending: &mut Vec<Pending>,
        report: &mut EmbedReport,
    ) -> Result<u64, RetrievalError> {
        if pending.is_empty() {
            return Ok(0);
        }
        let texts: Vec<&str> = pending.iter().map(|p| p.text.as_str()).collect();
        let vectors = embed_checked(embedder, &texts, &mut report.calls)?;
        let mut conn = self.db();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO chunk_embeddings (chunk_id, doc_hash, text_hash, vector)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(chunk_id) DO UPDATE SET doc_hash = excluded.doc_hash,
                        text_hash = excluded.text_hash, vector = excluded.vector",
            )?;
            for (p, v) in pending.iter().zip(&vectors) {
                stmt.execute(params![
                    p.chunk_id,
                    p.doc_hash,
                    p.text_hash,
                    vector_to_bytes(v)
                ])?;
            }
        }
        bump_generation(&tx)?;
        tx.commit()?;
        let n = pending.len() as u64;
        report.embedded += n;
        pending.clear();
        Ok(n)
    }

    /// The current vectors, loaded once and kept until the store changes.
    pub(crate) fn vector_matrix(&self) -> Result<Option<Arc<VectorMatrix>>, RetrievalError> {
        let (key, dim) = {
            let conn = self.db();
            if !has_table(&conn)? {
                return Ok(None);
            }
            let Some(dim) = meta(&conn, META_DIM)?.and_then(|d| d.parse::<usize>().ok()) else {
                return Ok(None);
            };
            let key = (
                meta(&conn, "generation")?.unwrap_or_default(),
                meta(&conn, META_GENERATION)?.unwrap_or_default(),
            );
            (key, dim)
        };
        let mut cache = self.vectors.lock();
        if let Some(m) = cache.as_ref()
            && m.key == key
        {
            return Ok(Some(m.clone()));
        }
        let conn = self.db();
        let mut stmt = conn.prepare(
            "SELECT e.chunk_id, e.vector FROM chunk_embeddings e
                 JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id
                 WHERE e.doc_hash = d.hash",
        )?;
        let mut rows = stmt.query([])?;
        let mut ids = Vec::new();
        let mut data = Vec::new();
        while let Some(row) = rows.next()? {
            let blob = row.get_ref(1)?;
            let bytes = blob.as_blob().map_err(rusqlite::Error::from)?;
            // A vector of another dimension is never searched.
            if push_vector_bytes(bytes, dim, &mut data) {
                ids.push(row.get::<_, String>(0)?);
            }
        }
        if ids.is_empty() {
            *cache = None;
            return Ok(None);
        }
        let m = Arc::new(VectorMatrix {
            key,
            dim,
            ids,
            data,
        });
        *cache = Some(m.clone());
        Ok(Some(m))
    }

    /// The `k` chunks most similar to `query` (a normalized vector of the
    /// store's model), best first, with cosine similarity ≥ `min_similarity`.
    pub fn search_vector(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>, RetrievalError> {
        let Some(m) = self.vector_matrix()? else {
            return Err(RetrievalError::NoEmbeddings {
                store: self.dir().display().to_string(),
            });
        };
        if query.len() != m.dim {
            return Err(RetrievalError::InvalidOption(format!(
                "query vector has {} dimensions, the store's have {}",
                query.len(),
                m.dim
            )));
        }
        Ok(top_k(&m, query, k, min_similarity))
    }
}

fn bump_generation(conn: &rusqlite::Connection) -> Result<(), CorpusError> {
    let next = meta(conn, META_GENERATION)?
        .and_then(|g| g.parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    set_meta(conn, META_GENERATION, &next.to_string())
}
