//! The security suite on the CPython back-end: hostile cells, including the
//! escapes CPython makes possible (ctypes, /proc, fork bombs, sockets, files,
//! the parent's environment). Each is refused or contained by the operating
//! system, and the host (this test process) lives on. Skipped where the
//! CPython sandbox cannot start, unless RLM_REQUIRE_CPYTHON_SANDBOX is set.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestHost, cpython_config, start_with};
use rlm_sandbox::*;

/// Runs `code` in a fresh CPython interpreter: what it printed and its error
/// (type), then checks the interpreter still works.
async fn run(config: &SandboxConfig, code: &str) -> (String, Option<String>) {
    let (mut s, h) = start_with(config, "ctx").await;
    let r = s
        .run_cell(code, &h)
        .await
        .unwrap_or_else(|e| panic!("{code}: the interpreter died: {e}"));
    let after = s.run_cell("1 + 1", &h).await.expect("still alive");
    assert_eq!(after.value.as_deref(), Some("2"));
    s.close().await;
    (
        r.stdout,
        r.error.map(|e| format!("{}: {}", e.exc_type, e.message)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_files_are_invisible_and_nothing_can_be_written() {
    let Some(c) = cpython_config() else { return };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let path = secret.display().to_string();
    let (_, e) = run(&c, &format!("print(open({path:?}).read())")).await;
    assert!(e.unwrap().starts_with("FileNotFoundError"));
    let (_, e) = run(&c, &format!("open({path:?}, 'w').write('owned')")).await;
    assert!(e.is_some());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    // The root holds only the interpreter's and the system's read-only views.
    let (out, e) = run(
        &c,
        "import os\nprint(sorted(os.listdir('/')))\n\
         for p in ['/etc/passwd', '/etc/shadow', '/root/.ssh', '/home', os.path.expanduser('~/.cargo')]:\n\
         \x20   print(p, os.path.exists(p))",
    )
    .await;
    assert!(e.is_none(), "{e:?}");
    assert!(!out.contains("True"), "{out}");
    assert!(!out.contains("'home'") && !out.contains("'var'"), "{out}");
    // Writing the interpreter's own files fails (read-only); /tmp is private.
    let marker = format!("rlm-sandbox-escape-{}", std::process::id());
    let (out, e) = run(
        &c,
        &format!(
            "import os, sys\n\
             try:\n    open(os.path.join(sys.prefix, 'pwned'), 'w')\nexcept OSError as e:\n    print(type(e).__name__, e.errno)\n\
             open('/tmp/{marker}', 'w').write('inside')\nprint(open('/tmp/{marker}').read())"
        ),
    )
    .await;
    assert!(e.is_none(), "{e:?}");
    assert!(
        out.starts_with("OSError 30\n") || out.starts_with("PermissionError"),
        "{out}"
    );
    assert!(out.ends_with("inside\n"), "{out}");
    assert!(!std::path::Path::new(&format!("/tmp/{marker}")).exists());
    // The private /tmp is small: filling it stops at its size.
    let (_, e) = run(&c, "open('/tmp/big', 'wb').write(b'x' * (64 << 20))").await;
    assert!(e.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_new_processes_fork_bombs_and_subprocess() {
    let Some(c) = cpython_config() else { return };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let marker = dir.path().join("pwned").display().to_string();
    for code in [
        "import os\nwhile True:\n    os.fork()".to_string(),
        format!("import subprocess\nsubprocess.run(['touch', {marker:?}])"),
        "import multiprocessing\np = multiprocessing.Process(target=print)\np.start()".into(),
    ] {
        let (_, e) = run(&c, &code).await;
        let e = e.unwrap_or_else(|| panic!("{code} should fail"));
        assert!(
            e.starts_with("PermissionError") || e.starts_with("FileNotFoundError"),
            "{code}: {e}"
        );
    }
    for call in ["os.system", "os.popen"] {
        let (out, e) = run(&c, &format!("import os\nprint({call}('touch {marker}'))")).await;
        let e = e.unwrap_or_else(|| panic!("{call} returned {out}"));
        assert!(
            e.starts_with("PermissionError") && e.contains("no processes"),
            "{e}"
        );
    }
    assert!(!std::path::Path::new(&marker).exists());
    // Threads still work (numeric libraries need them).
    let (out, e) = run(
        &c,
        "import threading\nr = []\nts = [threading.Thread(target=r.append, args=(i,)) for i in range(8)]\n\
         [t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(r))",
    )
    .await;
    assert!(e.is_none(), "{e:?}");
    assert_eq!(out, "[0, 1, 2, 3, 4, 5, 6, 7]\n");
    // ... but not without bound, even with the memory limit off: a cell once
    // started 10,000.
    let mut unlimited = c.clone();
    unlimited.memory_limit_bytes = 0;
    for start in [
        "threading.Thread(target=time.sleep, args=(3,)).start()",
        "_thread.start_new_thread(time.sleep, (3,))",
    ] {
        let (out, e) = run(
            &unlimited,
            &format!(
                "import threading, _thread, time\nn = 0\ntry:\n    for i in range(10000):\n        {start}\n        n += 1\n\
                 except RuntimeError as e:\n    print(e)\nprint(n)"
            ),
        )
        .await;
        assert!(e.is_none(), "{e:?}");
        assert!(out.contains("at most 64 threads"), "{out}");
        assert!(out.ends_with("\n64\n"), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctypes_cannot_reach_the_kernel_and_a_crash_is_contained() {
    let Some(c) = cpython_config() else { return };
    // Raw syscalls through ctypes meet the same filter and namespaces.
    let (out, e) = run(
        &c,
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         print(libc.fork(), libc.unshare(0x10000000), libc.ptrace(0, 0, 0, 0), libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))\n\
         print(os.getuid(), open('/proc/self/status').read().count('Seccomp:\\t2'))",
    )
    .await;
    assert!(e.is_none(), "{e:?}");
    assert_eq!(out, "-1 -1 -1 -1\n65534 1\n");
    // Corrupting memory kills only the sandbox.
    let (mut s, h) = start_with(&c, "").await;
    let err = s
        .run_cell("import ctypes\nctypes.string_at(0)", &h)
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::WorkerDied(_)), "{err}");
    let (mut fresh, h) = start_with(&c, "").await;
    assert_eq!(
        fresh.run_cell("3", &h).await.unwrap().value.as_deref(),
        Some("3")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proc_shows_only_the_sandbox_and_the_environment_is_empty() {
    let Some(c) = cpython_config() else { return };
    // SAFETY: the variable is set before any interpreter starts in this test;
    // only this test reads it.
    unsafe { std::env::set_var("RLM_TEST_CPYTHON_SECRET", "hunter2") };
    let me = std::process::id();
    let (out, e) = run(
        &c,
        &format!(
            "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\n\
             print(len(pids) <= 4, os.path.exists('/proc/{me}/environ') and {me} > 4)\n\
             print(sorted(os.environ))\n\
             try:\n    print(open('/proc/1/environ', 'rb').read().count(b'hunter2'))\nexcept OSError:\n    print(0)"
        ),
    )
    .await;
    assert!(e.is_none(), "{e:?}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("True False"), "{out}");
    let env = lines.next().unwrap();
    assert!(!env.contains("SECRET") && !env.contains("CARGO"), "{env}");
    assert_eq!(lines.next(), Some("0"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_network_not_even_the_host_s_loopback() {
    let Some(c) = cpython_config() else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (out, e) = run(
        &c,
        &format!(
            "import socket\n\
             for target in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n\
             \x20   try:\n        socket.create_connection(target, timeout=3)\n        print('connected')\n\
             \x20   except OSError as e:\n        print(type(e).__name__)\n\
             try:\n    socket.getaddrinfo('example.com', 80)\n    print('resolved')\nexcept OSError as e:\n    print(type(e).__name__)"
        ),
    )
    .await;
    assert!(e.is_none(), "{e:?}");
    assert!(
        !out.contains("connected") && !out.contains("resolved"),
        "{out}"
    );
    assert!(listener.accept().is_err(), "a connection reached the host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_time_and_recursion_limits() {
    let Some(mut c) = cpython_config() else {
        return;
    };
    for code in [
        "s = 'a' * 10**10",
        "xs = []\nwhile True:\n    xs.append('x' * 1000000)",
        "print('a' * 10**9)",
    ] {
        let (_, e) = run(&c, code).await;
        assert!(
            e.as_deref().unwrap_or_default().starts_with("MemoryError"),
            "{code}: {e:?}"
        );
    }
    let (_, e) = run(&c, "def f(n):\n    return f(n + 1)\nf(0)").await;
    assert!(e.unwrap().starts_with("RecursionError"));
    c.cell_time_limit = Duration::from_secs(1);
    c.kill_grace = Duration::from_secs(1);
    // A catastrophic pattern: CPython's regex engine checks for signals, so
    // the cell's timer stops it and the interpreter lives on.
    let (_, e) = run(&c, "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')").await;
    assert!(e.unwrap().starts_with("TimeoutError"));
    // A Python loop is stopped at the cell's limit, even if it catches the error.
    let (_, e) = run(
        &c,
        "try:\n    while True:\n        pass\nexcept BaseException:\n    while True:\n        pass",
    )
    .await;
    assert!(e.unwrap().starts_with("TimeoutError"));
    // Code that shuts the cell's timer out (blocks its signal) is killed by
    // the parent at limit + grace, like a monty worker that stops answering.
    let (mut s, h) = start_with(&c, "").await;
    let err = s
        .run_cell(
            "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\nwhile True:\n    pass",
            &h,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::CellTimeout(_)), "{err}");
    assert!(!s.is_alive());
    let (mut fresh, h) = start_with(&c, "").await;
    assert_eq!(
        fresh.run_cell("5", &h).await.unwrap().value.as_deref(),
        Some("5")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_host_call_caps_and_a_killed_worker() {
    let Some(c) = cpython_config() else { return };
    let (mut s, h) = start_with(&c, "").await;
    let r = s
        .run_cell("line = 'x' * 10000\nwhile True:\n    print(line)", &h)
        .await
        .unwrap();
    assert!(r.error.unwrap().message.contains("output limit"));
    assert!(r.stdout.len() <= 1_100_000);
    let r = s
        .run_cell(
            "for i in range(1000000):\n    try:\n        noop()\n    except BaseException:\n        pass",
            &h,
        )
        .await
        .unwrap();
    assert!(r.error.unwrap().message.contains("host call limit"));
    assert_eq!(r.host_calls, c.max_host_calls_per_cell + 1);
    let pid = s.worker_pid().unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = s.run_cell("1", &h).await.unwrap_err();
    assert!(matches!(err, SandboxError::WorkerDied(_)), "{err}");
    let h2 = Arc::new(TestHost::default());
    let (mut fresh, _) = start_with(&c, "").await;
    assert_eq!(
        fresh.run_cell("4", &h2).await.unwrap().value.as_deref(),
        Some("4")
    );
}

/// Python that writes `frames` (JSON messages) straight to every pipe the
/// worker holds, as a cell forging the worker protocol would.
fn forging_cell(frames: &str) -> String {
    format!(
        r#"import os, json, struct
def frame(msg):
    h = json.dumps(msg).encode()
    return struct.pack("<I", len(h)) + h + b"\0\0\0\0"
data = b"".join(frame(m) for m in {frames})
for fd in range(3, 64):
    try:
        os.write(fd, data)
    except OSError:
        pass
print("sent")"#
    )
}

fn forged_result(seq: u64, stdout: &str) -> String {
    format!(
        r#"{{"type": "cell_done", "seq": {seq}, "stdout": {stdout}, "stdout_chars": 1, "value": None, "error": None, "elapsed_us": 1, "host_calls": 0, "ended_by_host": None}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_forging_the_worker_protocol_is_held_to_the_caps_in_the_parent() {
    let Some(mut c) = cpython_config() else {
        return;
    };
    c.max_host_calls_per_cell = 50;
    // Host calls past the cap, written by hand: the parent stops the worker.
    let (mut s, h) = start_with(&c, "").await;
    let calls = r#"[{"type": "host_call", "call_id": i, "name": "noop", "args": [], "kwargs": {}, "awaitable": True} for i in range(12000)]"#;
    let err = s.run_cell(&forging_cell(calls), &h).await.unwrap_err();
    assert!(
        matches!(&err, SandboxError::Protocol(m) if m.contains("more than 50 host calls")),
        "{err}"
    );
    assert!(h.calls.load(std::sync::atomic::Ordering::SeqCst) <= 50);
    // A result with 5 MB of output: refused, the cap is the parent's too.
    let (mut s, h) = start_with(&c, "").await;
    let big = forged_result(1, "'x' * 5_000_000");
    let err = s
        .run_cell(&forging_cell(&format!("[{big}]")), &h)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Protocol(m) if m.contains("output has")),
        "{err}"
    );
    // A result forged for its own cell ends that cell; the real one that
    // follows is not taken for the next cell's.
    let (mut s, h) = start_with(&c, "").await;
    let own = forged_result(1, "'forged'");
    let r = s
        .run_cell(&forging_cell(&format!("[{own}]")), &h)
        .await
        .unwrap();
    assert_eq!(r.stdout, "forged");
    let next = s.run_cell("print('second')", &h).await.unwrap();
    assert_eq!(next.stdout, "second\n");
    let third = s.run_cell("print('third')", &h).await.unwrap();
    assert_eq!(third.stdout, "third\n");
    // A result for a later cell: the worker is stopped.
    let later = forged_result(9, "'ahead'");
    let err = s
        .run_cell(&forging_cell(&format!("[{later}]")), &h)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Protocol(m) if m.contains("cell 9")),
        "{err}"
    );
}

/// A cell that gets around the worker's thread cap (its original start
/// function is reachable from the wrapper) could have a thread per host
/// call waiting in the parent: thousands of tasks. The parent answers at
/// most one synchronous call per thread the sandbox allows at once; the
/// rest get a `RuntimeError` at once, and the worker lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_past_the_cap_get_no_more_host_calls_in_the_parent() {
    use std::sync::atomic::Ordering::SeqCst;
    let Some(c) = cpython_config() else { return };
    // Synchronous calls, as 200 threads blocked on the host would send them.
    let (mut s, h) = start_with(&c, "").await;
    let calls = r#"[{"type": "host_call", "call_id": i, "name": "wait", "args": [3000], "kwargs": {}, "awaitable": False} for i in range(200)]"#;
    let code = format!("{}\nimport time\ntime.sleep(1)", forging_cell(calls));
    let r = s.run_cell(&code, &h).await.expect("the worker lives");
    assert_eq!(r.stdout, "sent\n", "{r:?}");
    let waiting = MAX_CELL_THREADS as u64 + 1;
    assert_eq!(h.max_in_flight.load(SeqCst), waiting);
    assert_eq!(h.calls.load(SeqCst), waiting);
    let after = s.run_cell("1 + 1", &h).await.expect("still alive");
    assert_eq!(after.value.as_deref(), Some("2"));
    // Real threads started around the worker's cap, each blocked on the
    // host: the parent answers no more of them at once, and the threads
    // past them are told why.
    let mut unlimited = c.clone();
    unlimited.memory_limit_bytes = 0;
    let (s, h) = start_with(&unlimited, "").await;
    let code = r#"import _thread, threading, time
threading.stack_size(256 * 1024)
start = next(c.cell_contents for c in _thread.start_new_thread.__closure__
             if getattr(c.cell_contents, "__name__", "") == "start_new_thread")
refused = []
def call():
    try:
        wait(2000)
    except RuntimeError as e:
        refused.append(str(e))
for i in range(100):
    start(call, ())
time.sleep(1)
print(len(refused), refused[0])"#;
    let mut s = s;
    let r = s.run_cell(code, &h).await.expect("the worker lives");
    assert!(
        r.stdout
            .starts_with("35 more than 65 host calls wait at once")
            && r.stdout.contains("past the sandbox's 64 threads"),
        "{r:?}"
    );
    assert_eq!(h.calls.load(SeqCst), waiting, "{r:?}");
    assert_eq!(h.max_in_flight.load(SeqCst), waiting, "{r:?}");
    s.close().await;
}

/// Threads started where the worker cannot count them (the start function
/// its cap wraps, reached through the wrapper): the kernel's count of the
/// sandbox's threads is watched from the parent, which stops the sandbox
/// past 256 and says why; the host lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_starting_thousands_of_threads_is_stopped() {
    let Some(mut c) = cpython_config() else {
        return;
    };
    c.memory_limit_bytes = 0;
    let (mut s, h) = start_with(&c, "").await;
    let code = r#"import _thread, threading, time
threading.stack_size(64 * 1024)
start = next(c.cell_contents for c in _thread.start_new_thread.__closure__
             if getattr(c.cell_contents, "__name__", "") == "start_new_thread")
for i in range(10000):
    start(time.sleep, (30,))
time.sleep(30)"#;
    let t0 = std::time::Instant::now();
    let err = s.run_cell(code, &h).await.unwrap_err();
    let took = t0.elapsed();
    assert!(
        matches!(&err, SandboxError::WorkerDied(m) if m.contains("threads at once, past its limit of 256")),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    eprintln!("stopped after {took:?}: {err}");
    let (mut fresh, h2) = start_with(&c, "").await;
    assert_eq!(
        fresh.run_cell("4", &h2).await.unwrap().value.as_deref(),
        Some("4")
    );
}
