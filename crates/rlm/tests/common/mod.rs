//! What the CLI tests share: running the real `rlm` binary in a directory
//! with a clean environment, and reading its output.

#![allow(dead_code)] // each test binary uses its own subset

pub mod office;

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
    "RLM_SANDBOX",
    "RLM_PYTHON",
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
    "RLM_AUTO_PULL",
    "RLM_PYPI_URL",
    "RLM_HUB_URL",
    "RLM_STORE",
    "RLM_SANDBOX_WORKER",
    "RLM_SERVE_ADDR",
    "RLM_SERVE_MAX_RUNS",
    "RLM_OCR",
    "RLM_TESSERACT",
    "RLM_OCR_LANGUAGES",
];

/// `rlm args…` in `dir` with a clean environment plus `env`, stdin closed.
pub fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlm"));
    cmd.args(args).current_dir(dir);
    for var in CLEARED {
        cmd.env_remove(var);
    }
    // No test downloads the real model, nor finds the developer's copy:
    // tests that want either say so in `env`.
    cmd.env("RLM_AUTO_PULL", "off")
        .env("RLM_MODELS_DIR", dir.join(".no-models"));
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

/// Runs `cmd` (stdout and stderr piped) with `stdin` written to it, killing
/// it and failing the test when it takes longer than `limit`: a regression
/// that hangs fails instead of stalling the suite.
pub fn output_within(mut cmd: Command, stdin: &[u8], limit: std::time::Duration) -> Output {
    use std::io::{Read, Write};
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rlm runs");
    let input = stdin.to_vec();
    let mut pipe = child.stdin.take().expect("stdin is piped");
    // The child may exit without reading: a broken pipe is not the test's concern.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    // Channels, not joins: a grandchild still holding a pipe must not hang the test.
    let drain = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .unwrap_or_default()
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout is piped")));
    let err = drain(Box::new(child.stderr.take().expect("stderr is piped")));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("rlm can be waited for") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = collect(err);
            panic!(
                "rlm did not finish within {limit:?}: {}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(writer);
    Output {
        status,
        stdout: collect(out),
        stderr: collect(err),
    }
}

/// The environment that points `rlm` at a scripted model server
/// (`rlm_llm::testing::ScriptedServer::base_url`), with the models
/// `root-model` and `sub-model`.
pub fn model_env(base_url: &str) -> [(&'static str, &str); 5] {
    [
        ("RLM_PROVIDER", "openai"),
        ("RLM_BASE_URL", base_url),
        ("RLM_API_KEY", rlm_llm::testing::TEST_API_KEY),
        ("RLM_PRIMARY_MODEL", "root-model"),
        ("RLM_SUB_MODEL", "sub-model"),
    ]
}

/// Requests of the engine's entailment judge (one per answer with passages).
pub fn judge() -> rlm_llm::testing::Matcher {
    rlm_llm::testing::Matcher::system_contains(rlm_engine::grounding::JUDGE_PROMPT_START)
}

/// True for a request of the engine's entailment judge.
pub fn is_judge(r: &rlm_llm::testing::ReceivedRequest) -> bool {
    r.system()
        .contains(rlm_engine::grounding::JUDGE_PROMPT_START)
}

/// For a judge request, a reply giving every claim in it `verdict`.
pub fn judge_says(
    r: &rlm_llm::testing::ReceivedRequest,
    verdict: rlm_engine::grounding::Verdict,
) -> Option<String> {
    let n = rlm_engine::grounding::judged_claims(r.last_message());
    is_judge(r).then(|| rlm_engine::grounding::judge_reply(&vec![verdict; n]))
}

/// A PDF of `objects` (object `i + 1` is `objects[i]`; 1 is the catalog),
/// with an exact cross-reference table.
pub fn pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend(o);
        out.extend(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for off in offsets {
        out.extend(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}
