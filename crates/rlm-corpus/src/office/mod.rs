//! The documents people keep besides plain text: Word, Excel and
//! PowerPoint files (Office Open XML and legacy `.xls`), OpenDocument text,
//! spreadsheets and presentations, RTF, EPUB e-books, e-mail (`.eml`,
//! `.mbox`) and ZIP archives.
//!
//! Each becomes Markdown-like text (headings as `#`, list items as `-`,
//! a table's or sheet's rows each with their column names) plus the places
//! people cite (pages, slides, sheets and their rows, chapters, messages)
//! as [`Section`]s. A file that holds several documents (an archive, a
//! mailbox, a message with attachments) yields [`Extraction::Many`].
//!
//! All of it is untrusted input: ZIP packages are read under the limits of
//! [`package`], containers nest at most [`MAX_CONTAINER_DEPTH`] deep, and a
//! reader that panics on a hostile file makes that file unreadable, not
//! the run.

use std::path::Path;

use crate::chunk::{Place, Section};
use crate::extracted::{
    DocKind, ExtractError, Extracted, Extraction, Member, SkipReason, non_empty,
};

mod archive;
mod docx;
mod epub;
mod mail;
mod odf;
pub(crate) mod package;
mod pptx;
mod rtf;
mod sheet;
mod xml;

#[cfg(test)]
mod proptests;

/// How many containers (archives, messages) deep a file is still opened:
/// a member of an archive attached to a message is two deep.
pub const MAX_CONTAINER_DEPTH: usize = 3;

/// The first bytes of an OLE compound file: legacy Office files, and the
/// wrapper Office puts around a password-protected `.docx`/`.xlsx`/`.pptx`.
const COMPOUND_FILE_MAGIC: &[u8] = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1";

/// Reads a file found inside a container (an archive's member, an
/// attachment) `depth` containers deep: the crate's `extract_nested`,
/// handed in so that this module does not import its caller.
pub(crate) type ReadFile = fn(&Path, &[u8], usize) -> Extraction;

/// Why a format reader gave no text.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Not read, for this reason (encrypted, macros).
    Skip(SkipReason),
    /// The content is broken: what is wrong.
    Corrupt(String),
    /// The content is built to exhaust the reader: which limit it broke.
    Refused(String),
}

impl Refusal {
    /// This refusal as the outcome of reading a file of `format`.
    pub fn into_extraction(self, format: &'static str) -> Extraction {
        match self {
            Refusal::Skip(reason) => Extraction::Skipped(reason),
            Refusal::Corrupt(why) => Extraction::Failed(ExtractError::Corrupt { format, why }),
            Refusal::Refused(why) => Extraction::Failed(ExtractError::Refused { format, why }),
        }
    }
}

/// The kind of a file this module reads, by its extension; `Err` when the
/// extension names a format that is not read (macros, legacy binaries).
pub(crate) fn kind_of_extension(ext: &str) -> Option<Result<DocKind, SkipReason>> {
    Some(Ok(match ext {
        "docx" | "dotx" => DocKind::Docx,
        "xlsx" | "xltx" | "xlsb" => DocKind::Xlsx,
        "xls" => DocKind::Xls,
        "pptx" | "ppsx" | "potx" => DocKind::Pptx,
        "odt" | "ott" => DocKind::Odt,
        "ods" | "ots" => DocKind::Ods,
        "odp" | "otp" => DocKind::Odp,
        "rtf" => DocKind::Rtf,
        "epub" => DocKind::Epub,
        "eml" => DocKind::Email,
        "docm" | "dotm" | "xlsm" | "xltm" | "pptm" | "potm" | "ppsm" => {
            return Some(Err(SkipReason::Macros));
        }
        "doc" | "dot" | "ppt" | "pps" | "pot" => {
            return Some(Err(SkipReason::LegacyFormat(ext.to_string())));
        }
        _ => return None,
    }))
}

