//! What extraction gives: the kind of a document, its text and places,
//! or why a file gave none. Shared by the plain readers (`extract`) and
//! the office, e-book, mail and archive readers (`office`).

use serde::{Deserialize, Serialize};

use crate::chunk::Section;

/// What kind of document a file is; decides how its text is extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocKind {
    /// Plain text.
    Text,
    /// Markdown (headings are tracked per chunk).
    Markdown,
    /// Source code or configuration.
    Code,
    /// HTML: visible text only.
    Html,
    /// PDF: text per page.
    Pdf,
    /// JSON, as text.
    Json,
    /// Comma-separated values, as text.
    Csv,
    /// Tab-separated values, as text.
    Tsv,
    /// Word document (Office Open XML): headings, lists, tables.
    Docx,
    /// Excel workbook (Office Open XML): a sheet's rows with their column names.
    Xlsx,
    /// Legacy binary Excel workbook.
    Xls,
    /// PowerPoint presentation (Office Open XML): text per slide.
    Pptx,
    /// OpenDocument text.
    Odt,
    /// OpenDocument spreadsheet.
    Ods,
    /// OpenDocument presentation.
    Odp,
    /// Rich Text Format.
    Rtf,
    /// EPUB e-book: text per chapter.
    Epub,
    /// One e-mail message (an .eml file, or one message of an mbox).
    Email,
}

impl DocKind {
    /// The lowercase name used in the store and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Text => "text",
            DocKind::Markdown => "markdown",
            DocKind::Code => "code",
            DocKind::Html => "html",
            DocKind::Pdf => "pdf",
            DocKind::Json => "json",
            DocKind::Csv => "csv",
            DocKind::Tsv => "tsv",
            DocKind::Docx => "docx",
            DocKind::Xlsx => "xlsx",
            DocKind::Xls => "xls",
            DocKind::Pptx => "pptx",
            DocKind::Odt => "odt",
            DocKind::Ods => "ods",
            DocKind::Odp => "odp",
            DocKind::Rtf => "rtf",
            DocKind::Epub => "epub",
            DocKind::Email => "email",
        }
    }

    /// True for kinds whose text marks headings with `#` (Markdown, and
    /// the office files and e-books written as Markdown-like text).
    pub fn has_headings(self) -> bool {
        matches!(
            self,
            DocKind::Markdown
                | DocKind::Docx
                | DocKind::Xlsx
                | DocKind::Xls
                | DocKind::Pptx
                | DocKind::Odt
                | DocKind::Ods
                | DocKind::Odp
                | DocKind::Epub
        )
    }

    /// Parses the name written by [`DocKind::as_str`].
    pub fn parse(s: &str) -> Option<DocKind> {
        Some(match s {
            "text" => DocKind::Text,
            "markdown" => DocKind::Markdown,
            "code" => DocKind::Code,
            "html" => DocKind::Html,
            "pdf" => DocKind::Pdf,
            "json" => DocKind::Json,
            "csv" => DocKind::Csv,
            "tsv" => DocKind::Tsv,
            "docx" => DocKind::Docx,
            "xlsx" => DocKind::Xlsx,
            "xls" => DocKind::Xls,
            "pptx" => DocKind::Pptx,
            "odt" => DocKind::Odt,
            "ods" => DocKind::Ods,
            "odp" => DocKind::Odp,
            "rtf" => DocKind::Rtf,
            "epub" => DocKind::Epub,
            "email" => DocKind::Email,
            _ => return None,
        })
    }
}

