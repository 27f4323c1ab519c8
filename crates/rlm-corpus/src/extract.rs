//! File kinds and text extraction.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::chunk::parse_atx_heading;
use crate::html::html_to_text;

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
        }
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
            _ => return None,
        })
    }
}

/// Formats recognised by extension that we cannot extract text from.
const UNSUPPORTED: &[&str] = &[
    "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "rtf", "epub", "zip", "gz",
    "tgz", "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "png", "jpg", "jpeg", "gif", "bmp",
    "webp", "ico", "tif", "tiff", "mp3", "mp4", "wav", "flac", "ogg", "avi", "mov", "mkv", "woff",
    "woff2", "ttf", "otf", "exe", "dll", "so", "dylib", "o", "a", "class", "pyc", "wasm", "sqlite",
    "db", "bin", "iso", "dmg",
];

const CODE: &[&str] = &[
    "rs",
    "py",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "go",
    "java",
    "kt",
    "kts",
    "scala",
    "c",
    "h",
    "cc",
    "cpp",
    "cxx",
    "hpp",
    "hh",
    "cs",
    "rb",
    "php",
    "pl",
    "pm",
    "swift",
    "m",
    "mm",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "sql",
    "r",
    "jl",
    "lua",
    "hs",
    "ml",
    "mli",
    "ex",
    "exs",
    "erl",
    "clj",
    "cljs",
    "dart",
    "vue",
    "svelte",
    "css",
    "scss",
    "sass",
    "less",
    "toml",
    "yaml",
    "yml",
    "ini",
    "cfg",
    "conf",
    "xml",
    "gradle",
    "cmake",
    "mk",
    "proto",
    "graphql",
    "tf",
    "nix",
    "zig",
    "v",
    "sv",
    "vhd",
    "asm",
    "s",
    "bat",
    "dockerfile",
    "makefile",
    "lock",
];

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
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Binary => write!(f, "binary"),
            SkipReason::Empty => write!(f, "empty"),
            SkipReason::UnsupportedFormat(ext) => write!(f, "unsupported format (.{ext})"),
            SkipReason::TooLarge => write!(f, "too large"),
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
    /// For PDFs: the byte offset where each page's text starts.
    pub page_starts: Option<Vec<usize>>,
    /// A title found in the content (first heading, HTML title).
    pub title: Option<String>,
    /// Invalid UTF-8 sequences that were replaced.
    pub lossy: bool,
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
}

/// Picks the kind of a file from its name and first bytes; `Err` is a skip.
pub fn detect_kind(path: &Path, head: &[u8]) -> Result<DocKind, SkipReason> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    if ext == "pdf" || head.starts_with(b"%PDF-") {
        return Ok(DocKind::Pdf);
    }
    if UNSUPPORTED.contains(&ext.as_str()) {
        return Err(SkipReason::UnsupportedFormat(ext));
    }
    // ripgrep's heuristic: a NUL byte near the start means binary.
    if memchr::memchr(0, &head[..head.len().min(8192)]).is_some() {
        return Err(SkipReason::Binary);
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    Ok(match ext.as_str() {
        "md" | "markdown" | "mdx" => DocKind::Markdown,
        "html" | "htm" | "xhtml" => DocKind::Html,
        "json" | "jsonl" | "ndjson" | "geojson" => DocKind::Json,
        "csv" => DocKind::Csv,
        "tsv" | "tab" => DocKind::Tsv,
        e if CODE.contains(&e) => DocKind::Code,
        _ if CODE.contains(&name.as_str()) => DocKind::Code,
        _ => DocKind::Text,
    })
}

/// Extracts the text of a file whose bytes are `bytes`.
pub fn extract(path: &Path, bytes: &[u8]) -> Extraction {
    if bytes.is_empty() {
        return Extraction::Skipped(SkipReason::Empty);
    }
    let kind = match detect_kind(path, bytes) {
        Ok(kind) => kind,
        Err(reason) => return Extraction::Skipped(reason),
    };
    let extracted = match kind {
        DocKind::Pdf => match extract_pdf(bytes) {
            Ok(e) => e,
            Err(e) => return Extraction::Failed(e),
        },
        DocKind::Html => {
            let (raw, lossy) = decode_lossy(bytes);
            let html = html_to_text(&raw);
            Extracted {
                kind,
                text: html.text,
                page_starts: None,
                title: html.title,
                lossy,
            }
        }
        _ => {
            let (text, lossy) = decode_lossy(bytes);
            let title = match kind {
                DocKind::Markdown | DocKind::Text => first_heading(&text),
                _ => None,
            };
            Extracted {
                kind,
                text,
                page_starts: None,
                title,
                lossy,
            }
        }
    };
    if extracted.text.trim().is_empty() {
        return Extraction::Skipped(SkipReason::Empty);
    }
    Extraction::Text(extracted)
}

