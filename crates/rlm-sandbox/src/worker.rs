//! The worker process: one monty REPL interpreter driven over stdin/stdout.
//!
//! The worker must run in its own process with [`crate::LimitedAllocator`] as
//! the global allocator (see `src/bin/rlm-sandbox-worker.rs` and the hidden
//! `rlm __sandbox-worker` subcommand): the allocator counts the whole process
//! and, once [`run_worker`] started, ends it when the hard memory ceiling is
//! crossed, which must never take the parent down. The interpreter runs on a thread with a 64 MB stack because
//! parsing deeply nested expressions recurses on the native stack.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufReader, BufWriter, Stdin, Stdout};
use std::str::FromStr;
use std::thread;
use std::time::{Duration, Instant};

use monty::{
    MontyRepl, ReplFunctionCall, ReplOsCall, ReplProgress, ReplResolveFutures, ReplStartError,
};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult,
    PrintWriter, PrintWriterCallback, ResourceLimits, ResourceTracker,
};
use serde_json::Value;

use crate::convert::{Unsendable, check_sendable, from_json, to_json};
use crate::hints::add_hint;
use crate::names::assigned_names;
use crate::protocol::{
    FromWorker, MAX_HEADER_BYTES, ToWorker, WireCellError, WireCellResult, WireHostResult,
    WireInput, WireLimits, WirePiece, read_frame, write_frame,
};

/// Stack size of the interpreter thread.
const INTERPRETER_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Characters one cell may print before it is stopped: printing far more than
/// any model can read is a bug or an attack, and the buffer lives in this process.
const MAX_PRINTED_CHARS_PER_CELL: u64 = 100_000_000;
/// Names the worker answers itself; never forwarded to the parent.
const SHOW_VARS: &str = "SHOW_VARS";

/// Entry point of a worker process; returns the process exit code.
///
/// `args` are the worker's command-line arguments after the program (or
/// subcommand) name: `--memory-limit BYTES` (0 = unlimited) and
/// `--parent-pid PID` (the worker ends when that process does).
pub fn run_worker(args: &[String]) -> i32 {
    crate::alloc::enter_worker_mode();
    // Before any thread starts: nothing the parent had open reaches Python.
    crate::process::close_inherited_fds();
    let mut memory_limit: Option<usize> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--parent-pid" => match it.next().and_then(|v| v.parse::<u32>().ok()) {
                Some(pid) => crate::process::die_with_parent(pid),
                None => {
                    eprintln!("rlm sandbox worker: --parent-pid needs a process id");
                    return 2;
                }
            },
            "--memory-limit" => match it.next().and_then(|v| v.parse::<usize>().ok()) {
                Some(0) => memory_limit = None,
                Some(n) => memory_limit = Some(n),
                None => {
                    eprintln!("rlm sandbox worker: --memory-limit needs a number of bytes");
                    return 2;
                }
            },
            other => {
                eprintln!("rlm sandbox worker: unknown argument {other:?}");
                return 2;
            }
        }
    }
    // Arm the allocator before anything large is allocated, so its baseline is
    // the bare worker. Fails when monty-alloc is not the global allocator; the
    // limit is then not enforced, which the Hello message does not hide.
    let armed = memory_limit.is_some() && monty_alloc::set_limit(memory_limit, false).is_ok();
    let spawned = thread::Builder::new()
        .name("monty".into())
        .stack_size(INTERPRETER_STACK_BYTES)
        .spawn(move || serve(memory_limit.filter(|_| armed)));
    match spawned.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => 70,
        Err(e) => {
            eprintln!("rlm sandbox worker: cannot start the interpreter thread: {e}");
            70
        }
    }
}

/// Framed stdin/stdout of the worker.
struct Channel {
    input: BufReader<Stdin>,
    output: BufWriter<Stdout>,
}

impl Channel {
    fn send(&mut self, msg: &FromWorker) -> io::Result<()> {
        self.send_header(&serde_json::to_vec(msg).map_err(io::Error::other)?)
    }

