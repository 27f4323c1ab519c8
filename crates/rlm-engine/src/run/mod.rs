//! The run harness: what every flow shares for one question, written once.
//!
//! A [`Run`] holds the question's one [`Budget`], its [`Trace`], the model
//! client with its concurrency slots, the sandbox pool and the corpus. It
//! starts the run (`run_started`), makes every model call (budget reservation,
//! slot, trace events, usage accounting), bounds the flow's work by the
//! cancel token and the wall clock, and finishes: citation verification under
//! the policy, `run_finished`, the [`Answer`].

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rlm_llm::{ChatModel, ChatRequest, ChatResponse, Message, ModelRole, SchemaUse};
use rlm_sandbox::{SandboxError, WorkerPool};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::answer::{Answer, FileSummary, FlowReport, RouteDecision, TraceInfo};
use crate::budget::{Budget, CallUsage, Exhausted};
use crate::cancel::CancelToken;
use crate::citations::{self, CitationPolicy, VerificationReport};
use crate::claims;
use crate::config::{EngineConfig, Flow};
use crate::corpus::Corpus;
use crate::grounding::{self, EvidenceKind, Ledger};
use crate::request::AskRequest;
use crate::session::{Finding, SessionState};
use crate::text::preview;
use crate::trace::{CallPurpose, DeltaStream, Trace, TraceEvent, TraceMessage};

mod finish;
mod subcalls;

/// Agent id of the question-level steps (the root agent, the pipeline's own steps).
pub(crate) const ROOT_AGENT: &str = "0";

/// Prefix of the stop reason when a model call failed after retries.
pub(crate) const MODEL_FAILED: &str = "the model call failed: ";

/// A sub-call's result kept for synthesis material.
#[derive(Debug, Clone)]
pub(crate) struct SubResult {
    pub(crate) parent: String,
    pub(crate) prompt: String,
    pub(crate) result: String,
}

/// The parts of an engine a run needs.
pub(crate) struct RunParts {
    pub(crate) llm: Arc<dyn ChatModel>,
    pub(crate) pool: WorkerPool,
    pub(crate) config: EngineConfig,
    /// Why model calls are impossible (`rlm repl` without a model), if they are.
    pub(crate) no_model: Option<String>,
    /// The entailment judge's verdicts, shared by the engine's runs.
    pub(crate) verdicts: Arc<grounding::VerdictCache>,
}

/// Most counted sets an answer carries (the run's last scans).
const COUNTED_SETS: usize = 10;

/// State shared by every agent and step of one question.
pub(crate) struct Run {
    llm: Arc<dyn ChatModel>,
    pub(crate) pool: WorkerPool,
    pub(crate) config: EngineConfig,
    pub(crate) corpus: Arc<Corpus>,
    pub(crate) budget: Arc<Budget>,
    pub(crate) trace: Arc<Trace>,
    pub(crate) briefing: Option<String>,
    pub(crate) session: SessionState,
    pub(crate) findings: Mutex<Vec<Finding>>,
    pub(crate) sub_results: Mutex<Vec<SubResult>>,
    /// The `grep()` scans the run's agents made, one per distinct scan: the
    /// sets an answer about a set was computed from.
    pub(crate) scans: Mutex<Vec<crate::scan::CountedSet>>,
    /// The notes the host functions printed (a tally's reading, a search
    /// to run instead): the engine's words, which an answer must not copy.
    pub(crate) notes_shown: Mutex<Vec<String>>,
    /// What the run's agents saw (search hits, printed corpus text, what
    /// they passed to sub-calls and got back).
    pub(crate) ledger: Ledger,
    /// Why model calls are impossible (`rlm repl` without a model), if they are.
    pub(crate) no_model: Option<String>,
    /// The entailment judge's verdicts, shared by the engine's runs.
    verdicts: Arc<grounding::VerdictCache>,
    call_slots: Semaphore,
    /// An endpoint's refusal of structured replies was noted in the trace.
    schema_refusal_noted: AtomicBool,
    /// The store's reply cache, as this run uses it.
    replies: crate::replies::RunReplies,
    id: String,
    /// The question (coverage looks for the documents it matches).
    pub(crate) question: String,
    /// The language the engine's own sentences are written in (the
    /// question's, where the notices have it).
    pub(crate) notice_language: &'static str,
    /// The schema the answer is also returned in, when one was asked for.
    answer_schema: Option<Value>,
}

