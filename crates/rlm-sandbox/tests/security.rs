//! Hostile cells: each must fail with a clear message and leave the host (and
//! the parent process) untouched.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestHost, config, interpreter_with};
use rlm_sandbox::*;

/// Runs `code` in a fresh interpreter and returns the error (type, message).
async fn error_of(code: &str) -> (String, String) {
    let (mut s, h) = interpreter_with("ctx").await;
    let r = s
        .run_cell(code, &h)
        .await
        .expect("the interpreter survives");
    let e = r
        .error
        .unwrap_or_else(|| panic!("{code:?} should fail; printed {:?}", r.stdout));
    // The interpreter is still usable after the failure.
    let after = s.run_cell("1 + 1", &h).await.expect("still alive");
    assert_eq!(after.value.as_deref(), Some("2"));
    (e.exc_type, e.message)
}

#[tokio::test]
async fn open_cannot_read_or_write_host_files() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let path = secret.display().to_string();
    let (t, m) = error_of(&format!("print(open({path:?}).read())")).await;
    assert_eq!(t, "PermissionError");
    assert!(m.contains("not available in this sandbox"), "{m}");
    let (t, _) = error_of(&format!("open({path:?}, 'w').write('owned')")).await;
    assert_eq!(t, "PermissionError");
    let (t, _) = error_of(&format!(
        "from pathlib import Path\nPath({path:?}).write_text('owned')"
    ))
    .await;
    assert_eq!(t, "PermissionError");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
}

#[tokio::test]
async fn os_sys_subprocess_socket_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let m = marker.display().to_string();
    let (t, _) = error_of(&format!("import os\nos.system('touch {m}')")).await;
    assert!(
        t == "AttributeError" || t == "PermissionError" || t == "NameError",
        "{t}"
    );
    let (t, _) = error_of("import os\nprint(os.getenv('HOME'))").await;
    assert_eq!(t, "PermissionError");
    let (t, _) = error_of("import os\nprint(os.environ)").await;
    assert!(!t.is_empty());
    let (t, m2) = error_of(&format!(
        "import subprocess\nsubprocess.run(['touch', {m:?}])"
    ))
    .await;
    assert_eq!(t, "ModuleNotFoundError");
    assert!(m2.contains("sandbox:"), "{m2}");
    let (t, _) = error_of("import socket\nsocket.create_connection(('127.0.0.1', 80))").await;
    assert_eq!(t, "ModuleNotFoundError");
    let (t, _) = error_of("import sys\nsys.modules['os'].system('true')").await;
    assert!(!t.is_empty());
    assert!(!marker.exists());
}

#[tokio::test]
async fn dynamic_code_and_introspection_are_unavailable() {
    for code in [
        "__import__('os').system('true')",
        "eval('1 + 1')",
        "exec('x = 1')",
        "compile('1', 'f', 'eval')",
        "globals()",
    ] {
        let (t, m) = error_of(code).await;
        assert_eq!(t, "NameError", "{code}");
        assert!(m.contains("(sandbox:"), "{code}: {m}");
    }
    let (t, _) = error_of("().__class__.__bases__[0].__subclasses__()").await;
    assert_eq!(t, "AttributeError");
    let (t, _) = error_of("(lambda: 1).__globals__").await;
    assert_eq!(t, "AttributeError");
}

#[tokio::test]
async fn infinite_loop_hits_the_time_limit_and_interpreter_survives() {
    let mut c = config();
    c.cell_time_limit = Duration::from_secs(1);
    let mut s = Interpreter::start(&c, &InterpreterSpec::new())
        .await
        .unwrap();
    let h = Arc::new(TestHost::default());
    s.run_cell("keep = 7", &h).await.unwrap();
    let r = s.run_cell("while True:\n    pass", &h).await.unwrap();
    let e = r.error.expect("time limit");
    assert_eq!(e.exc_type, "TimeoutError");
    assert!(e.message.contains("time limit"), "{}", e.message);
    // The limit is per cell, not cumulative: later cells run normally.
    for _ in 0..3 {
        let r = s
            .run_cell("total = 0\nfor i in range(1000):\n    total += i\nkeep", &h)
            .await
            .unwrap();
        assert_eq!(r.value.as_deref(), Some("7"), "{:?}", r.error);
    }
}

#[tokio::test]
async fn memory_bombs_fail_clearly_and_a_new_interpreter_works() {
    for code in [
        "s = 'a' * 10**10",
        "xs = []\nwhile True:\n    xs.append('x' * 1000000)",
        "s = 'ab'\nwhile True:\n    s = s + s",
    ] {
        let (mut s, h) = interpreter_with("").await;
        match s.run_cell(code, &h).await {
            Ok(r) => {
                let e = r.error.unwrap_or_else(|| panic!("{code} should fail"));
                assert_eq!(e.exc_type, "MemoryError", "{code}: {e:?}");
            }
            Err(e) => assert!(e.to_string().contains("memory limit"), "{code}: {e}"),
        }
    }
    let (mut s, h) = interpreter_with("").await;
    assert_eq!(
        s.run_cell("2 * 21", &h).await.unwrap().value.as_deref(),
        Some("42")
    );
}

