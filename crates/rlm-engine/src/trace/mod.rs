//! The trace: one event stream for a whole question.
//!
//! Every step (model request and response, code cell and output, sub-call,
//! finding, final, verification, budget exhaustion, error) is a [`TraceEvent`].
//! A [`Trace`] stamps it with a sequence number and time, appends it to a JSONL
//! file (flushed per line, so a cancelled run keeps its trace) and broadcasts it
//! for live rendering. Secrets never enter it: events carry prompts, replies,
//! code and usage, never configuration of providers.

mod export;

pub use export::export_rlm_logger;

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rlm_llm::bounded::{CappedLines, LineError};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::budget::{Exhausted, UsageReport};
use crate::text::named_enum;

/// One chat message as sent to the model (for the trace and the logger export).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// What a model call was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallPurpose {
    /// A turn of an agent's REPL loop.
    Iteration,
    /// The "give the final answer now" turn after the iteration cap.
    FinalNow,
    /// A plain `llm_query` from code.
    SubQuery,
    /// The synthesis fallback after a budget ran out.
    Synthesis,
    /// The extraction call: the answer from the best passages the run saw,
    /// when the loop ended without one.
    Extraction,
    /// `--flow auto`: the triage call choosing `rag` or an RLM flow.
    Triage,
    /// Pipeline: intent extraction (once per question).
    Intent,
    /// Pipeline: generating an inspection program.
    Codegen,
    /// Pipeline (hypothesis inspector): the hypothesis of a round.
    Hypothesis,
    /// Pipeline (hypothesis inspector): batched per-chunk relevance scores.
    Relevance,
    /// Pipeline: a per-file summary.
    Summary,
    /// Pipeline: the cross-file merge into the answer.
    Merge,
    /// `rag`: the one answer call.
    Answer,
    /// The entailment judge: does each claim's passage state it.
    SemanticCheck,
    /// The answer put into the user's schema (a typed answer).
    TypedAnswer,
    /// The answer rewritten in the question's language.
    Translation,
}

impl CallPurpose {
    /// The calls that answer when the loop could not: a root's one such
    /// call is paid from the budget's reserve.
    pub fn is_last_resort(self) -> bool {
        matches!(
            self,
            CallPurpose::Synthesis | CallPurpose::Extraction | CallPurpose::TypedAnswer
        )
    }
}

named_enum! {
    /// How an agent's answer was committed (the `via` of a `final` event).
    pub enum CommitVia {
        /// `FINAL(...)` / `FINAL_VAR(...)` called in a code cell.
        Code = "code",
        /// `FINAL(...)` written in the reply's prose.
        Prose = "prose",
        /// The `answer = {"content": ..., "ready": True}` convention.
        AnswerDict = "answer_dict",
        /// A reply in plain words stating a fact the agents were shown.
        ProseFactSeen = "prose_fact_seen",
        /// The last turn after replies without code, shown the first of them.
        FinalFromProse = "final_from_prose",
        /// The last turn after a turn that repeated an earlier one.
        FinalAfterRepeats = "final_after_repeats",
        /// The last turn after the iteration cap.
        FinalNow = "final_now",
        /// The synthesis fallback after a budget, a cap or a failure.
        Synthesis = "synthesis",
        /// A structured turn's answer step.
        Structured = "structured",
        /// The extraction call over the best passages the run saw, when the
        /// loop ended without an answer.
        Extraction = "extraction",
    }
}

