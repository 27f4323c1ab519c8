//! Rich Text Format: the visible text of the document, paragraphs kept,
//! `\page` breaks as pages. Groups that hold no document text (font and
//! colour tables, pictures, `{\*\…}` destinations) are skipped; `\'hh`
//! bytes are read in the document's code page, `\uN` as Unicode.
//!
//! Written here: RTF is small enough to read directly, and the crates for
//! it build a full document tree this does not need.

use encoding_rs::Encoding;

use super::{DocText, Refusal};
use crate::chunk::Place;
use crate::extracted::{DocKind, Extracted};

/// Deepest group nesting read (real files nest a few dozen levels).
const MAX_GROUP_DEPTH: usize = 1000;

/// Destinations whose content is not document text.
const SKIPPED: &[&str] = &[
    "fonttbl",
    "colortbl",
    "stylesheet",
    "info",
    "pict",
    "object",
    "header",
    "footer",
    "headerl",
    "headerr",
    "headerf",
    "footerl",
    "footerr",
    "footerf",
    "listtable",
    "listoverridetable",
    "revtbl",
    "rsidtbl",
    "themedata",
    "colorschememapping",
    "datastore",
    "latentstyles",
    "generator",
    "xmlnstbl",
    "fldinst",
    "bkmkstart",
    "bkmkend",
];

/// The state of one group: whether its text is skipped, how many bytes
/// follow a `\uN` (`\ucN`).
#[derive(Clone, Copy)]
struct Group {
    skip: bool,
    unicode_skip: usize,
}

/// The text of an `.rtf`.
pub(super) fn extract(bytes: &[u8]) -> Result<Extracted, Refusal> {
    if !bytes.starts_with(b"{\\rtf") {
        return Err(Refusal::Corrupt(
            "it does not start with {\\rtf: not an RTF file".into(),
        ));
    }
    let mut reader = RtfReader {
        bytes,
        pos: 0,
        encoding: encoding_rs::WINDOWS_1252,
        out: DocText::new(),
        line: String::new(),
        pending_bytes: Vec::new(),
        page: 1,
    };
    reader.run()?;
    reader.flush_paragraph();
    Ok(reader.out.finish(DocKind::Rtf, None))
}

struct RtfReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    encoding: &'static Encoding,
    out: DocText,
    /// The paragraph being read.
    line: String,
    /// `\'hh` bytes not yet decoded (a multi-byte character spans several).
    pending_bytes: Vec<u8>,
    page: u32,
}

