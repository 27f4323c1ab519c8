//! Extraction throughput per format: `cargo bench -p rlm-corpus --bench extraction`.
//!
//! Builds one file of each format holding the same ~2 MB of German and
//! English prose (a spreadsheet: the same words in rows of four columns;
//! mail: an mbox of 500 messages; a ZIP: the text files deflated), then
//! times `extract` plus chunking on each and prints MB/s of the file's own
//! size and of the text it gave, beside plain text. Set RLM_BENCH_MB for
//! another size.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rlm_corpus::chunk_text;
use rlm_corpus::extract::{Extraction, extract};
use zip::write::SimpleFileOptions;

const WORDS: &[&str] = &[
    "Mietvertrag",
    "Kündigungsfrist",
    "tenant",
    "deposit",
    "Kaution",
    "notice",
    "the",
    "der",
    "die",
    "und",
    "and",
    "payment",
    "Zahlung",
    "Monat",
    "month",
    "Vermieter",
    "landlord",
    "clause",
    "Abschnitt",
    "Hamburg",
    "Berlin",
    "invoice",
    "Rechnung",
    "Betrag",
    "amount",
    "drei",
    "three",
];

/// Paragraphs of about `bytes` of text, each of ~60 words.
fn paragraphs(bytes: usize) -> Vec<String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::new();
    let mut total = 0;
    while total < bytes {
        let mut p = String::new();
        for _ in 0..60 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
            p.push(' ');
        }
        total += p.len();
        out.push(p.trim_end().to_string());
    }
    out
}

fn zip_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        w.start_file(name.as_str(), options).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn docx(paras: &[String]) -> Vec<u8> {
    let body: String = paras
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let style = if i % 20 == 0 {
                r#"<w:pPr><w:pStyle w:val="Heading1"/></w:pPr>"#
            } else {
                ""
            };
            format!("<w:p>{style}<w:r><w:t>{p}</w:t></w:r></w:p>")
        })
        .collect();
    let xml = format!(
        r#"<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    zip_of(&[("word/document.xml".into(), xml.into_bytes())])
}

fn pptx(paras: &[String]) -> Vec<u8> {
    let mut entries = Vec::new();
    for (i, chunk) in paras.chunks(5).enumerate() {
        let body: String = chunk
            .iter()
            .map(|p| format!("<a:p><a:r><a:t>{p}</a:t></a:r></a:p>"))
            .collect();
        let xml = format!(
            r#"<?xml version="1.0"?><p:sld xmlns:a="a" xmlns:p="p"><p:cSld><p:spTree><p:sp><p:txBody>{body}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"#
        );
        entries.push((format!("ppt/slides/slide{}.xml", i + 1), xml.into_bytes()));
    }
    entries.push((
        "ppt/presentation.xml".into(),
        b"<p:presentation xmlns:p=\"p\"/>".to_vec(),
    ));
    zip_of(&entries)
}

fn xlsx(paras: &[String]) -> Vec<u8> {
    let mut rows = String::from(
        r#"<row r="1"><c r="A1" t="inlineStr"><is><t>Posten</t></is></c><c r="B1" t="inlineStr"><is><t>Ort</t></is></c><c r="C1" t="inlineStr"><is><t>Text</t></is></c><c r="D1"><v>0</v></c></row>"#,
    );
    let mut r = 1;
    for p in paras {
        for words in p.split(' ').collect::<Vec<_>>().chunks(12) {
            r += 1;
            rows.push_str(&format!(
                r#"<row r="{r}"><c r="A{r}" t="inlineStr"><is><t>{}</t></is></c><c r="B{r}" t="inlineStr"><is><t>{}</t></is></c><c r="C{r}" t="inlineStr"><is><t>{}</t></is></c><c r="D{r}"><v>{}</v></c></row>"#,
                words[0],
                words.get(1).unwrap_or(&""),
                words.get(2..).map(|w| w.join(" ")).unwrap_or_default(),
                r * 7
            ));
        }
    }
    let sheet = format!(
        r#"<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>"#
    );
    let workbook = r#"<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Daten" sheetId="1" r:id="rId1"/></sheets></workbook>"#;
    let rels = r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#;
    let root = r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#;
    let types = r#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/></Types>"#;
    zip_of(&[
        ("[Content_Types].xml".into(), types.as_bytes().to_vec()),
        ("_rels/.rels".into(), root.as_bytes().to_vec()),
        ("xl/workbook.xml".into(), workbook.as_bytes().to_vec()),
        (
            "xl/_rels/workbook.xml.rels".into(),
            rels.as_bytes().to_vec(),
        ),
        ("xl/worksheets/sheet1.xml".into(), sheet.into_bytes()),
    ])
}

