//! Streamed replies: OpenAI-compatible servers, Azure and Anthropic send
//! server-sent events when a request has a token sink; the pieces reach the sink and add up to the
//! reply; usage comes from the stream; retries start a new attempt.

use std::sync::{Arc, Mutex};

use rlm_llm::testing::{Fault, Reply, Script, ScriptedServer};
use rlm_llm::{ChatRequest, LlmClient, LlmConfig, ProviderKind, TokenSink};

type Pieces = Arc<Mutex<Vec<(u32, String)>>>;

fn sink() -> (TokenSink, Pieces) {
    let pieces = Pieces::default();
    let log = pieces.clone();
    let sink = TokenSink::new(move |d| log.lock().unwrap().push((d.attempt, d.text.to_string())));
    (sink, pieces)
}

fn text_of(pieces: &Pieces) -> String {
    pieces
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.1.as_str())
        .collect()
}

#[tokio::test]
async fn a_request_with_a_sink_streams_its_reply_piece_by_piece() {
    let server = ScriptedServer::start(
        Script::new()
            .otherwise(Reply::text("The secret code is 4721.").with_cached_usage(50, 6, 20)),
    )
    .await;
    for (i, kind) in [ProviderKind::OpenAi, ProviderKind::Azure]
        .into_iter()
        .enumerate()
    {
        let client = LlmClient::from_config(server.config(kind)).unwrap();
        let (tokens, pieces) = sink();
        let reply = client
            .chat(ChatRequest::user("What is the code?").streaming_to(tokens))
            .await
            .unwrap();
        assert_eq!(reply.text, "The secret code is 4721.");
        assert_eq!(text_of(&pieces), reply.text);
        assert!(pieces.lock().unwrap().len() >= 5, "{kind:?} {pieces:?}");
        assert!(pieces.lock().unwrap().iter().all(|p| p.0 == 1));
        // Usage came with the stream's last chunk.
        assert_eq!(reply.usage.input_tokens, 50);
        assert_eq!(reply.usage.output_tokens, 6);
        assert_eq!(reply.usage.cached_tokens, Some(20));
        assert!(!reply.usage.estimated);
        let body = &server.requests()[i].body;
        assert_eq!(body["stream"], true);
        if kind != ProviderKind::Anthropic {
            assert_eq!(body["stream_options"]["include_usage"], true);
        }
    }
}

#[tokio::test]
async fn without_a_sink_or_with_streaming_off_replies_arrive_whole() {
    let server = ScriptedServer::start(Script::new().otherwise(Reply::text("whole answer"))).await;
    let client = LlmClient::from_config(server.config(ProviderKind::OpenAi)).unwrap();
    let reply = client.chat(ChatRequest::user("hi")).await.unwrap();
    assert_eq!(reply.text, "whole answer");
    assert!(server.requests()[0].body.get("stream").is_none());

    let mut config = server.config(ProviderKind::OpenAi);
    config.stream = false;
    let client = LlmClient::from_config(config).unwrap();
    let (tokens, pieces) = sink();
    let reply = client
        .chat(ChatRequest::user("hi").streaming_to(tokens))
        .await
        .unwrap();
    assert_eq!(reply.text, "whole answer");
    assert!(server.requests()[1].body.get("stream").is_none());
    assert!(pieces.lock().unwrap().is_empty(), "nothing streamed");

    // Streaming off holds for Anthropic too.
    let mut config = server.config(ProviderKind::Anthropic);
    config.stream = false;
    let client = LlmClient::from_config(config).unwrap();
    let (tokens, pieces) = sink();
    client
        .chat(ChatRequest::user("hi").streaming_to(tokens))
        .await
        .unwrap();
    assert!(server.requests()[2].body.get("stream").is_none());
    assert!(pieces.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_retried_stream_starts_a_new_attempt() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::TruncatedBody)
            .reply(Reply::text("second try")),
    )
    .await;
    let client = LlmClient::from_config(server.config(ProviderKind::OpenAi)).unwrap();
    let (tokens, pieces) = sink();
    let reply = client
        .chat(ChatRequest::user("hi").streaming_to(tokens))
        .await
        .unwrap();
    assert_eq!(reply.text, "second try");
    assert_eq!(reply.usage.retries, 1);
    let pieces = pieces.lock().unwrap().clone();
    let second: String = pieces
        .iter()
        .filter(|p| p.0 == 2)
        .map(|p| p.1.as_str())
        .collect();
    assert_eq!(second, "second try", "{pieces:?}");
}

#[tokio::test]
async fn a_retry_is_announced_before_its_backoff_with_its_number_and_the_most_attempts() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::ServerError)
            .reply(Reply::text("second try")),
    )
    .await;
    let client = LlmClient::from_config(server.config(ProviderKind::OpenAi)).unwrap();
    let retries: Arc<Mutex<Vec<(u32, u32, String)>>> = Arc::default();
    let log = retries.clone();
    let (tokens, _) = sink();
    let tokens = tokens.on_retry(move |r| {
        log.lock()
            .unwrap()
            .push((r.attempt, r.of, r.reason.to_string()))
    });
    let reply = client
        .chat(ChatRequest::user("hi").streaming_to(tokens))
        .await
        .unwrap();
    assert_eq!(reply.text, "second try");
    let retries = retries.lock().unwrap().clone();
    assert_eq!(retries.len(), 1, "{retries:?}");
    let max = server.config(ProviderKind::OpenAi).retry.max_retries + 1;
    assert_eq!((retries[0].0, retries[0].1), (2, max), "{retries:?}");
    assert!(!retries[0].2.is_empty());
}

#[test]
fn rlm_stream_is_on_or_off() {
    let env = |v: &'static str| move |name: &str| (name == "RLM_STREAM").then(|| v.to_string());
    let flags = rlm_llm::ConfigOverrides {
        provider: Some(ProviderKind::OpenAi),
        api_key: Some(rlm_llm::ApiKey::new("k")),
        ..Default::default()
    };
    assert!(
        LlmConfig::from_toml_str("", &flags, |_| None)
            .unwrap()
            .stream
    );
    assert!(
        !LlmConfig::from_toml_str("", &flags, env("off"))
            .unwrap()
            .stream
    );
    assert!(
        LlmConfig::from_toml_str("[llm]\nstream = false\n", &flags, env("on"))
            .unwrap()
            .stream
    );
    assert!(
        !LlmConfig::from_toml_str("[llm]\nstream = false\n", &flags, |_| None)
            .unwrap()
            .stream
    );
    let err = LlmConfig::from_toml_str("", &flags, env("maybe")).unwrap_err();
    assert!(
        err.to_string()
            .contains("RLM_STREAM=\"maybe\" is not a boolean; use true or false"),
        "{err}"
    );
}
