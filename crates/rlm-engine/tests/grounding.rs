//! Grounded answers: the evidence ledger records what agents saw, and each
//! claim of the answer gets the model's verified citation, or one the engine
//! attaches (verbatim quote, chunk span), or is marked unsupported.

use crate::common;

use common::*;
use rlm_engine::citations::{CitationOrigin, CitationStatus};
use rlm_engine::grounding::{EvidenceKind, Support};
use rlm_llm::testing::{Script, ScriptedServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uncited_claims_get_engine_citations_or_are_marked() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("for d in documents:\n    for line in d[\"text\"].splitlines():\n        if \"secret\" in line.lower():\n            print(d[\"index\"], line)"),
            "FINAL(The secret code is 4721. The launch is planned for March 2031.)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    // The ledger has the printed line, mapped to its chunk.
    let printed: Vec<_> = answer
        .evidence
        .iter()
        .filter(|e| e.kind == EvidenceKind::Printed)
        .collect();
    assert!(
        printed
            .iter()
            .any(|e| e.text.contains("The secret code is 4721") && e.chunk_id.is_some()),
        "{:?}",
        answer.evidence
    );
    // Two claims: the first backed by an engine citation, the second not.
    assert_eq!(answer.claims.len(), 2, "{:?}", answer.claims);
    let first = &answer.claims[0];
    assert_eq!(first.support, Support::Supported);
    assert_eq!(first.origin, "engine");
    let cite = &first.citations[0];
    assert_eq!(cite.origin, CitationOrigin::Engine);
    assert_eq!(cite.status, CitationStatus::Verified);
    assert_eq!(cite.quote.as_deref(), Some("The secret code is 4721."));
    assert!(cite.path.as_deref().unwrap().ends_with("b_notes.txt"));
    // The quote is verbatim at the span it names.
    let doc = ts.corpus.document_text(cite.doc_index.unwrap()).unwrap();
    let (a, b) = (
        cite.byte_start.unwrap() as usize,
        cite.byte_end.unwrap() as usize,
    );
    assert_eq!(&doc[a..b], "The secret code is 4721.");
    let second = &answer.claims[1];
    assert_eq!(second.support, Support::Unsupported);
    assert_eq!(second.origin, "none");
    let g = answer.grounded.clone().unwrap();
    assert_eq!((g.claims, g.supported, g.engine_attached), (2, 1, 1));
    // And --json carries it all.
    let v = serde_json::to_value(&answer).unwrap();
    assert_eq!(v["grounded"]["supported"], 1);
    assert_eq!(v["claims"][0]["citations"][0]["origin"], "engine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_citation_that_verifies_is_kept_as_the_models() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on(
        root(),
        "FINAL(The code is 4721 [[doc:1 \"The secret code is 4721\"]].)".to_string(),
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(answer.claims.len(), 1);
    assert_eq!(answer.claims[0].origin, "model");
    assert_eq!(answer.claims[0].citations[0].origin, CitationOrigin::Model);
    let g = answer.grounded.clone().unwrap();
    assert_eq!((g.claims, g.supported, g.engine_attached), (1, 1, 0));
}

/// `--verify semantic`: one batched sub-model call judges each claim against
/// its quotes; an unsupported claim is flagged (dropped under strict), and
/// the check's cost is reported apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_semantic_check_flags_or_drops_what_its_quotes_do_not_say() {
    use rlm_engine::CitationPolicy;
    use rlm_engine::grounding::Verdict;
    use rlm_llm::testing::Matcher;
    for policy in [CitationPolicy::BestEffort, CitationPolicy::Strict] {
        let ts = needle_store();
        let server = ScriptedServer::start(
            Script::new()
                .on(
                    root(),
                    "FINAL(The secret code is 4721. The office move happened in 1999 [[doc:0 \"This memo describes the office move\"]].)"
                        .to_string(),
                )
                .on(
                    Matcher::last_contains("Check whether each claim below is supported"),
                    r#"{"verdicts": [{"claim": 1, "verdict": "supported"}, {"claim": 2, "verdict": "unsupported"}]}"#
                        .to_string(),
                ),
        )
        .await;
        let mut c = config();
        c.semantic_check = true;
        c.citation_policy = policy;
        let engine = engine(&server, c).await;
        let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
        assert_eq!(answer.claims[0].verdict, Some(Verdict::Supported));
        assert_eq!(answer.claims[1].verdict, Some(Verdict::Unsupported));
        let s = answer.grounded.as_ref().unwrap().semantic.clone().unwrap();
        assert_eq!(
            (s.checked, s.supported, s.unsupported, s.calls),
            (2, 1, 1, 1)
        );
        assert!(s.input_tokens > 0);
        match policy {
            CitationPolicy::BestEffort => assert!(
                answer
                    .answer
                    .ends_with("office move\"]]. [not supported by its source]"),
                "{}",
                answer.answer
            ),
            CitationPolicy::Strict => {
                assert!(!answer.answer.contains("1999"), "{}", answer.answer);
                assert!(answer.answer.starts_with("The secret code is 4721."));
            }
        }
    }
}

/// Coverage (opt-in): the documents that match the question but back no
/// claim, so a user sees what a "list every…" answer may have missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coverage_lists_matching_documents_no_claim_cites() {
    let ts = store(&[
        ("a.txt", "The warehouse lease runs until 2027.\n"),
        ("b.txt", "The office lease was renewed in March.\n"),
        ("c.txt", "The parking lease ends next year.\n"),
        ("d.txt", "Lunch options near the office.\n"),
    ]);
    let server = ScriptedServer::start(Script::new().on(
        root(),
        "FINAL(The warehouse lease runs until 2027.)".to_string(),
    ))
    .await;
    let mut c = config();
    c.coverage = true;
    let engine = engine(&server, c).await;
    let (answer, _) = ask(&engine, &ts, "Which leases are there?").await;
    let cov = answer.grounded.as_ref().unwrap().coverage.clone().unwrap();
    assert_eq!((cov.matching, cov.cited), (3, 1), "{cov:?}");
    let mut uncited = cov.uncited.clone();
    uncited.sort();
    assert_eq!(uncited, ["docs/b.txt", "docs/c.txt"]);
}
