//! The `repl` flow: the Recursive Language Model loop (seeds 003 and 004).
//!
//! One question runs as a tree of agents. The root (depth 0) gets the corpus as
//! `context` in a sandbox session, sees the output of an inspection cell the
//! engine ran for it, and then loops: model reply → code cells → truncated
//! output back → ... until it commits with `FINAL`. Code can call sub-models
//! (`llm_query`, `llm_query_batched`, `llm_query_async`) and start child agents
//! (`rlm_query`) one level deeper, each with its own sandbox. One [`Budget`]
//! bounds the whole tree; running out of it (or of turns) ends in one synthesis
//! call from what was gathered and an answer marked partial, never an error
//! string as the answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rlm_llm::{ChatModel, ChatRequest, ChatResponse, Message, ModelRole, Role};
use rlm_sandbox::{
    CellResult, HostCall, HostError, HostFunctionKind, HostHandler, InputValue, Session,
    SessionSpec, WorkerPool, truncate_output,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};

use crate::budget::{Budget, BudgetConfig, CallUsage, Exhausted, UsageReport};
use crate::citations::{self, Citation, CitationPolicy, VerificationReport};
use crate::corpus::{ContextShape, Corpus};
use crate::parse::{self, FinalDirective, RepeatDetector};
use crate::prompts::{self, render};
use crate::session::{Finding, SessionState};
use crate::trace::{CallPurpose, DeltaStream, Trace, TraceEvent, TraceMessage};

/// Engine settings beyond the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Limits shared by the call tree.
    pub budget: BudgetConfig,
    /// Shape of `context` in the REPL. `RLM_CONTEXT_SHAPE`, default `string`.
    pub context_shape: ContextShape,
    /// What verification does to the answer. `RLM_CITATIONS`, default `best_effort`.
    pub citation_policy: CitationPolicy,
    /// Run citation verification. `RLM_VERIFY_CITATIONS`, default true.
    pub verify_citations: bool,
    /// Defer a FINAL written in the same turn as sub-calls (seed 004's fix).
    /// `RLM_DEFER_FINAL`, default true.
    pub defer_final_after_fanout: bool,
    /// Full-text hits for the question shown by the root's inspection cell
    /// (their matching lines). `RLM_INSPECT_SEARCH_K`, default 3; 0 = off.
    #[serde(default = "default_inspect_search_k")]
    pub inspect_search_k: usize,
    /// Replies in a row without code or FINAL after which the agent gets its
    /// last turn (shown its first such reply, which is often an unmarked
    /// answer). `RLM_MAX_NO_CODE_REPLIES`, default 3.
    #[serde(default = "default_max_replies_without_code")]
    pub max_replies_without_code: u32,
    /// How much text the prompt says a sub-model can take, in characters.
    /// `RLM_SUB_CONTEXT_CHARS`, default 100,000.
    pub sub_context_chars: usize,
    /// Root model name (for the trace; the client decides the real one).
    pub root_model: String,
    /// Sub model name (for the trace).
    pub sub_model: String,
    /// Settings of the `pipeline`, `rag` and `auto` flows and the RLM switch.
    #[serde(default)]
    pub flows: crate::pipeline::FlowsConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            budget: BudgetConfig::default(),
            context_shape: ContextShape::String,
            citation_policy: CitationPolicy::BestEffort,
            verify_citations: true,
            defer_final_after_fanout: true,
            max_replies_without_code: default_max_replies_without_code(),
            inspect_search_k: default_inspect_search_k(),
            sub_context_chars: 100_000,
            root_model: String::new(),
            sub_model: String::new(),
            flows: crate::pipeline::FlowsConfig::default(),
        }
    }
}

fn default_max_replies_without_code() -> u32 {
    3
}

fn default_inspect_search_k() -> usize {
    3
}

fn parse_bool(key: &str, v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "environment variable {key}={v:?} is not a boolean; use true or false"
        )),
    }
}

impl EngineConfig {
    /// Defaults overridden by environment variables (see the README table).
    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env) with an explicit lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut c = EngineConfig {
            budget: BudgetConfig::from_lookup(&get)?,
            flows: crate::pipeline::FlowsConfig::from_lookup(&get)?,
            ..Default::default()
        };
        if let Some(v) = get("RLM_CONTEXT_SHAPE").filter(|v| !v.trim().is_empty()) {
            c.context_shape = v.parse().map_err(|e| format!("RLM_CONTEXT_SHAPE: {e}"))?;
        }
        if let Some(v) = get("RLM_CITATIONS").filter(|v| !v.trim().is_empty()) {
            c.citation_policy = v.parse().map_err(|e| format!("RLM_CITATIONS: {e}"))?;
        }
        if let Some(v) = get("RLM_VERIFY_CITATIONS").filter(|v| !v.trim().is_empty()) {
            c.verify_citations = parse_bool("RLM_VERIFY_CITATIONS", &v)?;
        }
        if let Some(v) = get("RLM_DEFER_FINAL").filter(|v| !v.trim().is_empty()) {
            c.defer_final_after_fanout = parse_bool("RLM_DEFER_FINAL", &v)?;
        }
        if let Some(v) = get("RLM_INSPECT_SEARCH_K").filter(|v| !v.trim().is_empty()) {
            c.inspect_search_k = v
                .trim()
                .parse()
                .ok()
                .filter(|k| *k <= 50)
                .ok_or_else(|| {
                    format!(
                        "environment variable RLM_INSPECT_SEARCH_K={v:?} is not a whole number from 0 to 50"
                    )
                })?;
        }
        if let Some(v) = get("RLM_MAX_NO_CODE_REPLIES").filter(|v| !v.trim().is_empty()) {
            c.max_replies_without_code = v
                .trim()
                .parse()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    format!(
                        "environment variable RLM_MAX_NO_CODE_REPLIES={v:?} is not a whole number of at least 1"
                    )
                })?;
        }
        if let Some(v) = get("RLM_SUB_CONTEXT_CHARS").filter(|v| !v.trim().is_empty()) {
            c.sub_context_chars = v.trim().parse().map_err(|_| {
                format!("environment variable RLM_SUB_CONTEXT_CHARS={v:?} is not a valid number")
            })?;
        }
        Ok(c)
    }
}

/// A cancellation signal (Ctrl-C, a closed HTTP stream). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<CancelInner>);

#[derive(Debug, Default)]
struct CancelInner {
    flag: AtomicBool,
    notify: Notify,
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every run holding this token.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// True after [`cancel`](Self::cancel).
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// The strategy answering a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// None named: `RLM_ENABLED` picks `RLM_FLOW` (default `repl`) or `rag`.
    #[default]
    Configured,
    /// The paper's REPL loop over the whole corpus.
    Repl,
    /// Seed 001's flow: intent, high-recall retrieval, files, per-file inspectors, merge.
    Pipeline,
    /// RLM off: top-k retrieval, one answer call, citations.
    Rag,
    /// One cheap triage call picks `rag` or the RLM flow.
    Auto,
}

impl Flow {
    /// The name on the command line and in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Flow::Configured => "configured",
            Flow::Repl => "repl",
            Flow::Pipeline => "pipeline",
            Flow::Rag => "rag",
            Flow::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Flow {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "repl" => Ok(Flow::Repl),
            "pipeline" => Ok(Flow::Pipeline),
            "rag" => Ok(Flow::Rag),
            "auto" => Ok(Flow::Auto),
            other => Err(format!(
                "unknown flow {other:?}; use repl, pipeline, rag or auto"
            )),
        }
    }
}

/// One question.
#[derive(Debug, Clone)]
pub struct AskRequest {
    /// The question.
    pub question: String,
    /// The strategy.
    pub flow: Flow,
    /// Domain instructions added to the system prompt (seed 004's PROMPT.md).
    pub briefing: Option<String>,
    /// Earlier turns and findings of the session, if any.
    pub session: Option<SessionState>,
    /// Where events go.
    pub trace: Arc<Trace>,
    /// Stops the run early; the answer is then partial.
    pub cancel: CancelToken,
    /// Per-request settings of the `pipeline` flow (inspector, citation policy).
    pub pipeline: crate::pipeline::PipelineRequest,
}

impl AskRequest {
    /// A request with no briefing, no session, a broadcast-only trace.
    pub fn new(question: impl Into<String>) -> Self {
        AskRequest {
            question: question.into(),
            flow: Flow::Configured,
            briefing: None,
            session: None,
            trace: Arc::new(Trace::new()),
            cancel: CancelToken::new(),
            pipeline: crate::pipeline::PipelineRequest::default(),
        }
    }
}

