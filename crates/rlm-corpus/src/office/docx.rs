//! Word documents (WordprocessingML): paragraphs in order, headings as
//! `#` lines (by their style's outline level, so a German `Überschrift 1`
//! counts as a heading too), list items as `-` lines, tables as rows with
//! their header, and pages where Word last broke them
//! (`lastRenderedPageBreak`) or a page break stands.

use std::collections::HashMap;

use super::package::Package;
use super::xml::{Node, walk};
use super::{DocText, Refusal, add_to_open_cell, nest_in_open_cell, table_lines};
use crate::chunk::Place;
use crate::extracted::{DocKind, Extracted, SkipReason};

/// Opens an Office Open XML package; one that carries macros is not read.
pub(super) fn open_ooxml(bytes: &[u8]) -> Result<Package<'_>, Refusal> {
    let package = Package::open(bytes)?;
    if package
        .names()
        .iter()
        .any(|n| n.to_ascii_lowercase().ends_with("vbaproject.bin"))
    {
        return Err(Refusal::Skip(SkipReason::Macros));
    }
    Ok(package)
}

/// The `dc:title` of an OOXML package's core properties, if set.
pub(super) fn core_title(package: &mut Package<'_>) -> Result<Option<String>, Refusal> {
    let Some(xml) = package.read_text("docProps/core.xml")? else {
        return Ok(None);
    };
    let mut title = None;
    let mut in_title = false;
    walk(&xml, |node| match node {
        Node::Open(e) if e.name == "title" => in_title = true,
        Node::Close(name) if name == "title" => in_title = false,
        Node::Text(t) if in_title => title.get_or_insert_with(String::new).push_str(&t),
        _ => {}
    })
    .map_err(Refusal::Corrupt)?;
    Ok(title.filter(|t| !t.trim().is_empty()))
}

/// The text of a `.docx`.
pub(super) fn extract(bytes: &[u8]) -> Result<Extracted, Refusal> {
    let mut package = open_ooxml(bytes)?;
    let Some(body) = package.read_text("word/document.xml")? else {
        return Err(Refusal::Corrupt(
            "no word/document.xml: not a Word document".into(),
        ));
    };
    let levels = match package.read_text("word/styles.xml")? {
        Some(styles) => heading_levels(&styles)?,
        None => HashMap::new(),
    };
    let title = core_title(&mut package)?;
    let mut reader = BodyReader::new(&levels);
    walk(&body, |node| reader.visit(node)).map_err(Refusal::Corrupt)?;
    Ok(reader.finish(title))
}

/// The heading level (1-based) of each paragraph style that is a heading:
/// by its outline level, else by the built-in style name (`heading 2`,
/// `Title`), which Word keeps in English whatever the user's language.
fn heading_levels(styles: &str) -> Result<HashMap<String, usize>, Refusal> {
    let mut levels = HashMap::new();
    let mut id: Option<String> = None;
    walk(styles, |node| match node {
        Node::Open(e) if e.name == "style" => id = e.attr("w:styleId").map(str::to_string),
        Node::Open(e) if id.is_some() && e.name == "name" => {
            let name = e.attr("w:val").unwrap_or_default().to_ascii_lowercase();
            let level = if name == "title" {
                Some(1)
            } else {
                name.strip_prefix("heading ")
                    .and_then(|n| n.trim().parse::<usize>().ok())
            };
            if let (Some(level), Some(id)) = (level, &id) {
                levels.insert(id.clone(), level.clamp(1, 6));
            }
        }
        Node::Open(e) if id.is_some() && e.name == "outlineLvl" => {
            if let (Some(level), Some(id)) =
                (e.attr("w:val").and_then(|v| v.parse::<usize>().ok()), &id)
                && level < 9
            {
                levels.insert(id.clone(), (level + 1).min(6));
            }
        }
        Node::Close(name) if name == "style" => id = None,
        _ => {}
    })
    .map_err(Refusal::Corrupt)?;
    Ok(levels)
}

/// A paragraph being read.
#[derive(Default)]
struct Paragraph {
    text: String,
    style: Option<String>,
    outline: Option<usize>,
    list_level: Option<usize>,
}

/// Reads `word/document.xml` node by node.
struct BodyReader<'s> {
    levels: &'s HashMap<String, usize>,
    out: DocText,
    page: u32,
    /// Text was written since the last page start (a break right after
    /// another is the same break).
    text_on_page: bool,
    paragraph: Option<Paragraph>,
    in_run: bool,
    in_text: bool,
    /// Open tables, innermost last: rows of cells.
    tables: Vec<Vec<Vec<String>>>,
    /// A page break seen inside a table, applied after it.
    pending_break: bool,
}

