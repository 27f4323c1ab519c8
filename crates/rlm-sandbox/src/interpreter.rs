//! The parent side: spawn workers, start interpreters, run cells, answer host calls.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::convert::{Unsendable, check_value};
use crate::protocol::{
    Frame, FromWorker, MAX_HEADER_BYTES, ToWorker, WireCellResult, WireDocument, WireHostResult,
    WireInput, WireLimits, WirePiece, read_frame_async, write_frame, write_frame_async,
    write_frame_lazy_async,
};

/// Environment variable naming the worker program (see [`WorkerCommand::locate`]).
pub const WORKER_ENV: &str = "RLM_SANDBOX_WORKER";
/// Name of the worker binary built by this crate.
pub const WORKER_BIN: &str = "rlm-sandbox-worker";
/// Hidden subcommand of the `rlm` binary that runs a worker.
pub const RLM_WORKER_SUBCOMMAND: &str = "__sandbox-worker";
/// Exit code of a worker that crossed its memory limit (monty-alloc's `exit-code`).
const OOM_EXIT_CODE: i32 = 65;
/// How much of a dead worker's stderr is kept for the error message.
const STDERR_TAIL_BYTES: usize = 2048;

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

/// Limits and the worker command shared by every interpreter of a pool.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// How to launch workers.
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

/// A document as the model sees it in `documents` (a Python dict with these keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentRecord {
    /// Position in the corpus (0-based), as in `context`'s `[DOCUMENT i: ...]` headers.
    pub index: u64,
    /// Display name (corpus-relative path).
    pub name: String,
    /// Stable document id.
    pub id: String,
    /// Length of `text` in characters.
    pub chars: u64,
    /// Number of chunks of the document in the store.
    pub chunk_count: u64,
    /// The whole text.
    pub text: String,
}

/// Texts that an interpreter's inputs share, read one at a time while the
/// interpreter starts, so the parent never holds a whole corpus: each text is sent to the
/// worker once, however many inputs use it (e.g. `context` and `documents`).
pub trait TextSource: Send + Sync + std::fmt::Debug {
    /// Number of texts.
    fn count(&self) -> usize;
    /// Text `index` (0-based), read when it is sent. The error says what could
    /// not be read.
    fn text(&self, index: usize) -> Result<String, String>;
}

/// One piece of an [`InputValue::Assembled`] string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Literal text.
    Literal(String),
    /// Text `i` of the spec's [`TextSource`].
    Text(usize),
}

/// A document record whose text is text `text` of the spec's [`TextSource`].
#[derive(Debug, Clone, PartialEq)]
pub struct SourceDocument {
    /// Position in the corpus (0-based).
    pub index: u64,
    /// Display name (corpus-relative path).
    pub name: String,
    /// Stable document id.
    pub id: String,
    /// Length of the text in characters.
    pub chars: u64,
    /// Number of chunks of the document in the store.
    pub chunk_count: u64,
    /// Index of the text in the spec's [`TextSource`].
    pub text: usize,
}

/// A named value placed in the interpreter before the first cell.
#[derive(Debug, Clone, PartialEq)]
pub enum InputValue {
    /// A `str` (sent raw, never JSON-escaped: cheap at 100 MB).
    Text(String),
    /// A `list[str]`.
    TextList(Vec<String>),
    /// A `list[dict]` of documents.
    Documents(Vec<DocumentRecord>),
    /// Any JSON value as dict/list/str/int/float/bool/None.
    Json(Value),
    /// A `str` the worker assembles from literals and source texts (a corpus
    /// joined with headers, without the parent ever holding the joined string).
    Assembled(Vec<Piece>),
    /// A `list[str]` of every text of the spec's [`TextSource`], in order.
    SourceTexts,
    /// A `list[dict]` of documents whose texts come from the spec's [`TextSource`].
    SourceDocuments(Vec<SourceDocument>),
}

/// Whether Python calls a host function directly or awaits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostFunctionKind {
    /// `x = f(...)`: the cell waits for the answer.
    Sync,
    /// `x = await f(...)`, or many at once with `asyncio.gather`; answered concurrently.
    Async,
}

/// What an interpreter looks like to the model: its inputs and host functions.
#[derive(Debug, Clone, Default)]
pub struct InterpreterSpec {
    /// Named inputs, e.g. `context` and `documents`.
    pub inputs: Vec<(String, InputValue)>,
    /// Host functions by name. One name is either sync or async, never both.
    pub functions: Vec<(String, HostFunctionKind)>,
    /// Texts the [`InputValue::Assembled`], [`InputValue::SourceTexts`] and
    /// [`InputValue::SourceDocuments`] inputs refer to.
    pub texts: Option<std::sync::Arc<dyn TextSource>>,
}

