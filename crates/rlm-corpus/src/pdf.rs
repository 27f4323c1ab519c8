//! PDF text extraction, guarded: a PDF is untrusted input, and the parser
//! (`pdf-extract` over `lopdf`) recurses on nesting, inflates every stream
//! it reads whole, and follows `/Parent` chains and form XObjects without
//! a limit. So before it runs:
//!
//! 1. the bytes are scanned: arrays and dictionaries nested deeper than
//!    [`MAX_NESTING`] refuse the file, in the file itself and in its
//!    compressed object streams (which the loader inflates), and an object
//!    stream that inflates past [`MAX_STREAM_BYTES`] refuses it;
//! 2. the loaded document is checked: `/Parent` chains end within
//!    [`MAX_PARENT_CHAIN`] steps, form XObjects do not call themselves and
//!    nest at most [`MAX_FORM_DEPTH`] deep, and every stream the text
//!    extraction reads (page contents, forms, fonts and their maps)
//!    inflates to at most [`MAX_STREAM_BYTES`], all of them together to at
//!    most [`MAX_DECODED_BYTES`];
//!
//! and the parser runs on a thread of its own with a large stack, a panic
//! caught: whatever the file holds, it is text or a reason it was skipped,
//! never the process.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};

use pdf_extract::{Dictionary, Document, Object, ObjectId};

use crate::ocr::PageImage;

/// Arrays and dictionaries nested deeper than this refuse the file (real
/// PDFs nest a few levels; the parser recurses once per level).
pub const MAX_NESTING: usize = 100;
/// What one stream may inflate to (a page's content is kilobytes; the parser
/// holds ~45 bytes of memory per inflated byte of content).
pub const MAX_STREAM_BYTES: usize = 16 << 20;
/// What all the streams the extraction reads may inflate to together.
pub const MAX_DECODED_BYTES: usize = 256 << 20;
/// Longest `/Parent` chain from a page to the root of the page tree.
pub const MAX_PARENT_CHAIN: usize = 256;
/// Deepest nesting of form XObjects drawn by a page.
pub const MAX_FORM_DEPTH: usize = 32;
/// Stack of the parser's thread: reserved, not committed, until used.
const PARSER_STACK_BYTES: usize = 256 << 20;

/// Why a PDF gave no text.
#[derive(Debug)]
pub(crate) enum PdfFailure {
    /// The parser panicked.
    Unreadable,
    /// The parser reported what is wrong with the file.
    Corrupt(String),
    /// The file is built to exhaust the parser: why.
    Refused(String),
}

/// One page of a PDF.
#[derive(Debug, Default)]
pub(crate) struct PdfPage {
    /// The text of its text layer.
    pub text: String,
    /// When it has no text and images were asked for: the images it draws
    /// that OCR can read.
    pub images: Vec<PageImage>,
}

/// The text of each page of a PDF, or why there is none; with
/// `want_images`, the readable images of each page without text.
pub(crate) fn pdf_pages(bytes: &[u8], want_images: bool) -> Result<Vec<PdfPage>, PdfFailure> {
    scan(bytes, 0).map_err(PdfFailure::Refused)?;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("pdf-parser".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(s, || parse_pages(bytes, want_images))
            .map_err(|e| PdfFailure::Corrupt(format!("cannot start the parser thread: {e}")))?
            .join()
            .unwrap_or(Err(PdfFailure::Unreadable))
    })
}

