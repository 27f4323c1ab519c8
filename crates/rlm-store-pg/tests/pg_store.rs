//! The PostgreSQL store against a real PostgreSQL server (see
//! `rlm_store_pg::testing`): the same corpus indexed into the local store
//! and into PostgreSQL must read back the same, incrementally and
//! atomically; migrations, locking and errors.

use std::fs;
use std::path::{Path, PathBuf};

use rlm_corpus::{
    CorpusError, CorpusStore, EmbedError, EmbedOptions, Embedder, IndexOptions, RetrievalMode,
    SearchOptions, Store, document_id,
};
use rlm_store_pg::PgStore;
use rlm_store_pg::testing::{TestDatabase, test_database};

fn write(path: &Path, content: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// Small chunks so documents split and spans matter.
fn opts() -> IndexOptions {
    IndexOptions {
        chunk_chars: 120,
        ..IndexOptions::default()
    }
}

/// A folder with Markdown sections, text with the characters COPY escapes
/// (tab, backslash, CR), non-ASCII text and a nested file.
fn corpus(root: &Path) -> PathBuf {
    let docs = root.join("handbook");
    write(
        &docs.join("lease.md"),
        "# Lease\n\nThe tenant shall give ninety days termination notice.\n\n## Rent\n\nRent is due on the first day of each month.\n\n## Keys\n\nKeys are returned to the office in Lisbon.\n",
    );
    write(
        &docs.join("sub/nda.txt"),
        "Confidential information must not be disclosed for five years.\r\nPaths like C:\\temp\\x\tand tabs stay exact.\n",
    );
    write(
        &docs.join("café.txt"),
        &"Le café ouvre à 8h. Über alles: naïve résumé — «quotes» 東京.\n".repeat(6),
    );
    docs
}

fn pg(db: &TestDatabase) -> PgStore {
    PgStore::open(db.url()).unwrap()
}

/// Everything a reader sees, for comparing two stores.
fn snapshot(store: &dyn CorpusStore) -> Vec<String> {
    let mut out = vec![format!("{:?}", store.stats().unwrap())];
    for d in store.documents().unwrap() {
        out.push(format!("{d:?}"));
        out.push(store.document_text(&d.id).unwrap());
        for c in store.chunks_of(&d.id).unwrap() {
            assert_eq!(store.chunk(&c.id).unwrap().as_ref(), Some(&c));
            out.push(format!("{c:?}"));
        }
    }
    out
}

#[test]
fn reads_back_exactly_what_the_local_store_holds() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(tmp.path());
    let local_dir = tmp.path().join("local");
    let local = Store::index(
        &local_dir,
        std::slice::from_ref(&docs),
        &opts(),
        &mut |_| {},
    )
    .unwrap();
    let report =
        PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
    assert_eq!(report.added, 3, "{report:?}");
    assert_eq!(report.chunks_written, local.chunks_written);
    assert_eq!(report.totals, local.totals);
    let store = pg(&db);
    let local = Store::open(&local_dir).unwrap();
    assert_eq!(snapshot(&store), snapshot(&local));
    assert_eq!(store.generation().unwrap(), 1);

    // Lookups by path, slices, unknown ids.
    let doc = store
        .document_by_path("handbook/lease.md")
        .unwrap()
        .unwrap();
    assert_eq!(doc.title, "Lease");
    assert_eq!(store.slice(&doc.id, 2, 7).unwrap(), "Lease");
    assert!(matches!(
        store.slice(&doc.id, 0, 100_000),
        Err(CorpusError::BadRange { .. })
    ));
    assert!(store.document("nope").unwrap().is_none());
    assert!(store.chunk("nope-0").unwrap().is_none());
    assert!(matches!(
        store.document_text("nope"),
        Err(CorpusError::UnknownId(_))
    ));
    assert!(matches!(
        store.chunks_of("nope"),
        Err(CorpusError::UnknownId(_))
    ));
}

#[test]
fn full_text_search_ranks_stems_and_marks_matches() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(tmp.path());
    PgStore::index(db.url(), &[docs], &opts(), &mut |_| {}).unwrap();
    let store = pg(&db);
    let hits = store.search("termination notice period", 10).unwrap();
    assert_eq!(hits[0].path, "handbook/lease.md");
    assert!(
        hits[0].snippet.contains("**termination**"),
        "{}",
        hits[0].snippet
    );
    assert!(hits[0].text.contains("ninety days termination notice"));
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    // Stemming: "disclosing" finds "disclosed"; terms are OR-ed, so one
    // matching word is enough.
    let hits = store.search("disclosing zebra", 5).unwrap();
    assert_eq!(hits[0].path, "handbook/sub/nda.txt");
    // Quotes, backslashes, operators and NUL in a query are words, not syntax.
    for q in [
        "it's \\ 'rent' | & ! <-> :* (",
        "rent\0due",
        "((((((((((rent",
    ] {
        let hits = store.search(q, 3).unwrap();
        assert!(hits.iter().any(|h| h.text.contains("Rent is due")), "{q:?}");
    }
    // Only stop words: nothing to match, not an error.
    assert!(store.search("the of and", 5).unwrap().is_empty());
    assert!(matches!(
        store.search("  ", 5),
        Err(CorpusError::EmptyQuery)
    ));
    assert_eq!(store.search("rent", 1).unwrap().len(), 1);
    assert!(!store.search("rent", usize::MAX).unwrap().is_empty());
}