impl InterpreterSpec {
    /// An empty spec.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input.
    pub fn input(mut self, name: impl Into<String>, value: InputValue) -> Self {
        self.inputs.push((name.into(), value));
        self
    }

    /// Sets the texts that source-backed inputs refer to.
    pub fn texts(mut self, source: std::sync::Arc<dyn TextSource>) -> Self {
        self.texts = Some(source);
        self
    }

    /// Adds a host function.
    pub fn function(mut self, name: impl Into<String>, kind: HostFunctionKind) -> Self {
        self.functions.push((name.into(), kind));
        self
    }

    fn validate(&self) -> Result<(), SandboxError> {
        let mut seen = std::collections::HashSet::new();
        for name in self
            .inputs
            .iter()
            .map(|(n, _)| n)
            .chain(self.functions.iter().map(|(n, _)| n))
        {
            if !is_identifier(name) {
                return Err(SandboxError::InvalidSpec(format!(
                    "{name:?} is not a Python identifier; use letters, digits and _"
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(SandboxError::InvalidSpec(format!(
                    "{name:?} is defined twice; give each input and host function its own name"
                )));
            }
        }
        for (name, value) in &self.inputs {
            if let InputValue::Json(v) = value
                && let Err(why) = check_value(v)
            {
                return Err(SandboxError::InvalidSpec(
                    why.message(&format!("input {name:?}")),
                ));
            }
        }
        let available = self.texts.as_ref().map(|t| t.count());
        for (name, value) in &self.inputs {
            let used: Vec<usize> = match value {
                InputValue::Assembled(pieces) => pieces
                    .iter()
                    .filter_map(|p| match p {
                        Piece::Text(i) => Some(*i),
                        Piece::Literal(_) => None,
                    })
                    .collect(),
                InputValue::SourceTexts => Vec::new(),
                InputValue::SourceDocuments(docs) => docs.iter().map(|d| d.text).collect(),
                _ => continue,
            };
            let Some(count) = available else {
                return Err(SandboxError::InvalidSpec(format!(
                    "input {name:?} refers to source texts but the interpreter has none; set them with InterpreterSpec::texts"
                )));
            };
            if let Some(bad) = used.iter().find(|&&i| i >= count) {
                return Err(SandboxError::InvalidSpec(format!(
                    "input {name:?} refers to text {bad} but the source has {count}"
                )));
            }
        }
        Ok(())
    }
}

/// A call from Python to a host function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCall {
    /// Function name.
    pub name: String,
    /// Positional arguments (tuples and sets arrive as arrays).
    pub args: Vec<Value>,
    /// Keyword arguments.
    pub kwargs: serde_json::Map<String, Value>,
    /// True for async functions: other calls may be in flight at the same time.
    pub awaitable: bool,
}

/// How a host function fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// Raise this exception in Python at the call site (catchable).
    Raise {
        /// Exception type name, e.g. `RuntimeError` or `ValueError`.
        exc_type: String,
        /// Message shown to the model.
        message: String,
    },
    /// Stop the cell immediately (uncatchable), e.g. after `FINAL(...)`.
    /// The cell result carries the reason in [`CellResult::ended_by_host`].
    EndCell(String),
}

impl HostError {
    /// A `RuntimeError` with `message`.
    pub fn runtime(message: impl Into<String>) -> Self {
        Self::Raise {
            exc_type: "RuntimeError".into(),
            message: message.into(),
        }
    }
}

/// Answers host calls. The sandbox knows nothing about what the functions do.
pub trait HostHandler: Send + Sync + 'static {
    /// Answers one call with a JSON value (becomes a Python value) or an error.
    fn handle(&self, call: HostCall) -> impl Future<Output = Result<Value, HostError>> + Send;
}

/// A Python exception that ended a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellError {
    /// Exception type, e.g. `NameError`.
    #[serde(rename = "type")]
    pub exc_type: String,
    /// Message, with a hint on what to write instead when the sandbox lacks a feature.
    pub message: String,
    /// 1-based line in the cell, when known.
    pub line: Option<u32>,
}

/// What a cell did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Printed output (head and tail kept when it exceeded the capture budget).
    pub stdout: String,
    /// Characters printed in total.
    pub stdout_chars: u64,
    /// `repr()` of the last expression's value, unless it was `None`.
    pub value: Option<String>,
    /// The exception that ended the cell, if any.
    pub error: Option<CellError>,
    /// Wall time of the cell including host calls.
    pub elapsed: Duration,
    /// Host calls the cell made.
    pub host_calls: u64,
    /// Set when a host function ended the cell on purpose ([`HostError::EndCell`]).
    pub ended_by_host: Option<String>,
}

