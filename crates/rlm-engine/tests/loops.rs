//! Loops a small model falls into, and what the engine tells it.

use crate::common;

use common::*;
use rlm_llm::testing::{Matcher, Script, ScriptedServer};

const LAST_AFTER_REPEAT: &str = "Your last turn repeated an earlier one";

/// Four cells in a cycle (A, B, C, D, A): the fifth turn repeats the first
/// turn's code and output, four turns back, and gets the last turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cycle_of_four_cells_ends_with_a_last_turn() {
    let ts = needle_store();
    let cells: Vec<String> = ["secret", "code", "what", "is"]
        .iter()
        .map(|w| {
            repl(&format!(
                "n = len([d for d in documents if \"{w}\" in d[\"text\"].lower()])\nprint(n, \"of\", len(documents), \"documents mention {w}\")"
            ))
        })
        .collect();
    let mut replies = cells.clone();
    replies.push(cells[0].clone());
    replies.push("FINAL(gave up)".to_string());
    let server = ScriptedServer::start(Script::new().on_sequence(root(), replies)).await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(answer.answer, "gave up");
    let reqs = server.requests();
    for (turn, r) in reqs.iter().enumerate().take(5).skip(1) {
        assert!(!r.last_message().contains(LAST_AFTER_REPEAT), "turn {turn}");
    }
    assert_eq!(reqs.len(), 6, "no turn asked after the repeat");
    let last = reqs[5].last_message();
    assert!(last.contains(LAST_AFTER_REPEAT), "{last}");
}

/// Three turns in a row that only print counts: the fourth request shows
/// where the question's words are (document, offsets, the text around them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counting_turns_get_the_match_windows() {
    let ts = needle_store();
    let replies = vec![
        repl(
            "print(len([d for d in documents if \"secret\" in d[\"text\"].lower()]), \"of\", len(documents))",
        ),
        repl("print(context.count(\"code\"))"),
        repl("print(len(documents), \"documents\")"),
        "FINAL(gave up)".to_string(),
    ];
    let server = ScriptedServer::start(Script::new().on_sequence(root(), replies)).await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(answer.answer, "gave up");
    let reqs = server.requests();
    for r in &reqs[1..3] {
        assert!(!r.last_message().contains("only printed counts"));
    }
    let fourth = reqs[3].last_message();
    assert!(
        fourth.contains("your last 3 turns only printed counts"),
        "{fourth}"
    );
    assert!(
        fourth.contains("[DOCUMENT 1: docs/b_notes.txt] characters"),
        "{fourth}"
    );
    assert!(fourth.contains("The secret code is 4721"), "{fourth}");
}

/// An answer that is an internal chunk id is sent back once; the model's
/// second answer is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chunk_id_as_the_answer_is_sent_back_once() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            "FINAL(The secret code is 12495df8814cacdd-1)".to_string(),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(!answer.partial, "{answer:?}");
    assert!(
        answer.answer.starts_with("The secret code is 4721"),
        "{}",
        answer.answer
    );
    let reqs = server.requests();
    let note = reqs[1].last_message();
    assert!(
        note.contains("your answer was not accepted")
            && note.contains("chunk id 12495df8814cacdd-1"),
        "{note}"
    );
}

/// An answer in another language than the question is sent back once,
/// naming both; the answer in the question's language is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_in_another_language_is_sent_back_once() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new().on_sequence(
            root(),
            [
                "FINAL(The secret code written in the notes is 4721, as the second document says.)"
                    .to_string(),
                "FINAL(Der geheime Code in den Notizen lautet 4721, wie das zweite Dokument sagt.)"
                    .to_string(),
                "FINAL(never asked)".to_string(),
            ],
        ),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "Wie lautet der geheime Code in den Notizen?").await;
    assert!(answer.answer.starts_with("Der geheime Code"), "{answer:?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let note = reqs[1].last_message();
    assert!(
        note.contains("it is written in English, but the question is in German"),
        "{note}"
    );
}

