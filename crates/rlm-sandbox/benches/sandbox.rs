//! Sandbox benchmarks: `cargo bench -p rlm-sandbox --bench sandbox`.
//!
//! Prints a markdown table: worker cold start, warm start from the pool, an
//! empty cell's round trip, loading 10 MB / 100 MB of context, slicing cost on
//! one big string (ASCII and not) vs a list of documents, and `re.findall` /
//! `str.count` / `csv.reader` over 10 MB side by side with CPython (`python3`, when
//! installed); then the start and per-cell overhead of the CPython back-end
//! next to monty's (when bubblewrap can run here).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_sandbox::*;
use serde_json::Value;

struct NoHost;

impl HostHandler for NoHost {
    async fn handle(&self, _call: HostCall) -> Result<Value, HostError> {
        Ok(Value::Null)
    }
}

fn config() -> SandboxConfig {
    let mut c = SandboxConfig::new(WorkerCommand::new(env!("CARGO_BIN_EXE_rlm-sandbox-worker")));
    c.memory_limit_bytes = 2 << 30;
    c.cell_time_limit = Duration::from_secs(120);
    c
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Deterministic prose of `bytes` bytes (ASCII), one "document" per ~100 KB.
fn corpus(bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "refund",
        "policy",
        "allows",
        "returns",
        "within",
        "thirty",
        "days",
        "of",
        "purchase",
        "contact",
        "support",
        "for",
        "reference",
        "number",
        "and",
        "shipping",
        "details",
        "reflects",
        "committee",
    ];
    let mut s = String::with_capacity(bytes + 16);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while s.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
        s.push(if x.is_multiple_of(17) { '\n' } else { ' ' });
    }
    s.truncate(bytes);
    s
}

async fn cell_time(s: &mut Interpreter, code: &str) -> (Duration, String) {
    let h = Arc::new(NoHost);
    let r = s.run_cell(code, &h).await.expect("cell runs");
    if let Some(e) = &r.error {
        panic!("{code}: {e:?}");
    }
    (r.elapsed, r.value.unwrap_or_default())
}

fn python(code: &str, path: &std::path::Path) -> Option<(Duration, String)> {
    let script = format!(
        "import re, csv, io, time\ncontext = open({:?}).read()\nt = time.perf_counter()\nv = {code}\nprint(time.perf_counter() - t)\nprint(repr(v))",
        path.display().to_string()
    );
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut lines = text.lines();
    let secs: f64 = lines.next()?.parse().ok()?;
    Some((Duration::from_secs_f64(secs), lines.next()?.to_string()))
}

/// Start and per-cell costs of one back-end: cold start, warm start, an
/// empty cell, a cell with one host call, loading 10 MB.
async fn overhead(cfg: &SandboxConfig, rows: &mut Vec<(String, String, String)>) {
    let name = cfg.backend.as_str();
    let empty = InterpreterSpec::new().function("noop", HostFunctionKind::Sync);
    let mut cold = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let s = Interpreter::start(cfg, &empty).await.unwrap();
        cold.push(t.elapsed());
        s.close().await;
    }
    rows.push((
        format!("{name}: cold start (spawn + empty interpreter), median of 10"),
        ms(median(cold)),
        String::new(),
    ));
    let pool = WorkerPool::new(cfg.clone(), 1).await.unwrap();
    let mut warm = Vec::new();
    for _ in 0..10 {
        while pool.idle_count() < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let t = Instant::now();
        let s = pool.start_interpreter(&empty).await.unwrap();
        warm.push(t.elapsed());
        s.close().await;
    }
    rows.push((
        format!("{name}: interpreter start from the warm pool, median of 10"),
        ms(median(warm)),
        String::new(),
    ));
    let mut s = Interpreter::start(cfg, &empty).await.unwrap();
    let h = Arc::new(NoHost);
    for (label, code) in [
        ("empty cell", "pass"),
        ("cell with one host call", "noop()"),
    ] {
        for _ in 0..50 {
            s.run_cell(code, &h).await.unwrap();
        }
        let mut trips = Vec::new();
        for _ in 0..500 {
            let t = Instant::now();
            s.run_cell(code, &h).await.unwrap();
            trips.push(t.elapsed());
        }
        rows.push((
            format!("{name}: {label} round trip, median of 500"),
            ms(median(trips)),
            String::new(),
        ));
    }
    s.close().await;
    let spec = InterpreterSpec::new().input("context", InputValue::Text(corpus(10_000_000)));
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let s = Interpreter::start(cfg, &spec).await.unwrap();
        times.push(t.elapsed());
        s.close().await;
    }
    rows.push((
        format!("{name}: start with a 10 MB context (incl. spawn), median of 3"),
        ms(median(times)),
        String::new(),
    ));
}