impl CellResult {
    /// The text a model sees: stdout, the value, the error, cut to `max_chars`.
    pub fn render(&self, max_chars: usize) -> String {
        let mut text = self.stdout.clone();
        if let Some(v) = &self.value {
            text.push_str(v);
            text.push('\n');
        }
        if let Some(e) = &self.error {
            match e.line {
                Some(line) => {
                    text.push_str(&format!("{}: {} (line {line})\n", e.exc_type, e.message))
                }
                None => text.push_str(&format!("{}: {}\n", e.exc_type, e.message)),
            }
        }
        truncate_output(&text, max_chars)
    }
}

/// Default output budget for what goes back to the model: the REPL output of a
/// cell is cut to this many characters (first half + last half).
pub const DEFAULT_TRUNCATE_CHARS: usize = 20_000;

/// Keeps the first and last `max_chars / 2` characters of `text` with a marker
/// saying how many were cut in between. Text within budget is returned as is.
pub fn truncate_output(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_chars = max_chars / 2;
    let tail_chars = max_chars - head_chars;
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail_chars)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n... [{} characters truncated] ...\n{}",
        &text[..head_end],
        total - head_chars - tail_chars,
        &text[tail_start..]
    )
}

/// Everything that can go wrong outside Python.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The worker could not be started.
    #[error("cannot start the sandbox worker: {0}")]
    Spawn(String),
    /// The interpreter spec was invalid.
    #[error("invalid sandbox interpreter: {0}")]
    InvalidSpec(String),
    /// The worker process died; the interpreter's variables are gone.
    #[error("the sandbox worker died: {0}; start a new interpreter")]
    WorkerDied(String),
    /// The cell did not stop within its time limit, so the worker was killed.
    #[error(
        "the cell ran longer than {0:?} and did not stop, so the sandbox was killed; variables are lost, start a new interpreter"
    )]
    CellTimeout(Duration),
    /// The worker sent something unexpected.
    #[error("sandbox protocol error: {0}")]
    Protocol(String),
    /// The interpreter was closed (or died earlier).
    #[error("the sandbox interpreter is closed; start a new interpreter")]
    Closed,
    /// A value could not cross between the parent and the worker (nested too
    /// deep, or too large); the interpreter lives on.
    #[error("{0}")]
    Value(String),
}

/// A running worker process that has not started an interpreter yet.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    frames: mpsc::Receiver<std::io::Result<Frame>>,
    stderr_tail: Arc<Mutex<String>>,
    stderr_task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("pid", &self.child.id())
            .finish()
    }
}

