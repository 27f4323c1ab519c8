//! End to end on the real local model: index a small corpus with one planted
//! fact, `rlm ask` about it with `RLM_PROVIDER=local`, and check that the
//! loop ran to completion (an answer committed, a complete trace with every
//! reply streamed into it, exact token accounting at zero cost).
//!
//! Runs with the `local-model` feature (a default one) when the model file is
//! present (`rlm model pull`, or `RLM_LOCAL_MODEL`); otherwise it is skipped
//! with a message. CPU inference: minutes, not seconds.

#![cfg(feature = "local-model")]

use std::path::PathBuf;

mod common;
use common::rlm;

/// A one-file corpus for the questions that start warm.
const MENU: &str = "Canteen menu.\nOn Fridays the canteen serves fish soup.\n";

fn model_file() -> Option<PathBuf> {
    let path = rlm_local::configured_model_path().ok()?;
    path.is_file().then_some(path)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes `files` into the folder `folder` of `dir` and indexes it into
/// the store `store`.
fn index(dir: &std::path::Path, folder: &str, store: &str, files: &[(&str, &str)]) {
    let docs = dir.join(folder);
    std::fs::create_dir_all(&docs).unwrap();
    for (name, body) in files {
        std::fs::write(docs.join(name), body).unwrap();
    }
    let o = rlm(dir, &["index", folder, "--store", store], &[]);
    assert!(o.status.success(), "index: {}", text(&o.stderr));
}

/// The embedded model's environment, with a prefix-state folder of the
/// test's own: the first question starts cold whatever ran before.
fn local_env(dir: &std::path::Path, model: &std::path::Path) -> [(&'static str, String); 3] {
    [
        ("RLM_PROVIDER", "local".to_string()),
        ("RLM_LOCAL_MODEL", model.to_str().unwrap().to_string()),
        (
            "RLM_LOCAL_PREFIX_CACHE",
            dir.join("prefix-state").to_str().unwrap().to_string(),
        ),
    ]
}

/// The first model reply in the trace file `path`.
fn first_reply(path: &std::path::Path) -> serde_json::Value {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "llm_response")
        .expect("a model reply")
}

#[test]
fn the_local_model_runs_the_loop_over_a_corpus_with_a_planted_fact() {
    let Some(model) = model_file() else {
        eprintln!("skipped: no local model file (run `rlm model pull` or set RLM_LOCAL_MODEL)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    index(
        dir.path(),
        "docs",
        "store",
        &[
            (
                "facilities.txt",
                "Facilities update.\nThe cafeteria reopens on Monday after the renovation.\nParking permits must be renewed every March.\n",
            ),
            (
                "security.txt",
                "Security memo.\nThe vault access code for the Lisbon office is 8316.\nVisitors must sign in at the front desk.\n",
            ),
            (
                "hr.txt",
                "HR notes.\nThe annual review cycle starts in October.\nRemote work requests go to your manager.\n",
            ),
        ],
    );
    let env = local_env(dir.path(), &model);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let o = rlm(
        dir.path(),
        &[
            "ask",
            "What is the vault access code for the Lisbon office?",
            "--store",
            "store",
            "--json",
            "--trace",
            "run.jsonl",
            "--max-iterations",
            "6",
            "--max-llm-calls",
            "12",
        ],
        &env,
    );
    let stderr = text(&o.stderr);
    assert!(o.status.success(), "ask failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o.stdout)));
    let answer = v["answer"].as_str().unwrap_or_default();
    eprintln!(
        "local model answer (partial: {}): {answer}\nusage: {}",
        v["partial"], v["usage"]
    );
    assert!(!answer.trim().is_empty(), "an answer was committed");
    assert!(v["usage"]["calls"].as_u64().unwrap() >= 1);
    assert_eq!(
        v["usage"]["cost_usd"], 0.0,
        "local calls cost nothing: {}",
        v["usage"]
    );
    assert_eq!(
        v["usage"]["estimated"], false,
        "tokens counted by the model's tokenizer"
    );
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 100);

    // The trace is complete: it starts, has model exchanges with exact
    // token counts, and finishes.
    let trace = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).expect("trace line is JSON"))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"run_started"), "{types:?}");
    assert_eq!(types.last(), Some(&"run_finished"), "{types:?}");
    assert!(types.contains(&"llm_response"), "{types:?}");
    assert!(
        types.contains(&"final") || v["partial"] == true,
        "either FINAL was committed or the engine synthesized a partial answer: {types:?}"
    );
    // The replies streamed into the trace while they were generated: per
    // agent, the pieces since its request add up to each reply.
    let mut pending: std::collections::HashMap<&str, String> = Default::default();
    let mut pieces = 0;
    for e in &events {
        let agent = e["agent"].as_str().unwrap_or_default();
        match e["type"].as_str() {
            Some("llm_request") => {
                pending.insert(agent, String::new());
            }
            Some("llm_delta") => {
                pieces += 1;
                pending
                    .entry(agent)
                    .or_default()
                    .push_str(e["text"].as_str().unwrap());
            }
            Some("llm_response") => {
                let streamed = pending.remove(agent).unwrap_or_default();
                assert_eq!(streamed, e["text"].as_str().unwrap(), "agent {agent}");
            }
            _ => {}
        }
    }
    let replies = types.iter().filter(|t| **t == "llm_response").count();
    assert!(pieces > replies, "{pieces} pieces for {replies} replies");
    eprintln!("{replies} replies streamed in {pieces} pieces");

    let right = answer.contains("8316");
    eprintln!("planted fact found: {right}");

    // Another store's first question starts warm: the root's instructions
    // are a system message of their own, the same for every store, and
    // their state was kept on disk by the first question.
    index(dir.path(), "other", "store2", &[("menu.txt", MENU)]);
    let o = rlm(
        dir.path(),
        &[
            "ask",
            "What does the canteen serve on Fridays?",
            "--store",
            "store2",
            "--json",
            "--trace",
            "run2.jsonl",
            "--max-llm-calls",
            "1",
        ],
        &env,
    );
    assert!(o.status.success(), "second ask: {}", text(&o.stderr));
    let first = first_reply(&dir.path().join("run2.jsonl"));
    let (cached, input) = (
        first["cached_input_tokens"].as_u64().unwrap(),
        first["input_tokens"].as_u64().unwrap(),
    );
    eprintln!("another store's first call: {cached} of {input} prompt tokens restored");
    assert!(
        cached >= 1_000 && cached < input,
        "the instructions' state is restored: {first}"
    );
}

