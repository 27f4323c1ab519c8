//! OpenDocument text and presentations (`content.xml`): headings by their
//! outline level, list items, tables as rows with their header, pages
//! where the writer last broke them (`soft-page-break`), and in a
//! presentation each `draw:page` a slide.

use super::package::Package;
use super::xml::{Node, walk};
use super::{DocText, Refusal, add_to_open_cell, nest_in_open_cell, table_lines};
use crate::chunk::Place;
use crate::extracted::{DocKind, Extracted, SkipReason};

/// Opens an OpenDocument package; an encrypted one is not read.
pub(super) fn open_odf(bytes: &[u8]) -> Result<Package<'_>, Refusal> {
    let mut package = Package::open(bytes)?;
    if let Some(manifest) = package.read_text("META-INF/manifest.xml")?
        && manifest.contains("encryption-data")
    {
        return Err(Refusal::Skip(SkipReason::Encrypted));
    }
    Ok(package)
}

/// The text of an `.odt` or `.odp`.
pub(super) fn extract(bytes: &[u8], kind: DocKind) -> Result<Extracted, Refusal> {
    let mut package = open_odf(bytes)?;
    let Some(content) = package.read_text("content.xml")? else {
        return Err(Refusal::Corrupt(
            "no content.xml: not an OpenDocument file".into(),
        ));
    };
    let title = match package.read_text("meta.xml")? {
        Some(meta) => meta_title(&meta)?,
        None => None,
    };
    let mut reader = ContentReader::new(kind == DocKind::Odp);
    walk(&content, |node| reader.visit(node)).map_err(Refusal::Corrupt)?;
    Ok(reader.out.finish(kind, title))
}

fn meta_title(meta: &str) -> Result<Option<String>, Refusal> {
    let mut title: Option<String> = None;
    let mut in_title = false;
    walk(meta, |node| match node {
        Node::Open(e) if e.name == "title" => in_title = true,
        Node::Close(n) if n == "title" => in_title = false,
        Node::Text(t) if in_title => title.get_or_insert_with(String::new).push_str(&t),
        _ => {}
    })
    .map_err(Refusal::Corrupt)?;
    Ok(title)
}

/// Reads `content.xml` node by node.
struct ContentReader {
    out: DocText,
    slides: bool,
    slide: u32,
    page: u32,
    text_on_page: bool,
    /// The paragraph or heading being read: its text and heading level.
    paragraph: Option<(String, Option<usize>)>,
    /// Paragraphs nest (a note inside a paragraph): the outer ones wait.
    outer: Vec<(String, Option<usize>)>,
    list_depth: usize,
    /// Open tables, innermost last: rows of cells.
    tables: Vec<Vec<Vec<String>>>,
    /// Inside an annotation or presenter notes: not document text.
    skip_depth: usize,
}

impl ContentReader {
    fn new(slides: bool) -> ContentReader {
        ContentReader {
            out: DocText::new(),
            slides,
            slide: 0,
            page: 1,
            text_on_page: false,
            paragraph: None,
            outer: Vec::new(),
            list_depth: 0,
            tables: Vec::new(),
            skip_depth: 0,
        }
    }

    fn visit(&mut self, node: Node) {
        if self.skip_depth > 0 {
            match &node {
                Node::Open(e) if is_skipped(&e.name) => self.skip_depth += 1,
                Node::Close(n) if is_skipped(n) => self.skip_depth -= 1,
                _ => {}
            }
            return;
        }
        match node {
            Node::Open(e) => match e.name.as_str() {
                n if is_skipped(n) => self.skip_depth = 1,
                "page" if self.slides => {
                    self.slide += 1;
                    self.out.start(Place::Slide(self.slide));
                }
                "h" => {
                    let level = e
                        .attr("text:outline-level")
                        .and_then(|l| l.parse::<usize>().ok())
                        .unwrap_or(1)
                        .clamp(1, 6);
                    self.open_paragraph(Some(level));
                }
                "p" => self.open_paragraph(None),
                "list" => self.list_depth += 1,
                "s" => {
                    let n = e
                        .attr("text:c")
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(1usize);
                    self.push(&" ".repeat(n.min(64)));
                }
                "tab" => self.push("\t"),
                "line-break" => self.push("\n"),
                "soft-page-break" if !self.slides => self.page_break(),
                "table" => self.tables.push(Vec::new()),
                "table-row" => {
                    if let Some(t) = self.tables.last_mut() {
                        t.push(Vec::new());
                    }
                }
                "table-cell" | "covered-table-cell" => {
                    if let Some(r) = self.tables.last_mut().and_then(|t| t.last_mut()) {
                        r.push(String::new());
                    }
                }
                _ => {}
            },
            Node::Text(t) => self.push(&t),
            Node::Close(name) => match name.as_str() {
                "h" | "p" => self.close_paragraph(),
                "list" => self.list_depth = self.list_depth.saturating_sub(1),
                "table" => self.close_table(),
                "page" if self.slides => self.out.blank(),
                _ => {}
            },
        }
    }