impl Worker {
    /// Spawns a worker and waits for its hello.
    pub async fn spawn(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let mut cmd = Command::new(&config.worker.program);
        cmd.args(&config.worker.args)
            .arg("--memory-limit")
            .arg(config.memory_limit_bytes.to_string())
            // The worker ends when this process does, however it ends.
            .arg("--parent-pid")
            .arg(std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // The worker needs nothing from our environment; keep secrets out.
            .env_clear()
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            SandboxError::Spawn(format!("{}: {e}", config.worker.program.display()))
        })?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| SandboxError::Spawn("no stdin pipe".into()))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| SandboxError::Spawn("no stdout pipe".into()))?;
        let mut stderr = child
            .stderr
            .take()
            .ok_or_else(|| SandboxError::Spawn("no stderr pipe".into()))?;
        let (tx, frames) = mpsc::channel(64);
        // A dedicated reader keeps frame decoding cancel-safe under select!.
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::with_capacity(1 << 16, &mut stdout);
            loop {
                match read_frame_async(&mut reader, u64::from(MAX_HEADER_BYTES)).await {
                    Ok(Some(frame)) => {
                        if tx.send(Ok(frame)).await.is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        break;
                    }
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = stderr_tail.clone();
        let stderr_task = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > 2 * STDERR_TAIL_BYTES {
                    let cut = crate::worker::ceil_char_boundary(&t, t.len() - STDERR_TAIL_BYTES);
                    t.drain(..cut);
                }
            }
        });
        let mut worker = Self {
            child,
            stdin,
            frames,
            stderr_tail,
            stderr_task,
        };
        match worker.recv(Some(config.startup_timeout)).await? {
            FromWorker::Hello { .. } => Ok(worker),
            other => Err(SandboxError::Protocol(format!(
                "expected hello, got {other:?}"
            ))),
        }
    }

    /// True while the process has not exited.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn send(&mut self, msg: &ToWorker) -> Result<(), SandboxError> {
        let header = serde_json::to_vec(msg).map_err(|e| SandboxError::Protocol(e.to_string()))?;
        self.send_header(&header).await
    }

    async fn send_header(&mut self, header: &[u8]) -> Result<(), SandboxError> {
        if write_frame_async(&mut self.stdin, header, &[])
            .await
            .is_err()
        {
            return Err(self.death().await);
        }
        Ok(())
    }

    /// Receives the next message; `timeout` kills the worker when it passes.
    async fn recv(&mut self, timeout: Option<Duration>) -> Result<FromWorker, SandboxError> {
        let next = match timeout {
            Some(limit) => match tokio::time::timeout(limit, self.frames.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    let _ = self.child.kill().await;
                    return Err(SandboxError::CellTimeout(limit));
                }
            },
            None => self.frames.recv().await,
        };
        self.decode(next).await
    }

    async fn decode(
        &mut self,
        next: Option<std::io::Result<Frame>>,
    ) -> Result<FromWorker, SandboxError> {
        match next {
            Some(Ok(frame)) => match serde_json::from_slice::<FromWorker>(&frame.header) {
                Ok(FromWorker::Fatal { message }) => {
                    let _ = self.child.kill().await;
                    Err(SandboxError::Protocol(message))
                }
                Ok(msg) => Ok(msg),
                Err(e) => {
                    let _ = self.child.kill().await;
                    Err(SandboxError::Protocol(format!(
                        "the worker sent a message that is not valid ({e}); it was stopped"
                    )))
                }
            },
            // A frame the parent refuses to read (e.g. over the size limit): the
            // worker is not speaking the protocol, whether or not it still runs.
            Some(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                let _ = self.child.kill().await;
                Err(SandboxError::Protocol(format!(
                    "the worker sent a malformed frame ({e}); it was stopped"
                )))
            }
            Some(Err(_)) | None => Err(self.death().await),
        }
    }

    /// Waits for the dead (or dying) worker and explains what happened.
    async fn death(&mut self) -> SandboxError {
        let status = match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                let _ = self.child.kill().await;
                None
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut self.stderr_task).await;
        let stderr = self
            .stderr_tail
            .lock()
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        let last_line = stderr.lines().last().unwrap_or_default().to_string();
        let detail = match status {
            Some(s) if s.code() == Some(OOM_EXIT_CODE) => {
                "the cell exceeded the sandbox memory limit (work on slices; avoid building huge strings or lists)"
                    .to_string()
            }
            Some(s) => {
                #[cfg(unix)]
                let signal = std::os::unix::process::ExitStatusExt::signal(&s);
                #[cfg(not(unix))]
                let signal: Option<i32> = None;
                match (signal, s.code()) {
                    (Some(sig), _) if stderr.contains("overflowed its stack") => {
                        format!("stack overflow (signal {sig}); nest less deeply")
                    }
                    (Some(sig), _) => format!("killed by signal {sig}"),
                    (None, Some(code)) => format!("exited with code {code}"),
                    (None, None) => "exited".to_string(),
                }
            }
            None => "stopped responding and was killed".to_string(),
        };
        if last_line.is_empty() || detail.contains("memory limit") {
            SandboxError::WorkerDied(detail)
        } else {
            SandboxError::WorkerDied(format!("{detail} ({last_line})"))
        }
    }

    /// Loads the inputs and host functions: the worker becomes an interpreter.
    pub async fn start_interpreter(
        mut self,
        config: &SandboxConfig,
        spec: &InterpreterSpec,
    ) -> Result<Interpreter, SandboxError> {
        spec.validate()?;
        let mut blobs = FrameBlobs::default();
        let mut inputs = Vec::with_capacity(spec.inputs.len());
        for (name, value) in &spec.inputs {
            let wire = match value {
                InputValue::Text(s) => WireInput::Text {
                    blob: blobs.bytes(s),
                },
                InputValue::TextList(list) => WireInput::TextList {
                    blobs: list.iter().map(|s| blobs.bytes(s)).collect(),
                },
                InputValue::Documents(docs) => WireInput::Documents {
                    docs: docs
                        .iter()
                        .map(|d| WireDocument {
                            index: d.index,
                            name: d.name.clone(),
                            id: d.id.clone(),
                            chars: d.chars,
                            chunk_count: d.chunk_count,
                            text_blob: blobs.bytes(&d.text),
                        })
                        .collect(),
                },
                InputValue::Json(v) => WireInput::Json { value: v.clone() },
                InputValue::Assembled(pieces) => WireInput::Assembled {
                    pieces: pieces
                        .iter()
                        .map(|p| match p {
                            Piece::Literal(text) => WirePiece::Literal { text: text.clone() },
                            Piece::Text(i) => WirePiece::Blob {
                                blob: blobs.source(*i),
                            },
                        })
                        .collect(),
                },
                InputValue::SourceTexts => WireInput::TextList {
                    blobs: (0..spec.texts.as_ref().map_or(0, |t| t.count()))
                        .map(|i| blobs.source(i))
                        .collect(),
                },
                InputValue::SourceDocuments(docs) => WireInput::Documents {
                    docs: docs
                        .iter()
                        .map(|d| WireDocument {
                            index: d.index,
                            name: d.name.clone(),
                            id: d.id.clone(),
                            chars: d.chars,
                            chunk_count: d.chunk_count,
                            text_blob: blobs.source(d.text),
                        })
                        .collect(),
                },
            };
            inputs.push((name.clone(), wire));
        }
        let msg = ToWorker::Start {
            inputs,
            functions: spec
                .functions
                .iter()
                .map(|(n, k)| (n.clone(), *k == HostFunctionKind::Async))
                .collect(),
            limits: WireLimits {
                cell_time_limit_ms: config.cell_time_limit.as_millis() as u64,
                max_host_calls_per_cell: config.max_host_calls_per_cell,
                max_captured_output_bytes: config.max_captured_output_bytes,
                max_recursion_depth: config.max_recursion_depth,
            },
        };
        let header = serde_json::to_vec(&msg).map_err(|e| SandboxError::Protocol(e.to_string()))?;
        if header.len() > MAX_HEADER_BYTES as usize {
            return Err(SandboxError::InvalidSpec(format!(
                "the interpreter's inputs other than texts (JSON values, names, literals) are {} \
                 bytes as JSON; the limit is {MAX_HEADER_BYTES} bytes: pass large strings as texts",
                header.len()
            )));
        }
        let mut unreadable = None;
        let written =
            write_frame_lazy_async(
                &mut self.stdin,
                &header,
                blobs.refs.len(),
                |i| match &blobs.refs[i] {
                    BlobRef::Bytes(b) => Ok(Cow::Borrowed(*b)),
                    BlobRef::Source(t) => {
                        let source = spec
                            .texts
                            .as_ref()
                            .expect("validated: source texts are set");
                        match source.text(*t) {
                            Ok(text) => Ok(Cow::Owned(text.into_bytes())),
                            Err(e) => {
                                unreadable = Some(format!(
                                    "text {t} of the interpreter's inputs cannot be read: {e}"
                                ));
                                Err(std::io::Error::other("unreadable input"))
                            }
                        }
                    }
                },
            )
            .await;
        if let Some(message) = unreadable {
            // Half a frame was sent: this worker cannot be used any more.
            let _ = self.child.kill().await;
            return Err(SandboxError::InvalidSpec(message));
        }
        if written.is_err() {
            return Err(self.death().await);
        }
        match self.recv(Some(config.startup_timeout)).await? {
            FromWorker::Started => Ok(Interpreter {
                worker: Some(self),
                config: config.clone(),
            }),
            other => Err(SandboxError::Protocol(format!(
                "expected started, got {other:?}"
            ))),
        }
    }
}