/// Identifies the trace of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Run id.
    pub id: String,
    /// Events emitted.
    pub events: u64,
}

/// The result of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The answer text (with flags inline under the strict citation policy).
    pub answer: String,
    /// True when the run did not finish normally (budget, cap, cancel).
    pub partial: bool,
    /// Why it is partial.
    pub partial_reason: Option<String>,
    /// Citations found in the answer, resolved and checked.
    pub citations: Vec<Citation>,
    /// The verification report; `None` when verification is off.
    pub verification: Option<VerificationReport>,
    /// Calls, tokens, cost, time.
    pub usage: UsageReport,
    /// The trace.
    pub trace: TraceInfo,
    /// Findings added during this run (the session keeps them).
    pub findings: Vec<Finding>,
    /// `pipeline` flow: one summary per inspected file, citing its chunks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_summaries: Vec<crate::pipeline::FileSummary>,
    /// `pipeline`, `rag`, `auto`: route, frozen intent, retrieval, caps,
    /// dropped or unsupported claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_report: Option<crate::pipeline::FlowReport>,
}

/// Errors that stop a question before it can produce any answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The question is empty.
    #[error(
        "the question is empty; ask something, e.g. rlm ask \"What is the notice period?\" --store DIR"
    )]
    EmptyQuestion,
    /// The store has no documents.
    #[error("the store has no documents; add some with `rlm index PATH --store DIR`")]
    EmptyCorpus,
    /// The sandbox could not start.
    #[error("{0}")]
    Sandbox(String),
    /// Not one model call succeeded: nothing to answer from.
    #[error("{0}")]
    ModelUnavailable(String),
}

/// The engine: a model client, a sandbox worker pool and settings.
#[derive(Clone)]
pub struct Engine {
    llm: Arc<dyn ChatModel>,
    pool: WorkerPool,
    config: EngineConfig,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .finish()
    }
}

/// A sub-call's result kept for synthesis material.
#[derive(Debug, Clone)]
struct SubResult {
    parent: String,
    prompt: String,
    result: String,
}

/// State shared by every agent of one question.
struct RunCtx {
    llm: Arc<dyn ChatModel>,
    pool: WorkerPool,
    config: EngineConfig,
    corpus: Arc<Corpus>,
    budget: Arc<Budget>,
    trace: Arc<Trace>,
    briefing: Option<String>,
    session: SessionState,
    findings: Mutex<Vec<Finding>>,
    sub_results: Mutex<Vec<SubResult>>,
    call_slots: Semaphore,
}

/// Why an agent stopped without a committed answer.
#[derive(Debug, Clone)]
enum Stop {
    Budget(Exhausted),
    Failure(String),
}

impl Stop {
    fn reason(&self) -> String {
        match self {
            Stop::Budget(e) => e.to_string(),
            Stop::Failure(m) => m.clone(),
        }
    }
}

/// What an agent produced.
#[derive(Debug, Clone)]
struct Outcome {
    answer: String,
    partial_reason: Option<String>,
}

/// Temperature after the same reply (or a stuck turn) `streak` times in a
/// row: a small model at low temperature repeats itself word for word.
fn raised_temperature(streak: u32) -> f32 {
    (0.4 + 0.3 * streak.saturating_sub(1) as f32).min(1.2)
}

/// What a cell that printed nothing shows the model: small models search
/// with a condition that never matches and read silence as "try again".
const NO_OUTPUT: &str = "(no output: the cell printed nothing. If it searched for something, nothing matched: check upper/lower case, try fewer or other words, or print(search(\"keywords\")))";

/// Prefix of the stop reason when a model call failed after retries.
const MODEL_FAILED: &str = "the model call failed: ";

/// Per-call overrides of the role's settings.
#[derive(Debug, Clone, Default)]
struct CallOpts {
    temperature: Option<f32>,
    model: Option<String>,
}

/// A model call that did not produce a reply.
#[derive(Debug)]
enum CallError {
    Budget(Exhausted),
    Model(String),
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Engine {
    /// An engine over a model client and a sandbox pool.
    pub fn new(llm: Arc<dyn ChatModel>, pool: WorkerPool, config: EngineConfig) -> Self {
        Engine { llm, pool, config }
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The same model client and sandbox pool with other settings (a
    /// request's own budgets, say).
    pub fn with_config(&self, config: EngineConfig) -> Engine {
        Engine {
            llm: self.llm.clone(),
            pool: self.pool.clone(),
            config,
        }
    }

    /// Answers a question over `corpus`. Errors only when no answer can be
    /// attempted at all (empty question or corpus, sandbox unavailable);
    /// budgets, caps, model failures and cancellation give a partial answer.
    pub async fn ask(&self, corpus: Arc<Corpus>, req: AskRequest) -> Result<Answer, EngineError> {
        if req.question.trim().is_empty() {
            return Err(EngineError::EmptyQuestion);
        }
        if corpus.documents().is_empty() {
            return Err(EngineError::EmptyCorpus);
        }
        // The other flows live in `crate::pipeline`; it hands back `repl` requests.
        let req = match crate::pipeline::dispatch(self, &corpus, req).await? {
            crate::pipeline::Dispatch::Done(answer) => return Ok(*answer),
            crate::pipeline::Dispatch::Repl(req) => req,
        };
        let budget = Arc::new(Budget::new(self.config.budget.clone()));
        let run_id = new_run_id();
        req.trace.emit(TraceEvent::RunStarted {
            run_id: run_id.clone(),
            question: req.question.clone(),
            flow: "repl".into(),
            root_model: self.config.root_model.clone(),
            sub_model: self.config.sub_model.clone(),
            documents: corpus.documents().len(),
            context_chars: corpus.context_chars(self.config.context_shape),
            budget: serde_json::to_value(&self.config.budget).unwrap_or(Value::Null),
        });
        let ctx = Arc::new(RunCtx {
            llm: self.llm.clone(),
            pool: self.pool.clone(),
            config: self.config.clone(),
            corpus: corpus.clone(),
            budget: budget.clone(),
            trace: req.trace.clone(),
            briefing: req.briefing.clone().filter(|b| !b.trim().is_empty()),
            session: req.session.clone().unwrap_or_default(),
            findings: Mutex::new(Vec::new()),
            sub_results: Mutex::new(Vec::new()),
            call_slots: Semaphore::new(self.config.budget.max_concurrent),
        });
        let root = run_agent(ctx.clone(), "0".into(), 0, req.question.clone(), None);
        let wall = tokio::time::sleep(budget.remaining_time());
        let outcome = tokio::select! {
            r = root => r.map_err(EngineError::Sandbox)?,
            _ = req.cancel.cancelled() => {
                budget.cancel();
                req.trace.emit(TraceEvent::BudgetExhausted { agent: "0".into(), depth: 0, reason: Exhausted::Cancelled });
                Outcome { answer: gathered_summary(&ctx, "0", &Exhausted::Cancelled.to_string(), ""), partial_reason: Some(Exhausted::Cancelled.to_string()) }
            }
            _ = wall => {
                // The tree is dropped (sandboxes killed, requests cancelled);
                // one synthesis call from what reached the shared state.
                let reason = Exhausted::WallClock { limit_secs: self.config.budget.wall_clock.as_secs() };
                req.trace.emit(TraceEvent::BudgetExhausted { agent: "0".into(), depth: 0, reason: reason.clone() });
                let material = material_from_ctx(&ctx, "0", "");
                let why = reason.to_string();
                // The synthesis gets a bounded grace period: past the wall
                // clock, a slow model must not hold the answer hostage.
                let grace = synthesis_grace(self.config.budget.wall_clock);
                match tokio::time::timeout(grace, synthesize(&ctx, "0", 0, &req.question, &why, material)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Outcome { answer: gathered_summary(&ctx, "0", &why, ""), partial_reason: Some(why) },
                }
            }
        };
        // A model that never answered is a configuration problem to report,
        // not an answer: there is nothing gathered to synthesize from.
        if ctx.budget.report().calls == 0
            && let Some(reason) = &outcome.partial_reason
            && reason.starts_with(MODEL_FAILED)
        {
            let usage = ctx.budget.report();
            req.trace.emit(TraceEvent::RunFinished {
                partial: true,
                reason: Some(reason.clone()),
                usage,
            });
            return Err(EngineError::ModelUnavailable(reason.clone()));
        }
        Ok(finish(&ctx, run_id, outcome))
    }
}

/// Verification, strict flags, the final events, the answer.
fn finish(ctx: &Arc<RunCtx>, run_id: String, outcome: Outcome) -> Answer {
    let mut answer = outcome.answer;
    let verification = ctx
        .config
        .verify_citations
        .then(|| citations::verify(&answer, ctx.corpus.as_ref()));
    if let Some(report) = &verification {
        ctx.trace.emit(TraceEvent::Verification {
            report: serde_json::to_value(report).unwrap_or(Value::Null),
        });
        if ctx.config.citation_policy == CitationPolicy::Strict && !report.all_valid {
            answer = citations::flag_unsupported(&answer, report);
        }
    }
    let usage = ctx.budget.report();
    ctx.trace.emit(TraceEvent::RunFinished {
        partial: outcome.partial_reason.is_some(),
        reason: outcome.partial_reason.clone(),
        usage: usage.clone(),
    });
    Answer {
        answer,
        partial: outcome.partial_reason.is_some(),
        partial_reason: outcome.partial_reason,
        citations: verification
            .as_ref()
            .map(|r| r.citations.clone())
            .unwrap_or_default(),
        verification,
        usage,
        trace: TraceInfo {
            id: run_id,
            events: ctx.trace.len(),
        },
        findings: ctx
            .findings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        file_summaries: Vec::new(),
        flow_report: None,
    }
}

/// How long the synthesis after the wall clock may take: a tenth of the wall
/// clock, between 5 s and 2 min.
fn synthesis_grace(wall: std::time::Duration) -> std::time::Duration {
    (wall / 10).clamp(
        std::time::Duration::from_secs(5),
        std::time::Duration::from_secs(120),
    )
}

fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!(
        "{:012x}{:04x}",
        nanos & 0xffff_ffff_ffff,
        std::process::id() & 0xffff
    )
}

/// Rough token estimate (4 characters per token) for the budget pre-check.
fn estimate_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| m.content.len() as u64 / 4 + 4)
        .sum()
}