    /// Sends a serialized message; one over the frame limit is never written
    /// (the parent would take the stream for garbage).
    fn send_header(&mut self, header: &[u8]) -> io::Result<()> {
        if header.len() > MAX_HEADER_BYTES as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message over the frame limit",
            ));
        }
        write_frame(&mut self.output, header, &[])
    }

    fn recv(&mut self) -> io::Result<Option<(ToWorker, Vec<Vec<u8>>)>> {
        let Some(frame) = read_frame(&mut self.input)? else {
            return Ok(None);
        };
        let msg: ToWorker = serde_json::from_slice(&frame.header)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad message: {e}")))?;
        Ok(Some((msg, frame.blobs)))
    }
}

/// A stopped connection: the parent went away or spoke nonsense.
struct Disconnected;

impl From<io::Error> for Disconnected {
    fn from(_: io::Error) -> Self {
        Disconnected
    }
}

/// The serve loop: Hello, then Start, then cells until stdin closes.
fn serve(memory_limit: Option<usize>) -> i32 {
    let mut chan = Channel {
        input: BufReader::with_capacity(1 << 20, io::stdin()),
        output: BufWriter::with_capacity(1 << 16, io::stdout()),
    };
    let hello = FromWorker::Hello {
        monty_version: monty_types::MONTY_VERSION.to_string(),
    };
    if chan.send(&hello).is_err() {
        return 0;
    }
    let mut repl: Option<WorkerRepl> = None;
    loop {
        let msg = match chan.recv() {
            Ok(Some(m)) => m,
            Ok(None) => return 0,
            Err(e) => {
                let _ = chan.send(&FromWorker::Fatal {
                    message: e.to_string(),
                });
                return 3;
            }
        };
        let outcome = match msg {
            (
                ToWorker::Start {
                    inputs,
                    functions,
                    limits,
                },
                blobs,
            ) => match WorkerRepl::start(inputs, blobs, functions, limits, memory_limit) {
                Ok(s) => {
                    repl = Some(s);
                    chan.send(&FromWorker::Started).map_err(Disconnected::from)
                }
                Err(e) => {
                    let _ = chan.send(&FromWorker::Fatal {
                        message: e.to_string(),
                    });
                    return 3;
                }
            },
            (ToWorker::Cell { code, seq }, _) => match repl.as_mut() {
                Some(s) => s.run_cell(&code, &mut chan).and_then(|r| {
                    chan.send(&FromWorker::CellDone(WireCellResult { seq, ..r }))
                        .map_err(Disconnected::from)
                }),
                None => Err(Disconnected),
            },
            (ToWorker::GetVar { name }, _) => match repl.as_mut() {
                Some(s) => {
                    let reply = s.get_var(&name);
                    chan.send(&reply).map_err(Disconnected::from)
                }
                None => Err(Disconnected),
            },
            (ToWorker::SetVar { name, value }, _) => match repl.as_mut() {
                Some(s) => {
                    s.set_var(name, value);
                    chan.send(&FromWorker::VarSet).map_err(Disconnected::from)
                }
                None => Err(Disconnected),
            },
            // A late answer for a call of a finished cell: nothing waits for it.
            (ToWorker::HostResult { .. }, _) => Ok(()),
        };
        if outcome.is_err() {
            return 0;
        }
    }
}

/// Why the worker could not load a start frame's inputs (sent to the parent
/// as a fatal message).
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// An input names a blob the frame does not have.
    #[error("input blob {0} missing")]
    MissingBlob(usize),
    /// A blob was taken more often than inputs use it.
    #[error("input blob {0} used twice")]
    BlobUsedTwice(usize),
    /// A text blob is not UTF-8.
    #[error("input blob {idx} is not UTF-8: {error}")]
    BlobNotUtf8 {
        /// The blob.
        idx: usize,
        /// Where the bytes stop being UTF-8.
        error: std::string::FromUtf8Error,
    },
    /// The pieces of an assembled string do not make UTF-8.
    #[error("assembled input is not UTF-8: {0}")]
    AssembledNotUtf8(std::string::FromUtf8Error),
    /// monty refused the inputs (its one-line summary).
    #[error("loading the inputs failed: {0}")]
    Load(String),
}

/// The blobs of a start frame, handed out to the inputs that use them.
struct BlobPool {
    blobs: Vec<Option<Vec<u8>>>,
    /// Owning uses left per blob (assembled strings only borrow).
    uses_left: Vec<usize>,
}