/// Where each blob of a start frame comes from.
enum BlobRef<'a> {
    /// Bytes the spec holds.
    Bytes(&'a [u8]),
    /// A text of the spec's [`TextSource`], read when it is written.
    Source(usize),
}

/// The blobs of a start frame; each source text gets one blob however often it is used.
#[derive(Default)]
struct FrameBlobs<'a> {
    refs: Vec<BlobRef<'a>>,
    source_blob: HashMap<usize, usize>,
}

impl<'a> FrameBlobs<'a> {
    fn bytes(&mut self, s: &'a str) -> usize {
        self.refs.push(BlobRef::Bytes(s.as_bytes()));
        self.refs.len() - 1
    }

    fn source(&mut self, text: usize) -> usize {
        *self.source_blob.entry(text).or_insert_with(|| {
            self.refs.push(BlobRef::Source(text));
            self.refs.len() - 1
        })
    }
}

/// One Python REPL in its own worker process. State persists across cells.
#[derive(Debug)]
pub struct Interpreter {
    worker: Option<Worker>,
    config: SandboxConfig,
}

impl Interpreter {
    /// Spawns a fresh worker and starts an interpreter in it.
    pub async fn start(
        config: &SandboxConfig,
        spec: &InterpreterSpec,
    ) -> Result<Self, SandboxError> {
        spec.validate()?;
        Worker::spawn(config)
            .await?
            .start_interpreter(config, spec)
            .await
    }

    /// True until the worker died, was killed, or the interpreter was closed.
    pub fn is_alive(&mut self) -> bool {
        self.worker.as_mut().is_some_and(Worker::is_alive)
    }

    /// Runs one cell. Python exceptions are in the result; `Err` means the
    /// interpreter is gone (worker died or was killed on timeout).
    pub async fn run_cell<H: HostHandler>(
        &mut self,
        code: &str,
        handler: &Arc<H>,
    ) -> Result<CellResult, SandboxError> {
        let result = self.run_cell_inner(code, handler).await;
        if result.is_err() {
            // A failed interpreter never runs another cell: its worker is gone or suspect.
            if let Some(mut w) = self.worker.take() {
                let _ = w.child.kill().await;
            }
        }
        result
    }

