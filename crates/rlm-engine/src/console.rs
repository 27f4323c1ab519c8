//! [`ReplConsole`]: the model's REPL, for a person (`rlm repl`). It starts
//! the sandbox exactly as the `repl` flow starts the root agent's (the same
//! inputs, the same host functions from the one table, answered by the same
//! host), so what works here works for the model. With a model configured,
//! `llm_query`, `llm_query_batched` and `rlm_query` call it for real, inside
//! one budget; without one they raise an error that says how to configure
//! one.

use std::sync::Arc;

use rlm_llm::{BoxFuture, ChatModel, ChatRequest, ChatResponse, LlmError};
use rlm_sandbox::{CellResult, Interpreter, SandboxError, WorkerPool};

use crate::answer::EngineError;
use crate::budget::UsageReport;
use crate::config::EngineConfig;
use crate::corpus::Corpus;
use crate::engine::Engine;
use crate::flows::repl::agent::run_agent;
use crate::flows::repl::host::AgentHost;
use crate::flows::repl::inspection::interpreter_spec;
use crate::parse::FinalDirective;
use crate::request::AskRequest;
use crate::run::{ROOT_AGENT, Run, RunParts};
use crate::session::Finding;
use crate::text::value_to_text;
use crate::trace::Trace;

/// The model's REPL over a corpus, driven cell by cell by a person or a program.
pub struct ReplConsole {
    run: Arc<Run>,
    host: Arc<AgentHost>,
    interp: Interpreter,
}

impl std::fmt::Debug for ReplConsole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplConsole")
            .field("documents", &self.run.corpus.documents().len())
            .field("model", &self.run.no_model.is_none())
            .finish()
    }
}

/// An answer committed in the REPL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The variable `FINAL_VAR` named; `None` for `FINAL`.
    pub variable: Option<String>,
    /// The answer text, or why `FINAL_VAR` could not read its variable
    /// ([`ConsoleError::UndefinedVariable`]).
    pub text: Result<String, ConsoleError>,
}

/// What went wrong in the console: a cell the sandbox could not run, or a
/// `FINAL_VAR` naming no variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsoleError {
    /// The sandbox died running the cell; a fresh one was started (earlier
    /// variables are gone).
    #[error("{0}")]
    SandboxDied(SandboxError),
    /// The sandbox died running the cell and no new one could start.
    #[error("{died}; and no new sandbox could start: {restart}")]
    NoNewSandbox {
        /// Why the sandbox died.
        died: SandboxError,
        /// Why the new one could not start.
        restart: SandboxError,
    },
    /// `FINAL_VAR(name)` names no variable.
    #[error("FINAL_VAR({0}): no variable named {0:?} is defined")]
    UndefinedVariable(String),
}

/// Stands in for the model when none is configured: the host functions that
/// need one refuse before calling it, so this only backs that promise.
struct NoModel(String);

impl ChatModel for NoModel {
    fn chat(&self, _request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let reason = self.0.clone();
        Box::pin(async move { Err(LlmError::Config(reason)) })
    }
}

impl ReplConsole {
    /// A REPL whose model functions use `engine`'s model and budgets; events
    /// go to `trace`.
    pub async fn with_model(
        engine: &Engine,
        corpus: Arc<Corpus>,
        trace: Arc<Trace>,
    ) -> Result<Self, EngineError> {
        Self::start(engine.run_parts(None), corpus, trace).await
    }

    /// A REPL without a model: `llm_query`, `rlm_query` and the rest raise
    /// "no model configured" followed by `reason` (which should say how to
    /// configure one).
    pub async fn without_model(
        pool: WorkerPool,
        config: EngineConfig,
        corpus: Arc<Corpus>,
        reason: String,
    ) -> Result<Self, EngineError> {
        let parts = RunParts {
            llm: Arc::new(NoModel(reason.clone())),
            pool,
            config,
            no_model: Some(reason),
            verdicts: Default::default(),
        };
        Self::start(parts, corpus, Arc::new(Trace::new())).await
    }

    async fn start(
        parts: RunParts,
        corpus: Arc<Corpus>,
        trace: Arc<Trace>,
    ) -> Result<Self, EngineError> {
        if corpus.documents().is_empty() {
            return Err(EngineError::EmptyCorpus);
        }
        let mut req = AskRequest::new("(interactive REPL)");
        req.trace = trace;
        let run = Run::new(parts, corpus, &req);
        let host = Arc::new(AgentHost::new(run.clone(), ROOT_AGENT.into(), 0, run_agent));
        let interp = Self::interpreter(&run)
            .await
            .map_err(EngineError::Sandbox)?;
        Ok(ReplConsole { run, host, interp })
    }

    async fn interpreter(run: &Run) -> Result<Interpreter, SandboxError> {
        let spec = interpreter_spec(run, "", None);
        run.pool.start_interpreter(&spec).await
    }

    /// True when model calls are possible.
    pub fn has_model(&self) -> bool {
        self.run.no_model.is_none()
    }

    /// Runs one cell. A Python exception is `Ok` with the error in the
    /// result; `Err` means the sandbox died (a fresh one has been started:
    /// earlier variables are gone, [`ConsoleError::SandboxDied`]) and says why.
    /// Notes the host functions left (a `grep()` cut at its limit, with the
    /// true total) end the printed output, as the model sees them.
    pub async fn run_cell(&mut self, code: &str) -> Result<CellResult, ConsoleError> {
        match self.interp.run_cell(code, &self.host).await {
            Ok(mut r) => {
                for note in self.host.take_notes() {
                    r.stdout.push_str(&note);
                    r.stdout.push('\n');
                }
                Ok(r)
            }
            Err(died) => match Self::interpreter(&self.run).await {
                Ok(interp) => {
                    self.interp = interp;
                    Err(ConsoleError::SandboxDied(died))
                }
                Err(restart) => Err(ConsoleError::NoNewSandbox { died, restart }),
            },
        }
    }

    /// The answer the last cell committed with `FINAL` or `FINAL_VAR`, if any.
    pub async fn take_final(&mut self) -> Option<Committed> {
        Some(match self.host.take_final()? {
            FinalDirective::Answer(a) => Committed {
                variable: None,
                text: Ok(a),
            },
            FinalDirective::Var(name) => {
                let text = match self.interp.get_var(&name).await {
                    Ok(Some(v)) => Ok(value_to_text(&v)),
                    _ => Err(ConsoleError::UndefinedVariable(name.clone())),
                };
                Committed {
                    variable: Some(name),
                    text,
                }
            }
        })
    }

    /// The findings recorded with `add_finding` so far.
    pub fn findings(&self) -> Vec<Finding> {
        self.run
            .findings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Model calls, tokens and cost so far.
    pub fn usage(&self) -> UsageReport {
        self.run.budget.report()
    }
}