impl BlobPool {
    fn new(blobs: Vec<Vec<u8>>, inputs: &[(String, WireInput)]) -> Result<Self, StartError> {
        let mut uses_left = vec![0usize; blobs.len()];
        let mut count = |idx: usize| -> Result<(), StartError> {
            *uses_left.get_mut(idx).ok_or(StartError::MissingBlob(idx))? += 1;
            Ok(())
        };
        for (_, input) in inputs {
            match input {
                WireInput::Text { blob } => count(*blob)?,
                WireInput::TextList { blobs } => blobs.iter().try_for_each(|b| count(*b))?,
                WireInput::Documents { docs } => {
                    docs.iter().try_for_each(|d| count(d.text_blob))?
                }
                WireInput::Json { .. } | WireInput::Assembled { .. } => {}
            }
        }
        Ok(Self {
            blobs: blobs.into_iter().map(Some).collect(),
            uses_left,
        })
    }

    fn bytes(&self, idx: usize) -> Result<&[u8], StartError> {
        self.blobs
            .get(idx)
            .and_then(Option::as_deref)
            .ok_or(StartError::MissingBlob(idx))
    }

    /// The blob as a string: moved out on its last use, cloned before.
    fn take(&mut self, idx: usize) -> Result<String, StartError> {
        let left = self
            .uses_left
            .get_mut(idx)
            .ok_or(StartError::MissingBlob(idx))?;
        *left = left.saturating_sub(1);
        let bytes = if *left == 0 {
            self.blobs[idx].take()
        } else {
            self.blobs[idx].clone()
        }
        .ok_or(StartError::BlobUsedTwice(idx))?;
        String::from_utf8(bytes).map_err(|error| StartError::BlobNotUtf8 { idx, error })
    }

    fn assemble(&self, pieces: &[WirePiece]) -> Result<String, StartError> {
        let mut parts = Vec::with_capacity(pieces.len());
        for p in pieces {
            parts.push(match p {
                WirePiece::Literal { text } => text.as_bytes(),
                WirePiece::Blob { blob } => self.bytes(*blob)?,
            });
        }
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
        for p in parts {
            out.extend_from_slice(p);
        }
        String::from_utf8(out).map_err(StartError::AssembledNotUtf8)
    }
}

/// The worker's side of an [`crate::Interpreter`]: the monty REPL with its
/// host functions and limits (the parent holds the handle, this process the
/// Python state).
struct WorkerRepl {
    /// The REPL between cells (`None` only while a cell runs).
    repl: Option<MontyRepl>,
    /// Host function name → awaitable.
    functions: HashMap<String, bool>,
    limits: WireLimits,
    /// Every top-level name the interpreter may have bound (for `SHOW_VARS`).
    known_names: BTreeSet<String>,
    /// Host answers of the running cell that arrived but were not asked for
    /// yet, by wire call id.
    answers: HashMap<u64, WireHostResult>,
    /// Cells run so far: the high half of every wire call id (monty numbers
    /// the calls of each cell from 0).
    cells: u32,
}