/// Everything that can happen during a question. `agent` ids name the position
/// in the call tree: `0` is the root, `0.2` its third child, `0.2.1` a grandchild.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceEvent {
    /// The question started.
    RunStarted {
        /// Run id (also the trace id in the answer).
        run_id: String,
        /// The question.
        question: String,
        /// Flow name (`repl`).
        flow: String,
        /// Root model name.
        root_model: String,
        /// Sub-call model name.
        sub_model: String,
        /// Documents in the context.
        documents: usize,
        /// Characters in the context.
        context_chars: u64,
        /// Budget limits in force (as JSON).
        budget: serde_json::Value,
    },
    /// A model request is about to be sent.
    LlmRequest {
        /// Agent id.
        agent: String,
        /// Depth of the agent.
        depth: u32,
        /// Turn number within the agent (1-based; 0 for sub-queries).
        iteration: u32,
        /// Model name.
        model: String,
        /// What the call is for.
        purpose: CallPurpose,
        /// Messages in the request.
        message_count: usize,
        /// Messages added since this agent's previous request (the whole
        /// conversation is the concatenation of these over the agent's requests).
        new_messages: Vec<TraceMessage>,
    },
    /// A model reply arrived.
    LlmResponse {
        /// Agent id.
        agent: String,
        /// Depth of the agent.
        depth: u32,
        /// Model name.
        model: String,
        /// The reply text.
        text: String,
        /// Input tokens.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
        /// Cached input tokens.
        cached_input_tokens: u64,
        /// Cost in USD if known.
        cost_usd: Option<f64>,
        /// Latency in milliseconds.
        latency_ms: u64,
        /// The reply came from the store's reply cache (no model call: the
        /// token counts are what the first call cost).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        from_cache: bool,
        /// Speculative decoding's proposals for this reply (the embedded
        /// model with a draft model): proposed and kept tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        draft: Option<rlm_llm::DraftTokens>,
    },
    /// A piece of a model reply while it is generated (providers that
    /// stream: the local model; a replayed stream arrives as one piece). The
    /// pieces of one attempt add up to the [`TraceEvent::LlmResponse`] text;
    /// a higher `attempt` voids what earlier attempts streamed.
    LlmDelta {
        /// Agent id.
        agent: String,
        /// Depth of the agent.
        depth: u32,
        /// 1-based attempt of the call (retries start over).
        attempt: u32,
        /// The new text.
        text: String,
    },
    /// A model call failed and is about to be tried again (after its
    /// backoff): attempt `attempt` of at most `of`.
    LlmRetry {
        /// Agent id.
        agent: String,
        /// Depth.
        depth: u32,
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        /// The most attempts the call makes.
        of: u32,
        /// Why the attempt before failed.
        reason: String,
    },
    /// A model call failed (after the model layer's retries).
    LlmError {
        /// Agent id.
        agent: String,
        /// Depth.
        depth: u32,
        /// The error.
        message: String,
    },
    /// A code cell is about to run.
    Cell {
        /// Agent id.
        agent: String,
        /// Depth.
        depth: u32,
        /// Turn number.
        iteration: u32,
        /// Index of the block within the reply.
        index: usize,
        /// The code.
        code: String,
    },
    /// A code cell finished.
    CellOutput {
        /// Agent id.
        agent: String,
        /// Depth.
        depth: u32,
        /// Turn number.
        iteration: u32,
        /// Index of the block within the reply.
        index: usize,
        /// Captured stdout (untruncated up to the sandbox's own cap).
        stdout: String,
        /// Error text if the cell raised.
        error: Option<String>,
        /// Run time in milliseconds.
        elapsed_ms: u64,
        /// Host calls made by the cell.
        host_calls: u64,
    },
    /// A sub-call (llm_query or rlm_query child) started.
    SubcallStart {
        /// Id of the sub-call (child agent id).
        agent: String,
        /// Parent agent id.
        parent: String,
        /// Depth of the child.
        depth: u32,
        /// `llm_query` or `rlm_query`.
        kind: String,
        /// Start of the prompt (first 300 characters).
        prompt_preview: String,
    },
    /// A sub-call finished.
    SubcallEnd {
        /// Id of the sub-call.
        agent: String,
        /// Parent agent id.
        parent: String,
        /// Depth of the child.
        depth: u32,
        /// False when it failed.
        ok: bool,
        /// The result text.
        result: String,
        /// Duration in milliseconds.
        elapsed_ms: u64,
    },
    /// `add_finding` was called.
    Finding {
        /// Agent id.
        agent: String,
        /// The finding.
        text: String,
        /// Its source, if given.
        source: Option<String>,
    },
    /// An agent committed (or tried to commit) an answer.
    Final {
        /// Agent id.
        agent: String,
        /// Depth.
        depth: u32,
        /// The answer.
        answer: String,
        /// How it was committed.
        via: CommitVia,
        /// True when the engine deferred it (FINAL in a fan-out cell).
        deferred: bool,
    },
    /// Citation verification result.
    Verification {
        /// The report as JSON.
        report: serde_json::Value,
    },
    /// A budget ran out.
    BudgetExhausted {
        /// Agent that hit it.
        agent: String,
        /// Depth.
        depth: u32,
        /// Which budget.
        reason: Exhausted,
    },
    /// Something failed that the run survived.
    Error {
        /// Agent id.
        agent: String,
        /// The error.
        message: String,
    },
    /// A step of the `pipeline`, `rag` or `auto` flow: `route`, `intent`,
    /// `retrieval`, `expansion`, `inspector`, `selection`, `summary`, `merge`,
    /// `citations` (the pipeline's log lines are in `message`).
    FlowStep {
        /// Agent id (`0` for the question, `0.N` for file N).
        agent: String,
        /// Which step.
        step: String,
        /// One human-readable line.
        message: String,
        /// Details as JSON.
        data: serde_json::Value,
    },
    /// A flow fell back from what it tried to a simpler path, and why.
    Fallback {
        /// Agent id.
        agent: String,
        /// What fell back (e.g. `per_chunk_guard`, `codegen`, `triage`).
        kind: String,
        /// Why, in words.
        reason: String,
    },
    /// The question finished.
    RunFinished {
        /// Answer is partial.
        partial: bool,
        /// Why it is partial.
        reason: Option<String>,
        /// Final usage.
        usage: UsageReport,
    },
}

