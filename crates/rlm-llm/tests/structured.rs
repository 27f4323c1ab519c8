//! Structured replies against the scripted server: what each protocol is
//! sent with a schema, how the reply comes back, the fallback when an
//! endpoint refuses schemas, and the schema in record/replay.

use std::sync::{Arc, Mutex};

use rlm_llm::testing::{Fault, Script, ScriptedServer, WireApi};
use rlm_llm::{
    ChatRequest, FinishReason, LlmClient, LlmError, ModelRole, ProviderKind, ReplySchema,
    SchemaUse, TokenSink, request_hash, schema,
};
use serde_json::{Value, json};

/// The engine's turn: a thought, then code, an answer or a not-found note.
fn turn_schema() -> Value {
    json!({"type":"object","properties":{
      "thought":{"type":"string","maxLength":300},
      "step":{"anyOf":[
        {"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false},
        {"type":"object","properties":{"answer":{"type":"array","minItems":1,"items":{"type":"object","properties":{
            "text":{"type":"string","maxLength":600},
            "source":{"anyOf":[{"type":"null"},{"type":"object","properties":{"ref":{"type":"string","enum":["chunk:0a1b2c3d4e5f6a7b-0","doc:3"]},"quote":{"type":"string","maxLength":300}},"required":["ref","quote"],"additionalProperties":false}]}},
          "required":["text","source"],"additionalProperties":false}}},"required":["answer"],"additionalProperties":false},
        {"type":"object","properties":{"not_found":{"type":"string"}},"required":["not_found"],"additionalProperties":false}
      ]}},
     "required":["thought","step"],"additionalProperties":false})
}

fn turn() -> ReplySchema {
    ReplySchema::new("rlm_turn", turn_schema())
}

const TURN_REPLY: &str = r#"{"thought":"Look it up.","step":{"answer":[{"text":"The code is 7141.","source":{"ref":"doc:3","quote":"code 7141"}}]}}"#;

fn client(server: &ScriptedServer, kind: ProviderKind) -> LlmClient {
    LlmClient::from_config(server.config(kind)).unwrap()
}

fn ask() -> ChatRequest {
    ChatRequest::user("What is the code?").with_stop("\nFINAL")
}

type Pieces = Arc<Mutex<Vec<(u32, String)>>>;

fn sink() -> (TokenSink, Pieces) {
    let pieces = Pieces::default();
    let log = pieces.clone();
    let sink = TokenSink::new(move |d| log.lock().unwrap().push((d.attempt, d.text.to_string())));
    (sink, pieces)
}

fn streamed(pieces: &Pieces) -> String {
    pieces
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.1.as_str())
        .collect()
}

#[tokio::test]
async fn openai_compatible_servers_get_the_whole_schema_as_response_format() {
    let server = ScriptedServer::start(Script::new().otherwise(TURN_REPLY)).await;
    let client = client(&server, ProviderKind::OpenAi);
    let reply = client.chat(ask().with_schema(turn())).await.unwrap();
    assert_eq!(reply.text, TURN_REPLY);
    assert_eq!(reply.schema_use, SchemaUse::Constrained);
    schema::parse_reply(&turn_schema(), &reply.text).unwrap();

    let req = &server.requests()[0];
    assert_eq!(req.api, WireApi::OpenAi);
    assert_eq!(
        req.response_format,
        Some(json!({"type": "json_schema", "json_schema": {
            "name": "rlm_turn", "schema": turn_schema(), "strict": true}}))
    );
    assert_eq!(req.tools, None);
    assert!(
        req.body.get("stop").is_none(),
        "a stop sequence would cut the document"
    );

    // A schema strict mode cannot take goes without strict.
    let open = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a"]});
    client
        .chat(ask().with_schema(ReplySchema::new("my schema.v2", open.clone())))
        .await
        .unwrap();
    let format = server.requests()[1].response_format.clone().unwrap();
    assert_eq!(format["json_schema"]["strict"], false);
    assert_eq!(format["json_schema"]["schema"], open);
    assert_eq!(format["json_schema"]["name"], "my_schema_v2");

    // Without a schema nothing changes.
    let plain = client.chat(ask()).await.unwrap();
    assert_eq!(plain.schema_use, SchemaUse::NotAsked);
    let req = &server.requests()[2];
    assert_eq!(req.response_format, None);
    assert_eq!(req.body["stop"], json!(["\nFINAL"]));
}

