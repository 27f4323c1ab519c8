//! The in-memory store (`Store::in_memory`): texts given by a caller are
//! chunked and indexed as `rlm index` does it, and every lookup works on them.

use rlm_corpus::{CorpusError, DocKind, MemoryDocument, Store, chunk_id, document_id};

fn docs() -> Vec<MemoryDocument> {
    // Not in path order: an in-memory store keeps the order given.
    vec![
        MemoryDocument::new(
            "notes.txt",
            "Meeting notes from Tuesday.\nThe secret code is 4721. Keep it safe.\n\n".repeat(6),
        ),
        MemoryDocument::new(
            "guide.md",
            "# Handbook\n\nIntro text.\n\n## Holidays\n\nStaff get thirty paid holidays a year.\n",
        ),
        MemoryDocument::new("empty", ""),
    ]
}

#[test]
fn texts_are_chunked_indexed_and_looked_up_as_on_disk() {
    let docs = docs();
    let store = Store::in_memory(&docs, 64).unwrap();
    assert!(store.is_in_memory());
    assert_eq!(store.dir().display().to_string(), "<in-memory>");
    let listed = store.documents().unwrap();
    let paths: Vec<&str> = listed.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["notes.txt", "guide.md", "empty"]);
    assert_eq!(listed[0].id, document_id("notes.txt"));
    assert_eq!(listed[0].kind, DocKind::Text);
    assert_eq!(listed[1].kind, DocKind::Markdown);
    assert_eq!(listed[1].title, "Handbook");
    assert_eq!(listed[2].chunk_count, 0);
    assert!(
        listed[0].chunk_count > 1,
        "64-character chunks split the notes"
    );
    let stats = store.stats().unwrap();
    assert_eq!(stats.documents, 3);
    assert_eq!(stats.chunks, store.indexed_chunks());

    for (d, given) in listed.iter().zip(&docs) {
        assert_eq!(store.document_text(&d.id).unwrap(), given.text);
        // The chunks, in order, are the text exactly; each one's span is its text.
        let chunks = store.chunks_of(&d.id).unwrap();
        let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(joined, given.text);
        for c in &chunks {
            let looked_up = store.chunk(&c.id).unwrap().unwrap();
            assert_eq!(
                looked_up.text,
                &given.text[c.byte_start as usize..c.byte_end as usize]
            );
        }
    }

    let hits = store.search("secret code", 5).unwrap();
    assert_eq!(hits[0].path, "notes.txt");
    assert!(hits[0].text.contains("The secret code is 4721"));
    // Stemming and the Markdown heading, as for a file.
    let hits = store.search("holiday", 5).unwrap();
    assert_eq!(hits[0].path, "guide.md");
    let guide = store.chunks_of(&document_id("guide.md")).unwrap();
    let staff = guide
        .iter()
        .find(|c| c.text.contains("thirty paid"))
        .unwrap();
    assert_eq!(staff.heading.as_deref(), Some("Holidays"));
    assert_eq!(
        store.document_by_path("guide.md").unwrap().unwrap().id,
        document_id("guide.md")
    );
    assert!(
        store
            .chunk(&chunk_id(&document_id("guide.md"), 99))
            .unwrap()
            .is_none()
    );
}

#[test]
fn two_stores_are_independent() {
    let a = Store::in_memory(&[MemoryDocument::new("a", "alpha words here")], 2000).unwrap();
    let b = Store::in_memory(&[MemoryDocument::new("a", "beta words here")], 2000).unwrap();
    assert_eq!(a.search("alpha", 5).unwrap().len(), 1);
    assert!(b.search("alpha", 5).unwrap().is_empty());
}

#[test]
fn bad_documents_are_one_line_errors() {
    let err = |docs: &[MemoryDocument], chunk: usize| match Store::in_memory(docs, chunk) {
        Err(CorpusError::InvalidOption(m)) => m,
        other => panic!("expected InvalidOption, got {other:?}"),
    };
    let ok = MemoryDocument::new("a.txt", "some text");
    assert!(err(&[], 2000).contains("no documents given"));
    assert!(
        err(std::slice::from_ref(&ok), 10).contains("chunk size 10 is below the minimum of 64")
    );
    let m = err(&[ok.clone(), MemoryDocument::new("a.txt", "x")], 2000);
    assert!(
        m.contains("document 1's name \"a.txt\" is used twice"),
        "{m}"
    );
    let m = err(&[MemoryDocument::new("  ", "x")], 2000);
    assert!(m.contains("is blank"), "{m}");
    let m = err(&[MemoryDocument::new("a\nb", "x")], 2000);
    assert!(m.contains("control character"), "{m}");
    let m = err(&[MemoryDocument::new("x".repeat(5000), "x")], 2000);
    assert!(m.contains("longer than 4096"), "{m}");
    let m = err(
        &[
            MemoryDocument::new("a", " \n"),
            MemoryDocument::new("b", ""),
        ],
        2000,
    );
    assert!(m.contains("every document is empty"), "{m}");
    for m in [
        err(&[], 2000),
        err(&[MemoryDocument::new("a\nb", "x")], 2000),
    ] {
        assert!(!m.contains('\n'), "one line: {m:?}");
    }
}