fn role_name(r: Role) -> &'static str {
    r.as_str()
}

/// Text of a Python value handed to `FINAL` or returned by a sub-call.
fn value_to_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => n.to_string(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

fn preview(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl RunCtx {
    /// Every model call goes through here: budget reservation, concurrency
    /// slot, trace events, usage accounting.
    #[allow(clippy::too_many_arguments)]
    async fn call_model(
        &self,
        agent: &str,
        depth: u32,
        role: ModelRole,
        messages: &[Message],
        new_from: usize,
        opts: CallOpts,
        purpose: CallPurpose,
        iteration: u32,
    ) -> Result<ChatResponse, CallError> {
        let reserved = if purpose == CallPurpose::Synthesis && depth == 0 {
            self.budget.reserve_synthesis_call()
        } else {
            self.budget.reserve_call(depth, estimate_tokens(messages))
        };
        if let Err(e) = reserved {
            self.trace.emit(TraceEvent::BudgetExhausted {
                agent: agent.into(),
                depth,
                reason: e.clone(),
            });
            return Err(CallError::Budget(e));
        }
        let _slot = self
            .call_slots
            .acquire()
            .await
            .map_err(|_| CallError::Budget(Exhausted::Cancelled))?;
        let model = opts.model.clone().unwrap_or_else(|| match role {
            ModelRole::Root => self.config.root_model.clone(),
            ModelRole::Sub => self.config.sub_model.clone(),
        });
        self.trace.emit(TraceEvent::LlmRequest {
            agent: agent.into(),
            depth,
            iteration,
            model,
            purpose,
            message_count: messages.len(),
            new_messages: messages[new_from.min(messages.len())..]
                .iter()
                .map(|m| TraceMessage {
                    role: role_name(m.role).into(),
                    content: m.content.clone(),
                })
                .collect(),
        });
        let deltas = DeltaStream::new(self.trace.clone(), agent, depth);
        let _closing = deltas.closer();
        let mut req = ChatRequest::new(role, messages.to_vec())
            .at_depth(depth)
            .streaming_to(deltas.sink());
        req.temperature = opts.temperature;
        req.model = opts.model;
        let result = self.llm.chat(req).await;
        deltas.close();
        match result {
            Ok(resp) => {
                let u = &resp.usage;
                self.budget.record(
                    depth,
                    CallUsage {
                        input_tokens: u.input_tokens,
                        output_tokens: u.output_tokens,
                        cached_input_tokens: u.cached_tokens.unwrap_or(0),
                        cost_usd: u.cost_usd,
                        estimated: u.estimated,
                    },
                );
                if u.cost_usd.is_none() {
                    self.budget.note_unpriced(&u.model);
                }
                self.trace.emit(TraceEvent::LlmResponse {
                    agent: agent.into(),
                    depth,
                    model: u.model.clone(),
                    text: resp.text.clone(),
                    input_tokens: u.input_tokens,
                    output_tokens: u.output_tokens,
                    cached_input_tokens: u.cached_tokens.unwrap_or(0),
                    cost_usd: u.cost_usd,
                    latency_ms: u.latency.as_millis() as u64,
                });
                Ok(resp)
            }
            Err(e) => {
                let message = e.to_string();
                self.trace.emit(TraceEvent::LlmError {
                    agent: agent.into(),
                    depth,
                    message: message.clone(),
                });
                Err(CallError::Model(message))
            }
        }
    }

    /// A plain `llm_query` as agent `id` (a child of `parent`) at `depth`.
    async fn sub_query(
        &self,
        id: String,
        parent: &str,
        depth: u32,
        prompt: String,
        model: Option<String>,
    ) -> Result<String, String> {
        let started = Instant::now();
        self.trace.emit(TraceEvent::SubcallStart {
            agent: id.clone(),
            parent: parent.into(),
            depth,
            kind: "llm_query".into(),
            prompt_preview: preview(&prompt, 300),
        });
        let messages = [Message::user(prompt.clone())];
        let r = self
            .call_model(
                &id,
                depth,
                ModelRole::Sub,
                &messages,
                0,
                CallOpts {
                    temperature: None,
                    model,
                },
                CallPurpose::SubQuery,
                0,
            )
            .await;
        let result = match r {
            Ok(resp) => Ok(resp.text),
            Err(CallError::Budget(e)) => Err(format!(
                "{e}. No more sub-calls can be made: work with the results you already have and commit an answer with FINAL."
            )),
            Err(CallError::Model(m)) => Err(format!("the sub-model call failed: {m}")),
        };
        self.finish_subcall(&id, parent, depth, &prompt, &result, started);
        result
    }

    fn finish_subcall(
        &self,
        id: &str,
        parent: &str,
        depth: u32,
        prompt: &str,
        r: &Result<String, String>,
        t0: Instant,
    ) {
        let (ok, text) = match r {
            Ok(t) => (true, t.clone()),
            Err(e) => (false, e.clone()),
        };
        if ok {
            self.sub_results
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(SubResult {
                    parent: parent.into(),
                    prompt: preview(prompt, 200),
                    result: text.clone(),
                });
        }
        self.trace.emit(TraceEvent::SubcallEnd {
            agent: id.into(),
            parent: parent.into(),
            depth,
            ok,
            result: text,
            elapsed_ms: t0.elapsed().as_millis() as u64,
        });
    }
}

/// `rlm_query`: a child agent one level deeper, or a plain `llm_query` when
/// the child would be at `max_depth`.
fn rlm_query(
    ctx: Arc<RunCtx>,
    id: String,
    parent: String,
    depth: u32,
    prompt: String,
    context: Option<Value>,
) -> BoxFut<Result<String, String>> {
    Box::pin(async move {
        if depth >= ctx.config.budget.max_depth {
            let prompt = match &context {
                Some(c) => format!("{prompt}\n\nContext:\n{}", value_to_text(c)),
                None => prompt,
            };
            return ctx.sub_query(id, &parent, depth, prompt, None).await;
        }
        let started = Instant::now();
        ctx.trace.emit(TraceEvent::SubcallStart {
            agent: id.clone(),
            parent: parent.clone(),
            depth,
            kind: "rlm_query".into(),
            prompt_preview: preview(&prompt, 300),
        });
        let input = context.map(|c| match c {
            Value::String(s) => InputValue::Text(s),
            Value::Array(items) if items.iter().all(Value::is_string) => {
                InputValue::TextList(items.into_iter().map(|v| value_to_text(&v)).collect())
            }
            other => InputValue::Json(other),
        });
        let r = run_agent(ctx.clone(), id.clone(), depth, prompt.clone(), input)
            .await
            .map(|o| match o.partial_reason {
                Some(reason) => format!("(partial: {reason}) {}", o.answer),
                None => o.answer,
            });
        ctx.finish_subcall(&id, &parent, depth, &prompt, &r, started);
        r
    })
}

/// What a host call left for the loop to act on.
#[derive(Debug, Default)]
struct HostState {
    final_call: Option<FinalDirective>,
}

/// The host functions of one agent's sandbox.
struct AgentHost {
    ctx: Arc<RunCtx>,
    id: String,
    depth: u32,
    children: AtomicU32,
    turn_subcalls: AtomicU32,
    state: Mutex<HostState>,
}

fn arg<'a>(call: &'a HostCall, index: usize, name: &str) -> Option<&'a Value> {
    call.args
        .get(index)
        .or_else(|| call.kwargs.get(name))
        .filter(|v| !v.is_null())
}

