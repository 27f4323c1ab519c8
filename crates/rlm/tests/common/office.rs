//! Office files, e-books, mail and archives built in the tests: ZIP
//! packages of XML strings, as the programs that write them lay them out
//! (only the parts a reader needs).

use std::io::Write;

use zip::write::SimpleFileOptions;

/// A ZIP of `entries` (name, bytes), deflated.
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        w.start_file(*name, options).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

/// A Word paragraph of `text` in style `style` (empty: none).
pub fn docx_paragraph(style: &str, text: &str) -> String {
    let ppr = if style.is_empty() {
        String::new()
    } else {
        format!(r#"<w:pPr><w:pStyle w:val="{style}"/></w:pPr>"#)
    };
    format!(
        "<w:p>{ppr}<w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
        escape(text)
    )
}

/// A Word page break.
pub fn docx_page_break() -> String {
    r#"<w:p><w:r><w:br w:type="page"/></w:r></w:p>"#.to_string()
}

/// A Word table of `rows`.
pub fn docx_table(rows: &[&[&str]]) -> String {
    let mut x = String::from("<w:tbl>");
    for row in rows {
        x.push_str("<w:tr>");
        for cell in *row {
            x.push_str(&format!("<w:tc>{}</w:tc>", docx_paragraph("", cell)));
        }
        x.push_str("</w:tr>");
    }
    x.push_str("</w:tbl>");
    x
}

/// A `.docx` whose body is `body` (paragraphs, tables); style `Heading1`
/// is a heading of level 1 (German Word names it `berschrift1`).
pub fn docx(body: &str) -> Vec<u8> {
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:document {W}><w:body>{body}</w:body></w:document>"#
    );
    let styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:styles {W}><w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style></w:styles>"#
    );
    zip_of(&[
        ("[Content_Types].xml", br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#),
        ("word/document.xml", document.as_bytes()),
        ("word/styles.xml", styles.as_bytes()),
    ])
}

/// A cell of a built sheet: text or a number.
pub enum Cell<'a> {
    /// Text (an inline string).
    T(&'a str),
    /// A number.
    N(f64),
}