impl WorkerRepl {
    fn start(
        inputs: Vec<(String, WireInput)>,
        blobs: Vec<Vec<u8>>,
        functions: Vec<(String, bool)>,
        limits: WireLimits,
        memory_limit: Option<usize>,
    ) -> Result<Self, StartError> {
        let mut pool = BlobPool::new(blobs, &inputs)?;
        // Assembled strings copy from blobs, so they are built first, while
        // every blob is still present; the other inputs then take (move) the
        // blobs, cloning only when a later input uses the same blob again.
        let mut slots: Vec<Option<MontyObject>> = Vec::with_capacity(inputs.len());
        for (_, input) in &inputs {
            slots.push(match input {
                WireInput::Assembled { pieces } => {
                    Some(MontyObject::String(pool.assemble(pieces)?))
                }
                _ => None,
            });
        }
        let mut values = Vec::with_capacity(inputs.len());
        let mut known_names = BTreeSet::new();
        for ((name, input), slot) in inputs.into_iter().zip(slots) {
            let obj = match (input, slot) {
                (_, Some(obj)) => obj,
                (WireInput::Text { blob }, None) => MontyObject::String(pool.take(blob)?),
                (WireInput::TextList { blobs }, None) => MontyObject::List(
                    blobs
                        .into_iter()
                        .map(|b| pool.take(b).map(MontyObject::String))
                        .collect::<Result<_, _>>()?,
                ),
                (WireInput::Documents { docs }, None) => {
                    let mut list = Vec::with_capacity(docs.len());
                    for d in docs {
                        let text = pool.take(d.text_blob)?;
                        let pairs = vec![
                            (s("index"), MontyObject::Int(d.index as i64)),
                            (s("name"), MontyObject::String(d.name)),
                            (s("id"), MontyObject::String(d.id)),
                            (s("chars"), MontyObject::Int(d.chars as i64)),
                            (s("chunk_count"), MontyObject::Int(d.chunk_count as i64)),
                            (s("text"), MontyObject::String(text)),
                        ];
                        list.push(MontyObject::dict(pairs));
                    }
                    MontyObject::List(list)
                }
                (WireInput::Json { value }, None) => from_json(value),
                (WireInput::Assembled { .. }, None) => unreachable!("assembled in the first pass"),
            };
            known_names.insert(name.clone());
            values.push((name, obj));
        }
        let mut resource_limits =
            ResourceLimits::default().max_recursion_depth(limits.max_recursion_depth);
        if let Some(bytes) = memory_limit {
            resource_limits = resource_limits.max_memory(bytes);
        }
        let repl = MontyRepl::new(
            "<cell>",
            ResourceTracker::new(resource_limits),
            CompileOptions::default(),
        );
        let mut sink = String::new();
        let repl = match repl.feed_start("pass", values, PrintWriter::collect_string(&mut sink)) {
            Ok(progress) => progress.into_repl(),
            Err(e) => return Err(StartError::Load(e.error.summary())),
        };
        Ok(Self {
            repl: Some(repl),
            functions: functions.into_iter().collect(),
            limits,
            known_names,
            answers: HashMap::new(),
            cells: 0,
        })
    }

    /// Runs one cell to completion, answering host calls through `chan`.
    fn run_cell(&mut self, code: &str, chan: &mut Channel) -> Result<WireCellResult, Disconnected> {
        let started = Instant::now();
        let repl = self.begin_cell(code);
        let mut cell = RunningCell {
            out: CapturedOutput::new(self.limits.max_captured_output_bytes),
            host_calls: 0,
            ended_by_host: None,
        };
        let mut progress = repl.feed_start(code, Vec::new(), PrintWriter::Callback(&mut cell.out));
        let (repl, value, error) = loop {
            progress = match progress {
                Ok(ReplProgress::Complete { repl, value }) => break (repl, Some(value), None),
                Err(err) => {
                    let ReplStartError { repl, error } = *err;
                    break (repl, None, Some(error));
                }
                Ok(ReplProgress::NameLookup(lookup)) => {
                    let known = self.functions.contains_key(&lookup.name);
                    let answer = if known {
                        NameLookupResult::Value(MontyObject::Function {
                            name: lookup.name.clone(),
                            docstring: None,
                        })
                    } else {
                        NameLookupResult::Undefined
                    };
                    lookup.resume(answer, PrintWriter::Callback(&mut cell.out))
                }
                Ok(ReplProgress::OsCall(call)) => refuse_os_call(call, &mut cell.out),
                Ok(ReplProgress::FunctionCall(call)) => self.host_call(call, chan, &mut cell)?,
                Ok(ReplProgress::ResolveFutures(pending)) => {
                    self.resolve_futures(pending, chan, &mut cell)?
                }
            };
        };
        self.repl = Some(repl);
        // The value and the error are cut like printed output: the result frame
        // stays within the frame limit whatever the cell built.
        let max_bytes = self.limits.max_captured_output_bytes;
        let error = match (&cell.ended_by_host, error) {
            (Some(_), _) | (None, None) => None,
            (None, Some(e)) => Some(cell_error(&e, max_bytes)),
        };
        let value = value
            .filter(|v| !matches!(v, MontyObject::None))
            .map(|v| repr_within(&v, max_bytes));
        let (stdout, stdout_chars) = cell.out.finish();
        Ok(WireCellResult {
            stdout,
            stdout_chars,
            value,
            error,
            elapsed_us: started.elapsed().as_micros() as u64,
            host_calls: cell.host_calls,
            ended_by_host: cell.ended_by_host,
            seq: 0,
        })
    }