thread_local! {
    /// Set while this thread runs the PDF parser, whose panics we catch.
    static QUIET_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Wraps the process's panic hook once so that panics caught from the PDF
/// parser print nothing: for the user they are a corrupt file, reported as such.
fn install_quiet_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, a parser of untrusted bytes, with its panics caught and not
/// printed: `None` when it panicked (the file is unreadable, not the run).
pub(crate) fn catch_quietly<T>(f: impl FnOnce() -> T) -> Option<T> {
    install_quiet_panic_hook();
    let was_quiet = QUIET_PANICS.with(|q| q.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    QUIET_PANICS.with(|q| q.set(was_quiet));
    result
}

/// Loads, checks and extracts (on the parser thread).
fn parse_pages(bytes: &[u8], want_images: bool) -> Result<Vec<PdfPage>, PdfFailure> {
    install_quiet_panic_hook();
    QUIET_PANICS.with(|q| q.set(true));
    // The parser may panic on hostile input; a panic is a corrupt file, not a crash.
    let result = std::panic::catch_unwind(|| {
        let mut doc = Document::load_mem(bytes).map_err(|e| PdfFailure::Corrupt(e.to_string()))?;
        if doc.is_encrypted() {
            doc.decrypt("")
                .map_err(|e| PdfFailure::Corrupt(format!("encrypted: {e}")))?;
        }
        check_document(&doc).map_err(PdfFailure::Refused)?;
        let mut pages = Vec::new();
        for (number, id) in doc.get_pages() {
            let mut text = String::new();
            {
                let mut out = pdf_extract::PlainTextOutput::new(&mut text);
                if pdf_extract::output_doc_page(&doc, &mut out, number).is_err() {
                    break;
                }
            }
            let images = if want_images && text.trim().is_empty() {
                page_images(&doc, id)
            } else {
                Vec::new()
            };
            pages.push(PdfPage { text, images });
        }
        Ok(pages)
    });
    QUIET_PANICS.with(|q| q.set(false));
    result.unwrap_or(Err(PdfFailure::Unreadable))
}

/// The images page `id` draws that OCR can read, as files: JPEG and JPEG
/// 2000 as embedded, 8-bit gray or RGB and 1-bit gray pixels (raw or
/// Flate-compressed, without predictors) as PNM; each inflated under
/// [`MAX_STREAM_BYTES`].
fn page_images(doc: &Document, id: ObjectId) -> Vec<PageImage> {
    let Ok(images) = doc.get_page_images(id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for image in images {
        if out.len() >= crate::ocr::MAX_IMAGES_PER_PAGE {
            break;
        }
        let filters = image.filters.clone().unwrap_or_default();
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        let file = match filters.as_slice() {
            ["DCTDecode"] => Some(PageImage {
                extension: "jpg",
                bytes: image.content.to_vec(),
            }),
            ["CCITTFaxDecode"] => {
                let parms = image.origin_dict.get(b"DecodeParms").ok();
                let parms = parms.and_then(|p| match p {
                    Object::Dictionary(d) => Some(d),
                    Object::Array(a) => a.first().and_then(|o| o.as_dict().ok()),
                    _ => None,
                });
                let k = parms
                    .and_then(|d| d.get(b"K").ok())
                    .and_then(|k| k.as_i64().ok())
                    .unwrap_or(0);
                match (u32::try_from(image.width), u32::try_from(image.height)) {
                    (Ok(w), Ok(h)) => PageImage::from_ccitt(w, h, k, image.content),
                    _ => None,
                }
            }
            ["JPXDecode"] => Some(PageImage {
                extension: "jp2",
                bytes: image.content.to_vec(),
            }),
            [] | ["FlateDecode"] if image.origin_dict.get(b"DecodeParms").is_err() => {
                let pixels = if filters.is_empty() {
                    Some(image.content.to_vec())
                } else {
                    inflate(image.content, MAX_STREAM_BYTES).ok()
                };
                pixels.and_then(|p| pixels_image(&image, &p))
            }
            _ => None,
        };
        out.extend(file);
    }
    out
}

fn pixels_image(image: &pdf_extract::xobject::PdfImage<'_>, pixels: &[u8]) -> Option<PageImage> {
    let (w, h) = (
        usize::try_from(image.width).ok()?,
        usize::try_from(image.height).ok()?,
    );
    match (image.color_space.as_deref(), image.bits_per_component) {
        (Some("DeviceGray"), Some(8)) => PageImage::from_pixels(w, h, 1, pixels),
        (Some("DeviceRGB"), Some(8)) => PageImage::from_pixels(w, h, 3, pixels),
        (Some("DeviceGray"), Some(1)) | (None, Some(1)) => PageImage::from_bits(w, h, pixels),
        _ => None,
    }
}

// ---- 1. The bytes -------------------------------------------------------

/// Scans raw PDF syntax for nesting deeper than [`MAX_NESTING`] and object
/// streams that inflate too far (their content is scanned the same way).
/// `level` is 1 inside an object stream (which holds no streams).
fn scan(bytes: &[u8], level: u8) -> Result<(), String> {
    let mut depth = 0usize;
    let mut dict_start = None;
    let mut dict = 0..0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => i = skip_line(bytes, i),
            b'(' => i = skip_literal(bytes, i),
            b'<' if bytes.get(i + 1) == Some(&b'<') => {
                if depth == 0 {
                    dict_start = Some(i);
                }
                depth += 1;
                i += 2;
            }
            b'<' => i = memchr::memchr(b'>', &bytes[i..]).map_or(bytes.len(), |n| i + n + 1),
            b'>' if bytes.get(i + 1) == Some(&b'>') => {
                depth = depth.saturating_sub(1);
                i += 2;
                if depth == 0
                    && let Some(start) = dict_start.take()
                {
                    dict = start..i;
                }
            }
            b'[' => {
                depth += 1;
                i += 1;
            }
            b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b's' if level == 0 && is_stream_keyword(bytes, i) => {
                let (data, end) = stream_data(bytes, i + b"stream".len());
                let head = &bytes[dict.clone()];
                if find(head, b"/ObjStm").is_some() {
                    let filters = raw_filters(head);
                    if let Some(inner) = decode(data, &filters, MAX_STREAM_BYTES)? {
                        scan(&inner, 1)?;
                    }
                }
                depth = 0;
                i = end;
            }
            _ => i += 1,
        }
        if depth > MAX_NESTING {
            return Err(format!(
                "arrays or dictionaries nest more than {MAX_NESTING} deep"
            ));
        }
    }
    Ok(())
}

fn skip_line(bytes: &[u8], i: usize) -> usize {
    bytes[i..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map_or(bytes.len(), |n| i + n + 1)
}

/// Past a literal string `( ... )`: balanced parentheses, `\` escapes.
fn skip_literal(bytes: &[u8], mut i: usize) -> usize {
    let mut open = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'(' => open += 1,
            b')' => {
                open -= 1;
                if open == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// `stream` as a keyword (not `endstream`, not part of a name), followed
/// by an end of line.
fn is_stream_keyword(bytes: &[u8], i: usize) -> bool {
    bytes[i..].starts_with(b"stream")
        && matches!(bytes.get(i + 6), Some(b'\r' | b'\n'))
        && (i == 0 || matches!(bytes[i - 1], b'>' | b' ' | b'\r' | b'\n' | b'\t'))
}

/// The data of a stream whose keyword ends at `from`, and where scanning
/// goes on (after `endstream`, or the end of the file).
fn stream_data(bytes: &[u8], from: usize) -> (&[u8], usize) {
    let mut start = from;
    if bytes.get(start) == Some(&b'\r') {
        start += 1;
    }
    if bytes.get(start) == Some(&b'\n') {
        start += 1;
    }
    let start = start.min(bytes.len());
    match find(&bytes[start..], b"endstream") {
        Some(n) => (&bytes[start..start + n], start + n + b"endstream".len()),
        None => (&bytes[start..], bytes.len()),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// The `/Filter` names of a raw stream dictionary. A filter given by
/// reference cannot be read here: both compressions are then tried.
fn raw_filters(dict: &[u8]) -> Vec<Vec<u8>> {
    let Some(at) = find(dict, b"/Filter") else {
        return Vec::new();
    };
    let rest = &dict[at + b"/Filter".len()..];
    let rest = &rest[rest
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(rest.len())..];
    let names = |s: &[u8]| -> Vec<Vec<u8>> {
        s.split(|&b| b == b'/')
            .skip(1)
            .map(|n| {
                n.iter()
                    .take_while(|b| b.is_ascii_alphanumeric())
                    .copied()
                    .collect()
            })
            .collect()
    };
    match rest.first() {
        Some(b'/') => names(
            &rest[..rest[1..]
                .iter()
                .position(|b| !b.is_ascii_alphanumeric())
                .map_or(rest.len(), |n| n + 1)],
        ),
        Some(b'[') => names(&rest[..rest.iter().position(|&b| b == b']').unwrap_or(rest.len())]),
        _ => vec![b"Guess".to_vec()],
    }
}

// ---- Decoding with a cap ------------------------------------------------

/// `data` decoded through `filters` (in order), refused past `cap` bytes;
/// `None` when a filter is one the parser cannot decode either.
fn decode(data: &[u8], filters: &[Vec<u8>], cap: usize) -> Result<Option<Vec<u8>>, String> {
    let mut current = data.to_vec();
    for filter in filters {
        current = match filter.as_slice() {
            b"FlateDecode" | b"Fl" => inflate(&current, cap)?,
            b"LZWDecode" | b"LZW" => lzw(&current, cap)?,
            b"ASCII85Decode" | b"A85" => ascii85(&current),
            b"Guess" => {
                let a = inflate(&current, cap)?;
                if a.is_empty() { lzw(&current, cap)? } else { a }
            }
            _ => return Ok(None),
        };
        if current.len() > cap {
            return Err(too_big(cap));
        }
    }
    Ok(Some(current))
}

fn too_big(cap: usize) -> String {
    format!(
        "a stream inflates past {} MiB (a decompression bomb?)",
        cap >> 20
    )
}

fn inflate(data: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    // A broken stream keeps what inflated before the break, as the parser does.
    let _ = flate2::read::ZlibDecoder::new(data)
        .take(cap as u64 + 1)
        .read_to_end(&mut out);
    if out.len() > cap {
        return Err(too_big(cap));
    }
    Ok(out)
}

/// A writer that refuses to grow past its cap.
struct Capped {
    out: Vec<u8>,
    cap: usize,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.cap {
            return Err(std::io::Error::other("cap"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn lzw(data: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    let mut out = Capped {
        out: Vec::new(),
        cap,
    };
    // Both code-size switches the parser may use; the larger output counts.
    let mut best = Vec::new();
    for early in [true, false] {
        let mut decoder = if early {
            weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
        } else {
            weezl::decode::Decoder::new(weezl::BitOrder::Msb, 8)
        };
        out.out.clear();
        let status = decoder.into_stream(&mut out).decode_all(data).status;
        if let Err(e) = status
            && e.to_string() == "cap"
        {
            return Err(too_big(cap));
        }
        if out.out.len() > best.len() {
            best = std::mem::take(&mut out.out);
        }
    }
    Ok(best)
}

/// ASCII85 (at most four bytes out per byte in).
fn ascii85(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let (mut group, mut n) = (0u64, 0);
    for &c in data {
        match c {
            b'~' => break,
            b'z' if n == 0 => out.extend_from_slice(&[0; 4]),
            b'!'..=b'u' => {
                group = group * 85 + u64::from(c - b'!');
                n += 1;
                if n == 5 {
                    out.extend_from_slice(&(group as u32).to_be_bytes());
                    (group, n) = (0, 0);
                }
            }
            _ => {}
        }
    }
    if n > 1 {
        for _ in n..5 {
            group = group * 85 + 84;
        }
        out.extend_from_slice(&(group as u32).to_be_bytes()[..n - 1]);
    }
    out
}

// ---- 2. The loaded document ---------------------------------------------

/// Whose resources a form XObject draws with: a page's, or a form's own.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
    Page(ObjectId),
    Form(ObjectId),
}

/// The checks on the loaded document (see the module documentation).
fn check_document(doc: &Document) -> Result<(), String> {
    let mut walk = Walk {
        doc,
        heights: HashMap::new(),
        open: HashSet::new(),
        streams: HashSet::new(),
    };
    for page in doc.get_pages().into_values() {
        parent_chain(doc, page)?;
        walk.streams.extend(doc.get_page_contents(page));
        walk.fonts(Owner::Page(page));
        for content in doc.get_page_contents(page) {
            for form in walk.drawn(content, Owner::Page(page))? {
                walk.height(form, Owner::Page(page), 1)?;
            }
        }
    }
    let mut total = 0usize;
    for id in &walk.streams {
        let Ok(stream) = doc.get_object(*id).and_then(Object::as_stream) else {
            continue;
        };
        let filters: Vec<Vec<u8>> = stream
            .filters()
            .map(|f| f.into_iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default();
        let cap = MAX_STREAM_BYTES.min(MAX_DECODED_BYTES - total);
        if let Some(decoded) = decode(&stream.content, &filters, cap)? {
            total += decoded.len();
        }
    }
    Ok(())
}

/// `/Parent` links from `page` end within [`MAX_PARENT_CHAIN`] steps,
/// without a loop (the parser follows them recursively).
fn parent_chain(doc: &Document, page: ObjectId) -> Result<(), String> {
    let mut seen = HashSet::from([page]);
    let mut at = page;
    for _ in 0..MAX_PARENT_CHAIN {
        let Some(parent) = doc
            .get_dictionary(at)
            .ok()
            .and_then(|d| d.get(b"Parent").ok())
            .and_then(|p| p.as_reference().ok())
        else {
            return Ok(());
        };
        if !seen.insert(parent) {
            return Err("the page tree's /Parent links loop".into());
        }
        at = parent;
    }
    Err(format!(
        "the page tree is more than {MAX_PARENT_CHAIN} levels deep"
    ))
}

/// The form XObjects reachable from the pages, and the streams to measure.
struct Walk<'a> {
    doc: &'a Document,
    /// Height of a finished (form, resources) pair: forms below it, itself included.
    heights: HashMap<(ObjectId, Owner), usize>,
    /// The pairs on the current path (a pair met again is a loop).
    open: HashSet<(ObjectId, Owner)>,
    /// Streams the text extraction reads.
    streams: HashSet<ObjectId>,
}

impl<'a> Walk<'a> {
    /// The resources dictionary of `owner`, if any.
    fn resources(&self, owner: Owner) -> Option<&'a Dictionary> {
        match owner {
            Owner::Page(page) => {
                let (inline, ids) = self.doc.get_page_resources(page).ok()?;
                inline.or_else(|| ids.first().and_then(|id| self.doc.get_dictionary(*id).ok()))
            }
            Owner::Form(form) => {
                let stream = self.doc.get_object(form).ok()?.as_stream().ok()?;
                stream
                    .dict
                    .get_deref(b"Resources", self.doc)
                    .ok()?
                    .as_dict()
                    .ok()
            }
        }
    }

    /// The entries of `resources[key]`, dereferenced, with their ids.
    fn entries(&self, owner: Owner, key: &[u8]) -> Vec<(Option<ObjectId>, &'a Object)> {
        let Some(dict) = self
            .resources(owner)
            .and_then(|r| r.get_deref(key, self.doc).ok())
            .and_then(|d| d.as_dict().ok())
        else {
            return Vec::new();
        };
        dict.iter()
            .filter_map(|(_, v)| self.doc.dereference(v).ok())
            .collect()
    }

    /// The form XObjects `owner`'s resources name, with their names.
    fn forms(&self, owner: Owner) -> Vec<(Vec<u8>, ObjectId)> {
        let Some(dict) = self
            .resources(owner)
            .and_then(|r| r.get_deref(b"XObject", self.doc).ok())
            .and_then(|d| d.as_dict().ok())
        else {
            return Vec::new();
        };
        dict.iter()
            .filter_map(|(name, v)| {
                let id = v.as_reference().ok()?;
                let stream = self.doc.get_object(id).ok()?.as_stream().ok()?;
                let form = stream
                    .dict
                    .get(b"Subtype")
                    .and_then(Object::as_name)
                    .is_ok_and(|s| s == b"Form");
                form.then(|| (name.clone(), id))
            })
            .collect()
    }

    /// The forms a content stream draws: the names it calls `Do` on,
    /// looked up in `owner`'s resources.
    fn drawn(&self, content: ObjectId, owner: Owner) -> Result<Vec<ObjectId>, String> {
        let Some(stream) = self
            .doc
            .get_object(content)
            .ok()
            .and_then(|o| o.as_stream().ok())
        else {
            return Ok(Vec::new());
        };
        let filters: Vec<Vec<u8>> = stream
            .filters()
            .map(|f| f.into_iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default();
        let Some(data) = decode(&stream.content, &filters, MAX_STREAM_BYTES)? else {
            return Ok(Vec::new());
        };
        let called = names_called(&data);
        Ok(self
            .forms(owner)
            .into_iter()
            .filter(|(name, _)| called.contains(name))
            .map(|(_, id)| id)
            .collect())
    }

    /// Records the font streams (programs, maps) of `owner`'s fonts.
    fn fonts(&mut self, owner: Owner) {
        let mut found = Vec::new();
        let mut fonts: Vec<&Dictionary> = self
            .entries(owner, b"Font")
            .into_iter()
            .filter_map(|(_, f)| f.as_dict().ok())
            .collect();
        let descendants: Vec<&Dictionary> = fonts
            .iter()
            .filter_map(|f| f.get_deref(b"DescendantFonts", self.doc).ok())
            .filter_map(|d| d.as_array().ok())
            .flatten()
            .filter_map(|d| self.doc.dereference(d).ok()?.1.as_dict().ok())
            .collect();
        fonts.extend(descendants);
        for font in fonts {
            found.extend(stream_ref(font, b"ToUnicode"));
            found.extend(stream_ref(font, b"Encoding"));
            if let Ok(descriptor) = font
                .get_deref(b"FontDescriptor", self.doc)
                .and_then(Object::as_dict)
            {
                for key in [&b"FontFile"[..], b"FontFile2", b"FontFile3"] {
                    found.extend(stream_ref(descriptor, key));
                }
            }
        }
        self.streams.extend(found);
    }

    /// The height of `form` drawn with `owner`'s resources, at `depth`
    /// below its page: refuses loops and nesting past [`MAX_FORM_DEPTH`].
    fn height(&mut self, form: ObjectId, owner: Owner, depth: usize) -> Result<usize, String> {
        let too_deep = || format!("form XObjects nest more than {MAX_FORM_DEPTH} deep");
        if depth > MAX_FORM_DEPTH {
            return Err(too_deep());
        }
        if let Some(h) = self.heights.get(&(form, owner)) {
            return if depth + h - 1 > MAX_FORM_DEPTH {
                Err(too_deep())
            } else {
                Ok(*h)
            };
        }
        if !self.open.insert((form, owner)) {
            return Err("a form XObject draws itself".into());
        }
        self.streams.insert(form);
        // A form without resources of its own draws with its caller's.
        let draws_with = if self.resources(Owner::Form(form)).is_some() {
            Owner::Form(form)
        } else {
            owner
        };
        self.fonts(draws_with);
        let mut below = 0;
        for inner in self.drawn(form, draws_with)? {
            below = below.max(self.height(inner, draws_with, depth + 1)?);
        }
        self.open.remove(&(form, owner));
        self.heights.insert((form, owner), below + 1);
        Ok(below + 1)
    }
}

/// The names a content stream calls `Do` on (`/Name Do`).
fn names_called(content: &[u8]) -> HashSet<Vec<u8>> {
    let mut out = HashSet::new();
    let mut at = 0;
    while let Some(n) = find(&content[at..], b"Do") {
        let end = at + n;
        at = end + 2;
        let delimited =
            |b: Option<&u8>| b.is_none_or(|b| b.is_ascii_whitespace() || b"/[]<>()%".contains(b));
        if !delimited(content.get(at)) {
            continue;
        }
        let before = content[..end].trim_ascii_end();
        let start = before
            .iter()
            .rposition(|&b| b == b'/' || b.is_ascii_whitespace())
            .map_or(0, |p| p);
        if before.get(start) == Some(&b'/') {
            out.insert(before[start + 1..].to_vec());
        }
    }
    out
}

/// The id of `dict[key]` when it refers to an object.
fn stream_ref(dict: &Dictionary, key: &[u8]) -> Option<ObjectId> {
    dict.get(key).ok()?.as_reference().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings_and_comments() {
        let deep = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
        assert!(scan(deep.as_bytes(), 0).unwrap_err().contains("nest"));
        let ok = format!(
            "1 0 obj\n<< /A [[[1]]] >>\nendobj\n({}) % {}\n",
            "[".repeat(500),
            "<<".repeat(500)
        );
        assert_eq!(scan(ok.as_bytes(), 0), Ok(()));
        // Escaped parentheses stay inside the string.
        let escaped = format!("(a \\( {} ) [1]", "[".repeat(500));
        assert_eq!(scan(escaped.as_bytes(), 0), Ok(()));
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn an_object_stream_is_inflated_with_a_cap_and_scanned() {
        let nested = format!("{}{}", "[".repeat(1_000), "]".repeat(1_000));
        let mut pdf =
            b"5 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n".to_vec();
        pdf.extend(zlib(nested.as_bytes()));
        pdf.extend(b"\nendstream\nendobj\n");
        assert!(scan(&pdf, 0).unwrap_err().contains("nest"));

        let mut bomb = b"5 0 obj\n<< /Type /ObjStm /Filter [/FlateDecode] >>\nstream\n".to_vec();
        bomb.extend(zlib(&vec![b' '; MAX_STREAM_BYTES + 1]));
        bomb.extend(b"\nendstream\nendobj\n");
        assert!(scan(&bomb, 0).unwrap_err().contains("inflates past"));
    }

    #[test]
    fn filters_are_read_from_a_raw_dictionary() {
        assert_eq!(
            raw_filters(b"<< /Filter /FlateDecode /Length 5 >>"),
            [b"FlateDecode".to_vec()]
        );
        assert_eq!(
            raw_filters(b"<</Filter[/ASCII85Decode /FlateDecode]>>"),
            [b"ASCII85Decode".to_vec(), b"FlateDecode".to_vec()]
        );
        assert_eq!(raw_filters(b"<< /Filter 7 0 R >>"), [b"Guess".to_vec()]);
        assert!(raw_filters(b"<< /Length 5 >>").is_empty());
    }

    #[test]
    fn decoding_stops_at_the_cap_for_every_filter() {
        let zeros = vec![0u8; 1 << 20];
        assert!(decode(&zlib(&zeros), &[b"FlateDecode".to_vec()], 1 << 19).is_err());
        assert_eq!(
            decode(&zlib(&zeros), &[b"FlateDecode".to_vec()], 1 << 21)
                .unwrap()
                .unwrap()
                .len(),
            1 << 20
        );
        let mut lzw_bytes = Vec::new();
        weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
            .into_stream(&mut lzw_bytes)
            .encode_all(&zeros[..])
            .status
            .unwrap();
        assert!(decode(&lzw_bytes, &[b"LZWDecode".to_vec()], 1 << 19).is_err());
        assert_eq!(ascii85(b"87cURD]i,\"Ebo80~>"), b"Hello World!");
        assert_eq!(decode(b"xx", &[b"JBIG2Decode".to_vec()], 10), Ok(None));
    }
}