/// Per-call overrides of the role's settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallOpts {
    pub(crate) temperature: Option<f32>,
    pub(crate) model: Option<String>,
    /// Stop sequences for this call.
    pub(crate) stop: Vec<String>,
    /// The schema the reply must follow (structured turns, extraction).
    pub(crate) schema: Option<rlm_llm::ReplySchema>,
}

/// Who makes one model call, at which turn, why, and with which model (as
/// the trace names it).
struct CallSite<'a> {
    agent: &'a str,
    depth: u32,
    iteration: u32,
    purpose: CallPurpose,
    model: String,
}

/// Who makes a model call and why, for the calls that need no turn number.
#[derive(Debug, Clone, Copy)]
struct Site<'a> {
    agent: &'a str,
    depth: u32,
    role: ModelRole,
    purpose: CallPurpose,
}

/// Why a call whose reply must follow a schema gave no value.
#[derive(Debug, Clone, thiserror::Error)]
enum TypedCallError {
    /// The call itself failed or was refused.
    #[error(transparent)]
    Call(CallError),
    /// No reply followed the schema, twice (how the second failed).
    #[error("the reply did not follow the schema, twice; the second: {0}")]
    Schema(String),
}

/// A model call that produced no reply.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CallError {
    /// A budget refused the call.
    #[error("{0}")]
    Budget(Exhausted),
    /// The model failed after retries.
    #[error("{}{}", MODEL_FAILED, .0)]
    Model(String),
}

/// Why a sub-call (`llm_query`, `rlm_query`) gave the calling agent no
/// answer. The message is what the model reads in its sandbox.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SubcallError {
    /// A budget refused the call.
    #[error(
        "{0}. No more sub-calls can be made: work with the results you already have and commit an answer with FINAL."
    )]
    Budget(Exhausted),
    /// The sub-model failed after retries.
    #[error("the sub-model call failed: {0}")]
    Model(String),
    /// The reply did not follow the schema, twice (how the second failed).
    #[error("the sub-model's reply did not follow the schema, twice; the second: {0}")]
    Schema(String),
    /// The child agent's sandbox could not start.
    #[error(transparent)]
    AgentSandbox(#[from] SandboxError),
    /// The call's task ended without a result (it panicked).
    #[error("the call was lost")]
    Lost,
}

/// What a flow hands the harness to finish the run.
pub(crate) struct Finished {
    /// The answer text as the flow produced it.
    pub(crate) text: String,
    /// Why the answer is partial, if it is.
    pub(crate) partial_reason: Option<String>,
    /// `pipeline` and `rag`: the report, whose citation policy works claim by
    /// claim (strict drops unsupported claims). `repl`: `None`, and strict
    /// flags unsupported citations inline.
    pub(crate) report: Option<FlowReport>,
    /// `pipeline`: one summary per inspected file.
    pub(crate) file_summaries: Vec<FileSummary>,
}

impl Run {
    /// The shared state of one question (no event yet: see [`Run::started`]).
    pub(crate) fn new(parts: RunParts, corpus: Arc<Corpus>, req: &AskRequest) -> Arc<Run> {
        Arc::new(Run {
            llm: parts.llm,
            pool: parts.pool,
            budget: Arc::new(Budget::new(parts.config.budget.clone())),
            call_slots: Semaphore::new(parts.config.budget.max_concurrent),
            schema_refusal_noted: AtomicBool::new(false),
            replies: crate::replies::RunReplies::new(
                corpus.store(),
                parts.config.reply_cache,
                parts.config.reply_cache_bytes,
            ),
            config: parts.config,
            corpus,
            trace: req.trace.clone(),
            briefing: req.briefing.clone().filter(|b| !b.trim().is_empty()),
            session: req.session.clone().unwrap_or_default(),
            findings: Mutex::new(Vec::new()),
            scans: Mutex::new(Vec::new()),
            notes_shown: Mutex::new(Vec::new()),
            sub_results: Mutex::new(Vec::new()),
            ledger: Ledger::default(),
            no_model: parts.no_model,
            verdicts: parts.verdicts,
            id: new_run_id(),
            question: req.question.clone(),
            notice_language: crate::notices::language_of(&req.question),
            answer_schema: req.answer_schema.clone(),
        })
    }

    /// True when `text` copies words of a note the host functions printed
    /// this run ([`crate::parse::copies_a_note`]).
    pub(crate) fn copies_a_note(&self, text: &str) -> bool {
        let notes = self.notes_shown.lock().unwrap_or_else(|e| e.into_inner());
        crate::parse::copies_a_note(text, &notes)
    }