/// Why a file was not indexed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Contains NUL bytes and is not a PDF.
    Binary,
    /// Zero bytes, or no text after extraction.
    Empty,
    /// A known format we have no extractor for (office files, archives, media).
    UnsupportedFormat(String),
    /// Larger than the configured maximum file size.
    TooLarge,
    /// Protected by a password: its content cannot be read.
    Encrypted,
    /// An Office file with macros (`.docm`, `vbaProject.bin`): not read.
    Macros,
    /// A legacy binary format no extractor reads (`.doc`, `.ppt`).
    LegacyFormat(String),
    /// A PDF whose pages have no text layer (a scan) and no OCR engine to
    /// read them: how many pages.
    NoTextLayer(u32),
    /// A PDF whose pages have no text layer and where OCR found no text
    /// either: how many pages.
    NoTextFound(u32),
    /// An archive inside archives nested deeper than
    /// the container depth limit (`MAX_CONTAINER_DEPTH`).
    NestedTooDeep,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Binary => write!(f, "binary"),
            SkipReason::Empty => write!(f, "empty"),
            SkipReason::UnsupportedFormat(ext) => write!(f, "unsupported format (.{ext})"),
            SkipReason::TooLarge => write!(f, "too large"),
            SkipReason::Encrypted => write!(
                f,
                "encrypted (password-protected): save a copy without a password to index it"
            ),
            SkipReason::Macros => write!(
                f,
                "contains macros, not read: save a copy without macros (.docx, .xlsx, .pptx) to index it"
            ),
            SkipReason::LegacyFormat(ext) => write!(
                f,
                "legacy binary format (.{ext}): save it in the current format (.{ext}x) to index it"
            ),
            SkipReason::NoTextLayer(n) => write!(
                f,
                "no text layer on its {n} page(s), a scan?: install tesseract-ocr (and the language packs of your documents) to read them"
            ),
            SkipReason::NoTextFound(n) => {
                write!(f, "no text on its {n} page(s), not even by OCR")
            }
            SkipReason::NestedTooDeep => write!(
                f,
                "an archive nested too deep in other archives: unpack it to index it"
            ),
        }
    }
}

/// Text extracted from one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The kind the file was read as.
    pub kind: DocKind,
    /// The extracted text; chunk byte spans point into it.
    pub text: String,
    /// Where each page, slide, sheet or chapter starts in `text` (PDFs,
    /// office files, e-books, mail): chunks never span two.
    pub sections: Option<Vec<Section>>,
    /// A title found in the content (first heading, HTML title).
    pub title: Option<String>,
    /// Invalid UTF-8 sequences that were replaced.
    pub lossy: bool,
    /// PDF pages without a text layer, and how many OCR read.
    pub scanned: ScannedPages,
}

/// Pages of a PDF without a text layer (scans): how many stayed without
/// text, how many OCR read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScannedPages {
    /// Pages left without text.
    pub without_text: u32,
    /// Pages whose text OCR read.
    pub read_by_ocr: u32,
}

/// Why a file of a supported kind could not be read: its content is broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The PDF parser gave up on the file (it panicked).
    #[error("corrupt PDF: the parser could not read it")]
    UnreadablePdf,
    /// The PDF parser reported what is wrong with the file.
    #[error("corrupt PDF: {0}")]
    CorruptPdf(String),
    /// The PDF is built to exhaust the parser (nesting, loops, a stream that
    /// inflates too far): not read.
    #[error("PDF refused: {0}")]
    RefusedPdf(String),
    /// An office file, e-book, mail or archive whose content is broken:
    /// truncated, not of the format its name says, or invalid inside.
    #[error("corrupt {format}: {why}")]
    Corrupt {
        /// The format it was read as (`DOCX`, `ZIP archive`, …).
        format: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A file built to exhaust the reader (a ZIP bomb, too many members):
    /// not read.
    #[error("{format} refused: {why}")]
    Refused {
        /// The format it was read as.
        format: &'static str,
        /// Which limit it broke.
        why: String,
    },
}

/// The outcome of reading a file's bytes.
#[derive(Debug)]
pub enum Extraction {
    /// Text to index.
    Text(Extracted),
    /// Not indexed, for this reason.
    Skipped(SkipReason),
    /// The file is of a supported kind but its content is broken (corrupt PDF).
    Failed(ExtractError),
    /// A file that holds several documents (an archive's members, a
    /// mailbox's messages, a message's attachments), each with its outcome.
    Many(Vec<Member>),
}

/// One document inside a file that holds several.
#[derive(Debug)]
pub struct Member {
    /// Its name under the file's path (`inner/report.docx`, `message-3`);
    /// empty for the file itself (a message whose attachments follow).
    pub name: String,
    /// What reading it gave.
    pub extraction: Extraction,
}

/// `extracted` as text to index, or skipped as empty when it has none.
pub(crate) fn non_empty(extracted: Extracted) -> Extraction {
    if extracted.text.trim().is_empty() {
        return Extraction::Skipped(SkipReason::Empty);
    }
    Extraction::Text(extracted)
}

/// The first non-empty line, as a title (at most 120 characters).
pub(crate) fn first_line_title(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(120).collect())
}
