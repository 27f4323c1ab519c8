//! Server benchmarks over a real socket, with the scripted model at zero
//! latency (so the numbers are the server's and the engine's own cost), real
//! sandbox workers and a real store on disk.
//!
//! ```text
//! cargo build --release -p rlm
//! cargo bench -p rlm-server --bench server
//! ```
//!
//! The `rlm` release binary (the sandbox worker) is found next to this
//! benchmark's executable (`target/release/rlm`) or at `$RLM_BIN`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rlm_corpus::{IndexOptions, Store};
use rlm_engine::{Engine, EngineConfig};
use rlm_llm::testing::{Matcher, Script, ScriptedServer};
use rlm_sandbox::{SandboxConfig, WorkerCommand, WorkerPool};
use rlm_server::{App, Limits};
use serde_json::{Value, json};

fn rlm_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("RLM_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("own path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let p = dir.join("rlm");
    assert!(
        p.is_file(),
        "build the binary first: cargo build --release -p rlm (looked for {})",
        p.display()
    );
    p
}

fn script() -> Script {
    let root = Matcher::system_contains("You are answering a question about a collection");
    Script::new()
        .on(
            root.clone().and(Matcher::any_contains("REPL output")),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
        )
        .on(
            root,
            "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```",
        )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "This memo describes the office move.\n").unwrap();
    std::fs::write(
        docs.join("b.txt"),
        "Meeting notes.\nThe secret code is 4721.\n",
    )
    .unwrap();
    std::fs::write(docs.join("c.txt"), "Lunch options and parking spaces.\n").unwrap();
    let store_dir = dir.path().join("store");
    Store::index(&store_dir, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let store = Arc::new(Store::open(&store_dir).unwrap());

    let model = ScriptedServer::start(script()).await;
    let config = EngineConfig {
        root_model: "root-model".into(),
        sub_model: "sub-model".into(),
        ..EngineConfig::default()
    };
    let concurrency = 4;
    let pool = WorkerPool::new(
        SandboxConfig::new(WorkerCommand::rlm_subcommand(rlm_bin())),
        concurrency,
    )
    .await
    .unwrap();
    let engine = Engine::new(Arc::new(model.client()), pool, config);
    let limits = Limits {
        max_concurrent_runs: concurrency,
        ..Limits::default()
    };
    let app = Arc::new(App::new(engine, store, limits, None, None).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(rlm_server::serve(listener, app, std::future::pending()));
    let http = reqwest::Client::new();
    let chat = |http: reqwest::Client, base: String| async move {
        let v: Value = http
            .post(format!("{base}/api/chat"))
            .json(&json!({"question": "What is the secret code?"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["status"], "done", "{v}");
    };

    // Warm-up: sandbox workers, connections, the store's first reads.
    for _ in 0..3 {
        chat(http.clone(), base.clone()).await;
    }

    let n = 30;
    let mut round_trips = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        chat(http.clone(), base.clone()).await;
        round_trips.push(ms(t.elapsed()));
    }

    let mut first_event = Vec::new();
    let mut to_end = Vec::new();
    let mut events = 0;
    for _ in 0..n {
        let t = Instant::now();
        let started: Value = http
            .post(format!("{base}/api/runs"))
            .json(&json!({"question": "What is the secret code?"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let url = format!("{base}{}", started["events"].as_str().unwrap());
        let mut body = http.get(url).send().await.unwrap().bytes_stream();
        let mut text = String::new();
        let mut first = None;
        while let Some(chunk) = body.next().await {
            first.get_or_insert_with(|| t.elapsed());
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
        to_end.push(ms(t.elapsed()));
        first_event.push(ms(first.unwrap()));
        events = text.matches("event: trace").count();
    }

    let total = 40;
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency));
    for _ in 0..total {
        let (http, base, gate) = (http.clone(), base.clone(), gate.clone());
        tasks.spawn(async move {
            let _slot = gate.acquire_owned().await.unwrap();
            chat(http, base).await;
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let wall = t.elapsed();

    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| `POST /api/chat` round trip (2 model turns, 2 cells, verification, run saved) | median {:.1} ms (min {:.1}, {n} runs) |",
        median(round_trips.clone()),
        round_trips.iter().cloned().fold(f64::MAX, f64::min)
    );
    println!(
        "| `POST /api/runs` → first SSE bytes | median {:.1} ms |",
        median(first_event)
    );
    println!(
        "| `POST /api/runs` → SSE stream closed ({events} trace events + end) | median {:.1} ms |",
        median(to_end)
    );
    println!(
        "| {total} questions, {concurrency} at a time | {:.2} s wall, {:.1} questions/s |",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64()
    );
}