#[tokio::test]
async fn streamed_chat_completions_carry_the_schema_too() {
    let server = ScriptedServer::start(Script::new().otherwise(TURN_REPLY)).await;
    for (i, kind) in [ProviderKind::OpenAi, ProviderKind::Azure]
        .into_iter()
        .enumerate()
    {
        let mut config = server.config(kind);
        config.stream = true;
        let client = LlmClient::from_config(config).unwrap();
        let (tokens, pieces) = sink();
        let reply = client
            .chat(ask().with_schema(turn()).streaming_to(tokens))
            .await
            .unwrap();
        assert_eq!(reply.text, TURN_REPLY);
        assert_eq!(streamed(&pieces), TURN_REPLY);
        assert_eq!(reply.schema_use, SchemaUse::Constrained);
        let req = &server.requests()[i];
        assert_eq!(req.body["stream"], true);
        assert_eq!(
            req.response_format.as_ref().unwrap()["json_schema"]["strict"],
            true
        );
    }
}

#[tokio::test]
async fn azure_gets_the_strict_copy_without_the_keywords_strict_mode_rejects() {
    let server = ScriptedServer::start(Script::new().otherwise(TURN_REPLY)).await;
    let client = client(&server, ProviderKind::Azure);
    let reply = client.chat(ask().with_schema(turn())).await.unwrap();
    assert_eq!(reply.schema_use, SchemaUse::Constrained);
    let req = &server.requests()[0];
    assert_eq!(req.api, WireApi::Azure);
    let format = req.response_format.clone().unwrap();
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    let sent = &format["json_schema"]["schema"];
    assert_eq!(sent, &schema::strict_copy(&turn_schema()).unwrap());
    assert_eq!(sent["properties"]["thought"], json!({"type": "string"}));
    assert_eq!(sent["required"], json!(["thought", "step"]));

    // Optional properties: no strict copy, so the schema as it is, not strict.
    let optional = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}},
        "additionalProperties": false});
    client
        .chat(ask().with_schema(ReplySchema::new("o", optional.clone())))
        .await
        .unwrap();
    let format = server.requests()[1].response_format.clone().unwrap();
    assert_eq!(format["json_schema"]["strict"], false);
    assert_eq!(format["json_schema"]["schema"], optional);
}

