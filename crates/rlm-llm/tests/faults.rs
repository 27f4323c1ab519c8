//! Every injected fault, retries, timeouts, cancellation, the concurrency
//! limit and the context-window pre-check.

use std::time::Duration;

use rlm_llm::testing::{Fault, Reply, Script, ScriptedServer};
use rlm_llm::{ChatRequest, ConfigOverrides, LlmClient, LlmConfig, LlmError, ProviderKind};

fn client_with(server: &ScriptedServer, edit: impl FnOnce(&mut LlmConfig)) -> LlmClient {
    let mut config = server.config(ProviderKind::OpenAi);
    edit(&mut config);
    LlmClient::from_config(config).unwrap()
}

async fn retried_then_ok(fault: Fault) {
    let server = ScriptedServer::start(Script::new().reply(fault.clone()).reply("recovered")).await;
    let answer = server
        .client()
        .chat(ChatRequest::user("hi"))
        .await
        .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
    assert_eq!(answer.text, "recovered", "{fault:?}");
    assert_eq!(answer.usage.retries, 1, "{fault:?}");
    assert_eq!(server.request_count(), 2, "{fault:?}");
}

#[tokio::test]
async fn retryable_faults_are_retried_until_success() {
    retried_then_ok(Fault::RateLimited {
        retry_after_secs: None,
    })
    .await;
    retried_then_ok(Fault::ServerError).await;
    retried_then_ok(Fault::ServiceUnavailable).await;
    retried_then_ok(Fault::DropConnection).await;
    retried_then_ok(Fault::TruncatedBody).await;
    retried_then_ok(Fault::Status {
        status: 502,
        message: "bad gateway".into(),
    })
    .await;
    // Anthropic's "overloaded".
    retried_then_ok(Fault::Status {
        status: 529,
        message: "overloaded".into(),
    })
    .await;
}

#[tokio::test]
async fn retry_after_is_honored() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::RateLimited {
                retry_after_secs: Some(1.0),
            })
            .reply("after waiting"),
    )
    .await;
    let answer = server.client().chat(ChatRequest::user("hi")).await.unwrap();
    assert_eq!(answer.text, "after waiting");
    let reqs = server.requests();
    let waited = reqs[1].received_at - reqs[0].received_at;
    // The test config's own backoff is at most 50 ms; only Retry-After explains a second.
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
    assert_eq!(reqs[0].outcome, "rate_limited");
}

