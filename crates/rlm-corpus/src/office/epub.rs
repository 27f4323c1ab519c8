//! EPUB e-books: the package's reading order (`spine`), each chapter's
//! XHTML as visible text, each chapter a place (`chapter 3`). A book whose
//! chapters are encrypted (DRM) is not read; fonts obfuscated the standard
//! way are not chapters and do not count.

use std::collections::HashMap;

use super::package::{Package, resolve};
use super::xml::{Node, walk};
use super::{DocText, Refusal};
use crate::chunk::Place;
use crate::extracted::{DocKind, Extracted, SkipReason};
use crate::html::html_to_text;

/// The text of an `.epub`.
pub(super) fn extract(bytes: &[u8]) -> Result<Extracted, Refusal> {
    let mut package = Package::open(bytes)?;
    let opf_path = rootfile(&mut package)?;
    let Some(opf) = package.read_text(&opf_path)? else {
        return Err(Refusal::Corrupt(format!(
            "the package document {opf_path} is missing"
        )));
    };
    let book = read_opf(&opf)?;
    let chapters: Vec<String> = book
        .spine
        .iter()
        .filter_map(|id| book.manifest.get(id))
        .filter(|(_, media)| media.contains("html"))
        .map(|(href, _)| resolve(&opf_path, href))
        .collect();
    if let Some(encryption) = package.read_text("META-INF/encryption.xml")?
        && chapters.iter().any(|c| encrypted(&encryption, c))
    {
        return Err(Refusal::Skip(SkipReason::Encrypted));
    }
    let mut out = DocText::new();
    for (i, path) in chapters.iter().enumerate() {
        let Some(xhtml) = package.read_text(path)? else {
            continue;
        };
        let html = html_to_text(&xhtml);
        if html.text.trim().is_empty() {
            continue;
        }
        out.start(Place::Named(format!("chapter {}", i + 1)));
        out.paragraph(&html.text);
    }
    Ok(out.finish(DocKind::Epub, book.title))
}

/// The path of the package document, from `META-INF/container.xml`.
fn rootfile(package: &mut Package<'_>) -> Result<String, Refusal> {
    let Some(container) = package.read_text("META-INF/container.xml")? else {
        return Err(Refusal::Corrupt(
            "no META-INF/container.xml: not an EPUB".into(),
        ));
    };
    let mut path = None;
    walk(&container, |node| {
        if let Node::Open(e) = node
            && e.name == "rootfile"
            && path.is_none()
        {
            path = e.attr("full-path").map(str::to_string);
        }
    })
    .map_err(Refusal::Corrupt)?;
    path.ok_or_else(|| Refusal::Corrupt("container.xml names no package document".into()))
}

/// What the package document says: title, manifest, reading order.
struct Book {
    title: Option<String>,
    /// id → (href, media type).
    manifest: HashMap<String, (String, String)>,
    /// Manifest ids in reading order.
    spine: Vec<String>,
}

fn read_opf(opf: &str) -> Result<Book, Refusal> {
    let mut book = Book {
        title: None,
        manifest: HashMap::new(),
        spine: Vec::new(),
    };
    let mut in_title = false;
    walk(opf, |node| match node {
        Node::Open(e) => match e.name.as_str() {
            "title" if book.title.is_none() => in_title = true,
            "item" => {
                if let (Some(id), Some(href)) = (e.attr("id"), e.attr("href")) {
                    let media = e.attr("media-type").unwrap_or_default().to_string();
                    book.manifest
                        .insert(id.to_string(), (href.to_string(), media));
                }
            }
            "itemref" => {
                if let Some(id) = e.attr("idref") {
                    book.spine.push(id.to_string());
                }
            }
            _ => {}
        },
        Node::Text(t) if in_title => book.title.get_or_insert_with(String::new).push_str(&t),
        Node::Close(n) if n == "title" => in_title = false,
        _ => {}
    })
    .map_err(Refusal::Corrupt)?;
    Ok(book)
}

/// True when `encryption.xml` lists `path` as encrypted other than by the
/// font obfuscation algorithms (which only fonts use).
fn encrypted(encryption: &str, path: &str) -> bool {
    let mut found = false;
    let mut algorithm = String::new();
    let broken = walk(encryption, |node| {
        if let Node::Open(e) = node {
            match e.name.as_str() {
                "EncryptionMethod" => {
                    algorithm = e.attr("Algorithm").unwrap_or_default().to_string();
                }
                "CipherReference" => {
                    let uri = e.attr("URI").unwrap_or_default();
                    let font_obfuscation = algorithm.contains("idpf.org/2008/embedding")
                        || algorithm.contains("ns.adobe.com/pdf/enc");
                    if resolve("", uri) == path && !font_obfuscation {
                        found = true;
                    }
                }
                _ => {}
            }
        }
    })
    .is_err();
    // An encryption.xml that cannot be read may hide anything.
    broken || found
}