    async fn run_cell_inner<H: HostHandler>(
        &mut self,
        code: &str,
        handler: &Arc<H>,
    ) -> Result<CellResult, SandboxError> {
        let started = Instant::now();
        let config = &self.config;
        let worker = self.worker.as_mut().ok_or(SandboxError::Closed)?;
        worker
            .send(&ToWorker::Cell {
                code: code.to_string(),
            })
            .await?;
        let mut calls = HostCalls::default();
        // Answers are queued and written while frames are read: the worker may be
        // writing calls while the parent writes answers, and neither pipe may fill
        // with nobody reading it.
        let mut outbox = Outbox::default();
        // Time the worker may compute with no host call in flight...
        let mut compute_left = config.cell_time_limit.saturating_add(config.kill_grace);
        // ... and time the cell may wait with host calls in flight.
        let mut host_left = config.host_wait_limit;
        let mut host_timed_out = false;
        loop {
            let waiting = !calls.is_empty();
            let budget = if waiting { host_left } else { compute_left };
            let t0 = Instant::now();
            let event = tokio::select! {
                next = worker.frames.recv() => Event::Frame(next),
                Some(joined) = calls.tasks.join_next_with_id() => Event::Answer(joined),
                written = worker.stdin.write(outbox.pending()), if !outbox.is_empty() => {
                    Event::Written(written)
                }
                () = tokio::time::sleep(budget) => Event::Deadline,
            };
            let spent = t0.elapsed();
            if waiting {
                host_left = host_left.saturating_sub(spent);
            } else {
                compute_left = compute_left.saturating_sub(spent);
            }
            match event {
                Event::Frame(next) => match worker.decode(next).await? {
                    FromWorker::HostCall {
                        call_id,
                        name,
                        args,
                        kwargs,
                        awaitable,
                    } => {
                        if host_timed_out {
                            outbox.push(call_id, &name, host_timeout(config));
                        } else {
                            let h = handler.clone();
                            let call = HostCall {
                                name: name.clone(),
                                args,
                                kwargs,
                                awaitable,
                            };
                            calls.spawn(call_id, name, async move { h.handle(call).await });
                        }
                    }
                    FromWorker::CellDone(r) => {
                        calls.tasks.abort_all();
                        // A half-written answer would corrupt the stream; unsent
                        // ones are for a finished cell and are dropped.
                        let rest = outbox.pending().to_vec();
                        let finished =
                            tokio::time::timeout(config.kill_grace, worker.stdin.write_all(&rest))
                                .await;
                        if !matches!(finished, Ok(Ok(()))) {
                            let _ = worker.child.kill().await;
                        }
                        return Ok(cell_result(r, started.elapsed()));
                    }
                    other => {
                        let _ = worker.child.kill().await;
                        return Err(SandboxError::Protocol(format!(
                            "unexpected message during a cell: {other:?}"
                        )));
                    }
                },
                Event::Answer(joined) => {
                    let (task_id, answer) = match joined {
                        Ok((id, answer)) => (id, answer),
                        Err(e) => (
                            e.id(),
                            Err(HostError::runtime("the host function failed unexpectedly")),
                        ),
                    };
                    if let Some((call_id, name)) = calls.ids.remove(&task_id) {
                        outbox.push(call_id, &name, wire_answer(answer));
                    }
                }
                Event::Written(Ok(n)) if n > 0 => outbox.advance(n),
                Event::Written(_) => return Err(worker.death().await),
                Event::Deadline if waiting => {
                    // Every call still running is answered with the timeout, which
                    // ends the cell; the worker then has the rest of its own time
                    // (at least the grace) to finish.
                    host_timed_out = true;
                    calls.tasks.abort_all();
                    for (_, (call_id, name)) in calls.ids.drain() {
                        outbox.push(call_id, &name, host_timeout(config));
                    }
                    compute_left = compute_left.max(config.kill_grace);
                }
                Event::Deadline => {
                    let _ = worker.child.kill().await;
                    return Err(SandboxError::CellTimeout(config.cell_time_limit));
                }
            }
        }
    }

