//! Text of scanned pages: the images a PDF page without a text layer
//! draws, read by Tesseract run as a subprocess when it is installed
//! (`apt-get install tesseract-ocr tesseract-ocr-deu`, …). Optional: with
//! none, such pages stay without text and `rlm index` says how many.
//!
//! The page is not rendered (that needs a PDF renderer); the images it
//! draws are read as they are embedded: JPEG (`DCTDecode`) and JPEG 2000
//! as written, uncompressed or Flate-compressed gray, RGB and black-and-
//! white pixels as PNM, CCITT fax-coded scans as TIFF. JBIG2 images are
//! not read.
//!
//! `RLM_OCR=off` turns it off; `RLM_TESSERACT` names the program (default
//! `tesseract` on the `PATH`); `RLM_OCR_LANGUAGES` the languages
//! (`deu+eng`; default: every language installed).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long one image may take to read before Tesseract is stopped.
const READ_LIMIT: Duration = Duration::from_secs(120);
/// How long `tesseract --list-langs` may take.
const PROBE_LIMIT: Duration = Duration::from_secs(20);
/// Images read per page at most (a page of many small images is no scan).
pub(crate) const MAX_IMAGES_PER_PAGE: usize = 4;

/// An image as a file Tesseract reads: its bytes and file extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageImage {
    /// `jpg`, `jp2`, `pgm`, `ppm` or `pbm`.
    pub extension: &'static str,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

impl PageImage {
    /// 8-bit pixels, `channels` 1 (gray) or 3 (RGB), row by row; `None`
    /// when their number does not match the size.
    pub fn from_pixels(
        width: usize,
        height: usize,
        channels: usize,
        pixels: &[u8],
    ) -> Option<Self> {
        if width == 0 || height == 0 || pixels.len() != width * height * channels {
            return None;
        }
        let (magic, extension) = match channels {
            1 => ("P5", "pgm"),
            3 => ("P6", "ppm"),
            _ => return None,
        };
        let mut bytes = format!("{magic}\n{width} {height}\n255\n").into_bytes();
        bytes.extend_from_slice(pixels);
        Some(PageImage { extension, bytes })
    }

    /// 1-bit pixels as PDF packs them (rows padded to bytes, 1 is white
    /// in DeviceGray), as a PBM (where 1 is black).
    pub fn from_bits(width: usize, height: usize, bits: &[u8]) -> Option<Self> {
        let row = width.div_ceil(8);
        if width == 0 || height == 0 || bits.len() != row * height {
            return None;
        }
        let mut bytes = format!("P4\n{width} {height}\n").into_bytes();
        bytes.extend(bits.iter().map(|b| !b));
        Some(PageImage {
            extension: "pbm",
            bytes,
        })
    }
}

impl PageImage {
    /// CCITT fax-coded black-and-white pixels (a scanner's usual image;
    /// `k` as PDF's `/K`: negative for Group 4, else Group 3) as a TIFF
    /// holding them as they are: one strip, the coding's own white and
    /// black runs (TIFF's `WhiteIsZero`).
    pub fn from_ccitt(width: u32, height: u32, k: i64, data: &[u8]) -> Option<Self> {
        if width == 0 || height == 0 || data.is_empty() {
            return None;
        }
        let (compression, options_tag) = if k < 0 { (4, 293) } else { (3, 292) };
        let options = u32::from(k > 0);
        // (tag, type: 3 SHORT or 4 LONG, value), in tag order.
        let entries: [(u16, u16, u32); 10] = [
            (256, 4, width),
            (257, 4, height),
            (258, 3, 1),
            (259, 3, compression),
            (262, 3, 0),
            (273, 4, 0), // strip offset, set below
            (277, 3, 1),
            (278, 4, height),
            (279, 4, u32::try_from(data.len()).ok()?),
            (options_tag, 4, options),
        ];
        let data_at = 8 + 2 + entries.len() as u32 * 12 + 4;
        let mut bytes = b"II\x2a\x00\x08\x00\x00\x00".to_vec();
        bytes.extend((entries.len() as u16).to_le_bytes());
        for (tag, kind, value) in entries {
            let value = if tag == 273 { data_at } else { value };
            bytes.extend(tag.to_le_bytes());
            bytes.extend(kind.to_le_bytes());
            bytes.extend(1u32.to_le_bytes());
            if kind == 3 {
                bytes.extend((value as u16).to_le_bytes());
                bytes.extend([0, 0]);
            } else {
                bytes.extend(value.to_le_bytes());
            }
        }
        bytes.extend(0u32.to_le_bytes());
        bytes.extend_from_slice(data);
        Some(PageImage {
            extension: "tif",
            bytes,
        })
    }
}