#[tokio::test]
async fn deep_recursion_is_a_recursion_error() {
    let (t, _) = error_of("def f(n):\n    return f(n + 1)\nf(0)").await;
    assert_eq!(t, "RecursionError");
}

#[tokio::test]
async fn huge_expression_does_not_crash() {
    let long = vec!["1"; 30_000].join(" + ");
    let nested = format!("{}1{}", "(".repeat(30_000), ")".repeat(30_000));
    let (mut s, h) = interpreter_with("").await;
    for code in [long, nested] {
        let r = s.run_cell(&code, &h).await.expect("the worker survives");
        match r.error {
            None => assert_eq!(
                r.value.as_deref(),
                Some(if code.starts_with('(') { "1" } else { "30000" })
            ),
            Some(e) => {
                assert_eq!(e.exc_type, "SyntaxError");
                assert!(e.message.contains("(sandbox:"), "{}", e.message);
            }
        }
    }
    assert_eq!(
        s.run_cell("7", &h).await.unwrap().value.as_deref(),
        Some("7")
    );
}

#[tokio::test]
async fn printing_a_gigabyte_is_stopped() {
    let (mut s, h) = interpreter_with("").await;
    let r = s.run_cell("print('a' * 10**9)", &h).await;
    match r {
        Ok(r) => {
            let e = r.error.expect("stopped");
            assert_eq!(e.exc_type, "MemoryError");
        }
        Err(e) => assert!(e.to_string().contains("memory limit"), "{e}"),
    }
    let (mut s, h) = interpreter_with("").await;
    let r = s
        .run_cell("line = 'x' * 10000\nwhile True:\n    print(line)", &h)
        .await
        .unwrap();
    let e = r.error.expect("stopped");
    assert!(
        e.message.contains("output limit") || e.message.contains("time limit"),
        "{}",
        e.message
    );
    assert!(r.stdout.len() <= 1_100_000);
}

#[tokio::test]
async fn a_million_host_calls_hit_the_cap() {
    let (mut s, h) = interpreter_with("").await;
    let r = s
        .run_cell("for i in range(1000000):\n    noop()", &h)
        .await
        .unwrap();
    let e = r.error.expect("capped");
    assert!(e.message.contains("host call limit"), "{}", e.message);
    assert_eq!(r.host_calls, config().max_host_calls_per_cell + 1);
}

#[tokio::test]
async fn killed_worker_is_reported_and_parent_lives() {
    let (mut s, h) = interpreter_with("").await;
    let pid = s.worker_pid().unwrap();
    std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = s.run_cell("1", &h).await.unwrap_err();
    assert!(matches!(err, SandboxError::WorkerDied(_)), "{err}");
    assert!(err.to_string().contains("signal 9"), "{err}");
    assert!(matches!(
        s.run_cell("1", &h).await.unwrap_err(),
        SandboxError::Closed
    ));
    let (mut fresh, h) = interpreter_with("").await;
    assert_eq!(
        fresh.run_cell("3", &h).await.unwrap().value.as_deref(),
        Some("3")
    );
}

#[tokio::test]
async fn environment_is_not_inherited() {
    // SAFETY: single-threaded at this point of the test; only our own variable.
    unsafe { std::env::set_var("RLM_TEST_SECRET", "hunter2") };
    let (t, _) = error_of("import os\nos.getenv('RLM_TEST_SECRET')").await;
    assert_eq!(t, "PermissionError");
}

#[tokio::test]
async fn unresponsive_worker_is_killed_after_the_time_limit() {
    let mut c = config();
    c.cell_time_limit = Duration::from_millis(500);
    c.kill_grace = Duration::from_millis(500);
    let mut s = Interpreter::start(&c, &InterpreterSpec::new())
        .await
        .unwrap();
    let h = Arc::new(TestHost::default());
    let pid = s.worker_pid().unwrap();
    // A stopped process stands in for an interpreter stuck where it never
    // checks its time budget.
    std::process::Command::new("kill")
        .arg("-STOP")
        .arg(pid.to_string())
        .status()
        .unwrap();
    // Signal delivery is asynchronous: wait until the kernel reports it stopped.
    for _ in 0..200 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if status.contains("State:\tT") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = s.run_cell("1", &h).await.unwrap_err();
    assert!(matches!(err, SandboxError::CellTimeout(_)), "{err}");
    assert!(err.to_string().contains("killed"), "{err}");
    assert!(!s.is_alive());
    // The process is really gone (reaped by the kill), not left stopped.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(
        status.is_empty() || status.contains("State:\tZ"),
        "{status}"
    );
}
