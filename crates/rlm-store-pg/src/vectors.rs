//! Chunk embeddings in PostgreSQL.
//!
//! pgvector is not used: Debian 12 (the distribution this project installs
//! PostgreSQL from) does not package it. Vectors are stored as
//! little-endian `f32` bytes in `rlm_embeddings.vector` (`bytea`, as the
//! local store keeps them in SQLite), loaded once per store generation into
//! the `rlm` process and searched exactly there ([`rlm_corpus::exact_top_k`]):
//! perfect recall, ~1.5 KB of memory per chunk at 384 dimensions, the same
//! results as the local store. The rules of an embedding run are the local
//! store's: only chunks without a vector of their current text are embedded,
//! a changed document's chunks whose text is unchanged keep theirs, vectors
//! of chunks that no longer exist are deleted, another model is refused
//! unless `replace`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rlm_corpus::{
    CorpusError, EmbedOptions, EmbedProgress, EmbedReport, Embedder, RetrievalError, VectorStatus,
    embed_checked, exact_top_k, push_vector_bytes, vector_to_bytes,
};

use crate::db::{Db, Param};
use crate::write::WRITE_LOCK;

/// Vectors embedded between two commits: an interrupted run keeps its work.
const COMMIT_EVERY: usize = 256;

/// The store's current vectors, in memory.
pub(crate) struct Matrix {
    /// `generation` and `embedding_generation` when loaded.
    key: (String, String),
    dim: usize,
    ids: Vec<String>,
    data: Vec<f32>,
}

/// The matrix of the last vector search, reloaded when the store changes.
#[derive(Default)]
pub(crate) struct VectorCache(Mutex<Option<Arc<Matrix>>>);

fn meta(db: &Db, key: &str) -> Result<Option<String>, CorpusError> {
    Ok(db
        .query_opt(
            "SELECT value FROM rlm_meta WHERE key = $1",
            vec![Box::new(key.to_string())],
        )?
        .map(|r| r.get(0)))
}

fn set_meta(db: &Db, key: &str, value: &str) -> Result<(), CorpusError> {
    db.execute(
        "INSERT INTO rlm_meta (key, value) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        vec![Box::new(key.to_string()), Box::new(value.to_string())],
    )?;
    Ok(())
}

fn bump_generation(db: &Db) -> Result<(), CorpusError> {
    db.execute(
        "INSERT INTO rlm_meta (key, value) VALUES ('embedding_generation', '1')
         ON CONFLICT (key) DO UPDATE SET value = (rlm_meta.value::bigint + 1)::text",
        vec![],
    )?;
    Ok(())
}

/// The model and dimension recorded in the store.
pub(crate) fn embedding_model(db: &Db) -> Result<Option<(String, usize)>, RetrievalError> {
    let model = meta(db, "embedding_model")?;
    let dim = meta(db, "embedding_dim")?.and_then(|d| d.parse().ok());
    Ok(model.zip(dim))
}

/// How many chunks have a vector of their current text.
pub(crate) fn vector_status(db: &Db) -> Result<VectorStatus, RetrievalError> {
    let chunks = crate::read::stats(db)?.chunks;
    let model = meta(db, "embedding_model")?;
    let dimension = meta(db, "embedding_dim")?.and_then(|d| d.parse().ok());
    let embedded: i64 = db
        .query_opt(
            "SELECT count(*) FROM rlm_embeddings e JOIN rlm_chunks c ON c.id = e.chunk_id
             JOIN rlm_documents d ON d.id = c.doc_id WHERE e.doc_hash = d.hash",
            vec![],
        )?
        .map(|r| r.get(0))
        .unwrap_or(0);
    Ok(VectorStatus {
        model,
        dimension,
        embedded: embedded as u64,
        chunks,
    })
}