/// The name of a format in messages.
fn format_name(kind: DocKind) -> &'static str {
    match kind {
        DocKind::Docx => "DOCX",
        DocKind::Xlsx => "XLSX",
        DocKind::Xls => "XLS",
        DocKind::Pptx => "PPTX",
        DocKind::Odt => "ODT",
        DocKind::Ods => "ODS",
        DocKind::Odp => "ODP",
        DocKind::Rtf => "RTF",
        DocKind::Epub => "EPUB",
        DocKind::Email => "e-mail",
        _ => "document",
    }
}

/// Reads `bytes` when `path`'s extension names a format of this module
/// (`None` otherwise: the caller reads it as text, HTML or PDF). `depth`
/// counts the containers the file was found in; `read_file` reads their
/// members.
pub(crate) fn extract_office(
    path: &Path,
    bytes: &[u8],
    depth: usize,
    read_file: ReadFile,
) -> Option<Extraction> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    let container = match ext.as_str() {
        "zip" => Some("ZIP archive"),
        "mbox" | "mbx" => Some("mailbox"),
        "eml" => Some("e-mail"),
        _ => None,
    };
    if let Some(format) = container {
        if depth >= MAX_CONTAINER_DEPTH {
            return Some(Extraction::Skipped(SkipReason::NestedTooDeep));
        }
        let read = crate::pdf::catch_quietly(|| match ext.as_str() {
            "zip" => archive::extract_zip(bytes, depth, read_file),
            "eml" => mail::extract_eml(bytes, depth, read_file),
            _ => mail::extract_mbox(bytes, depth, read_file),
        });
        return Some(read.unwrap_or_else(|| unreadable(format)));
    }
    let kind = match kind_of_extension(&ext)? {
        Ok(kind) => kind,
        Err(reason) => return Some(Extraction::Skipped(reason)),
    };
    Some(extract_single(kind, bytes))
}

/// Reads one office file or e-book of `kind`.
fn extract_single(kind: DocKind, bytes: &[u8]) -> Extraction {
    let format = format_name(kind);
    if matches!(kind, DocKind::Docx | DocKind::Xlsx | DocKind::Pptx)
        && bytes.starts_with(COMPOUND_FILE_MAGIC)
    {
        return compound_file(bytes, format);
    }
    let read = crate::pdf::catch_quietly(|| match kind {
        DocKind::Docx => docx::extract(bytes),
        DocKind::Pptx => pptx::extract(bytes),
        DocKind::Xlsx | DocKind::Xls | DocKind::Ods => sheet::extract(bytes, kind),
        DocKind::Odt | DocKind::Odp => odf::extract(bytes, kind),
        DocKind::Rtf => rtf::extract(bytes),
        DocKind::Epub => epub::extract(bytes),
        _ => Err(Refusal::Corrupt("no reader for this format".into())),
    });
    match read {
        Some(Ok(extracted)) => non_empty(extracted),
        Some(Err(refusal)) => refusal.into_extraction(format),
        None => unreadable(format),
    }
}

/// Adds what reading the member `name` of a container gave to `members`:
/// a container inside it adds each of its own members under `name/`.
pub(crate) fn push_member(members: &mut Vec<Member>, name: &str, extraction: Extraction) {
    match extraction {
        Extraction::Many(inner) => {
            for m in inner {
                let inner_name = if m.name.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}/{}", m.name)
                };
                members.push(Member {
                    name: inner_name,
                    extraction: m.extraction,
                });
            }
        }
        other => members.push(Member {
            name: name.to_string(),
            extraction: other,
        }),
    }
}

/// `name` as one path segment of a member: no separators, not empty,
/// not `.` or `..`; `fallback` when nothing is left.
pub(crate) fn safe_segment(name: &str, fallback: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let cleaned = cleaned.trim().trim_matches('.').trim();
    if cleaned.is_empty() {
        fallback.to_string()
    } else {
        cleaned.chars().take(200).collect()
    }
}

