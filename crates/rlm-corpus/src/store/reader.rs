//! Reading an open store: documents, chunks, slices of text, BM25 search and
//! totals. Nothing here writes; see `writer.rs` for indexing.

use rusqlite::blob::Blob;
use rusqlite::{Connection, MAIN_DB, OptionalExtension};

use super::{Chunk, Document, Store, StoreStats};
use crate::backend::{CorpusStore, TextPage};
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
        let sql = "SELECT c.id, c.doc_id, c.ordinal, c.byte_start, c.byte_end, c.line_start,
                    c.line_end, c.page, c.heading, c.location, d.rowid
             FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?1";
        let Some((mut chunk, rowid)) = conn
            .query_row(sql, [chunk_id], |r| Ok((row_to_chunk(r, "")?, r.get(10)?)))
            .optional()?
        else {
            return Ok(None);
        };
        let text = DocumentText::open(&conn, &chunk.doc_id, rowid)?;
        chunk.text = text.range(chunk.byte_start, chunk.byte_end)?;
        Ok(Some(chunk))
    }

    /// The text of a document between two byte offsets (only those bytes
    /// are read).
    pub fn slice(&self, doc_id: &str, start: u64, end: u64) -> Result<String, CorpusError> {
        let conn = self.db();
        DocumentText::find(&conn, doc_id)?.range(start, end)
    }

    /// Up to `limit` bytes of a document's text from byte `offset`, both
    /// moved back to character boundaries (only those bytes are read).
    pub fn text_page(
        &self,
        doc_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<TextPage, CorpusError> {
        let conn = self.db();
        DocumentText::find(&conn, doc_id)?.page(offset, limit)
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

    /// The languages of the store's documents (detected when they were
    /// indexed), the most common first.
    pub fn languages(&self) -> Result<Vec<crate::language::LanguageShare>, CorpusError> {
        Ok(self
            .fts
            .languages()?
            .into_iter()
            .map(|(code, chunks)| crate::language::LanguageShare::new(&code, chunks))
            .collect())
    }

    /// Number of chunks in the full-text index (equals `stats().chunks` when consistent).
    pub fn indexed_chunks(&self) -> u64 {
        self.fts.num_chunks()
    }
}

const DOC_SELECT: &str =
    "SELECT id, path, kind, size_bytes, chars, hash, title, chunk_count FROM documents";
const CHUNK_SELECT: &str = "SELECT id, doc_id, ordinal, byte_start, byte_end, line_start, line_end, page, heading, location FROM chunks";

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
        location: r.get(9)?,
        text: doc_text
            .get(byte_start as usize..byte_end as usize)
            .unwrap_or_default()
            .to_string(),
    })
}

/// A document's text in the database, read by byte range through SQLite's
/// incremental blob I/O: a lookup reads the pages holding the range, not the
/// whole text (a chunk of a 400 MB document costs what it returns).
struct DocumentText<'c> {
    doc_id: String,
    blob: Blob<'c>,
}

impl<'c> DocumentText<'c> {
    /// The text of the document with this id ([`CorpusError::UnknownId`]
    /// when there is none).
    fn find(conn: &'c Connection, doc_id: &str) -> Result<Self, CorpusError> {
        let rowid: i64 = conn
            .query_row("SELECT rowid FROM documents WHERE id = ?1", [doc_id], |r| {
                r.get(0)
            })
            .optional()?
            .ok_or_else(|| CorpusError::UnknownId(doc_id.to_string()))?;
        Self::open(conn, doc_id, rowid)
    }

    fn open(conn: &'c Connection, doc_id: &str, rowid: i64) -> Result<Self, CorpusError> {
        let blob = conn.blob_open(MAIN_DB, c"documents", c"text", rowid, true)?;
        Ok(DocumentText {
            doc_id: doc_id.to_string(),
            blob,
        })
    }

    fn len(&self) -> u64 {
        self.blob.len() as u64
    }

    fn bytes(&self, start: u64, end: u64) -> Result<Vec<u8>, CorpusError> {
        let mut buf = vec![0u8; (end - start) as usize];
        self.blob.read_at_exact(&mut buf, start as usize)?;
        Ok(buf)
    }

    /// Bytes `start..end`, which must lie on character boundaries.
    fn range(&self, start: u64, end: u64) -> Result<String, CorpusError> {
        let len = self.len();
        let bad = || CorpusError::BadRange {
            doc_id: self.doc_id.clone(),
            start,
            end,
            len,
        };
        if start > end || end > len {
            return Err(bad());
        }
        // A range inside a character fails UTF-8 validation at its ends
        // (the text itself is valid UTF-8).
        String::from_utf8(self.bytes(start, end)?).map_err(|_| bad())
    }

    fn page(&self, offset: u64, limit: u64) -> Result<TextPage, CorpusError> {
        let total = self.len();
        let start = self.floor_boundary(offset.min(total))?;
        let mut end = self.floor_boundary(start.saturating_add(limit).min(total))?;
        if end == start && start < total {
            // A page smaller than one character still moves forward.
            end = self.floor_boundary((start + 4).min(total))?;
            if end == start {
                end = total;
            }
        }
        Ok(TextPage {
            start,
            end,
            total_bytes: total,
            content: self.range(start, end)?,
        })
    }

    /// `at`, or the start of the character it falls inside.
    fn floor_boundary(&self, at: u64) -> Result<u64, CorpusError> {
        if at == 0 || at >= self.len() {
            return Ok(at.min(self.len()));
        }
        let from = at.saturating_sub(3);
        let window = self.bytes(from, at + 1)?;
        // A UTF-8 continuation byte is 0b10xx_xxxx; a character starts at
        // most three bytes before it.
        let back = window
            .iter()
            .rev()
            .position(|b| b & 0xC0 != 0x80)
            .unwrap_or(0) as u64;
        Ok(at - back)
    }
}