#[tokio::test]
async fn anthropic_gets_a_forced_tool_and_its_input_is_the_reply() {
    let server = ScriptedServer::start(Script::new().otherwise(TURN_REPLY)).await;
    let client = client(&server, ProviderKind::Anthropic);
    let reply = client.chat(ask().with_schema(turn())).await.unwrap();
    let value: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(value, serde_json::from_str::<Value>(TURN_REPLY).unwrap());
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(reply.schema_use, SchemaUse::Constrained);
    schema::parse_reply(&turn_schema(), &reply.text).unwrap();

    let req = &server.requests()[0];
    assert_eq!(req.api, WireApi::Anthropic);
    let tools = req.tools.clone().unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    assert_eq!(tools[0]["name"], "rlm_turn");
    assert!(
        tools[0]["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(tools[0]["input_schema"], turn_schema());
    assert_eq!(
        req.tool_choice,
        Some(json!({"type": "tool", "name": "rlm_turn"}))
    );
    assert_eq!(req.forced_tool(), Some("rlm_turn"));
    assert_eq!(req.response_format, None);
    assert!(req.body.get("stop_sequences").is_none());

    // Without a schema the scripted JSON is plain text, as before.
    let plain = client.chat(ask()).await.unwrap();
    assert_eq!(plain.text, TURN_REPLY);
    assert_eq!(plain.schema_use, SchemaUse::NotAsked);
    assert_eq!(server.requests()[1].tools, None);
}

#[tokio::test]
async fn anthropic_streams_the_tool_input_as_the_reply() {
    let server = ScriptedServer::start(Script::new().otherwise(TURN_REPLY)).await;
    let mut config = server.config(ProviderKind::Anthropic);
    config.stream = true;
    let client = LlmClient::from_config(config).unwrap();
    let (tokens, pieces) = sink();
    let reply = client
        .chat(ask().with_schema(turn()).streaming_to(tokens))
        .await
        .unwrap();
    assert_eq!(server.requests()[0].body["stream"], true);
    assert_eq!(
        serde_json::from_str::<Value>(&reply.text).unwrap(),
        serde_json::from_str::<Value>(TURN_REPLY).unwrap()
    );
    assert_eq!(
        streamed(&pieces),
        reply.text,
        "the pieces add up to the reply"
    );
    assert!(pieces.lock().unwrap().len() > 5, "{pieces:?}");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(reply.schema_use, SchemaUse::Constrained);
    assert!(reply.usage.output_tokens > 0);
}

#[tokio::test]
async fn anthropic_wraps_a_schema_that_is_not_an_object_and_unwraps_the_reply() {
    let list = json!({"type": "array", "items": {"type": "integer"}});
    let server = ScriptedServer::start(Script::new().otherwise(r#"{"value": [3, 1, 4]}"#)).await;
    let mut config = server.config(ProviderKind::Anthropic);
    config.stream = true;
    let client = LlmClient::from_config(config).unwrap();
    let request = ask().with_schema(ReplySchema::new("numbers", list.clone()));

    let reply = client.chat(request.clone()).await.unwrap();
    assert_eq!(reply.text, "[3,1,4]");
    let sent = server.requests()[0].tools.clone().unwrap();
    assert_eq!(
        sent[0]["input_schema"],
        json!({"type": "object", "properties": {"value": list}, "required": ["value"]})
    );

    let (tokens, pieces) = sink();
    let reply = client.chat(request.streaming_to(tokens)).await.unwrap();
    assert_eq!(reply.text, "[3,1,4]");
    assert_eq!(*pieces.lock().unwrap(), vec![(1, "[3,1,4]".to_string())]);

    // The definitions move to the wrapper's root, where `$ref` finds them.
    let referenced = json!({"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}});
    client
        .chat(ask().with_schema(ReplySchema::new("numbers", referenced)))
        .await
        .unwrap();
    let input_schema = server.requests()[2].tools.clone().unwrap()[0]["input_schema"].clone();
    assert_eq!(
        input_schema,
        json!({"type": "object", "required": ["value"], "$defs": {"n": {"type": "integer"}},
               "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/n"}}}})
    );
    schema::check(&input_schema).unwrap();
}

#[tokio::test]
async fn a_server_that_refuses_schemas_is_asked_again_without_and_remembered() {
    for kind in [
        ProviderKind::OpenAi,
        ProviderKind::Azure,
        ProviderKind::Anthropic,
    ] {
        let server = ScriptedServer::start(
            Script::new()
                .reject_schemas()
                .otherwise("Thought: look. The code is 7141."),
        )
        .await;
        let client = client(&server, kind);
        let first = client.chat(ask().with_schema(turn())).await.unwrap();
        assert_eq!(first.text, "Thought: look. The code is 7141.");
        let SchemaUse::Refused { reason } = &first.schema_use else {
            panic!("{kind:?}: {:?}", first.schema_use);
        };
        assert!(reason.starts_with("HTTP 400: "), "{reason}");
        assert!(reason.contains("not supported"), "{reason}");
        assert_eq!(first.usage.retries, 1, "the refusal was an attempt");
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert!(requests[0].carries_schema());
        assert_eq!(requests[0].outcome, "schema_rejected");
        assert!(!requests[1].carries_schema());
        assert_eq!(requests[1].outcome, "text");
        // The plain request keeps its stop sequence.
        let stop = if kind == ProviderKind::Anthropic {
            "stop_sequences"
        } else {
            "stop"
        };
        assert_eq!(requests[1].body[stop], json!(["\nFINAL"]), "{kind:?}");

        // Remembered, by clones too: the next request goes plain at once.
        let second = client
            .clone()
            .chat(ask().with_schema(turn()))
            .await
            .unwrap();
        assert_eq!(
            second.schema_use,
            SchemaUse::Refused {
                reason: format!("refused earlier: {reason}")
            }
        );
        assert_eq!(second.usage.retries, 0);
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "{kind:?}: no second 400");
        assert!(!requests[2].carries_schema());
        assert_eq!(requests[2].outcome, "text");

        // Per model: the sub model has not refused yet.
        let sub = ChatRequest::new(ModelRole::Sub, ask().messages).with_schema(turn());
        assert!(
            matches!(client.chat(sub).await.unwrap().schema_use, SchemaUse::Refused { ref reason } if !reason.starts_with("refused earlier"))
        );
        assert_eq!(server.request_count(), 5);
    }
}

#[tokio::test]
async fn a_streamed_fallback_starts_a_new_attempt() {
    let server =
        ScriptedServer::start(Script::new().reject_schemas().otherwise("plain words")).await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.stream = true;
    let client = LlmClient::from_config(config).unwrap();
    let (tokens, pieces) = sink();
    let reply = client
        .chat(ask().with_schema(turn()).streaming_to(tokens))
        .await
        .unwrap();
    assert_eq!(reply.text, "plain words");
    assert!(matches!(reply.schema_use, SchemaUse::Refused { .. }));
    assert_eq!(streamed(&pieces), "plain words");
    assert!(
        pieces.lock().unwrap().iter().all(|p| p.0 == 2),
        "{pieces:?}"
    );
}

#[tokio::test]
async fn other_failures_are_not_taken_for_a_refused_schema() {
    // A server failure is retried with the schema, which is then used.
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::ServerError)
            .reply(Fault::RateLimited {
                retry_after_secs: Some(0.01),
            })
            .reply(TURN_REPLY),
    )
    .await;
    let client = client(&server, ProviderKind::OpenAi);
    let reply = client.chat(ask().with_schema(turn())).await.unwrap();
    assert_eq!(reply.schema_use, SchemaUse::Constrained);
    assert_eq!(reply.usage.retries, 2);
    assert!(server.requests().iter().all(|r| r.carries_schema()));

    // A rejected key is an error, not a reason to drop the schema.
    let server =
        ScriptedServer::start(Script::new().reply(Fault::Unauthorized).otherwise("x")).await;
    let err = client_of(&server)
        .chat(ask().with_schema(turn()))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Unauthorized { .. }), "{err}");
    assert_eq!(server.request_count(), 1);

    // A 400 the plain request gets too is that request's error, and the
    // model is not remembered as refusing schemas.
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::Status {
                status: 400,
                message: "prompt is too long".into(),
            })
            .reply(Fault::Status {
                status: 400,
                message: "prompt is too long".into(),
            })
            .reply(TURN_REPLY),
    )
    .await;
    let client = client_of(&server);
    let err = client.chat(ask().with_schema(turn())).await.unwrap_err();
    assert!(err.to_string().contains("prompt is too long"), "{err}");
    assert_eq!(server.request_count(), 2);
    let reply = client.chat(ask().with_schema(turn())).await.unwrap();
    assert_eq!(reply.schema_use, SchemaUse::Constrained);
    assert!(server.requests()[2].carries_schema());
}