    /// Reads a variable after a cell (e.g. `answer` or the name given to
    /// `FINAL_VAR`). `None` when it is not defined.
    pub async fn get_var(&mut self, name: &str) -> Result<Option<Value>, SandboxError> {
        let worker = self.worker.as_mut().ok_or(SandboxError::Closed)?;
        worker
            .send(&ToWorker::GetVar {
                name: name.to_string(),
            })
            .await?;
        match worker.recv(Some(self.config.startup_timeout)).await? {
            FromWorker::Var { defined, value } => Ok(defined.then_some(value)),
            FromWorker::Unsendable { message } => Err(SandboxError::Value(message)),
            other => Err(SandboxError::Protocol(format!(
                "expected a variable, got {other:?}"
            ))),
        }
    }

    /// Binds a variable to a JSON value between cells (dicts, lists, str, int, ...).
    pub async fn set_var(&mut self, name: &str, value: Value) -> Result<(), SandboxError> {
        if !is_identifier(name) {
            return Err(SandboxError::InvalidSpec(format!(
                "{name:?} is not a Python identifier"
            )));
        }
        let worker = self.worker.as_mut().ok_or(SandboxError::Closed)?;
        let what = format!("the value for variable {name}");
        let msg = ToWorker::SetVar {
            name: name.to_string(),
            value,
        };
        let header = value_message(&msg, &what).map_err(SandboxError::Value)?;
        worker.send_header(&header).await?;
        match worker.recv(Some(self.config.startup_timeout)).await? {
            FromWorker::VarSet => Ok(()),
            other => Err(SandboxError::Protocol(format!(
                "expected var-set, got {other:?}"
            ))),
        }
    }

    /// Ends the interpreter and its worker.
    pub async fn close(mut self) {
        if let Some(mut w) = self.worker.take() {
            drop(w.stdin);
            if tokio::time::timeout(Duration::from_millis(500), w.child.wait())
                .await
                .is_err()
            {
                let _ = w.child.kill().await;
            }
        }
    }

    /// Process id of the worker (for monitoring), `None` once closed.
    pub fn worker_pid(&self) -> Option<u32> {
        self.worker.as_ref().and_then(|w| w.child.id())
    }

    /// The configuration the interpreter runs under.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }
}

/// What woke the cell loop up.
enum Event {
    /// A frame from the worker (or its end).
    Frame(Option<std::io::Result<Frame>>),
    /// A host call's answer.
    Answer(Result<(tokio::task::Id, Result<Value, HostError>), tokio::task::JoinError>),
    /// Bytes of the outbox were written.
    Written(std::io::Result<usize>),
    /// The time budget in force ran out.
    Deadline,
}

/// Host calls being answered, by task.
#[derive(Default)]
struct HostCalls {
    tasks: JoinSet<Result<Value, HostError>>,
    /// The call id and function name of each task.
    ids: HashMap<tokio::task::Id, (u64, String)>,
}

impl HostCalls {
    fn spawn(
        &mut self,
        call_id: u64,
        name: String,
        answer: impl Future<Output = Result<Value, HostError>> + Send + 'static,
    ) {
        let task = self.tasks.spawn(answer);
        self.ids.insert(task.id(), (call_id, name));
    }

    /// True when no call is in flight.
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Encoded answers waiting to be written to the worker, the first one maybe in part.
#[derive(Default)]
struct Outbox {
    frames: std::collections::VecDeque<Vec<u8>>,
    /// Bytes of the first frame already written.
    written: usize,
}

impl Outbox {
    /// Queues the answer to call `call_id` of host function `name`; an answer
    /// the worker could not read becomes a `ValueError` saying why.
    fn push(&mut self, call_id: u64, name: &str, result: WireHostResult) {
        let msg = ToWorker::HostResult { call_id, result };
        let header =
            value_message(&msg, &format!("the answer of {name}")).unwrap_or_else(|message| {
                let result = WireHostResult::Raise {
                    exc_type: "ValueError".into(),
                    message,
                };
                serde_json::to_vec(&ToWorker::HostResult { call_id, result })
                    .expect("an error message serializes")
            });
        let mut frame = Vec::with_capacity(header.len() + 8);
        write_frame(&mut frame, &header, &[]).expect("writing to memory cannot fail");
        self.frames.push_back(frame);
    }

    fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The unwritten rest of the first frame.
    fn pending(&self) -> &[u8] {
        self.frames.front().map_or(&[], |f| &f[self.written..])
    }