fn type_error(message: String) -> HostError {
    HostError::Raise {
        exc_type: "TypeError".into(),
        message,
    }
}

impl AgentHost {
    fn child_id(&self) -> String {
        format!(
            "{}.{}",
            self.id,
            self.children.fetch_add(1, Ordering::SeqCst)
        )
    }

    fn prompt_arg(call: &HostCall) -> Result<String, HostError> {
        arg(call, 0, "prompt").map(value_to_text).ok_or_else(|| {
            type_error(format!(
                "{}() needs a prompt string as its first argument",
                call.name
            ))
        })
    }

    /// The optional `model=` of `llm_query(prompt, model=None)`.
    fn model_arg(call: &HostCall) -> Option<String> {
        arg(call, 1, "model")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
    }

    fn prompts_arg(call: &HostCall) -> Result<Vec<String>, HostError> {
        match arg(call, 0, "prompts") {
            Some(Value::Array(items)) => Ok(items.iter().map(value_to_text).collect()),
            _ => Err(type_error(format!(
                "{}() needs a list of prompt strings",
                call.name
            ))),
        }
    }

    /// Runs `prompts` through `f` with at most `max_concurrent` in flight,
    /// keeping their order. Failures become `[error: ...]` items so one bad
    /// prompt does not lose the others' answers.
    async fn batched(
        &self,
        prompts: Vec<String>,
        f: impl Fn(String, String) -> BoxFut<Result<String, String>>,
    ) -> Result<Value, HostError> {
        self.turn_subcalls
            .fetch_add(prompts.len() as u32, Ordering::SeqCst);
        let limit = Arc::new(Semaphore::new(self.ctx.config.budget.max_concurrent));
        let mut set = tokio::task::JoinSet::new();
        for (i, p) in prompts.into_iter().enumerate() {
            let fut = f(self.child_id(), p);
            let limit = limit.clone();
            set.spawn(async move {
                let _permit = limit.acquire_owned().await;
                (i, fut.await)
            });
        }
        let mut out: Vec<Option<Result<String, String>>> = vec![None; set.len()];
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                out[i] = Some(r);
            }
        }
        let results: Vec<Result<String, String>> = out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err("the call was lost".into())))
            .collect();
        if !results.is_empty() && results.iter().all(Result::is_err) {
            let first = results[0].as_ref().err().cloned().unwrap_or_default();
            return Err(HostError::runtime(format!(
                "every call of the batch failed; the first: {first}"
            )));
        }
        Ok(Value::Array(
            results
                .into_iter()
                .map(|r| Value::String(r.unwrap_or_else(|e| format!("[error: {e}]"))))
                .collect(),
        ))
    }

    async fn dispatch(&self, call: HostCall) -> Result<Value, HostError> {
        let ctx = &self.ctx;
        match call.name.as_str() {
            "llm_query" | "llm_query_async" => {
                let prompt = Self::prompt_arg(&call)?;
                let model = Self::model_arg(&call);
                self.turn_subcalls.fetch_add(1, Ordering::SeqCst);
                ctx.sub_query(self.child_id(), &self.id, self.depth + 1, prompt, model)
                    .await
                    .map(Value::String)
                    .map_err(HostError::runtime)
            }
            "llm_query_batched" => {
                let prompts = Self::prompts_arg(&call)?;
                let model = Self::model_arg(&call);
                let (ctx2, parent, depth) = (ctx.clone(), self.id.clone(), self.depth + 1);
                self.batched(prompts, move |id, p| {
                    let (ctx, parent, model) = (ctx2.clone(), parent.clone(), model.clone());
                    Box::pin(async move { ctx.sub_query(id, &parent, depth, p, model).await })
                })
                .await
            }
            "rlm_query" | "rlm_query_async" => {
                let prompt = Self::prompt_arg(&call)?;
                let context = arg(&call, 1, "context").cloned();
                self.turn_subcalls.fetch_add(1, Ordering::SeqCst);
                rlm_query(
                    ctx.clone(),
                    self.child_id(),
                    self.id.clone(),
                    self.depth + 1,
                    prompt,
                    context,
                )
                .await
                .map(Value::String)
                .map_err(HostError::runtime)
            }
            "rlm_query_batched" => {
                let prompts = Self::prompts_arg(&call)?;
                let (ctx2, parent, depth) = (ctx.clone(), self.id.clone(), self.depth + 1);
                self.batched(prompts, move |id, p| {
                    rlm_query(ctx2.clone(), id, parent.clone(), depth, p, None)
                })
                .await
            }
            "FINAL" => {
                let v = arg(&call, 0, "answer")
                    .ok_or_else(|| type_error("FINAL() needs the answer".into()))?;
                self.state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .final_call = Some(FinalDirective::Answer(value_to_text(v)));
                Ok(Value::Null)
            }
            "FINAL_VAR" => {
                let v = arg(&call, 0, "name")
                    .ok_or_else(|| type_error("FINAL_VAR() needs a variable name".into()))?;
                let directive = match v {
                    Value::String(s) if is_identifier(s.trim()) => {
                        FinalDirective::Var(s.trim().to_string())
                    }
                    other => FinalDirective::Answer(value_to_text(other)),
                };
                self.state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .final_call = Some(directive);
                Ok(Value::Null)
            }
            "add_finding" => {
                let text = arg(&call, 0, "text")
                    .map(value_to_text)
                    .ok_or_else(|| type_error("add_finding() needs the finding text".into()))?;
                let source = arg(&call, 1, "source").map(value_to_text);
                ctx.trace.emit(TraceEvent::Finding {
                    agent: self.id.clone(),
                    text: text.clone(),
                    source: source.clone(),
                });
                ctx.findings
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Finding { text, source });
                Ok(Value::Null)
            }
            "search" => {
                let query = arg(&call, 0, "query")
                    .map(value_to_text)
                    .ok_or_else(|| type_error("search() needs a query string".into()))?;
                let k = match arg(&call, 1, "k") {
                    None => 10,
                    Some(Value::Number(n)) => n.as_u64().unwrap_or(10).clamp(1, 200) as usize,
                    Some(_) => {
                        return Err(type_error("search(query, k): k must be an integer".into()));
                    }
                };
                ctx.corpus
                    .search_json(&query, k)
                    .map_err(|e| HostError::runtime(format!("search failed: {e}")))
            }
            other => Err(HostError::Raise {
                exc_type: "NameError".into(),
                message: format!("name '{other}' is not defined"),
            }),
        }
    }
}

impl HostHandler for AgentHost {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        self.dispatch(call).await
    }
}

/// Host functions every agent gets.
const HOST_FUNCTIONS: &[(&str, HostFunctionKind)] = &[
    ("llm_query", HostFunctionKind::Sync),
    ("llm_query_batched", HostFunctionKind::Sync),
    ("llm_query_async", HostFunctionKind::Async),
    ("rlm_query", HostFunctionKind::Sync),
    ("rlm_query_batched", HostFunctionKind::Sync),
    ("rlm_query_async", HostFunctionKind::Async),
    ("FINAL", HostFunctionKind::Sync),
    ("FINAL_VAR", HostFunctionKind::Sync),
    ("add_finding", HostFunctionKind::Sync),
    ("search", HostFunctionKind::Sync),
];

/// The inspection cell the engine runs before the root's first turn.
const ROOT_INSPECTION: &str = r#"print(f"{len(documents)} documents, {sum([d['chars'] for d in documents])} characters in total")
for d in documents[:60]:
    print(f"[DOCUMENT {d['index']}: {d['name']}] {d['chars']} chars, {d['chunk_count']} chunks")
if len(documents) > 60:
    print(f"... and {len(documents) - 60} more documents (see `documents`)")
if history:
    print(f"Earlier questions in this session ({len(history)}):")
    for t in history[-5:]:
        print("Q:", t["question"])
        print("A:", t["answer"][:600])
if findings:
    print(f"Findings recorded so far ({len(findings)}):")
    for f in findings[-30:]:
        print("-", f["text"], "| source:", f["source"])"#;