impl TraceEvent {
    /// The agent id the event belongs to, if any.
    pub fn agent(&self) -> Option<&str> {
        match self {
            TraceEvent::LlmRequest { agent, .. }
            | TraceEvent::LlmResponse { agent, .. }
            | TraceEvent::LlmDelta { agent, .. }
            | TraceEvent::LlmRetry { agent, .. }
            | TraceEvent::LlmError { agent, .. }
            | TraceEvent::Cell { agent, .. }
            | TraceEvent::CellOutput { agent, .. }
            | TraceEvent::SubcallStart { agent, .. }
            | TraceEvent::SubcallEnd { agent, .. }
            | TraceEvent::Finding { agent, .. }
            | TraceEvent::Final { agent, .. }
            | TraceEvent::BudgetExhausted { agent, .. }
            | TraceEvent::Error { agent, .. }
            | TraceEvent::FlowStep { agent, .. }
            | TraceEvent::Fallback { agent, .. } => Some(agent),
            _ => None,
        }
    }
}

/// An event with its place in the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// 0-based sequence number.
    pub seq: u64,
    /// Milliseconds since the run started.
    pub t_ms: u64,
    /// Wall-clock time, RFC 3339 UTC.
    pub ts: String,
    /// The event.
    #[serde(flatten)]
    pub event: TraceEvent,
}

/// The event stream of one run: JSONL file (optional) plus a broadcast channel,
/// and optionally the whole history in memory (for late subscribers: the
/// server's event stream replays a run from its first event).
#[derive(Debug)]
pub struct Trace {
    started: Instant,
    seq: AtomicU64,
    sink: Mutex<Sinks>,
    tx: broadcast::Sender<TraceRecord>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Sinks {
    file: Option<BufWriter<File>>,
    /// The first error writing `file`; nothing more is written after it.
    write_error: Option<String>,
    history: Option<Vec<TraceRecord>>,
}

impl Default for Trace {
    fn default() -> Self {
        Self::new()
    }
}

impl Trace {
    /// A trace that only broadcasts.
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(4096);
        Trace {
            started: Instant::now(),
            seq: AtomicU64::new(0),
            sink: Mutex::new(Sinks::default()),
            tx,
            changed: tokio::sync::Notify::new(),
        }
    }

