//! The parent side: spawn workers, start interpreters, run cells, answer host
//! calls. How a worker is launched and its limits are in [`config`], what an
//! interpreter starts with and what cells give back in [`spec`], the pool of
//! warm workers in [`pool`].

mod cell_limits;
mod config;
mod pool;
mod spec;

pub use config::{
    RLM_WORKER_SUBCOMMAND, SandboxBackend, SandboxConfig, WORKER_BIN, WORKER_ENV, WorkerCommand,
    worker_beside,
};
pub use pool::WorkerPool;
pub use spec::*;

use cell_limits::{CellClock, Refusal, cell_result, check_result};
use spec::is_identifier;

use std::borrow::Cow;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::convert::{Unsendable, check_value};
use crate::protocol::{
    Frame, FromWorker, MAX_HEADER_BYTES, ToWorker, WireDocument, WireHostResult, WireInput,
    WireLimits, WirePiece, read_frame_async, write_frame, write_frame_async,
    write_frame_lazy_async,
};

/// Exit code of a worker that crossed its memory limit (monty-alloc's `exit-code`).
const OOM_EXIT_CODE: i32 = 65;
/// How much of a dead worker's stderr is kept for the error message.
const STDERR_TAIL_BYTES: usize = 2048;

/// A running worker process that has not started an interpreter yet.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    frames: mpsc::Receiver<std::io::Result<Frame>>,
    stderr_tail: Arc<Mutex<String>>,
    stderr_task: tokio::task::JoinHandle<()>,
    /// The CPython sandbox's threads, counted by the kernel.
    _threads: Option<crate::cpython::threads::Watcher>,
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
        let (mut cmd, program) = match config.backend {
            SandboxBackend::Monty => {
                let mut cmd = Command::new(&config.worker.program);
                cmd.args(&config.worker.args);
                (cmd, config.worker.program.clone())
            }
            SandboxBackend::CPython => {
                // Finding the Python and checking the isolation runs processes (once).
                let python = config.python.clone();
                let launcher = tokio::task::spawn_blocking(move || {
                    crate::cpython::launcher(python.as_deref())
                })
                .await
                .map_err(|e| SandboxError::Spawn(format!("the CPython sandbox check failed: {e}")))?
                .map_err(SandboxError::CPython)?;
                let cmd = launcher.command(config.memory_limit_bytes, config.cpu_time_limit());
                (cmd, launcher.bwrap.clone())
            }
        };
        cmd.arg("--memory-limit")
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
        let mut child = cmd
            .spawn()
            .map_err(|e| SandboxError::Spawn(format!("{}: {e}", program.display())))?;
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
        let threads = match (config.backend, child.id()) {
            (SandboxBackend::CPython, Some(pid)) => {
                crate::cpython::threads::watch(pid, MAX_SANDBOX_THREADS, stderr_tail.clone())
            }
            _ => None,
        };
        let mut worker = Self {
            child,
            stdin,
            frames,
            stderr_tail,
            stderr_task,
            _threads: threads,
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
        let inputs = spec
            .inputs
            .iter()
            .map(|(name, value)| (name.clone(), blobs.wire_input(value, spec)))
            .collect();
        let header = start_header(config, spec, inputs)?;
        self.send_start(&header, &blobs, spec).await?;
        match self.recv(Some(config.startup_timeout)).await? {
            FromWorker::Started => Ok(Interpreter {
                cells: 0,
                worker: Some(self),
                config: config.clone(),
            }),
            other => Err(SandboxError::Protocol(format!(
                "expected started, got {other:?}"
            ))),
        }
    }

    /// Writes the start frame: `header`, then every blob, source texts read
    /// as they are written. A text that cannot be read leaves half a frame
    /// sent: the worker is killed.
    async fn send_start(
        &mut self,
        header: &[u8],
        blobs: &FrameBlobs<'_>,
        spec: &InterpreterSpec,
    ) -> Result<(), SandboxError> {
        let mut unreadable = None;
        let written =
            write_frame_lazy_async(
                &mut self.stdin,
                header,
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
        Ok(())
    }
}

/// The header of the start frame: the wire `inputs`, the host functions and
/// the limits. One over the frame limit is [`SandboxError::InvalidSpec`].
fn start_header(
    config: &SandboxConfig,
    spec: &InterpreterSpec,
    inputs: Vec<(String, WireInput)>,
) -> Result<Vec<u8>, SandboxError> {
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
    Ok(header)
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

    /// `value` as it goes on the wire, its texts added as blobs.
    fn wire_input(&mut self, value: &'a InputValue, spec: &InterpreterSpec) -> WireInput {
        match value {
            InputValue::Text(s) => WireInput::Text {
                blob: self.bytes(s),
            },
            InputValue::TextList(list) => WireInput::TextList {
                blobs: list.iter().map(|s| self.bytes(s)).collect(),
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
                        text_blob: self.bytes(&d.text),
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
                            blob: self.source(*i),
                        },
                    })
                    .collect(),
            },
            InputValue::SourceTexts => WireInput::TextList {
                blobs: (0..spec.texts.as_ref().map_or(0, |t| t.count()))
                    .map(|i| self.source(i))
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
                        text_blob: self.source(d.text),
                    })
                    .collect(),
            },
        }
    }
}