#[tokio::main]
async fn main() {
    let cfg = config();
    let mut rows: Vec<(String, String, String)> = Vec::new();

    // Start and per-cell costs (the CPython back-end's are measured at the end).
    overhead(&cfg, &mut rows).await;

    // Context loading into a warm worker.
    for mb in [10usize, 100] {
        let text = corpus(mb * 1_000_000);
        let spec = InterpreterSpec::new().input("context", InputValue::Text(text));
        let mut times = Vec::new();
        for _ in 0..3 {
            let w = Worker::spawn(&cfg).await.unwrap();
            let t = Instant::now();
            let s = w.start_interpreter(&cfg, &spec).await.unwrap();
            times.push(t.elapsed());
            s.close().await;
        }
        let t = Instant::now();
        let s = Interpreter::start(&cfg, &spec).await.unwrap();
        let total = t.elapsed();
        s.close().await;
        rows.push((
            format!("load {mb} MB context as one str (median of 3)"),
            ms(median(times)),
            format!("fresh worker incl. spawn: {}", ms(total)),
        ));
    }

    // Slicing: one 50 MB string vs a list of 500 documents of 100 KB.
    let big = corpus(50_000_000);
    let docs: Vec<String> = (0..500)
        .map(|i| big[i * 100_000..(i + 1) * 100_000].to_string())
        .collect();
    let spec = InterpreterSpec::new()
        .input("context", InputValue::Text(big.clone()))
        .input("docs", InputValue::TextList(docs));
    let mut s = Interpreter::start(&cfg, &spec).await.unwrap();
    let (t_str, _) = cell_time(
        &mut s,
        "n = 0\nfor i in range(500):\n    n += len(context[i * 100000 + 50000:i * 100000 + 51000])\nn",
    )
    .await;
    let (t_list, _) = cell_time(
        &mut s,
        "n = 0\nfor i in range(500):\n    n += len(docs[i][50000:51000])\nn",
    )
    .await;
    rows.push((
        "500 slices of 1,000 chars from a 50 MB str".into(),
        ms(t_str),
        String::new(),
    ));
    rows.push((
        "500 slices of 1,000 chars from a list of 500 x 100 KB str".into(),
        ms(t_list),
        String::new(),
    ));
    s.close().await;
    // The same on text that is not ASCII (every ~50th character accented),
    // plus indexing single characters.
    let accented: String = big
        .char_indices()
        .map(|(i, c)| if i % 50 == 0 && c == 'e' { 'é' } else { c })
        .collect();
    let spec = InterpreterSpec::new().input("context", InputValue::Text(accented));
    let mut s = Interpreter::start(&cfg, &spec).await.unwrap();
    let (t_first, _) = cell_time(&mut s, "len(context[1000:2000])").await;
    let (t_uni, _) = cell_time(
        &mut s,
        "n = 0\nfor i in range(500):\n    n += len(context[i * 99000 + 50000:i * 99000 + 51000])\nn",
    )
    .await;
    let (t_idx, _) = cell_time(
        &mut s,
        "n = 0\nfor i in range(500):\n    n += ord(context[i * 99000 + 7])\nn",
    )
    .await;
    rows.push((
        "500 slices of 1,000 chars from a 50 MB str, not ASCII".into(),
        ms(t_uni),
        format!("first slice (builds the index): {}", ms(t_first)),
    ));
    rows.push((
        "500 single characters `context[i]` of the same str".into(),
        ms(t_idx),
        String::new(),
    ));
    s.close().await;

    // re.findall / str.count over 10 MB vs CPython.
    let text = corpus(10_000_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctx.txt");
    std::fs::write(&path, &text).unwrap();
    let spec = InterpreterSpec::new().input("context", InputValue::Text(text));
    let mut s = Interpreter::start(&cfg, &spec).await.unwrap();
    cell_time(&mut s, "import re, csv, io").await;
    for (label, code) in [
        (
            "re.findall(r'\\bref\\w+', context) over 10 MB",
            "len(re.findall(r'\\bref\\w+', context))",
        ),
        (
            "context.count('refund') over 10 MB",
            "context.count('refund')",
        ),
        (
            "context.lower().count('policy') over 10 MB",
            "context.lower().count('policy')",
        ),
        (
            "len(context.splitlines()) over 10 MB",
            "len(context.splitlines())",
        ),
        (
            "len(list(csv.reader(io.StringIO(context)))) over 10 MB",
            "len(list(csv.reader(io.StringIO(context))))",
        ),
    ] {
        let (t, v) = cell_time(&mut s, code).await;
        let py = match python(code, &path) {
            Some((pt, pv)) => {
                let same = if pv == v { "" } else { " (DIFFERENT RESULT)" };
                format!("python3: {}{same}", ms(pt))
            }
            None => "python3 not available".into(),
        };
        rows.push((label.into(), ms(t), py));
    }
    s.close().await;

    // The CPython back-end next to monty.
    match cpython::launcher(None) {
        Ok(launcher) => {
            let mut py = cfg.clone();
            py.backend = SandboxBackend::CPython;
            overhead(&py, &mut rows).await;
            rows.push((
                "cpython back-end".into(),
                String::new(),
                launcher.describe(),
            ));
        }
        Err(e) => rows.push(("cpython back-end".into(), "skipped".into(), e.to_string())),
    }

    println!("| benchmark | rlm-sandbox | note |\n|---|---|---|");
    for (a, b, c) in rows {
        println!("| {a} | {b} | {c} |");
    }
}