#[tokio::test]
async fn retry_after_ms_is_honored() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::RateLimited {
                retry_after_secs: Some(0.3),
            })
            .reply("ok"),
    )
    .await;
    let client = client_with(&server, |c| {
        c.retry.initial_backoff = Duration::from_millis(1);
        c.retry.max_backoff = Duration::from_millis(1);
    });
    client.chat(ChatRequest::user("hi")).await.unwrap();
    let reqs = server.requests();
    assert!(reqs[1].received_at - reqs[0].received_at >= Duration::from_millis(290));
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_fails_at_once_saying_so() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::RateLimited {
                retry_after_secs: Some(600.0),
            })
            .reply("never"),
    )
    .await;
    let err = server
        .client()
        .chat(ChatRequest::user("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::RateLimited { .. }), "{err}");
    assert!(err.to_string().contains("retry after 600s"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn attempts_are_bounded_and_the_last_error_is_reported() {
    let server = ScriptedServer::start(Script::new().otherwise(Fault::ServiceUnavailable)).await;
    let client = client_with(&server, |c| c.retry.max_retries = 2);
    let err = client.chat(ChatRequest::user("hi")).await.unwrap_err();
    match &err {
        LlmError::RetriesExhausted { attempts, last } => {
            assert_eq!(*attempts, 3);
            assert!(
                matches!(**last, LlmError::Server { status: 503, .. }),
                "{last}"
            );
        }
        other => panic!("expected RetriesExhausted, got {other}"),
    }
    assert!(
        err.to_string().starts_with("gave up after 3 attempts"),
        "{err}"
    );
    assert_eq!(server.request_count(), 3);
    assert_eq!(client.usage().total.calls, 0, "failed calls are not billed");
}

#[tokio::test]
async fn a_final_client_error_after_retries_is_reported_as_itself() {
    let server = ScriptedServer::start(Script::new().reply(Fault::ServerError).reply(
        Fault::Status {
            status: 400,
            message: "context too long".into(),
        },
    ))
    .await;
    let err = server
        .client()
        .chat(ChatRequest::user("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::BadRequest { status: 400, .. }),
        "{err}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for (fault, check) in [
        (
            Fault::Status {
                status: 400,
                message: "bad field".into(),
            },
            (|e: &LlmError| matches!(e, LlmError::BadRequest { status: 400, .. }))
                as fn(&LlmError) -> bool,
        ),
        (Fault::Unauthorized, |e| {
            matches!(e, LlmError::Unauthorized { status: 401, .. })
        }),
        (Fault::UnknownModel, |e| {
            matches!(e, LlmError::UnknownModel { .. })
        }),
        (
            Fault::Status {
                status: 404,
                message: "no such thing".into(),
            },
            |e| matches!(e, LlmError::NotFound { .. }),
        ),
    ] {
        let server = ScriptedServer::start(Script::new().reply(fault.clone()).reply("x")).await;
        let err = server
            .client()
            .chat(ChatRequest::user("hi"))
            .await
            .unwrap_err();
        assert!(check(&err), "{fault:?}: {err}");
        assert_eq!(server.request_count(), 1, "{fault:?} must not be retried");
    }
}

#[tokio::test]
async fn malformed_json_and_empty_choices_are_clear_errors() {
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let server = ScriptedServer::start(
            Script::new()
                .reply(Fault::MalformedJson)
                .reply(Fault::EmptyChoices),
        )
        .await;
        let client = LlmClient::from_config(server.config(kind)).unwrap();
        let err = client.chat(ChatRequest::user("hi")).await.unwrap_err();
        assert!(
            matches!(err, LlmError::MalformedResponse { .. }),
            "{kind}: {err}"
        );
        assert!(err.to_string().contains("this is not json"), "{err}");
        let err = client.chat(ChatRequest::user("hi")).await.unwrap_err();
        assert!(matches!(err, LlmError::NoChoices { .. }), "{kind}: {err}");
        assert!(err.to_string().contains("no choices"), "{err}");
    }
}

#[tokio::test]
async fn a_truncated_body_that_never_recovers_is_reported_as_truncated() {
    let server = ScriptedServer::start(Script::new().otherwise(Fault::TruncatedBody)).await;
    let client = client_with(&server, |c| c.retry.max_retries = 1);
    let err = client.chat(ChatRequest::user("hi")).await.unwrap_err();
    assert!(
        matches!(err.root(), LlmError::TruncatedResponse { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_dropped_connection_that_never_recovers_is_reported() {
    let server = ScriptedServer::start(Script::new().otherwise(Fault::DropConnection)).await;
    let client = client_with(&server, |c| c.retry.max_retries = 1);
    let err = client.chat(ChatRequest::user("hi")).await.unwrap_err();
    assert!(
        matches!(err.root(), LlmError::ConnectionDropped { .. }),
        "{err}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_hanging_server_times_out_per_attempt_and_is_retried() {
    let server =
        ScriptedServer::start(Script::new().reply(Fault::Hang).reply("late but fine")).await;
    let client = client_with(&server, |c| c.timeout = Duration::from_millis(300));
    let answer = client.chat(ChatRequest::user("hi")).await.unwrap();
    assert_eq!(answer.text, "late but fine");
    assert_eq!(answer.usage.retries, 1);

    let server = ScriptedServer::start(Script::new().otherwise(Fault::Hang)).await;
    let client = client_with(&server, |c| {
        c.timeout = Duration::from_millis(200);
        c.retry.max_retries = 0;
    });
    let err = client.chat(ChatRequest::user("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("RLM_TIMEOUT"), "{err}");
}

#[tokio::test]
async fn an_unreachable_base_url_is_named() {
    // Bind then drop a listener: the port is (almost certainly) closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let overrides = ConfigOverrides {
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        api_key: Some(rlm_llm::ApiKey::new("k")),
        max_retries: Some(1),
        ..Default::default()
    };
    let mut config = LlmConfig::from_toml_str("", &overrides, |_| None).unwrap();
    config.retry.initial_backoff = Duration::from_millis(1);
    let err = LlmClient::from_config(config)
        .unwrap()
        .chat(ChatRequest::user("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err.root(), LlmError::Unreachable { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(msg.contains("RLM_BASE_URL"), "{msg}");
}

#[tokio::test]
async fn a_missing_api_key_is_refused_before_any_request() {
    // OpenAI named, no key (with nothing named at all, a build with the
    // embedded model would choose it instead).
    let config = LlmConfig::from_toml_str("", &ConfigOverrides::default(), |name| {
        (name == "RLM_PROVIDER").then(|| "openai".to_string())
    })
    .unwrap();
    let err = LlmClient::from_config(config).unwrap_err();
    assert!(matches!(err, LlmError::MissingApiKey { .. }), "{err}");
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
}

#[tokio::test]
async fn the_concurrency_limit_caps_requests_in_flight() {
    let server = ScriptedServer::start(
        Script::new()
            .latency(Duration::from_millis(30))
            .otherwise("ok"),
    )
    .await;
    let client = client_with(&server, |c| c.max_concurrent = 4);
    let calls = (0..40).map(|i| {
        let client = client.clone();
        tokio::spawn(async move { client.chat(ChatRequest::user(format!("call {i}"))).await })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await.unwrap().unwrap();
    }
    assert_eq!(server.request_count(), 40);
    let peak = server.peak_concurrency();
    assert!((2..=4).contains(&peak), "peak {peak}");
    // Parallel calls really overlapped in time at the server.
    let reqs = server.requests();
    let overlapping = reqs.iter().any(|a| {
        reqs.iter().any(|b| {
            a.index != b.index
                && a.received_at < b.received_at
                && b.received_at < a.answered_at.unwrap()
        })
    });
    assert!(overlapping);
    assert_eq!(client.usage().total.calls, 40);
}

#[tokio::test]
async fn dropping_a_call_cancels_it_and_frees_its_slot() {
    let server = ScriptedServer::start(Script::new().reply(Fault::Hang).reply("second")).await;
    let client = client_with(&server, |c| c.max_concurrent = 1);
    let first = tokio::time::timeout(
        Duration::from_millis(200),
        client.chat(ChatRequest::user("first")),
    )
    .await;
    assert!(first.is_err(), "the hanging call was cut off by the caller");
    // The only slot is free again: the next call goes through at once.
    let second = tokio::time::timeout(
        Duration::from_secs(5),
        client.chat(ChatRequest::user("second")),
    )
    .await
    .expect("slot was released")
    .unwrap();
    assert_eq!(second.text, "second");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn prompts_over_the_context_window_are_refused_before_sending() {
    let server = ScriptedServer::start(Script::new().otherwise("ok")).await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.context_windows =
        rlm_llm::ContextWindows::with_overrides([("root-model".to_string(), 100)].into());
    let client = LlmClient::from_config(config).unwrap();

    let long = "word ".repeat(500);
    let err = client.chat(ChatRequest::user(long)).await.unwrap_err();
    match &err {
        LlmError::ContextWindowExceeded {
            model,
            estimated_tokens,
            window,
        } => {
            assert_eq!(model, "root-model");
            assert_eq!(*window, 100);
            assert!(*estimated_tokens > 400, "{estimated_tokens}");
        }
        other => panic!("expected ContextWindowExceeded, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("exceeds the 100-token context window of root-model by"),
        "{msg}"
    );
    assert_eq!(server.request_count(), 0);

    // Short prompts and models without a known window pass.
    client.chat(ChatRequest::user("short")).await.unwrap();
    client
        .chat(ChatRequest::user("word ".repeat(500)).with_model("unlisted"))
        .await
        .unwrap();
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn scripted_latency_is_applied() {
    let server =
        ScriptedServer::start(Script::new().reply(Reply::text("slow").with_latency_ms(150))).await;
    let answer = server.client().chat(ChatRequest::user("hi")).await.unwrap();
    assert!(answer.usage.latency >= Duration::from_millis(150));
    let req = &server.requests()[0];
    assert!(req.answered_at.unwrap() - req.received_at >= Duration::from_millis(150));
}