    fn open_paragraph(&mut self, level: Option<usize>) {
        if let Some(open) = self.paragraph.take() {
            self.outer.push(open);
        }
        self.paragraph = Some((String::new(), level));
    }

    fn push(&mut self, text: &str) {
        if let Some((p, _)) = self.paragraph.as_mut() {
            p.push_str(text);
        }
    }

    fn close_paragraph(&mut self) {
        let Some((text, level)) = self.paragraph.take() else {
            return;
        };
        if let Some((mut outer, outer_level)) = self.outer.pop() {
            // A paragraph inside a paragraph (a footnote): its text joins.
            outer.push(' ');
            outer.push_str(&text);
            self.paragraph = Some((outer, outer_level));
            return;
        }
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if add_to_open_cell(&mut self.tables, text) {
            return;
        }
        self.text_on_page = true;
        let one_line = || text.split_whitespace().collect::<Vec<_>>().join(" ");
        match level {
            Some(level) => {
                self.out.blank();
                self.out
                    .paragraph(&format!("{} {}", "#".repeat(level), one_line()));
            }
            None if self.list_depth > 0 => {
                let indent = "  ".repeat(self.list_depth.min(8) - 1);
                self.out.line(&format!("{indent}- {}", one_line()));
            }
            None if self.slides => {
                for l in text.lines() {
                    self.out.line(l);
                }
            }
            None => self.out.paragraph(text),
        }
    }

    fn close_table(&mut self) {
        let Some(rows) = self.tables.pop() else {
            return;
        };
        // A table inside a cell: its text joins the cell.
        if nest_in_open_cell(&mut self.tables, &rows) {
            return;
        }
        self.out.blank();
        for line in table_lines(&rows) {
            self.out.line(&line);
            self.text_on_page = true;
        }
        self.out.blank();
    }

    fn page_break(&mut self) {
        if !self.tables.is_empty() || self.paragraph.is_some() || !self.text_on_page {
            // Mid-paragraph or mid-table breaks move to the next paragraph's
            // start, which the writer marks again; nothing is split here.
            return;
        }
        self.out.start_at_zero(Place::Page(1));
        self.page += 1;
        self.out.start(Place::Page(self.page));
        self.text_on_page = false;
    }
}

/// Elements whose text is not the document's: comments, presenter notes.
fn is_skipped(name: &str) -> bool {
    matches!(name, "annotation" | "notes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(xml: &str, slides: bool) -> Extracted {
        let mut reader = ContentReader::new(slides);
        walk(xml, |n| reader.visit(n)).unwrap();
        reader
            .out
            .finish(if slides { DocKind::Odp } else { DocKind::Odt }, None)
    }

    #[test]
    fn text_headings_lists_and_pages() {
        let xml = r#"<office:text><text:h text:outline-level="2">Fristen</text:h>
            <text:p>Drei<text:s text:c="2"/>Monate<office:annotation><text:p>Kommentar</text:p></office:annotation></text:p>
            <text:soft-page-break/>
            <text:list><text:list-item><text:p>eins</text:p></text:list-item></text:list></office:text>"#;
        let e = read(xml, false);
        assert_eq!(e.text, "## Fristen\n\nDrei  Monate\n\n- eins\n");
        let sections = e.sections.unwrap();
        assert_eq!(sections[1].place, Place::Page(2));
        assert!(e.text[sections[1].start..].starts_with("- eins"));
    }

    #[test]
    fn presentation_pages_are_slides() {
        let xml = r#"<office:presentation><draw:page><draw:frame><draw:text-box><text:p>Erste</text:p></draw:text-box></draw:frame>
            <presentation:notes><text:p>Notiz</text:p></presentation:notes></draw:page>
            <draw:page><draw:frame><draw:text-box><text:p>Zweite</text:p></draw:text-box></draw:frame></draw:page></office:presentation>"#;
        let e = read(xml, true);
        assert!(!e.text.contains("Notiz"));
        let sections = e.sections.unwrap();
        assert_eq!(sections[1].place, Place::Slide(2));
        assert!(e.text[sections[1].start..].starts_with("Zweite"));
    }
}