/// The root's inspection cell: the document index, then (with `k` > 0) the
/// lines of the top `k` full-text hits for the question that share at least
/// two of its words — a weak model that never searches well still starts
/// from the passage most likely to hold the answer.
fn root_inspection(k: usize) -> String {
    if k == 0 {
        return ROOT_INSPECTION.to_string();
    }
    format!(
        r#"{ROOT_INSPECTION}
import re
_words = [w for w in re.findall(r"[a-z0-9]+", question.lower()) if len(w) > 3]
_hits = search(question, {k}) if _words else []
if _hits:
    print("Full-text search for the question found these passages (a lead, not proof: check them):")
    for _h in _hits:
        _lines = [l.strip() for l in _h["text"].splitlines() if len([w for w in _words if w in l.lower()]) >= 2]
        print(f"[[chunk:{{_h['chunk_id']}}]] in [DOCUMENT {{_h['doc_index']}}: {{_h['path']}}]")
        for _l in (_lines[:3] if _lines else [_h["text"][:300]]):
            print("    " + _l[:300])"#
    )
}

/// The inspection cell of a sub-agent: what its input looks like.
const SUB_INSPECTION: &str = r#"print(type(context).__name__, "of length", len(context))
if isinstance(context, str):
    print(context[:1500])
else:
    for i, item in enumerate(context[:10]):
        print(i, str(item)[:300])"#;

fn history_json(s: &SessionState) -> Value {
    Value::Array(
        s.history
            .iter()
            .map(|t| json!({"question": t.question, "answer": t.answer, "partial": t.partial}))
            .collect(),
    )
}

fn findings_json(s: &SessionState) -> Value {
    Value::Array(
        s.findings
            .iter()
            .map(|f| json!({"text": f.text, "source": f.source}))
            .collect(),
    )
}

fn input_sizes(v: &InputValue) -> (String, Vec<u64>) {
    match v {
        InputValue::Text(s) => ("a string".into(), vec![s.chars().count() as u64]),
        InputValue::TextList(l) => (
            "a list of strings".into(),
            l.iter().map(|s| s.chars().count() as u64).collect(),
        ),
        InputValue::Documents(d) => (
            "a list of documents".into(),
            d.iter().map(|d| d.chars).collect(),
        ),
        InputValue::Json(j) => ("a JSON value".into(), vec![j.to_string().len() as u64]),
        // Corpus-backed inputs are only built for the corpus itself, never
        // handed to a child agent; described generically all the same.
        InputValue::Assembled(_) => ("a string".into(), Vec::new()),
        InputValue::SourceTexts => ("a list of strings".into(), Vec::new()),
        InputValue::SourceDocuments(d) => (
            "a list of documents".into(),
            d.iter().map(|d| d.chars).collect(),
        ),
    }
}

/// The sandbox inputs and host functions of an agent over `input` (or the corpus).
fn session_spec(ctx: &RunCtx, task: &str, input: Option<&InputValue>) -> SessionSpec {
    let (context, documents) = match input {
        Some(v) => (v.clone(), InputValue::Json(json!([]))),
        None => (
            ctx.corpus.context_value(ctx.config.context_shape),
            ctx.corpus.document_records(),
        ),
    };
    let mut spec = SessionSpec::new();
    if input.is_none() {
        spec = spec.texts(ctx.corpus.texts());
    }
    spec = spec
        .input("context", context)
        .input("documents", documents)
        .input("question", InputValue::Text(task.to_string()))
        .input("history", InputValue::Json(history_json(&ctx.session)))
        .input("findings", InputValue::Json(findings_json(&ctx.session)))
        .input(
            "briefing",
            InputValue::Json(
                ctx.briefing
                    .clone()
                    .map(Value::String)
                    .unwrap_or(Value::Null),
            ),
        );
    for (name, kind) in HOST_FUNCTIONS {
        spec = spec.function(*name, *kind);
    }
    spec
}

/// Per-agent loop state.
struct Agent {
    ctx: Arc<RunCtx>,
    id: String,
    depth: u32,
    task: String,
    /// The agent's own input (`rlm_query(prompt, context)`); `None` = the corpus.
    input: Option<InputValue>,
    session: Option<Session>,
    host: Arc<AgentHost>,
    messages: Vec<Message>,
    sent: usize,
    assigned: Vec<String>,
    last_outputs: Vec<String>,
    deferred: Option<String>,
}

/// Runs one agent to an outcome. `Err` only when its sandbox cannot start.
fn run_agent(
    ctx: Arc<RunCtx>,
    id: String,
    depth: u32,
    task: String,
    input: Option<InputValue>,
) -> BoxFut<Result<Outcome, String>> {
    Box::pin(async move {
        let is_root = input.is_none() && depth == 0;
        let (shape_desc, sizes) = match &input {
            Some(v) => input_sizes(v),
            None => {
                let sizes = ctx.corpus.documents().iter().map(|d| d.chars).collect();
                let desc = match ctx.config.context_shape {
                    ContextShape::String => {
                        "one string holding every document, each preceded by a `[DOCUMENT i: path]` header line (search it with `re.findall(..., context)`, `context.find(...)`, `context.splitlines()`; slicing a huge string is slow, so work on `documents[i][\"text\"]` when you know which document you need)"
                    }
                    ContextShape::List => {
                        "a list of strings, `context[i]` is the text of document i (fast to slice per document)"
                    }
                };
                (desc.to_string(), sizes)
            }
        };
        // The spec is rebuilt from the corpus when needed instead of kept:
        // holding the corpus-sized inputs for the whole run would double memory.
        let spec = session_spec(&ctx, &task, input.as_ref());
        let session = ctx
            .pool
            .start_session(&spec)
            .await
            .map_err(|e| e.to_string())?;
        drop(spec);
        let host = Arc::new(AgentHost {
            ctx: ctx.clone(),
            id: id.clone(),
            depth,
            children: AtomicU32::new(0),
            turn_subcalls: AtomicU32::new(0),
            state: Mutex::new(HostState::default()),
        });
        let cfg = &ctx.config;
        let max_turns = cfg.budget.iterations_at(depth);
        let depth_note = if depth + 1 >= cfg.budget.max_depth {
            " At your depth, `rlm_query` is a plain `llm_query`."
        } else {
            ""
        };
        let truncate = cfg.budget.truncate_len.to_string();
        let sub_chars = cfg.sub_context_chars.to_string();
        let system = if depth == 0 {
            let briefing = ctx
                .briefing
                .as_ref()
                .map(|b| {
                    format!(
                        "\n## Briefing (domain instructions from the user)\n\n{}\n",
                        b.trim()
                    )
                })
                .unwrap_or_default();
            render(
                prompts::SYSTEM_ROOT,
                &[
                    ("context_shape", &shape_desc),
                    ("sub_context_chars", &sub_chars),
                    ("depth_note", depth_note),
                    ("truncate_len", &truncate),
                    ("briefing", &briefing),
                ],
            )
        } else {
            render(
                prompts::SYSTEM_SUB,
                &[
                    ("context_shape", &shape_desc),
                    ("sub_context_chars", &sub_chars),
                    ("truncate_len", &truncate),
                    ("depth_note", depth_note),
                    ("iterations", &max_turns.to_string()),
                ],
            )
        };
        let mut agent = Agent {
            ctx: ctx.clone(),
            id,
            depth,
            task,
            input,
            session: Some(session),
            host,
            messages: vec![Message::system(system)],
            sent: 0,
            assigned: Vec::new(),
            last_outputs: Vec::new(),
            deferred: None,
        };
        // The inspection cell: even a weak model starts from a scouted corpus.
        let inspection = if is_root {
            root_inspection(cfg.inspect_search_k)
        } else {
            SUB_INSPECTION.to_string()
        };
        let inspection = inspection.as_str();
        let inspection_output = match agent.run_cell(0, 0, inspection).await {
            Ok(r) => r.render(cfg.budget.truncate_len),
            Err(e) => format!("(inspection failed: {e})"),
        };
        let total: u64 = sizes.iter().sum();
        let first = render(
            prompts::FIRST_USER,
            &[
                ("question", &agent.task),
                ("context_description", &shape_desc),
                ("total_chars", &total.to_string()),
                ("doc_count", &sizes.len().to_string()),
                ("doc_sizes", &prompts::describe_sizes(&sizes)),
                ("inspection_code", inspection),
                ("inspection_output", inspection_output.trim_end()),
            ],
        );
        agent.messages.push(Message::user(first));
        Ok(agent.run(max_turns).await)
    })
}

impl Agent {
    fn trace(&self, e: TraceEvent) {
        self.ctx.trace.emit(e);
    }

    fn role(&self) -> ModelRole {
        if self.depth == 0 {
            ModelRole::Root
        } else {
            ModelRole::Sub
        }
    }

