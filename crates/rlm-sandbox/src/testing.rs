//! For the tests of crates built on the sandbox (feature `testing`).

use std::path::Path;
use std::sync::OnceLock;

use crate::WorkerCommand;

/// The sandbox worker binary: found next to the test executable, else built
/// once with cargo (a test run of another crate does not build it).
pub fn worker() -> WorkerCommand {
    static W: OnceLock<WorkerCommand> = OnceLock::new();
    W.get_or_init(|| {
        if let Ok(w) = WorkerCommand::locate() {
            return w;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "rlm-sandbox", "--bin", "rlm-sandbox-worker"])
            .current_dir(root)
            .status()
            .expect("run cargo build for the sandbox worker");
        assert!(status.success(), "building rlm-sandbox-worker failed");
        WorkerCommand::locate().expect("rlm-sandbox-worker after building it")
    })
    .clone()
}

/// Whether the CPython back-end can run here. Where it cannot, the reason is
/// printed and the caller skips its CPython part; with
/// `RLM_REQUIRE_CPYTHON_SANDBOX` set (CI, where bubblewrap is installed) that
/// is a failure instead.
pub fn cpython_available() -> bool {
    match crate::cpython::launcher(None) {
        Ok(_) => true,
        Err(e) if std::env::var_os("RLM_REQUIRE_CPYTHON_SANDBOX").is_some() => {
            panic!("RLM_REQUIRE_CPYTHON_SANDBOX is set but the CPython sandbox cannot start: {e}")
        }
        Err(e) => {
            eprintln!("skipped the CPython part: {e}");
            false
        }
    }
}