    /// Takes the REPL for a new cell: a new cell number, the names `code`
    /// may bind, `SHOW_VARS` if it is used, a fresh time budget.
    fn begin_cell(&mut self, code: &str) -> MontyRepl {
        let mut repl = self.repl.take().expect("repl is present between cells");
        self.answers.clear();
        self.cells = self.cells.wrapping_add(1);
        self.known_names.extend(assigned_names(code));
        if code.contains(SHOW_VARS) {
            repl = self.define_show_vars(repl);
        }
        // The tracker's time budget is cumulative over an interpreter's life: reset per cell.
        repl.tracker_mut()
            .set_max_duration(Duration::from_millis(self.limits.cell_time_limit_ms));
        repl
    }

    /// A call of a function the cell does not define: a host function is
    /// forwarded to the parent (within the cell's host call limit); any
    /// other name is not found.
    fn host_call(
        &mut self,
        call: ReplFunctionCall,
        chan: &mut Channel,
        cell: &mut RunningCell,
    ) -> Result<CellStep, Disconnected> {
        cell.host_calls += 1;
        if cell.host_calls > self.limits.max_host_calls_per_cell {
            let exc = MontyException::new(
                ExcType::RuntimeError,
                Some(format!(
                    "host call limit reached: a cell may call host functions at most {} times; \
                     batch the work (e.g. llm_query_batched) or split it over several cells",
                    self.limits.max_host_calls_per_cell
                )),
            );
            return Ok(call.abort(exc, PrintWriter::Callback(&mut cell.out)));
        }
        let Some(&awaitable) = self
            .functions
            .get(&call.function_name)
            .filter(|_| call.object_id.is_none())
        else {
            let name = call.function_name.clone();
            return Ok(call.resume(
                ExtFunctionResult::NotFound(name),
                PrintWriter::Callback(&mut cell.out),
            ));
        };
        let call_id = self.wire_id(call.call_id);
        let header = match host_call_header(&call, call_id, awaitable) {
            Ok(header) => header,
            // Refused in the cell, as a catchable ValueError.
            Err(message) => {
                let exc = MontyException::new(ExcType::ValueError, Some(message));
                return Ok(call.resume(
                    ExtFunctionResult::Error(exc),
                    PrintWriter::Callback(&mut cell.out),
                ));
            }
        };
        chan.send_header(&header)?;
        if awaitable {
            return Ok(call.resume_pending(PrintWriter::Callback(&mut cell.out)));
        }
        Ok(match self.wait_answer(call_id, chan)? {
            HostAnswer::Result(r) => call.resume(r, PrintWriter::Callback(&mut cell.out)),
            HostAnswer::Stop(exc, reason) => {
                cell.ended_by_host = reason;
                call.abort(exc, PrintWriter::Callback(&mut cell.out))
            }
        })
    }

    /// Waits for the answers of the awaited host calls and resumes the cell
    /// with them, or stops it at the first answer that ends it.
    fn resolve_futures(
        &mut self,
        pending: ReplResolveFutures,
        chan: &mut Channel,
        cell: &mut RunningCell,
    ) -> Result<CellStep, Disconnected> {
        let ids = pending.pending_call_ids().to_vec();
        let mut results = Vec::with_capacity(ids.len());
        for id in ids {
            match self.wait_answer(self.wire_id(id), chan)? {
                HostAnswer::Result(r) => results.push((id, r)),
                // The cell ends now: the other answers are not awaited
                // (late ones are dropped by their cell number).
                HostAnswer::Stop(exc, reason) => {
                    cell.ended_by_host = reason;
                    return Ok(pending.abort(exc, PrintWriter::Callback(&mut cell.out)));
                }
            }
        }
        Ok(pending.resume(results, PrintWriter::Callback(&mut cell.out)))
    }

    /// The id a call of the running cell has on the wire.
    fn wire_id(&self, call_id: u32) -> u64 {
        (u64::from(self.cells) << 32) | u64::from(call_id)
    }

