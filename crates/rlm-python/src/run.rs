//! [`Engine`] (a model client, one warm sandbox worker, the checked
//! settings, a tokio runtime) and [`Run`] (one question on it: trace events
//! as they happen, cancel, the answer). Every wait releases the GIL.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use rlm_engine::{
    Answer, AskedTurn, CancelToken, Conversation, Flow, PipelineRequest, Question,
    ResolvedQuestion, Source, Trace, TraceEvent, TraceRecord, ask_in_session,
};
use rlm_llm::{LlmClient, ProviderKind};
use rlm_sandbox::WorkerPool;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use crate::corpus::Corpus;
use crate::settings::{engine_settings, llm_config, sandbox_config};
use crate::{ArgumentError, RunError};

/// The longest custom system prompt (`--briefing`'s limit).
const BRIEFING_LIMIT: usize = rlm_llm::bounded::BRIEFING_LIMIT as usize;

/// The engine: a model client, a warm sandbox worker and the settings of
/// every question asked on it.
#[pyclass(frozen, module = "rlm_rs._native")]
pub struct Engine {
    runtime: Arc<Runtime>,
    engine: rlm_engine::Engine,
    flow: Flow,
    pipeline: PipelineRequest,
    root_model: String,
    sub_model: String,
    provider: String,
}