impl RtfReader<'_> {
    fn run(&mut self) -> Result<(), Refusal> {
        let mut stack: Vec<Group> = Vec::new();
        let mut group = Group {
            skip: false,
            unicode_skip: 1,
        };
        // Bytes still to drop after a `\uN` (its fallback).
        let mut to_drop = 0usize;
        while self.pos < self.bytes.len() {
            let b = self.bytes[self.pos];
            match b {
                b'{' => {
                    self.pos += 1;
                    if stack.len() >= MAX_GROUP_DEPTH {
                        return Err(Refusal::Refused(format!(
                            "groups nest deeper than {MAX_GROUP_DEPTH}"
                        )));
                    }
                    stack.push(group);
                    if self.bytes.get(self.pos..self.pos + 2) == Some(b"\\*") {
                        group.skip = true;
                    }
                }
                b'}' => {
                    self.pos += 1;
                    self.decode_pending();
                    group = stack.pop().unwrap_or(group);
                    to_drop = 0;
                }
                b'\\' => {
                    let word = self.control_word();
                    if to_drop > 0 && matches!(word, Control::Byte(_) | Control::Symbol(_)) {
                        to_drop -= 1;
                        continue;
                    }
                    to_drop = 0;
                    self.apply(word, &mut group, &mut to_drop);
                }
                b'\r' | b'\n' => self.pos += 1,
                _ => {
                    self.pos += 1;
                    if to_drop > 0 {
                        to_drop -= 1;
                        continue;
                    }
                    if !group.skip {
                        self.pending_bytes.push(b);
                    }
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, word: Control, group: &mut Group, to_drop: &mut usize) {
        match word {
            Control::Word(name, arg) => {
                if SKIPPED.contains(&name.as_str()) {
                    group.skip = true;
                }
                if group.skip {
                    return;
                }
                match name.as_str() {
                    "par" | "sect" | "row" => self.flush_paragraph(),
                    "line" => self.text("\n"),
                    "tab" | "cell" => self.text("\t"),
                    "page" => {
                        self.flush_paragraph();
                        self.out.start_at_zero(Place::Page(1));
                        self.page += 1;
                        self.out.start(Place::Page(self.page));
                    }
                    "ansicpg" => {
                        if let Some(enc) = arg.and_then(code_page) {
                            self.encoding = enc;
                        }
                    }
                    "uc" => group.unicode_skip = arg.unwrap_or(1).clamp(0, 8) as usize,
                    "u" => {
                        let code = arg.unwrap_or(0);
                        let code = if code < 0 { code + 65_536 } else { code } as u32;
                        self.text(&char::from_u32(code).unwrap_or('\u{FFFD}').to_string());
                        *to_drop = group.unicode_skip;
                    }
                    "emdash" => self.text("—"),
                    "endash" => self.text("–"),
                    "bullet" => self.text("•"),
                    "lquote" => self.text("‘"),
                    "rquote" => self.text("’"),
                    "ldblquote" => self.text("“"),
                    "rdblquote" => self.text("”"),
                    _ => {}
                }
            }
            Control::Byte(b) if !group.skip => self.pending_bytes.push(b),
            Control::Symbol(c) if !group.skip => match c {
                '~' => self.text("\u{a0}"),
                '-' => {}
                '_' => self.text("-"),
                c => self.text(&c.to_string()),
            },
            _ => {}
        }
    }

    /// Reads the control word or symbol at `pos` (a backslash).
    fn control_word(&mut self) -> Control {
        self.pos += 1;
        let Some(&c) = self.bytes.get(self.pos) else {
            return Control::Symbol('\\');
        };
        if !c.is_ascii_alphabetic() {
            self.pos += 1;
            if c == b'\'' {
                let hex = self.bytes.get(self.pos..self.pos + 2).unwrap_or_default();
                self.pos += hex.len();
                let byte = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                return byte.map_or(Control::Symbol('?'), Control::Byte);
            }
            if c == b'\r' || c == b'\n' {
                return Control::Word("par".into(), None);
            }
            return Control::Symbol(c as char);
        }
        let start = self.pos;
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_alphabetic() {
            self.pos += 1;
        }
        let name = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
        let num_start = self.pos;
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        while self.pos < self.bytes.len()
            && self.bytes[self.pos].is_ascii_digit()
            && self.pos - num_start < 10
        {
            self.pos += 1;
        }
        let arg = std::str::from_utf8(&self.bytes[num_start..self.pos])
            .ok()
            .and_then(|n| n.parse::<i64>().ok());
        // One space after a control word is its delimiter, not text.
        if self.bytes.get(self.pos) == Some(&b' ') {
            self.pos += 1;
        }
        Control::Word(name, arg)
    }

    fn decode_pending(&mut self) {
        if self.pending_bytes.is_empty() {
            return;
        }
        let (text, _, _) = self.encoding.decode(&self.pending_bytes);
        self.line.push_str(&text);
        self.pending_bytes.clear();
    }

    fn text(&mut self, s: &str) {
        self.decode_pending();
        self.line.push_str(s);
    }

    fn flush_paragraph(&mut self) {
        self.decode_pending();
        let line = std::mem::take(&mut self.line);
        self.out.paragraph(&line);
    }
}

enum Control {
    Word(String, Option<i64>),
    Byte(u8),
    Symbol(char),
}

/// The encoding of a Windows code page number (`\ansicpg1252`).
fn code_page(cp: i64) -> Option<&'static Encoding> {
    let label = match cp {
        65001 => "utf-8",
        932 => "shift_jis",
        936 => "gbk",
        949 => "euc-kr",
        950 => "big5",
        874 => "windows-874",
        1250..=1258 => return Encoding::for_label(format!("windows-{cp}").as_bytes()),
        _ => return None,
    };
    Encoding::for_label(label.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_paragraphs_code_page_and_unicode() {
        let rtf = b"{\\rtf1\\ansi\\ansicpg1252{\\fonttbl{\\f0 Arial;}}{\\*\\generator x;}\\f0 K\\'fcndigung\\par Frist \\u8364?5\\page Seite zwei\\par}";
        let e = extract(rtf).unwrap();
        assert_eq!(e.text, "Kündigung\n\nFrist €5\n\nSeite zwei\n\n");
        let sections = e.sections.unwrap();
        assert_eq!(sections[1].place, Place::Page(2));
        assert!(e.text[sections[1].start..].starts_with("Seite zwei"));
    }

    #[test]
    fn not_rtf_and_deep_nesting_are_refused() {
        assert!(matches!(extract(b"hello"), Err(Refusal::Corrupt(_))));
        let mut deep = b"{\\rtf1 ".to_vec();
        deep.extend(std::iter::repeat_n(b'{', 5000));
        assert!(matches!(extract(&deep), Err(Refusal::Refused(_))));
    }
}
