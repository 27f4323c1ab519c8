//! BM25 in the PostgreSQL store against a real server: the term statistics
//! an index run keeps (chunks per lexeme, chunk count and length) always
//! equal a recount from the chunks; rare words outweigh common ones; the
//! bounded search returns exactly the exhaustive ranking whenever it says
//! so; a store of schema version 1 gains its statistics (and languages)
//! when opened.

use std::fs;
use std::path::{Path, PathBuf};

use rlm_corpus::{CorpusStore, IndexOptions};
use rlm_store_pg::testing::{TestDatabase, test_database};
use rlm_store_pg::{Budget, PgStore};

fn write(path: &Path, content: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn opts(chunk_chars: usize) -> IndexOptions {
    IndexOptions {
        chunk_chars,
        ..IndexOptions::default()
    }
}

/// Differences between the kept statistics and a recount from the chunks
/// (lexemes whose counts differ, a wrong chunk count, a wrong length sum).
pub(crate) fn stale_statistics(db: &TestDatabase) -> Vec<String> {
    let recount = "SELECT lang_cfg AS cfg, l AS lexeme, count(*) AS chunks
                   FROM rlm_chunks, unnest(tsvector_to_array(tsv)) AS l GROUP BY lang_cfg, l";
    let kept = "SELECT cfg, lexeme, chunks FROM rlm_lexemes";
    let mut out = Vec::new();
    let differing = db
        .scalar(&format!(
            "SELECT count(*) FROM (({recount}) EXCEPT ({kept})
               UNION ALL (({kept}) EXCEPT ({recount}))) d"
        ))
        .unwrap();
    if differing.as_deref() != Some("0") {
        out.push(format!("{differing:?} lexeme counts differ"));
    }
    let per_configuration =
        "SELECT lang_cfg, count(*), sum(length(tsv)) FROM rlm_chunks GROUP BY lang_cfg";
    let kept = "SELECT cfg, chunks, chunk_lexemes FROM rlm_configurations";
    let differing = db
        .scalar(&format!(
            "SELECT count(*) FROM (({per_configuration}) EXCEPT ({kept})
               UNION ALL (({kept}) EXCEPT ({per_configuration}))) d"
        ))
        .unwrap();
    if differing.as_deref() != Some("0") {
        out.push(format!("{differing:?} configurations' totals differ"));
    }
    for (key, truth) in [
        ("chunks", "SELECT count(*) FROM rlm_chunks"),
        (
            "chunk_lexemes",
            "SELECT coalesce(sum(length(tsv)), 0) FROM rlm_chunks",
        ),
    ] {
        let kept = db
            .scalar(&format!("SELECT value FROM rlm_meta WHERE key = '{key}'"))
            .unwrap();
        let real = db.scalar(truth).unwrap();
        if kept != real {
            out.push(format!("{key}: kept {kept:?}, real {real:?}"));
        }
    }
    out
}

#[test]
fn term_statistics_follow_every_change_of_the_chunks() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("notes");
    for i in 0..6 {
        write(
            &docs.join(format!("n{i}.txt")),
            &format!("Shared words in every note {i}. Lease and rent, deposit {i}.\n").repeat(4),
        );
    }
    let index = |rebuild: bool| {
        let o = IndexOptions {
            rebuild,
            ..opts(80)
        };
        PgStore::index(db.url(), std::slice::from_ref(&docs), &o, &mut |_| {}).unwrap()
    };
    // A first run into an empty store builds the full-text index at its
    // end; one that fails leaves the index as it was.
    let tsv_index = "SELECT count(*) FROM pg_indexes WHERE indexname = 'rlm_chunks_tsv'";
    let empty = tmp.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    PgStore::index(
        db.url(),
        std::slice::from_ref(&empty),
        &opts(80),
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(db.scalar(tsv_index).unwrap().as_deref(), Some("1"));
    index(false);
    assert_eq!(db.scalar(tsv_index).unwrap().as_deref(), Some("1"));
    assert_eq!(stale_statistics(&db), Vec::<String>::new());
    let lexemes = db.scalar("SELECT count(*) FROM rlm_lexemes").unwrap();
    assert!(lexemes.unwrap().parse::<u32>().unwrap() > 5);
    // One changed (with a word no other note has), one removed, one added.
    write(
        &docs.join("n0.txt"),
        "Only this note mentions a zeppelin.\n",
    );
    fs::remove_file(docs.join("n1.txt")).unwrap();
    write(&docs.join("n9.txt"), "A new note about rent.\n");
    let r = index(false);
    assert_eq!((r.added, r.updated, r.removed), (1, 1, 1));
    assert_eq!(stale_statistics(&db), Vec::<String>::new());
    assert_eq!(
        db.scalar("SELECT chunks FROM rlm_lexemes WHERE lexeme = 'zeppelin'")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    // The words of the removed note's number went with it.
    assert_eq!(
        db.scalar("SELECT count(*) FROM rlm_lexemes WHERE lexeme = '1'")
            .unwrap()
            .as_deref(),
        Some("0")
    );
    index(true);
    assert_eq!(stale_statistics(&db), Vec::<String>::new());
    // A failed run (an empty corpus) leaves them as they were.
    PgStore::index(db.url(), &[empty], &opts(80), &mut |_| {}).unwrap_err();
    assert_eq!(stale_statistics(&db), Vec::<String>::new());
}

#[test]
fn a_rare_word_outweighs_repeats_of_a_common_one() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("fleet");
    for i in 0..20 {
        write(
            &docs.join(format!("ship{i:02}.txt")),
            &format!("The vessel number {i} sailed north with cargo.\n"),
        );
    }
    write(
        &docs.join("many.txt"),
        "vessel vessel vessel vessel, the vessel and the vessel again.\n",
    );
    write(
        &docs.join("rare.txt"),
        "One vessel carried an albatross on its mast for days.\n",
    );
    PgStore::index(
        db.url(),
        std::slice::from_ref(&docs),
        &opts(2_000),
        &mut |_| {},
    )
    .unwrap();
    let store = PgStore::open(db.url()).unwrap();
    let hits = store.search("vessel albatross", 3).unwrap();
    // Without inverse document frequency (ts_rank) the six repeats of the
    // common word win; BM25 puts the only chunk with the rare word first.
    assert_eq!(hits[0].path, "fleet/rare.txt", "{hits:?}");
    assert_eq!(hits[1].path, "fleet/many.txt", "{hits:?}");
    assert!(hits[0].score > hits[1].score && hits[1].score > hits[2].score);
    assert!(
        hits[0].snippet.contains("**albatross**"),
        "{}",
        hits[0].snippet
    );
}

