//! File kinds and text extraction.

use std::path::Path;

use crate::chunk::{page_sections, parse_atx_heading};
pub use crate::extracted::{
    DocKind, ExtractError, Extracted, Extraction, Member, ScannedPages, SkipReason,
};
use crate::extracted::{first_line_title, non_empty};
use crate::html::html_to_text;

/// Formats recognised by extension that we cannot extract text from.
const UNSUPPORTED: &[&str] = &[
    "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "png", "jpg", "jpeg", "gif", "bmp",
    "webp", "ico", "tif", "tiff", "mp3", "mp4", "wav", "flac", "ogg", "avi", "mov", "mkv", "woff",
    "woff2", "ttf", "otf", "msg", "pst", "exe", "dll", "so", "dylib", "o", "a", "class", "pyc",
    "wasm", "sqlite", "db", "bin", "iso", "dmg",
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
    if let Some(kind) = crate::office::kind_of_extension(&ext) {
        return kind;
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
    extract_nested(path, bytes, 0)
}

/// [`extract`] of a file found `depth` containers deep (an archive's member,
/// an attachment): containers deeper than the limit are not opened.
pub(crate) fn extract_nested(path: &Path, bytes: &[u8], depth: usize) -> Extraction {
    if bytes.is_empty() {
        return Extraction::Skipped(SkipReason::Empty);
    }
    if !bytes.starts_with(b"%PDF-")
        && let Some(outcome) = crate::office::extract_office(path, bytes, depth, extract_nested)
    {
        return outcome;
    }
    let kind = match detect_kind(path, bytes) {
        Ok(kind) => kind,
        Err(reason) => return Extraction::Skipped(reason),
    };
    let extracted = match kind {
        DocKind::Pdf => match extract_pdf(bytes) {
            // A scan with no text at all: say so, not "empty".
            Ok(e) if e.text.trim().is_empty() && e.scanned.without_text > 0 => {
                let pages = e.scanned.without_text;
                return Extraction::Skipped(if crate::ocr::available() {
                    SkipReason::NoTextFound(pages)
                } else {
                    SkipReason::NoTextLayer(pages)
                });
            }
            Ok(e) => e,
            Err(e) => return Extraction::Failed(e),
        },
        DocKind::Html => {
            let (raw, lossy) = decode_lossy(bytes);
            let html = html_to_text(&raw);
            Extracted {
                kind,
                text: html.text,
                sections: None,
                title: html.title,
                lossy,
                scanned: ScannedPages::default(),
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
                sections: None,
                title,
                lossy,
                scanned: ScannedPages::default(),
            }
        }
    };
    non_empty(extracted)
}

pub(crate) fn decode_lossy(bytes: &[u8]) -> (String, bool) {
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
    let ocr = crate::ocr::available();
    let pages = crate::pdf::pdf_pages(bytes, ocr).map_err(|e| match e {
        PdfFailure::Unreadable => ExtractError::UnreadablePdf,
        PdfFailure::Corrupt(why) => ExtractError::CorruptPdf(why),
        PdfFailure::Refused(why) => ExtractError::RefusedPdf(why),
    })?;
    let mut text = String::new();
    let mut starts = Vec::with_capacity(pages.len());
    let mut scanned = ScannedPages::default();
    for page in pages {
        starts.push(text.len());
        let mut page_text = page.text;
        if page_text.trim().is_empty() {
            // A scanned page: what OCR reads in its images, if anything.
            let read: Vec<String> = page
                .images
                .iter()
                .filter_map(crate::ocr::read_image)
                .collect();
            if read.is_empty() {
                scanned.without_text += 1;
            } else {
                scanned.read_by_ocr += 1;
                page_text = read.join("\n\n");
            }
        }
        text.push_str(&page_text);
        if !page_text.is_empty() && !page_text.ends_with('\n') {
            text.push('\n');
        }
    }
    Ok(Extracted {
        kind: DocKind::Pdf,
        title: first_line_title(&text),
        text,
        sections: Some(page_sections(&starts)),
        lossy: false,
        scanned,
    })
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
        assert_eq!(detect_kind(p("a.docx"), b"PK"), Ok(DocKind::Docx));
        assert_eq!(
            detect_kind(p("a.doc"), b"\xD0\xCF"),
            Err(SkipReason::LegacyFormat("doc".into()))
        );
        assert_eq!(
            detect_kind(p("a.7z"), b"7z"),
            Err(SkipReason::UnsupportedFormat("7z".into()))
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