    /// Emits `run_started` for the flow that answers.
    pub(crate) fn started(&self, question: &str, flow: Flow) {
        let context_chars = match flow {
            Flow::Repl => self.corpus.context_chars(self.config.context_shape),
            _ => self.corpus.total_chars(),
        };
        self.trace.emit(TraceEvent::RunStarted {
            run_id: self.id.clone(),
            question: question.to_string(),
            flow: flow.as_str().into(),
            root_model: self.config.root_model.clone(),
            sub_model: self.config.sub_model.clone(),
            documents: self.corpus.documents().len(),
            context_chars,
            budget: serde_json::to_value(&self.config.budget).unwrap_or(Value::Null),
        });
    }

    /// The event stream.
    pub(crate) fn trace(&self) -> &Arc<Trace> {
        &self.trace
    }

    /// Engine settings.
    pub(crate) fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The corpus snapshot.
    pub(crate) fn corpus(&self) -> &Arc<Corpus> {
        &self.corpus
    }

    /// The sandbox settings (worker command, default limits) on the
    /// back-end the question chose, which need not be the pool's.
    pub(crate) fn sandbox_config(&self) -> rlm_sandbox::SandboxConfig {
        let mut config = self.pool.config().clone();
        config.backend = self.config.sandbox;
        config
    }

    /// Emits a `fallback` event.
    pub(crate) fn fallback(&self, agent: &str, kind: &str, reason: &str) {
        self.trace.emit(TraceEvent::Fallback {
            agent: agent.into(),
            kind: kind.into(),
            reason: reason.into(),
        });
    }

    /// Emits a `flow_step` event.
    pub(crate) fn step(&self, agent: &str, step: &str, message: String, data: Value) {
        self.trace.emit(TraceEvent::FlowStep {
            agent: agent.into(),
            step: step.into(),
            message,
            data,
        });
    }

    /// Emits the `route` step: which flow answers, and why.
    pub(crate) fn emit_route(&self, d: &RouteDecision) {
        self.step(
            ROOT_AGENT,
            "route",
            format!("Flow {} selected ({}): {}", d.chosen, d.requested, d.reason),
            json!(d),
        );
    }

    /// One model call of a flow step through the shared budget, slots and trace.
    pub(crate) async fn call(
        &self,
        agent: &str,
        depth: u32,
        role: ModelRole,
        messages: &[Message],
        model: Option<String>,
        purpose: CallPurpose,
    ) -> Result<String, CallError> {
        let opts = CallOpts {
            model,
            ..CallOpts::default()
        };
        self.call_model(agent, depth, role, messages, 0, opts, purpose, 0)
            .await
            .map(|r| r.text)
    }

