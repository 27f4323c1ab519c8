//! Load on 1, 2 and 4 `rlm serve` nodes over one PostgreSQL store, on
//! loopback: questions per second and p50/p99 latency as client
//! concurrency grows, with the scripted model answering every call after
//! 200 ms (each question is two model calls and one sandbox cell, so at
//! least 400 ms). Clients spread questions over the nodes round-robin, as
//! a load balancer would.
//!
//! ```text
//! cargo build --release -p rlm
//! cargo bench -p rlm --bench cluster_load            # every row
//! RLM_BENCH_NODES=1,2 RLM_BENCH_CONCURRENCY=1,16 cargo bench -p rlm --bench cluster_load
//! RLM_BENCH_STORE=folder RLM_BENCH_NODES=1 cargo bench -p rlm --bench cluster_load   # baseline: one node over a store folder
//! ```
//!
//! PostgreSQL: `RLM_TEST_POSTGRES_URL`, else the throwaway server of
//! `scripts/start-postgres` (as the tests). The binary: `$RLM_BIN` or
//! `target/release/rlm`. Every node runs with `--max-runs 64` and a
//! cluster-wide model-call limit of 256, so neither limit is what is
//! measured.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer, TEST_API_KEY};

const MODEL_LATENCY_MS: u64 = 200;

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

fn list(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

struct Node {
    child: Child,
    addr: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_node(bin: &Path, dir: &Path, url: &str, model: &ScriptedServer) -> Node {
    let mut child = Command::new(bin)
        .current_dir(dir)
        .args(["serve", "--store", url, "--addr", "127.0.0.1:0"])
        .args(["--max-runs", "64"])
        .env("RLM_PROVIDER", "openai")
        .env("RLM_BASE_URL", model.base_url())
        .env("RLM_API_KEY", TEST_API_KEY)
        .env("RLM_PRIMARY_MODEL", "root-model")
        .env("RLM_SUB_MODEL", "sub-model")
        .env("RLM_MAX_CONCURRENT", "256")
        .env("RLM_CLUSTER_MAX_CONCURRENT", "256")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("rlm serve starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_string();
    Node { child, addr }
}

/// One `POST /api/chat`; true when answered (200, run done).
fn ask(addr: &str, question: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = format!(r#"{{"question": "{question}"}}"#);
    let sent = write!(
        s,
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut text = String::new();
    sent.is_ok()
        && s.read_to_string(&mut text).is_ok()
        && text.starts_with("HTTP/1.1 200")
        && text.contains("\"status\":\"done\"")
}

struct Row {
    questions: usize,
    failed: usize,
    secs: f64,
    p50: f64,
    p99: f64,
}

/// `total` questions from `concurrency` clients over `nodes`.
fn measure(nodes: &[Node], concurrency: usize, total: usize) -> Row {
    let next = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(AtomicUsize::new(0));
    let addrs: Arc<Vec<String>> = Arc::new(nodes.iter().map(|n| n.addr.clone()).collect());
    let started = Instant::now();
    let clients: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, latencies, failed, addrs) = (
                next.clone(),
                latencies.clone(),
                failed.clone(),
                addrs.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= total {
                        return;
                    }
                    let t = Instant::now();
                    let addr = &addrs[i % addrs.len()];
                    if ask(addr, &format!("What is the secret code? ({i})")) {
                        latencies
                            .lock()
                            .unwrap()
                            .push(t.elapsed().as_secs_f64() * 1000.0);
                    } else {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let mut l = latencies.lock().unwrap().clone();
    l.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        if l.is_empty() {
            f64::NAN
        } else {
            l[((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1]
        }
    };
    Row {
        questions: l.len(),
        failed: failed.load(Ordering::SeqCst),
        secs,
        p50: pick(0.50),
        p99: pick(0.99),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let bin = rlm_bin();
    let Some(db) = rlm_store_pg::testing::test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("notes.txt"),
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("lease.md"),
        "# Lease\n\nThe tenant shall give ninety days notice.\n",
    )
    .unwrap();
    // The baseline: one node over a store folder (sessions.sqlite, runs/).
    let folder = std::env::var("RLM_BENCH_STORE").is_ok_and(|v| v == "folder");
    let store = if folder {
        dir.path().join(".rlm").to_string_lossy().into_owned()
    } else {
        db.url().to_string()
    };
    let out = Command::new(&bin)
        .current_dir(dir.path())
        .args(["index", "docs", "--store", &store])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model = ScriptedServer::spawn(
        Script::new()
            .on(
                Matcher::any_contains("REPL output"),
                Reply::text("FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])")
                    .with_latency_ms(MODEL_LATENCY_MS),
            )
            .otherwise(
                Reply::text("```repl\nprint(context[:300])\n```").with_latency_ms(MODEL_LATENCY_MS),
            ),
    );
    let node_counts = list("RLM_BENCH_NODES", &[1, 2, 4]);
    let concurrencies = list("RLM_BENCH_CONCURRENCY", &[1, 4, 16, 64]);
    println!(
        "rlm serve nodes over {}, scripted model {MODEL_LATENCY_MS} ms per call, 2 calls per question; load average before: {}",
        if folder {
            "a store folder"
        } else {
            "one PostgreSQL store"
        },
        load_average()
    );
    println!(
        "| nodes | clients | questions | failed | questions/s | p50 ms | p99 ms | load avg (1/5/15 min) after |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &node_counts {
        let nodes: Vec<Node> = (0..n)
            .map(|_| start_node(&bin, dir.path(), &store, &model))
            .collect();
        // Warm-up: every node answers a few before the clock starts.
        measure(&nodes, 2 * n, 4 * n);
        for &c in &concurrencies {
            let total = (c * 6).max(20);
            let row = measure(&nodes, c, total);
            println!(
                "| {n} | {c} | {} | {} | {:.1} | {:.0} | {:.0} | {} |",
                row.questions,
                row.failed,
                row.questions as f64 / row.secs,
                row.p50,
                row.p99,
                load_average()
            );
        }
        drop(nodes);
    }
}
