//! The behaviour of the REPL's host functions (the table is
//! [`crate::host::REPL_FUNCTIONS`]): sub-model calls, child agents, FINAL,
//! findings and search, answered for one agent's sandbox.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rlm_sandbox::{HostCall, HostError, HostHandler, InputValue, SandboxError};
use serde_json::Value;
use tokio::sync::Semaphore;

use super::host_args::{arg, type_error, value_error, within};
use super::scanning;
use super::synthesis::Outcome;
use crate::citations::CitationSource;
use crate::grounding::EvidenceKind;
use crate::host::repl_function;
use crate::parse::FinalDirective;
use crate::run::{Run, SubcallError};
use crate::session::Finding;
use crate::text::{is_identifier, preview, value_to_text};
use crate::trace::TraceEvent;

/// A boxed future (recursive agents need one).
pub(crate) type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The largest `k` of `search(query, k)`.
const MAX_SEARCH_K: u64 = 1000;

/// Caps on what host calls move into the parent (which, unlike the sandbox,
/// has no memory limit of its own): enforced here, before anything is kept,
/// with a Python error the model can act on.
pub(crate) mod caps {
    /// Characters of a `search()` query.
    pub const SEARCH_QUERY_CHARS: usize = 10_000;
    /// Words of a `search()` query (each one is a term the index looks up).
    pub const SEARCH_QUERY_WORDS: usize = 1_000;
    /// Characters of one finding's text.
    pub const FINDING_CHARS: usize = 10_000;
    /// Characters of one finding's source.
    pub const FINDING_SOURCE_CHARS: usize = 1_000;
    /// Findings one run may record.
    pub const FINDINGS_PER_RUN: usize = 1_000;
    /// Characters of all the findings of one run.
    pub const FINDINGS_CHARS_PER_RUN: usize = 1_000_000;
    /// Characters of a committed answer.
    pub const ANSWER_CHARS: usize = 1_000_000;
}

/// `rlm_query`: a child agent one level deeper, or a plain `llm_query` when
/// the child would be at `max_depth`.
fn rlm_query(
    spawn: SpawnAgent,
    ctx: Arc<Run>,
    id: String,
    parent: String,
    depth: u32,
    prompt: String,
    context: Option<Value>,
) -> BoxFut<Result<String, SubcallError>> {
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
        if let Some(text) = context.as_ref().map(value_to_text) {
            ctx.saw(EvidenceKind::SubPrompt, &id, &text).await;
        }
        let input = context.map(|c| match c {
            Value::String(s) => InputValue::Text(s),
            Value::Array(items) if items.iter().all(Value::is_string) => {
                InputValue::TextList(items.into_iter().map(|v| value_to_text(&v)).collect())
            }
            other => InputValue::Json(other),
        });
        let r = spawn(ctx.clone(), id.clone(), depth, prompt.clone(), input)
            .await
            .map(|o| match o.partial_reason {
                Some(reason) => format!("(partial: {reason}) {}", o.answer),
                None => o.answer,
            })
            .map_err(SubcallError::AgentSandbox);
        if let Ok(answer) = &r {
            ctx.saw(EvidenceKind::SubAnswer, &id, answer).await;
        }
        ctx.finish_subcall(&id, &parent, depth, &prompt, &r, started);
        r
    })
}

/// What a host call left for the loop to act on.
#[derive(Debug, Default)]
pub(crate) struct HostState {
    pub(crate) final_call: Option<FinalDirective>,
    /// Notes for the cell's output (a `grep()` that returned fewer lines
    /// than matched), taken after the cell.
    pub(crate) notes: Vec<String>,
    /// What the agent's last tally that matched lines found (its call and
    /// results in a line), restated on a last turn after "every line".
    pub(crate) last_count: Option<String>,
}

/// Starts a child agent (`rlm_query`): the `repl` flow's agent loop, handed
/// in by the agent so that this module does not import it. `Err` when the
/// child's sandbox cannot start.
pub(crate) type SpawnAgent =
    fn(Arc<Run>, String, u32, String, Option<InputValue>) -> BoxFut<Result<Outcome, SandboxError>>;

/// The host functions of one agent's sandbox (the table's behaviour).
pub(crate) struct AgentHost {
    ctx: Arc<Run>,
    id: String,
    depth: u32,
    spawn: SpawnAgent,
    children: AtomicU32,
    /// Sub-calls started in the current turn (the deferred-FINAL rule).
    pub(crate) turn_subcalls: AtomicU32,
    pub(crate) state: Mutex<HostState>,
}