/// An `.xlsx` with `sheets` (name, rows from row 1).
pub fn xlsx(sheets: &[(&str, Vec<Vec<Cell<'_>>>)]) -> Vec<u8> {
    let mut workbook = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>"#,
    );
    let mut rels = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">"#,
    );
    let mut types = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>"#,
    );
    let mut parts: Vec<(String, String)> = Vec::new();
    for (i, (name, rows)) in sheets.iter().enumerate() {
        let n = i + 1;
        workbook.push_str(&format!(
            r#"<sheet name="{}" sheetId="{n}" r:id="rId{n}"/>"#,
            escape(name)
        ));
        rels.push_str(&format!(r#"<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet{n}.xml"/>"#));
        types.push_str(&format!(r#"<Override PartName="/xl/worksheets/sheet{n}.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>"#));
        let mut sheet = String::from(
            r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>"#,
        );
        for (r, row) in rows.iter().enumerate() {
            sheet.push_str(&format!(r#"<row r="{}">"#, r + 1));
            for (c, cell) in row.iter().enumerate() {
                let at = format!("{}{}", (b'A' + c as u8) as char, r + 1);
                match cell {
                    Cell::T(t) => sheet.push_str(&format!(
                        r#"<c r="{at}" t="inlineStr"><is><t>{}</t></is></c>"#,
                        escape(t)
                    )),
                    Cell::N(v) => sheet.push_str(&format!(r#"<c r="{at}"><v>{v}</v></c>"#)),
                }
            }
            sheet.push_str("</row>");
        }
        sheet.push_str("</sheetData></worksheet>");
        parts.push((format!("xl/worksheets/sheet{n}.xml"), sheet));
    }
    workbook.push_str("</sheets></workbook>");
    rels.push_str("</Relationships>");
    types.push_str("</Types>");
    let root_rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#;
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("[Content_Types].xml", types.as_bytes()),
        ("_rels/.rels", root_rels.as_bytes()),
        ("xl/workbook.xml", workbook.as_bytes()),
        ("xl/_rels/workbook.xml.rels", rels.as_bytes()),
    ];
    for (name, xml) in &parts {
        entries.push((name, xml.as_bytes()));
    }
    zip_of(&entries)
}

/// A `.pptx` whose slides hold `slides` (a title, then body lines).
pub fn pptx(slides: &[(&str, &[&str])]) -> Vec<u8> {
    let p = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let mut presentation =
        format!(r#"<?xml version="1.0" encoding="UTF-8"?><p:presentation {p}><p:sldIdLst>"#);
    let mut rels = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">"#,
    );
    let mut parts = Vec::new();
    // Slide parts are numbered backwards: the order shown is the list's.
    for (i, (title, lines)) in slides.iter().enumerate() {
        let part = slides.len() - i;
        presentation.push_str(&format!(
            r#"<p:sldId id="{}" r:id="rId{}"/>"#,
            256 + i,
            i + 1
        ));
        rels.push_str(&format!(r#"<Relationship Id="rId{}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide{part}.xml"/>"#, i + 1));
        let body: String = lines
            .iter()
            .map(|l| format!("<a:p><a:r><a:t>{}</a:t></a:r></a:p>", escape(l)))
            .collect();
        let slide = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><p:sld {p}><p:cSld><p:spTree><p:sp><p:nvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>{}</a:t></a:r></a:p></p:txBody></p:sp><p:sp><p:nvSpPr><p:nvPr/></p:nvSpPr><p:txBody>{body}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"#,
            escape(title)
        );
        parts.push((format!("ppt/slides/slide{part}.xml"), slide));
    }
    presentation.push_str("</p:sldIdLst></p:presentation>");
    rels.push_str("</Relationships>");
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("ppt/presentation.xml", presentation.as_bytes()),
        ("ppt/_rels/presentation.xml.rels", rels.as_bytes()),
    ];
    for (name, xml) in &parts {
        entries.push((name, xml.as_bytes()));
    }
    zip_of(&entries)
}

const ODF_NS: &str = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0""#;

/// An OpenDocument package of `mimetype` whose body (inside
/// `office:body`) is `body`.
pub fn odf(mimetype: &str, body: &str) -> Vec<u8> {
    let content = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><office:document-content {ODF_NS} office:version="1.2"><office:body>{body}</office:body></office:document-content>"#
    );
    let manifest = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>"#
    );
    zip_of(&[
        ("mimetype", mimetype.as_bytes()),
        ("content.xml", content.as_bytes()),
        ("META-INF/manifest.xml", manifest.as_bytes()),
    ])
}

/// An `.ods` with one sheet `name` of text `rows`.
pub fn ods(name: &str, rows: &[&[&str]]) -> Vec<u8> {
    let mut body = format!(
        r#"<office:spreadsheet><table:table table:name="{}">"#,
        escape(name)
    );
    for row in rows {
        body.push_str("<table:table-row>");
        for cell in *row {
            body.push_str(&format!(
                r#"<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>"#,
                escape(cell)
            ));
        }
        body.push_str("</table:table-row>");
    }
    body.push_str("</table:table></office:spreadsheet>");
    odf("application/vnd.oasis.opendocument.spreadsheet", &body)
}

/// An `.epub` of `chapters` (title, paragraph).
pub fn epub(title: &str, chapters: &[(&str, &str)]) -> Vec<u8> {
    let container = r#"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#;
    let mut manifest = String::new();
    let mut spine = String::new();
    let mut parts = Vec::new();
    for (i, (heading, text)) in chapters.iter().enumerate() {
        manifest.push_str(&format!(
            r#"<item id="c{i}" href="text/ch{i}.xhtml" media-type="application/xhtml+xml"/>"#
        ));
        spine.push_str(&format!(r#"<itemref idref="c{i}"/>"#));
        parts.push((
            format!("OEBPS/text/ch{i}.xhtml"),
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{0}</title></head><body><h1>{0}</h1><p>{1}</p></body></html>"#,
                escape(heading),
                escape(text)
            ),
        ));
    }
    let opf = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{}</dc:title></metadata><manifest>{manifest}</manifest><spine>{spine}</spine></package>"#,
        escape(title)
    );
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("mimetype", b"application/epub+zip"),
        ("META-INF/container.xml", container.as_bytes()),
        ("OEBPS/content.opf", opf.as_bytes()),
    ];
    for (name, xml) in &parts {
        entries.push((name, xml.as_bytes()));
    }
    zip_of(&entries)
}

/// An e-mail message from `from` on `date` (RFC 2822) about `subject`,
/// with `body` and, if given, a text attachment (name, content).
pub fn email(
    from: &str,
    date: &str,
    subject: &str,
    body: &str,
    attachment: Option<(&str, &str)>,
) -> String {
    let mut m = format!(
        "From: {from}\r\nTo: Team <team@example.org>\r\nDate: {date}\r\nSubject: {subject}\r\nMIME-Version: 1.0\r\n"
    );
    match attachment {
        None => m.push_str(&format!("Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n")),
        Some((name, content)) => m.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=\"part\"\r\n\r\n--part\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n--part\r\nContent-Type: text/plain; name=\"{name}\"\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n\r\n{content}\r\n--part--\r\n"
        )),
    }
    m
}
