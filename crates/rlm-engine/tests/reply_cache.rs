//! The store's reply cache: a reproducible call (temperature 0 here) whose
//! model, parameters and prompt were answered before is served from the
//! store, free of budget; anything else goes to the model.

use std::sync::Arc;

use crate::common;

use common::*;
use rlm_corpus::CorpusStore;
use rlm_engine::{AskRequest, Engine, EngineConfig, TraceEvent, TraceRecord};
use rlm_llm::testing::{Script, ScriptedServer};
use rlm_llm::{ChatModel, ChatRequest, LlmClient, Message, ModelRole, ProviderKind};
use rlm_sandbox::{SandboxConfig, WorkerPool};

/// A client of `server` whose calls are reproducible (temperature 0) when
/// `temperature` is 0.
fn client(server: &ScriptedServer, temperature: f32) -> LlmClient {
    let mut config = server.config(ProviderKind::OpenAi);
    config.root.temperature = Some(temperature);
    config.sub.temperature = Some(temperature);
    LlmClient::from_config(config).unwrap()
}

async fn engine_with(client: LlmClient, config: EngineConfig) -> Engine {
    let pool = WorkerPool::new(SandboxConfig::new(worker()), 1)
        .await
        .unwrap();
    Engine::new(Arc::new(client), pool, config)
}

/// A root that asks a sub-call, then answers; `runs` times over.
fn script_for(runs: usize) -> Script {
    let turns = [
        repl("print(llm_query('Say the code in: ' + documents[1]['text'][:90]))"),
        "FINAL(The secret code is 4721.)".to_string(),
    ];
    Script::new()
        .on_sequence(root(), turns.iter().cycle().take(2 * runs).cloned())
        .on(leaf(), "4721")
}

/// The script for one run: a second run's model calls find no reply.
fn script() -> Script {
    script_for(1)
}

fn cached_responses(trace: &[TraceRecord]) -> (usize, usize) {
    let mut cached = 0;
    let mut all = 0;
    for r in trace {
        if let TraceEvent::LlmResponse { from_cache, .. } = &r.event {
            all += 1;
            cached += usize::from(*from_cache);
        }
    }
    (cached, all)
}

#[tokio::test]
async fn a_question_asked_again_repeats_no_model_call() {
    let ts = needle_store();
    let server = ScriptedServer::start(script()).await;
    let engine = engine_with(client(&server, 0.0), config()).await;
    let question = "What is the secret code?";

    let (first, trace) = ask(&engine, &ts, question).await;
    let made = server.request_count();
    assert!(first.answer.contains("4721"), "{}", first.answer);
    assert!(made >= 3, "root twice and the sub-call: {made}");
    assert_eq!(first.usage.cached_calls, 0);
    assert_eq!(cached_responses(&trace).0, 0);

    let (second, trace) = ask(&engine, &ts, question).await;
    assert_eq!(
        server.request_count(),
        made,
        "the second run made a model call: {:?}",
        server.requests().last().map(|r| r.last_message())
    );
    assert_eq!(second.answer, first.answer);
    assert_eq!(second.usage.calls, 0, "cached calls are free");
    assert_eq!(second.usage.input_tokens, 0);
    assert_eq!(second.usage.cached_calls as usize, made);
    assert_eq!(
        second.usage.tokens_saved,
        first.usage.input_tokens + first.usage.output_tokens
    );
    let (cached, all) = cached_responses(&trace);
    assert_eq!((cached, all), (made, made), "every reply traced as cached");
    // The replies were streamed too, so a page that shows text as it is
    // written shows the cached text.
    assert!(
        trace.iter().any(
            |r| matches!(&r.event, TraceEvent::LlmDelta { text, .. } if text.contains("FINAL"))
        )
    );

    // A new engine over the same folder (another process, later) reads the
    // same cache from disk.
    let fresh = Arc::new(rlm_corpus::Store::open(&ts.dir.path().join("store")).unwrap());
    let corpus = Arc::new(rlm_engine::Corpus::load(fresh).unwrap());
    let again = engine_with(client(&server, 0.0), config()).await;
    let answer = again.ask(corpus, AskRequest::new(question)).await.unwrap();
    assert_eq!(server.request_count(), made);
    assert_eq!(answer.usage.cached_calls as usize, made);
}

#[tokio::test]
async fn the_cache_off_makes_every_call_and_keeps_nothing() {
    let ts = needle_store();
    let server = ScriptedServer::start(script_for(2)).await;
    let mut off = config();
    off.reply_cache = false;
    let engine = engine_with(client(&server, 0.0), off).await;
    let (first, _) = ask(&engine, &ts, "What is the secret code?").await;
    let made = server.request_count();
    let (second, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(server.request_count(), 2 * made);
    assert_eq!(second.usage.cached_calls, 0);
    assert_eq!(second.usage.calls, first.usage.calls);
    let cache = ts.corpus.store().reply_cache().unwrap().unwrap();
    assert_eq!(cache.stats().unwrap().entries, 0, "nothing kept");
}

#[tokio::test]
async fn replies_at_a_temperature_above_zero_are_never_kept() {
    let ts = needle_store();
    let server = ScriptedServer::start(script_for(2)).await;
    let engine = engine_with(client(&server, 0.7), config()).await;
    ask(&engine, &ts, "What is the secret code?").await;
    let made = server.request_count();
    let (second, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(server.request_count(), 2 * made);
    assert_eq!(second.usage.cached_calls, 0);
    let store: &dyn CorpusStore = &**ts.corpus.store();
    assert_eq!(
        store
            .reply_cache()
            .unwrap()
            .unwrap()
            .stats()
            .unwrap()
            .entries,
        0
    );
}

#[tokio::test]
async fn a_changed_prompt_model_or_parameter_is_another_key() {
    let server = ScriptedServer::start(Script::new()).await;
    let c = client(&server, 0.0);
    let request = |text: &str| ChatRequest::new(ModelRole::Sub, vec![Message::user(text)]);
    let base = c.reply_key(&request("Summarize chunk 7")).unwrap();
    assert_eq!(c.reply_key(&request("Summarize chunk 7")).unwrap(), base);
    assert_ne!(c.reply_key(&request("Summarize chunk 8")).unwrap(), base);
    // The role's model (root-model vs sub-model) is part of the key.
    let root = ChatRequest::new(ModelRole::Root, vec![Message::user("Summarize chunk 7")]);
    assert_ne!(c.reply_key(&root).unwrap(), base);
    let mut other_model = request("Summarize chunk 7");
    other_model.model = Some("another-model".into());
    assert_ne!(c.reply_key(&other_model).unwrap(), base);
    let mut stop = request("Summarize chunk 7");
    stop.stop = vec!["\n\n".into()];
    assert_ne!(c.reply_key(&stop).unwrap(), base);
    let mut longer = request("Summarize chunk 7");
    longer.max_output_tokens = Some(99);
    assert_ne!(c.reply_key(&longer).unwrap(), base);
    // A sampled call is not reproducible: no key at all.
    let mut sampled = request("Summarize chunk 7");
    sampled.temperature = Some(0.7);
    assert_eq!(c.reply_key(&sampled), None);
    // Another endpoint is another key.
    let elsewhere = ScriptedServer::start(Script::new()).await;
    assert_ne!(
        client(&elsewhere, 0.0)
            .reply_key(&request("Summarize chunk 7"))
            .unwrap(),
        base
    );
}