#[test]
fn reindexing_is_incremental_like_the_local_store() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(tmp.path());
    let local_dir = tmp.path().join("local");
    let run = |label: &str| {
        let l = Store::index(
            &local_dir,
            std::slice::from_ref(&docs),
            &opts(),
            &mut |_| {},
        )
        .unwrap();
        let p =
            PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
        let counts = |r: &rlm_corpus::IndexReport| (r.added, r.updated, r.unchanged, r.removed);
        assert_eq!(counts(&p), counts(&l), "{label}: {p:?}");
        assert_eq!(p.totals, l.totals, "{label}");
        counts(&p)
    };
    assert_eq!(run("first"), (3, 0, 0, 0));
    assert_eq!(run("again"), (0, 0, 3, 0));
    write(
        &docs.join("lease.md"),
        "# Lease\n\nNotice is now thirty days.\n",
    );
    fs::remove_file(docs.join("sub/nda.txt")).unwrap();
    write(&docs.join("new.md"), "# New\n\nA new policy on parking.\n");
    // Touched with the same content: only its mtime changes.
    let cafe = docs.join("café.txt");
    let text = fs::read(&cafe).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&cafe, text).unwrap();
    assert_eq!(run("changed"), (1, 1, 1, 1));
    let store = pg(&db);
    assert_eq!(
        snapshot(&store),
        snapshot(&Store::open(&local_dir).unwrap())
    );
    assert_eq!(store.generation().unwrap(), 3);
    assert!(
        store.search("thirty", 3).unwrap()[0]
            .text
            .contains("thirty days")
    );
    assert!(store.search("confidential", 3).unwrap().is_empty());
    // --rebuild rewrites everything and keeps the same content.
    let rebuild = IndexOptions {
        rebuild: true,
        ..opts()
    };
    let r = PgStore::index(db.url(), std::slice::from_ref(&docs), &rebuild, &mut |_| {}).unwrap();
    assert_eq!((r.added, r.updated, r.unchanged), (0, 3, 0), "{r:?}");
    assert_eq!(
        snapshot(&pg(&db)),
        snapshot(&Store::open(&local_dir).unwrap())
    );
}

#[test]
fn a_failed_run_changes_nothing_and_one_writer_at_a_time() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(tmp.path());
    PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
    let before = snapshot(&pg(&db));
    // An empty folder is refused; the store keeps what it had.
    let empty = tmp.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    let e = PgStore::index(db.url(), &[empty], &opts(), &mut |_| {}).unwrap_err();
    assert!(matches!(e, CorpusError::EmptyCorpus { .. }), "{e}");
    // A writer holds the lock: a second one stops at once and names it.
    let holder = db.hold_write_lock().unwrap();
    write(&docs.join("lease.md"), "# Lease\n\nchanged\n");
    let e = PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("is being written by rlm index (pid 4242"), "{e}");
    assert!(e.contains("wait for it to finish"), "{e}");
    assert_eq!(snapshot(&pg(&db)), before);
    assert_eq!(pg(&db).generation().unwrap(), 1);
    drop(holder);
    let r = PgStore::index(db.url(), &[docs], &opts(), &mut |_| {}).unwrap();
    assert_eq!(r.updated, 1);
}

#[test]
fn migrations_are_recorded_and_a_newer_schema_is_refused() {
    let Some(db) = test_database() else { return };
    // No store yet: opening says how to create one.
    let e = PgStore::open(db.url()).unwrap_err().to_string();
    assert!(
        e.contains("holds no rlm store yet: run `rlm index <paths> --store postgres://"),
        "{e}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(tmp.path());
    PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
    assert_eq!(
        db.scalar("SELECT max(version) FROM rlm_schema")
            .unwrap()
            .as_deref(),
        Some(rlm_store_pg::SCHEMA_VERSION.to_string().as_str())
    );
    db.sql("INSERT INTO rlm_schema (version, description) VALUES (99, 'from the future')")
        .unwrap();
    for e in [
        PgStore::open(db.url()).unwrap_err().to_string(),
        PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {})
            .unwrap_err()
            .to_string(),
    ] {
        assert!(
            e.contains("has schema version 99, this rlm knows versions up to"),
            "{e}"
        );
        assert!(e.contains("upgrade rlm"), "{e}");
        assert!(!e.contains('\n'));
    }
    assert_eq!(
        db.scalar("SELECT count(*) FROM rlm_documents")
            .unwrap()
            .as_deref(),
        Some("3")
    );
}