    /// Runs one cell; restarts the sandbox if the worker died.
    async fn run_cell(
        &mut self,
        iteration: u32,
        index: usize,
        code: &str,
    ) -> Result<CellResult, String> {
        let adapted = parse::adapt_async_calls(code);
        let code = adapted.as_str();
        self.trace(TraceEvent::Cell {
            agent: self.id.clone(),
            depth: self.depth,
            iteration,
            index,
            code: code.into(),
        });
        for line in code.lines() {
            // Names bound at top level: candidates for the synthesis material.
            if let Some((lhs, _)) = line.split_once('=')
                && !line.starts_with([' ', '\t'])
                && !lhs.ends_with(['=', '!', '<', '>'])
                && is_identifier(lhs.trim())
                && !self.assigned.iter().any(|a| a == lhs.trim())
            {
                self.assigned.push(lhs.trim().to_string());
            }
        }
        let result = match self.session.as_mut() {
            Some(s) => s
                .run_cell(code, &self.host)
                .await
                .map_err(|e| e.to_string()),
            None => Err("the sandbox session is closed".into()),
        };
        match &result {
            Ok(r) => self.trace(TraceEvent::CellOutput {
                agent: self.id.clone(),
                depth: self.depth,
                iteration,
                index,
                stdout: r.stdout.clone(),
                error: r
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.exc_type, e.message)),
                elapsed_ms: r.elapsed.as_millis() as u64,
                host_calls: r.host_calls,
            }),
            Err(e) => {
                self.trace(TraceEvent::CellOutput {
                    agent: self.id.clone(),
                    depth: self.depth,
                    iteration,
                    index,
                    stdout: String::new(),
                    error: Some(e.clone()),
                    elapsed_ms: 0,
                    host_calls: 0,
                });
                // A fresh REPL so the loop can go on (variables are lost).
                let spec = session_spec(&self.ctx, &self.task, self.input.as_ref());
                self.session = self.ctx.pool.start_session(&spec).await.ok();
            }
        }
        result
    }

    async fn get_var(&mut self, name: &str) -> Option<Value> {
        self.session.as_mut()?.get_var(name).await.ok().flatten()
    }

    fn take_final(&self) -> Option<FinalDirective> {
        self.host
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .final_call
            .take()
    }

    fn commit(&self, answer: &str, via: &str) -> Outcome {
        self.trace(TraceEvent::Final {
            agent: self.id.clone(),
            depth: self.depth,
            answer: answer.into(),
            via: via.into(),
            deferred: false,
        });
        Outcome {
            answer: answer.trim().to_string(),
            partial_reason: None,
        }
    }

    fn defer(&mut self, answer: &str, via: &str, subcalls: u32) -> String {
        self.trace(TraceEvent::Final {
            agent: self.id.clone(),
            depth: self.depth,
            answer: answer.into(),
            via: via.into(),
            deferred: true,
        });
        self.deferred = Some(answer.to_string());
        format!(
            "Note: your FINAL was not accepted yet. This turn ran {subcalls} sub-call(s) whose results you had not seen when you wrote FINAL. Read their output above and this draft, then give the real answer with FINAL(...) in your next reply (a synthesis in your own words, not a dump of raw results).\nDraft FINAL you wrote:\n{}",
            truncate_output(answer, 2000)
        )
    }

    /// Resolves a directive to answer text (FINAL_VAR reads the variable).
    async fn resolve(&mut self, d: FinalDirective) -> Result<String, String> {
        match d {
            FinalDirective::Answer(a) => Ok(a),
            FinalDirective::Var(name) => match self.get_var(&name).await {
                Some(v) => Ok(value_to_text(&v)),
                None => Err(format!(
                    "Error: FINAL_VAR({name}) names a variable that does not exist, so no answer was committed. Create it in a ```repl block first (call SHOW_VARS() to list variables), or write FINAL(your answer)."
                )),
            },
        }
    }

    /// The main loop. Always returns an outcome.
    async fn run(mut self, max_turns: u32) -> Outcome {
        let cfg = self.ctx.config.clone();
        let mut repeats = RepeatDetector::default();
        let mut temperature: Option<f32> = None;
        let mut consecutive_errors = 0u32;
        let mut no_code_streak = 0u32;
        let mut recent_turns: Vec<(String, String)> = Vec::new();
        let mut stuck = 0u32;
        let mut prose_reply: Option<String> = None;
        let mut stop: Option<Stop> = None;
        for turn in 1..=max_turns {
            let reply = match self
                .ask_model(CallPurpose::Iteration, turn, temperature)
                .await
            {
                Ok(t) => t,
                Err(s) => {
                    stop = Some(s);
                    break;
                }
            };
            self.host.turn_subcalls.store(0, Ordering::SeqCst);
            let streak = repeats.observe(&reply);
            let parsed = parse::parse_reply(&reply);
            if parsed.code_blocks.is_empty() && parsed.prose_final.is_none() {
                // Small models answer in prose, then apologize to every nudge
                // until the turn cap. One nudge; after a second such reply, a
                // last turn that shows them their first prose reply.
                no_code_streak += 1;
                if no_code_streak == 1 {
                    prose_reply = Some(reply.trim().to_string());
                }
                if no_code_streak >= cfg.max_replies_without_code.max(1) {
                    // Shows the model its first prose reply (often the answer, unmarked).
                    let earlier = truncate_output(&prose_reply.take().unwrap_or_default(), 4000);
                    let prompt = render(
                        prompts::FINAL_FROM_PROSE,
                        &[
                            ("count", &no_code_streak.to_string()),
                            ("earlier", &earlier),
                            ("question", &self.task),
                        ],
                    );
                    let no_answer =
                        format!("{no_code_streak} replies in a row had no code and no answer");
                    match self
                        .last_turn(prompt, turn + 1, "final_from_prose", no_answer)
                        .await
                    {
                        Ok(outcome) => return outcome,
                        Err(s) => stop = Some(s),
                    }
                    break;
                }
                if streak >= 2 {
                    temperature = Some(raised_temperature(streak));
                }
                let q = self.task.clone();
                self.push_user(render(prompts::NUDGE_NO_CODE, &[("question", &q)]));
                continue;
            }
            no_code_streak = 0;
            prose_reply = None;
            if streak >= cfg.max_replies_without_code.max(2) {
                // Nudges and a higher temperature did not change the reply:
                // more turns will not either.
                let prompt = render(
                    prompts::FINAL_AFTER_REPEATS,
                    &[("count", &streak.to_string()), ("question", &self.task)],
                );
                let no_answer = format!(
                    "the same reply {streak} times in a row, and no answer when asked for one"
                );
                match self
                    .last_turn(prompt, turn + 1, "final_after_repeats", no_answer)
                    .await
                {
                    Ok(outcome) => return outcome,
                    Err(s) => stop = Some(s),
                }
                break;
            }
            if streak >= 2 {
                temperature = Some(raised_temperature(streak));
                let q = self.task.clone();
                self.push_user(render(
                    prompts::NUDGE_REPEAT,
                    &[("count", &streak.to_string()), ("question", &q)],
                ));
                continue;
            }
            if stuck == 0 {
                temperature = None;
            }
            let mut outputs = Vec::new();
            let mut notes = Vec::new();
            let n = parsed.code_blocks.len();
            let mut wants_answer_dict = false;
            for (i, block) in parsed.code_blocks.iter().enumerate() {
                wants_answer_dict |= block.code.contains("ready");
                let rendered = match self.run_cell(turn, i, &block.code).await {
                    Ok(r) => {
                        if r.error.is_some() {
                            consecutive_errors += 1;
                        } else {
                            consecutive_errors = 0;
                        }
                        r.render(cfg.budget.truncate_len)
                    }
                    Err(e) => {
                        consecutive_errors += 1;
                        format!(
                            "SandboxError: {e}\nA fresh REPL was started: variables from earlier cells are gone (context and documents are loaded again)."
                        )
                    }
                };
                let mut rendered = if rendered.trim().is_empty() {
                    NO_OUTPUT.to_string()
                } else {
                    rendered
                };
                for note in parse::code_lints(&block.code) {
                    rendered.push('\n');
                    rendered.push_str(&note);
                }
                outputs.push(if n > 1 {
                    format!("REPL output of cell {}:\n{}", i + 1, rendered)
                } else {
                    format!("REPL output:\n{rendered}")
                });
                self.remember_output(&rendered);
                if let Some(d) = self.take_final() {
                    match self.resolve(d).await {
                        Ok(answer) => {
                            let subcalls = self.host.turn_subcalls.load(Ordering::SeqCst);
                            if subcalls > 0 && cfg.defer_final_after_fanout {
                                notes.push(self.defer(&answer, "code", subcalls));
                            } else {
                                return self.commit(&answer, "code");
                            }
                        }
                        Err(msg) => notes.push(msg),
                    }
                }
            }
            if wants_answer_dict
                && let Some(Value::Object(m)) = self.get_var("answer").await
                && m.get("ready").and_then(Value::as_bool) == Some(true)
            {
                let content = m.get("content").map(value_to_text).unwrap_or_default();
                let subcalls = self.host.turn_subcalls.load(Ordering::SeqCst);
                if subcalls > 0 && cfg.defer_final_after_fanout {
                    notes.push(self.defer(&content, "answer_dict", subcalls));
                } else {
                    return self.commit(&content, "answer_dict");
                }
            }
            if let Some(d) = parsed.prose_final {
                // `FINAL(name)` in prose where `name` is a variable: use its value.
                let d = match d {
                    FinalDirective::Answer(a) if is_identifier(a.trim()) => {
                        match self.get_var(a.trim()).await {
                            Some(v) => FinalDirective::Answer(value_to_text(&v)),
                            None => FinalDirective::Answer(a),
                        }
                    }
                    other => other,
                };
                match self.resolve(d).await {
                    Ok(answer) => {
                        let subcalls = self.host.turn_subcalls.load(Ordering::SeqCst);
                        if subcalls > 0 && cfg.defer_final_after_fanout {
                            notes.push(self.defer(&answer, "prose", subcalls));
                        } else {
                            return self.commit(&answer, "prose");
                        }
                    }
                    Err(msg) => notes.push(msg),
                }
            }
            if consecutive_errors >= cfg.budget.max_consecutive_errors {
                let e = Exhausted::Errors {
                    limit: cfg.budget.max_consecutive_errors,
                };
                self.trace(TraceEvent::BudgetExhausted {
                    agent: self.id.clone(),
                    depth: self.depth,
                    reason: e.clone(),
                });
                stop = Some(Stop::Budget(e));
                break;
            }
            let mut body = outputs.join("\n\n");
            // The same code with the same output as one of the last three
            // turns: the model is stuck (small models re-send a failing
            // search, or alternate two cells, for 20 turns).
            let signature = (
                parsed
                    .code_blocks
                    .iter()
                    .map(|b| b.code.trim())
                    .collect::<Vec<_>>()
                    .join("\n"),
                body.clone(),
            );
            if recent_turns.contains(&signature) {
                stuck += 1;
                temperature = Some(raised_temperature(stuck + 1));
                notes.push(prompts::NOTE_STUCK.trim().to_string());
            } else {
                stuck = 0;
            }
            // Also catches two cells sent in alternation (A, B, A, B…).
            recent_turns.push(signature);
            if recent_turns.len() > 3 {
                recent_turns.remove(0);
            }
            for note in notes {
                body.push_str("\n\n");
                body.push_str(&note);
            }
            let q = self.task.clone();
            self.push_user(render(
                prompts::NEXT_TURN,
                &[
                    ("outputs", &body),
                    ("question", &q),
                    ("turn", &(turn + 1).to_string()),
                    ("max_turns", &max_turns.to_string()),
                ],
            ));
        }
        let reason = match stop {
            Some(s) => s.reason(),
            None => {
                // Iteration cap: one last request for the answer.
                let e = Exhausted::Iterations { limit: max_turns };
                self.trace(TraceEvent::BudgetExhausted {
                    agent: self.id.clone(),
                    depth: self.depth,
                    reason: e.clone(),
                });
                let prompt = render(prompts::FINAL_NOW, &[("question", &self.task)]);
                match self
                    .last_turn(prompt, max_turns + 1, "final_now", e.to_string())
                    .await
                {
                    Ok(outcome) => return outcome,
                    Err(s) => s.reason(),
                }
            }
        };
        let material = self.material().await;
        let task = self.task.clone();
        synthesize(&self.ctx, &self.id, self.depth, &task, &reason, material).await
    }

    fn push_user(&mut self, text: String) {
        self.messages.push(Message::user(text));
    }

    fn remember_output(&mut self, rendered: &str) {
        self.last_outputs.push(truncate_output(rendered, 4000));
        if self.last_outputs.len() > 3 {
            self.last_outputs.remove(0);
        }
    }

    /// Sends the conversation; appends the reply.
    async fn ask_model(
        &mut self,
        purpose: CallPurpose,
        iteration: u32,
        temperature: Option<f32>,
    ) -> Result<String, Stop> {
        let r = self
            .ctx
            .call_model(
                &self.id,
                self.depth,
                self.role(),
                &self.messages,
                self.sent,
                CallOpts {
                    temperature,
                    model: None,
                },
                purpose,
                iteration,
            )
            .await;
        self.sent = self.messages.len();
        match r {
            Ok(resp) => {
                self.messages.push(Message::assistant(resp.text.clone()));
                self.sent = self.messages.len();
                Ok(resp.text)
            }
            Err(CallError::Budget(e)) => Err(Stop::Budget(e)),
            Err(CallError::Model(m)) => Err(Stop::Failure(format!("{MODEL_FAILED}{m}"))),
        }
    }

    /// One last request for the answer (`prompt` says why): the answer is
    /// committed via `via`; no answer ends the agent with `no_answer`.
    async fn last_turn(
        &mut self,
        prompt: String,
        iteration: u32,
        via: &str,
        no_answer: String,
    ) -> Result<Outcome, Stop> {
        self.push_user(prompt);
        match self.last_answer_turn(iteration).await? {
            Some(answer) => Ok(self.commit(&answer, via)),
            None => Err(Stop::Failure(no_answer)),
        }
    }

    /// Asks for the answer one last time: FINAL in prose or code, or plain text.
    async fn last_answer_turn(&mut self, iteration: u32) -> Result<Option<String>, Stop> {
        let reply = self
            .ask_model(CallPurpose::FinalNow, iteration, None)
            .await?;
        let parsed = parse::parse_reply(&reply);
        if let Some(d) = parsed.prose_final {
            return Ok(self.resolve(d).await.ok());
        }
        if parsed.code_blocks.is_empty() {
            let text = reply.trim();
            return Ok((!text.is_empty()).then(|| text.to_string()));
        }
        for (i, b) in parsed.code_blocks.iter().enumerate() {
            if b.code.contains("FINAL") {
                let _ = self.run_cell(iteration, i, &b.code).await;
                if let Some(d) = self.take_final() {
                    return Ok(self.resolve(d).await.ok());
                }
            }
        }
        Ok(None)
    }

    /// What the agent gathered, for the synthesis call.
    async fn material(&mut self) -> String {
        let mut vars = String::new();
        let names: Vec<String> = self.assigned.iter().rev().take(12).cloned().collect();
        for name in names {
            if let Some(v) = self.get_var(&name).await {
                let text = value_to_text(&v);
                if !text.trim().is_empty() && text != "None" {
                    vars.push_str(&format!("- `{name}` = {}\n", truncate_output(&text, 3000)));
                }
            }
        }
        let mut extra = String::new();
        if let Some(d) = &self.deferred {
            extra.push_str(&format!(
                "A draft answer it wrote before seeing all results:\n{}\n\n",
                truncate_output(d, 6000)
            ));
        }
        if !vars.is_empty() {
            extra.push_str(&format!("Variables in its REPL:\n{vars}\n"));
        }
        if !self.last_outputs.is_empty() {
            extra.push_str("Its last REPL outputs:\n");
            for o in &self.last_outputs {
                extra.push_str(o);
                extra.push_str("\n---\n");
            }
        }
        material_from_ctx(&self.ctx, &self.id, &extra)
    }
}

