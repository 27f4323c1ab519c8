//! PowerPoint presentations (PresentationML): the text of each slide in
//! the order the presentation shows them, each slide a place of its own
//! (`slide 4`), its title as a `#` heading.

use super::docx::{core_title, open_ooxml};
use super::package::{Package, resolve};
use super::xml::{Node, walk};
use super::{DocText, Refusal};
use crate::chunk::Place;
use crate::extracted::{DocKind, Extracted};

/// The text of a `.pptx`.
pub(super) fn extract(bytes: &[u8]) -> Result<Extracted, Refusal> {
    let mut package = open_ooxml(bytes)?;
    let slides = slide_paths(&mut package)?;
    if slides.is_empty() && !package.has("ppt/presentation.xml") {
        return Err(Refusal::Corrupt(
            "no ppt/presentation.xml: not a PowerPoint presentation".into(),
        ));
    }
    let title = core_title(&mut package)?;
    let mut out = DocText::new();
    for (i, path) in slides.iter().enumerate() {
        let Some(xml) = package.read_text(path)? else {
            continue;
        };
        out.start(Place::Slide(i as u32 + 1));
        slide_text(&xml, &mut out)?;
        out.blank();
    }
    Ok(out.finish(DocKind::Pptx, title))
}

/// The slide parts in presentation order: `sldIdLst` through the
/// presentation's relationships; without them, `slideN.xml` by number.
fn slide_paths(package: &mut Package<'_>) -> Result<Vec<String>, Refusal> {
    let ordered = match (
        package.read_text("ppt/presentation.xml")?,
        package.read_text("ppt/_rels/presentation.xml.rels")?,
    ) {
        (Some(presentation), Some(rels)) => {
            let targets = relationships(&rels)?;
            let mut ids = Vec::new();
            walk(&presentation, |node| {
                if let Node::Open(e) = node
                    && e.name == "sldId"
                    && let Some(id) = e
                        .attrs
                        .iter()
                        .find(|(k, _)| k.ends_with(":id"))
                        .map(|(_, v)| v.clone())
                {
                    ids.push(id);
                }
            })
            .map_err(Refusal::Corrupt)?;
            ids.iter()
                .filter_map(|id| targets.iter().find(|(rid, _)| rid == id))
                .map(|(_, target)| resolve("ppt/presentation.xml", target))
                .collect()
        }
        _ => Vec::new(),
    };
    if !ordered.is_empty() {
        return Ok(ordered);
    }
    let mut numbered: Vec<(u32, String)> = package
        .names()
        .into_iter()
        .filter_map(|n| {
            let number = n
                .strip_prefix("ppt/slides/slide")?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((number, n))
        })
        .collect();
    numbered.sort();
    Ok(numbered.into_iter().map(|(_, n)| n).collect())
}

/// (Id, Target) of each relationship in a `.rels` part.
pub(super) fn relationships(rels: &str) -> Result<Vec<(String, String)>, Refusal> {
    let mut out = Vec::new();
    walk(rels, |node| {
        if let Node::Open(e) = node
            && e.name == "Relationship"
            && let (Some(id), Some(target)) = (e.attr("Id"), e.attr("Target"))
        {
            out.push((id.to_string(), target.to_string()));
        }
    })
    .map_err(Refusal::Corrupt)?;
    Ok(out)
}

/// Writes the paragraphs of one slide; those of its title placeholder as a
/// `#` heading.
fn slide_text(xml: &str, out: &mut DocText) -> Result<(), Refusal> {
    let mut paragraph: Option<String> = None;
    let mut in_text = false;
    let mut title_shape = false;
    let mut depth_in_shape = 0usize;
    walk(xml, |node| match node {
        Node::Open(e) => match e.name.as_str() {
            "sp" => {
                depth_in_shape += 1;
                if depth_in_shape == 1 {
                    title_shape = false;
                }
            }
            "ph" => {
                title_shape |= matches!(e.attr("type"), Some("title" | "ctrTitle"));
            }
            "p" => paragraph = Some(String::new()),
            "t" => in_text = true,
            "br" => {
                if let Some(p) = paragraph.as_mut() {
                    p.push('\n');
                }
            }
            _ => {}
        },
        Node::Text(t) if in_text => {
            if let Some(p) = paragraph.as_mut() {
                p.push_str(&t);
            }
        }
        Node::Close(name) => match name.as_str() {
            "t" => in_text = false,
            "sp" => depth_in_shape = depth_in_shape.saturating_sub(1),
            "p" => {
                if let Some(p) = paragraph.take().filter(|p| !p.trim().is_empty()) {
                    if title_shape {
                        let line = p.split_whitespace().collect::<Vec<_>>().join(" ");
                        out.line(&format!("# {line}"));
                    } else {
                        for l in p.lines() {
                            out.line(l);
                        }
                    }
                }
            }
            _ => {}
        },
        Node::Text(_) => {}
    })
    .map_err(Refusal::Corrupt)
}