    /// A trace that also appends every event to `path` (created or truncated).
    /// A failed write stops the file and is kept: check
    /// [`Trace::write_error`] when the run ends.
    pub fn to_file(path: &Path) -> std::io::Result<Self> {
        let f = File::create(path)?;
        let t = Self::new();
        t.sinks().file = Some(BufWriter::new(f));
        Ok(t)
    }

    /// Also keeps every event in memory, for [`Trace::records_from`].
    pub fn with_history(self) -> Self {
        self.sinks().history.get_or_insert_with(Vec::new);
        self
    }

    fn sinks(&self) -> std::sync::MutexGuard<'_, Sinks> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept events from sequence number `from` on (empty without
    /// [`Trace::with_history`]).
    pub fn records_from(&self, from: usize) -> Vec<TraceRecord> {
        match &self.sinks().history {
            Some(h) => h.get(from..).unwrap_or_default().to_vec(),
            None => Vec::new(),
        }
    }

    /// Resolves at the next event (or [`Trace::wake`]). Enable it before
    /// checking for new events so none slips between check and wait.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Wakes everyone waiting in [`Trace::changed`] (e.g. when the run's
    /// state changed without an event).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Subscribes to live events (for progress rendering or SSE).
    pub fn subscribe(&self) -> broadcast::Receiver<TraceRecord> {
        self.tx.subscribe()
    }

    /// Records an event.
    pub fn emit(&self, event: TraceEvent) {
        // Numbered under the lock: file, history and subscribers see the
        // events in sequence order even when agents emit concurrently.
        let mut sinks = self.sinks();
        let rec = TraceRecord {
            seq: self.seq.fetch_add(1, Ordering::SeqCst),
            t_ms: self.started.elapsed().as_millis() as u64,
            ts: now_rfc3339(),
            event,
        };
        if let Some(w) = sinks.file.as_mut() {
            // Flush per line: a killed run keeps every event up to the kill.
            let written = serde_json::to_string(&rec)
                .map_err(|e| format!("event {} could not be encoded: {e}", rec.seq))
                .and_then(|line| {
                    writeln!(w, "{line}")
                        .and_then(|_| w.flush())
                        .map_err(|e| e.to_string())
                });
            if let Err(e) = written {
                // Disk full or similar: stop writing, keep running, and keep
                // the error for `write_error` (the trace is incomplete).
                sinks.file = None;
                sinks.write_error = Some(e);
            }
        }
        if let Some(h) = sinks.history.as_mut() {
            h.push(rec.clone());
        }
        let _ = self.tx.send(rec);
        drop(sinks);
        self.changed.notify_waiters();
    }

    /// The first error writing the trace file (see [`Trace::to_file`]), if
    /// any: the file then lacks that event and every later one.
    pub fn write_error(&self) -> Option<String> {
        self.sinks().write_error.clone()
    }