fn decode_lossy(bytes: &[u8]) -> (String, bool) {
    // A UTF-8 byte-order mark is not text.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), false),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), true),
    }
}

fn first_heading(text: &str) -> Option<String> {
    text.lines()
        .take(200)
        .find_map(|l| parse_atx_heading(l.trim_start()))
}

fn extract_pdf(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    use crate::pdf::PdfFailure;
    let pages = crate::pdf::pdf_pages(bytes).map_err(|e| match e {
        PdfFailure::Unreadable => ExtractError::UnreadablePdf,
        PdfFailure::Corrupt(why) => ExtractError::CorruptPdf(why),
        PdfFailure::Refused(why) => ExtractError::RefusedPdf(why),
    })?;
    let mut text = String::new();
    let mut starts = Vec::with_capacity(pages.len());
    for page in pages {
        starts.push(text.len());
        text.push_str(&page);
        if !page.is_empty() && !page.ends_with('\n') {
            text.push('\n');
        }
    }
    Ok(Extracted {
        kind: DocKind::Pdf,
        title: first_line_title(&text),
        text,
        page_starts: Some(starts),
        lossy: false,
    })
}

fn first_line_title(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(120).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_extension_and_content() {
        let p = Path::new;
        assert_eq!(detect_kind(p("a.md"), b"# x"), Ok(DocKind::Markdown));
        assert_eq!(detect_kind(p("a.RS"), b"fn"), Ok(DocKind::Code));
        assert_eq!(detect_kind(p("Makefile"), b"all:"), Ok(DocKind::Code));
        assert_eq!(detect_kind(p("x"), b"%PDF-1.4"), Ok(DocKind::Pdf));
        assert_eq!(detect_kind(p("a.bin2"), b"ab\0cd"), Err(SkipReason::Binary));
        assert_eq!(
            detect_kind(p("a.docx"), b"PK"),
            Err(SkipReason::UnsupportedFormat("docx".into()))
        );
        assert_eq!(detect_kind(p("notes"), b"hello"), Ok(DocKind::Text));
    }

    #[test]
    fn invalid_utf8_is_lossy_not_fatal() {
        let Extraction::Text(e) = extract(Path::new("a.txt"), b"caf\xe9 ok") else {
            panic!("expected text")
        };
        assert!(e.lossy);
        assert!(e.text.contains("caf\u{FFFD} ok"));
    }

    #[test]
    fn empty_and_whitespace_files_are_skipped() {
        assert!(matches!(
            extract(Path::new("a.txt"), b""),
            Extraction::Skipped(SkipReason::Empty)
        ));
        assert!(matches!(
            extract(Path::new("a.txt"), b"  \n\n "),
            Extraction::Skipped(SkipReason::Empty)
        ));
    }

    #[test]
    fn corrupt_pdf_fails_cleanly() {
        let out = extract(Path::new("x.pdf"), b"%PDF-1.4 garbage garbage");
        assert!(matches!(out, Extraction::Failed(e) if e.to_string().starts_with("corrupt PDF")));
    }

    #[test]
    fn structurally_broken_pdfs_fail_as_corrupt() {
        let inputs: [&[u8]; 4] = [
            b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF",
            b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n3 0 obj<</Type/Page/Contents 9 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF",
            b"%PDF-",
            b"%PDF-1.4\nxref\n0 1\n0000000000 65535 f \ntrailer<</Size 1>>\nstartxref\n9\n%%EOF",
        ];
        for input in inputs {
            match extract(Path::new("x.pdf"), input) {
                Extraction::Failed(e) => {
                    assert!(e.to_string().starts_with("corrupt PDF"), "{e}")
                }
                Extraction::Skipped(SkipReason::Empty) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn markdown_title_is_first_heading() {
        let Extraction::Text(e) = extract(Path::new("a.md"), b"intro\n## Terms of lease\nbody")
        else {
            panic!()
        };
        assert_eq!(e.title.as_deref(), Some("Terms of lease"));
    }
}
