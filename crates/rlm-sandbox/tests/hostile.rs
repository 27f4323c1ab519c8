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
use serde_json::{Value, json};

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
        Ok("orphan") => parent_of_a_busy_worker(),
        Ok(role) => panic!("unknown helper role {role}"),
        Err(_) => {}
    }
}

/// Helper: starts a worker running `while True: pass`, prints its pid, waits
/// to be killed.
fn parent_of_a_busy_worker() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut config = common::config();
        config.cell_time_limit = Duration::from_secs(600);
        let (mut interp, host) = start(&config).await;
        println!("WORKER_PID={}", interp.worker_pid().unwrap());
        let _ = interp.run_cell("while True:\n    pass", &host).await;
    });
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
/// never answer, `lookup` answers after 100 ms of the cell's own time and
/// `slow_model` after 1.5 s of host time.
struct Host;

impl HostHandler for Host {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        match call.name.as_str() {
            "llm_query" | "llm_query_async" => {
                Ok(call.args.first().cloned().unwrap_or(Value::Null))
            }
            "FINAL" | "add_finding" => Ok(Value::Null),
            // Answers the worker could not read as they are.
            "deep" => Ok(nested(200)),
            "big" => Ok(Value::String("b".repeat(300_000_000))),
            "hang" | "hang_async" => std::future::pending().await,
            "lookup" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(Value::from(1))
            }
            "slow_model" => {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                Ok(Value::from("answer"))
            }
            other => Err(HostError::runtime(format!("unexpected host call {other}"))),
        }
    }

    fn counts_as_cell_time(&self, call: &HostCall) -> bool {
        call.name == "lookup"
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
        .function("deep", HostFunctionKind::Sync)
        .function("big", HostFunctionKind::Sync)
        .function("lookup", HostFunctionKind::Sync)
        .function("slow_model", HostFunctionKind::Sync)
}

