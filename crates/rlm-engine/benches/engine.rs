//! Engine benchmarks (issue 6), against the scripted model server at zero or
//! fixed latency, with real sandbox workers and real stores on disk.
//!
//! ```text
//! cargo build --release -p rlm
//! cargo bench -p rlm-engine --bench engine            # all
//! cargo bench -p rlm-engine --bench engine -- process # one: process | iteration | fanout | memory | scan
//! ```
//!
//! The `rlm` release binary is found next to this benchmark's executable
//! (`target/release/rlm`) or at `$RLM_BIN`; it is also the sandbox worker.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rlm_corpus::{IndexOptions, Store};
use rlm_engine::{AskRequest, BudgetConfig, Corpus, Engine, EngineConfig, Trace, TraceEvent};
use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer, TEST_API_KEY};
use rlm_llm::{LlmClient, ProviderKind};
use rlm_sandbox::{SandboxConfig, WorkerCommand, WorkerPool};

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

/// A store at `dir` with `docs` documents of `chars_each` characters; the
/// needle sentence sits in the middle of the last document.
fn make_store(dir: &Path, docs: usize, chars_each: usize) -> Arc<Corpus> {
    let src = dir.join("docs");
    std::fs::create_dir_all(&src).unwrap();
    let line =
        "The quick brown fox jumps over the lazy dog while the committee reviews the minutes. ";
    for i in 0..docs {
        let mut text = String::with_capacity(chars_each + 100);
        while text.len() < chars_each {
            text.push_str(line);
            if text.len() % 1000 < line.len() {
                text.push('\n');
            }
        }
        text.truncate(chars_each);
        if i == docs - 1 {
            text.insert_str(chars_each / 2, "\nThe secret code is 4721.\n");
        }
        std::fs::write(src.join(format!("doc_{i:04}.txt")), text).unwrap();
    }
    let store_dir = dir.join("store");
    Store::index(
        &store_dir,
        &[src],
        &IndexOptions {
            max_file_bytes: u64::MAX,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    Arc::new(Corpus::load(Arc::new(Store::open(&store_dir).unwrap())).unwrap())
}

fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

/// Finds the needle in the first turn, commits in the second; stateless so it
/// serves any number of runs.
fn needle_script() -> Script {
    Script::new().respond_with(|r| {
        if !r.system().contains("You are answering") {
            return None;
        }
        Some(if r.last_message().contains("REPL output") {
            Reply::text("FINAL(The secret code is 4721)")
        } else {
            Reply::text(
                "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```",
            )
        })
    })
}

async fn engine_for(server: &ScriptedServer, budget: BudgetConfig, concurrency: usize) -> Engine {
    let mut cfg = server.config(ProviderKind::OpenAi);
    cfg.max_concurrent = concurrency;
    let client = LlmClient::from_config(cfg).unwrap();
    let pool = WorkerPool::new(
        SandboxConfig::new(WorkerCommand::rlm_subcommand(rlm_bin())),
        1,
    )
    .await
    .unwrap();
    Engine::new(
        Arc::new(client),
        pool,
        EngineConfig {
            budget,
            root_model: "root-model".into(),
            sub_model: "sub-model".into(),
            ..Default::default()
        },
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A whole `rlm ask` process on a 256k-character single-document store.
async fn bench_process() {
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 1, 256_000);
    let server = ScriptedServer::start(needle_script()).await;
    let mut times = Vec::new();
    for i in 0..11 {
        let t0 = Instant::now();
        let out = tokio::process::Command::new(rlm_bin())
            .args(["ask", "What is the secret code?", "--store"])
            .arg(dir.path().join("store"))
            .args(["--quiet"])
            .env("RLM_PROVIDER", "openai")
            .env("RLM_BASE_URL", server.base_url())
            .env("RLM_API_KEY", TEST_API_KEY)
            .env("RLM_PRIMARY_MODEL", "root-model")
            .env("RLM_SUB_MODEL", "sub-model")
            .output()
            .await
            .unwrap();
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("4721"));
        if i > 0 {
            times.push(ms); // the first run warms the page cache
        }
    }
    let min = times.iter().cloned().fold(f64::MAX, f64::min);
    println!(
        "process: whole `rlm ask` (start, open store, load 256k chars, 2 turns, print): median {:.1} ms, min {:.1} ms over {} runs",
        median(times.clone()),
        min,
        times.len()
    );
}

/// Engine overhead per iteration over a 2 MB context with a zero-latency model.
async fn bench_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = make_store(dir.path(), 20, 100_000);
    let turns = Arc::new(AtomicUsize::new(0));
    let t2 = turns.clone();
    const N: usize = 60;
    let server = ScriptedServer::start(Script::new().respond_with(move |r| {
        if !r.system().contains("You are answering") {
            return None;
        }
        let n = t2.fetch_add(1, Ordering::SeqCst);
        Some(Reply::text(if n + 1 >= N {
            "FINAL(done)".to_string()
        } else {
            format!("```repl\nx = {n}\n```")
        }))
    }))
    .await;
    let budget = BudgetConfig {
        max_iterations: 100,
        max_llm_calls: 200,
        ..Default::default()
    };
    let engine = engine_for(&server, budget, 16).await;
    let mut per_iter = Vec::new();
    let mut cell_ms = Vec::new();
    for _ in 0..3 {
        turns.store(0, Ordering::SeqCst);
        let trace = Arc::new(Trace::to_file(&dir.path().join("t.jsonl")).unwrap());
        let mut rx = trace.subscribe();
        let mut req = AskRequest::new("q");
        req.trace = trace.clone();
        let t0 = Instant::now();
        let mut first_request: Option<Instant> = None;
        let ask = engine.ask(corpus.clone(), req);
        tokio::pin!(ask);
        let mut cells_us = 0u64;
        let answer = loop {
            tokio::select! {
                a = &mut ask => break a.unwrap(),
                Ok(rec) = rx.recv() => match rec.event {
                    TraceEvent::LlmRequest { iteration: 1, agent, .. } if agent == "0" => first_request = Some(Instant::now()),
                    TraceEvent::CellOutput { elapsed_ms, iteration, .. } if iteration > 0 => cells_us += elapsed_ms * 1000,
                    _ => {}
                },
            }
        };
        let loop_time = first_request.map(|f| f.elapsed()).unwrap_or(t0.elapsed());
        assert_eq!(answer.answer, "done");
        per_iter.push(loop_time.as_secs_f64() * 1000.0 / N as f64);
        cell_ms.push(cells_us as f64 / 1000.0 / (N - 1) as f64);
    }
    println!(
        "iteration: 2 MB context, zero-latency model: {:.2} ms per iteration (model round trip + cell `x = n` + engine), cells {:.2} ms of it (median of 3 runs of {N} turns)",
        median(per_iter),
        median(cell_ms)
    );
}

/// 100 sub-calls at 200 ms scripted latency with concurrency 16.
async fn bench_fanout() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = make_store(dir.path(), 1, 10_000);
    let server = ScriptedServer::start(
        Script::new()
            .on(Matcher::predicate(|r| r.system().is_empty()), Reply::text("sub answer").with_latency_ms(200))
            .on_sequence(
                root(),
                [
                    "```repl\nrs = llm_query_batched([f'question {i}' for i in range(100)])\nprint(len(rs))\n```".to_string(),
                    "FINAL(done)".to_string(),
                ],
            ),
    )
    .await;
    let budget = BudgetConfig {
        max_concurrent: 16,
        max_llm_calls: 200,
        ..Default::default()
    };
    let engine = engine_for(&server, budget, 16).await;
    let trace = Arc::new(Trace::new());
    let mut rx = trace.subscribe();
    let mut req = AskRequest::new("q");
    req.trace = trace;
    let answer = engine.ask(corpus, req).await.unwrap();
    assert_eq!(answer.answer, "done");
    let mut cell = 0;
    while let Ok(rec) = rx.try_recv() {
        if let TraceEvent::CellOutput {
            elapsed_ms,
            iteration: 1,
            ..
        } = rec.event
        {
            cell = elapsed_ms;
        }
    }
    println!(
        "fanout: 100 llm_query_batched sub-calls at 200 ms, concurrency 16: {cell} ms wall for the cell (ideal 7 waves = 1400 ms); peak concurrency {}",
        server.peak_concurrency()
    );
}

