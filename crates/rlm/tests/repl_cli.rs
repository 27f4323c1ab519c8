//! `rlm repl` end to end: a real store from `rlm index`, the real worker
//! subcommand, stdin/stdout like a user or a driving program.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn rlm() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rlm"));
    c.env_remove("RLM_SANDBOX_WORKER").env_remove("RLM_STORE");
    // No model unless a test gives one: not the developer's configuration,
    // not a downloaded local model.
    for var in [
        "RLM_PROVIDER",
        "RLM_BASE_URL",
        "RLM_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "RLM_LOCAL_MODEL",
    ] {
        c.env_remove(var);
    }
    c.env("RLM_AUTO_PULL", "off")
        .env("RLM_MODELS_DIR", "/nonexistent/rlm-test-models");
    c
}

/// Indexes two small documents into `dir/store`.
fn store(dir: &Path) -> std::path::PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("policy.txt"),
        "The refund policy allows returns within 30 days.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("guide.md"),
        "# Guide\nInstall with cargo. The refund window is 30 days.\n",
    )
    .unwrap();
    let store = dir.join("store");
    let out = rlm()
        .arg("index")
        .arg(&docs)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    store
}

fn run_with_stdin(mut cmd: Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn jsonl(store: &Path, extra: &[&str], lines: &[Value]) -> Vec<Value> {
    let mut cmd = rlm();
    cmd.arg("repl")
        .arg("--store")
        .arg(store)
        .arg("--jsonl")
        .args(extra);
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = run_with_stdin(cmd, &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn jsonl_mode_keeps_state_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let out = jsonl(
        &store,
        &[],
        &[
            serde_json::json!({"code": "n = len(documents)\nprint(n, documents[0]['name'])"}),
            serde_json::json!({"code": "n * 10"}),
            serde_json::json!({"code": "x = 1\n1 / 0"}),
            serde_json::json!({"code": "context.count('refund')"}),
            serde_json::json!({"code": "[h['path'] for h in search('refund window', 1)]"}),
            serde_json::json!({"code": "llm_query('hi')"}),
            serde_json::json!({"nope": 1}),
            serde_json::json!({"code": "search('refund', 0)"}),
            serde_json::json!({"code": "search('')"}),
            serde_json::json!({"code": "FINAL_VAR(3)"}),
            serde_json::json!({"code": "add_finding('refunds: 30 days')"}),
            serde_json::json!({"code": "FINAL_VAR('missing_var')"}),
        ],
    );
    assert_eq!(out.len(), 12);
    assert_eq!(out[0]["stdout"], "2 docs/guide.md\n");
    assert_eq!(out[0]["error"], Value::Null);
    assert!(out[0]["elapsed_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(out[1]["value"], "20");
    assert_eq!(out[2]["error"]["type"], "ZeroDivisionError");
    assert_eq!(out[2]["error"]["line"], 2);
    assert_eq!(out[3]["value"], "2");
    assert_eq!(out[4]["value"], "['docs/guide.md']");
    // Without a model the error says so, and how to configure one.
    let no_model = out[5]["error"]["message"].as_str().unwrap();
    assert!(no_model.contains("no model configured"), "{no_model}");
    assert!(no_model.contains("RLM_BASE_URL"), "{no_model}");
    assert_eq!(out[6]["error"]["type"], "InputError");
    assert_eq!(out[7]["error"]["type"], "TypeError");
    assert!(
        out[7]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("between 1 and 1000")
    );
    assert_eq!(out[8]["error"]["type"], "ValueError");
    assert!(
        out[8]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("search failed")
    );
    // A value given to FINAL_VAR is the answer itself (as for the model).
    assert_eq!(out[9]["error"], Value::Null);
    assert_eq!(out[9]["final"]["answer"], "3");
    assert_eq!(out[10]["value"], "1");
    assert!(
        out[11]["final"]["error"]
            .as_str()
            .unwrap()
            .contains("no variable named \"missing_var\""),
        "{}",
        out[11]
    );
}

#[test]
fn with_a_model_the_model_functions_call_it() {
    use rlm_llm::testing::{Matcher, Script, ScriptedServer, TEST_API_KEY};
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let server = ScriptedServer::spawn(
        Script::new()
            .on(Matcher::last_contains("say hi"), "hi there")
            .on(Matcher::last_contains("double 21"), "42")
            // The child agent of rlm_query (its system prompt is the sub-agents').
            .on(
                Matcher::system_contains("You are a sub-agent"),
                "FINAL(child says 7)",
            ),
    );
    let mut cmd = rlm();
    cmd.args(["repl", "--jsonl", "--store"])
        .arg(&store)
        .env("RLM_PROVIDER", "openai")
        .env("RLM_BASE_URL", server.base_url())
        .env("RLM_API_KEY", TEST_API_KEY);
    let lines = [
        serde_json::json!({"code": "llm_query('say hi')"}),
        serde_json::json!({"code": "llm_query_batched(['say hi', 'double 21'])"}),
        serde_json::json!({"code": "rlm_query('what is 7?', 'seven')"}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = run_with_stdin(cmd, &input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let out: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out[0]["value"], "'hi there'", "{}", out[0]);
    assert_eq!(out[1]["value"], "['hi there', '42']", "{}", out[1]);
    assert_eq!(out[2]["value"], "'child says 7'", "{}", out[2]);
}

#[test]
fn context_can_be_a_list_of_documents() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let out = jsonl(
        &store,
        &["--context", "list"],
        &[serde_json::json!({"code": "[type(context).__name__, len(context), context[1][:10]]"})],
    );
    assert_eq!(out[0]["value"], "['list', 2, 'The refund']");
}

#[test]
fn interactive_mode_runs_blocks_and_shows_final() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut cmd = rlm();
    cmd.arg("repl").arg("--store").arg(&store);
    let out = run_with_stdin(
        cmd,
        "total = 0\nfor d in documents:\n    total += d['chars']\n\nprint(total > 50)\nanswer = 'thirty days'\nFINAL_VAR('answer')\nFINAL(total)\n",
    );
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("True\n"), "{stdout}");
    assert!(
        stdout.contains("FINAL_VAR(answer): thirty days"),
        "{stdout}"
    );
    assert!(stdout.contains("FINAL: 1"), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("2 documents"), "{stderr}");
}

#[test]
fn missing_store_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = rlm()
        .arg("repl")
        .arg("--store")
        .arg(dir.path().join("nope"))
        .arg("--jsonl")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn bad_worker_path_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let out = rlm()
        .arg("repl")
        .arg("--store")
        .arg(&store)
        .arg("--jsonl")
        .env("RLM_SANDBOX_WORKER", "/nonexistent/rlm-sandbox-worker")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("cannot start the sandbox worker"),
        "{stderr}"
    );
}

#[test]
fn crashed_interpreter_is_replaced_in_jsonl_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let out = jsonl(
        &store,
        &["--memory-mib", "64"],
        &[
            serde_json::json!({"code": "keep = 1"}),
            serde_json::json!({"code": "xs = []\nwhile True:\n    xs.append('x' * 1000000)"}),
            serde_json::json!({"code": "2 + 2"}),
        ],
    );
    assert_eq!(out.len(), 3);
    let t = out[1]["error"]["type"].as_str().unwrap();
    assert!(t == "MemoryError" || t == "SandboxError", "{}", out[1]);
    assert_eq!(out[2]["value"], "4");
}

#[test]
fn sandbox_flag_picks_the_back_end_or_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let out = rlm()
        .arg("repl")
        .arg("--store")
        .arg(&store)
        .args(["--jsonl", "--sandbox", "jail"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        "error: --sandbox: unknown sandbox \"jail\": use monty (the default) or cpython"
    );
    // The CPython back-end where bubblewrap runs (CI requires it).
    if !rlm_sandbox::testing::cpython_available() {
        return;
    }
    // monty names itself as the platform; CPython says linux.
    let code = "import sys\nprint(sys.platform, next(d['name'] for d in documents if 'cargo' in d['text']).endswith('guide.md'))";
    let replies = jsonl(
        &store,
        &["--sandbox", "cpython"],
        &[serde_json::json!({ "code": code })],
    );
    assert_eq!(replies[0]["error"], Value::Null, "{replies:?}");
    assert_eq!(replies[0]["stdout"], "linux True\n", "{replies:?}");
}