/// A JSON list nested `levels` deep.
fn nested(levels: usize) -> Value {
    (0..levels).fold(json!([]), |inner, _| json!([inner]))
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

/// Lookups the host answers itself count against the cell's time limit (a
/// loop of 0.1 s searches ran far past `--cell-timeout`): the cell ends with
/// a `TimeoutError` at the limit, without the grace, and its variables are
/// kept; a model call longer than the limit does not count against it.
#[tokio::test]
async fn lookups_count_against_the_cell_time_limit_and_model_calls_do_not() {
    let mut config = common::config();
    config.cell_time_limit = Duration::from_secs(1);
    config.kill_grace = Duration::from_secs(3);
    let (mut interp, host) = start(&config).await;
    interp.run_cell("kept = 'kept'", &host).await.unwrap();
    let code = "n = 0\nfor i in range(100000):\n    n = n + lookup()";
    let (r, took) = run(&mut interp, &host, code, Duration::from_secs(20)).await;
    let e = r
        .expect("the interpreter survives")
        .error
        .expect("the cell fails");
    assert_eq!(e.exc_type, "TimeoutError", "{e:?}");
    assert!(e.message.contains("time limit"), "{}", e.message);
    assert!(
        took < config.cell_time_limit + config.kill_grace,
        "{took:?}"
    );
    let n = interp.get_var("n").await.unwrap().expect("n is kept");
    assert!((5..=11).contains(&n.as_u64().unwrap()), "{n}");
    let (r, took) = run(&mut interp, &host, "slow_model()", Duration::from_secs(20)).await;
    let r = r.expect("a model call runs");
    assert_eq!(r.error, None, "{took:?}");
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    still_usable(&mut interp, &host).await;
}

/// Runs `code`, which must end with a Python exception (returned).
async fn error_of(interp: &mut Interpreter, host: &Arc<Host>, code: &str) -> CellError {
    let (r, took) = run(interp, host, code, Duration::from_secs(60)).await;
    let r = r.unwrap_or_else(|e| panic!("{code:?}: the interpreter must survive: {e}"));
    eprintln!("{code:?}: {took:?}");
    r.error
        .unwrap_or_else(|| panic!("{code:?} should fail; printed {:?}", r.stdout))
}

/// A value nested deeper than the other side can read, given to a host function,
/// is a `ValueError` in the cell (it ended the interpreter with "sandbox protocol
/// error"); so is such an answer. Variables: `get_var` refuses, `set_var` too,
/// the interpreter lives on.
#[tokio::test]
async fn values_nested_too_deep_are_refused_and_the_interpreter_lives() {
    let t0 = Instant::now();
    let (mut interp, host) = start(&common::config()).await;
    interp.run_cell("kept = 'kept'", &host).await.unwrap();
    let lists = "x = []\nfor i in range(200):\n    x = [x]\n";
    let dicts = "x = {}\nfor i in range(200):\n    x = {'k': x}\n";
    for (code, name) in [
        (format!("{lists}FINAL(x)"), "FINAL"),
        (format!("{lists}add_finding(x)"), "add_finding"),
        (format!("{dicts}add_finding(text=x)"), "add_finding"),
        (format!("{lists}llm_query(('t', x))"), "llm_query"),
        (
            format!("{lists}await llm_query_async(x)"),
            "llm_query_async",
        ),
        ("deep()".to_string(), "deep"),
    ] {
        let e = error_of(&mut interp, &host, &code).await;
        assert_eq!(e.exc_type, "ValueError", "{code}: {e:?}");
        assert!(
            e.message.contains("nested too deep"),
            "{code}: {}",
            e.message
        );
        assert!(e.message.contains("100 levels"), "{code}: {}", e.message);
        assert!(e.message.contains(name), "{code}: {}", e.message);
        still_usable(&mut interp, &host).await;
    }
    // The error is an ordinary, catchable exception; 100 levels still cross.
    let code = format!(
        "{lists}try:\n    FINAL(x)\nexcept ValueError:\n    y = []\n    for i in range(99):\n        y = [y]\n    FINAL(y)\n'caught'"
    );
    let (r, _) = run(&mut interp, &host, &code, Duration::from_secs(10)).await;
    assert_eq!(r.unwrap().value.as_deref(), Some("'caught'"));
    // The cell's value is its repr; the variable cannot be read as JSON.
    let (r, _) = run(
        &mut interp,
        &host,
        &format!("{lists}x"),
        Duration::from_secs(10),
    )
    .await;
    let r = r.unwrap();
    assert!(r.value.as_deref().unwrap().starts_with("[[[[[["), "{r:?}");
    let err = interp.get_var("x").await.unwrap_err();
    assert!(matches!(err, SandboxError::Value(_)), "{err}");
    assert!(
        err.to_string().contains("variable x is nested too deep"),
        "{err}"
    );
    let err = interp.set_var("z", nested(200)).await.unwrap_err();
    assert!(matches!(err, SandboxError::Value(_)), "{err}");
    assert!(interp.is_alive());
    still_usable(&mut interp, &host).await;
    let too_deep = InterpreterSpec::new().input("j", InputValue::Json(nested(200)));
    let err = Interpreter::start(&common::config(), &too_deep)
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");
    eprintln!("took {:?}", t0.elapsed());
}

/// A host call's argument over the frame limit is a `ValueError` in the cell (the
/// worker was cut off and reported as "exited with code 0"); so is such an
/// answer, a variable is refused, and a cell's value and error message are cut.
#[tokio::test]
async fn values_over_the_frame_limit_are_refused_and_the_interpreter_lives() {
    let t0 = Instant::now();
    let mut config = common::config();
    config.memory_limit_bytes = 3 << 30;
    let (mut interp, host) = start(&config).await;
    interp
        .run_cell("kept = 'kept'\ns = 'a' * 300_000_000", &host)
        .await
        .unwrap();
    for (code, name) in [
        ("llm_query(s)", "llm_query"),
        ("add_finding(text=s)", "add_finding"),
        ("await llm_query_async([s])", "llm_query_async"),
        ("big()", "big"),
    ] {
        let e = error_of(&mut interp, &host, code).await;
        assert_eq!(e.exc_type, "ValueError", "{code}: {e:?}");
        assert!(
            e.message
                .contains(&format!("the argument of {name} is 3000000"))
                || e.message
                    .contains(&format!("the answer of {name} is 3000000")),
            "{code}: {}",
            e.message
        );
        assert!(
            e.message
                .contains(&format!("the limit is {} bytes", protocol::MAX_VALUE_BYTES)),
            "{code}: {}",
            e.message
        );
        still_usable(&mut interp, &host).await;
    }
    let (r, _) = run(&mut interp, &host, "s", Duration::from_secs(60)).await;
    let value = r.unwrap().value.unwrap();
    assert!(value.len() < 2_000_000, "{}", value.len());
    assert!(value.contains("characters cut"));
    let e = error_of(&mut interp, &host, "raise ValueError(s)").await;
    assert!(e.message.len() < 2_000_000 && e.message.contains("characters cut"));
    let err = interp.get_var("s").await.unwrap_err();
    assert!(matches!(err, SandboxError::Value(_)), "{err}");
    assert!(err.to_string().contains("variable s is 3000000"), "{err}");
    let err = interp
        .set_var("t", Value::String("t".repeat(300_000_000)))
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Value(_)), "{err}");
    still_usable(&mut interp, &host).await;
    eprintln!("took {:?}", t0.elapsed());
}