/// `rlm model warm` before any question: the first question over a new
/// store starts with the instructions' state restored, and warming again
/// says it was already kept.
#[test]
fn warming_up_makes_the_first_question_start_warm() {
    let Some(model) = model_file() else {
        eprintln!("skipped: no local model file (run `rlm model pull` or set RLM_LOCAL_MODEL)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    index(dir.path(), "docs", "store", &[("menu.txt", MENU)]);
    let env = local_env(dir.path(), &model);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let warm = |json: bool| {
        let args: &[&str] = if json {
            &["model", "warm", "--json"]
        } else {
            &["model", "warm"]
        };
        let o = rlm(dir.path(), args, &env);
        assert!(o.status.success(), "warm: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let first: serde_json::Value = serde_json::from_str(&warm(true)).unwrap();
    eprintln!("warm-up: {first}");
    assert_eq!(first["kept_tokens"], 0, "{first}");
    assert!(first["prompt_tokens"].as_u64().unwrap() > 1_000, "{first}");

    let o = rlm(
        dir.path(),
        &[
            "ask",
            "What does the canteen serve on Fridays?",
            "--store",
            "store",
            "--trace",
            "run.jsonl",
            "--max-llm-calls",
            "1",
        ],
        &env,
    );
    assert!(o.status.success(), "ask: {}", text(&o.stderr));
    let reply = first_reply(&dir.path().join("run.jsonl"));
    let restored = reply["cached_input_tokens"].as_u64().unwrap();
    eprintln!("the first question's first call restored {restored} prompt tokens");
    assert!(restored >= 1_000, "{reply}");

    let again = warm(false);
    assert!(again.starts_with("warm already: "), "{again}");
}
