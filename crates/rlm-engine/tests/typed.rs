//! Typed sub-calls (`llm_query(prompt, schema=...)`, on both sandboxes) and
//! typed answers (`AskRequest::answer_schema`), against the scripted model
//! server.

use crate::common;

use common::*;
use rlm_engine::{AskRequest, EngineError, TraceEvent};
use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer};
use serde_json::json;

const SCHEMA: &str = r#"{"type": "object", "properties": {"code": {"type": "string"}, "digits": {"type": "integer"}}, "required": ["code", "digits"], "additionalProperties": false}"#;

/// [`SCHEMA`] as a Python dict literal.
fn py_schema() -> String {
    SCHEMA.replace("false", "False")
}

/// The typed-answer call.
fn typed_answer_call() -> Matcher {
    Matcher::any_contains("Put the answer below into one JSON document")
}

/// The outputs of the cells the model wrote (after the engine's own):
/// (stdout, error).
fn outputs(trace: &[rlm_engine::TraceRecord]) -> Vec<(String, Option<String>)> {
    trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::CellOutput {
                stdout,
                error,
                iteration,
                ..
            } if *iteration > 0 => Some((stdout.clone(), error.clone())),
            _ => None,
        })
        .collect()
}

/// Asks with one root cell, then FINAL; the leaf replies as given.
async fn run_cell(
    cell: &str,
    leaf_replies: Vec<Reply>,
    sandbox: rlm_sandbox::SandboxBackend,
) -> (
    Vec<(String, Option<String>)>,
    Vec<rlm_llm::testing::ReceivedRequest>,
) {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(root(), [repl(cell), "FINAL(done)".to_string()])
            .on_sequence(leaf(), leaf_replies),
    )
    .await;
    let mut config = config();
    config.sandbox = sandbox;
    let engine = engine(&server, config).await;
    let (_, trace) = ask(&engine, &ts, "What is the secret code?").await;
    (outputs(&trace), server.requests())
}

