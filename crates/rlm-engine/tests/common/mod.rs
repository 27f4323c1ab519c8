//! Shared harness: a real store on disk, real sandbox workers, the scripted
//! model server over real HTTP.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use rlm_corpus::{IndexOptions, Store};
use rlm_engine::grounding::{JUDGE_PROMPT_START, judge_reply, judged_claims};
use rlm_engine::{
    Answer, AskRequest, BudgetConfig, Corpus, Engine, EngineConfig, Trace, TraceRecord,
};
use rlm_llm::testing::{Matcher, ScriptedServer};
use rlm_sandbox::{SandboxConfig, WorkerCommand, WorkerPool};

/// The sandbox worker binary, built once if it is not there yet.
pub fn worker() -> WorkerCommand {
    rlm_sandbox::testing::worker()
}

/// A store built from `(file name, text)` pairs.
pub struct TestStore {
    pub dir: tempfile::TempDir,
    pub corpus: Arc<Corpus>,
}

pub fn store(files: &[(&str, &str)]) -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, text) in files {
        std::fs::write(docs.join(name), text).unwrap();
    }
    let store_dir = dir.path().join("store");
    Store::index(&store_dir, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let store = Arc::new(Store::open(&store_dir).unwrap());
    let corpus = Arc::new(Corpus::load(store).unwrap());
    TestStore { dir, corpus }
}

/// Three small documents; the second holds the needle.
pub fn needle_store() -> TestStore {
    store(&[
        (
            "a_intro.txt",
            "This memo describes the office move.\nNothing secret here at all.\n",
        ),
        (
            "b_notes.txt",
            "Meeting notes from Tuesday.\nThe secret code is 4721. Keep it safe.\nEnd of notes.\n",
        ),
        (
            "c_misc.txt",
            "Miscellaneous remarks about lunch options and parking spaces.\n",
        ),
    ])
}

pub fn config() -> EngineConfig {
    EngineConfig {
        budget: BudgetConfig::default(),
        root_model: "root-model".into(),
        sub_model: "sub-model".into(),
        ..EngineConfig::default()
    }
}

pub async fn engine(server: &ScriptedServer, config: EngineConfig) -> Engine {
    let pool = WorkerPool::new(SandboxConfig::new(worker()), 1)
        .await
        .unwrap();
    Engine::new(Arc::new(server.client()), pool, config)
}

/// Runs a question with a JSONL trace; returns the answer and the trace.
pub async fn ask(engine: &Engine, ts: &TestStore, question: &str) -> (Answer, Vec<TraceRecord>) {
    ask_with(engine, ts, AskRequest::new(question)).await
}

pub async fn ask_with(
    engine: &Engine,
    ts: &TestStore,
    mut req: AskRequest,
) -> (Answer, Vec<TraceRecord>) {
    let path: PathBuf = ts
        .dir
        .path()
        .join(format!("trace-{}.jsonl", fastrand_suffix()));
    req.trace = Arc::new(Trace::to_file(&path).unwrap());
    let answer = engine.ask(ts.corpus.clone(), req).await.unwrap();
    let records = rlm_engine::trace::read_trace(&path).unwrap();
    (answer, records)
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Requests of the root agent.
pub fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

/// Requests of sub-agents (`rlm_query` children).
pub fn sub_agent() -> Matcher {
    Matcher::system_contains("You are a sub-agent")
}

/// Plain `llm_query` requests (no system prompt).
pub fn leaf() -> Matcher {
    Matcher::predicate(|r| {
        r.system().is_empty()
            && !r
                .last_message()
                .contains("A research run on the question below")
    })
}

/// The extraction call that answers when a loop ends without an answer
/// (a budget, a cap, a last turn without one).
pub fn synthesis() -> Matcher {
    Matcher::last_contains("A research run on the question below")
}

pub fn repl(code: &str) -> String {
    format!("```repl\n{code}\n```")
}

pub fn event_types(records: &[TraceRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            serde_json::to_value(&r.event).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Requests of the entailment judge (one per answer with passages).
pub fn judge() -> Matcher {
    Matcher::system_contains(JUDGE_PROMPT_START)
}

/// True for a request of the entailment judge.
pub fn is_judge(r: &rlm_llm::testing::ReceivedRequest) -> bool {
    r.system().contains(JUDGE_PROMPT_START)
}

/// A judge reply giving `labels` (`entailed`, `not_entailed`, …) to claims
/// 1, 2, … in order.
pub fn verdicts(labels: &[&str]) -> String {
    judge_reply(
        &labels
            .iter()
            .map(|l| serde_json::from_value(serde_json::json!(l)).unwrap())
            .collect::<Vec<_>>(),
    )
}

/// How many requests `server` got from the judge.
pub fn judge_calls(server: &ScriptedServer) -> usize {
    server.requests().iter().filter(|r| is_judge(r)).count()
}

/// Requests `server` got besides the judge's: the flow's own calls.
pub fn flow_requests(server: &ScriptedServer) -> usize {
    server.requests().len() - judge_calls(server)
}

/// For a judge request, a reply giving every claim in it `label`.
pub fn judge_says(r: &rlm_llm::testing::ReceivedRequest, label: &str) -> Option<String> {
    is_judge(r).then(|| verdicts(&vec![label; judged_claims(r.last_message())]))
}