    /// Blocks until the parent answers `call_id`, keeping other answers of the
    /// cell for later and dropping answers to calls of earlier cells.
    fn wait_answer(
        &mut self,
        call_id: u64,
        chan: &mut Channel,
    ) -> Result<HostAnswer, Disconnected> {
        loop {
            if let Some(answer) = self.answers.remove(&call_id) {
                return Ok(match answer {
                    WireHostResult::Value { value } => {
                        HostAnswer::Result(ExtFunctionResult::Return(from_json(value)))
                    }
                    WireHostResult::Raise { exc_type, message } => {
                        HostAnswer::Result(ExtFunctionResult::Error(exception(&exc_type, message)))
                    }
                    WireHostResult::EndCell { reason } => HostAnswer::Stop(
                        MontyException::new(ExcType::SystemExit, Some(reason.clone())),
                        Some(reason),
                    ),
                    WireHostResult::Abort { exc_type, message } => {
                        HostAnswer::Stop(exception(&exc_type, message), None)
                    }
                });
            }
            match chan.recv()? {
                Some((
                    ToWorker::HostResult {
                        call_id: id,
                        result,
                    },
                    _,
                )) => {
                    if id >> 32 == u64::from(self.cells) {
                        self.answers.insert(id, result);
                    }
                }
                // Anything else in the middle of a cell is a broken parent.
                _ => return Err(Disconnected),
            }
        }
    }

    /// Defines `SHOW_VARS()` over the names the interpreter may have bound.
    ///
    /// monty has no `globals()`, so the function probes each known name and
    /// skips the ones that are not (or no longer) defined.
    fn define_show_vars(&mut self, repl: MontyRepl) -> MontyRepl {
        let mut src = String::from("def SHOW_VARS():\n    _rlm_vars = {}\n");
        for name in &self.known_names {
            if name.starts_with('_') || self.functions.contains_key(name) || name == SHOW_VARS {
                continue;
            }
            src.push_str(&format!(
                "    try:\n        _rlm_vars['{name}'] = type({name}).__name__\n    except NameError:\n        pass\n"
            ));
        }
        src.push_str(
            "    if not _rlm_vars:\n        return 'No variables created yet. Use ```repl``` blocks to create variables.'\n    return 'Available variables: ' + str(_rlm_vars)\n",
        );
        let mut sink = String::new();
        match repl.feed_start(&src, Vec::new(), PrintWriter::collect_string(&mut sink)) {
            Ok(progress) => progress.into_repl(),
            Err(err) => err.repl,
        }
    }

    /// Binds `name` to a value by feeding it as an input of an empty snippet.
    fn set_var(&mut self, name: String, value: Value) {
        let repl = self.repl.take().expect("repl is present between cells");
        self.known_names.insert(name.clone());
        let mut sink = String::new();
        let inputs = vec![(name, from_json(value))];
        self.repl = Some(
            match repl.feed_start("pass", inputs, PrintWriter::collect_string(&mut sink)) {
                Ok(progress) => progress.into_repl(),
                Err(err) => err.repl,
            },
        );
    }

    /// Reads a variable by evaluating its name: its value, `null` when it is
    /// undefined, or why it cannot be sent.
    fn get_var(&mut self, name: &str) -> FromWorker {
        let undefined = FromWorker::Var {
            defined: false,
            value: Value::Null,
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return undefined;
        }
        let mut repl = self.repl.take().expect("repl is present between cells");
        repl.tracker_mut().set_max_duration(Duration::from_secs(5));
        let mut sink = String::new();
        let mut progress =
            repl.feed_start(name, Vec::new(), PrintWriter::collect_string(&mut sink));
        loop {
            progress = match progress {
                Ok(ReplProgress::Complete { repl, value }) => {
                    self.repl = Some(repl);
                    return match check_sendable([&value]) {
                        Ok(()) => FromWorker::Var {
                            defined: true,
                            value: to_json(&value),
                        },
                        Err(why) => FromWorker::Unsendable {
                            message: why.message(&format!("variable {name}")),
                        },
                    };
                }
                Ok(ReplProgress::NameLookup(lookup)) => lookup.resume(
                    NameLookupResult::Undefined,
                    PrintWriter::collect_string(&mut sink),
                ),
                Ok(other) => {
                    self.repl = Some(other.into_repl());
                    return undefined;
                }
                Err(err) => {
                    self.repl = Some(err.repl);
                    return undefined;
                }
            };
        }
    }
}

/// What the running cell has done so far, besides its REPL.
struct RunningCell {
    /// What it printed.
    out: CapturedOutput,
    /// Host function calls it made.
    host_calls: u64,
    /// Why the host ended the cell, if it did.
    ended_by_host: Option<String>,
}

/// The cell's next state after answering what it paused for.
type CellStep = Result<ReplProgress, Box<ReplStartError>>;

