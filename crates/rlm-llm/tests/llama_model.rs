//! The embedded model under a reply schema (feature `local`): the grammar
//! built from the schema constrains llama.cpp's sampling, so the reply is a
//! JSON document that follows it. Runs only when the model file is present
//! (`rlm model pull` or RLM_LOCAL_MODEL); skipped otherwise. Part of the
//! slow local-model suite (`scripts/test-local-model`).

use std::sync::Arc;

use rlm_llm::provider::LocalProvider;
use rlm_llm::{
    ChatRequest, ConfigOverrides, LlmClient, LlmConfig, ProviderKind, ReplySchema, SchemaUse,
    schema,
};
use rlm_local::{LocalModel, LocalModelOptions};
use serde_json::{Value, json};

/// The engine's turn schema, with `ids` as the chunk ids shown so far.
fn turn_schema(ids: &[&str]) -> Value {
    json!({"type":"object","properties":{
      "thought":{"type":"string","maxLength":300},
      "step":{"anyOf":[
        {"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false},
        {"type":"object","properties":{"answer":{"type":"array","minItems":1,"items":{"type":"object","properties":{
            "text":{"type":"string","maxLength":600},
            "source":{"anyOf":[{"type":"null"},{"type":"object","properties":{"ref":{"type":"string","enum":ids},"quote":{"type":"string","maxLength":300}},"required":["ref","quote"],"additionalProperties":false}]}},
          "required":["text","source"],"additionalProperties":false}}},"required":["answer"],"additionalProperties":false},
        {"type":"object","properties":{"not_found":{"type":"string"}},"required":["not_found"],"additionalProperties":false}
      ]}},
     "required":["thought","step"],"additionalProperties":false})
}

const SYSTEM: &str = "You answer questions about documents. Reply with one JSON object: \
    a short \"thought\", then a \"step\": {\"answer\": [{\"text\": ..., \"source\": {\"ref\": chunk id, \"quote\": exact words}}]} \
    when the documents answer the question, {\"code\": python} to look further, or {\"not_found\": why}.";

fn question(chunk: &str, text: &str, ask: &str) -> String {
    format!("[{chunk}] {text}\n\nQuestion: {ask}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_model_replies_with_json_that_follows_the_turn_schema() {
    let path = match rlm_local::configured_model_path() {
        Ok(p) if p.is_file() => p,
        _ => {
            eprintln!("skipped: no local model file (run `rlm model pull` or set RLM_LOCAL_MODEL)");
            return;
        }
    };
    let options = LocalModelOptions {
        context_tokens: 4096,
        parallel: 2,
        ..LocalModelOptions::default()
    };
    let model = LocalModel::load(&path, options).unwrap();
    let overrides = ConfigOverrides {
        provider: Some(ProviderKind::Local),
        ..ConfigOverrides::default()
    };
    let config = LlmConfig::from_toml_str("", &overrides, |_| None).unwrap();
    let client = LlmClient::with_provider(config, Arc::new(LocalProvider::new(model)));

    // Two at once: each slot samples under its own grammar.
    let cases = [
        (
            vec!["chunk:0a1b2c3d4e5f6a7b-0", "doc:3"],
            question(
                "chunk:0a1b2c3d4e5f6a7b-0",
                "The vault code is 7141.",
                "What is the vault code?",
            ),
        ),
        (
            vec!["chunk:99aa-2"],
            question(
                "chunk:99aa-2",
                "Der Zug nach Bern fährt um 9:12 Uhr ab.",
                "Wann fährt der Zug nach Bern?",
            ),
        ),
    ];
    let ask = |(ids, prompt): &(Vec<&str>, String)| {
        let request = ChatRequest::user(prompt.clone())
            .with_system(SYSTEM)
            .with_temperature(0.0)
            .with_max_output_tokens(400)
            .with_stop("\n\n")
            .with_schema(ReplySchema::new("rlm_turn", turn_schema(ids)));
        client.chat(request)
    };
    let (first, second) = tokio::join!(ask(&cases[0]), ask(&cases[1]));
    for ((ids, _), reply) in cases.iter().zip([first, second]) {
        let reply = reply.unwrap();
        eprintln!(
            "{} ({} tokens, {:?})",
            reply.text, reply.usage.output_tokens, reply.usage.latency
        );
        assert_eq!(reply.schema_use, SchemaUse::Constrained);
        let turn = schema::parse_reply(&turn_schema(ids), &reply.text)
            .unwrap_or_else(|e| panic!("{e}: {}", reply.text));
        assert_eq!(
            serde_json::from_str::<Value>(&reply.text).unwrap(),
            turn,
            "the whole reply is the document"
        );
    }

    // A schema the grammar cannot express: the request goes as text.
    let unexpressible = json!({"type": "object", "anyOf": [{"required": []}]});
    let reply = client
        .chat(
            ChatRequest::user("Say hi.")
                .with_max_output_tokens(8)
                .with_schema(ReplySchema::new("odd", unexpressible)),
        )
        .await
        .unwrap();
    let SchemaUse::Refused { reason } = reply.schema_use else {
        panic!("{:?}", reply.schema_use);
    };
    assert!(reason.contains("anyOf"), "{reason}");
}