/// A model that keeps answering in another language: its answer is
/// rewritten in the question's by one more call, citation markers kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_left_in_another_language_is_rewritten_with_its_markers() {
    let ts = needle_store();
    let english = "FINAL(The secret code written in the notes is 4721 [[doc:1 \"The secret code is 4721\"]], as the notes say.)";
    let server = ScriptedServer::start(
        Script::new()
            .on(
                Matcher::last_contains("Translate the following text into German"),
                "Der geheime Code in den Notizen lautet 4721 ⟦1⟧, wie die Notizen sagen.",
            )
            .on_sequence(
                root(),
                [
                    english.to_string(),
                    english.replace("as the notes say", "as the meeting notes say"),
                ],
            ),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "Wie lautet der geheime Code in den Notizen?").await;
    assert_eq!(
        answer.answer,
        "Der geheime Code in den Notizen lautet 4721 [[doc:1 \"The secret code is 4721\"]], wie die Notizen sagen.",
        "{answer:?}"
    );
    let rewrite = server
        .requests()
        .into_iter()
        .find(|r| {
            r.last_message()
                .contains("Translate the following text into German")
        })
        .expect("a rewrite was asked for");
    // The answer alone: shown the question, a small model answers it again.
    assert!(
        !rewrite.last_message().contains("Wie lautet"),
        "{}",
        rewrite.last_message()
    );
    assert!(
        rewrite
            .last_message()
            .contains("is 4721 ⟦1⟧, as the meeting notes say."),
        "{}",
        rewrite.last_message()
    );
    assert!(answer.verification.unwrap().all_valid);
}

/// A rewrite that drops a placeholder (the embedded model's) is asked once
/// more statement by statement, as a JSON list: the markers come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rewrite_that_drops_a_marker_is_asked_again_statement_by_statement() {
    let ts = needle_store();
    let english = "FINAL(The secret code written in the notes is 4721 [[doc:1 \"The secret code is 4721\"]], as the notes say.)";
    let server = ScriptedServer::start(
        Script::new()
            .on(
                Matcher::last_contains("Translate the following text into German"),
                "The secret code written in the notes is 4721, as the notes say.",
            )
            .on(
                Matcher::last_contains("Translate each numbered sentence below into German"),
                r#"{"sentences": ["Der geheime Code in den Notizen lautet 4721", "wie die Notizen sagen."]}"#,
            )
            .on_sequence(
                root(),
                [
                    english.to_string(),
                    english.replace("as the notes say", "as the meeting notes say"),
                ],
            ),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "Wie lautet der geheime Code in den Notizen?").await;
    assert_eq!(
        answer.answer,
        "Der geheime Code in den Notizen lautet 4721 [[doc:1 \"The secret code is 4721\"]] wie die Notizen sagen.",
        "{answer:?}"
    );
    let asked = server
        .requests()
        .into_iter()
        .find(|r| {
            r.last_message()
                .contains("Translate each numbered sentence below")
        })
        .expect("asked statement by statement");
    assert!(
        asked.last_message().contains(
            "1. The secret code written in the notes is 4721\n2. , as the meeting notes say."
        ),
        "{}",
        asked.last_message()
    );
    assert!(answer.verification.unwrap().all_valid);
    let said = serde_json::to_string(&trace).unwrap();
    assert!(said.contains("the answer was rewritten in the question's language"));
}

/// If the second answer is no better, it is committed, marked partial.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_placeholder_answer_twice_is_partial() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new().on_sequence(root(), ["FINAL(<your answer>)", "FINAL({answer})"]),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("not an answer: it is a template placeholder"),
        "{answer:?}"
    );
}

/// With the stop after a code block (on for the embedded model), each turn
/// asks the model to stop at the end of its first code block, and the fence
/// the stop sequence swallowed is put back before the cell runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_stopped_after_its_code_block_runs_that_block() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            "Let me compute.\n```repl\nprint(6 * 7)".to_string(),
            "FINAL(42)".to_string(),
        ],
    ))
    .await;
    // The stop belongs to the text protocol: a structured turn is one JSON
    // document, never cut.
    let mut c = config();
    c.stop_after_code = Some(true);
    c.turn_format = rlm_engine::TurnFormat::Text;
    let eng = engine(&server, c).await;
    let (answer, _) = ask(&eng, &ts, "What is six times seven?").await;
    assert_eq!(answer.answer, "42");
    let reqs = server.requests();
    assert_eq!(reqs[0].body["stop"], serde_json::json!(["\n```\n"]));
    assert!(
        reqs[1].last_message().contains("42"),
        "{}",
        reqs[1].last_message()
    );
    // Off: no stop sequence is sent.
    let server = ScriptedServer::start(Script::new().on(root(), "FINAL(x)".to_string())).await;
    let mut c = config();
    c.stop_after_code = Some(false);
    let eng = engine(&server, c).await;
    ask(&eng, &ts, "q?").await;
    assert!(server.requests()[0].body.get("stop").is_none());
}
