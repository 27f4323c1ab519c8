//! Warming the model up: the root's first system message, decoded before
//! any question, is the one every question then starts with.

use crate::common;

use common::*;
use rlm_engine::{EngineError, TurnFormat};
use rlm_llm::testing::{Fault, Reply, Script, ScriptedServer};

/// Under either turn protocol, the warm-up request is the first system
/// message of the run that follows, then a one-token reply: a model that
/// keeps that prefix starts the question warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_warm_up_decodes_the_first_system_message_of_every_question() {
    for turn_format in [TurnFormat::Structured, TurnFormat::Text] {
        let ts = needle_store();
        let server = ScriptedServer::start(Script::new().on_sequence(
            root(),
            [
                Reply::text(".").with_cached_usage(2_400, 1, 2_000),
                Reply::text("FINAL(The secret code is 4721.)"),
            ],
        ))
        .await;
        let cfg = rlm_engine::EngineConfig {
            turn_format,
            ..config()
        };
        let engine = engine(&server, cfg).await;
        let warm = engine.warm_up().await.unwrap();
        assert_eq!((warm.prompt_tokens, warm.kept_tokens), (2_400, 2_000));
        let (answer, _) = ask(&engine, &ts, "What is the code?").await;
        assert!(answer.answer.contains("4721"), "{}", answer.answer);
        let reqs = server.requests();
        let (warm_up, first_turn) = (&reqs[0], &reqs[1]);
        assert_eq!(warm_up.messages.len(), 2, "{turn_format:?}");
        assert_eq!(
            warm_up.messages[0], first_turn.messages[0],
            "{turn_format:?}: the same first system message"
        );
        assert!(first_turn.messages.len() > 2);
        assert_eq!(warm_up.body["max_tokens"], 1, "{turn_format:?}");
        assert!(!warm_up.carries_schema());
    }
}

/// A model that cannot be reached: the warm-up says why, nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_warm_up_the_model_refuses_is_an_error_that_says_why() {
    let server = ScriptedServer::start(Script::new().on(root(), Fault::Unauthorized)).await;
    let engine = engine(&server, config()).await;
    let err = engine.warm_up().await.unwrap_err();
    assert!(matches!(err, EngineError::ModelUnavailable(_)), "{err:?}");
    assert!(err.to_string().to_lowercase().contains("key"), "{err}");
}
