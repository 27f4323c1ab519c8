//! Retrieval quality of bm25, vector and hybrid on the labelled set in
//! `tests/data/retrieval_eval.json` over `tests/data/eval-corpus/` (a made-up
//! company handbook; see its README.txt). Prints the table docs/benchmarks.md
//! quotes; run with `-- --nocapture` to see it. Needs all-MiniLM-L6-v2 (see
//! `retrieval_model.rs`).

use crate::retrieval_support;

use std::path::Path;

use rlm_corpus::embed::MiniLmEmbedder;
use rlm_corpus::eval::{LabelledQuestion, evaluate};
use rlm_corpus::{EmbedOptions, IndexOptions, RetrievalMode, Store};

/// Small chunks so every document splits into several and ranking matters.
const EVAL_CHUNK_CHARS: usize = 200;

#[test]
fn recall_and_ndcg_of_each_mode() {
    let Some(model_dir) = retrieval_support::model_dir() else {
        return;
    };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let set: Vec<LabelledQuestion> =
        serde_json::from_str(&std::fs::read_to_string(data.join("retrieval_eval.json")).unwrap())
            .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let opts = IndexOptions {
        chunk_chars: EVAL_CHUNK_CHARS,
        include: vec!["*.md".into()],
        ..IndexOptions::default()
    };
    Store::index(&dir, &[data.join("eval-corpus")], &opts, &mut |_| {}).unwrap();
    let store = Store::open(&dir).unwrap();
    let model = MiniLmEmbedder::load(&model_dir).unwrap();
    store
        .embed_chunks(&model, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    let chunks = store.stats().unwrap().chunks;
    println!(
        "{} questions, {} documents, {chunks} chunks of ≤{EVAL_CHUNK_CHARS} chars",
        set.len(),
        store.stats().unwrap().documents
    );
    println!("| mode | recall@10 | nDCG@10 | MRR@10 | recall@3 |");
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for mode in [
        RetrievalMode::Bm25,
        RetrievalMode::Vector,
        RetrievalMode::Hybrid,
    ] {
        let at10 = evaluate(&store, &set, mode, 10, Some(&model)).unwrap();
        let at3 = evaluate(&store, &set, mode, 3, Some(&model)).unwrap();
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            mode.as_str(),
            at10.recall_at_k,
            at10.ndcg_at_k,
            at10.mrr,
            at3.recall_at_k
        );
        rows.push((at10, at3));
    }
    let (bm25, vector, hybrid) = (&rows[0].0, &rows[1].0, &rows[2].0);
    // Floors well under the measured values: a regression in tokenization, the
    // forward pass, fusion or the BM25 analyzer drops far below them.
    assert!(bm25.recall_at_k > 0.6, "{bm25:?}");
    assert!(vector.recall_at_k > 0.7, "{vector:?}");
    assert!(
        hybrid.recall_at_k >= bm25.recall_at_k.max(vector.recall_at_k) - 0.05,
        "{hybrid:?}"
    );
    assert!(hybrid.ndcg_at_k > 0.6, "{hybrid:?}");
}
