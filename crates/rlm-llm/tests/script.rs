//! The scripted server itself: rule order, sequences, responders, JSON
//! scripts, exhaustion, and a sync (own-thread) server.

use std::time::Duration;

use rlm_llm::testing::{Fault, Matcher, Reply, Script, ScriptedServer};
use rlm_llm::{ChatRequest, LlmError, Message, ModelRole};

fn sub(text: &str) -> ChatRequest {
    ChatRequest::new(ModelRole::Sub, vec![Message::user(text)])
}

#[tokio::test]
async fn rules_win_over_ordered_replies_and_sequences_run_out() {
    let server = ScriptedServer::start(
        Script::new()
            .reply("root step 1")
            .reply("root step 2")
            .on_last_contains("Summarize", "a summary")
            .on(Matcher::last_matches(r"chunk \d+$"), "chunk verdict")
            .on_sequence(
                Matcher::model("sub-model").and(Matcher::last_contains("twice")),
                ["one", "two"],
            )
            .on(Matcher::system_contains("LEAF"), "leaf answer")
            .otherwise("fallback"),
    )
    .await;
    let client = server.client();
    let ask = |req: ChatRequest| {
        let client = client.clone();
        async move { client.chat(req).await.unwrap().text }
    };
    assert_eq!(ask(sub("Summarize this")).await, "a summary");
    assert_eq!(ask(sub("Summarize that")).await, "a summary");
    assert_eq!(ask(sub("look at chunk 12")).await, "chunk verdict");
    assert_eq!(ask(sub("say it twice")).await, "one");
    assert_eq!(ask(sub("say it twice")).await, "two");
    assert_eq!(
        ask(ChatRequest::user("q").with_system("you are a LEAF")).await,
        "leaf answer"
    );
    assert_eq!(ask(ChatRequest::user("start")).await, "root step 1");
    // The sequence ran out, so this falls through to the ordered replies.
    assert_eq!(ask(sub("say it twice")).await, "root step 2");
    assert_eq!(ask(ChatRequest::user("more")).await, "fallback");
    assert_eq!(server.remaining_replies(), 0);
}

#[tokio::test]
async fn respond_with_computes_replies_from_the_request() {
    let server = ScriptedServer::start(
        Script::new()
            .respond_with(|req| {
                let last = req.last_message();
                last.strip_prefix("echo ")
                    .map(|rest| Reply::text(rest.to_uppercase()))
            })
            .reply("not an echo"),
    )
    .await;
    let client = server.client();
    assert_eq!(
        client
            .chat(ChatRequest::user("echo hi"))
            .await
            .unwrap()
            .text,
        "HI"
    );
    assert_eq!(
        client.chat(ChatRequest::user("other")).await.unwrap().text,
        "not an echo"
    );
}

#[tokio::test]
async fn an_exhausted_script_says_so_without_retries() {
    let server = ScriptedServer::start(Script::new().reply("only one")).await;
    let client = server.client();
    client.chat(ChatRequest::user("a")).await.unwrap();
    let err = client.chat(ChatRequest::user("b")).await.unwrap_err();
    assert!(
        matches!(err, LlmError::BadRequest { status: 400, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("no reply left for request #1"),
        "{err}"
    );
    assert_eq!(server.request_count(), 2);
    server.push_reply("pushed later");
    assert_eq!(
        client.chat(ChatRequest::user("c")).await.unwrap().text,
        "pushed later"
    );
}

#[tokio::test]
async fn json_scripts_load_and_behave_like_built_ones() {
    let script = Script::from_json(
        r#"{
            "models": ["root-model", "sub-model"],
            "latency_ms": 1,
            "replies": [
                "plain",
                {"text": "counted", "usage": {"input": 10, "output": 2, "cached": 4}, "latency_ms": 20},
                {"fault": "rate_limited", "retry_after_secs": 0.01},
                {"text": "after 429", "no_usage": true, "finish_reason": "length"},
                {"fault": "status", "status": 418, "message": "teapot"}
            ],
            "rules": [
                {"last_contains": "Summarize", "reply": "summary"},
                {"last_matches": "chunk \\d+", "model": "sub-model", "replies": ["c1", {"fault": "server_error"}]}
            ],
            "otherwise": {"text": "default"}
        }"#,
    )
    .unwrap();
    let server = ScriptedServer::start(script).await;
    let client = server.client();
    assert_eq!(
        client.chat(ChatRequest::user("x")).await.unwrap().text,
        "plain"
    );
    let counted = client.chat(ChatRequest::user("x")).await.unwrap();
    assert_eq!(
        (counted.usage.input_tokens, counted.usage.cached_tokens),
        (10, Some(4))
    );
    let after = client.chat(ChatRequest::user("x")).await.unwrap();
    assert_eq!(after.text, "after 429");
    assert_eq!(after.usage.retries, 1);
    assert!(after.usage.estimated);
    assert_eq!(after.finish_reason, rlm_llm::FinishReason::Length);
    let teapot = client.chat(ChatRequest::user("x")).await.unwrap_err();
    assert!(teapot.to_string().contains("teapot"), "{teapot}");
    assert_eq!(client.chat(sub("Summarize")).await.unwrap().text, "summary");
    assert_eq!(client.chat(sub("chunk 3")).await.unwrap().text, "c1");
    // The rule's scripted 500 is retried; the retry falls through to `otherwise`.
    let retried = client.chat(sub("chunk 4")).await.unwrap();
    assert_eq!(
        (retried.text.as_str(), retried.usage.retries),
        ("default", 1)
    );
    // `models` is enforced.
    let err = client
        .chat(ChatRequest::user("x").with_model("gpt-unknown"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::UnknownModel { .. }), "{err}");
}

#[test]
fn invalid_json_scripts_are_clear_errors() {
    let err = |text: &str| Script::from_json(text).unwrap_err().to_string();
    assert!(
        err(r#"{"replies": [{"text": "a", "fault": "hang"}]}"#)
            .contains("exactly one of 'text' or 'fault'")
    );
    assert!(err(r#"{"rules": [{"reply": "a"}]}"#).contains("rules[0] has no condition"));
    assert!(
        err(r#"{"rules": [{"last_matches": "(", "reply": "a"}]}"#)
            .contains("rules[0].last_matches")
    );
    assert!(err(r#"{"replies": [{"fault": "status"}]}"#).contains("needs a 'status'"));
    assert!(err(r#"{"replys": []}"#).contains("unknown field"));
    assert!(
        err(r#"{"rules": [{"last_contains": "a"}]}"#)
            .contains("exactly one of 'reply' or 'replies'")
    );
    let missing =
        Script::from_json_file(std::path::Path::new("/nonexistent/script.json")).unwrap_err();
    assert!(missing.to_string().contains("cannot read"));
}

#[test]
fn a_spawned_server_serves_synchronous_code() {
    let server = ScriptedServer::spawn(
        Script::new()
            .reply(Reply::text("slow").with_latency(Duration::from_millis(10)))
            .reply(Fault::ServerError)
            .reply("fast"),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = server.client();
    runtime.block_on(async {
        assert_eq!(
            client.chat(ChatRequest::user("a")).await.unwrap().text,
            "slow"
        );
        let b = client.chat(ChatRequest::user("b")).await.unwrap();
        assert_eq!((b.text.as_str(), b.usage.retries), ("fast", 1));
    });
    let outcomes: Vec<String> = server.requests().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, ["text", "server_error", "text"]);
}
