//! Hostile inputs at the edges of the sandbox: the pipes, the frames, the worker
//! process and its parent. Each test is bounded in time, so a regression fails
//! instead of hanging.
//!
//! Some tests need a second process: they run this test binary again as a
//! helper (`helper_process`, ignored unless `RLM_HOSTILE_HELPER` names a role).

mod common;

use std::time::{Duration, Instant};

/// The binaries that host a worker install this allocator; so does this test
/// binary, which is the parent of its workers, like `rlm` is.
#[global_allocator]
static ALLOCATOR: rlm_sandbox::LimitedAllocator = rlm_sandbox::LimitedAllocator;

/// Which helper role this process plays.
const HELPER_ENV: &str = "RLM_HOSTILE_HELPER";

/// A command running this test binary as a helper process in `role`.
fn helper(role: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "helper_process",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER_ENV, role)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    cmd
}

/// Runs `fut`, failing the test when it takes longer than `limit`.
async fn within<T>(limit: Duration, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {limit:?}"),
    }
}

#[test]
#[ignore = "a helper process of the other tests (RLM_HOSTILE_HELPER names its role)"]
fn helper_process() {
    match std::env::var(HELPER_ENV).as_deref() {
        Ok("alloc") => refused_allocations(),
        Ok(role) => panic!("unknown helper role {role}"),
        Err(_) => {}
    }
}

/// Helper: allocations the system refuses, outside a worker.
fn refused_allocations() {
    let huge = std::hint::black_box(1usize << 50);
    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve(huge).is_err());
    println!("try_reserve failed cleanly");
    let v = vec![1u8; huge];
    println!("unreachable: {}", v.len());
}

/// The worker's allocator is installed in `rlm` for every command: outside a
/// worker, a refused allocation is the caller's to handle (`try_reserve` fails,
/// an infallible allocation aborts with the standard message), never "monty
/// worker: allocation … failed" with the worker's memory-limit exit code.
#[tokio::test]
async fn allocation_failures_outside_a_worker_are_not_reported_as_the_worker() {
    let t0 = Instant::now();
    let out = within(
        Duration::from_secs(30),
        "the allocation helper",
        helper("alloc").output(),
    )
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("try_reserve failed cleanly"),
        "{stdout}\n{stderr}"
    );
    assert!(!stderr.contains("monty worker"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "memory allocation of {} bytes failed",
            1usize << 50
        )),
        "{stderr}"
    );
    assert_ne!(out.status.code(), Some(65), "{stderr}");
    eprintln!("took {:?}", t0.elapsed());
}