/// Peak memory of an `rlm ask` process (and its sandbox worker) over a store
/// of `RLM_BENCH_MB` megabytes (default 100).
async fn bench_memory() {
    let mb = bench_mb();
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let docs = mb * 10;
    make_store(dir.path(), docs, 100_000);
    let index_s = t0.elapsed().as_secs_f64();
    let server = ScriptedServer::start(needle_script()).await;
    let child = std::process::Command::new(rlm_bin())
        .args(["ask", "What is the secret code?", "--store"])
        .arg(dir.path().join("store"))
        .args(["--quiet"])
        .env("RLM_PROVIDER", "openai")
        .env("RLM_BASE_URL", server.base_url())
        .env("RLM_API_KEY", TEST_API_KEY)
        .env("RLM_PRIMARY_MODEL", "root-model")
        .env("RLM_SUB_MODEL", "sub-model")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Sample the process tree's resident memory until it exits.
    let (mut peak_parent, mut peak_tree) = (0u64, 0u64);
    let t1 = Instant::now();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output());
    tokio::pin!(output);
    let out = loop {
        tokio::select! {
            o = &mut output => break o.unwrap().unwrap(),
            _ = tokio::time::sleep(Duration::from_millis(2)) => {
                let parent = rss_kb(pid);
                let tree = parent + children_of(pid).into_iter().map(rss_kb).sum::<u64>();
                peak_parent = peak_parent.max(parent);
                peak_tree = peak_tree.max(tree);
            }
        }
    };
    assert!(String::from_utf8_lossy(&out.stdout).contains("4721"));
    let corpus_mb = (docs * 100_000) as f64 / 1e6;
    println!(
        "memory: {corpus_mb:.0} MB store (indexed in {index_s:.1} s): ask took {:.2} s; peak RSS rlm {:.0} MB, rlm + worker {:.0} MB ({:.2}x the corpus)",
        t1.elapsed().as_secs_f64(),
        peak_parent as f64 / 1024.0,
        peak_tree as f64 / 1024.0,
        peak_tree as f64 / 1024.0 / corpus_mb
    );
}