/// The OCR program and the languages it reads.
#[derive(Debug)]
struct Engine {
    program: PathBuf,
    languages: String,
}

/// The engine, found once per process.
fn engine() -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    ENGINE.get_or_init(find_engine).as_ref()
}

/// Checks `RLM_OCR`: unset, `auto` or `off`; anything else is an error
/// saying so (read before indexing, so a typo is not a silent `auto`).
pub fn check_setting() -> Result<(), String> {
    match std::env::var("RLM_OCR") {
        Ok(v) if !["", "auto", "off"].contains(&v.to_ascii_lowercase().as_str()) => Err(format!(
            "RLM_OCR={v:?} is not a choice: use auto (read scanned pages when tesseract is installed) or off"
        )),
        _ => Ok(()),
    }
}

/// True when scanned pages are read (Tesseract is installed and not
/// turned off with `RLM_OCR=off`).
pub fn available() -> bool {
    engine().is_some()
}

fn find_engine() -> Option<Engine> {
    if std::env::var("RLM_OCR").is_ok_and(|v| v.eq_ignore_ascii_case("off")) {
        return None;
    }
    let program = std::env::var_os("RLM_TESSERACT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("tesseract"));
    let listing = run(Command::new(&program).arg("--list-langs"), PROBE_LIMIT)?;
    let languages = match std::env::var("RLM_OCR_LANGUAGES") {
        Ok(l) if !l.trim().is_empty() => l.trim().to_string(),
        // One code per line after a header; `osd` (orientation) and
        // `equ` (equations) are no languages of text.
        _ => listing
            .lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| {
                !l.is_empty()
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && *l != "osd"
                    && *l != "equ"
            })
            .collect::<Vec<_>>()
            .join("+"),
    };
    if languages.is_empty() {
        return None;
    }
    Some(Engine { program, languages })
}

/// Runs `cmd` with a time limit; its standard output when it succeeded.
fn run(cmd: &mut Command, limit: Duration) -> Option<String> {
    let out_path = scratch_path("txt");
    let out_file = std::fs::File::create(&out_path).ok()?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out_file)
        .stderr(Stdio::null())
        .spawn();
    let result = child.ok().and_then(|mut child| {
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => break status.success().then_some(()),
                Ok(None) if started.elapsed() < limit => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        }
    });
    let text = result.and_then(|()| std::fs::read(&out_path).ok());
    let _ = std::fs::remove_file(&out_path);
    text.map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A file name of this process in the temporary folder, unique per call.
fn scratch_path(extension: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("rlm-ocr-{}-{n}.{extension}", std::process::id()))
}

/// The text OCR reads in `image`; `None` without an engine, when it fails
/// or finds no text.
pub(crate) fn read_image(image: &PageImage) -> Option<String> {
    let engine = engine()?;
    let path = scratch_path(image.extension);
    std::fs::write(&path, &image.bytes).ok()?;
    let text = run(
        Command::new(&engine.program)
            .arg(&path)
            .arg("stdout")
            .arg("-l")
            .arg(&engine.languages),
        READ_LIMIT,
    );
    let _ = std::fs::remove_file(&path);
    text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_become_pnm_files_and_wrong_sizes_none() {
        let gray = PageImage::from_pixels(2, 1, 1, &[0, 255]).unwrap();
        assert_eq!(gray.extension, "pgm");
        assert_eq!(gray.bytes, b"P5\n2 1\n255\n\x00\xff");
        assert!(PageImage::from_pixels(2, 2, 3, &[0; 5]).is_none());
        let bits = PageImage::from_bits(9, 1, &[0b1111_0000, 0b1000_0000]).unwrap();
        assert_eq!(bits.bytes, b"P4\n9 1\n\x0f\x7f");
        assert!(PageImage::from_bits(9, 1, &[0]).is_none());
        let tiff = PageImage::from_ccitt(8, 2, -1, &[1, 2, 3]).unwrap();
        assert_eq!(&tiff.bytes[..4], b"II\x2a\x00");
        // Ten entries of 12 bytes after the count, then the next-IFD zero.
        assert_eq!(tiff.bytes.len(), 8 + 2 + 120 + 4 + 3);
        assert_eq!(&tiff.bytes[tiff.bytes.len() - 3..], &[1, 2, 3]);
    }
}
