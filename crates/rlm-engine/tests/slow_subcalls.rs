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
