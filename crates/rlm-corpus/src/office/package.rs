//! ZIP packages (OOXML, ODF, EPUB, archives) read under limits: a ZIP is
//! untrusted input whose members may claim one size and inflate to
//! another. Every member is inflated through a counting reader that stops
//! at [`MAX_MEMBER_BYTES`]; all members of one file together stop at
//! [`MAX_INFLATED_BYTES`]; a member that inflates more than [`MAX_RATIO`]
//! times its compressed size (past [`RATIO_FLOOR`]) is a ZIP bomb; a file
//! with more than [`MAX_MEMBERS`] entries is refused before any is read.

use std::io::{Cursor, Read};

use zip::ZipArchive;

use super::Refusal;
use crate::extracted::SkipReason;

/// Most entries one ZIP file may list.
pub const MAX_MEMBERS: usize = 10_000;
/// Most bytes one member may inflate to.
pub const MAX_MEMBER_BYTES: u64 = 64 << 20;
/// Most bytes all members of one file may inflate to together.
pub const MAX_INFLATED_BYTES: u64 = 256 << 20;
/// Highest inflated-to-compressed ratio of a member larger than
/// [`RATIO_FLOOR`] (office XML compresses 5–30 times; bombs a thousand).
pub const MAX_RATIO: u64 = 200;
/// Members that inflate to less than this are not held to [`MAX_RATIO`]
/// (a small run of blanks compresses far but costs nothing).
pub const RATIO_FLOOR: u64 = 1 << 20;

/// An open ZIP package, counting what its members inflate to.
pub(crate) struct Package<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    inflated: u64,
}

impl<'a> Package<'a> {
    /// Opens `bytes` as a ZIP; a truncated file or another format is
    /// corrupt, one with too many entries refused.
    pub fn open(bytes: &'a [u8]) -> Result<Package<'a>, Refusal> {
        let zip = ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
            Refusal::Corrupt(format!(
                "not a readable ZIP package ({e}); the file is truncated or of another format"
            ))
        })?;
        if zip.len() > MAX_MEMBERS {
            return Err(Refusal::Refused(format!(
                "it lists {} entries, more than the limit of {MAX_MEMBERS}",
                zip.len()
            )));
        }
        Ok(Package { zip, inflated: 0 })
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.zip.len()
    }

    /// The entry names, in the archive's order.
    pub fn names(&self) -> Vec<String> {
        self.zip
            .file_names_raw()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect()
    }

    /// True when an entry is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.zip.index_for_name(name).is_some()
    }

    /// The bytes of entry `name`; `None` when there is none.
    pub fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, Refusal> {
        match self.zip.index_for_name(name) {
            Some(i) => self.read_index(i).map(|(_, bytes)| bytes),
            None => Ok(None),
        }
    }

    /// The text of entry `name` (invalid UTF-8 replaced); `None` when there
    /// is none.
    pub fn read_text(&mut self, name: &str) -> Result<Option<String>, Refusal> {
        Ok(self
            .read(name)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Entry `i`: its name and, unless it is a folder, its bytes.
    pub fn read_index(&mut self, i: usize) -> Result<(String, Option<Vec<u8>>), Refusal> {
        let corrupt = |e: zip::result::ZipError| Refusal::Corrupt(format!("entry {i}: {e}"));
        let (name, encrypted) = {
            let raw = self.zip.by_index_raw(i).map_err(corrupt)?;
            let name = match raw.name() {
                Ok(n) => n.into_owned(),
                Err(_) => String::from_utf8_lossy(raw.name_raw()).into_owned(),
            };
            (name, raw.encrypted())
        };
        if encrypted {
            return Err(Refusal::Skip(SkipReason::Encrypted));
        }
        let mut file = self.zip.by_index(i).map_err(corrupt)?;
        if file.is_dir() {
            return Ok((name, None));
        }
        let compressed = file.compressed_size();
        let mut bytes = Vec::with_capacity(file.size().min(MAX_MEMBER_BYTES) as usize);
        (&mut file)
            .take(MAX_MEMBER_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Refusal::Corrupt(format!("entry {name:?} does not inflate: {e}")))?;
        let size = bytes.len() as u64;
        if size > MAX_MEMBER_BYTES {
            return Err(Refusal::Refused(format!(
                "entry {name:?} inflates past {} MiB",
                MAX_MEMBER_BYTES >> 20
            )));
        }
        if size > RATIO_FLOOR && size / compressed.max(1) > MAX_RATIO {
            return Err(Refusal::Refused(format!(
                "entry {name:?} inflates {} times its compressed size (a ZIP bomb; the limit is {MAX_RATIO})",
                size / compressed.max(1)
            )));
        }
        self.inflated += size;
        if self.inflated > MAX_INFLATED_BYTES {
            return Err(Refusal::Refused(format!(
                "its entries inflate past {} MiB together",
                MAX_INFLATED_BYTES >> 20
            )));
        }
        Ok((name, Some(bytes)))
    }

    /// Inflates every entry once under the limits, keeping nothing: for a
    /// package a library reads without limits of its own (spreadsheets).
    pub fn check_all(&mut self) -> Result<(), Refusal> {
        for i in 0..self.len() {
            self.read_index(i)?;
        }
        Ok(())
    }
}

/// `target` of a relationship or manifest entry, relative to the folder of
/// `base` (a path inside the package), with `.` and `..` resolved; an
/// absolute target starts at the package root.
pub(crate) fn resolve(base: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base.rsplit_once('/')
            .map(|(dir, _)| dir.split('/').collect())
            .unwrap_or_default()
    };
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    // Targets are URIs: `%20` is a space in the entry name.
    percent_decode(&joined)
}

fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_targets_resolve_against_their_base() {
        assert_eq!(
            resolve("ppt/presentation.xml", "slides/slide1.xml"),
            "ppt/slides/slide1.xml"
        );
        assert_eq!(
            resolve("OEBPS/content.opf", "../Text/a%20b.xhtml"),
            "Text/a b.xhtml"
        );
        assert_eq!(
            resolve("word/document.xml", "/word/media/x.png"),
            "word/media/x.png"
        );
    }

    #[test]
    fn not_a_zip_is_corrupt() {
        assert!(matches!(
            Package::open(b"plain text"),
            Err(Refusal::Corrupt(_))
        ));
    }
}