/// Refuses an OS call (files, environment, network) in the cell, as a
/// catchable `PermissionError` saying where the data is instead.
fn refuse_os_call(call: ReplOsCall, out: &mut CapturedOutput) -> CellStep {
    let what = call.function_call.name();
    let exc = MontyException::new(
        ExcType::PermissionError,
        Some(format!(
            "{what}: files, the environment and the network are not available in this sandbox; \
             the data you need is already in your variables (e.g. `context`)"
        )),
    );
    call.resume(ExtFunctionResult::Error(exc), PrintWriter::Callback(out))
}

/// What the parent answered to a host call.
enum HostAnswer {
    /// Resume Python with this.
    Result(ExtFunctionResult),
    /// Stop the cell (uncatchably) with this exception; the reason is set when
    /// the host ended the cell on purpose ([`WireHostResult::EndCell`]).
    Stop(MontyException, Option<String>),
}

/// The exception named `exc_type` (`RuntimeError` for a name monty does not know).
fn exception(exc_type: &str, message: String) -> MontyException {
    let ty = ExcType::from_str(exc_type).unwrap_or(ExcType::RuntimeError);
    MontyException::new(ty, Some(message))
}

/// The `HostCall` message for `call`, or (as the `ValueError` message) why its
/// arguments cannot be sent: nested too deep, or over the value limit.
fn host_call_header(
    call: &monty::ReplFunctionCall,
    call_id: u64,
    awaitable: bool,
) -> Result<Vec<u8>, String> {
    let what = format!("the argument of {}", call.function_name);
    let values = call.args.iter().chain(call.kwargs.iter().map(|(_, v)| v));
    check_sendable(values).map_err(|why| why.message(&what))?;
    let kwargs = call
        .kwargs
        .iter()
        .map(|(k, v)| {
            let key = match k {
                MontyObject::String(s) => s.clone(),
                other => other.to_string(),
            };
            (key, to_json(v))
        })
        .collect();
    let msg = FromWorker::HostCall {
        call_id,
        name: call.function_name.clone(),
        args: call.args.iter().map(to_json).collect(),
        kwargs,
        awaitable,
    };
    let header = serde_json::to_vec(&msg).map_err(|e| format!("{what} cannot be sent: {e}"))?;
    if header.len() > MAX_HEADER_BYTES as usize {
        return Err(Unsendable::TooLarge(header.len()).message(&what));
    }
    Ok(header)
}

/// `text` within about `max_bytes`: its head and tail with a marker saying how
/// many characters were cut in between.
fn cut_middle(text: String, max_bytes: usize) -> String {
    match cut_points(&text, max_bytes) {
        None => text,
        Some((head, tail)) => join_cut(&text[..head], &text[head..tail], &text[tail..]),
    }
}

/// Where [`cut_middle`] cuts `text`, if it does.
fn cut_points(text: &str, max_bytes: usize) -> Option<(usize, usize)> {
    let half = (max_bytes / 2).max(1024);
    (text.len() > 2 * half).then(|| {
        (
            floor_char_boundary(text, half),
            ceil_char_boundary(text, text.len() - half),
        )
    })
}

fn join_cut(head: &str, cut: &str, tail: &str) -> String {
    let cut = cut.chars().count();
    format!("{head}\n... [{cut} characters cut] ...\n{tail}")
}

/// `repr(value)` cut like [`cut_middle`]; a long string is cut before its repr
/// is built, which would cost a pass over all of it.
fn repr_within(value: &MontyObject, max_bytes: usize) -> String {
    if let MontyObject::String(text) = value
        && let Some((head, tail)) = cut_points(text, max_bytes)
    {
        let head_repr = MontyObject::String(text[..head].to_string()).py_repr();
        let tail_repr = MontyObject::String(text[tail..].to_string()).py_repr();
        // The head keeps its opening quote, the tail its closing one.
        return join_cut(
            &head_repr[..head_repr.len() - 1],
            &text[head..tail],
            &tail_repr[1..],
        );
    }
    cut_middle(value.py_repr(), max_bytes)
}

fn s(text: &str) -> MontyObject {
    MontyObject::String(text.to_string())
}

