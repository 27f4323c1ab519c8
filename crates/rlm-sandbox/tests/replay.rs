//! Real model-written cells (tests/data, see REPLAY_DATA.md) through the
//! sandbox, compared cell by cell with CPython 3.11, on both back-ends.

use crate::common;

use rlm_sandbox::SandboxConfig;
use rlm_sandbox::replay::{ReplayReport, run_replay};

/// Share of the cells CPython runs that must also run on monty with the same
/// stdout (289 of 291: one needs `sympy`, one prints an unseeded random number).
const TARGET_PASS_RATE: f64 = 0.98;
/// The same on the CPython back-end (one cell prints an unseeded random number).
const TARGET_CPYTHON_PASS_RATE: f64 = 0.99;

/// Replays every trajectory on `config` and checks what holds on both
/// back-ends: the pass rate, no dead interpreter, and every cell CPython
/// fails on fails here too.
async fn replay_meets(mut config: SandboxConfig, target: f64) -> ReplayReport {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let traj = std::fs::read_to_string(data.join("trajectories.jsonl")).unwrap();
    let reference = std::fs::read_to_string(data.join("cpython_results.jsonl")).unwrap();
    // The slowest cell takes ~1 s in release and ~10 s in an unoptimized build;
    // CPython's reference run allowed 60 s per cell.
    config.cell_time_limit = std::time::Duration::from_secs(120);
    config.memory_limit_bytes = 2 << 30;
    let report = run_replay(&config, &traj, &reference).await.unwrap();
    println!("{}", report.summary());
    let (pass, total) = report.pass_counts();
    assert!(
        total > 250,
        "expected ~290 model cells that CPython runs, got {total}"
    );
    assert!(
        report.pass_rate() >= target,
        "{pass}/{total} below target\n{}",
        report.summary()
    );
    // No interpreter may die: failures must be Python errors, not crashes.
    for c in &report.cells {
        if let Some(e) = &c.error {
            assert!(!e.contains("worker died"), "{} cell {}: {e}", c.id, c.cell);
        }
    }
    // Cells CPython rejects must fail here too (models' own bugs).
    let cpython_errors: Vec<_> = report
        .cells
        .iter()
        .filter(|c| !c.harness && c.cpython_status == "error")
        .collect();
    let also_fail = cpython_errors.iter().filter(|c| !c.ran).count();
    assert_eq!(
        also_fail,
        cpython_errors.len(),
        "cells CPython fails on but the sandbox runs"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_pass_rate_meets_target() {
    replay_meets(common::config(), TARGET_PASS_RATE).await;
}

/// The same cells on the CPython back-end (skipped where it cannot start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_on_cpython() {
    let Some(config) = common::cpython_config() else {
        return;
    };
    let report = replay_meets(config, TARGET_CPYTHON_PASS_RATE).await;
    // CPython's own harness cells (`hasattr(context, '__len__')`) pass too.
    let harness = report.cells.iter().filter(|c| c.harness).count();
    let harness_pass = report
        .cells
        .iter()
        .filter(|c| c.harness && c.passed())
        .count();
    assert_eq!(harness_pass, harness, "{}", report.summary());
}
