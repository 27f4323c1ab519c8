//! Host calls cannot move unbounded data into the parent: `search()`
//! queries, findings (per call and per run) and committed answers are
//! capped, each refusal a Python `ValueError` in the cell that says what to
//! do, and the interpreter lives on. Run through the REPL a person gets
//! (`ReplConsole`), which answers host calls exactly as an agent's does.

use crate::common;

use rlm_engine::console::ReplConsole;
use rlm_sandbox::{SandboxConfig, WorkerPool};

async fn console() -> (common::TestStore, ReplConsole) {
    let ts = common::needle_store();
    let pool = WorkerPool::new(SandboxConfig::new(common::worker()), 1)
        .await
        .unwrap();
    let c = ReplConsole::without_model(
        pool,
        common::config(),
        ts.corpus.clone(),
        "no model in this test".into(),
    )
    .await
    .unwrap();
    (ts, c)
}

async fn error_of(c: &mut ReplConsole, code: &str) -> (String, String) {
    let r = c.run_cell(code).await.expect("the interpreter lives");
    let e = r.error.unwrap_or_else(|| panic!("{code:?} raised nothing"));
    (e.exc_type, e.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_queries_are_capped() {
    let (_ts, mut c) = console().await;
    let (t, m) = error_of(&mut c, "search('secret ' * 200000)").await;
    assert_eq!(t, "ValueError");
    assert!(
        m.contains("the limit is 10000") && m.contains("a few keywords"),
        "{m}"
    );
    let (t, m) = error_of(&mut c, "search('a ' * 2000)").await;
    assert_eq!(t, "ValueError");
    assert!(m.contains("2000 words; the limit is 1000"), "{m}");
    // Still answering.
    let r = c
        .run_cell("search('secret code')[0]['path']")
        .await
        .unwrap();
    assert_eq!(r.value.as_deref(), Some("'docs/b_notes.txt'"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_capped_per_call_and_per_run() {
    let (_ts, mut c) = console().await;
    let (t, m) = error_of(&mut c, "add_finding('x' * 20000)").await;
    assert_eq!(t, "ValueError");
    assert!(m.contains("20000 characters; the limit is 10000"), "{m}");
    let (_, m) = error_of(&mut c, "add_finding('ok', 's' * 5000)").await;
    assert!(m.contains("source"), "{m}");
    let (t, m) = error_of(
        &mut c,
        "for i in range(1200):\n    add_finding(f'fact {i}')",
    )
    .await;
    assert_eq!(t, "ValueError");
    assert!(m.contains("no more findings"), "{m}");
    assert_eq!(c.findings().len(), 1000);
    let (_, m) = error_of(&mut c, "add_finding('one more')").await;
    assert!(m.contains("1000 findings"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_answers_are_capped() {
    let (_ts, mut c) = console().await;
    let (t, m) = error_of(&mut c, "FINAL('y' * 1500000)").await;
    assert_eq!(t, "ValueError");
    assert!(m.contains("the limit is 1000000"), "{m}");
    assert!(c.take_final().await.is_none());
    let r = c.run_cell("FINAL('short answer')").await.unwrap();
    assert!(r.error.is_none());
    assert_eq!(c.take_final().await.unwrap().text.unwrap(), "short answer");
}