/// Findings, sub-call results of `agent`, and `extra`, capped in size.
fn material_from_ctx(ctx: &RunCtx, agent: &str, extra: &str) -> String {
    let mut m = String::new();
    let findings = ctx
        .findings
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let all_findings: Vec<&Finding> = ctx.session.findings.iter().chain(findings.iter()).collect();
    if !all_findings.is_empty() {
        m.push_str("Findings recorded:\n");
        for f in all_findings {
            m.push_str(&format!(
                "- {}{}\n",
                f.text,
                f.source
                    .as_ref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            ));
        }
        m.push('\n');
    }
    let subs: Vec<SubResult> = ctx
        .sub_results
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|s| s.parent == agent)
        .cloned()
        .collect();
    if !subs.is_empty() {
        m.push_str("Sub-call results:\n");
        let per = (40_000 / subs.len()).clamp(500, 8000);
        for s in subs {
            m.push_str(&format!(
                "* Asked: {}\n  Answer: {}\n",
                s.prompt,
                truncate_output(&s.result, per)
            ));
        }
        m.push('\n');
    }
    m.push_str(extra);
    if m.trim().is_empty() {
        m.push_str("(nothing was gathered before the run stopped)");
    }
    truncate_output(&m, 60_000)
}

/// A plain-text account of what was gathered, when no model call can be made.
fn gathered_summary(ctx: &RunCtx, agent: &str, reason: &str, extra: &str) -> String {
    format!(
        "No complete answer was reached ({reason}). What was gathered before stopping:\n\n{}",
        truncate_output(&material_from_ctx(ctx, agent, extra), 8000)
    )
}

