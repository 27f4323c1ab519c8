//! Time spent waiting for sub-calls does not count against the sandbox's
//! per-cell interpreter time limit (a fan-out may take minutes).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rlm_llm::testing::{Reply, Script, ScriptedServer};
use rlm_sandbox::{SandboxConfig, WorkerPool};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sub_calls_longer_than_the_cell_time_limit() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(leaf(), Reply::text("slow answer").with_latency_ms(2500))
            .on_sequence(
                root(),
                [
                    repl("r = llm_query('q')\nprint(r)"),
                    "FINAL(ok)".to_string(),
                ],
            ),
    )
    .await;
    let mut sandbox = SandboxConfig::new(worker());
    sandbox.cell_time_limit = Duration::from_secs(1);
    sandbox.kill_grace = Duration::from_millis(500);
    let pool = WorkerPool::new(sandbox, 1).await.unwrap();
    let engine = rlm_engine::Engine::new(Arc::new(server.client()), pool, config());
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "ok");
    let reqs = server.requests();
    let second_root = reqs
        .iter()
        .filter(|r| !r.system().is_empty())
        .nth(1)
        .unwrap();
    assert!(
        second_root.last_message().contains("slow answer"),
        "{}",
        second_root.last_message()
    );
}

/// The other side: time in the engine's own lookups (`search()` and the
/// like) is the cell's. A cell of searches that runs past the cell time
/// limit ends there with a `TimeoutError` the model reads in its next turn
/// (a `search(k=50)` over one huge document once ran 21.9 s under a 5 s
/// limit), and the variables it made are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lookups_past_the_cell_time_limit_end_the_cell() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("n = 0\nwhile True:\n    n = n + len(search('secret code', k=50))"),
            repl("print('kept', n > 0)"),
            "FINAL(ok)".to_string(),
        ],
    ))
    .await;
    let mut sandbox = SandboxConfig::new(worker());
    sandbox.cell_time_limit = Duration::from_secs(1);
    sandbox.kill_grace = Duration::from_secs(2);
    let pool = WorkerPool::new(sandbox, 1).await.unwrap();
    let engine = rlm_engine::Engine::new(Arc::new(server.client()), pool, config());
    let started = std::time::Instant::now();
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "ok");
    let roots: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !r.system().is_empty())
        .collect();
    let told = roots[1].last_message();
    assert!(
        told.contains("TimeoutError") && told.contains("its lookups included"),
        "{told}"
    );
    assert!(
        roots[2].last_message().contains("kept True"),
        "{}",
        roots[2].last_message()
    );
    // Ended at the limit, not at the grace or later.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