#[test]
fn connection_errors_name_the_store_without_its_password() {
    // A closed port on loopback: refused at once.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("postgres://alice:s3cret@127.0.0.1:{port}/corpus");
    let e = PgStore::open(&url).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "cannot connect to the PostgreSQL store postgres://alice@127.0.0.1:{port}/corpus"
        )),
        "{e}"
    );
    assert!(e.contains("scripts/start-postgres"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    let e = PgStore::open("postgres://alice:s3cret@host:notaport/db")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a PostgreSQL URL"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    let Some(db) = test_database() else { return };
    let missing = format!("{}_missing", db.url());
    let e = PgStore::open(&missing).unwrap_err().to_string();
    assert!(e.contains("does not exist"), "{e}");
}

/// A deterministic embedder: word hashes folded into 16 dimensions.
struct HashEmbedder;

impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        "test:hash-16"
    }
    fn dimension(&self) -> usize {
        16
    }
    fn batch_size(&self) -> usize {
        3
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0f32; 16];
                for w in t.split_whitespace() {
                    let h = blake3::hash(w.to_lowercase().as_bytes());
                    v[(h.as_bytes()[0] % 16) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

#[test]
fn vectors_are_stored_reused_and_searched_as_in_the_local_store() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(tmp.path());
    let local_dir = tmp.path().join("local");
    Store::index(
        &local_dir,
        std::slice::from_ref(&docs),
        &opts(),
        &mut |_| {},
    )
    .unwrap();
    PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
    let local = Store::open(&local_dir).unwrap();
    let store = pg(&db);
    assert_eq!(store.embedding_model().unwrap(), None);
    let e = store
        .search_hybrid(
            "rent",
            &SearchOptions::new(RetrievalMode::Vector),
            Some(&HashEmbedder),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no embeddings"), "{e}");
    let rl = local
        .embed_chunks(&HashEmbedder, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    let rp = store
        .embed_chunks(&HashEmbedder, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!((rp.embedded, rp.unchanged), (rl.embedded, rl.unchanged));
    assert_eq!(
        store.vector_status().unwrap(),
        local.vector_status().unwrap()
    );
    for mode in [RetrievalMode::Vector, RetrievalMode::Hybrid] {
        let o = SearchOptions::new(mode);
        let a = store
            .search_hybrid("when is rent due", &o, Some(&HashEmbedder))
            .unwrap();
        let b = local
            .search_hybrid("when is rent due", &o, Some(&HashEmbedder))
            .unwrap();
        // The same chunks with the same similarities (chunks of equal
        // text tie, and ties may come in another order).
        let scored = |r: &rlm_corpus::HybridResults| {
            let mut v: Vec<(String, String)> = r
                .hits
                .iter()
                .map(|h| {
                    (
                        format!("{:.5}", h.vector_score.unwrap_or(0.0)),
                        h.text.clone(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(scored(&a), scored(&b), "{mode:?}");
    }
    // Another model is refused; a second run embeds nothing.
    struct Other;
    impl Embedder for Other {
        fn model_id(&self) -> &str {
            "test:other"
        }
        fn dimension(&self) -> usize {
            8
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().map(|_| vec![0.0; 8]).collect())
        }
    }
    let e = store
        .embed_chunks(&Other, &EmbedOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds embeddings of test:hash-16"), "{e}");
    let again = store
        .embed_chunks(&HashEmbedder, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(again.embedded, 0);
    // A changed document: its chunks are re-embedded, the vectors of
    // vanished chunks removed.
    write(
        &docs.join("lease.md"),
        "# Lease\n\nNotice is now thirty days.\n",
    );
    PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
    let after = store
        .embed_chunks(&HashEmbedder, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    assert!(after.embedded >= 1 && after.removed >= 1, "{after:?}");
    let status = store.vector_status().unwrap();
    assert!(status.complete(), "{status:?}");
    let hits = store
        .search_vector(&HashEmbedder.embed(&["thirty days"]).unwrap()[0], 3, -1.0)
        .unwrap();
    assert_eq!(hits.len(), 3);
}

#[test]
fn chunk_locations_are_kept_like_the_local_store_keeps_them() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("mail");
    write(
        &docs.join("note.eml"),
        "From: Anna Berg <anna@example.org>\r\nDate: Sat, 2 Mar 2024 10:15:00 +0100\r\nSubject: Schlüssel\r\n\r\nDer Schlüssel liegt beim Hausmeister.\r\n",
    );
    let local_dir = tmp.path().join("local");
    Store::index(
        &local_dir,
        std::slice::from_ref(&docs),
        &opts(),
        &mut |_| {},
    )
    .unwrap();
    PgStore::index(db.url(), std::slice::from_ref(&docs), &opts(), &mut |_| {}).unwrap();
    let store = pg(&db);
    assert_eq!(
        snapshot(&store),
        snapshot(&Store::open(&local_dir).unwrap())
    );
    let chunk = &store.chunks_of(&document_id("mail/note.eml")).unwrap()[0];
    assert_eq!(
        chunk.location.as_deref(),
        Some("message of 2024-03-02 from Anna Berg")
    );
}