/// The corpus size of the memory and scan benchmarks: `RLM_BENCH_MB`
/// megabytes (default 100).
fn bench_mb() -> usize {
    std::env::var("RLM_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn children_of(pid: u32) -> Vec<u32> {
    let me = pid.to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .to_string();
            (ppid == me).then_some(child)
        })
        .collect()
}

/// `grep()` over 100 MB (`RLM_BENCH_MB`) in 100 documents: a pattern found
/// once (the cost of reading and matching everything) and one on every
/// line (plus building the line records), timed in process.
fn bench_scan() {
    let mb = bench_mb();
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let corpus = make_store(dir.path(), 100, mb * 10_000);
    eprintln!(
        "scan: store of {mb} MB built in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    for (pattern, limit) in [
        ("secret code", 10_000),
        ("committee", 10_000),
        ("committee", 0),
    ] {
        let re = rlm_engine::scan::compile(pattern, true).unwrap();
        let mut times = Vec::new();
        let mut found = None;
        for _ in 0..3 {
            let t = Instant::now();
            found = Some(rlm_engine::scan::grep(&corpus, &re, limit, None).unwrap());
            times.push(t.elapsed().as_secs_f64());
        }
        let found = found.unwrap();
        println!(
            "scan  grep({pattern:?}, limit={limit}) over {mb} MB: {} lines, median {:.2} s ({:.0} MB/s)",
            found.total,
            median(times.clone()),
            mb as f64 / median(times)
        );
    }
}

fn main() {
    let which: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |name: &str| which.is_empty() || which.iter().any(|w| w == name);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if want("process") {
            bench_process().await;
        }
        if want("iteration") {
            bench_iteration().await;
        }
        if want("fanout") {
            bench_fanout().await;
        }
        if want("memory") {
            bench_memory().await;
        }
    });
    if want("scan") {
        bench_scan();
    }
}
