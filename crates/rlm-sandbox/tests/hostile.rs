//! Hostile inputs at the edges of the sandbox: the pipes, the frames, the worker
//! process and its parent. Each test is bounded in time, so a regression fails
//! instead of hanging.
//!
//! Some tests need a second process: they run this test binary again as a
//! helper (`helper_process`, ignored unless `RLM_HOSTILE_HELPER` names a role).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_sandbox::*;
use serde_json::Value;

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

/// Host functions of these tests: `llm_query` / `llm_query_async` answer their
/// argument, `FINAL` and `add_finding` answer `None`, `hang` / `hang_async`
/// never answer.
struct Host;

impl HostHandler for Host {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        match call.name.as_str() {
            "llm_query" | "llm_query_async" => {
                Ok(call.args.first().cloned().unwrap_or(Value::Null))
            }
            "FINAL" | "add_finding" => Ok(Value::Null),
            "hang" | "hang_async" => std::future::pending().await,
            other => Err(HostError::runtime(format!("unexpected host call {other}"))),
        }
    }
}

fn spec() -> InterpreterSpec {
    InterpreterSpec::new()
        .function("llm_query", HostFunctionKind::Sync)
        .function("llm_query_async", HostFunctionKind::Async)
        .function("FINAL", HostFunctionKind::Sync)
        .function("add_finding", HostFunctionKind::Sync)
        .function("hang", HostFunctionKind::Sync)
        .function("hang_async", HostFunctionKind::Async)
}

async fn start(config: &SandboxConfig) -> (Interpreter, Arc<Host>) {
    let interp = within(
        Duration::from_secs(30),
        "starting an interpreter",
        Interpreter::start(config, &spec()),
    )
    .await
    .expect("the interpreter starts");
    (interp, Arc::new(Host))
}

/// Runs a cell that must finish within `limit`; returns the result and its time.
async fn run(
    interp: &mut Interpreter,
    host: &Arc<Host>,
    code: &str,
    limit: Duration,
) -> (Result<CellResult, SandboxError>, Duration) {
    let t0 = Instant::now();
    let r = within(limit, code, interp.run_cell(code, host)).await;
    (r, t0.elapsed())
}

/// The interpreter still runs cells and kept its variables.
async fn still_usable(interp: &mut Interpreter, host: &Arc<Host>) {
    let (r, _) = run(interp, host, "kept", Duration::from_secs(10)).await;
    let r = r.expect("the interpreter lives on");
    assert_eq!(r.value.as_deref(), Some("'kept'"), "{:?}", r.error);
}

/// 3,000 async host calls at once: the worker writes calls while the parent
/// writes answers, and neither may block the other (it deadlocked past ~2,000).
#[tokio::test]
async fn a_3000_way_gather_completes() {
    let (mut interp, host) = start(&common::config()).await;
    let code = "import asyncio\n\
                r = await asyncio.gather(*[llm_query_async(str(i)) for i in range(3000)])\n\
                (len(r), r[0], r[2999])";
    let (r, took) = run(&mut interp, &host, code, Duration::from_secs(60)).await;
    let r = r.expect("the cell completes");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.value.as_deref(), Some("(3000, '0', '2999')"));
    assert_eq!(r.host_calls, 3000);
    eprintln!("3,000-way gather: {took:?}");
}

/// Host calls that never finish end the cell at the host-wait limit with a
/// clear error; the interpreter and its variables live on.
#[tokio::test]
async fn host_calls_that_never_finish_end_the_cell_at_its_limit() {
    let mut config = common::config();
    config.cell_time_limit = Duration::from_secs(1);
    config.kill_grace = Duration::from_secs(1);
    config.host_wait_limit = Duration::from_secs(1);
    let bound = config.cell_time_limit + config.kill_grace + Duration::from_secs(3);
    let (mut interp, host) = start(&config).await;
    interp
        .run_cell("kept = 'kept'", &host)
        .await
        .expect("a plain cell runs");
    for code in [
        "hang('x')",
        "import asyncio\nawait asyncio.gather(*[hang_async(str(i)) for i in range(50)])",
        // Answered calls mixed with one that never is.
        "import asyncio\nawait asyncio.gather(llm_query_async('a'), hang_async('b'))",
        // A cell that catches the error still ends.
        "try:\n    hang('x')\nexcept Exception:\n    pass\nwhile True:\n    hang('y')",
    ] {
        let (r, took) = run(&mut interp, &host, code, bound).await;
        let r = r.expect("the interpreter survives");
        let e = r.error.unwrap_or_else(|| panic!("{code}: should fail"));
        assert_eq!(e.exc_type, "TimeoutError", "{code}: {e:?}");
        assert!(e.message.contains("host calls"), "{code}: {}", e.message);
        assert!(took >= config.host_wait_limit, "{code}: {took:?}");
        eprintln!("{code:?}: ended after {took:?}: {}", e.message);
        still_usable(&mut interp, &host).await;
    }
}