/// Text of words from a Zipf-like vocabulary (word i with weight 1/(i+1)).
fn zipf_corpus(dir: &Path, files: usize) -> PathBuf {
    let docs = dir.join("zipf");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let word = |i: u64| format!("w{i}x");
    for f in 0..files {
        let mut text = String::new();
        for s in 0..40 {
            let u = (next() % 1_000_000) as f64 / 1_000_000.0;
            text.push_str(&word(300f64.powf(u) as u64));
            text.push(if s % 8 == 7 { '\n' } else { ' ' });
        }
        write(&docs.join(format!("f{f:03}.txt")), &text);
    }
    docs
}

#[test]
fn the_bounded_search_is_the_exhaustive_one_whenever_it_says_exact() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = zipf_corpus(tmp.path(), 120);
    PgStore::index(db.url(), &[docs], &opts(64), &mut |_| {}).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    let chunks = store.stats().unwrap().chunks;
    assert!(chunks > 400, "{chunks}");
    // Tiny budgets, so most questions are pruned and some cut short.
    let budget = Budget {
        first_pass: 15,
        max_candidates: 60,
    };
    let (mut exact_pruned, mut approximate) = (0, 0);
    for q in 0..80u64 {
        let question = (0..2 + q % 4)
            .map(|i| format!("w{}x", (q * 37 + i * 101) % 300))
            .collect::<Vec<_>>()
            .join(" ");
        let full = store.rank(&question, 5, Budget::EXHAUSTIVE).unwrap();
        assert!(full.exact);
        let bounded = store.rank(&question, 5, budget).unwrap();
        if bounded.exact {
            assert_eq!(bounded.hits, full.hits, "{question}");
            if bounded.scored < full.scored {
                exact_pruned += 1;
            }
        } else {
            approximate += 1;
            // Still true scores, best first, never more than asked.
            assert!(bounded.hits.len() <= 5);
            let truth = store
                .rank(&question, chunks as usize, Budget::EXHAUSTIVE)
                .unwrap();
            for (id, score) in &bounded.hits {
                let real = truth.hits.iter().find(|(i, _)| i == id).unwrap().1;
                assert!((real - score).abs() < 1e-9, "{question}: {id}");
            }
        }
    }
    assert!(
        exact_pruned >= 5,
        "{exact_pruned} exact questions scored fewer chunks"
    );
    assert!(approximate > 0, "no question was cut short by the budget");
    // The ranking of CorpusStore::search is the default budget's.
    let hits = store.search("w3x w150x", 5).unwrap();
    let ranked = store.rank("w3x w150x", 5, Budget::default()).unwrap();
    let ids: Vec<_> = hits.iter().map(|h| h.chunk_id.clone()).collect();
    let ranked_ids: Vec<_> = ranked.hits.iter().map(|h| h.0.clone()).collect();
    assert_eq!(ids, ranked_ids);
}

#[test]
fn a_store_of_schema_version_1_gains_its_statistics_locations_and_languages_when_opened() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = zipf_corpus(tmp.path(), 10);
    PgStore::index(db.url(), &[docs], &opts(200), &mut |_| {}).unwrap();
    let before = PgStore::open(db.url())
        .unwrap()
        .search("w1x w40x", 5)
        .unwrap();
    // Back to what version 1 held.
    crate::pg_languages::downgrade_to_schema_4(&db);
    db.sql(
        "DROP TABLE rlm_lexemes; DELETE FROM rlm_meta WHERE key IN ('chunks', 'chunk_lexemes');
         DROP TABLE rlm_replies; DROP SEQUENCE rlm_reply_use;
         ALTER TABLE rlm_chunks DROP COLUMN location; DELETE FROM rlm_schema WHERE version >= 2",
    )
    .unwrap();
    let store = PgStore::open(db.url()).unwrap();
    assert_eq!(
        db.scalar("SELECT max(version) FROM rlm_schema")
            .unwrap()
            .as_deref(),
        Some(rlm_store_pg::SCHEMA_VERSION.to_string().as_str())
    );
    assert_eq!(stale_statistics(&db), Vec::<String>::new());
    assert_eq!(store.search("w1x w40x", 5).unwrap(), before);
}