#[pymethods]
impl Engine {
    /// Checks every setting, builds the model client and starts a sandbox
    /// worker. `llm`: `backend_kwargs` as text; `settings`: budgets and
    /// citation settings as text; `sandbox`: `environment_kwargs` as text;
    /// `worker`: the command that runs a sandbox worker.
    #[new]
    #[pyo3(signature = (provider, llm, settings, sandbox, worker, config = None))]
    fn new(
        py: Python<'_>,
        provider: String,
        llm: HashMap<String, String>,
        settings: HashMap<String, String>,
        sandbox: HashMap<String, String>,
        worker: Vec<String>,
        config: Option<PathBuf>,
    ) -> PyResult<Engine> {
        let llm_config =
            llm_config(&provider, &llm, config.clone()).map_err(ArgumentError::new_err)?;
        let backend = sandbox.get("sandbox").map(String::as_str);
        let resolved = engine_settings(&settings, backend, config.as_deref())
            .map_err(ArgumentError::new_err)?;
        let mut sandbox = sandbox_config(&worker, &sandbox).map_err(ArgumentError::new_err)?;
        // The warm worker is of the back-end the questions run on.
        sandbox.backend = resolved.config.sandbox;
        let mut engine_config = resolved.config;
        let (root_model, sub_model) = (llm_config.root.model.clone(), llm_config.sub.model.clone());
        engine_config.set_models(
            &root_model,
            &sub_model,
            llm_config.provider == ProviderKind::Local,
        );
        let provider = llm_config.provider.to_string();
        let client = LlmClient::from_config(llm_config).map_err(|e| match e {
            rlm_llm::LlmError::MissingApiKey { provider, hint } => ArgumentError::new_err(format!(
                "no API key for {provider}: pass backend_kwargs={{\"api_key\": ...}} or set {hint}"
            )),
            other => ArgumentError::new_err(other.to_string()),
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("rlm-rs")
            .build()
            .map_err(|e| RunError::new_err(format!("cannot start the engine's threads: {e}")))?;
        let pool = py
            .detach(|| runtime.block_on(WorkerPool::new(sandbox, 1)))
            .map_err(|e| RunError::new_err(format!("the sandbox could not start: {e}")))?;
        Ok(Engine {
            runtime: Arc::new(runtime),
            engine: rlm_engine::Engine::new(Arc::new(client), pool, engine_config),
            flow: resolved.flow,
            pipeline: resolved.pipeline,
            root_model,
            sub_model,
            provider,
        })
    }

    /// The root model's name.
    #[getter]
    fn root_model(&self) -> &str {
        &self.root_model
    }

    /// The sub-calls' model name.
    #[getter]
    fn sub_model(&self) -> &str {
        &self.sub_model
    }

    /// The provider (`openai`, `azure`, `anthropic`, `local`).
    #[getter]
    fn provider(&self) -> &str {
        &self.provider
    }

    /// The engine settings in force, as JSON (budgets, flows, citations).
    fn settings_json(&self) -> String {
        let c = self.engine.config();
        json!({
            "flow": self.flow.as_str(),
            "max_depth": c.budget.max_depth,
            "max_iterations": c.budget.max_iterations,
            "max_llm_calls": c.budget.max_llm_calls,
            "max_tokens": c.budget.max_total_tokens,
            "max_errors": c.budget.max_consecutive_errors,
            "max_cost_usd": c.budget.max_cost_usd,
            "max_wall_secs": c.budget.wall_clock.as_secs_f64(),
            "citations": c.citation_policy,
            "verify_citations": c.verify_citations,
            "context_shape": c.context_shape,
            "turn_format": c.turn_format,
            "sandbox": c.sandbox,
        })
        .to_string()
    }

    /// Starts `question` over `corpus`; returns at once with the [`Run`].
    /// `briefing`: domain instructions added to the system prompt;
    /// `trace_path`: also write every event as JSONL there.
    #[pyo3(signature = (corpus, question, briefing = None, trace_path = None, output_schema = None))]
    fn start(
        &self,
        corpus: &Corpus,
        question: String,
        briefing: Option<String>,
        trace_path: Option<PathBuf>,
        output_schema: Option<String>,
    ) -> PyResult<Run> {
        let answer_schema = output_schema
            .as_deref()
            .map(crate::parse_schema)
            .transpose()
            .map_err(|e| ArgumentError::new_err(format!("output_schema: {e}")))?;
        if question.trim().is_empty() {
            return Err(ArgumentError::new_err(
                "the question is empty: pass root_prompt=\"...\" (or, with store=, the question as prompt)",
            ));
        }
        if briefing.as_ref().is_some_and(|b| b.len() > BRIEFING_LIMIT) {
            return Err(ArgumentError::new_err(
                "custom_system_prompt is longer than 1 MiB: shorten it",
            ));
        }
        let trace = match &trace_path {
            Some(p) => Trace::to_file(p).map_err(|e| {
                ArgumentError::new_err(format!("trace={}: cannot write it: {e}", p.display()))
            })?,
            None => Trace::new(),
        };
        let trace = Arc::new(trace.with_history());
        let cancel = CancelToken::new();
        let question = Question {
            text: question,
            settings: ResolvedQuestion {
                config: self.engine.config().clone(),
                flow: self.flow,
                pipeline: self.pipeline.clone(),
            },
            embedder: self.pipeline.embedder.clone(),
            briefing,
            trace: trace.clone(),
            cancel: cancel.clone(),
            conversation: Conversation::None,
            answer_schema,
        };
        let shared = Arc::new(Shared {
            trace,
            cancel,
            outcome: Mutex::new(None),
            cursor: Mutex::new(0),
            trace_path,
        });
        let engine = self.engine.clone();
        let corpus = corpus.inner.clone();
        let task = shared.clone();
        let (root, sub) = (self.root_model.clone(), self.sub_model.clone());
        self.runtime.spawn(async move {
            let asked = ask_in_session(&engine, corpus.clone(), question).await;
            let outcome = asked
                .map(|AskedTurn { answer: a, .. }| {
                    let mut sources = a.sources();
                    corpus.fill_source_lines(&mut sources);
                    let mut related = a.related_sources();
                    corpus.fill_source_lines(&mut related);
                    result_json(&a, (&sources, &related), &task.trace, &root, &sub)
                })
                .map_err(|e| e.to_string());
            *lock(&task.outcome) = Some(outcome);
            // Wakes `poll` and `wait`: the outcome is there.
            task.trace.wake();
        });
        Ok(Run {
            runtime: self.runtime.clone(),
            shared,
        })
    }
}

/// What the engine's task and the Python side share about one run.
struct Shared {
    trace: Arc<Trace>,
    cancel: CancelToken,
    /// The answer as JSON, or why there is none; set once, when the run ends.
    outcome: Mutex<Option<Result<String, String>>>,
    /// Events already handed to Python.
    cursor: Mutex<usize>,
    trace_path: Option<PathBuf>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One question running on an [`Engine`]. Dropping it cancels the run.
#[pyclass(frozen, module = "rlm_rs._native")]
pub struct Run {
    runtime: Arc<Runtime>,
    shared: Arc<Shared>,
}

impl Run {
    /// Waits (without the GIL) up to `timeout` for `ready` to hold, woken
    /// by every event and by the end of the run.
    fn wait_for<T: Send>(
        &self,
        py: Python<'_>,
        timeout: f64,
        ready: impl Fn(&Shared) -> Option<T> + Send + Sync,
    ) -> PyResult<Option<T>> {
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(ArgumentError::new_err(format!(
                "timeout={timeout} is not a number of seconds from 0 up"
            )));
        }
        let deadline = Instant::now() + Duration::from_secs_f64(timeout.min(86_400.0));
        let shared = &self.shared;
        Ok(py.detach(|| {
            self.runtime.block_on(async {
                loop {
                    // Registered before the check, so no event slips between.
                    let changed = shared.trace.changed();
                    tokio::pin!(changed);
                    changed.as_mut().enable();
                    if let Some(v) = ready(shared) {
                        return Some(v);
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || tokio::time::timeout(left, changed).await.is_err() {
                        return None;
                    }
                }
            })
        }))
    }
}

#[pymethods]
impl Run {
    /// The events not handed out yet, as JSON lines, waiting up to `timeout`
    /// seconds for one; and whether the run has ended with every event
    /// handed out.
    fn poll(&self, py: Python<'_>, timeout: f64) -> PyResult<(Vec<String>, bool)> {
        let got = self.wait_for(py, timeout, |s| {
            // The end first: every event of an ended run is already recorded.
            let ended = lock(&s.outcome).is_some();
            let mut cursor = lock(&s.cursor);
            let records = s.trace.records_from(*cursor);
            if !records.is_empty() {
                *cursor += records.len();
                return Some((records, false));
            }
            ended.then(|| (Vec::new(), true))
        })?;
        let Some((records, ended)) = got else {
            return Ok((Vec::new(), false));
        };
        let lines = records.iter().map(record_json).collect();
        Ok((lines, ended))
    }

    /// Waits up to `timeout` seconds for the run to end; true when it has.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        Ok(self
            .wait_for(py, timeout, |s| lock(&s.outcome).is_some().then_some(()))?
            .is_some())
    }

    /// True once the run has ended.
    #[getter]
    fn done(&self) -> bool {
        lock(&self.shared.outcome).is_some()
    }

    /// Stops the run: its model calls are abandoned, its cells end, and the
    /// answer is what was gathered, marked partial.
    fn cancel(&self) {
        self.shared.cancel.cancel();
    }

    /// True after [`Run::cancel`].
    #[getter]
    fn cancelled(&self) -> bool {
        self.shared.cancel.is_cancelled()
    }

    /// The answer as JSON once the run has ended; `RunError` when it could
    /// not be attempted (the sandbox did not start, the model never answered).
    fn result(&self) -> PyResult<String> {
        let outcome = lock(&self.shared.outcome).clone();
        match outcome {
            Some(Ok(json)) => {
                if let Some(e) = self.shared.trace.write_error() {
                    let path = self
                        .shared
                        .trace_path
                        .as_ref()
                        .map(|p| p.display().to_string());
                    return Err(RunError::new_err(format!(
                        "the trace could not be written to {}: {e} (it is incomplete)",
                        path.unwrap_or_default()
                    )));
                }
                Ok(json)
            }
            Some(Err(e)) => Err(RunError::new_err(e)),
            None => Err(RunError::new_err(
                "the run has not ended: wait() for it or iterate its events first",
            )),
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Nobody can read the answer any more: stop spending on it.
        if lock(&self.shared.outcome).is_none() {
            self.shared.cancel.cancel();
        }
    }
}

fn record_json(r: &TraceRecord) -> String {
    serde_json::to_string(r).unwrap_or_else(|e| {
        json!({"seq": r.seq, "t_ms": r.t_ms, "type": "error", "message": format!("event not encodable: {e}")})
            .to_string()
    })
}

/// The answer with what the Python side shows of it: the sources of its
/// supported claims and apart its related passages (with their lines), and
/// the usage of each model (from the run's trace).
fn result_json(
    answer: &Answer,
    (sources, related): (&[Source], &[Source]),
    trace: &Trace,
    root_model: &str,
    sub_model: &str,
) -> String {
    let mut by_model: BTreeMap<String, (u64, u64, u64, Option<f64>)> = BTreeMap::new();
    for r in trace.records_from(0) {
        if let TraceEvent::LlmResponse {
            model,
            input_tokens,
            output_tokens,
            cost_usd,
            ..
        } = &r.event
        {
            let e = by_model
                .entry(model.clone())
                .or_insert((0, 0, 0, Some(0.0)));
            e.0 += 1;
            e.1 += input_tokens;
            e.2 += output_tokens;
            e.3 = e.3.zip(*cost_usd).map(|(a, b)| a + b);
        }
    }
    let models: serde_json::Map<String, Value> = by_model
        .into_iter()
        .map(|(m, (calls, input, output, cost))| {
            (
                m,
                json!({
                    "total_calls": calls,
                    "total_input_tokens": input,
                    "total_output_tokens": output,
                    "total_cost": cost,
                }),
            )
        })
        .collect();
    json!({
        "answer": answer,
        "sources": sources,
        "related_sources": related,
        "model_usage": models,
        "root_model": root_model,
        "sub_model": sub_model,
    })
    .to_string()
}