/// The current vectors, loaded once per store generation.
pub(crate) fn matrix(db: &Db, cache: &VectorCache) -> Result<Option<Arc<Matrix>>, RetrievalError> {
    let Some(dim) = meta(db, "embedding_dim")?.and_then(|d| d.parse::<usize>().ok()) else {
        return Ok(None);
    };
    let key = (
        meta(db, "generation")?.unwrap_or_default(),
        meta(db, "embedding_generation")?.unwrap_or_default(),
    );
    let mut cached = cache.0.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = cached.as_ref()
        && m.key == key
    {
        return Ok(Some(m.clone()));
    }
    let rows = db.query(
        "SELECT e.chunk_id, e.vector FROM rlm_embeddings e
         JOIN rlm_chunks c ON c.id = e.chunk_id JOIN rlm_documents d ON d.id = c.doc_id
         WHERE e.doc_hash = d.hash",
        vec![],
    )?;
    let mut ids = Vec::with_capacity(rows.len());
    let mut data = Vec::with_capacity(rows.len() * dim);
    for r in &rows {
        // A vector of another dimension is never searched.
        if push_vector_bytes(r.get(1), dim, &mut data) {
            ids.push(r.get::<_, String>(0));
        }
    }
    if ids.is_empty() {
        *cached = None;
        return Ok(None);
    }
    let m = Arc::new(Matrix {
        key,
        dim,
        ids,
        data,
    });
    *cached = Some(m.clone());
    Ok(Some(m))
}

/// Exact top-k over the loaded vectors.
pub(crate) fn search_vector(
    db: &Db,
    cache: &VectorCache,
    query: &[f32],
    k: usize,
    min_similarity: f32,
) -> Result<Vec<(String, f32)>, RetrievalError> {
    let Some(m) = matrix(db, cache)? else {
        return Err(RetrievalError::NoEmbeddings {
            store: db.location().to_string(),
        });
    };
    if query.len() != m.dim {
        return Err(RetrievalError::InvalidOption(format!(
            "query vector has {} dimensions, the store's have {}",
            query.len(),
            m.dim
        )));
    }
    Ok(exact_top_k(
        &m.ids,
        &m.data,
        m.dim,
        query,
        k,
        min_similarity,
    ))
}

/// Number of vectors a search scans now.
pub(crate) fn searchable(db: &Db, cache: &VectorCache) -> Result<Option<u64>, RetrievalError> {
    Ok(matrix(db, cache)?.map(|m| m.ids.len() as u64))
}

/// A chunk waiting for its vector.
struct Pending {
    chunk_id: String,
    doc_hash: String,
    text_hash: String,
    text: String,
}

/// Embeds the chunks without a current vector, committing every
/// [`COMMIT_EVERY`] vectors, under the writer's lock.
pub(crate) fn embed_chunks(
    db: &Db,
    embedder: &dyn Embedder,
    opts: &EmbedOptions,
    progress: &mut dyn FnMut(EmbedProgress),
) -> Result<EmbedReport, RetrievalError> {
    let started = Instant::now();
    let model = embedder.model_id().to_string();
    let dim = embedder.dimension();
    if dim == 0 {
        return Err(RetrievalError::EmbedderContract {
            model,
            detail: "a dimension of 0".into(),
        });
    }
    // A session-level lock: commits happen as the run goes.
    let locked: bool = db
        .query_opt(
            "SELECT pg_try_advisory_lock($1)",
            vec![Box::new(WRITE_LOCK)],
        )?
        .map(|r| r.get(0))
        .unwrap_or(false);
    if !locked {
        return Err(CorpusError::Backend(format!(
            "PostgreSQL store {} is being written by another rlm: wait for it to finish and retry",
            db.location()
        ))
        .into());
    }
    let result = embed_locked(db, embedder, opts, progress, model, dim, started);
    let _ = db.execute("SELECT pg_advisory_unlock($1)", vec![Box::new(WRITE_LOCK)]);
    result
}

