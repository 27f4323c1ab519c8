//! What the CLI tests share: running the real `rlm` binary in a directory
//! with a clean environment, and reading its output.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Variables that would leak the developer's own setup into the tests.
pub const CLEARED: &[&str] = &[
    "RLM_PROVIDER",
    "RLM_BASE_URL",
    "RLM_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "RLM_PRIMARY_MODEL",
    "RLM_SUB_MODEL",
    "RLM_TIMEOUT",
    "RLM_MAX_CONCURRENT",
    "RLM_ROOT_TEMPERATURE",
    "RLM_SUB_TEMPERATURE",
    "RLM_ROOT_MAX_OUTPUT_TOKENS",
    "RLM_SUB_MAX_OUTPUT_TOKENS",
    "RLM_MAX_DEPTH",
    "RLM_MAX_CALLS",
    "RLM_SUB_AGENT_CALLS",
    "RLM_MAX_LLM_CALLS",
    "RLM_ROOT_RESERVED",
    "RLM_MAX_TOKENS",
    "RLM_TRUNCATE_LEN",
    "RLM_CONTEXT_SHAPE",
    "RLM_CITATIONS",
    "RLM_VERIFY_CITATIONS",
    "RLM_ENABLED",
    "RLM_FLOW",
    "RLM_INSPECTOR",
    "RLM_CITATION_POLICY",
    "RLM_MAX_FILES",
    "RLM_MAX_CHUNKS",
    "RLM_LOCAL_MODEL",
    "RLM_MODELS_DIR",
    "RLM_PYPI_URL",
    "RLM_HUB_URL",
    "RLM_STORE",
    "RLM_SANDBOX_WORKER",
    "RLM_SERVE_ADDR",
    "RLM_SERVE_MAX_RUNS",
];

/// `rlm args…` in `dir` with a clean environment plus `env`, stdin closed.
pub fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlm"));
    cmd.args(args).current_dir(dir);
    for var in CLEARED {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs [`command`] to completion.
pub fn rlm(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    command(dir, args, env).output().expect("rlm runs")
}

/// Like [`rlm`], writing `stdin` to the process first.
pub fn rlm_stdin(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    use std::io::Write;
    let mut cmd = command(dir, args, env);
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("rlm runs");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("stdin accepts the input");
    child.wait_with_output().expect("rlm runs")
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A temporary directory with `docs/<name>` files indexed into `store`.
pub fn indexed_docs(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).expect("docs folder");
    for (name, text) in files {
        std::fs::write(docs.join(name), text).expect("document written");
    }
    let o = rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "index failed: {}", stderr(&o));
    dir
}
