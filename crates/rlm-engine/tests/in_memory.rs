//! Questions over an in-memory corpus (`Corpus::in_memory`: texts given by
//! the caller, no store folder): the loop, search and citations work as over
//! a store on disk, and citations resolve to spans of the given texts.

use crate::common;

use std::sync::Arc;

use common::*;
use rlm_corpus::MemoryDocument;
use rlm_engine::citations::{CitationOrigin, CitationStatus};
use rlm_engine::grounding::Support;
use rlm_engine::{AskRequest, Corpus};
use rlm_llm::testing::{Script, ScriptedServer};

const NOTES: &str =
    "Meeting notes from Tuesday.\nThe secret code is 4721. Keep it safe.\nEnd of notes.\n";

fn corpus() -> Arc<Corpus> {
    Arc::new(
        Corpus::in_memory(
            &[
                MemoryDocument::new("context[0]", "This memo describes the office move.\n"),
                MemoryDocument::new("context[1]", NOTES),
            ],
            2000,
        )
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_over_texts_in_memory_is_answered_with_spans_of_those_texts() {
    let corpus = corpus();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    // search() runs on the in-memory full-text index.
                    repl("hits = search('secret code', 3)\nprint(hits[0]['path'], hits[0]['chunk_id'])\nprint(context[:80])"),
                    "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]].)".to_string(),
                ],
            )
            .on(judge(), verdicts(&["entailed"])),
    )
    .await;
    let engine = engine(&server, config()).await;
    let mut trace_path = std::env::temp_dir();
    trace_path.push(format!("rlm-in-memory-{}.jsonl", std::process::id()));
    let mut req = AskRequest::new("What is the secret code?");
    req.trace = Arc::new(rlm_engine::Trace::to_file(&trace_path).unwrap());
    let answer = engine.ask(corpus.clone(), req).await.unwrap();
    let records = rlm_engine::trace::read_trace(&trace_path).unwrap();
    let _ = std::fs::remove_file(&trace_path);

    assert!(!answer.partial, "{:?}", answer.partial_reason);
    assert!(answer.answer.contains("4721"), "{}", answer.answer);
    // The cell saw the documents in the order given, and search found the note.
    let printed: String = records
        .iter()
        .filter_map(|r| match &r.event {
            rlm_engine::TraceEvent::CellOutput { stdout, .. } => Some(stdout.clone()),
            _ => None,
        })
        .collect();
    let notes_chunk = rlm_corpus::chunk_id(&rlm_corpus::document_id("context[1]"), 0);
    assert!(
        printed.contains(&format!("context[1] {notes_chunk}")),
        "{printed}"
    );
    assert!(
        printed.contains("[DOCUMENT 0: context[0]]"),
        "context is the paper's string shape: {printed}"
    );

    // The model's citation is verified and resolves to a chunk of the text given.
    assert_eq!(answer.claims.len(), 1, "{:?}", answer.claims);
    let claim = &answer.claims[0];
    assert_eq!(claim.support, Support::Supported);
    let cite = &claim.citations[0];
    assert_eq!(cite.origin, CitationOrigin::Model);
    assert_eq!(cite.status, CitationStatus::Verified);
    assert_eq!(cite.path.as_deref(), Some("context[1]"));
    assert_eq!(cite.chunk_id.as_deref(), Some(notes_chunk.as_str()));
    let (a, b) = (
        cite.byte_start.unwrap() as usize,
        cite.byte_end.unwrap() as usize,
    );
    // A model's citation names a chunk: its span is the chunk's, holding the quote.
    assert_eq!(&NOTES[a..b], NOTES, "one chunk holds the whole note");
    assert!(NOTES[a..b].contains("The secret code is 4721"));
    // A model's own citation names its chunk; the line of its quote is found in it.
    let mut sources = answer.sources();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].path, "context[1]");
    assert_eq!(sources[0].line, None);
    corpus.fill_source_lines(&mut sources);
    assert_eq!(sources[0].line, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uncited_claims_get_engine_citations_from_the_texts_in_memory() {
    let corpus = corpus();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("print(documents[1]['text'])"),
            "FINAL(The secret code is 4721.)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let answer = engine
        .ask(corpus.clone(), AskRequest::new("What is the secret code?"))
        .await
        .unwrap();
    let cite = &answer.claims[0].citations[0];
    assert_eq!(cite.origin, CitationOrigin::Engine);
    assert_eq!(cite.status, CitationStatus::Verified);
    let text = corpus.document_text(cite.doc_index.unwrap()).unwrap();
    assert_eq!(text, NOTES);
    let (a, b) = (
        cite.byte_start.unwrap() as usize,
        cite.byte_end.unwrap() as usize,
    );
    assert_eq!(Some(&NOTES[a..b]), cite.quote.as_deref());
}