fn client_of(server: &ScriptedServer) -> LlmClient {
    client(server, ProviderKind::OpenAi)
}

#[tokio::test]
async fn a_501_to_a_schema_is_a_refusal_not_a_server_failure() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Fault::Status {
                status: 501,
                message: "response_format is not implemented".into(),
            })
            .otherwise("plain"),
    )
    .await;
    let reply = client_of(&server)
        .chat(ask().with_schema(turn()))
        .await
        .unwrap();
    assert_eq!(
        reply.schema_use,
        SchemaUse::Refused {
            reason: "HTTP 501: response_format is not implemented".into()
        }
    );
    assert_eq!(server.request_count(), 2, "no retries of the 501");
}

#[tokio::test]
async fn the_schema_is_part_of_a_recorded_request() {
    let base = rlm_llm::ModelRequest {
        model: "m".into(),
        messages: vec![rlm_llm::Message::user("q")],
        temperature: None,
        max_output_tokens: None,
        stop: vec![],
        schema: None,
        on_token: None,
    };
    let with = rlm_llm::ModelRequest {
        schema: Some(turn()),
        ..base.clone()
    };
    let mut other_ids = turn();
    other_ids.schema["properties"]["step"]["anyOf"][1]["properties"]["answer"]["items"]["properties"]
        ["source"]["anyOf"][1]["properties"]["ref"]["enum"] = json!(["doc:3", "doc:4"]);
    let with_other = rlm_llm::ModelRequest {
        schema: Some(other_ids),
        ..base.clone()
    };
    let hashes = [
        request_hash(&base),
        request_hash(&with),
        request_hash(&with_other),
    ];
    assert_ne!(hashes[0], hashes[1]);
    assert_ne!(hashes[1], hashes[2]);
    // Without a schema the request serializes as before: old cassettes match.
    assert!(!serde_json::to_string(&base).unwrap().contains("schema"));

    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("run.jsonl");
    let server = ScriptedServer::start(Script::new().otherwise(TURN_REPLY)).await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.record = Some(cassette.clone());
    LlmClient::from_config(config.clone())
        .unwrap()
        .chat(ask().with_schema(turn()))
        .await
        .unwrap();
    config.record = None;
    config.replay = Some(cassette);
    let replayer = LlmClient::from_config(config).unwrap();
    let replayed = replayer.chat(ask().with_schema(turn())).await.unwrap();
    assert_eq!(replayed.text, TURN_REPLY);
    assert_eq!(replayed.schema_use, SchemaUse::Constrained);
    let err = replayer.chat(ask()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("schema at character 0: recorded \"rlm_turn"),
        "{err}"
    );
}

