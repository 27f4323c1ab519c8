//! The OpenAI-compatible endpoint on a real socket: `GET /v1/models` and
//! `POST /v1/chat/completions`, streamed and not, over a real store, real
//! sandbox workers and the scripted model server; errors in OpenAI's shape.

use std::time::Duration;

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer};
use rlm_server::Limits;
use serde_json::{Value, json};

use crate::common;
use common::root;

/// Finds the code with a regex, then answers citing the document; as the
/// judge, finds the claim entailed by its passage.
fn needle_script() -> Script {
    needle_script_judged(judge_reply(&[Verdict::Entailed]))
}

/// [`needle_script`] whose judge replies `verdicts`.
fn needle_script_judged(verdicts: String) -> Script {
    Script::new()
        .on(common::judge(), Reply::text(verdicts).with_usage(100, 5))
        .on(
            root().and(Matcher::any_contains("REPL output")),
            // In other words than its passage, so the judge is asked.
            Reply::text("FINAL(The code is 4721 [[doc:1 \"The secret code is 4721\"]])")
                .with_usage(900, 30),
        )
        .on(
            root(),
            Reply::text(
                "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```",
            )
            .with_usage(800, 40),
        )
}

struct Server {
    _dir: tempfile::TempDir,
    base: String,
    model: ScriptedServer,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(script: Script) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = common::corpus(dir.path());
    let model = ScriptedServer::start(script).await;
    let app = common::app(&store_dir, &model, Limits::default(), Default::default()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(rlm_server::serve(listener, app, async {
        let _ = stopped.await;
    }));
    Server {
        _dir: dir,
        base,
        model,
        _stop: stop,
    }
}

async fn post(s: &Server, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", s.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_are_listed_one_per_flow() {
    let s = start(needle_script()).await;
    let v: Value = reqwest::get(format!("{}/v1/models", s.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["rlm", "rlm-repl", "rlm-pipeline", "rlm-rag", "rlm-auto"]
    );
    assert!(
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["object"] == "model")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_answers_the_last_user_message_with_sources_and_real_usage() {
    let s = start(needle_script()).await;
    let (status, v) = post(
        &s,
        json!({
            "model": "rlm",
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Where is the office moving?"},
                {"role": "assistant", "content": "To the fourth floor."},
                {"role": "user", "content": "What is the secret code?"}
            ],
            "temperature": 0.3,
            "max_tokens": 100
        }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["model"], "rlm");
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["role"], "assistant");
    let content = choice["message"]["content"].as_str().unwrap();
    // The model's marker became a reference number into the checked sources.
    assert!(
        content.starts_with("The code is 4721 [1]\n\n**Sources**\n"),
        "{content}"
    );
    assert!(!content.contains("[[doc:"), "{content}");
    assert!(
        content.contains("1. `docs/b_notes.txt`, chunk ")
            && content.contains(": \"The secret code is 4721\"\n"),
        "{content}"
    );
    assert!(
        content.ends_with("*1 of 1 claims entailed by their passage; 0 related, 0 contradicted, 0 unverified, 0 without a passage.*\n"),
        "{content}"
    );
    // Beyond OpenAI's fields: each claim's entailment and quote check, apart.
    let claim = &v["rlm"]["claims"][0];
    assert_eq!(claim["support"], "supported", "{v}");
    assert_eq!(claim["quote_check"], "verified", "{v}");
    assert_eq!(claim["passages"], json!([1]), "{v}");
    assert_eq!(v["rlm"]["sources"][0]["quote"], "The secret code is 4721");
    // The run's usage, the judge's call included.
    assert_eq!(v["usage"]["prompt_tokens"], 1800);
    assert_eq!(v["usage"]["completion_tokens"], 75);
    assert_eq!(v["usage"]["total_tokens"], 1875);
    // The earlier turn reached the model as conversation, the system
    // message did not replace the server's instructions.
    let first = &s.model.requests()[0];
    let all: String = first.body.to_string();
    assert!(all.contains("Where is the office moving?"), "{all}");
    assert!(all.contains("To the fourth floor."), "{all}");
    assert!(!all.contains("You are helpful."), "{all}");
}

/// A claim whose passage the judge does not find states it (or gives no
/// usable verdict on) shows its passage as related, never under Sources;
/// its quote check is reported apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passage_not_judged_to_entail_its_claim_is_related_not_a_source() {
    let malformed = r#"{"verdicts": [{"claim": 1, "verdict": "maybe"}]}"#.to_string();
    for (verdicts, support) in [
        (judge_reply(&[Verdict::NotEntailed]), "related"),
        (malformed, "unverified"),
    ] {
        let s = start(needle_script_judged(verdicts)).await;
        let (status, v) = post(
            &s,
            json!({"model": "rlm", "messages": [{"role": "user", "content": "What is the secret code?"}]}),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let content = v["choices"][0]["message"]["content"].as_str().unwrap();
        assert!(!content.contains("**Sources**"), "{content}");
        assert!(
            content.starts_with("The code is 4721 [1]\n\n**Related passages** (found, but not judged to state their claim; not sources)\n1. `docs/b_notes.txt`"),
            "{content}"
        );
        let claim = &v["rlm"]["claims"][0];
        assert_eq!(claim["support"], support, "{v}");
        assert_eq!(claim["quote_check"], "verified", "{v}");
        assert_eq!(v["rlm"]["sources"], json!([]), "{v}");
        assert_eq!(v["rlm"]["related_sources"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_completion_sends_chunks_usage_and_done() {
    let s = start(needle_script()).await;
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", s.base))
        .json(&json!({
            "model": "rlm-repl",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is the secret code?"}]}],
            "stream": true,
            "stream_options": {"include_usage": true}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = tokio::time::timeout(Duration::from_secs(60), r.text())
        .await
        .expect("the stream ends")
        .unwrap();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(content.starts_with("The code is 4721"), "{content}");
    assert!(content.contains("**Sources**"), "{content}");
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("stop")]);
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 1875);
    let last = chunks
        .iter()
        .find(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(last["rlm"]["claims"][0]["support"], "supported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_openai_shaped_errors() {
    let s = start(needle_script()).await;
    let (status, v) = post(
        &s,
        json!({"model": "gpt-4", "messages": [{"role": "user", "content": "q"}]}),
    )
    .await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], "model_not_found");
    assert_eq!(v["error"]["param"], "model");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("GET /v1/models"),
        "{v}"
    );

    let (status, v) = post(&s, json!({"model": "rlm", "messages": []})).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("messages is empty")
    );

    let (status, v) = post(
        &s,
        json!({"model": "rlm", "messages": [{"role": "assistant", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["param"], "messages");

    let (status, v) = post(&s, json!({"messages": "nope"})).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(!v["error"]["message"].as_str().unwrap().is_empty());

    // rlm's `sandbox` extension is checked as the API field is.
    let (status, v) = post(
        &s,
        json!({"model": "rlm", "sandbox": "jail", "messages": [{"role": "user", "content": "q"}]}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown sandbox \"jail\": use monty (the default) or cpython"),
        "{v}"
    );

    // The engine's own checks speak through the same shape.
    let (status, v) = post(
        &s,
        json!({"model": "rlm", "messages": [{"role": "user", "content": "   "}]}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("question is empty")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_extension_picks_the_python_that_runs_the_code() {
    // The model's cell prints the platform: monty names itself, CPython says linux.
    let s = start(
        Script::new()
            .on(
                root().and(Matcher::any_contains("platform=monty")),
                "FINAL(ran on monty [[doc:1 \"The secret code is 4721\"]])",
            )
            .on(
                root().and(Matcher::any_contains("platform=linux")),
                "FINAL(ran on cpython [[doc:1 \"The secret code is 4721\"]])",
            )
            .on(
                root(),
                "```repl\nimport sys\nprint('platform=' + sys.platform)\n```",
            ),
    )
    .await;
    let ask = |sandbox: Option<&str>| {
        let mut body =
            json!({"model": "rlm", "messages": [{"role": "user", "content": "Which Python?"}]});
        if let Some(name) = sandbox {
            body["sandbox"] = name.into();
        }
        body
    };
    let (status, v) = post(&s, ask(None)).await;
    assert_eq!(status, 200, "{v}");
    let text = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("ran on monty"), "{text}");
    if !rlm_sandbox::testing::cpython_available() {
        return;
    }
    let (status, v) = post(&s, ask(Some("cpython"))).await;
    assert_eq!(status, 200, "{v}");
    let text = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("ran on cpython"), "{text}");
}

/// `response_format` with a JSON Schema: the content is the answer as JSON
/// that follows it, each value's citations in rlm's extension; the same
/// through `POST /api/runs`' `response_schema`. A bad format or schema is a
/// 400 in each API's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_format_returns_the_answer_as_json() {
    let schema = json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"], "additionalProperties": false});
    let s = start(needle_script().on(
        Matcher::any_contains("Put the answer below into one JSON document"),
        r#"{"code": "4721"}"#,
    ))
    .await;
    let (status, v) = post(
        &s,
        json!({
            "model": "rlm",
            "messages": [{"role": "user", "content": "What is the secret code?"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "code", "schema": schema}},
        }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        json!({"code": "4721"})
    );
    assert_eq!(v["rlm"]["data_citations"][0]["path"], "$.code", "{v}");
    // The typed-answer call was asked for the schema.
    let typed = s
        .model
        .requests()
        .into_iter()
        .find(|r| r.last_message().contains("Put the answer below"))
        .unwrap();
    assert_eq!(
        typed.body["response_format"]["json_schema"]["schema"]["required"],
        json!(["code"])
    );

    for (format, needle) in [
        (json!({"type": "xml"}), "text, json_object or json_schema"),
        (json!({"type": "json_schema"}), "json_schema.schema"),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {"type": "object", "patternProperties": {}}}}),
            "patternProperties",
        ),
    ] {
        let (status, v) = post(
            &s,
            json!({"model": "rlm", "messages": [{"role": "user", "content": "q"}], "response_format": format}),
        )
        .await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }
    let r = reqwest::Client::new()
        .post(format!("{}/api/runs", s.base))
        .json(&json!({"question": "q", "response_schema": {"type": "object", "patternProperties": {}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("response_schema") && text.contains("patternProperties"),
        "{text}"
    );
}