    /// Events emitted so far.
    pub fn len(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// True when nothing was emitted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Turns a model call's streamed text into [`TraceEvent::LlmDelta`] events,
/// a few per second rather than one per token: pieces are held until a line
/// ends, 64 bytes gather or 150 ms pass. [`DeltaStream::close`] emits the
/// rest; call it when the call returns, before its response event.
#[derive(Clone)]
pub(crate) struct DeltaStream {
    trace: std::sync::Arc<Trace>,
    agent: String,
    depth: u32,
    pending: std::sync::Arc<Mutex<PendingDelta>>,
}

struct PendingDelta {
    attempt: u32,
    text: String,
    since: Instant,
    /// The call is over: text that still arrives (a withdrawn generation's
    /// last token) belongs to no reply and is dropped.
    closed: bool,
}

impl DeltaStream {
    const FLUSH_BYTES: usize = 64;
    const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(150);

    /// A stream for the calls of `agent` at `depth`.
    pub(crate) fn new(trace: std::sync::Arc<Trace>, agent: &str, depth: u32) -> Self {
        DeltaStream {
            trace,
            agent: agent.to_string(),
            depth,
            pending: std::sync::Arc::new(Mutex::new(PendingDelta {
                attempt: 1,
                text: String::new(),
                since: Instant::now(),
                closed: false,
            })),
        }
    }

    /// The sink to put on the model request.
    pub(crate) fn sink(&self) -> rlm_llm::TokenSink {
        let stream = self.clone();
        let retries = self.clone();
        rlm_llm::TokenSink::new(move |delta| stream.push(delta.attempt, delta.text)).on_retry(
            move |r| {
                retries.trace.emit(TraceEvent::LlmRetry {
                    agent: retries.agent.clone(),
                    depth: retries.depth,
                    attempt: r.attempt,
                    of: r.of,
                    reason: r.reason.to_string(),
                })
            },
        )
    }

    fn push(&self, attempt: u32, text: &str) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.closed {
            return;
        }
        if attempt != p.attempt {
            self.emit(&mut p);
            p.attempt = attempt;
        }
        if p.text.is_empty() {
            p.since = Instant::now();
        }
        p.text.push_str(text);
        if text.contains('\n')
            || p.text.len() >= Self::FLUSH_BYTES
            || p.since.elapsed() >= Self::FLUSH_AFTER
        {
            self.emit(&mut p);
        }
    }

    /// Emits whatever is still held and ignores anything streamed later.
    /// Idempotent.
    pub(crate) fn close(&self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        self.emit(&mut p);
        p.closed = true;
    }

    /// Closes the stream when dropped: a call cancelled mid-generation
    /// (wall clock, Ctrl-C) never returns to close it itself.
    pub(crate) fn closer(&self) -> DeltaCloser {
        DeltaCloser(self.clone())
    }

    fn emit(&self, p: &mut PendingDelta) {
        if p.text.is_empty() {
            return;
        }
        self.trace.emit(TraceEvent::LlmDelta {
            agent: self.agent.clone(),
            depth: self.depth,
            attempt: p.attempt,
            text: std::mem::take(&mut p.text),
        });
    }
}

/// See [`DeltaStream::closer`].
pub(crate) struct DeltaCloser(DeltaStream);

impl Drop for DeltaCloser {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Current UTC time as RFC 3339 with milliseconds, without a date crate.
pub fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Why [`read_trace`] could not read a trace file.
#[derive(Debug, thiserror::Error)]
pub enum TraceReadError {
    /// The file cannot be opened.
    #[error("cannot open trace {}: {source}", .path.display())]
    Open {
        /// The trace file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line cannot be read (too long, not UTF-8, a read error).
    #[error("trace {}: {source}", .path.display())]
    Line {
        /// The trace file.
        path: PathBuf,
        /// What was wrong with the line.
        source: LineError,
    },
    /// A line is not a trace event.
    #[error(
        "{} line {line}: not an rlm trace event ({source}); is this a file written by `rlm ask --trace`?",
        .path.display()
    )]
    NotAnEvent {
        /// The trace file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Why the line is no event.
        source: serde_json::Error,
    },
}

/// Reads a JSONL trace file. Lines that are not events (e.g. a truncated last
/// line of a killed run) are reported by line number.
pub fn read_trace(path: &Path) -> Result<Vec<TraceRecord>, TraceReadError> {
    let f = File::open(path).map_err(|source| TraceReadError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    // Streamed with a cap per line: an endless file is an error, not a hang.
    let lines = CappedLines::new(BufReader::new(f), rlm_llm::bounded::JSONL_LINE_LIMIT);
    for line in lines {
        let (n, line) = line.map_err(|source| TraceReadError::Line {
            path: path.to_path_buf(),
            source,
        })?;
        let record = serde_json::from_str::<TraceRecord>(&line).map_err(|source| {
            TraceReadError::NotAnEvent {
                path: path.to_path_buf(),
                line: n,
                source,
            }
        })?;
        out.push(record);
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The (attempt, text) of every delta event emitted so far.
    fn deltas(rx: &mut broadcast::Receiver<TraceRecord>) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        while let Ok(r) = rx.try_recv() {
            if let TraceEvent::LlmDelta {
                agent,
                depth,
                attempt,
                text,
            } = r.event
            {
                assert_eq!((agent.as_str(), depth), ("0.1", 1));
                out.push((attempt, text));
            }
        }
        out
    }

    #[test]
    fn streamed_tokens_reach_the_trace_in_lines_and_add_up_to_the_reply() {
        let trace = std::sync::Arc::new(Trace::new());
        let mut rx = trace.subscribe();
        let stream = DeltaStream::new(trace.clone(), "0.1", 1);
        let sink = stream.sink();
        for piece in ["x = ", "len(", "context)", "\n", "print", "(x)"] {
            sink.send(piece);
        }
        // One event per finished line; the unfinished line waits for more.
        assert_eq!(deltas(&mut rx), vec![(1, "x = len(context)\n".to_string())]);
        stream.close();
        assert_eq!(deltas(&mut rx), vec![(1, "print(x)".to_string())]);
        stream.close();
        assert!(deltas(&mut rx).is_empty(), "nothing held, nothing emitted");
        // A closed stream ignores text that still arrives.
        sink.send("late\n");
        assert!(deltas(&mut rx).is_empty());

        let stream = DeltaStream::new(trace.clone(), "0.1", 1);
        let sink = stream.sink();

        // Long text without a newline goes out in pieces of about 64 bytes.
        for _ in 0..20 {
            sink.send("abcdefgh");
        }
        stream.close();
        let long = deltas(&mut rx);
        assert!(long.len() >= 2, "{long:?}");
        assert_eq!(
            long.iter().map(|d| d.1.as_str()).collect::<String>(),
            "abcdefgh".repeat(20)
        );
    }

    #[test]
    fn a_retry_flushes_the_failed_attempt_and_numbers_the_new_one() {
        let trace = std::sync::Arc::new(Trace::new());
        let mut rx = trace.subscribe();
        let stream = DeltaStream::new(trace.clone(), "0.1", 1);
        let sink = stream.sink();
        sink.send("partial");
        sink.start_attempt(2);
        sink.send("whole reply");
        drop(stream.closer());
        sink.send("after the call");
        assert_eq!(
            deltas(&mut rx),
            vec![(1, "partial".to_string()), (2, "whole reply".to_string())]
        );
    }

    pub(crate) fn sample() -> Vec<TraceEvent> {
        vec![
            TraceEvent::RunStarted {
                run_id: "r1".into(),
                question: "q?".into(),
                flow: "repl".into(),
                root_model: "m".into(),
                sub_model: "s".into(),
                documents: 1,
                context_chars: 10,
                budget: serde_json::json!({"max_depth": 2, "root_iterations": 25}),
            },
            TraceEvent::LlmRequest {
                agent: "0".into(),
                depth: 0,
                iteration: 1,
                model: "m".into(),
                purpose: CallPurpose::Iteration,
                message_count: 2,
                new_messages: vec![
                    TraceMessage {
                        role: "system".into(),
                        content: "sys".into(),
                    },
                    TraceMessage {
                        role: "user".into(),
                        content: "first".into(),
                    },
                ],
            },
            TraceEvent::LlmResponse {
                agent: "0".into(),
                depth: 0,
                model: "m".into(),
                text: "```repl\nprint(llm_query('x'))\n```".into(),
                input_tokens: 5,
                output_tokens: 3,
                cached_input_tokens: 0,
                cost_usd: None,
                latency_ms: 1,
                from_cache: false,
                draft: None,
            },
            TraceEvent::Cell {
                agent: "0".into(),
                depth: 0,
                iteration: 1,
                index: 0,
                code: "print(llm_query('x'))".into(),
            },
            TraceEvent::SubcallStart {
                agent: "0.0".into(),
                parent: "0".into(),
                depth: 1,
                kind: "llm_query".into(),
                prompt_preview: "x".into(),
            },
            TraceEvent::SubcallEnd {
                agent: "0.0".into(),
                parent: "0".into(),
                depth: 1,
                ok: true,
                result: "y".into(),
                elapsed_ms: 3,
            },
            TraceEvent::CellOutput {
                agent: "0".into(),
                depth: 0,
                iteration: 1,
                index: 0,
                stdout: "y\n".into(),
                error: None,
                elapsed_ms: 4,
                host_calls: 1,
            },
            TraceEvent::LlmRequest {
                agent: "0".into(),
                depth: 0,
                iteration: 2,
                model: "m".into(),
                purpose: CallPurpose::Iteration,
                message_count: 4,
                new_messages: vec![TraceMessage {
                    role: "user".into(),
                    content: "out".into(),
                }],
            },
            TraceEvent::LlmResponse {
                agent: "0".into(),
                depth: 0,
                model: "m".into(),
                text: "FINAL(y)".into(),
                input_tokens: 5,
                output_tokens: 3,
                cached_input_tokens: 0,
                cost_usd: None,
                latency_ms: 1,
                from_cache: false,
                draft: None,
            },
            TraceEvent::Final {
                agent: "0".into(),
                depth: 0,
                answer: "y".into(),
                via: CommitVia::Prose,
                deferred: false,
            },
        ]
    }

    #[test]
    fn jsonl_roundtrip_and_broadcast() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let t = Trace::to_file(&p).unwrap();
        let mut rx = t.subscribe();
        for e in sample() {
            t.emit(e);
        }
        assert_eq!(t.len(), sample().len() as u64);
        let back = read_trace(&p).unwrap();
        assert_eq!(back.len(), sample().len());
        assert_eq!(back[3].event, sample()[3]);
        assert_eq!(back[9].seq, 9);
        assert_eq!(rx.try_recv().unwrap().seq, 0);
    }

    #[test]
    fn a_failed_write_is_kept_and_the_run_goes_on() {
        let t = Trace::to_file(Path::new("/dev/full")).unwrap();
        assert_eq!(t.write_error(), None);
        let mut rx = t.subscribe();
        for e in sample() {
            t.emit(e);
        }
        let e = t.write_error().expect("the write to /dev/full failed");
        assert!(e.contains("No space left on device"), "{e}");
        // Subscribers still saw every event.
        assert_eq!(rx.try_recv().unwrap().seq, 0);
        assert_eq!(t.len(), sample().len() as u64);
    }

    #[test]
    fn an_endless_trace_is_refused_at_the_line_cap() {
        let e = read_trace(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "trace /dev/zero: line 1 is longer than the limit of 256 MiB"
        );
    }

    #[test]
    fn read_trace_rejects_foreign_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, "{\"hello\": 1}\n").unwrap();
        let e = read_trace(&p).unwrap_err();
        assert!(
            matches!(e, TraceReadError::NotAnEvent { line: 1, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("line 1"), "{e}");
        assert!(
            read_trace(&dir.path().join("missing"))
                .unwrap_err()
                .to_string()
                .contains("cannot open")
        );
    }

    #[test]
    fn rfc3339_shape() {
        let s = now_rfc3339();
        assert_eq!(s.len(), 24, "{s}");
        assert!(s.ends_with('Z') && s.as_bytes()[10] == b'T');
    }
}
