//! Files built to break the parsers, through the real `rlm index`: a PDF
//! nested 5,000 deep, a decompression bomb, a form XObject that draws
//! itself, a page tree that loops. Each is one skipped file with its reason;
//! the process lives, the other files are indexed, a second run is the same.

use std::io::Write;
use std::process::Output;
use std::time::Duration;

use crate::common;
use common::{pdf, stderr, stdout};

const LIMIT: Duration = Duration::from_secs(120);

fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut s = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
    s.extend(data);
    s.extend(b"\nendstream");
    s
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Catalog, page tree and one page whose content is object 4 and whose
/// resources are `resources`; `extra` objects follow from 5 on.
fn one_page(resources: &str, content: Vec<u8>, extra: Vec<Vec<u8>>) -> Vec<u8> {
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources {resources} >>").into_bytes(),
        content,
    ];
    objects.extend(extra);
    pdf(&objects)
}

const FONT: &str = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";

fn text_content(text: &str) -> Vec<u8> {
    stream(
        "",
        format!("BT /F1 18 Tf 72 700 Td ({text}) Tj ET").as_bytes(),
    )
}

/// `rlm index docs` over `files` plus a good text file and a good PDF;
/// returns the output of two runs (the second sees the same files again).
fn index_twice(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Output, Output) {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("good.txt"), "The deposit is 1,200 euros.\n").unwrap();
    let good_pdf = one_page(
        &format!("<< /Font << /F1 {FONT} >> >>"),
        text_content("Parking is free for tenants"),
        Vec::new(),
    );
    std::fs::write(docs.join("good.pdf"), good_pdf).unwrap();
    for (name, bytes) in files {
        std::fs::write(docs.join(name), bytes).unwrap();
    }
    let run = || {
        common::output_within(
            common::command(dir.path(), &["index", "docs", "--store", "store"], &[]),
            b"",
            LIMIT,
        )
    };
    let first = run();
    let second = run();
    (dir, first, second)
}

