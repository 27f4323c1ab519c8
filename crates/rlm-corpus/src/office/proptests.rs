//! Every reader of this module on hostile bytes: random bytes under each
//! format's name, and valid files of each format truncated or with bytes
//! changed. Whatever comes in, the outcome is text, members, a skip or a
//! failure with its reason, and no reader panics (a caught panic would
//! show as [`READER_PANICKED`], which fails the property).

use std::io::Write;
use std::path::Path;

use proptest::prelude::*;

use super::READER_PANICKED;
use crate::extract::{ExtractError, Extraction, extract};

const NAMES: &[&str] = &[
    "f.docx", "f.xlsx", "f.xls", "f.pptx", "f.odt", "f.ods", "f.odp", "f.rtf", "f.epub", "f.eml",
    "f.mbox", "f.zip",
];

fn zip_of(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in entries {
        w.start_file(*name, options).unwrap();
        w.write_all(text.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// A small valid file of each format, by name.
fn valid_files() -> Vec<(&'static str, Vec<u8>)> {
    let sheet = r#"<worksheet><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>Name</t></is></c></row><row r="2"><c r="A2"><v>12</v></c></row></sheetData></worksheet>"#;
    vec![
        (
            "f.docx",
            zip_of(&[(
                "word/document.xml",
                "<w:document><w:body><w:p><w:r><w:t>Vertrag</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:body></w:document>",
            )]),
        ),
        (
            "f.xlsx",
            zip_of(&[
                ("[Content_Types].xml", "<Types/>"),
                (
                    "_rels/.rels",
                    r#"<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
                ),
                (
                    "xl/workbook.xml",
                    r#"<workbook xmlns:r="r"><sheets><sheet name="A" sheetId="1" r:id="rId1"/></sheets></workbook>"#,
                ),
                (
                    "xl/_rels/workbook.xml.rels",
                    r#"<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#,
                ),
                ("xl/worksheets/sheet1.xml", sheet),
            ]),
        ),
        (
            "f.pptx",
            zip_of(&[
                ("ppt/presentation.xml", "<p:presentation/>"),
                (
                    "ppt/slides/slide1.xml",
                    "<p:sld><a:p><a:r><a:t>Folie</a:t></a:r></a:p></p:sld>",
                ),
            ]),
        ),
        (
            "f.odt",
            zip_of(&[(
                "content.xml",
                "<office:text><text:h text:outline-level=\"1\">T</text:h><text:p>Absatz</text:p></office:text>",
            )]),
        ),
        (
            "f.epub",
            zip_of(&[
                (
                    "META-INF/container.xml",
                    r#"<container><rootfiles><rootfile full-path="c.opf"/></rootfiles></container>"#,
                ),
                (
                    "c.opf",
                    r#"<package><manifest><item id="a" href="a.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="a"/></spine></package>"#,
                ),
                ("a.xhtml", "<html><body><p>Kapitel</p></body></html>"),
            ]),
        ),
        ("f.zip", zip_of(&[("a.txt", "Text"), ("b/c.md", "# Titel")])),
        (
            "f.rtf",
            b"{\\rtf1\\ansi{\\fonttbl{\\f0 A;}}\\f0 K\\'fcndigung\\par}".to_vec(),
        ),
        (
            "f.eml",
            b"From: A <a@b.c>\r\nSubject: S\r\nContent-Type: text/plain\r\n\r\nText\r\n".to_vec(),
        ),
        (
            "f.mbox",
            b"From a@b Sat Mar  2 10:15:00 2024\nFrom: A <a@b.c>\nSubject: S\n\nText\n".to_vec(),
        ),
    ]
}

/// Fails on a reader's panic anywhere in the outcome.
fn check(name: &str, outcome: &Extraction) -> Result<(), TestCaseError> {
    match outcome {
        Extraction::Failed(ExtractError::Corrupt { why, .. }) if why == READER_PANICKED => {
            Err(TestCaseError::fail(format!("a reader panicked on {name}")))
        }
        Extraction::Many(members) => {
            for m in members {
                check(&m.name, &m.extraction)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[test]
fn the_valid_files_read() {
    for (name, bytes) in valid_files() {
        let outcome = extract(Path::new(name), &bytes);
        let ok = match &outcome {
            Extraction::Text(t) => !t.text.trim().is_empty(),
            Extraction::Many(m) => m
                .iter()
                .all(|m| matches!(m.extraction, Extraction::Text(_))),
            _ => false,
        };
        assert!(ok, "{name}: {outcome:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_bytes_under_every_name(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        for name in NAMES {
            check(name, &extract(Path::new(name), &bytes))?;
        }
    }

    #[test]
    fn valid_files_truncated_or_changed(
        which in 0usize..9,
        cut in 0.0f64..1.0,
        changes in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..8),
    ) {
        let (name, mut bytes) = valid_files().swap_remove(which);
        for (at, value) in changes {
            let i = (at * bytes.len() as f64) as usize;
            if let Some(b) = bytes.get_mut(i) {
                *b = value;
            }
        }
        let keep = ((cut * 1.2).min(1.0) * bytes.len() as f64) as usize;
        bytes.truncate(keep);
        check(name, &extract(Path::new(name), &bytes))?;
    }
}

#[test]
fn encrypted_packages_are_skipped_and_obfuscated_fonts_are_not_encryption() {
    use crate::extract::SkipReason;
    let manifest = r#"<manifest:manifest><manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/></manifest:file-entry></manifest:manifest>"#;
    let odt = zip_of(&[
        ("content.xml", "garbled"),
        ("META-INF/manifest.xml", manifest),
    ]);
    assert!(matches!(
        extract(Path::new("f.odt"), &odt),
        Extraction::Skipped(SkipReason::Encrypted)
    ));
    let epub = |algorithm: &str, uri: &str| {
        let encryption = format!(
            r#"<encryption><EncryptedData><EncryptionMethod Algorithm="{algorithm}"/><CipherData><CipherReference URI="{uri}"/></CipherData></EncryptedData></encryption>"#
        );
        let mut entries = vec![
            ("META-INF/container.xml", r#"<container><rootfiles><rootfile full-path="c.opf"/></rootfiles></container>"#.to_string()),
            ("c.opf", r#"<package><manifest><item id="a" href="a.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="a"/></spine></package>"#.to_string()),
            ("a.xhtml", "<html><body><p>Kapitel eins</p></body></html>".to_string()),
        ];
        entries.push(("META-INF/encryption.xml", encryption));
        let refs: Vec<(&str, &str)> = entries.iter().map(|(n, t)| (*n, t.as_str())).collect();
        extract(Path::new("f.epub"), &zip_of(&refs))
    };
    assert!(matches!(
        epub("http://www.w3.org/2001/04/xmlenc#aes128-cbc", "a.xhtml"),
        Extraction::Skipped(SkipReason::Encrypted)
    ));
    assert!(matches!(
        epub("http://www.idpf.org/2008/embedding", "fonts/x.otf"),
        Extraction::Text(t) if t.text.contains("Kapitel eins")
    ));
}
