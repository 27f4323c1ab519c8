//! Record/replay: a recorded run replays without the network, keys never
//! reach the cassette, misses name the first difference.

use rlm_llm::testing::{Script, ScriptedServer};
use rlm_llm::{ChatRequest, LlmClient, LlmError, Message, ModelRole, ProviderKind};

#[tokio::test]
async fn a_recorded_run_replays_offline_and_never_stores_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("run.jsonl");
    let secret = "sk-very-secret-key-123";

    let server = ScriptedServer::start(
        Script::new()
            .require_api_key(secret)
            .reply("first answer")
            .reply("second answer")
            .reply("third answer"),
    )
    .await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.api_key = Some(rlm_llm::ApiKey::new(secret));
    config.record = Some(cassette.clone());
    let recorder = LlmClient::from_config(config.clone()).unwrap();
    let q1 = ChatRequest::user("question one").with_system("sys");
    let q2 = ChatRequest::new(ModelRole::Sub, vec![Message::user("question two")]);
    let a1 = recorder.chat(q1.clone()).await.unwrap();
    let a2 = recorder.chat(q2.clone()).await.unwrap();
    // The same request twice gets its recorded answers in order.
    let a3 = recorder.chat(q1.clone()).await.unwrap();
    assert_eq!(a3.text, "third answer");
    drop(server);

    let text = std::fs::read_to_string(&cassette).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(!text.contains(secret), "the key leaked into the cassette");
    assert!(!text.to_ascii_lowercase().contains("authorization"));
    assert!(text.contains("question one"));

    // Replay: no server, no key.
    config.record = None;
    config.replay = Some(cassette.clone());
    config.api_key = None;
    config.base_url = "http://127.0.0.1:9/v1".into();
    let replayer = LlmClient::from_config(config).unwrap();
    let r1 = replayer.chat(q1.clone()).await.unwrap();
    let r2 = replayer.chat(q2).await.unwrap();
    let r3 = replayer.chat(q1.clone()).await.unwrap();
    assert_eq!(r1.text, a1.text);
    assert_eq!(r2.text, a2.text);
    assert_eq!(r3.text, "third answer");
    // Usage is reproduced too.
    assert_eq!(r1.usage.input_tokens, a1.usage.input_tokens);
    assert_eq!(r2.usage.model, "sub-model");
    // Past the recorded count, the last answer repeats.
    assert_eq!(replayer.chat(q1).await.unwrap().text, "third answer");
}

#[tokio::test]
async fn a_replay_miss_names_the_first_difference_from_the_closest_request() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("run.jsonl");
    let server = ScriptedServer::start(Script::new().otherwise("ok")).await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.record = Some(cassette.clone());
    let recorder = LlmClient::from_config(config.clone()).unwrap();
    recorder
        .chat(ChatRequest::user("Summarize chunk 17 of the lease agreement").with_system("S"))
        .await
        .unwrap();
    recorder
        .chat(ChatRequest::user("completely different").with_system("S"))
        .await
        .unwrap();

    config.record = None;
    config.replay = Some(cassette.clone());
    let replayer = LlmClient::from_config(config).unwrap();
    let err = replayer
        .chat(ChatRequest::user("Summarize chunk 18 of the lease agreement").with_system("S"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::ReplayMiss { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("messages[1].content at character 17"), "{msg}");
    assert!(msg.contains("chunk 17"), "{msg}");
    assert!(msg.contains("chunk 18"), "{msg}");

    let err = replayer
        .chat(
            ChatRequest::user("completely different")
                .with_system("S")
                .with_temperature(1.0),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("temperature: recorded None, requested Some(1.0)"),
        "{err}"
    );

    let err = replayer
        .chat(
            ChatRequest::user("completely different")
                .with_system("S")
                .with_model("m2"),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("model: recorded 'root-model', requested 'm2'"),
        "{err}"
    );
    // A miss is not retried and costs nothing.
    assert_eq!(replayer.usage().total.calls, 0);
}

#[tokio::test]
async fn bad_cassettes_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(Script::new()).await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.replay = Some(dir.path().join("missing.jsonl"));
    let err = LlmClient::from_config(config.clone()).unwrap_err();
    assert!(err.to_string().contains("cannot open"), "{err}");

    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, "{\"key\": 1}\n").unwrap();
    config.replay = Some(broken);
    let err = LlmClient::from_config(config.clone()).unwrap_err();
    assert!(
        err.to_string().contains("line 1: not a cassette entry"),
        "{err}"
    );

    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    config.replay = Some(empty);
    let err = LlmClient::from_config(config)
        .unwrap()
        .chat(ChatRequest::user("x"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("the cassette is empty"), "{err}");
}

#[tokio::test]
async fn recording_works_for_every_provider() {
    for kind in [ProviderKind::Azure, ProviderKind::Anthropic] {
        let dir = tempfile::tempdir().unwrap();
        let cassette = dir.path().join("c.jsonl");
        let server = ScriptedServer::start(Script::new().otherwise("hello")).await;
        let mut config = server.config(kind);
        config.record = Some(cassette.clone());
        LlmClient::from_config(config.clone())
            .unwrap()
            .chat(ChatRequest::user("hi"))
            .await
            .unwrap();
        let line = std::fs::read_to_string(&cassette).unwrap();
        let entry: rlm_llm::CassetteEntry = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(entry.provider, kind.as_str());
        assert_eq!(entry.reply.text, "hello");
        assert_eq!(entry.key, rlm_llm::request_hash(&entry.request));
    }
}
