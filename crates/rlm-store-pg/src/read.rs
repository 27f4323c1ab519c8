//! Reading a PostgreSQL store: totals, documents, chunks, and full-text
//! search with PostgreSQL's own text search.
//!
//! Ranking: BM25 computed by PostgreSQL from the chunks' `tsv` lexemes (each
//! chunk analyzed in its document's language, [`crate::languages`]) and
//! term statistics kept at index time, scoring a bounded set of candidate
//! chunks picked by the GIN index ([`crate::bm25`]). The snippet is
//! `ts_headline`'s best fragment, in the chunk's configuration, with
//! matched words marked `**like this**`.

use rlm_corpus::{Chunk, CorpusError, DocKind, Document, SearchHit, StoreStats};
use tokio_postgres::Row;

use crate::bm25::{self, Budget, Ranked};
use crate::db::{Db, Param};

const DOC_SELECT: &str =
    "SELECT id, path, kind, size_bytes, chars, hash, title, chunk_count FROM rlm_documents";
const CHUNK_SELECT: &str = "SELECT id, doc_id, ordinal, byte_start, byte_end, line_start, line_end, page, heading, body, location FROM rlm_chunks";

/// Totals of the store.
pub(crate) fn stats(db: &Db) -> Result<StoreStats, CorpusError> {
    let row = db.query_opt(
        "SELECT count(*), coalesce(sum(size_bytes), 0)::bigint, coalesce(sum(chars), 0)::bigint,
                coalesce(sum(chunk_count), 0)::bigint FROM rlm_documents",
        vec![],
    )?;
    let (documents, bytes, chars, chunks): (i64, i64, i64, i64) = row
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .unwrap_or_default();
    Ok(StoreStats {
        documents: documents as u64,
        chunks: chunks as u64,
        bytes: bytes as u64,
        chars: chars as u64,
    })
}

/// All documents, ordered by path byte-wise (as the local store's SQLite does).
pub(crate) fn documents(db: &Db) -> Result<Vec<Document>, CorpusError> {
    let rows = db.query(format!("{DOC_SELECT} ORDER BY path COLLATE \"C\""), vec![])?;
    Ok(rows.iter().map(row_to_document).collect())
}

/// The document with this id.
pub(crate) fn document(db: &Db, doc_id: &str) -> Result<Option<Document>, CorpusError> {
    let row = db.query_opt(
        format!("{DOC_SELECT} WHERE id = $1"),
        vec![Box::new(doc_id.to_string())],
    )?;
    Ok(row.as_ref().map(row_to_document))
}

/// The document with this path.
pub(crate) fn document_by_path(db: &Db, path: &str) -> Result<Option<Document>, CorpusError> {
    let row = db.query_opt(
        format!("{DOC_SELECT} WHERE path = $1"),
        vec![Box::new(path.to_string())],
    )?;
    Ok(row.as_ref().map(row_to_document))
}

/// A document's text: stored whole only when its chunks do not tile it,
/// else its chunks' bodies joined in order.
pub(crate) fn document_text(db: &Db, doc_id: &str) -> Result<String, CorpusError> {
    let row = db.query_opt(
        "SELECT coalesce(d.text,
                (SELECT string_agg(c.body, '' ORDER BY c.ordinal) FROM rlm_chunks c WHERE c.doc_id = d.id),
                '')
         FROM rlm_documents d WHERE d.id = $1",
        vec![Box::new(doc_id.to_string())],
    )?;
    row.map(|r| r.get::<_, String>(0))
        .ok_or_else(|| CorpusError::UnknownId(doc_id.to_string()))
}

/// A document's chunks in order; an unknown document is an error.
pub(crate) fn chunks_of(db: &Db, doc_id: &str) -> Result<Vec<Chunk>, CorpusError> {
    let rows = db.query(
        format!("{CHUNK_SELECT} WHERE doc_id = $1 ORDER BY ordinal"),
        vec![Box::new(doc_id.to_string())],
    )?;
    if rows.is_empty() && document(db, doc_id)?.is_none() {
        return Err(CorpusError::UnknownId(doc_id.to_string()));
    }
    Ok(rows.iter().map(row_to_chunk).collect())
}

/// The chunk with this id.
pub(crate) fn chunk(db: &Db, chunk_id: &str) -> Result<Option<Chunk>, CorpusError> {
    let row = db.query_opt(
        format!("{CHUNK_SELECT} WHERE id = $1"),
        vec![Box::new(chunk_id.to_string())],
    )?;
    Ok(row.as_ref().map(row_to_chunk))
}

/// The `k` best chunks for `query` by BM25 (see [`crate::bm25`]).
pub(crate) fn search(db: &Db, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError> {
    if query.trim().is_empty() {
        return Err(CorpusError::EmptyQuery);
    }
    // PostgreSQL cannot hold NUL in text; the chunks have none either.
    let query = query.replace('\0', " ");
    let ranked = bm25::rank(db, &query, k, Budget::default())?;
    hits(db, &ranked)
}

/// The rows of ranked chunks, in their order, with snippets:
/// `ts_headline`'s best fragment, matched words marked `**like this**`.
pub(crate) fn hits(db: &Db, ranked: &Ranked) -> Result<Vec<SearchHit>, CorpusError> {
    if ranked.hits.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = ranked.hits.iter().map(|(id, _)| id.clone()).collect();
    let rows = db.query(
        "SELECT c.id, c.doc_id, d.path, c.ordinal,
                ts_headline(c.lang_cfg, c.body, $2::text::tsquery,
                    'StartSel=**, StopSel=**, MaxWords=35, MinWords=15, ShortWord=2, MaxFragments=1'),
                c.body
         FROM unnest($1::text[]) WITH ORDINALITY AS t(id, n)
         JOIN rlm_chunks c ON c.id = t.id JOIN rlm_documents d ON d.id = c.doc_id
         ORDER BY t.n",
        vec![Box::new(ids) as Param, Box::new(ranked.any_term.clone())],
    )?;
    Ok(rows
        .iter()
        .zip(&ranked.hits)
        .map(|(r, (_, score))| {
            let text: String = r.get(5);
            let snippet: String = r.get(4);
            let snippet = if snippet.contains("**") {
                snippet
            } else {
                text.chars().take(160).collect()
            };
            SearchHit {
                chunk_id: r.get(0),
                doc_id: r.get(1),
                path: r.get(2),
                ordinal: r.get::<_, i32>(3) as u32,
                score: *score as f32,
                snippet: snippet.split_whitespace().collect::<Vec<_>>().join(" "),
                text,
            }
        })
        .collect())
}

fn row_to_document(r: &Row) -> Document {
    let kind: String = r.get(2);
    Document {
        id: r.get(0),
        path: r.get(1),
        kind: DocKind::parse(&kind).unwrap_or(DocKind::Text),
        size_bytes: r.get::<_, i64>(3) as u64,
        chars: r.get::<_, i64>(4) as u64,
        hash: r.get(5),
        title: r.get(6),
        chunk_count: r.get::<_, i32>(7) as u32,
    }
}

fn row_to_chunk(r: &Row) -> Chunk {
    Chunk {
        id: r.get(0),
        doc_id: r.get(1),
        ordinal: r.get::<_, i32>(2) as u32,
        byte_start: r.get::<_, i64>(3) as u64,
        byte_end: r.get::<_, i64>(4) as u64,
        line_start: r.get::<_, i32>(5) as u32,
        line_end: r.get::<_, i32>(6) as u32,
        page: r.get::<_, Option<i32>>(7).map(|p| p as u32),
        heading: r.get(8),
        location: r.get(10),
        text: r.get(9),
    }
}
