//! Reading an open store: documents, chunks, slices of text, BM25 search and
//! totals. Nothing here writes; see `writer.rs` for indexing.

use rusqlite::OptionalExtension;

use super::{Chunk, Document, Store, StoreStats};
use crate::backend::{CorpusStore, slice_text};
use crate::embed::Embedder;
use crate::error::CorpusError;
use crate::extract::DocKind;
use crate::fts::SearchHit;
use crate::hybrid::{ExpandOptions, ExpandedFiles, HybridResults, SearchOptions};
use crate::vector::RetrievalError;

impl Store {
    /// Totals of the store.
    pub fn stats(&self) -> Result<StoreStats, CorpusError> {
        let conn = self.db();
        let (documents, bytes, chars, chunks): (i64, i64, i64, i64) = conn.query_row(
            "SELECT count(*), coalesce(sum(size_bytes), 0), coalesce(sum(chars), 0),
                    coalesce(sum(chunk_count), 0) FROM documents",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        Ok(StoreStats {
            documents: documents as u64,
            chunks: chunks as u64,
            bytes: bytes as u64,
            chars: chars as u64,
        })
    }

    /// All documents, ordered by path (an in-memory store's in the order
    /// they were given).
    pub fn documents(&self) -> Result<Vec<Document>, CorpusError> {
        let order = if self.in_memory { "rowid" } else { "path" };
        let conn = self.db();
        let mut stmt = conn.prepare(&format!("{DOC_SELECT} ORDER BY {order}"))?;
        let docs = stmt
            .query_map([], row_to_document)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(docs)
    }

    /// The document with this id.
    pub fn document(&self, doc_id: &str) -> Result<Option<Document>, CorpusError> {
        let conn = self.db();
        Ok(conn
            .query_row(
                &format!("{DOC_SELECT} WHERE id = ?1"),
                [doc_id],
                row_to_document,
            )
            .optional()?)
    }

    /// The document with this corpus-relative path.
    pub fn document_by_path(&self, path: &str) -> Result<Option<Document>, CorpusError> {
        let conn = self.db();
        Ok(conn
            .query_row(
                &format!("{DOC_SELECT} WHERE path = ?1"),
                [path],
                row_to_document,
            )
            .optional()?)
    }

    /// The whole extracted text of a document.
    pub fn document_text(&self, doc_id: &str) -> Result<String, CorpusError> {
        let conn = self.db();
        conn.query_row("SELECT text FROM documents WHERE id = ?1", [doc_id], |r| {
            r.get(0)
        })
        .optional()?
        .ok_or_else(|| CorpusError::UnknownId(doc_id.to_string()))
    }

    /// A document's chunks in order.
    pub fn chunks_of(&self, doc_id: &str) -> Result<Vec<Chunk>, CorpusError> {
        let text = self.document_text(doc_id)?;
        let conn = self.db();
        let mut stmt = conn.prepare(&format!(
            "{CHUNK_SELECT} WHERE doc_id = ?1 ORDER BY ordinal"
        ))?;
        let chunks = stmt
            .query_map([doc_id], |r| row_to_chunk(r, &text))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(chunks)
    }

    /// The chunk with this id.
    pub fn chunk(&self, chunk_id: &str) -> Result<Option<Chunk>, CorpusError> {
        let conn = self.db();
        // Only the chunk's bytes are read from the document, not the whole text.
        let sql =
            "SELECT c.id, c.doc_id, c.ordinal, c.byte_start, c.byte_end, c.line_start,
                    c.line_end, c.page, c.heading,
                    CAST(substr(CAST(d.text AS BLOB), c.byte_start + 1, c.byte_end - c.byte_start) AS TEXT)
             FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?1";
        Ok(conn
            .query_row(sql, [chunk_id], |r| {
                let mut c = row_to_chunk(r, "")?;
                c.text = r.get(9)?;
                Ok(c)
            })
            .optional()?)
    }

    /// The text of a document between two byte offsets.
    pub fn slice(&self, doc_id: &str, start: u64, end: u64) -> Result<String, CorpusError> {
        let text = self.document_text(doc_id)?;
        slice_text(doc_id, &text, start, end)
    }

    /// Retrieves the best chunks for `query` by BM25, vectors or both
    /// ([`CorpusStore::search_hybrid`], written once for every back-end).
    pub fn search_hybrid(
        &self,
        query: &str,
        opts: &SearchOptions,
        embedder: Option<&dyn Embedder>,
    ) -> Result<HybridResults, RetrievalError> {
        CorpusStore::search_hybrid(self, query, opts, embedder)
    }

    /// Expands retrieved chunks to their files within the caps
    /// ([`CorpusStore::expand_files`]).
    pub fn expand_files<'a>(
        &self,
        entry_chunk_ids: impl IntoIterator<Item = &'a str>,
        opts: &ExpandOptions,
    ) -> Result<ExpandedFiles, RetrievalError> {
        let ids: Vec<&str> = entry_chunk_ids.into_iter().collect();
        CorpusStore::expand_files(self, &ids, opts)
    }

    /// The `k` best chunks for `query` by BM25.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError> {
        if query.trim().is_empty() {
            return Err(CorpusError::EmptyQuery);
        }
        self.fts.search(query, k)
    }

    /// Number of chunks in the full-text index (equals `stats().chunks` when consistent).
    pub fn indexed_chunks(&self) -> u64 {
        self.fts.num_chunks()
    }
}

const DOC_SELECT: &str =
    "SELECT id, path, kind, size_bytes, chars, hash, title, chunk_count FROM documents";
const CHUNK_SELECT: &str = "SELECT id, doc_id, ordinal, byte_start, byte_end, line_start, line_end, page, heading FROM chunks";

fn row_to_document(r: &rusqlite::Row<'_>) -> rusqlite::Result<Document> {
    let kind: String = r.get(2)?;
    Ok(Document {
        id: r.get(0)?,
        path: r.get(1)?,
        kind: DocKind::parse(&kind).unwrap_or(DocKind::Text),
        size_bytes: r.get::<_, i64>(3)? as u64,
        chars: r.get::<_, i64>(4)? as u64,
        hash: r.get(5)?,
        title: r.get(6)?,
        chunk_count: r.get::<_, i64>(7)? as u32,
    })
}

fn row_to_chunk(r: &rusqlite::Row<'_>, doc_text: &str) -> rusqlite::Result<Chunk> {
    let byte_start = r.get::<_, i64>(3)? as u64;
    let byte_end = r.get::<_, i64>(4)? as u64;
    Ok(Chunk {
        id: r.get(0)?,
        doc_id: r.get(1)?,
        ordinal: r.get::<_, i64>(2)? as u32,
        byte_start,
        byte_end,
        line_start: r.get::<_, i64>(5)? as u32,
        line_end: r.get::<_, i64>(6)? as u32,
        page: r.get::<_, Option<i64>>(7)?.map(|p| p as u32),
        heading: r.get(8)?,
        text: doc_text
            .get(byte_start as usize..byte_end as usize)
            .unwrap_or_default()
            .to_string(),
    })
}