/// One frame as the worker writes it: header length, header, blob count, blobs.
fn frame(header: &[u8], blobs: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    protocol::write_frame(&mut out, header, blobs).unwrap();
    out
}

/// A fake worker: `sh` writing `script`'s byte strings to stdout in order,
/// then waiting (it never reads its stdin, and never exits by itself).
fn fake_worker(dir: &std::path::Path, script: &[Vec<u8>]) -> SandboxConfig {
    let mut cmd = String::new();
    for (i, bytes) in script.iter().enumerate() {
        let path = dir.join(format!("part{i}"));
        std::fs::write(&path, bytes).unwrap();
        cmd.push_str(&format!("cat '{}'; ", path.display()));
    }
    cmd.push_str("exec sleep 60");
    let mut config = common::config();
    config.worker = WorkerCommand {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), cmd.into(), "fake-worker".into()],
    };
    config.startup_timeout = Duration::from_secs(10);
    config
}

/// A worker writing garbage gets a clear protocol error at once: the parent
/// reads no frame over the limit (and allocates only what arrives), no
/// undecodable message, and no message out of place; the worker is stopped.
#[tokio::test]
async fn a_worker_writing_garbage_gets_a_clear_error() {
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let hello = frame(br#"{"type":"hello","monty_version":"fake"}"#, &[]);
    let started = frame(br#"{"type":"started"}"#, &[]);
    // A header length of almost 4 GiB, then nothing.
    let huge_header = (u32::MAX - 1).to_le_bytes().to_vec();
    // A blob of 1 TiB announced after a small header.
    let mut huge_blob = Vec::new();
    huge_blob.extend_from_slice(&2u32.to_le_bytes());
    huge_blob.extend_from_slice(b"{}");
    huge_blob.extend_from_slice(&1u32.to_le_bytes());
    huge_blob.extend_from_slice(&(1u64 << 40).to_le_bytes());
    let not_json = frame(b"\x00garbage\xff", &[]);
    let wrong_message = frame(br#"{"type":"no_such_message"}"#, &[]);
    for (what, script, expect) in [
        ("huge header", vec![huge_header.clone()], "malformed frame"),
        ("huge blob", vec![huge_blob.clone()], "malformed frame"),
        ("not JSON", vec![not_json.clone()], "not valid"),
        ("unknown message", vec![wrong_message.clone()], "not valid"),
        (
            "started before start",
            vec![started.clone()],
            "expected hello",
        ),
    ] {
        let config = fake_worker(dir.path(), &script);
        let err = within(
            Duration::from_secs(5),
            what,
            Interpreter::start(&config, &InterpreterSpec::new()),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, SandboxError::Protocol(_)), "{what}: {err}");
        assert!(err.to_string().contains(expect), "{what}: {err}");
        eprintln!("{what}: {err}");
    }
    // The same in the middle of a cell: the cell fails, the interpreter is closed.
    for (what, garbage, expect) in [
        ("huge header", huge_header, "malformed frame"),
        ("huge blob", huge_blob, "malformed frame"),
        ("not JSON", not_json, "not valid"),
        ("hello in a cell", hello.clone(), "unexpected message"),
    ] {
        let config = fake_worker(dir.path(), &[hello.clone(), started.clone(), garbage]);
        let mut interp = Interpreter::start(&config, &InterpreterSpec::new())
            .await
            .expect("the fake worker starts");
        let pid = interp.worker_pid().unwrap();
        let err = within(
            Duration::from_secs(5),
            what,
            interp.run_cell("1", &Arc::new(Host)),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, SandboxError::Protocol(_)), "{what}: {err}");
        assert!(err.to_string().contains(expect), "{what}: {err}");
        assert!(!interp.is_alive());
        assert!(
            !process_alive(pid),
            "{what}: the fake worker was not stopped"
        );
        eprintln!("{what} in a cell: {err}");
    }
    eprintln!("took {:?}", t0.elapsed());
}

/// True while `pid` runs (a zombie waiting to be reaped has ended).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(status) => !status.lines().any(|l| l.starts_with("State:\tZ")),
        Err(_) => false,
    }
}