/// A sub-call's failure as the Python exception the cell sees: a reply
/// that did not follow its schema is a `ValueError`, the rest a
/// `RuntimeError`.
fn subcall_error(e: SubcallError) -> HostError {
    match e {
        SubcallError::Schema(_) => value_error(e.to_string()),
        other => HostError::runtime(other.to_string()),
    }
}

impl AgentHost {
    /// The host of agent `id` at `depth`.
    pub(crate) fn new(ctx: Arc<Run>, id: String, depth: u32, spawn: SpawnAgent) -> Self {
        AgentHost {
            ctx,
            id,
            depth,
            spawn,
            children: AtomicU32::new(0),
            turn_subcalls: AtomicU32::new(0),
            state: Mutex::new(HostState::default()),
        }
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the FINAL / FINAL_VAR the last cell committed, if any.
    pub(crate) fn take_final(&self) -> Option<FinalDirective> {
        self.lock_state().final_call.take()
    }

    /// Takes the notes the last cell's host calls left for its output.
    pub(crate) fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut self.lock_state().notes)
    }

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

    /// The optional `schema=` of `llm_query(prompt, model=None,
    /// schema=None)`: a JSON Schema (a dict) the reply must follow, checked
    /// before any call is made.
    fn schema_arg(call: &HostCall) -> Result<Option<Value>, HostError> {
        match arg(call, 2, "schema") {
            None | Some(Value::Null) => Ok(None),
            Some(schema) => {
                rlm_llm::schema::check(schema)
                    .map_err(|e| value_error(format!("{}(schema=...): {e}", call.name)))?;
                Ok(Some(schema.clone()))
            }
        }
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
    /// prompt does not lose the others' answers; with `typed` (replies that
    /// follow a schema), a failure is a `ValueError` naming the prompts
    /// that failed: an error string is not a value of the schema.
    async fn batched(
        &self,
        prompts: Vec<String>,
        typed: bool,
        f: impl Fn(String, String) -> BoxFut<Result<Value, SubcallError>>,
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
        let mut out: Vec<Option<Result<Value, SubcallError>>> = vec![None; set.len()];
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                out[i] = Some(r);
            }
        }
        let results: Vec<Result<Value, SubcallError>> = out
            .into_iter()
            .map(|r| r.unwrap_or(Err(SubcallError::Lost)))
            .collect();
        if !results.is_empty() && results.iter().all(Result::is_err) {
            let first = results[0]
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            return Err(HostError::runtime(format!(
                "every call of the batch failed; the first: {first}"
            )));
        }
        if typed {
            let failed: Vec<String> = results
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("prompt {i}: {e}")))
                .collect();
            if !failed.is_empty() {
                return Err(value_error(format!(
                    "llm_query_batched(schema=...): {} of {} replies failed: {}",
                    failed.len(),
                    results.len(),
                    failed.join("; ")
                )));
            }
        }
        Ok(Value::Array(
            results
                .into_iter()
                .map(|r| r.unwrap_or_else(|e| Value::String(format!("[error: {e}]"))))
                .collect(),
        ))
    }

    async fn dispatch(&self, call: HostCall) -> Result<Value, HostError> {
        let ctx = &self.ctx;
        if let Some(reason) = &ctx.no_model
            && repl_function(&call.name).is_some_and(|f| f.needs_model)
        {
            return Err(HostError::runtime(format!(
                "no model configured: {}() needs a model. {reason}",
                call.name
            )));
        }
        match call.name.as_str() {
            "llm_query" | "llm_query_async" => {
                let prompt = Self::prompt_arg(&call)?;
                let model = Self::model_arg(&call);
                let schema = Self::schema_arg(&call)?;
                self.turn_subcalls.fetch_add(1, Ordering::SeqCst);
                let (id, depth) = (self.child_id(), self.depth + 1);
                match schema {
                    Some(schema) => ctx
                        .sub_query_typed(id, &self.id, depth, prompt, model, &schema)
                        .await
                        .map_err(subcall_error),
                    None => ctx
                        .sub_query(id, &self.id, depth, prompt, model)
                        .await
                        .map(Value::String)
                        .map_err(subcall_error),
                }
            }
            "llm_query_batched" => {
                let prompts = Self::prompts_arg(&call)?;
                let model = Self::model_arg(&call);
                let schema = Self::schema_arg(&call)?;
                let (ctx2, parent, depth) = (ctx.clone(), self.id.clone(), self.depth + 1);
                let typed = schema.is_some();
                self.batched(prompts, typed, move |id, p| {
                    let (ctx, parent, model) = (ctx2.clone(), parent.clone(), model.clone());
                    let schema = schema.clone();
                    Box::pin(async move {
                        match schema {
                            Some(s) => ctx.sub_query_typed(id, &parent, depth, p, model, &s).await,
                            None => ctx
                                .sub_query(id, &parent, depth, p, model)
                                .await
                                .map(Value::String),
                        }
                    })
                })
                .await
            }
            "rlm_query" | "rlm_query_async" => {
                let prompt = Self::prompt_arg(&call)?;
                let context = arg(&call, 1, "context").cloned();
                self.turn_subcalls.fetch_add(1, Ordering::SeqCst);
                rlm_query(
                    self.spawn,
                    ctx.clone(),
                    self.child_id(),
                    self.id.clone(),
                    self.depth + 1,
                    prompt,
                    context,
                )
                .await
                .map(Value::String)
                .map_err(|e| HostError::runtime(e.to_string()))
            }
            "rlm_query_batched" => {
                let prompts = Self::prompts_arg(&call)?;
                let (ctx2, parent, depth) = (ctx.clone(), self.id.clone(), self.depth + 1);
                let spawn = self.spawn;
                self.batched(prompts, false, move |id, p| {
                    let child = rlm_query(spawn, ctx2.clone(), id, parent.clone(), depth, p, None);
                    Box::pin(async move { child.await.map(Value::String) })
                })
                .await
            }
            "FINAL" => self.final_answer(&call),
            "FINAL_VAR" => self.final_var(&call),
            "add_finding" => self.add_finding(&call),
            "search" => self.search(&call).await,
            "grep" => Ok(self.noted(scanning::grep(&self.ctx, &self.id, &call).await?)),
            "grep_count" => scanning::grep_count(&self.ctx, &self.id, &call).await,
            "tally" => {
                // The root's task is the question: its words can be checked
                // against the lines a tally counted.
                let question = (self.depth == 0).then_some(self.ctx.question.as_str());
                let (value, note, summary) =
                    scanning::tally(&self.ctx, &self.id, question, &call).await?;
                if summary.is_some() {
                    self.lock_state().last_count = summary;
                }
                Ok(self.noted((value, note)))
            }
            "chunks" => scanning::chunks(&self.ctx, &call).await,
            other => Err(HostError::Raise {
                exc_type: "NameError".into(),
                message: format!("name '{other}' is not defined"),
            }),
        }
    }
}