    fn advance(&mut self, n: usize) {
        self.written += n;
        if self.frames.front().is_some_and(|f| self.written >= f.len()) {
            self.frames.pop_front();
            self.written = 0;
        }
    }
}

/// `msg` serialized, or why the value it carries (`what`) cannot be sent to the
/// worker: nested deeper than serde_json reads, or over the frame limit.
fn value_message(msg: &ToWorker, what: &str) -> Result<Vec<u8>, String> {
    let value = match msg {
        ToWorker::SetVar { value, .. }
        | ToWorker::HostResult {
            result: WireHostResult::Value { value },
            ..
        } => Some(value),
        _ => None,
    };
    if let Some(Err(why)) = value.map(check_value) {
        return Err(why.message(what));
    }
    let header = serde_json::to_vec(msg).map_err(|e| format!("{what} cannot be sent: {e}"))?;
    if header.len() > MAX_HEADER_BYTES as usize {
        return Err(Unsendable::TooLarge(header.len()).message(what));
    }
    Ok(header)
}

/// A host function's answer as the worker gets it.
fn wire_answer(answer: Result<Value, HostError>) -> WireHostResult {
    match answer {
        Ok(value) => WireHostResult::Value { value },
        Err(HostError::Raise { exc_type, message }) => WireHostResult::Raise { exc_type, message },
        Err(HostError::EndCell(reason)) => WireHostResult::EndCell { reason },
    }
}

/// The answer to every host call of a cell past its host-wait limit.
fn host_timeout(config: &SandboxConfig) -> WireHostResult {
    WireHostResult::Abort {
        exc_type: "TimeoutError".into(),
        message: format!(
            "host calls did not finish within {:?} (the limit a cell may wait for them); \
             the cell was stopped. Make fewer or smaller calls per cell",
            config.host_wait_limit
        ),
    }
}

fn cell_result(r: WireCellResult, elapsed: Duration) -> CellResult {
    CellResult {
        stdout: r.stdout,
        stdout_chars: r.stdout_chars,
        value: r.value,
        error: r.error.map(|e| CellError {
            exc_type: e.exc_type,
            message: e.message,
            line: e.line,
        }),
        elapsed,
        host_calls: r.host_calls,
        ended_by_host: r.ended_by_host,
    }
}

/// Keeps a few spawned workers warm so an interpreter starts in milliseconds.
#[derive(Debug, Clone)]
pub struct WorkerPool {
    config: SandboxConfig,
    idle: Arc<Mutex<Vec<Worker>>>,
    size: usize,
}

impl WorkerPool {
    /// Spawns `size` workers (at least one) and keeps that many idle.
    pub async fn new(config: SandboxConfig, size: usize) -> Result<Self, SandboxError> {
        let size = size.max(1);
        let mut idle = Vec::with_capacity(size);
        for _ in 0..size {
            idle.push(Worker::spawn(&config).await?);
        }
        Ok(Self {
            config,
            idle: Arc::new(Mutex::new(idle)),
            size,
        })
    }

    /// Starts an interpreter on a warm worker (or a fresh one when none is idle),
    /// then refills the pool in the background.
    pub async fn start_interpreter(
        &self,
        spec: &InterpreterSpec,
    ) -> Result<Interpreter, SandboxError> {
        spec.validate()?;
        let warm = loop {
            let candidate = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match candidate {
                Some(mut w) => {
                    if w.is_alive() {
                        break Some(w);
                    }
                }
                None => break None,
            }
        };
        let worker = match warm {
            Some(w) => w,
            None => Worker::spawn(&self.config).await?,
        };
        self.refill();
        worker.start_interpreter(&self.config, spec).await
    }

    /// Idle workers right now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// The configuration every interpreter of the pool gets.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    fn refill(&self) {
        let missing = self.size.saturating_sub(self.idle_count());
        for _ in 0..missing {
            let idle = self.idle.clone();
            let config = self.config.clone();
            let size = self.size;
            tokio::spawn(async move {
                if let Ok(w) = Worker::spawn(&config).await {
                    let mut idle = idle.lock().unwrap_or_else(|e| e.into_inner());
                    if idle.len() < size {
                        idle.push(w);
                    }
                }
            });
        }
    }
}

/// True for a valid Python identifier (ASCII letters, digits, `_`; no leading digit).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Path helper for callers that ship the worker beside their binary.
pub fn worker_beside(exe: &Path) -> PathBuf {
    exe.with_file_name(format!("{WORKER_BIN}{}", std::env::consts::EXE_SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_head_and_tail() {
        let text: String = (0..1000).map(|i| format!("{i:04}")).collect();
        let t = truncate_output(&text, 100);
        assert!(t.starts_with("00000001"));
        assert!(t.ends_with("0999"));
        assert!(t.contains("[3900 characters truncated]"), "{t}");
        assert_eq!(truncate_output("short", 100), "short");
    }

    #[test]
    fn spec_rejects_bad_names() {
        let spec = InterpreterSpec::new().input("not valid", InputValue::Text(String::new()));
        assert!(matches!(spec.validate(), Err(SandboxError::InvalidSpec(_))));
        let spec = InterpreterSpec::new()
            .function("f", HostFunctionKind::Sync)
            .function("f", HostFunctionKind::Async);
        assert!(matches!(spec.validate(), Err(SandboxError::InvalidSpec(_))));
    }
}
