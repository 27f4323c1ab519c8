//! Retrieval quality on a labelled set: recall@k and nDCG@k per mode.
//!
//! A labelled set is JSON: `[{"question": "...", "answers": [{"path": "<corpus
//! path>", "contains": "<text inside the answering chunk>"}]}]`. Answers name
//! text rather than chunk ids so the set survives a change of chunk size; each
//! resolves to the chunk(s) of that document containing the text.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::backend::CorpusStore;
use crate::embed::Embedder;
use crate::hybrid::{RetrievalMode, SearchOptions};
use crate::vector::RetrievalError;

/// One question and where its answer is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledQuestion {
    /// The question as a user would type it.
    pub question: String,
    /// The passages that answer it.
    pub answers: Vec<AnswerLocation>,
}

/// A passage that answers a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerLocation {
    /// Corpus-relative path of the document.
    pub path: String,
    /// Text that appears in the answering chunk.
    pub contains: String,
}

/// Quality of one mode over a labelled set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// The mode measured.
    pub mode: RetrievalMode,
    /// Cut-off.
    pub k: usize,
    /// Questions asked.
    pub questions: usize,
    /// Mean fraction of relevant chunks in the top k.
    pub recall_at_k: f64,
    /// Mean nDCG@k with binary relevance.
    pub ndcg_at_k: f64,
    /// Mean reciprocal rank of the first relevant chunk (0 when none in the top k).
    pub mrr: f64,
}

/// Resolves each question's answers to chunk ids. A label that matches no
/// chunk is an error naming it, so a broken set cannot score silently.
pub fn resolve_labels(
    store: &dyn CorpusStore,
    set: &[LabelledQuestion],
) -> Result<Vec<HashSet<String>>, RetrievalError> {
    let mut out = Vec::with_capacity(set.len());
    let mut unmatched = Vec::new();
    for q in set {
        let mut ids = HashSet::new();
        for a in &q.answers {
            let doc = store.document_by_path(&a.path)?.ok_or_else(|| {
                RetrievalError::InvalidOption(format!(
                    "label of {:?}: no document {}",
                    q.question, a.path
                ))
            })?;
            let before = ids.len();
            for c in store.chunks_of(&doc.id)? {
                if c.text.contains(&a.contains) {
                    ids.insert(c.id);
                }
            }
            if ids.len() == before {
                unmatched.push(format!("{:?} in {}", a.contains, a.path));
            }
        }
        out.push(ids);
    }
    if !unmatched.is_empty() {
        return Err(RetrievalError::InvalidOption(format!(
            "labels that no chunk contains (split by a chunk boundary, or misspelled): {}",
            unmatched.join("; ")
        )));
    }
    Ok(out)
}

/// Runs every question through `mode` and scores the top `k`.
pub fn evaluate(
    store: &dyn CorpusStore,
    set: &[LabelledQuestion],
    mode: RetrievalMode,
    k: usize,
    embedder: Option<&dyn Embedder>,
) -> Result<EvalReport, RetrievalError> {
    let labels = resolve_labels(store, set)?;
    let opts = SearchOptions {
        k,
        ..SearchOptions::new(mode)
    };
    let (mut recall, mut ndcg, mut mrr) = (0.0, 0.0, 0.0);
    for (q, relevant) in set.iter().zip(&labels) {
        let hits = store.search_hybrid(&q.question, &opts, embedder)?.hits;
        let ranked: Vec<&str> = hits.iter().map(|h| h.chunk_id.as_str()).collect();
        let m = score_ranking(&ranked, relevant, k);
        recall += m.0;
        ndcg += m.1;
        mrr += m.2;
    }
    let n = set.len().max(1) as f64;
    Ok(EvalReport {
        mode,
        k,
        questions: set.len(),
        recall_at_k: recall / n,
        ndcg_at_k: ndcg / n,
        mrr: mrr / n,
    })
}

/// (recall@k, nDCG@k, reciprocal rank) of one ranking with binary relevance.
pub fn score_ranking(ranked: &[&str], relevant: &HashSet<String>, k: usize) -> (f64, f64, f64) {
    if relevant.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let top = &ranked[..ranked.len().min(k)];
    let mut found = 0;
    let mut dcg = 0.0;
    let mut rr = 0.0;
    for (i, id) in top.iter().enumerate() {
        if relevant.contains(*id) {
            found += 1;
            dcg += 1.0 / ((i + 2) as f64).log2();
            if rr == 0.0 {
                rr = 1.0 / (i + 1) as f64;
            }
        }
    }
    let ideal: f64 = (0..relevant.len().min(k))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    (found as f64 / relevant.len() as f64, dcg / ideal, rr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_of_known_rankings() {
        let rel: HashSet<String> = ["a".to_string(), "b".to_string()].into();
        let (r, n, rr) = score_ranking(&["a", "b", "c"], &rel, 10);
        assert_eq!((r, n, rr), (1.0, 1.0, 1.0));
        let (r, n, rr) = score_ranking(&["c", "a"], &rel, 10);
        assert_eq!(r, 0.5);
        assert_eq!(rr, 0.5);
        // DCG = 1/log2(3); IDCG = 1 + 1/log2(3)
        let want = (1.0 / 3f64.log2()) / (1.0 + 1.0 / 3f64.log2());
        assert!((n - want).abs() < 1e-12);
        assert_eq!(score_ranking(&["c", "a"], &rel, 1), (0.0, 0.0, 0.0));
    }
}