/// Longest variable name `FINAL_VAR` takes.
const MAX_NAME_BYTES: usize = 256;

impl AgentHost {
    /// A host function's result, its note (if any) kept for the cell's
    /// output.
    fn noted(&self, (value, note): (Value, Option<String>)) -> Value {
        if let Some(note) = note {
            self.ctx
                .notes_shown
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(note.clone());
            self.lock_state().notes.push(note);
        }
        value
    }

    /// `FINAL(answer)`: the answer, taken by the loop after the cell.
    fn final_answer(&self, call: &HostCall) -> Result<Value, HostError> {
        let v =
            arg(call, 0, "answer").ok_or_else(|| type_error("FINAL() needs the answer".into()))?;
        let answer = value_to_text(v);
        within(
            "the answer given to FINAL()",
            &answer,
            caps::ANSWER_CHARS,
            "write the answer itself, not the material it comes from",
        )?;
        self.set_final(FinalDirective::Answer(answer))
    }

    /// `FINAL_VAR(name)`: the variable, read by the loop after the cell; a
    /// value that is no name is the answer itself.
    fn final_var(&self, call: &HostCall) -> Result<Value, HostError> {
        let v = arg(call, 0, "name")
            .ok_or_else(|| type_error("FINAL_VAR() needs a variable name".into()))?;
        let directive = match v {
            // A name, not an 80 MB string of letters: past the length of any
            // real variable name the value is the answer itself (and capped).
            Value::String(s) if s.trim().len() <= MAX_NAME_BYTES && is_identifier(s.trim()) => {
                FinalDirective::Var(s.trim().to_string())
            }
            other => {
                let answer = value_to_text(other);
                within(
                    "the answer given to FINAL_VAR()",
                    &answer,
                    caps::ANSWER_CHARS,
                    "write the answer itself, not the material it comes from",
                )?;
                FinalDirective::Answer(answer)
            }
        };
        self.set_final(directive)
    }