/// A worker whose parent is SIGKILLed (no destructor, no kill_on_drop) ends
/// with it instead of spinning on as an orphan.
#[tokio::test]
async fn a_worker_dies_with_its_killed_parent() {
    let t0 = Instant::now();
    let mut parent = helper("orphan").spawn().unwrap();
    let stdout = parent.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let pid: u32 = within(Duration::from_secs(30), "the helper's worker", async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the helper prints the pid");
            if let Some((_, pid)) = line.split_once("WORKER_PID=") {
                break pid.trim().parse().unwrap();
            }
        }
    })
    .await;
    // The worker is busy in its loop.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(process_alive(pid));
    parent.kill().await.unwrap();
    let killed = Instant::now();
    let mut gone = false;
    while killed.elapsed() < Duration::from_secs(5) {
        if !process_alive(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !gone {
        // Do not leave a spinning process behind.
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
        panic!("the worker {pid} outlived its killed parent by 5 s");
    }
    eprintln!(
        "worker gone {:?} after its parent was killed (test took {:?})",
        killed.elapsed(),
        t0.elapsed()
    );
}

unsafe extern "C" {
    fn dup(fd: std::ffi::c_int) -> std::ffi::c_int;
    fn close(fd: std::ffi::c_int) -> std::ffi::c_int;
}

/// Descriptors the parent opened without `O_CLOEXEC` do not reach the worker:
/// it holds only stdin, stdout, stderr (and its own pidfd on the parent).
#[tokio::test]
async fn a_worker_starts_with_only_stdin_stdout_stderr() {
    use std::os::fd::AsRawFd;
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let file = std::fs::File::open(&secret).unwrap();
    // SAFETY: dup of a descriptor we own; the copy has no close-on-exec flag.
    let leaked = unsafe { dup(file.as_raw_fd()) };
    assert!(leaked > 2);
    let (mut interp, host) = start(&common::config()).await;
    let pid = interp.worker_pid().unwrap();
    let mut fds = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let entry = entry.unwrap();
        let fd: i32 = entry.file_name().to_str().unwrap().parse().unwrap();
        let target = std::fs::read_link(entry.path())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        fds.push((fd, target));
    }
    // SAFETY: our own duplicate, closed once.
    unsafe { close(leaked) };
    fds.sort();
    let unexpected: Vec<_> = fds
        .iter()
        .filter(|(fd, target)| *fd > 2 && target != "anon_inode:[pidfd]")
        .collect();
    assert!(unexpected.is_empty(), "the worker holds {fds:?}");
    let (r, _) = run(&mut interp, &host, "1 + 1", Duration::from_secs(10)).await;
    assert_eq!(r.unwrap().value.as_deref(), Some("2"));
    eprintln!("worker fds {fds:?} (took {:?})", t0.elapsed());
}