/// Why a file whose reader panicked is not read.
pub(crate) const READER_PANICKED: &str = "the reader could not parse it";

/// A reader panicked on the file.
fn unreadable(format: &'static str) -> Extraction {
    Extraction::Failed(ExtractError::Corrupt {
        format,
        why: READER_PANICKED.into(),
    })
}

/// A `.docx`, `.xlsx` or `.pptx` that is an OLE compound file: Office's
/// wrapper of a password-protected file (it holds an `EncryptedPackage`
/// stream), else a legacy binary file given the new extension.
fn compound_file(bytes: &[u8], format: &'static str) -> Extraction {
    let marker: Vec<u8> = "EncryptedPackage"
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    if memchr::memmem::find(bytes, &marker).is_some() {
        return Extraction::Skipped(SkipReason::Encrypted);
    }
    Extraction::Failed(ExtractError::Corrupt {
        format,
        why: "it is a legacy binary Office file with a new extension; open and save it as the format its name says".into(),
    })
}

/// The text of a document as it is built: lines, paragraphs and the
/// sections where its places start.
#[derive(Debug, Default)]
pub(crate) struct DocText {
    text: String,
    sections: Vec<Section>,
}

impl DocText {
    /// An empty text.
    pub fn new() -> DocText {
        DocText::default()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// Starts a new place at the next line.
    pub fn start(&mut self, place: Place) {
        self.end_line();
        self.sections.push(Section::new(self.text.len(), place));
    }

    /// Makes `place` the place of everything written before the first
    /// section (a document whose first page break shows it has pages).
    pub fn start_at_zero(&mut self, place: Place) {
        if self.sections.first().is_none_or(|s| s.start > 0) {
            self.sections.insert(0, Section::new(0, place));
        }
    }

    /// Writes `line` (trimmed at its end) as a line of its own; blank
    /// lines are dropped.
    pub fn line(&mut self, line: &str) {
        let line = line.trim_end();
        if line.trim().is_empty() {
            return;
        }
        self.end_line();
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// Writes a paragraph: its lines, then a blank line.
    pub fn paragraph(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        for l in text.lines() {
            self.line(l);
        }
        self.blank();
    }

    /// Writes a data row of the current sheet as a line, recording its row
    /// number for citations.
    pub fn row(&mut self, number: u32, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        self.end_line();
        if let Some(Section {
            place: Place::Sheet { rows, .. },
            ..
        }) = self.sections.last_mut()
        {
            rows.push((self.text.len(), number));
        }
        self.line(line);
    }

    /// Ends the current paragraph with a blank line (once).
    pub fn blank(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with("\n\n") {
            self.end_line();
            self.text.push('\n');
        }
    }

    fn end_line(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
    }

    /// The finished text of `kind`, titled `title` (else its first line).
    pub fn finish(self, kind: DocKind, title: Option<String>) -> Extracted {
        let title = title
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .or_else(|| crate::extracted::first_line_title(&self.text))
            .map(|t| t.trim_start_matches('#').trim().chars().take(120).collect());
        Extracted {
            kind,
            title,
            sections: (!self.sections.is_empty()).then_some(self.sections),
            text: self.text,
            lossy: false,
            scanned: Default::default(),
        }
    }
}

/// A paragraph's text added to the table cell being filled (after a space
/// when the cell holds text already). False outside a table.
pub(crate) fn add_to_open_cell(tables: &mut [Vec<Vec<String>>], text: &str) -> bool {
    let Some(cell) = open_cell(tables) else {
        return false;
    };
    if !cell.is_empty() {
        cell.push(' ');
    }
    cell.push_str(text);
    true
}

/// A table closed inside a cell of another: its rows' text joins that cell.
/// False when it was not inside a table.
pub(crate) fn nest_in_open_cell(tables: &mut [Vec<Vec<String>>], rows: &[Vec<String>]) -> bool {
    let Some(cell) = open_cell(tables) else {
        return false;
    };
    let inner: Vec<String> = rows.iter().map(|r| r.join(" ")).collect();
    cell.push_str(&inner.join(" "));
    true
}

/// The cell being filled: the last cell of the last row of the innermost table.
fn open_cell(tables: &mut [Vec<Vec<String>>]) -> Option<&mut String> {
    tables.last_mut()?.last_mut()?.last_mut()
}

/// A table's rows as lines: the header row as it is, then each row with
/// every cell named by its column (`Name: Alice | Amount: 300`), so that a
/// chunk holding some rows still says what their values are.
pub(crate) fn table_lines(rows: &[Vec<String>]) -> Vec<String> {
    let rows: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r.iter().any(|c| !c.trim().is_empty()))
        .collect();
    let Some((header, body)) = rows.split_first() else {
        return Vec::new();
    };
    let clean = |c: &str| c.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = vec![format!(
        "| {} |",
        header
            .iter()
            .map(|c| clean(c))
            .collect::<Vec<_>>()
            .join(" | ")
    )];
    for row in body {
        out.push(named_cells(header, row));
    }
    out
}

/// One row with its cells named by `header` (a column without a name by
/// its letter); empty cells are left out.
pub(crate) fn named_cells(header: &[String], row: &[String]) -> String {
    let clean = |c: &str| c.split_whitespace().collect::<Vec<_>>().join(" ");
    row.iter()
        .enumerate()
        .filter(|(_, c)| !c.trim().is_empty())
        .map(|(i, c)| {
            let name = header
                .get(i)
                .map(|h| clean(h))
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| column_letter(i));
            format!("{name}: {}", clean(c))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The spreadsheet letter of 0-based column `i` (`A`, …, `Z`, `AA`).
pub(crate) fn column_letter(mut i: usize) -> String {
    let mut letters = Vec::new();
    loop {
        letters.push(b'A' + (i % 26) as u8);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    letters.reverse();
    String::from_utf8(letters).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_carry_their_column_names() {
        let rows = vec![
            vec!["Name".to_string(), "Betrag".to_string(), String::new()],
            vec!["Anna".to_string(), "300".to_string(), "x".to_string()],
            vec![String::new(), String::new(), String::new()],
            vec!["Ben".to_string(), String::new(), String::new()],
        ];
        assert_eq!(
            table_lines(&rows),
            vec![
                "| Name | Betrag |  |",
                "Name: Anna | Betrag: 300 | C: x",
                "Name: Ben"
            ]
        );
    }

    #[test]
    fn column_letters() {
        assert_eq!(column_letter(0), "A");
        assert_eq!(column_letter(25), "Z");
        assert_eq!(column_letter(26), "AA");
        assert_eq!(column_letter(27), "AB");
    }

    #[test]
    fn extensions_that_are_not_read_say_why() {
        assert_eq!(kind_of_extension("xlsm"), Some(Err(SkipReason::Macros)));
        assert_eq!(
            kind_of_extension("ppt"),
            Some(Err(SkipReason::LegacyFormat("ppt".into())))
        );
        assert_eq!(kind_of_extension("txt"), None);
    }

    #[test]
    fn a_compound_file_named_docx_is_encrypted_or_mislabelled() {
        let mut encrypted = COMPOUND_FILE_MAGIC.to_vec();
        encrypted.extend(
            "EncryptedPackage"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes()),
        );
        assert!(matches!(
            extract_single(DocKind::Docx, &encrypted),
            Extraction::Skipped(SkipReason::Encrypted)
        ));
        let legacy = COMPOUND_FILE_MAGIC.to_vec();
        assert!(matches!(
            extract_single(DocKind::Xlsx, &legacy),
            Extraction::Failed(ExtractError::Corrupt { format: "XLSX", .. })
        ));
    }
}
