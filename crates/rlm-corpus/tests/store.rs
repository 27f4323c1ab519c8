//! Library-level tests of the store: incremental indexing, lookups, errors.

use std::fs;
use std::path::{Path, PathBuf};

use rlm_corpus::{CorpusError, DocKind, IndexOptions, Store, chunk_id, document_id};

fn write(path: &Path, content: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn index(store: &Path, paths: &[PathBuf]) -> Result<rlm_corpus::IndexReport, CorpusError> {
    Store::index(store, paths, &IndexOptions::default(), &mut |_| {})
}

fn corpus() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("contracts");
    write(
        &docs.join("lease.md"),
        "# Lease\n\nThe tenant shall give ninety days termination notice.\n\n## Rent\n\nRent is due on the first day of each month.\n",
    );
    write(
        &docs.join("sub/nda.txt"),
        "Confidential information must not be disclosed for five years.\n",
    );
    write(&docs.join(".hidden.txt"), "hidden secret file\n");
    write(&docs.join("build/out.txt"), "generated output\n");
    write(&docs.join(".gitignore"), "build/\n");
    let store = tmp.path().join("store");
    (tmp, docs, store)
}

/// A hit's snippet is where the query's rarer words meet, not where its
/// commonest word is written most often (a manual page's header names its
/// command three times).
#[test]
fn a_snippet_shows_where_the_rarer_query_words_meet() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("man");
    let filler = "Print the last lines of each file to standard output. ".repeat(8);
    write(
        &docs.join("tail.txt"),
        &format!(
            "TAIL(1) User Commands TAIL(1) NAME tail - output the last part of files SYNOPSIS tail [OPTION]... [FILE]...\n\n{filler}\n\n-s, --sleep-interval=N\n    with -f, sleep for approximately N seconds (default 1.0) between iterations.\n"
        ),
    );
    for name in ["head", "less", "watch"] {
        write(
            &docs.join(format!("{name}.txt")),
            &format!("{name} shows files; see also tail and cat.\n"),
        );
    }
    let store_dir = tmp.path().join("store");
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let store = Store::open(&store_dir).unwrap();
    let hit = &store.search("tail sleep interval", 1).unwrap()[0];
    assert_eq!(hit.path, "man/tail.txt");
    assert!(hit.snippet.contains("**sleep**"), "{}", hit.snippet);
    assert!(hit.snippet.contains("(default 1.0)"), "{}", hit.snippet);
}

#[test]
fn indexes_searches_and_looks_up() {
    let (_tmp, docs, store_dir) = corpus();
    let report = index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    assert_eq!(report.added, 2, "{report:?}");
    let store = Store::open(&store_dir).unwrap();
    let paths: Vec<String> = store
        .documents()
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .collect();
    // Hidden files and .gitignored folders are left out, as ripgrep would.
    assert_eq!(paths, vec!["contracts/lease.md", "contracts/sub/nda.txt"]);

    let hits = store.search("termination notice period", 10).unwrap();
    assert_eq!(hits[0].path, "contracts/lease.md");
    assert!(
        hits[0].snippet.contains("**termination**"),
        "{}",
        hits[0].snippet
    );
    // Stemming: "disclosing" finds "disclosed".
    let hits = store.search("disclosing", 5).unwrap();
    assert_eq!(hits[0].path, "contracts/sub/nda.txt");

    let doc = store
        .document_by_path("contracts/lease.md")
        .unwrap()
        .unwrap();
    assert_eq!(doc.id, document_id("contracts/lease.md"));
    assert_eq!(doc.kind, DocKind::Markdown);
    assert_eq!(doc.title, "Lease");
    let chunks = store.chunks_of(&doc.id).unwrap();
    let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(joined, store.document_text(&doc.id).unwrap());
    let c0 = store.chunk(&chunk_id(&doc.id, 0)).unwrap().unwrap();
    assert_eq!(c0, chunks[0]);
    assert_eq!(
        store.slice(&doc.id, 2, 7).unwrap(),
        "Lease",
        "byte slices of the document"
    );
    assert!(matches!(
        store.slice(&doc.id, 0, 100_000),
        Err(CorpusError::BadRange { .. })
    ));
    assert!(store.chunk("nope-0").unwrap().is_none());
    assert!(matches!(
        store.search("  ", 5),
        Err(CorpusError::EmptyQuery)
    ));
}

