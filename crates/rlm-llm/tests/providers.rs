//! Each wire protocol against the scripted server: what goes out, what comes
//! back, and how roles and overrides resolve.

use rlm_llm::testing::{Fault, Reply, Script, ScriptedServer, TEST_API_KEY, WireApi};
use rlm_llm::{ChatRequest, FinishReason, LlmClient, LlmError, Message, ModelRole, ProviderKind};

const ALL_PROVIDERS: [ProviderKind; 3] = [
    ProviderKind::OpenAi,
    ProviderKind::Azure,
    ProviderKind::Anthropic,
];

fn client(server: &ScriptedServer, kind: ProviderKind) -> LlmClient {
    LlmClient::from_config(server.config(kind)).unwrap()
}

/// The error each protocol's client gets for one call to `script`, and the
/// number of requests the server saw.
async fn error_per_protocol(script: Script) -> (Vec<(ProviderKind, LlmError)>, usize) {
    let server = ScriptedServer::start(script).await;
    let mut errors = Vec::new();
    for kind in ALL_PROVIDERS {
        let err = client(&server, kind)
            .chat(ChatRequest::user("hi"))
            .await
            .unwrap_err();
        errors.push((kind, err));
    }
    (errors, server.request_count())
}

#[tokio::test]
async fn openai_sends_bearer_model_messages_and_parses_reply_and_usage() {
    let server = ScriptedServer::start(
        Script::new()
            .require_api_key(TEST_API_KEY)
            .reply(Reply::text("hello there").with_cached_usage(120, 7, 100)),
    )
    .await;
    let client = client(&server, ProviderKind::OpenAi);
    let answer = client
        .chat(
            ChatRequest::user("hi")
                .with_system("be brief")
                .with_temperature(0.2)
                .with_max_output_tokens(50)
                .with_stop("END"),
        )
        .await
        .unwrap();
    assert_eq!(answer.text, "hello there");
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert_eq!(answer.usage.input_tokens, 120);
    assert_eq!(answer.usage.output_tokens, 7);
    assert_eq!(answer.usage.cached_tokens, Some(100));
    assert!(!answer.usage.estimated);
    assert_eq!(answer.usage.retries, 0);
    assert_eq!(answer.usage.model, "root-model");

    let req = &server.requests()[0];
    assert_eq!(req.api, WireApi::OpenAi);
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer test-key"));
    assert_eq!(req.model, "root-model");
    assert_eq!(
        req.messages,
        vec![Message::system("be brief"), Message::user("hi")]
    );
    assert_eq!(req.body["temperature"], serde_json::json!(0.2f32));
    // Compatible servers get `max_tokens` (only api.openai.com gets
    // `max_completion_tokens`).
    assert_eq!(req.body["max_tokens"], 50);
    assert_eq!(req.body["stop"], serde_json::json!(["END"]));
}

