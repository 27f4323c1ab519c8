//! The CPython back-end: the same host-call protocol as monty, served by a
//! real CPython in bubblewrap. Skipped (with the reason) where bubblewrap or
//! user namespaces are missing, unless RLM_REQUIRE_CPYTHON_SANDBOX is set.

use crate::common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{cpython_config, start_with};
use rlm_sandbox::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_state_values_and_errors() {
    let Some(c) = cpython_config() else { return };
    let (mut s, h) = start_with(&c, "hello world").await;
    let r = s
        .run_cell("x = 40\nprint(context[:5])\nx + 2", &h)
        .await
        .unwrap();
    assert_eq!(
        (r.stdout.as_str(), r.value.as_deref()),
        ("hello\n", Some("42"))
    );
    let r = s.run_cell("y = 1\n\nz = y / 0", &h).await.unwrap();
    let e = r.error.expect("ZeroDivisionError");
    assert_eq!(
        (e.exc_type.as_str(), e.line),
        ("ZeroDivisionError", Some(3))
    );
    let r = s.run_cell("SHOW_VARS()", &h).await.unwrap();
    assert_eq!(
        r.value.as_deref(),
        Some("\"Available variables: {'context': 'str', 'x': 'int', 'y': 'int'}\"")
    );
    s.set_var("answer", json!({"content": "done", "ready": true}))
        .await
        .unwrap();
    assert_eq!(
        s.get_var("answer").await.unwrap(),
        Some(json!({"content": "done", "ready": true}))
    );
    assert_eq!(s.get_var("missing").await.unwrap(), None);
    let r = s.run_cell("def f(:\n  pass", &h).await.unwrap();
    assert_eq!(r.error.unwrap().exc_type, "SyntaxError");
    // The standard library monty lacks, and real generators.
    let r = s
        .run_cell(
            "import random, csv, io, statistics, textwrap\nrandom.seed(7)\n\
             rows = list(csv.reader(io.StringIO('a,b\\n1,2')))\n\
             def gen():\n    yield from range(3)\n\
             print(rows, statistics.mean(gen()), next(c for c in 'abc' if c > 'a'))",
            &h,
        )
        .await
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.stdout, "[['a', 'b'], ['1', '2']] 1 b\n");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_sync_async_raise_and_end() {
    let Some(c) = cpython_config() else { return };
    let (mut s, h) = start_with(&c, "").await;
    let r = s
        .run_cell(
            "print(echo({'a': [1, (2, 3)], 'b': None}), echo(2**70))",
            &h,
        )
        .await
        .unwrap();
    assert_eq!(
        r.stdout,
        "{'a': [1, [2, 3]], 'b': None} 1180591620717411303424\n"
    );
    assert_eq!(r.host_calls, 2);
    // Async calls are all in flight at once; answers come back in order.
    let r = s
        .run_cell(
            "import asyncio\nr = await asyncio.gather(*[aecho(i) for i in range(5)])\nprint(r)",
            &h,
        )
        .await
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(
        r.stdout,
        "['answer 0', 'answer 1', 'answer 2', 'answer 3', 'answer 4']\n"
    );
    assert_eq!(h.max_in_flight.load(Ordering::SeqCst), 5);
    let r = s
        .run_cell(
            "try:\n    boom()\nexcept ValueError as e:\n    print('caught', e)",
            &h,
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "caught boom from the host\n");
    // Ending the cell cannot be caught: the handler's lines never run.
    let r = s
        .run_cell(
            "try:\n    stop()\nexcept BaseException:\n    print('swallowed')\nprint('after')",
            &h,
        )
        .await
        .unwrap();
    assert_eq!(r.ended_by_host.as_deref(), Some("stopped by FINAL"));
    assert!(r.error.is_none() && r.stdout.is_empty(), "{r:?}");
    let r = s.run_cell("print('next cell')", &h).await.unwrap();
    assert_eq!(r.stdout, "next cell\n");
    // Values that cannot cross are refused in the cell.
    let r = s
        .run_cell("v = []\nfor _ in range(200):\n    v = [v]\necho(v)", &h)
        .await
        .unwrap();
    let e = r.error.unwrap();
    assert_eq!(e.exc_type, "ValueError");
    assert!(e.message.contains("nested too deep"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_environment_s_packages_are_importable() {
    let Some(mut c) = cpython_config() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    std::fs::write(site.join("rlm_probe_pkg.py"), "VALUE = 42\n").unwrap();
    c.python = Some(venv.clone());
    let launcher = cpython::launcher(Some(&venv)).unwrap();
    assert!(
        launcher.describe().contains("venv"),
        "{}",
        launcher.describe()
    );
    let (mut s, h) = start_with(&c, "").await;
    let r = s
        .run_cell(
            "import rlm_probe_pkg, sys\nprint(rlm_probe_pkg.VALUE, sys.prefix)",
            &h,
        )
        .await
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.stdout, format!("42 {}\n", venv.display()));
    // The venv is read-only inside.
    let r = s
        .run_cell(
            &format!(
                "open({:?}, 'w').write('x')",
                site.join("evil.py").display().to_string()
            ),
            &h,
        )
        .await
        .unwrap();
    assert!(r.error.is_some());
    assert!(!site.join("evil.py").exists());
}

#[tokio::test]
async fn a_missing_python_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = cpython::launcher(Some(dir.path())).unwrap_err().to_string();
    assert!(err.contains("without bin/python3"), "{err}");
    let err = cpython::launcher(Some(&dir.path().join("nope")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot run"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        "bogus".parse::<SandboxBackend>().unwrap_err().to_string(),
        "unknown sandbox \"bogus\": use monty (the default) or cpython"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_starts_the_backend_a_question_asks_for() {
    let Some(c) = cpython_config() else { return };
    let mut monty = c.clone();
    monty.backend = SandboxBackend::Monty;
    let pool = WorkerPool::new(monty, 1).await.unwrap();
    let h = std::sync::Arc::new(common::TestHost::default());
    let spec = InterpreterSpec::new();
    for (backend, want) in [
        (SandboxBackend::Monty, "False"),
        (SandboxBackend::CPython, "True"),
    ] {
        let mut s = pool.start_interpreter_on(backend, &spec).await.unwrap();
        // monty names itself as the platform.
        let r = s
            .run_cell("import sys\nsys.platform != 'monty'", &h)
            .await
            .unwrap();
        assert_eq!(r.value.as_deref(), Some(want), "{backend}: {r:?}");
    }
}

/// Host calls from several threads at once (a thread pool over
/// `llm_query`, as people write it): each thread gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_from_threads_each_get_their_answer() {
    let Some(c) = cpython_config() else { return };
    let (mut s, h) = start_with(&c, "").await;
    let code = "from concurrent.futures import ThreadPoolExecutor\n\
                with ThreadPoolExecutor(8) as pool:\n\
                \x20   got = list(pool.map(lambda i: (echo(i), wait(20))[0], range(200)))\n\
                print(got == list(range(200)))";
    let r = tokio::time::timeout(Duration::from_secs(60), s.run_cell(code, &h))
        .await
        .expect("the cell ends")
        .expect("the worker lives");
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.stdout, "True\n", "{r:?}");
    let r = s.run_cell("print('next')", &h).await.unwrap();
    assert_eq!(r.stdout, "next\n");
}
