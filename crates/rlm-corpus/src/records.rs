//! The records every store back-end returns: documents, chunks with their
//! spans, totals, and the stable ids derived from paths.

use serde::{Deserialize, Serialize};

use crate::extract::DocKind;

/// A document of the corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Stable id, derived from `path`.
    pub id: String,
    /// Corpus-relative path: the indexed folder's name, then the path inside it.
    pub path: String,
    /// How the text was extracted.
    pub kind: DocKind,
    /// Size of the file in bytes.
    pub size_bytes: u64,
    /// Characters of extracted text.
    pub chars: u64,
    /// BLAKE3 hash of the file's bytes (hex).
    pub hash: String,
    /// First heading, HTML title, or file name.
    pub title: String,
    /// Number of chunks.
    pub chunk_count: u32,
}

/// An ordered piece of a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Stable id: `<document id>-<ordinal>`.
    pub id: String,
    /// The document it belongs to.
    pub doc_id: String,
    /// Position in the document, 0-based and contiguous.
    pub ordinal: u32,
    /// Byte offset of the chunk in the document's extracted text.
    pub byte_start: u64,
    /// Byte offset one past the chunk's end.
    pub byte_end: u64,
    /// 1-based first line.
    pub line_start: u32,
    /// 1-based last line.
    pub line_end: u32,
    /// 1-based PDF page.
    pub page: Option<u32>,
    /// Nearest Markdown section heading.
    pub heading: Option<String>,
    /// Where the chunk is when its place is not a page (`slide 4`,
    /// `sheet "Q3", rows 10–14`, `message of 2024-03-02 from …`); `None` in
    /// stores written before locations were kept.
    #[serde(default)]
    pub location: Option<String>,
    /// The chunk's text.
    pub text: String,
}

impl Chunk {
    /// The place a person cites for this chunk: its location, else its page
    /// (`page 12`); `None` for text without places.
    pub fn place(&self) -> Option<String> {
        self.location
            .clone()
            .or_else(|| self.page.map(|p| format!("page {p}")))
    }
}

/// Totals of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreStats {
    /// Documents.
    pub documents: u64,
    /// Chunks.
    pub chunks: u64,
    /// Bytes of the original files.
    pub bytes: u64,
    /// Characters of extracted text.
    pub chars: u64,
}

/// Stable document id for a corpus-relative path.
pub fn document_id(path: &str) -> String {
    blake3::hash(path.as_bytes()).to_hex()[..16].to_string()
}

/// Chunk id for a document id and ordinal.
pub fn chunk_id(doc_id: &str, ordinal: u32) -> String {
    format!("{doc_id}-{ordinal}")
}