/// Turns a Python exception into the wire error: type, message (cut to about
/// `max_bytes`, + hint), line.
fn cell_error(e: &MontyException, max_bytes: usize) -> WireCellError {
    let exc_type = e.exc_type().to_string();
    let message = cut_middle(e.message().unwrap_or_default().to_string(), max_bytes);
    let line = e
        .traceback()
        .iter()
        .rev()
        .find(|f| f.filename.starts_with("<python-input"))
        .map(|f| f.start.line);
    WireCellError {
        message: add_hint(&exc_type, &message),
        exc_type,
        line,
    }
}

/// `print()` capture keeping the head and the tail within a byte budget.
struct CapturedOutput {
    head: String,
    tail: String,
    half: usize,
    total_chars: u64,
    cut: bool,
}

impl CapturedOutput {
    fn new(max_bytes: usize) -> Self {
        Self {
            head: String::new(),
            tail: String::new(),
            half: (max_bytes / 2).max(1024),
            total_chars: 0,
            cut: false,
        }
    }

    fn push(&mut self, text: &str) -> Result<(), MontyException> {
        self.total_chars += text.chars().count() as u64;
        if self.total_chars > MAX_PRINTED_CHARS_PER_CELL {
            return Err(MontyException::new(
                ExcType::MemoryError,
                Some(format!(
                    "output limit exceeded: a cell may print at most {MAX_PRINTED_CHARS_PER_CELL} characters; \
                     print a slice, a count or a summary instead"
                )),
            ));
        }
        let mut rest = text;
        if !self.cut && self.head.len() < self.half {
            let room = self.half - self.head.len();
            let take = floor_char_boundary(rest, room.min(rest.len()));
            self.head.push_str(&rest[..take]);
            rest = &rest[take..];
            if rest.is_empty() {
                return Ok(());
            }
        }
        self.cut = true;
        // Keep only the last `half` bytes of what follows the head.
        if rest.len() >= self.half {
            self.tail.clear();
            let start = ceil_char_boundary(rest, rest.len() - self.half);
            self.tail.push_str(&rest[start..]);
        } else {
            self.tail.push_str(rest);
            if self.tail.len() > 2 * self.half {
                let start = ceil_char_boundary(&self.tail, self.tail.len() - self.half);
                self.tail.drain(..start);
            }
        }
        Ok(())
    }

    /// The captured text (with a marker where the middle was dropped) and the
    /// number of characters printed in total.
    fn finish(mut self) -> (String, u64) {
        if !self.cut {
            return (self.head, self.total_chars);
        }
        if self.tail.len() > self.half {
            let start = ceil_char_boundary(&self.tail, self.tail.len() - self.half);
            self.tail.drain(..start);
        }
        let kept = (self.head.chars().count() + self.tail.chars().count()) as u64;
        let dropped = self.total_chars.saturating_sub(kept);
        if dropped == 0 {
            self.head.push_str(&self.tail);
            return (self.head, self.total_chars);
        }
        let text = format!(
            "{}\n... [{dropped} characters cut] ...\n{}",
            self.head, self.tail
        );
        (text, self.total_chars)
    }
}

impl PrintWriterCallback for CapturedOutput {
    fn stdout_write(&mut self, output: std::borrow::Cow<'_, str>) -> Result<(), MontyException> {
        self.push(&output)
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        let mut buf = [0u8; 4];
        self.push(end.encode_utf8(&mut buf))
    }
}

/// Largest char boundary `<= idx`.
pub(crate) fn floor_char_boundary(s: &str, mut idx: usize) -> usize {
    if idx >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(idx) {
        idx -= 1;
    }
    idx
}

/// Smallest char boundary `>= idx`.
pub(crate) fn ceil_char_boundary(s: &str, mut idx: usize) -> usize {
    if idx >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(idx) {
        idx += 1;
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_output_keeps_head_and_tail() {
        let mut out = CapturedOutput::new(2048);
        for i in 0..10_000 {
            out.push(&format!("line {i}\n")).unwrap();
        }
        let (text, total) = out.finish();
        assert!(text.starts_with("line 0\n"));
        assert!(text.ends_with("line 9999\n"));
        assert!(text.contains("characters cut"));
        assert!(total > 60_000);
        assert!(text.len() < 3000);
    }

    #[test]
    fn captured_output_small_is_verbatim() {
        let mut out = CapturedOutput::new(2048);
        out.push("héllo").unwrap();
        out.push("\n").unwrap();
        assert_eq!(out.finish(), ("héllo\n".to_string(), 6));
    }
}
