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