/// Both runs end with exit code 1 (some files could not be indexed), name
/// each hostile file with `reason`, and keep the good files searchable.
fn refused_and_the_rest_indexed(files: &[(&str, Vec<u8>)], reason: &str) {
    let (dir, first, second) = index_twice(files);
    for out in [&first, &second] {
        let err = stderr(out);
        assert_eq!(out.status.code(), Some(1), "exit {:?}: {err}", out.status);
        for (name, _) in files {
            assert!(
                err.contains(&format!("docs/{name}: PDF refused: {reason}")),
                "{err}"
            );
        }
        assert!(
            !err.contains("panicked") && !err.contains("overflow"),
            "{err}"
        );
    }
    assert!(stdout(&first).contains("2 added"), "{}", stdout(&first));
    let o = common::rlm(
        dir.path(),
        &["search", "parking tenants", "--store", "store"],
        &[],
    );
    assert!(
        stdout(&o).contains("good.pdf"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn a_pdf_nested_five_thousand_deep_is_skipped_not_a_crash() {
    let nested = format!(
        "<< /Type /Catalog /Pages 2 0 R /Deep {}{} >>",
        "[".repeat(5_000),
        "]".repeat(5_000)
    );
    let bytes = pdf(&[
        nested.into_bytes(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>".to_vec(),
        text_content("x"),
    ]);
    refused_and_the_rest_indexed(
        &[("deep.pdf", bytes)],
        "arrays or dictionaries nest more than 100 deep",
    );
}

#[test]
fn a_content_stream_that_inflates_past_the_cap_is_skipped() {
    // 17 MiB of drawing operators in a ~70 KB file.
    let ops = b"0 0 m 1 1 l S\n".repeat(17 * 1024 * 1024 / 14 + 1);
    let content = stream("/Filter /FlateDecode", &zlib(&ops));
    let bomb = one_page(
        &format!("<< /Font << /F1 {FONT} >> >>"),
        content,
        Vec::new(),
    );
    assert!(bomb.len() < 200_000, "{}", bomb.len());
    refused_and_the_rest_indexed(&[("bomb.pdf", bomb)], "a stream inflates past 16 MiB");
}

#[test]
fn a_form_that_draws_itself_and_a_looping_page_tree_are_skipped() {
    // The form has no resources of its own, so it draws with the page's,
    // which name it: `/X1 Do` inside it calls itself.
    let form = stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10]", b"/X1 Do");
    let selfish = one_page(
        "<< /XObject << /X1 5 0 R >> >>",
        stream("", b"/X1 Do"),
        vec![form],
    );
    // The page has no resources, so the parser looks them up its /Parent
    // chain, which loops.
    let looping = pdf(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 5 0 R >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>".to_vec(),
        text_content("x"),
        b"<< /Type /Pages /Kids [] /Count 0 /Parent 2 0 R >>".to_vec(),
    ]);
    let (_dir, first, _) = index_twice(&[("selfish.pdf", selfish), ("looping.pdf", looping)]);
    let err = stderr(&first);
    assert_eq!(first.status.code(), Some(1), "{err}");
    assert!(
        err.contains("docs/selfish.pdf: PDF refused: a form XObject draws itself"),
        "{err}"
    );
    assert!(
        err.contains("docs/looping.pdf: PDF refused: the page tree's /Parent links loop"),
        "{err}"
    );
}

#[test]
fn a_good_pdf_with_forms_and_compressed_content_still_reads() {
    let form = stream(
        "/Type /XObject /Subtype /Form /BBox [0 0 600 800]",
        b"BT /F1 12 Tf 72 600 Td (Inside the form) Tj ET",
    );
    let content = stream(
        "/Filter /FlateDecode",
        &zlib(b"BT /F1 18 Tf 72 700 Td (Compressed page text) Tj ET /X1 Do"),
    );
    let bytes = one_page(
        &format!("<< /Font << /F1 {FONT} >> /XObject << /X1 5 0 R >> >>"),
        content,
        vec![form],
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/form.pdf"), bytes).unwrap();
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = common::rlm(
        dir.path(),
        &["show", "docs/form.pdf", "--store", "store"],
        &[],
    );
    let text = stdout(&o);
    assert!(
        text.contains("Compressed page text"),
        "{text}{}",
        stderr(&o)
    );
    assert!(text.contains("Inside the form"), "{text}");
}

#[test]
fn an_emptied_store_database_is_named_and_the_fix_it_gives_works() {
    let dir = common::indexed_docs(&[("a.txt", "The deposit is 1,200 euros.\n")]);
    std::fs::write(dir.path().join("store/store.sqlite"), b"").unwrap();
    let search = || common::rlm(dir.path(), &["search", "deposit", "--store", "store"], &[]);
    let o = search();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is not an rlm store: run `rlm index <paths> --store"),
        "{err}"
    );
    // The fix the message gives works on the emptied file.
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&search()).contains("1,200 euros"));
    // A file that is not a database at all: the advice is to move it away,
    // and nothing says to delete a store that might be healthy.
    std::fs::write(
        dir.path().join("store/store.sqlite"),
        b"garbage".repeat(1000),
    )
    .unwrap();
    let err = stderr(&search());
    assert!(err.contains("move the store folder away"), "{err}");
}

/// `rlm index docs --verbose` twice over `files` plus a good text file.
fn index_office_twice(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Output, Output) {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("good.txt"), "The deposit is 1,200 euros.\n").unwrap();
    for (name, bytes) in files {
        std::fs::write(docs.join(name), bytes).unwrap();
    }
    let run = || {
        common::output_within(
            common::command(
                dir.path(),
                &["index", "docs", "--store", "store", "--verbose"],
                &[],
            ),
            b"",
            LIMIT,
        )
    };
    let first = run();
    let second = run();
    (dir, first, second)
}

/// An Office file as Office saves it with a password: an OLE compound
/// file holding an `EncryptedPackage` stream (only the markers matter).
fn encrypted_office_file() -> Vec<u8> {
    let mut bytes = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1".to_vec();
    bytes.extend(vec![0u8; 1000]);
    bytes.extend(
        "EncryptedPackage"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes()),
    );
    bytes.extend(vec![0u8; 1000]);
    bytes
}

#[test]
fn zip_bombs_locked_truncated_macro_and_mislabelled_office_files_are_skipped_with_their_reason() {
    use common::office::{Cell, docx, docx_paragraph, xlsx, zip_of};
    // 8 MiB of zeros deflate to ~8 KB: a ratio of ~1000.
    let bomb = zip_of(&[("zeros.txt", &vec![0u8; 8 << 20])]);
    assert!(bomb.len() < 100_000, "{}", bomb.len());
    let names: Vec<String> = (0..10_001).map(|i| format!("f{i}.txt")).collect();
    let many: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    let crowded = zip_of(&many);
    let sheet = xlsx(&[("Q3", vec![vec![Cell::T("Region")], vec![Cell::T("Nord")]])]);
    let truncated = sheet[..sheet.len() / 2].to_vec();
    let macro_inside = zip_of(&[
        ("word/document.xml", docx_paragraph("", "x").as_bytes()),
        ("word/vbaProject.bin", b"Attribute VB_Name"),
    ]);
    let files = [
        ("bomb.zip", bomb),
        ("crowded.zip", crowded),
        ("locked.docx", encrypted_office_file()),
        ("truncated.xlsx", truncated),
        ("macros.docm", docx(&docx_paragraph("", "Sub AutoOpen()"))),
        ("hidden-macros.docx", macro_inside),
        (
            "mislabelled.docx",
            b"just some text, not a Word file\n".to_vec(),
        ),
    ];
    let (dir, first, second) = index_office_twice(&files);
    for out in [&first, &second] {
        let (err, text) = (stderr(out), stdout(out));
        assert_eq!(out.status.code(), Some(1), "exit {:?}: {err}", out.status);
        for line in [
            "error: docs/bomb.zip: ZIP archive refused: entry \"zeros.txt\" inflates 1",
            "error: docs/crowded.zip: ZIP archive refused: it lists 10001 entries, more than the limit of 10000",
            "error: docs/truncated.xlsx: corrupt XLSX: not a readable ZIP package (",
            "error: docs/mislabelled.docx: corrupt DOCX: not a readable ZIP package (",
        ] {
            assert!(err.contains(line), "{line}\n{err}");
        }
        assert!(
            err.contains("times its compressed size (a ZIP bomb; the limit is 200)"),
            "{err}"
        );
        for line in [
            "skipped docs/locked.docx: encrypted (password-protected): save a copy without a password to index it",
            "skipped docs/macros.docm: contains macros, not read",
            "skipped docs/hidden-macros.docx: contains macros, not read",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(stdout(&first).contains(": 1 added"), "{}", stdout(&first));
    let o = common::rlm(dir.path(), &["search", "deposit", "--store", "store"], &[]);
    assert!(stdout(&o).contains("good.txt"), "{}", stdout(&o));
}

/// A three-page PDF of images only, as scanners write them: page 1 draws
/// a JPEG, page 2 Flate-compressed 8-bit gray pixels, page 3 a CCITT
/// Group 4 fax-coded image.
fn scanned_pdf() -> Vec<u8> {
    let page = |image: usize| {
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /XObject << /Im1 {image} 0 R >> >> >>"
        )
        .into_bytes()
    };
    let jpeg = b"\xFF\xD8\xFF\xE0\x00\x10JFIF\x00scan\xFF\xD9";
    pdf(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R 4 0 R 8 0 R] /Count 3 >>".to_vec(),
        page(6),
        page(7),
        stream("", b"q 612 0 0 792 0 0 cm /Im1 Do Q"),
        stream(
            "/Type /XObject /Subtype /Image /Width 4 /Height 4 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode",
            jpeg,
        ),
        stream(
            "/Type /XObject /Subtype /Image /Width 4 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode",
            &zlib(&[0, 64, 128, 255, 255, 128, 64, 0]),
        ),
        page(9),
        stream(
            "/Type /XObject /Subtype /Image /Width 16 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 1 /Filter /CCITTFaxDecode /DecodeParms << /K -1 /Columns 16 >>",
            b"\x26\xa0\x00\x10\x01",
        ),
    ])
}

#[test]
fn a_pdf_of_images_is_named_without_ocr_and_read_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("good.txt"), "The deposit is 1,200 euros.\n").unwrap();
    std::fs::write(docs.join("scan.pdf"), scanned_pdf()).unwrap();
    let index = |env: &[(&str, &str)]| {
        common::rlm(
            dir.path(),
            &["index", "docs", "--store", "store", "--verbose"],
            env,
        )
    };
    // A typo in the setting is an error before anything is read.
    let o = index(&[("RLM_OCR", "of")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("RLM_OCR=\"of\" is not a choice: use auto (read scanned pages when tesseract is installed) or off"),
        "{}",
        stderr(&o)
    );
    // No OCR: the scan is named with its page count and what to install.
    let o = index(&[("RLM_OCR", "off")]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains(
            "skipped docs/scan.pdf: no text layer on its 3 page(s), a scan?: install tesseract-ocr"
        ),
        "{out}"
    );
    assert!(
        out.contains("3 page(s) had no text; install tesseract-ocr (and the language packs of your documents, e.g. tesseract-ocr-deu) to read them"),
        "{out}"
    );

    // An OCR program (a stand-in for tesseract: it keeps each image it is
    // given and answers with one line) reads all three pages.
    let seen = dir.path().join("seen");
    std::fs::create_dir_all(&seen).unwrap();
    let program = dir.path().join("tesseract");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --list-langs ]; then printf 'languages:\\ndeu\\neng\\nosd\\n'; exit 0; fi\n\
             [ \"$4\" = deu+eng ] || exit 3\ncp \"$1\" {}/\necho \"Mietbeginn ist der 1. April\"\n",
            seen.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = index(&[("RLM_TESSERACT", program.to_str().unwrap())]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains("OCR read 3 scanned page(s)"), "{out}");
    let mut kinds: Vec<String> = std::fs::read_dir(&seen)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            p.extension().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["jpg", "pgm", "tif"]);
    let o = common::rlm(
        dir.path(),
        &["show", "docs/scan.pdf", "--store", "store", "--json"],
        &[],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["text"], "Mietbeginn ist der 1. April\n".repeat(3));
    assert_eq!(v["chunks"][1]["page"], 2);
}