    fn set_final(&self, directive: FinalDirective) -> Result<Value, HostError> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .final_call = Some(directive);
        Ok(Value::Null)
    }

    /// `add_finding(text, source=None)`: recorded for the run, within its
    /// caps; returns how many there are.
    fn add_finding(&self, call: &HostCall) -> Result<Value, HostError> {
        let text = arg(call, 0, "text")
            .map(value_to_text)
            .ok_or_else(|| type_error("add_finding() needs the finding text".into()))?;
        let source = arg(call, 1, "source").map(value_to_text);
        within(
            "the finding",
            &text,
            caps::FINDING_CHARS,
            "record the fact in a sentence or two, not the passage",
        )?;
        if let Some(source) = &source {
            within(
                "the finding's source",
                source,
                caps::FINDING_SOURCE_CHARS,
                "name the document or chunk",
            )?;
        }
        let mut findings = self.ctx.findings.lock().unwrap_or_else(|e| e.into_inner());
        let recorded: usize = findings.iter().map(|f| f.text.chars().count()).sum();
        if findings.len() >= caps::FINDINGS_PER_RUN
            || recorded + text.chars().count() > caps::FINDINGS_CHARS_PER_RUN
        {
            return Err(value_error(format!(
                "no more findings can be recorded in this run ({} findings, {recorded} characters; the limits are {} and {}): answer from what you have",
                findings.len(),
                caps::FINDINGS_PER_RUN,
                caps::FINDINGS_CHARS_PER_RUN
            )));
        }
        self.ctx.trace.emit(TraceEvent::Finding {
            agent: self.id.clone(),
            text: text.clone(),
            source: source.clone(),
        });
        findings.push(Finding { text, source });
        // The count, so a person at `rlm repl` sees the finding land.
        Ok(Value::from(findings.len()))
    }

    /// `search(query, k=10)`: the full-text hits, their chunks recorded as
    /// seen.
    async fn search(&self, call: &HostCall) -> Result<Value, HostError> {
        let query = arg(call, 0, "query")
            .map(value_to_text)
            .ok_or_else(|| type_error("search() needs a query string".into()))?;
        let k = match arg(call, 1, "k") {
            None => 10,
            Some(v) => v
                .as_u64()
                .filter(|k| (1..=MAX_SEARCH_K).contains(k))
                .ok_or_else(|| {
                    type_error(format!(
                        "search(query, k): k must be an integer between 1 and {MAX_SEARCH_K}, e.g. search(\"refund policy\", 10)"
                    ))
                })? as usize,
        };
        within(
            "the search() query",
            &query,
            caps::SEARCH_QUERY_CHARS,
            "search with a few keywords",
        )?;
        let words = query.split_whitespace().count();
        if words > caps::SEARCH_QUERY_WORDS {
            return Err(value_error(format!(
                "the search() query has {words} words; the limit is {}: search with a few keywords",
                caps::SEARCH_QUERY_WORDS
            )));
        }
        // Off the async runtime: a search is CPU work, and under
        // `rlm serve` other requests share the runtime's threads.
        let corpus = self.ctx.corpus.clone();
        let hits = tokio::task::spawn_blocking(move || corpus.search_json(&query, k))
            .await
            .map_err(|e| HostError::runtime(format!("search failed: {e}")))?
            .map_err(|e| value_error(format!("search failed: {e}")))?;
        self.saw_hits(&hits).await;
        Ok(hits)
    }

    /// Records the chunks of `search()` hits in the run's ledger.
    async fn saw_hits(&self, hits: &Value) {
        let ids: Vec<String> = hits
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["chunk_id"].as_str().map(str::to_string))
            .collect();
        let corpus = self.ctx.corpus.clone();
        let chunks = tokio::task::spawn_blocking(move || {
            ids.iter()
                .filter_map(|id| corpus.chunk(id))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for chunk in &chunks {
            self.ctx
                .ledger
                .saw_chunk(EvidenceKind::SearchHit, &self.id, chunk);
        }
    }
}

impl HostHandler for AgentHost {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        self.dispatch(call).await
    }

    /// A lookup (`search`, ...) is the cell's own work and counts against
    /// `--cell-timeout`; a model call counts against the host-wait limit.
    fn counts_as_cell_time(&self, call: &HostCall) -> bool {
        repl_function(&call.name).is_some_and(|f| !f.needs_model)
    }
}
