//! Full-text ranking quality of PostgreSQL (BM25 computed from the chunks'
//! lexemes, in each chunk's language, and the term statistics the store keeps) against the local store's BM25 (tantivy) on rlm-corpus's
//! labelled set (`crates/rlm-corpus/tests/data/retrieval_eval.json`, 43
//! questions over a made-up handbook, chunks of 200 characters). Prints the
//! table docs/benchmarks.md quotes; run with `-- --nocapture` to see it.

use std::path::Path;

use rlm_corpus::eval::{LabelledQuestion, evaluate};
use rlm_corpus::{IndexOptions, RetrievalMode, Store};
use rlm_store_pg::PgStore;
use rlm_store_pg::testing::test_database;

/// The chunk size of rlm-corpus's own evaluation (same labels, same chunks).
const EVAL_CHUNK_CHARS: usize = 200;

#[test]
fn postgres_full_text_against_local_bm25_on_the_labelled_set() {
    let Some(db) = test_database() else { return };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rlm-corpus/tests/data");
    let set: Vec<LabelledQuestion> =
        serde_json::from_str(&std::fs::read_to_string(data.join("retrieval_eval.json")).unwrap())
            .unwrap();
    let opts = IndexOptions {
        chunk_chars: EVAL_CHUNK_CHARS,
        include: vec!["*.md".into()],
        ..IndexOptions::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let corpus = data.join("eval-corpus");
    Store::index(
        &tmp.path().join("store"),
        std::slice::from_ref(&corpus),
        &opts,
        &mut |_| {},
    )
    .unwrap();
    PgStore::index(db.url(), &[corpus], &opts, &mut |_| {}).unwrap();
    let local = Store::open(&tmp.path().join("store")).unwrap();
    let pg = PgStore::open(db.url()).unwrap();
    println!("| store | ranking | recall@10 | nDCG@10 | MRR@10 | recall@3 |");
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (name, ranking, store) in [
        (
            "local",
            "BM25 (tantivy)",
            &local as &dyn rlm_corpus::CorpusStore,
        ),
        ("PostgreSQL", "BM25 (tsvector, kept term statistics)", &pg),
    ] {
        let at10 = evaluate(store, &set, RetrievalMode::Bm25, 10, None).unwrap();
        let at3 = evaluate(store, &set, RetrievalMode::Bm25, 3, None).unwrap();
        println!(
            "| {name} | {ranking} | {:.3} | {:.3} | {:.3} | {:.3} |",
            at10.recall_at_k, at10.ndcg_at_k, at10.mrr, at3.recall_at_k
        );
        rows.push(at10);
    }
    // A floor well under the measured value: a broken query (AND instead of
    // OR, no stemming, wrong configuration) falls far below it.
    assert!(rows[1].recall_at_k > 0.6, "{:?}", rows[1]);
}