    /// Every model call goes through here: the store's reply cache, budget
    /// reservation, concurrency slot, trace events, usage accounting.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call_model(
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
        let model = opts.model.clone().unwrap_or_else(|| match role {
            ModelRole::Root => self.config.root_model.clone(),
            ModelRole::Sub => self.config.sub_model.clone(),
        });
        let mut req = ChatRequest::new(role, messages.to_vec()).at_depth(depth);
        req.temperature = opts.temperature;
        req.model = opts.model;
        req.stop = opts.stop;
        req.schema = opts.schema;
        let call = CallSite {
            agent,
            depth,
            iteration,
            purpose,
            model,
        };
        let key = if self.config.reply_cache {
            self.llm.reply_key(&req)
        } else {
            None
        };
        if let Some(key) = &key
            && let Some(cached) = self.cached_reply(key, &req, &call, new_from).await
        {
            return cached;
        }
        let reserved = if purpose.is_last_resort() && depth == 0 {
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
        self.emit_request(&call, &req.messages, new_from);
        let deltas = DeltaStream::new(self.trace.clone(), agent, depth);
        let _closing = deltas.closer();
        let result = self.llm.chat(req.streaming_to(deltas.sink())).await;
        deltas.close();
        match result {
            Ok(resp) => {
                self.record_reply(&call, &resp, false);
                if let Some(key) = &key
                    && let Err(e) = self.replies.keep(key, &resp).await
                {
                    self.note_cache_failure(agent, &e);
                }
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

    /// The reply kept in the store's cache for `req`, served as the call's
    /// answer (free: no budget, no slot); `None` on a miss.
    async fn cached_reply(
        &self,
        key: &str,
        req: &ChatRequest,
        call: &CallSite<'_>,
        new_from: usize,
    ) -> Option<Result<ChatResponse, CallError>> {
        let cached = match self.replies.lookup(key).await {
            Ok(found) => found?,
            Err(e) => {
                self.note_cache_failure(call.agent, &e);
                return None;
            }
        };
        if self.budget.is_cancelled() {
            return Some(Err(CallError::Budget(Exhausted::Cancelled)));
        }
        self.emit_request(call, &req.messages, new_from);
        let resp = crate::replies::as_response(cached, req.role, call.depth, req.schema.is_some());
        self.trace.emit(TraceEvent::LlmDelta {
            agent: call.agent.into(),
            depth: call.depth,
            attempt: 1,
            text: resp.text.clone(),
        });
        self.record_reply(call, &resp, true);
        Some(Ok(resp))
    }

    /// The trace's record of a request about to be answered.
    fn emit_request(&self, call: &CallSite<'_>, messages: &[Message], new_from: usize) {
        self.trace.emit(TraceEvent::LlmRequest {
            agent: call.agent.into(),
            depth: call.depth,
            iteration: call.iteration,
            model: call.model.clone(),
            purpose: call.purpose,
            message_count: messages.len(),
            new_messages: messages[new_from.min(messages.len())..]
                .iter()
                .map(|m| TraceMessage {
                    role: m.role.as_str().into(),
                    content: m.content.clone(),
                })
                .collect(),
        });
    }

    /// Accounts a reply (a cached one as saved, not spent) and traces it.
    fn record_reply(&self, call: &CallSite<'_>, resp: &ChatResponse, from_cache: bool) {
        let u = &resp.usage;
        if from_cache {
            self.budget
                .record_cached(call.depth, u.input_tokens + u.output_tokens);
        } else {
            self.budget.record(
                call.depth,
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
        }
        if let SchemaUse::Refused { reason } = &resp.schema_use
            && !self.schema_refusal_noted.swap(true, Ordering::SeqCst)
        {
            self.fallback(
                call.agent,
                "structured_reply",
                &format!(
                    "the endpoint refused the reply schema, so replies are plain text: {reason}"
                ),
            );
        }
        self.trace.emit(TraceEvent::LlmResponse {
            agent: call.agent.into(),
            depth: call.depth,
            model: u.model.clone(),
            text: resp.text.clone(),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_input_tokens: u.cached_tokens.unwrap_or(0),
            cost_usd: u.cost_usd,
            latency_ms: u.latency.as_millis() as u64,
            from_cache,
            draft: u.draft,
        });
    }

    /// Notes, once per run, that the reply cache failed (the run goes on
    /// without it).
    fn note_cache_failure(&self, agent: &str, failure: &str) {
        if self.replies.first_failure() {
            self.fallback(agent, "reply_cache", failure);
        }
    }

    /// Records in the ledger text agent `agent` saw or passed on (off the
    /// async runtime: mapping it back to chunks searches the index).
    pub(crate) async fn saw(&self, kind: EvidenceKind, agent: &str, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        let corpus = self.corpus.clone();
        let (agent_id, text) = (agent.to_string(), text.to_string());
        let found = tokio::task::spawn_blocking(move || {
            grounding::evidence_of(kind, &agent_id, &text, &corpus)
        })
        .await
        .unwrap_or_default();
        for e in found {
            self.ledger.record(e);
        }
    }

    /// Runs `work` until it ends, the caller cancels, or the wall clock runs
    /// out. A stop (cancel also cancels the budget) emits `budget_exhausted`
    /// for the root and returns why.
    pub(crate) async fn until_stopped<T>(
        &self,
        cancel: &CancelToken,
        work: impl Future<Output = T>,
    ) -> Result<T, Exhausted> {
        let wall = tokio::time::sleep(self.budget.remaining_time());
        let reason = tokio::select! {
            r = work => return Ok(r),
            _ = cancel.cancelled() => {
                self.budget.cancel();
                Exhausted::Cancelled
            }
            _ = wall => Exhausted::WallClock { limit_secs: self.config.budget.wall_clock.as_secs() },
        };
        self.trace.emit(TraceEvent::BudgetExhausted {
            agent: ROOT_AGENT.into(),
            depth: 0,
            reason: reason.clone(),
        });
        Err(reason)
    }
}

/// How long the synthesis after the wall clock may take: a tenth of the wall
/// clock, between 5 s and 2 min.
pub(crate) fn synthesis_grace(wall: Duration) -> Duration {
    (wall / 10).clamp(Duration::from_secs(5), Duration::from_secs(120))
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