fn embed_locked(
    db: &Db,
    embedder: &dyn Embedder,
    opts: &EmbedOptions,
    progress: &mut dyn FnMut(EmbedProgress),
    model: String,
    dim: usize,
    started: Instant,
) -> Result<EmbedReport, RetrievalError> {
    let mut report = EmbedReport {
        model: model.clone(),
        dimension: dim,
        ..EmbedReport::default()
    };
    if let Some((stored, stored_dim)) = embedding_model(db)?
        && (stored != model || stored_dim != dim)
        && !opts.replace
    {
        return Err(RetrievalError::ModelMismatch {
            store: db.location().to_string(),
            stored,
            stored_dim,
            requested: model,
            requested_dim: dim,
        });
    }
    if opts.replace {
        db.execute("DELETE FROM rlm_embeddings", vec![])?;
    }
    set_meta(db, "embedding_model", &model)?;
    set_meta(db, "embedding_dim", &dim.to_string())?;
    report.removed = db.execute(
        "DELETE FROM rlm_embeddings e WHERE NOT EXISTS (SELECT 1 FROM rlm_chunks c WHERE c.id = e.chunk_id)",
        vec![],
    )?;
    let stale = db.query(
        "SELECT c.id, d.hash, e.text_hash, c.body
         FROM rlm_chunks c JOIN rlm_documents d ON d.id = c.doc_id
         LEFT JOIN rlm_embeddings e ON e.chunk_id = c.id
         WHERE e.chunk_id IS NULL OR e.doc_hash != d.hash
         ORDER BY c.doc_id, c.ordinal",
        vec![],
    )?;
    let total_chunks = crate::read::stats(db)?.chunks;
    report.unchanged = total_chunks.saturating_sub(stale.len() as u64);
    let total = stale.len() as u64;
    progress(EmbedProgress { done: 0, total });
    let mut pending: Vec<Pending> = Vec::new();
    let mut reused: Vec<(String, String)> = Vec::new();
    let mut done = 0u64;
    for r in &stale {
        let chunk_id: String = r.get(0);
        let doc_hash: String = r.get(1);
        let old_text_hash: Option<String> = r.get(2);
        let text: String = r.get(3);
        let text_hash = blake3::hash(text.as_bytes()).to_hex().to_string();
        if old_text_hash.as_deref() == Some(text_hash.as_str()) {
            reused.push((chunk_id, doc_hash));
            continue;
        }
        pending.push(Pending {
            chunk_id,
            doc_hash,
            text_hash,
            text,
        });
        if pending.len() >= COMMIT_EVERY.max(embedder.batch_size()) {
            done += embed_and_store(db, embedder, &mut pending, &mut report)?;
            progress(EmbedProgress { done, total });
        }
    }
    done += embed_and_store(db, embedder, &mut pending, &mut report)?;
    if !reused.is_empty() {
        let (ids, hashes): (Vec<String>, Vec<String>) = reused.into_iter().unzip();
        report.reused = ids.len() as u64;
        db.execute(
            "UPDATE rlm_embeddings e SET doc_hash = t.doc_hash
             FROM unnest($1::text[], $2::text[]) AS t(chunk_id, doc_hash) WHERE e.chunk_id = t.chunk_id",
            vec![Box::new(ids) as Param, Box::new(hashes)],
        )?;
    }
    bump_generation(db)?;
    done += report.reused;
    progress(EmbedProgress { done, total });
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

fn embed_and_store(
    db: &Db,
    embedder: &dyn Embedder,
    pending: &mut Vec<Pending>,
    report: &mut EmbedReport,
) -> Result<u64, RetrievalError> {
    if pending.is_empty() {
        return Ok(0);
    }
    let texts: Vec<&str> = pending.iter().map(|p| p.text.as_str()).collect();
    let vectors: Vec<Vec<u8>> = embed_checked(embedder, &texts, &mut report.calls)?
        .iter()
        .map(|v| vector_to_bytes(v))
        .collect();
    let ids: Vec<String> = pending.iter().map(|p| p.chunk_id.clone()).collect();
    let doc_hashes: Vec<String> = pending.iter().map(|p| p.doc_hash.clone()).collect();
    let text_hashes: Vec<String> = pending.iter().map(|p| p.text_hash.clone()).collect();
    db.execute(
        "INSERT INTO rlm_embeddings (chunk_id, doc_hash, text_hash, vector)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[])
         ON CONFLICT (chunk_id) DO UPDATE SET doc_hash = excluded.doc_hash,
            text_hash = excluded.text_hash, vector = excluded.vector",
        vec![
            Box::new(ids) as Param,
            Box::new(doc_hashes),
            Box::new(text_hashes),
            Box::new(vectors),
        ],
    )?;
    bump_generation(db)?;
    let n = pending.len() as u64;
    report.embedded += n;
    pending.clear();
    Ok(n)
}