fn odt(paras: &[String]) -> Vec<u8> {
    let body: String = paras
        .iter()
        .map(|p| format!("<text:p>{p}</text:p>"))
        .collect();
    let xml = format!(
        r#"<?xml version="1.0"?><office:document-content xmlns:office="o" xmlns:text="t"><office:body><office:text>{body}</office:text></office:body></office:document-content>"#
    );
    zip_of(&[
        (
            "mimetype".into(),
            b"application/vnd.oasis.opendocument.text".to_vec(),
        ),
        ("content.xml".into(), xml.into_bytes()),
    ])
}

fn rtf(paras: &[String]) -> Vec<u8> {
    let mut s = String::from("{\\rtf1\\ansi\\ansicpg1252{\\fonttbl{\\f0 Arial;}}\\f0 ");
    for p in paras {
        s.push_str(&p.replace('ü', "\\'fc"));
        s.push_str("\\par\n");
    }
    s.push('}');
    s.into_bytes()
}

fn epub(paras: &[String]) -> Vec<u8> {
    let mut entries = vec![(
        "META-INF/container.xml".to_string(),
        br#"<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>"#
            .to_vec(),
    )];
    let (mut manifest, mut spine) = (String::new(), String::new());
    for (i, chunk) in paras.chunks(40).enumerate() {
        let body: String = chunk.iter().map(|p| format!("<p>{p}</p>")).collect();
        entries.push((
            format!("c{i}.xhtml"),
            format!("<html><body><h1>Kapitel {i}</h1>{body}</body></html>").into_bytes(),
        ));
        manifest.push_str(&format!(
            r#"<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>"#
        ));
        spine.push_str(&format!(r#"<itemref idref="c{i}"/>"#));
    }
    entries.push((
        "content.opf".into(),
        format!("<package><manifest>{manifest}</manifest><spine>{spine}</spine></package>")
            .into_bytes(),
    ));
    zip_of(&entries)
}

fn mbox(paras: &[String]) -> Vec<u8> {
    let mut s = String::new();
    for (i, chunk) in paras.chunks(paras.len().div_ceil(500)).enumerate() {
        s.push_str(&format!(
            "From a@example.org Sat Mar  2 10:15:00 2024\nFrom: Anna <a@example.org>\nTo: b@example.org\nDate: Sat, 2 Mar 2024 10:15:00 +0100\nSubject: Nachricht {i}\nContent-Type: text/plain; charset=utf-8\n\n{}\n\n",
            chunk.join("\n\n")
        ));
    }
    s.into_bytes()
}

fn text_zip(paras: &[String]) -> Vec<u8> {
    let entries: Vec<(String, Vec<u8>)> = paras
        .chunks(50)
        .enumerate()
        .map(|(i, c)| (format!("texte/{i}.txt"), c.join("\n\n").into_bytes()))
        .collect();
    zip_of(&entries)
}

/// Extracts and chunks `bytes` as `name`; the bytes of text it gave.
fn extract_and_chunk(name: &str, bytes: &[u8]) -> usize {
    let mut text_bytes = 0;
    let mut pending = vec![extract(Path::new(name), bytes)];
    while let Some(e) = pending.pop() {
        match e {
            Extraction::Text(ex) => {
                let spans = chunk_text(&ex.text, 2000, ex.sections.as_deref(), true);
                assert!(!spans.is_empty());
                text_bytes += ex.text.len();
            }
            Extraction::Many(members) => pending.extend(members.into_iter().map(|m| m.extraction)),
            other => panic!("{name}: {other:?}"),
        }
    }
    text_bytes
}

fn main() {
    let mb: f64 = std::env::var("RLM_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    let paras = paragraphs((mb * 1e6) as usize);
    let plain = paras.join("\n\n").into_bytes();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("plain.txt", plain),
        ("doc.docx", docx(&paras)),
        ("book.xlsx", xlsx(&paras)),
        ("deck.pptx", pptx(&paras)),
        ("doc.odt", odt(&paras)),
        ("doc.rtf", rtf(&paras)),
        ("book.epub", epub(&paras)),
        ("mail.mbox", mbox(&paras)),
        ("texts.zip", text_zip(&paras)),
    ];
    println!(
        "{:<11} {:>9} {:>9} {:>9} {:>11} {:>11}",
        "format", "file MB", "text MB", "ms", "file MB/s", "text MB/s"
    );
    for (name, bytes) in &files {
        // One warm-up, then the best of three.
        extract_and_chunk(name, bytes);
        let mut best = f64::MAX;
        let mut text = 0;
        for _ in 0..3 {
            let t = Instant::now();
            text = extract_and_chunk(name, bytes);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let (file_mb, text_mb) = (bytes.len() as f64 / 1e6, text as f64 / 1e6);
        println!(
            "{:<11} {:>9.2} {:>9.2} {:>9.1} {:>11.1} {:>11.1}",
            name.rsplit('.').next().unwrap(),
            file_mb,
            text_mb,
            best * 1e3,
            file_mb / best,
            text_mb / best
        );
    }
}
