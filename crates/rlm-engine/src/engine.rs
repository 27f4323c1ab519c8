//! [`Engine`]: the library's entry point. It holds a model client, a pool of
//! sandbox workers and the settings, and answers one question at a time with
//! [`Engine::ask`]: the request is checked, a run is started in the harness
//! ([`crate::run`]), and the flow the request names answers it
//! ([`crate::flows`]).

use std::sync::Arc;

use rlm_llm::ChatModel;
use rlm_sandbox::WorkerPool;

use crate::answer::{Answer, EngineError};
use crate::config::EngineConfig;
use crate::corpus::Corpus;
use crate::flows;
use crate::grounding::VerdictCache;
use crate::request::AskRequest;
use crate::run::{Run, RunParts};

/// The engine: a model client, a sandbox worker pool and settings.
#[derive(Clone)]
pub struct Engine {
    llm: Arc<dyn ChatModel>,
    pool: WorkerPool,
    config: EngineConfig,
    /// The entailment judge's verdicts, shared by every run (and by the
    /// engines [`Engine::with_config`] makes).
    verdicts: Arc<VerdictCache>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .finish()
    }
}

impl Engine {
    /// An engine over a model client and a sandbox pool.
    pub fn new(llm: Arc<dyn ChatModel>, pool: WorkerPool, config: EngineConfig) -> Self {
        Engine {
            llm,
            pool,
            config,
            verdicts: Arc::new(VerdictCache::default()),
        }
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
            verdicts: self.verdicts.clone(),
        }
    }

    /// Answers a question over `corpus`. Errors only when no answer can be
    /// attempted at all (empty question or corpus, sandbox unavailable, a
    /// model that never answered); budgets, caps, model failures after some
    /// progress and cancellation give a partial answer.
    pub async fn ask(&self, corpus: Arc<Corpus>, req: AskRequest) -> Result<Answer, EngineError> {
        if req.question.trim().is_empty() {
            return Err(EngineError::EmptyQuestion);
        }
        if corpus.documents().is_empty() {
            return Err(EngineError::EmptyCorpus);
        }
        if let Some(schema) = &req.answer_schema {
            rlm_llm::schema::check(schema).map_err(|e| EngineError::AnswerSchema(e.to_string()))?;
        }
        let run = Run::new(self.run_parts(None), corpus, &req);
        flows::answer(run, req).await
    }

    /// What a run borrows from the engine; `no_model` says why model calls
    /// are impossible, when they are.
    pub(crate) fn run_parts(&self, no_model: Option<String>) -> RunParts {
        RunParts {
            llm: self.llm.clone(),
            pool: self.pool.clone(),
            config: self.config.clone(),
            no_model,
            verdicts: self.verdicts.clone(),
        }
    }
}