async fn typed_llm_query_returns_a_validated_value(sandbox: rlm_sandbox::SandboxBackend) {
    let cell = format!(
        "r = llm_query('Extract the code: ' + documents[1]['text'], schema={})\nprint(type(r).__name__, r['code'], r['digits'] + 1)",
        py_schema()
    );
    let (out, reqs) = run_cell(
        &cell,
        vec![Reply::text(r#"{"code": "4721", "digits": 4}"#)],
        sandbox,
    )
    .await;
    assert_eq!(out[0].0.trim(), "dict 4721 5", "{out:?}");
    let leaf = reqs
        .iter()
        .find(|r| r.last_message().starts_with("Extract the code"))
        .unwrap();
    // The provider is asked to constrain the reply to the schema.
    assert_eq!(
        leaf.body["response_format"]["json_schema"]["schema"]["required"],
        json!(["code", "digits"]),
        "{}",
        leaf.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_typed_llm_query_returns_a_validated_value_on_monty() {
    typed_llm_query_returns_a_validated_value(rlm_sandbox::SandboxBackend::Monty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_typed_llm_query_returns_a_validated_value_on_cpython() {
    if !rlm_sandbox::testing::cpython_available() {
        return;
    }
    typed_llm_query_returns_a_validated_value(rlm_sandbox::SandboxBackend::CPython).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_that_does_not_follow_the_schema_is_asked_for_once_more_then_raises() {
    // Prose first, then the document: the retry shows what was wrong.
    let cell = format!(
        "r = llm_query('Extract', schema={})\nprint(r['code'])",
        py_schema()
    );
    let (out, reqs) = run_cell(
        &cell,
        vec![
            Reply::text("The code is 4721."),
            Reply::text(r#"{"code": "4721", "digits": 4}"#),
        ],
        rlm_sandbox::SandboxBackend::Monty,
    )
    .await;
    assert_eq!(out[0].0.trim(), "4721", "{out:?}");
    let retry = reqs
        .iter()
        .find(|r| r.messages.len() == 3 && r.messages[0].content == "Extract")
        .expect("the retry carries the first reply and what was wrong");
    assert!(
        retry.last_message().contains("holds no JSON document"),
        "{}",
        retry.last_message()
    );
    // Wrong twice: a ValueError in the cell, with the violation's path.
    let (out, _) = run_cell(
        &format!(
            "try:\n    llm_query('Extract', schema={})\nexcept ValueError as e:\n    print('ValueError', e)",
            py_schema()
        ),
        vec![
            Reply::text(r#"{"code": 4721, "digits": 4}"#),
            Reply::text(r#"{"code": "4721"}"#),
        ],
        rlm_sandbox::SandboxBackend::Monty,
    )
    .await;
    let printed = &out[0].0;
    assert!(
        printed.starts_with("ValueError") && printed.contains("did not follow the schema"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unsupported_schema_raises_before_any_call() {
    let cell = "try:\n    llm_query('x', schema={'type': 'object', 'patternProperties': {}})\nexcept ValueError as e:\n    print('ValueError', e)";
    let (out, reqs) = run_cell(cell, vec![], rlm_sandbox::SandboxBackend::Monty).await;
    assert!(
        out[0].0.contains("ValueError") && out[0].0.contains("patternProperties"),
        "{out:?}"
    );
    assert!(
        reqs.iter().all(|r| !r.system().is_empty()),
        "no sub-call was made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn typed_batched_calls_return_values_in_order() {
    let cell = format!(
        "rs = llm_query_batched(['a', 'b'], schema={})\nprint([r['digits'] for r in rs])",
        py_schema()
    );
    let (out, _) = run_cell(
        &cell,
        vec![
            Reply::text(r#"{"code": "x", "digits": 1}"#),
            Reply::text(r#"{"code": "y", "digits": 1}"#),
        ],
        rlm_sandbox::SandboxBackend::Monty,
    )
    .await;
    assert_eq!(out[0].0.trim(), "[1, 1]", "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_typed_answer_follows_the_schema_and_keeps_each_values_citations() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(
                typed_answer_call(),
                Reply::text(r#"{"code": "4721", "digits": 4}"#),
            )
            .on(judge(), verdicts(&["entailed"]))
            .on(
                root(),
                "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]].)",
            ),
    )
    .await;
    let engine = engine(&server, config()).await;
    let mut req = AskRequest::new("What is the secret code?");
    req.answer_schema = Some(serde_json::from_str(SCHEMA).unwrap());
    let (answer, _) = ask_with(&engine, &ts, req).await;
    let data = answer.data.expect("a typed answer");
    assert_eq!(data.value, Some(json!({"code": "4721", "digits": 4})));
    assert_eq!(data.error, None);
    let code = data
        .citations
        .iter()
        .find(|f| f.path == "$.code")
        .expect("the code keeps its citation");
    assert_eq!(
        code.citations[0].quote.as_deref(),
        Some("The secret code is 4721")
    );
    // The call is asked to follow the schema, and reads the answer without markers.
    let call = server
        .requests()
        .into_iter()
        .find(|r| r.last_message().contains("Put the answer below"))
        .unwrap();
    assert!(call.body["response_format"]["json_schema"]["schema"].is_object());
    assert!(
        !call.last_message().contains("[[doc:"),
        "{}",
        call.last_message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_typed_answer_that_never_follows_the_schema_says_why_and_the_answer_stays() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                typed_answer_call(),
                [Reply::text("4721"), Reply::text(r#"{"code": 4721}"#)],
            )
            .on(root(), "FINAL(The secret code is 4721.)"),
    )
    .await;
    let engine = engine(&server, config()).await;
    let mut req = AskRequest::new("What is the secret code?");
    req.answer_schema = Some(serde_json::from_str(SCHEMA).unwrap());
    let (answer, _) = ask_with(&engine, &ts, req).await;
    assert_eq!(answer.answer, "The secret code is 4721.");
    let data = answer.data.unwrap();
    assert_eq!(data.value, None);
    assert!(
        data.error
            .as_deref()
            .unwrap()
            .contains("did not follow the schema"),
        "{data:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unsupported_answer_schema_is_refused_before_the_run() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new()).await;
    let engine = engine(&server, config()).await;
    let mut req = AskRequest::new("What is the secret code?");
    req.answer_schema = Some(json!({"type": "object", "patternProperties": {}}));
    let err = engine.ask(ts.corpus.clone(), req).await.unwrap_err();
    assert!(matches!(err, EngineError::AnswerSchema(_)), "{err}");
    assert!(err.to_string().contains("patternProperties"), "{err}");
    assert_eq!(server.requests().len(), 0);
}