#[tokio::test]
async fn azure_puts_deployment_and_api_version_in_the_path_and_key_in_api_key_header() {
    let server = ScriptedServer::start(
        Script::new()
            .require_api_key(TEST_API_KEY)
            .reply("from azure"),
    )
    .await;
    let client = client(&server, ProviderKind::Azure);
    let answer = client
        .chat(ChatRequest::user("hi").with_max_output_tokens(9))
        .await
        .unwrap();
    assert_eq!(answer.text, "from azure");
    let req = &server.requests()[0];
    assert_eq!(req.api, WireApi::Azure);
    assert_eq!(
        req.path,
        "/openai/deployments/root-model/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(req.header("api-key"), Some(TEST_API_KEY));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.body["max_completion_tokens"], 9);
    assert!(req.body.get("model").is_none());
}

#[tokio::test]
async fn anthropic_lifts_system_to_top_level_and_sends_version_and_max_tokens() {
    let server = ScriptedServer::start(
        Script::new().require_api_key(TEST_API_KEY).reply(
            Reply::text("bonjour")
                .with_cached_usage(50, 3, 20)
                .with_finish_reason("length"),
        ),
    )
    .await;
    let client = client(&server, ProviderKind::Anthropic);
    let answer = client
        .chat(ChatRequest::new(
            ModelRole::Sub,
            vec![
                Message::system("you translate"),
                Message::user("hello"),
                Message::assistant("bonjour"),
                Message::user("again"),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(answer.text, "bonjour");
    assert_eq!(answer.finish_reason, FinishReason::Length);
    assert_eq!(answer.usage.input_tokens, 50);
    assert_eq!(answer.usage.cached_tokens, Some(20));
    assert_eq!(answer.usage.model, "sub-model");
    assert_eq!(answer.usage.depth, 1);

    let req = &server.requests()[0];
    assert_eq!(req.api, WireApi::Anthropic);
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some(TEST_API_KEY));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.body["system"], "you translate");
    assert_eq!(req.body["max_tokens"], 4096);
    assert_eq!(req.body["messages"].as_array().unwrap().len(), 3);
    assert_eq!(req.body["messages"][0]["role"], "user");
}

#[tokio::test]
async fn roles_pick_their_model_and_sampling_and_explicit_model_wins() {
    let server = ScriptedServer::start(Script::new().otherwise("ok")).await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.root.temperature = Some(0.0);
    config.sub.temperature = Some(0.7);
    config.sub.max_output_tokens = Some(256);
    let client = LlmClient::from_config(config).unwrap();

    client.chat(ChatRequest::user("root call")).await.unwrap();
    client
        .chat(ChatRequest::new(
            ModelRole::Sub,
            vec![Message::user("sub call")],
        ))
        .await
        .unwrap();
    client
        .chat(
            ChatRequest::new(ModelRole::Sub, vec![Message::user("explicit")])
                .with_model("special-model")
                .with_max_output_tokens(5),
        )
        .await
        .unwrap();

    let reqs = server.requests();
    assert_eq!(reqs[0].model, "root-model");
    assert_eq!(reqs[0].body["temperature"], 0.0);
    assert!(reqs[0].body.get("max_tokens").is_none());
    assert_eq!(reqs[1].model, "sub-model");
    assert_eq!(reqs[1].body["temperature"], serde_json::json!(0.7f32));
    assert_eq!(reqs[1].body["max_tokens"], 256);
    assert_eq!(reqs[2].model, "special-model");
    assert_eq!(reqs[2].body["max_tokens"], 5);
}

#[tokio::test]
async fn list_models_reads_the_models_endpoint_for_openai_and_anthropic() {
    let server = ScriptedServer::start(Script::new().models(["a", "b"])).await;
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let models = client(&server, kind).list_models().await.unwrap();
        assert_eq!(models, vec!["a".to_string(), "b".to_string()]);
    }
    let err = client(&server, ProviderKind::Azure)
        .list_models()
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Unsupported(_)), "{err}");
}

#[tokio::test]
async fn wrong_key_is_unauthorized_in_every_protocol() {
    let (errors, requests) =
        error_per_protocol(Script::new().require_api_key("other").otherwise("x")).await;
    for (kind, err) in errors {
        assert!(
            matches!(err, LlmError::Unauthorized { status: 401, .. }),
            "{kind}: {err}"
        );
        assert!(err.to_string().contains("RLM_API_KEY"), "{err}");
    }
    assert_eq!(requests, 3, "no retries on 401");
}

#[tokio::test]
async fn unknown_model_is_named_in_every_protocol() {
    let (errors, requests) =
        error_per_protocol(Script::new().models(["only-this"]).otherwise("x")).await;
    for (kind, err) in errors {
        match &err {
            LlmError::UnknownModel { model, .. } => assert_eq!(model, "root-model"),
            other => panic!("{kind}: expected UnknownModel, got {other}"),
        }
    }
    assert_eq!(requests, 3, "no retries on unknown models");
}

#[tokio::test]
async fn compatible_servers_unknown_model_messages_are_recognized() {
    // vLLM and Ollama phrase it their own way, with 404 or 400.
    for (status, message) in [
        (404, "The model `x` does not exist."),
        (404, "model \"x\" not found, try pulling it first"),
        (400, "Model x not found"),
    ] {
        let (errors, _) = error_per_protocol(Script::new().otherwise(Fault::Status {
            status,
            message: message.into(),
        }))
        .await;
        for (kind, err) in errors {
            assert!(
                matches!(err, LlmError::UnknownModel { .. }),
                "{kind} {status} {message}: {err}"
            );
        }
    }
}

#[tokio::test]
async fn a_wrong_path_is_not_found_with_a_hint_about_the_base_url() {
    let server = ScriptedServer::start(Script::new().otherwise("x")).await;
    let mut config = server.config(ProviderKind::OpenAi);
    // Forgot the /v1 suffix.
    config.base_url = server.url();
    let err = LlmClient::from_config(config)
        .unwrap()
        .chat(ChatRequest::user("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("RLM_BASE_URL"), "{err}");
}
