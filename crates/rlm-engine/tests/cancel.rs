//! Cancellation in a process of its own, so counting sandbox worker
//! processes is not disturbed by other tests' workers.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlm_engine::{AskRequest, CancelToken};
use rlm_llm::testing::{Reply, Script, ScriptedServer};

fn sandbox_children() -> usize {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // pid (comm) state ppid ...
            let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            let ppid = after.split_whitespace().nth(1).unwrap_or("");
            ppid == me && stat.contains("rlm-sandbox")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancellation_keeps_the_trace_and_kills_the_worker() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            Reply::text(repl("add_finding('partial fact')\nprint(1)")),
            Reply::text("FINAL(late)").with_latency_ms(10_000),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let path = ts.dir.path().join("cancel.jsonl");
    let mut req = AskRequest::new("q");
    req.cancel = cancel;
    req.trace = std::sync::Arc::new(rlm_engine::Trace::to_file(&path).unwrap());
    let watcher = tokio::spawn(async move {
        // Cancel while the second model call hangs.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let during = sandbox_children();
        c2.cancel();
        during
    });
    let t0 = Instant::now();
    let answer = engine.ask(ts.corpus.clone(), req).await.unwrap();
    let during = watcher.await.unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "cancel took {:?}",
        t0.elapsed()
    );
    assert!(answer.partial);
    assert_eq!(answer.partial_reason.as_deref(), Some("cancelled"));
    assert!(answer.answer.contains("partial fact"), "{}", answer.answer);
    let records = rlm_engine::trace::read_trace(&path).unwrap();
    let types = event_types(&records);
    assert!(types.contains(&"cell_output".to_string()));
    assert_eq!(types.last().map(String::as_str), Some("run_finished"));
    // The session's worker is gone; only the pool's idle worker may remain.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = sandbox_children();
    assert!(
        after < during,
        "worker not killed: {during} sandbox children during the run, {after} after"
    );
}