impl<'s> BodyReader<'s> {
    fn new(levels: &'s HashMap<String, usize>) -> BodyReader<'s> {
        BodyReader {
            levels,
            out: DocText::new(),
            page: 1,
            text_on_page: false,
            paragraph: None,
            in_run: false,
            in_text: false,
            tables: Vec::new(),
            pending_break: false,
        }
    }

    fn visit(&mut self, node: Node) {
        match node {
            Node::Open(e) => match e.name.as_str() {
                "p" => self.paragraph = Some(Paragraph::default()),
                "pStyle" => self.with_paragraph(|p| p.style = e.attr("w:val").map(str::to_string)),
                "outlineLvl" => {
                    let level = e.attr("w:val").and_then(|v| v.parse().ok());
                    self.with_paragraph(|p| p.outline = level);
                }
                "numPr" => self.with_paragraph(|p| p.list_level = p.list_level.or(Some(0))),
                "ilvl" => {
                    let level = e.attr("w:val").and_then(|v| v.parse().ok());
                    self.with_paragraph(|p| p.list_level = level.or(p.list_level));
                }
                "r" => self.in_run = true,
                "t" if self.in_run => self.in_text = true,
                "tab" if self.in_run => self.push_text("\t"),
                "br" | "cr" if self.in_run => {
                    if e.attr("w:type") == Some("page") {
                        self.page_break();
                    } else {
                        self.push_text("\n");
                    }
                }
                "lastRenderedPageBreak" => self.page_break(),
                "tbl" => self.tables.push(Vec::new()),
                "tr" => {
                    if let Some(t) = self.tables.last_mut() {
                        t.push(Vec::new());
                    }
                }
                "tc" => {
                    if let Some(row) = self.tables.last_mut().and_then(|t| t.last_mut()) {
                        row.push(String::new());
                    }
                }
                _ => {}
            },
            Node::Text(t) if self.in_text => self.push_text(&t),
            Node::Close(name) => match name.as_str() {
                "t" => self.in_text = false,
                "r" => self.in_run = false,
                "p" => self.end_paragraph(),
                "tbl" => self.end_table(),
                _ => {}
            },
            Node::Text(_) => {}
        }
    }

    fn with_paragraph(&mut self, f: impl FnOnce(&mut Paragraph)) {
        if let Some(p) = self.paragraph.as_mut() {
            f(p);
        }
    }

    fn push_text(&mut self, text: &str) {
        self.with_paragraph(|p| p.text.push_str(text));
    }

    /// A new page starts here (outside tables; inside one, after it).
    fn page_break(&mut self) {
        if !self.tables.is_empty() {
            self.pending_break = true;
            return;
        }
        if !self.text_on_page {
            return;
        }
        // The paragraph read so far belongs to the page that ends.
        let carried = self.paragraph.as_mut().map(|p| std::mem::take(&mut p.text));
        if let Some(text) = carried.filter(|t| !t.trim().is_empty()) {
            self.out.line(&text);
        }
        if self.page == 1 && self.out.len() > 0 {
            self.out.start_at_zero(Place::Page(1));
        }
        self.page += 1;
        self.out.start(Place::Page(self.page));
        self.text_on_page = false;
    }

    fn end_paragraph(&mut self) {
        let Some(p) = self.paragraph.take() else {
            return;
        };
        let text = p.text.trim();
        if text.is_empty() {
            return;
        }
        if add_to_open_cell(&mut self.tables, text) {
            return;
        }
        let heading = p
            .outline
            .map(|l| l + 1)
            .or_else(|| p.style.as_ref().and_then(|s| self.levels.get(s).copied()))
            .filter(|l| *l <= 6);
        self.text_on_page = true;
        match (heading, p.list_level) {
            (Some(level), _) => {
                self.out.blank();
                self.out
                    .paragraph(&format!("{} {}", "#".repeat(level), one_line(text)));
            }
            (None, Some(level)) => {
                self.out.line(&format!(
                    "{}- {}",
                    "  ".repeat(level.min(8)),
                    one_line(text)
                ));
            }
            (None, None) => self.out.paragraph(text),
        }
    }

    fn end_table(&mut self) {
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
        if std::mem::take(&mut self.pending_break) {
            self.page_break();
        }
    }

    fn finish(self, title: Option<String>) -> Extracted {
        self.out.finish(DocKind::Docx, title)
    }
}

/// `text` with its line breaks as spaces (a heading or list item is one line).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(xml: &str) -> Extracted {
        let styles = r#"<w:styles><w:style w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>
            <w:style w:styleId="Eigene"><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style></w:styles>"#;
        let levels = heading_levels(styles).unwrap();
        let mut reader = BodyReader::new(&levels);
        walk(xml, |n| reader.visit(n)).unwrap();
        reader.finish(None)
    }

    fn p(style: &str, text: &str) -> String {
        format!(
            r#"<w:p><w:pPr><w:pStyle w:val="{style}"/></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"#
        )
    }

    #[test]
    fn headings_by_style_lists_and_paragraphs() {
        let xml = format!(
            "<w:document><w:body>{}{}{}<w:p><w:pPr><w:numPr><w:ilvl w:val=\"1\"/></w:numPr></w:pPr><w:r><w:t>Punkt</w:t></w:r></w:p></w:body></w:document>",
            p("berschrift1", "Vertrag"),
            p("Eigene", "Kündigung"),
            p("Normal", "Die Frist beträgt drei Monate.")
        );
        let e = body(&xml);
        assert_eq!(
            e.text,
            "# Vertrag\n\n## Kündigung\n\nDie Frist beträgt drei Monate.\n\n  - Punkt\n"
        );
        assert_eq!(e.title.as_deref(), Some("Vertrag"));
        assert_eq!(e.sections, None);
    }

    #[test]
    fn page_breaks_start_pages_and_tables_keep_headers() {
        let table = "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Name</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Betrag</w:t></w:r></w:p></w:tc></w:tr>\
            <w:tr><w:tc><w:p><w:r><w:t>Anna</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>300</w:t></w:r></w:p></w:tc></w:tr></w:tbl>";
        let xml = format!(
            "<w:body>{}<w:p><w:r><w:br w:type=\"page\"/></w:r></w:p><w:p><w:r><w:lastRenderedPageBreak/><w:t>zwei</w:t></w:r></w:p>{table}</w:body>",
            p("Normal", "eins")
        );
        let e = body(&xml);
        let sections = e.sections.unwrap();
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].place, Place::Page(1));
        assert_eq!(sections[1].place, Place::Page(2));
        assert!(e.text[sections[1].start..].starts_with("zwei"));
        assert!(
            e.text
                .contains("| Name | Betrag |\nName: Anna | Betrag: 300\n")
        );
    }
}
