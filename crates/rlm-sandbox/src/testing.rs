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
