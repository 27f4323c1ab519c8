//! Replay report: runs every recorded model trajectory through the sandbox and
//! compares each cell's stdout with CPython's.
//!
//! Usage: `rlm-sandbox-replay [--data DIR] [--failures] [--sandbox monty|cpython]`
//! (default DIR: the crate's `tests/data`). Prints the pass rate and the top
//! failure causes; `--failures` also lists every failing cell; `--sandbox
//! cpython` runs the cells in the CPython back-end instead of monty.

use std::path::PathBuf;

use rlm_sandbox::replay::run_replay;
use rlm_sandbox::{SandboxBackend, SandboxConfig, WorkerCommand};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut failures = false;
    let mut backend = SandboxBackend::Monty;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--data" => match args.next() {
                Some(d) => data = PathBuf::from(d),
                None => return fail("--data needs a directory"),
            },
            "--failures" => failures = true,
            "--sandbox" => match args.next().map(|s| s.parse()) {
                Some(Ok(b)) => backend = b,
                Some(Err(e)) => return fail(&e.to_string()),
                None => return fail("--sandbox needs monty or cpython"),
            },
            other => {
                return fail(&format!(
                    "unknown argument {other:?}; use --data DIR, --failures or --sandbox monty|cpython"
                ));
            }
        }
    }
    let read = |name: &str| std::fs::read_to_string(data.join(name));
    let (Ok(traj), Ok(reference)) = (read("trajectories.jsonl"), read("cpython_results.jsonl"))
    else {
        return fail(&format!(
            "cannot read trajectories.jsonl and cpython_results.jsonl in {}",
            data.display()
        ));
    };
    let worker = match WorkerCommand::locate() {
        Ok(w) => w,
        Err(e) => return fail(&e.to_string()),
    };
    let mut config = SandboxConfig::new(worker);
    config.backend = backend;
    let report = match run_replay(&config, &traj, &reference).await {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    print!("{}", report.summary());
    if failures {
        for c in report
            .cells
            .iter()
            .filter(|c| !c.harness && c.cpython_ran() && !c.passed())
        {
            println!(
                "--- {} cell {}: {}",
                c.id,
                c.cell,
                c.error.as_deref().unwrap_or("stdout differs")
            );
            if c.error.is_none() {
                println!(
                    "  sandbox: {:?}",
                    c.stdout.chars().take(400).collect::<String>()
                );
                println!(
                    "  cpython: {:?}",
                    c.cpython_stdout.chars().take(400).collect::<String>()
                );
            }
        }
    }
    if failures {
        for c in report
            .cells
            .iter()
            .filter(|c| !c.harness && c.cpython_status == "error")
        {
            let ours = c.error.as_deref().unwrap_or("(ran without error)");
            let theirs = c.cpython_exc.as_deref().unwrap_or("?");
            if !ours.starts_with(&format!("{theirs}:")) {
                println!(
                    "--- {} cell {}: CPython {theirs}, sandbox {ours}",
                    c.id, c.cell
                );
            }
        }
    }
    std::process::ExitCode::SUCCESS
}

fn fail(msg: &str) -> std::process::ExitCode {
    eprintln!("error: {msg}");
    std::process::ExitCode::FAILURE
}