/// The synthesis fallback: one call from the gathered material, marked partial.
async fn synthesize(
    ctx: &Arc<RunCtx>,
    agent: &str,
    depth: u32,
    task: &str,
    reason: &str,
    material: String,
) -> Outcome {
    let prompt = render(
        prompts::SYNTHESIS,
        &[
            ("reason", reason),
            ("question", task),
            ("material", &material),
        ],
    );
    let messages = [Message::user(prompt)];
    let role = if depth == 0 {
        ModelRole::Root
    } else {
        ModelRole::Sub
    };
    let answer = match ctx
        .call_model(
            agent,
            depth,
            role,
            &messages,
            0,
            CallOpts::default(),
            CallPurpose::Synthesis,
            0,
        )
        .await
    {
        Ok(resp) if !resp.text.trim().is_empty() => {
            // Models sometimes wrap the synthesis in FINAL(...) anyway.
            match parse::find_prose_final(&resp.text) {
                Some(FinalDirective::Answer(a)) => a,
                _ => resp.text.trim().to_string(),
            }
        }
        _ => format!(
            "No complete answer was reached ({reason}). What was gathered before stopping:\n\n{}",
            truncate_output(&material, 8000)
        ),
    };
    ctx.trace.emit(TraceEvent::Final {
        agent: agent.into(),
        depth,
        answer: answer.clone(),
        via: "synthesis".into(),
        deferred: false,
    });
    Outcome {
        answer,
        partial_reason: Some(reason.to_string()),
    }
}

// ---- Hooks for the `pipeline`, `rag` and `auto` flows (crate::pipeline) ----

/// What the other flows share with the `repl` flow: one budget, the trace,
/// model calls with their accounting and concurrency slots, the sandbox and
/// `repl` agents scoped to a given input.
pub(crate) struct RunHandle(Arc<RunCtx>);

/// A model call of a flow that produced no reply.
#[derive(Debug, Clone)]
pub(crate) enum FlowCallError {
    /// A budget refused the call.
    Budget(Exhausted),
    /// The model failed after retries.
    Model(String),
}

impl std::fmt::Display for FlowCallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowCallError::Budget(e) => write!(f, "{e}"),
            FlowCallError::Model(m) => write!(f, "the model call failed: {m}"),
        }
    }
}

/// A fresh run id.
pub(crate) fn flow_run_id() -> String {
    new_run_id()
}

impl Engine {
    /// The shared state of one question run by another flow.
    pub(crate) fn run_handle(&self, corpus: Arc<Corpus>, req: &AskRequest) -> RunHandle {
        RunHandle(Arc::new(RunCtx {
            llm: self.llm.clone(),
            pool: self.pool.clone(),
            config: self.config.clone(),
            corpus,
            budget: Arc::new(Budget::new(self.config.budget.clone())),
            trace: req.trace.clone(),
            briefing: req.briefing.clone().filter(|b| !b.trim().is_empty()),
            session: req.session.clone().unwrap_or_default(),
            findings: Mutex::new(Vec::new()),
            sub_results: Mutex::new(Vec::new()),
            call_slots: Semaphore::new(self.config.budget.max_concurrent),
        }))
    }
}

impl RunHandle {
    /// The budget shared by every call of the question.
    pub(crate) fn budget(&self) -> &Arc<Budget> {
        &self.0.budget
    }

    /// The event stream.
    pub(crate) fn trace(&self) -> &Arc<Trace> {
        &self.0.trace
    }

    /// Engine settings.
    pub(crate) fn config(&self) -> &EngineConfig {
        &self.0.config
    }

    /// The corpus snapshot.
    pub(crate) fn corpus(&self) -> &Arc<Corpus> {
        &self.0.corpus
    }

    /// The sandbox settings (worker command, default limits).
    pub(crate) fn sandbox_config(&self) -> &rlm_sandbox::SandboxConfig {
        self.0.pool.config()
    }

    /// One model call through the shared budget, slots and trace.
    pub(crate) async fn call(
        &self,
        agent: &str,
        depth: u32,
        role: ModelRole,
        messages: &[Message],
        model: Option<String>,
        purpose: CallPurpose,
    ) -> Result<String, FlowCallError> {
        let opts = CallOpts {
            temperature: None,
            model,
        };
        match self
            .0
            .call_model(agent, depth, role, messages, 0, opts, purpose, 0)
            .await
        {
            Ok(r) => Ok(r.text),
            Err(CallError::Budget(e)) => Err(FlowCallError::Budget(e)),
            Err(CallError::Model(m)) => Err(FlowCallError::Model(m)),
        }
    }

    /// A `repl` agent `id` at `depth` over `input` (its `context`); returns
    /// the answer and why it is partial, if it is.
    pub(crate) async fn repl_agent(
        &self,
        id: String,
        depth: u32,
        task: String,
        input: InputValue,
    ) -> Result<(String, Option<String>), String> {
        run_agent(self.0.clone(), id, depth, task, Some(input))
            .await
            .map(|o| (o.answer, o.partial_reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_config() {
        let get = |k: &str| match k {
            "RLM_CONTEXT_SHAPE" => Some("list".to_string()),
            "RLM_CITATIONS" => Some("strict".to_string()),
            "RLM_VERIFY_CITATIONS" => Some("false".to_string()),
            "RLM_DEFER_FINAL" => Some("0".to_string()),
            "RLM_MAX_NO_CODE_REPLIES" => Some("5".to_string()),
            "RLM_INSPECT_SEARCH_K" => Some("0".to_string()),
            _ => None,
        };
        let c = EngineConfig::from_lookup(get).unwrap();
        assert_eq!(c.max_replies_without_code, 5);
        assert_eq!(c.inspect_search_k, 0);
        let e = EngineConfig::from_lookup(|k| (k == "RLM_INSPECT_SEARCH_K").then(|| "99".into()))
            .unwrap_err();
        assert!(e.contains("0 to 50"), "{e}");
        for bad in ["0", "two"] {
            let e = EngineConfig::from_lookup(|k| {
                (k == "RLM_MAX_NO_CODE_REPLIES").then(|| bad.to_string())
            })
            .unwrap_err();
            assert!(e.contains("at least 1"), "{e}");
        }
        assert_eq!(c.context_shape, ContextShape::List);
        assert_eq!(c.citation_policy, CitationPolicy::Strict);
        assert!(!c.verify_citations);
        assert!(!c.defer_final_after_fanout);
        let e = EngineConfig::from_lookup(|k| {
            (k == "RLM_VERIFY_CITATIONS").then(|| "maybe".to_string())
        })
        .unwrap_err();
        assert!(e.contains("RLM_VERIFY_CITATIONS"));
        let e =
            EngineConfig::from_lookup(|k| (k == "RLM_CONTEXT_SHAPE").then(|| "tree".to_string()))
                .unwrap_err();
        assert!(e.contains("string or list"));
    }

    #[test]
    fn values_to_text() {
        assert_eq!(value_to_text(&json!("x")), "x");
        assert_eq!(value_to_text(&json!(3)), "3");
        assert_eq!(value_to_text(&json!(true)), "True");
        assert_eq!(value_to_text(&Value::Null), "None");
        assert!(value_to_text(&json!({"a": 1})).contains("\"a\": 1"));
    }

    #[test]
    fn flow_parse() {
        assert_eq!("repl".parse::<Flow>().unwrap(), Flow::Repl);
        assert_eq!("rag".parse::<Flow>().unwrap(), Flow::Rag);
        assert!("magic".parse::<Flow>().unwrap_err().contains("pipeline"));
    }

    #[tokio::test]
    async fn cancel_token_wakes_waiters() {
        let t = CancelToken::new();
        let t2 = t.clone();
        let h = tokio::spawn(async move { t2.cancelled().await });
        tokio::task::yield_now().await;
        t.cancel();
        h.await.unwrap();
        assert!(t.is_cancelled());
        t.cancelled().await; // already cancelled: returns at once
    }
}