#[tokio::test]
async fn a_recorded_refusal_replays_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("run.jsonl");
    let server = ScriptedServer::start(Script::new().reject_schemas().otherwise("plain")).await;
    let mut config = server.config(ProviderKind::Anthropic);
    config.record = Some(cassette.clone());
    let recorded = LlmClient::from_config(config.clone())
        .unwrap()
        .chat(ask().with_schema(turn()))
        .await
        .unwrap();
    let lines = std::fs::read_to_string(&cassette).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
    let first: rlm_llm::CassetteEntry =
        serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first.refused.as_ref().and_then(|r| r.status), Some(400));

    config.record = None;
    config.replay = Some(cassette);
    let replayed = LlmClient::from_config(config)
        .unwrap()
        .chat(ask().with_schema(turn()))
        .await
        .unwrap();
    assert_eq!(replayed.text, "plain");
    assert_eq!(replayed.schema_use, recorded.schema_use);
}

#[tokio::test]
async fn scripts_in_json_can_reject_schemas() {
    let script = Script::from_json(r#"{"reject_schemas": true, "otherwise": "ok"}"#).unwrap();
    let server = ScriptedServer::start(script).await;
    let reply = client_of(&server)
        .chat(ask().with_schema(turn()))
        .await
        .unwrap();
    assert!(matches!(reply.schema_use, SchemaUse::Refused { .. }));
}