#[test]
fn small_chunks_carry_lines_and_headings() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::from("# Title\n\n");
    for s in 0..6 {
        text.push_str(&format!("## Section {s}\n\n"));
        for _ in 0..6 {
            text.push_str("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n");
        }
        text.push('\n');
    }
    write(&tmp.path().join("d/a.md"), &text);
    let opts = IndexOptions {
        chunk_chars: 300,
        ..IndexOptions::default()
    };
    Store::index(
        &tmp.path().join("s"),
        &[tmp.path().join("d")],
        &opts,
        &mut |_| {},
    )
    .unwrap();
    let store = Store::open(&tmp.path().join("s")).unwrap();
    let doc = &store.documents().unwrap()[0];
    let chunks = store.chunks_of(&doc.id).unwrap();
    assert!(chunks.len() > 3);
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.ordinal as usize, i);
        let line = text[..c.byte_start as usize].matches('\n').count() as u32 + 1;
        assert_eq!(c.line_start, line);
        assert!(c.heading.is_some());
    }
    assert!(
        chunks
            .last()
            .unwrap()
            .heading
            .as_deref()
            .unwrap()
            .starts_with("Section")
    );
}

#[test]
fn reindex_is_incremental() {
    let (tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let again = index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    assert_eq!(
        (again.added, again.updated, again.unchanged, again.removed),
        (0, 0, 2, 0)
    );
    assert_eq!(again.bytes_processed, 0, "unchanged files are not re-read");

    write(
        &docs.join("lease.md"),
        "# Lease\n\nNow sixty days notice.\n",
    );
    fs::remove_file(docs.join("sub/nda.txt")).unwrap();
    write(&docs.join("new.txt"), "A new amendment about parking.\n");
    let r = index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    assert_eq!(
        (r.added, r.updated, r.unchanged, r.removed),
        (1, 1, 0, 1),
        "{r:?}"
    );
    let store = Store::open(&store_dir).unwrap();
    assert!(store.search("confidential", 5).unwrap().is_empty());
    assert_eq!(
        store.search("sixty", 5).unwrap()[0].path,
        "contracts/lease.md"
    );
    assert_eq!(store.stats().unwrap().documents, 2);
    assert_eq!(store.indexed_chunks(), store.stats().unwrap().chunks);

    // Another root is indexed beside the first without removing it.
    let other = tmp.path().join("notes");
    write(&other.join("n.txt"), "meeting notes\n");
    let r = index(&store_dir, &[other]).unwrap();
    assert_eq!((r.added, r.removed), (1, 0));
    assert_eq!(
        Store::open(&store_dir).unwrap().stats().unwrap().documents,
        3
    );
}

#[test]
fn touched_but_identical_files_stay_unchanged() {
    let (_tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let content = fs::read(docs.join("lease.md")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(docs.join("lease.md"), content).unwrap();
    let r = index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    assert_eq!((r.updated, r.unchanged), (0, 2));
}

#[test]
fn errors_are_clear_and_lose_nothing() {
    let (tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();

    let missing = tmp.path().join("nope");
    let err = index(&store_dir, std::slice::from_ref(&missing)).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");

    let empty = tmp.path().join("contracts-empty");
    fs::create_dir_all(&empty).unwrap();
    write(&empty.join("blank.txt"), "   \n");
    let err = index(&store_dir, &[empty]).unwrap_err();
    assert!(
        err.to_string().starts_with("nothing to index") && err.to_string().contains("empty"),
        "{err}"
    );
    assert_eq!(
        Store::open(&store_dir).unwrap().stats().unwrap().documents,
        2
    );

    let err = Store::open(&tmp.path().join("not-a-store")).unwrap_err();
    assert!(matches!(err, CorpusError::NotAStore(_)), "{err}");

    let bad = Store::index(
        &store_dir,
        std::slice::from_ref(&docs),
        &IndexOptions {
            chunk_chars: 10,
            ..IndexOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(bad.to_string().contains("chunk size"), "{bad}");

    let glob = Store::index(
        &store_dir,
        std::slice::from_ref(&docs),
        &IndexOptions {
            include: vec!["[".into()],
            ..IndexOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(glob.to_string().contains("--include"), "{glob}");
}

#[test]
fn store_in_a_file_is_not_writable() {
    let (tmp, docs, _) = corpus();
    let file = tmp.path().join("plain-file");
    fs::write(&file, "x").unwrap();
    let err = index(&file.join("store"), &[docs]).unwrap_err();
    assert!(matches!(err, CorpusError::NotWritable { .. }), "{err}");
    assert!(err.to_string().contains("not writable"));
}

#[test]
fn other_format_versions_are_refused() {
    let (_tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let conn = rusqlite::Connection::open(store_dir.join("store.sqlite")).unwrap();
    conn.execute(
        "UPDATE meta SET value = '99' WHERE key = 'format_version'",
        [],
    )
    .unwrap();
    drop(conn);
    let err = Store::open(&store_dir).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("format version 99") && msg.contains("upgrade rlm"),
        "{msg}"
    );
    // Indexing into it is refused too, and leaves it as it was.
    let err = index(&store_dir, &[docs]).unwrap_err();
    assert!(matches!(err, CorpusError::FormatVersion { .. }));
}

#[test]
fn include_and_exclude_globs() {
    let (_tmp, docs, store_dir) = corpus();
    let opts = IndexOptions {
        include: vec!["*.md".into()],
        ..IndexOptions::default()
    };
    let r = Store::index(&store_dir, std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
    assert_eq!(r.added, 1);
    let opts = IndexOptions {
        exclude: vec!["*.md".into()],
        ..IndexOptions::default()
    };
    let r = Store::index(&store_dir, std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
    assert_eq!((r.added, r.removed), (1, 1), "{r:?}");
}

#[test]
fn ids_do_not_depend_on_how_the_path_was_written() {
    let (tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let dotted = tmp.path().join("contracts/sub/..");
    let r = index(&store_dir, &[dotted]).unwrap();
    assert_eq!((r.added, r.unchanged, r.removed), (0, 2, 0), "{r:?}");
}

#[test]
fn a_stale_fulltext_index_is_rebuilt_on_open() {
    let (_tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    // Simulate a run that died after the SQLite commit: bump the generation.
    let conn = rusqlite::Connection::open(store_dir.join("store.sqlite")).unwrap();
    conn.execute("UPDATE meta SET value = '7' WHERE key = 'generation'", [])
        .unwrap();
    drop(conn);
    let store = Store::open(&store_dir).unwrap();
    assert_eq!(store.search("termination", 5).unwrap().len(), 1);
    assert_eq!(store.indexed_chunks(), store.stats().unwrap().chunks);
}

/// Damages `fulltext/`: every segment file truncated, and with `meta`
/// meta.json overwritten.
fn corrupt_fulltext(store_dir: &Path, meta: bool) {
    for entry in fs::read_dir(store_dir.join("fulltext")).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name == "meta.json" {
            if meta {
                fs::write(&p, "garbage").unwrap();
            }
        } else if !name.starts_with('.') {
            fs::write(&p, b"").unwrap();
        }
    }
}

#[test]
fn a_damaged_fulltext_index_is_recreated_by_the_next_write() {
    for (rebuild, meta) in [(true, true), (false, true), (false, false)] {
        let (_tmp, docs, store_dir) = corpus();
        index(&store_dir, std::slice::from_ref(&docs)).unwrap();
        corrupt_fulltext(&store_dir, meta);
        // Reading says what to run…
        let e = Store::open(&store_dir).unwrap_err().to_string();
        assert!(e.contains("rlm index --rebuild"), "{meta}: {e}");
        // …and that (or any indexing run) recovers from the SQLite text.
        let opts = IndexOptions {
            rebuild,
            ..IndexOptions::default()
        };
        let r = Store::index(&store_dir, std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
        assert_eq!(r.fulltext_recreated.is_some(), !rebuild, "{r:?}");
        let store = Store::open(&store_dir).unwrap();
        assert_eq!(store.search("termination", 5).unwrap().len(), 1);
        assert_eq!(store.search("disclosed", 5).unwrap().len(), 1);
        assert_eq!(store.indexed_chunks(), store.stats().unwrap().chunks);
    }
}

#[test]
fn a_huge_k_returns_every_hit_instead_of_aborting() {
    let (_tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let store = Store::open(&store_dir).unwrap();
    assert_eq!(store.search("termination", usize::MAX).unwrap().len(), 1);
}

#[test]
fn a_query_nested_thousands_deep_is_searched_not_a_stack_overflow() {
    let (_tmp, docs, store_dir) = corpus();
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let store = Store::open(&store_dir).unwrap();
    // Each of these overflowed a 2 MiB stack in tantivy's query parser (the
    // process aborted) from about 1,000 levels.
    let deep = [
        format!("{}termination", "(".repeat(20_000)),
        format!("{}termination{}", "(".repeat(5_000), ")".repeat(5_000)),
        format!("{}termination", "-(".repeat(5_000)),
        format!("{}termination", "NOT ".repeat(5_000)),
    ];
    let found = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            deep.iter()
                .map(|q| store.search(q, 5).unwrap().len())
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
    // The words still match.
    assert_eq!(found, [1, 1, 1, 1]);
}

/// Chunks, slices and pages are read by byte range (not by loading the whole
/// text): they must equal the same ranges of the whole text, land on
/// character boundaries in multi-byte text, and refuse ranges outside it or
/// inside a character.
#[test]
fn byte_range_reads_match_the_whole_text() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!(
            "Zeile {i}: Kündigungsfrist — 三个月 — naïve café 🙂 Straße.\n"
        ));
    }
    write(&tmp.path().join("d/utf8.txt"), &text);
    let store_dir = tmp.path().join("store");
    index(&store_dir, &[tmp.path().join("d")]).unwrap();
    let store = Store::open(&store_dir).unwrap();
    let doc = store.documents().unwrap().remove(0);
    let whole = store.document_text(&doc.id).unwrap();
    assert!(doc.chunk_count > 3, "{doc:?}");
    for c in store.chunks_of(&doc.id).unwrap() {
        let read = store.chunk(&c.id).unwrap().unwrap();
        assert_eq!(read.text, whole[c.byte_start as usize..c.byte_end as usize]);
        assert_eq!(read, c);
    }
    let emoji = whole.find('🙂').unwrap() as u64;
    assert_eq!(store.slice(&doc.id, emoji, emoji + 4).unwrap(), "🙂");
    for (start, end) in [(emoji + 1, emoji + 4), (emoji, emoji + 2), (5, 4)] {
        assert!(
            matches!(
                store.slice(&doc.id, start, end),
                Err(CorpusError::BadRange { .. })
            ),
            "{start}..{end}"
        );
    }
    assert!(matches!(
        store.slice("no-such-doc", 0, 1),
        Err(CorpusError::UnknownId(_))
    ));
    // Pages: every offset and limit gives a page on character boundaries
    // that moves forward, and the pages tile the text.
    let total = whole.len() as u64;
    for (offset, limit) in [(emoji + 2, 1), (emoji + 1, 3), (0, 7), (emoji, 5)] {
        let page = store.text_page(&doc.id, offset, limit).unwrap();
        assert!(whole.is_char_boundary(page.start as usize), "{page:?}");
        assert!(page.end > page.start, "{page:?}");
        assert_eq!(page.content, whole[page.start as usize..page.end as usize]);
        assert_eq!(page.total_bytes, total);
    }
    let mut tiled = String::new();
    let mut at = 0;
    while at < total {
        let page = store.text_page(&doc.id, at, 1000).unwrap();
        assert_eq!(page.start, at);
        tiled.push_str(&page.content);
        at = page.end;
    }
    assert_eq!(tiled, whole);
    let past = store.text_page(&doc.id, total + 10, 100).unwrap();
    assert_eq!(
        (past.start, past.end, past.content.as_str()),
        (total, total, "")
    );
}

#[test]
fn a_store_written_before_locations_opens_and_gains_them_on_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("mail");
    write(
        &docs.join("note.eml"),
        "From: Anna Berg <anna@example.org>\r\nDate: Sat, 2 Mar 2024 10:15:00 +0100\r\nSubject: Schlüssel\r\n\r\nDer Schlüssel liegt beim Hausmeister.\r\n",
    );
    let store_dir = tmp.path().join("store");
    index(&store_dir, std::slice::from_ref(&docs)).unwrap();
    let id = document_id("mail/note.eml");
    let place = |store: &Store| store.chunks_of(&id).unwrap()[0].place();
    assert_eq!(
        place(&Store::open(&store_dir).unwrap()).as_deref(),
        Some("message of 2024-03-02 from Anna Berg")
    );
    // What a store of the previous build looks like: no location column.
    let conn = rusqlite::Connection::open(store_dir.join("store.sqlite")).unwrap();
    conn.execute_batch("ALTER TABLE chunks DROP COLUMN location")
        .unwrap();
    drop(conn);
    let store = Store::open(&store_dir).unwrap();
    let chunks = store.chunks_of(&id).unwrap();
    assert_eq!(chunks[0].location, None);
    assert!(chunks[0].text.contains("Hausmeister"));
    assert_eq!(store.search("Hausmeister", 5).unwrap().len(), 1);
    drop(store);
    let opts = IndexOptions {
        rebuild: true,
        ..IndexOptions::default()
    };
    Store::index(&store_dir, std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
    assert_eq!(
        place(&Store::open(&store_dir).unwrap()).as_deref(),
        Some("message of 2024-03-02 from Anna Berg")
    );
}