/// One Python REPL in its own worker process. State persists across cells.
#[derive(Debug)]
pub struct Interpreter {
    worker: Option<Worker>,
    config: SandboxConfig,
    /// Cells sent so far (the `seq` of the last one).
    cells: u64,
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
        self.cells += 1;
        let seq = self.cells;
        let config = &self.config;
        let worker = self.worker.as_mut().ok_or(SandboxError::Closed)?;
        worker
            .send(&ToWorker::Cell {
                code: code.to_string(),
                seq,
            })
            .await?;
        let mut calls = HostCalls::default();
        // Answers are queued and written while frames are read: the worker may be
        // writing calls while the parent writes answers, and neither pipe may fill
        // with nobody reading it.
        let mut outbox = Outbox::default();
        let mut clock = CellClock::new(config);
        loop {
            let waiting = calls.waits_on_host();
            let budget = clock.budget(&calls, config);
            let t0 = Instant::now();
            let event = tokio::select! {
                next = worker.frames.recv() => Event::Frame(next),
                Some(joined) = calls.tasks.join_next_with_id() => Event::Answer(joined),
                written = worker.stdin.write(outbox.pending()), if !outbox.is_empty() => {
                    Event::Written(written)
                }
                () = tokio::time::sleep(budget) => Event::Deadline,
            };
            clock.spend(waiting, t0.elapsed());
            match event {
                Event::Frame(next) => match worker.decode(next).await? {
                    msg @ FromWorker::HostCall { .. } => {
                        match calls.start(msg, handler, config, clock.refusal) {
                            Ok(None) => {}
                            Ok(Some((id, name, answer))) => outbox.push(id, &name, answer),
                            Err(why) => {
                                let _ = worker.child.kill().await;
                                return Err(SandboxError::Protocol(why));
                            }
                        }
                    }
                    FromWorker::CellDone(r) if r.seq < seq => {
                        // The result of an earlier cell, sent twice (forged
                        // by that cell): not this cell's.
                    }
                    FromWorker::CellDone(r) => {
                        if let Err(why) = check_result(&r, seq, config) {
                            let _ = worker.child.kill().await;
                            return Err(SandboxError::Protocol(why));
                        }
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
                    if let Some((call_id, name)) = calls.finished(task_id) {
                        outbox.push(call_id, &name, wire_answer(answer));
                    }
                }
                Event::Written(Ok(n)) if n > 0 => outbox.advance(n),
                Event::Written(_) => return Err(worker.death().await),
                Event::Deadline if waiting => {
                    // Every call still running is answered with the timeout, which
                    // ends the cell; the worker then has the rest of its own time
                    // (at least the grace) to finish.
                    calls.refuse_all(Refusal::HostWait, &mut outbox, config);
                    clock.refused(Refusal::HostWait, config);
                }
                Event::Deadline if !calls.is_empty() => {
                    // The cell's time ran out during lookups: they end the
                    // cell as its own time would, but the interpreter lives
                    // (it has the grace to finish).
                    calls.refuse_all(Refusal::CellTime, &mut outbox, config);
                    clock.refused(Refusal::CellTime, config);
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
        let header = value_message(&msg, &what)?;
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

/// Threads a cell may run at once besides its main one (the CPython
/// worker's `MAX_THREADS`). A cell can get around the worker's count (it
/// shares the interpreter with it), so the parent keeps the bound where it
/// costs the host: synchronous host calls, each of which holds a thread of
/// the cell, are answered at most `MAX_CELL_THREADS + 1` at once.
pub const MAX_CELL_THREADS: usize = 64;

/// Synchronous host calls a cell may have waiting at once: one per thread.
const MAX_SYNC_CALLS_WAITING: usize = MAX_CELL_THREADS + 1;

/// Threads the processes of a CPython sandbox may run in all, as the kernel
/// counts them: the cell's Python threads and the pools C libraries start
/// of their own. Past it the sandbox is stopped (a cell that got around the
/// worker's cap once started 10,000).
const MAX_SANDBOX_THREADS: u64 = 4 * MAX_CELL_THREADS as u64;

/// A host call being answered: its call id, the function's name, whether
/// its time counts as the cell's own ([`HostHandler::counts_as_cell_time`])
/// and whether the cell awaits it (else a thread of the cell waits on it).
struct InFlight {
    call_id: u64,
    name: String,
    cell_time: bool,
    awaitable: bool,
}

/// Host calls being answered, by task.
#[derive(Default)]
struct HostCalls {
    tasks: JoinSet<Result<Value, HostError>>,
    ids: HashMap<tokio::task::Id, InFlight>,
    /// Calls the cell made. The worker is not trusted to keep its own cap
    /// (a CPython cell can write frames to the protocol pipe itself): it is
    /// counted here too.
    made: u64,
    /// Of the calls in flight, the synchronous ones.
    sync_waiting: usize,
}

impl HostCalls {
    /// Starts answering `call`: `Ok(None)` when a task answers it,
    /// `Ok(Some(answer))` when it is answered at once (the cell is past its
    /// host-wait limit or its own time), `Err` when the worker broke its cap
    /// and must stop.
    fn start<H: HostHandler>(
        &mut self,
        msg: FromWorker,
        handler: &Arc<H>,
        config: &SandboxConfig,
        refusal: Option<Refusal>,
    ) -> Result<Option<(u64, String, WireHostResult)>, String> {
        let FromWorker::HostCall {
            call_id,
            name,
            args,
            kwargs,
            awaitable,
        } = msg
        else {
            return Ok(None);
        };
        let call = HostCall {
            name,
            args,
            kwargs,
            awaitable,
        };
        self.made += 1;
        if self.made > config.max_host_calls_per_cell {
            return Err(format!(
                "the cell made more than {} host calls, past the cap its worker should have kept; the worker was stopped",
                config.max_host_calls_per_cell
            ));
        }
        if let Some(refusal) = refusal {
            return Ok(Some((call_id, call.name, refusal.answer(config))));
        }
        if !call.awaitable && self.sync_waiting >= MAX_SYNC_CALLS_WAITING {
            return Ok(Some((call_id, call.name, too_many_threads())));
        }
        let cell_time = handler.counts_as_cell_time(&call);
        let awaitable = call.awaitable;
        let h = handler.clone();
        let name = call.name.clone();
        let task = self.tasks.spawn(async move { h.handle(call).await });
        self.sync_waiting += usize::from(!awaitable);
        self.ids.insert(
            task.id(),
            InFlight {
                call_id,
                name,
                cell_time,
                awaitable,
            },
        );
        Ok(None)
    }

    /// The call id and function name of the call `task` answered, no
    /// longer in flight.
    fn finished(&mut self, task: tokio::task::Id) -> Option<(u64, String)> {
        let call = self.ids.remove(&task)?;
        self.sync_waiting -= usize::from(!call.awaitable);
        Some((call.call_id, call.name))
    }

    /// True when no call is in flight.
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Ends every call in flight with `refusal`'s answer.
    fn refuse_all(&mut self, refusal: Refusal, outbox: &mut Outbox, config: &SandboxConfig) {
        self.tasks.abort_all();
        self.sync_waiting = 0;
        for (_, call) in self.ids.drain() {
            outbox.push(call.call_id, &call.name, refusal.answer(config));
        }
    }

    /// True when a call in flight waits on something outside the cell's
    /// own time (see [`HostHandler::counts_as_cell_time`]).
    fn waits_on_host(&self) -> bool {
        self.ids.values().any(|call| !call.cell_time)
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
            value_message(&msg, &format!("the answer of {name}")).unwrap_or_else(|refused| {
                let result = WireHostResult::Raise {
                    exc_type: "ValueError".into(),
                    message: refused.to_string(),
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
/// worker ([`SandboxError::Value`]): nested deeper than serde_json reads, or
/// over the frame limit.
fn value_message(msg: &ToWorker, what: &str) -> Result<Vec<u8>, SandboxError> {
    let value = match msg {
        ToWorker::SetVar { value, .. }
        | ToWorker::HostResult {
            result: WireHostResult::Value { value },
            ..
        } => Some(value),
        _ => None,
    };
    if let Some(Err(why)) = value.map(check_value) {
        return Err(SandboxError::Value(why.message(what)));
    }
    let header = serde_json::to_vec(msg)
        .map_err(|e| SandboxError::Value(format!("{what} cannot be sent: {e}")))?;
    if header.len() > MAX_HEADER_BYTES as usize {
        return Err(SandboxError::Value(
            Unsendable::TooLarge(header.len()).message(what),
        ));
    }
    Ok(header)
}

/// The answer to a synchronous host call past [`MAX_SYNC_CALLS_WAITING`]:
/// more threads of the cell wait on the host than it may run.
fn too_many_threads() -> WireHostResult {
    WireHostResult::Raise {
        exc_type: "RuntimeError".into(),
        message: format!(
            "more than {MAX_SYNC_CALLS_WAITING} host calls wait at once, one per thread, \
             past the sandbox's {MAX_CELL_THREADS} threads: join some threads before \
             starting more, or use asyncio.gather for many host calls"
        ),
    }
}

/// A host function's answer as the worker gets it.
fn wire_answer(answer: Result<Value, HostError>) -> WireHostResult {
    match answer {
        Ok(value) => WireHostResult::Value { value },
        Err(HostError::Raise { exc_type, message }) => WireHostResult::Raise { exc_type, message },
        Err(HostError::EndCell(reason)) => WireHostResult::EndCell { reason },
    }
}
