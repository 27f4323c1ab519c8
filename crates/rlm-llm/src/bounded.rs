//! Reading files a user names (config files, briefings, cassettes, traces)
//! with a bound, so `/dev/zero`, an endless FIFO or a huge file is a one-line
//! error instead of a process that reads until memory runs out.
//!
//! Whole files ([`read_text`]) are refused past a total size; line-oriented
//! files ([`CappedLines`], [`read_line`]) are streamed line by line with a
//! cap on each line, so a long history can still be read.
//!
//! ```
//! use rlm_llm::bounded::{self, CappedLines};
//! use std::io::Cursor;
//!
//! let lines: Vec<_> = CappedLines::new(Cursor::new("a\n\nbb\n"), 4)
//!     .collect::<Result<_, _>>()
//!     .unwrap();
//! assert_eq!(lines, vec![(1, "a".to_string()), (3, "bb".to_string())]);
//! let err = CappedLines::new(Cursor::new("toolong\n"), 4).next().unwrap().unwrap_err();
//! assert_eq!(err.to_string(), "line 1 is longer than the limit of 4 bytes");
//! assert_eq!(bounded::size(bounded::CONFIG_FILE_LIMIT), "1 MiB");
//! ```

use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

/// The largest config file (`rlm.toml`) read.
pub const CONFIG_FILE_LIMIT: u64 = 1 << 20;
/// The largest briefing (domain instructions) read.
pub const BRIEFING_LIMIT: u64 = 1 << 20;
/// The longest line of a JSONL file read (traces, cassettes). A trace event
/// can carry a cell's whole output, which the sandbox lets grow to 100 M
/// characters, so the cap is generous; it only has to stop an endless line.
pub const JSONL_LINE_LIMIT: usize = 256 << 20;

/// `limit` bytes for a message: `1 MiB`, `256 MiB`, or `N bytes`.
pub fn size(limit: u64) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

/// Why [`read_text`] returned no text. `what` names the file (`config
/// file`, `briefing`); each message is one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// The file cannot be opened or read.
    #[error("cannot read {what} {}: {source}", .path.display())]
    Unreadable {
        /// What the file is.
        what: String,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The file is larger than the limit.
    #[error("{what} {} is larger than the limit of {}", .path.display(), size(*.limit))]
    TooLarge {
        /// What the file is.
        what: String,
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{what} {} is not UTF-8 text (invalid byte at offset {offset})", .path.display())]
    NotUtf8 {
        /// What the file is.
        what: String,
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
}

/// The whole of `path` as UTF-8 text, refused past `limit` bytes. `what`
/// names the file in errors (`config file`, `briefing`), which are one line
/// naming the file and, for size, the limit. Only `limit + 1` bytes are ever
/// read, so an endless file (`/dev/zero`, a FIFO fed forever) ends too.
pub fn read_text(path: &Path, what: &str, limit: u64) -> Result<String, TextError> {
    let unreadable = |source| TextError::Unreadable {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > limit {
        return Err(TextError::TooLarge {
            what: what.to_string(),
            path: path.to_path_buf(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|e| TextError::NotUtf8 {
        what: what.to_string(),
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// What [`read_line`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A line (possibly the last one without a newline) is in the buffer,
    /// without its `\n` or `\r\n`.
    Complete,
    /// The line is longer than the cap: the buffer holds its first `max + 1`
    /// bytes and the rest is still unread ([`skip_line`] discards it).
    TooLong,
    /// The input ended.
    End,
}

/// Reads one line of at most `max` bytes into `buf` (cleared first), as
/// bytes: the caller decides what a line that is not UTF-8 means.
pub fn read_line<R: BufRead + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    let n = (&mut *r).take(max as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(Line::End);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Line::Complete);
    }
    Ok(if n > max {
        Line::TooLong
    } else {
        Line::Complete
    })
}

/// Discards input up to and including the next `\n` (in constant memory).
pub fn skip_line<R: BufRead + ?Sized>(r: &mut R) -> io::Result<()> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Why [`CappedLines`] stopped early. Messages name the line but not the
/// file, for the caller to prefix.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// A line is longer than the cap.
    #[error("line {line} is longer than the limit of {}", size(*.limit as u64))]
    TooLong {
        /// 1-based line number.
        line: usize,
        /// The cap in bytes.
        limit: usize,
    },
    /// A line is not UTF-8 text.
    #[error("line {line} is not UTF-8 text")]
    NotUtf8 {
        /// 1-based line number.
        line: usize,
    },
    /// Reading failed.
    #[error("cannot read line {line}: {source}")]
    Read {
        /// 1-based line number.
        line: usize,
        /// The underlying error.
        source: io::Error,
    },
}

/// The non-blank lines of a stream as `(1-based line number, text)`, each at
/// most `max` bytes. A read error, a line past the cap or a line that is not
/// UTF-8 is one [`LineError`] and ends the iteration.
pub struct CappedLines<R> {
    reader: R,
    max: usize,
    line: usize,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> CappedLines<R> {
    /// Lines of `reader`, each capped at `max` bytes.
    pub fn new(reader: R, max: usize) -> Self {
        CappedLines {
            reader,
            max,
            line: 0,
            buf: Vec::new(),
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for CappedLines<R> {
    type Item = Result<(usize, String), LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.line += 1;
            let line = self.line;
            let error = match read_line(&mut self.reader, &mut self.buf, self.max) {
                Ok(Line::End) => {
                    self.done = true;
                    continue;
                }
                Ok(Line::TooLong) => LineError::TooLong {
                    line,
                    limit: self.max,
                },
                Ok(Line::Complete) => match std::str::from_utf8(&self.buf) {
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => return Some(Ok((line, text.to_string()))),
                    Err(_) => LineError::NotUtf8 { line },
                },
                Err(source) => LineError::Read { line, source },
            };
            self.done = true;
            return Some(Err(error));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn lines_are_capped_and_the_rest_can_be_skipped() {
        let mut r = Cursor::new(b"abc\r\nabcdef\nxy".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 4).unwrap(), Line::Complete);
        assert_eq!(buf, b"abc");
        assert_eq!(read_line(&mut r, &mut buf, 4).unwrap(), Line::TooLong);
        skip_line(&mut r).unwrap();
        assert_eq!(read_line(&mut r, &mut buf, 4).unwrap(), Line::Complete);
        assert_eq!(buf, b"xy");
        assert_eq!(read_line(&mut r, &mut buf, 4).unwrap(), Line::End);
        // Exactly the cap, newline included, is fine.
        let mut r = Cursor::new(b"abcd\n".to_vec());
        assert_eq!(read_line(&mut r, &mut buf, 4).unwrap(), Line::Complete);
    }

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read_text(Path::new("/dev/zero"), "config file", 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config file /dev/zero is larger than the limit of 1 MiB"
        );
        let mut lines = CappedLines::new(
            io::BufReader::new(std::fs::File::open("/dev/zero").unwrap()),
            1000,
        );
        assert_eq!(
            lines.next().unwrap().unwrap_err().to_string(),
            "line 1 is longer than the limit of 1000 bytes"
        );
        assert!(lines.next().is_none());
    }

    #[test]
    fn text_that_is_not_utf8_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.md");
        std::fs::write(&p, b"ok\xff").unwrap();
        let e = read_text(&p, "briefing", 10).unwrap_err().to_string();
        assert!(
            e.ends_with("is not UTF-8 text (invalid byte at offset 2)"),
            "{e}"
        );
        assert!(
            read_text(&dir.path().join("none"), "briefing", 10)
                .unwrap_err()
                .to_string()
                .starts_with("cannot read briefing ")
        );
    }
}
