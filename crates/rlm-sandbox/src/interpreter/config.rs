//! How a worker is launched and the limits every interpreter runs under.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::spec::SandboxError;

/// Environment variable naming the worker program (see [`WorkerCommand::locate`]).
pub const WORKER_ENV: &str = "RLM_SANDBOX_WORKER";
/// Name of the worker binary built by this crate.
pub const WORKER_BIN: &str = "rlm-sandbox-worker";
/// Hidden subcommand of the `rlm` binary that runs a worker.
pub const RLM_WORKER_SUBCOMMAND: &str = "__sandbox-worker";

/// How to launch a worker process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The program to run.
    pub program: PathBuf,
    /// Arguments before the worker's own (`--memory-limit`).
    pub args: Vec<OsString>,
}

impl WorkerCommand {
    /// Runs `program` with no extra arguments (e.g. the `rlm-sandbox-worker` binary).
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// Runs an `rlm` executable's hidden `__sandbox-worker` subcommand.
    pub fn rlm_subcommand(rlm_exe: impl Into<PathBuf>) -> Self {
        Self {
            program: rlm_exe.into(),
            args: vec![RLM_WORKER_SUBCOMMAND.into()],
        }
    }

    /// Finds a worker: `$RLM_SANDBOX_WORKER` if set (an `rlm` executable is run
    /// with its `__sandbox-worker` subcommand), else `rlm-sandbox-worker` next
    /// to the current executable or one directory up (cargo's `deps/` layout).
    pub fn locate() -> Result<Self, SandboxError> {
        if let Some(path) = std::env::var_os(WORKER_ENV).filter(|p| !p.is_empty()) {
            return Ok(Self::for_program(PathBuf::from(path)));
        }
        let exe = std::env::current_exe()
            .map_err(|e| SandboxError::Spawn(format!("cannot find own executable: {e}")))?;
        let name = format!("{WORKER_BIN}{}", std::env::consts::EXE_SUFFIX);
        let mut dir = exe.parent();
        for _ in 0..2 {
            let Some(d) = dir else { break };
            let candidate = d.join(&name);
            if candidate.is_file() {
                return Ok(Self::new(candidate));
            }
            dir = d.parent();
        }
        Err(SandboxError::Spawn(format!(
            "no sandbox worker found: set {WORKER_ENV} to the path of `{WORKER_BIN}` or of an `rlm` executable"
        )))
    }

    fn for_program(path: PathBuf) -> Self {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if stem == "rlm" {
            Self::rlm_subcommand(path)
        } else {
            Self::new(path)
        }
    }
}

/// Which Python runs the cells.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SandboxBackend {
    /// monty (Python in Rust) in a worker process: the default; starts in a
    /// millisecond, runs anywhere, no third-party packages.
    #[default]
    Monty,
    /// The user's CPython with its installed packages, isolated by the
    /// operating system (bubblewrap: namespaces, rlimits, seccomp; Linux only).
    CPython,
}

impl SandboxBackend {
    /// The name users write (`monty`, `cpython`).
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxBackend::Monty => "monty",
            SandboxBackend::CPython => "cpython",
        }
    }
}

impl std::fmt::Display for SandboxBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SandboxBackend {
    type Err = SandboxError;

    fn from_str(s: &str) -> Result<Self, SandboxError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "monty" => Ok(SandboxBackend::Monty),
            "cpython" | "python" => Ok(SandboxBackend::CPython),
            _ => Err(SandboxError::UnknownBackend(s.to_string())),
        }
    }
}

/// Limits and the worker command shared by every interpreter of a pool.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Which Python runs the cells. Default monty.
    pub backend: SandboxBackend,
    /// The Python of the CPython back-end: an interpreter or a virtual
    /// environment's directory. `None`: `RLM_PYTHON`, else an active
    /// `VIRTUAL_ENV`, else `python3` on `PATH`.
    pub python: Option<PathBuf>,
    /// How to launch monty workers.
    pub worker: WorkerCommand,
    /// Memory ceiling of a worker in bytes (0 = unlimited). Default 1 GiB.
    pub memory_limit_bytes: u64,
    /// Interpreter time allowed per cell. Default 30 s.
    pub cell_time_limit: Duration,
    /// Extra time before an unresponsive worker is killed. Default 5 s.
    pub kill_grace: Duration,
    /// Wall time a cell may spend waiting for its host calls (summed over the
    /// cell; not counted in `cell_time_limit`). Past it the calls still running
    /// are dropped and the cell ends with `TimeoutError`; the interpreter lives
    /// on. Default 30 min.
    pub host_wait_limit: Duration,
    /// Host function calls allowed per cell. Default 10,000.
    pub max_host_calls_per_cell: u64,
    /// Printed bytes a cell keeps (head and tail, middle cut). Default 1 MB.
    pub max_captured_output_bytes: usize,
    /// Maximum Python recursion depth. Default 1,000.
    pub max_recursion_depth: usize,
    /// How long a worker may take to start (and to load its inputs). Default 30 s.
    pub startup_timeout: Duration,
}

impl SandboxConfig {
    /// Defaults with the given worker command.
    pub fn new(worker: WorkerCommand) -> Self {
        Self {
            backend: SandboxBackend::Monty,
            python: None,
            worker,
            memory_limit_bytes: 1 << 30,
            cell_time_limit: Duration::from_secs(30),
            kill_grace: Duration::from_secs(5),
            host_wait_limit: Duration::from_secs(30 * 60),
            max_host_calls_per_cell: 10_000,
            max_captured_output_bytes: 1_000_000,
            max_recursion_depth: 1000,
            startup_timeout: Duration::from_secs(30),
        }
    }
}

impl SandboxConfig {
    /// CPU seconds a CPython worker may use over its whole life (`RLIMIT_CPU`,
    /// a backstop behind the per-cell limit): 60 cells' worth, at least 10 minutes.
    pub fn cpu_time_limit(&self) -> Duration {
        self.cell_time_limit
            .saturating_add(self.kill_grace)
            .saturating_mul(60)
            .max(Duration::from_secs(600))
    }
}

/// Path helper for callers that ship the worker beside their binary.
pub fn worker_beside(exe: &Path) -> PathBuf {
    exe.with_file_name(format!("{WORKER_BIN}{}", std::env::consts::EXE_SUFFIX))
}
