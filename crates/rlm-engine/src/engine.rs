//! [`Engine`]: the library's entry point. It holds a model client, a pool of
//! sandbox workers and the settings, and answers one question at a time with
//! [`Engine::ask`]: the request is checked, a run is started in the harness
//! ([`crate::run`]), and the flow the request names answers it
//! ([`crate::flows`]).

use std::sync::Arc;

use rlm_llm::{ChatModel, ChatRequest, Message, ModelRole};
use rlm_sandbox::WorkerPool;

use crate::answer::{Answer, EngineError};
use crate::config::EngineConfig;
use crate::corpus::Corpus;
use crate::flows;
use crate::grounding::VerdictCache;
use crate::request::AskRequest;
use crate::run::{Run, RunParts};

/// What [`Engine::warm_up`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmUp {
    /// The tokens of the warm-up request's prompt.
    pub prompt_tokens: u64,
    /// Of those, the tokens the model already kept (restored, not decoded).
    pub kept_tokens: u64,
    /// How long the request took.
    pub elapsed: std::time::Duration,
}

/// Decodes the root's first system message under the settings `config`
/// ahead of the first question: a model that keeps prompt prefixes (the
/// embedded model's prefix state on disk) then starts every question under
/// these settings warm, over any store. One request of one output token;
/// what it cost says whether the prefix was already kept.
pub async fn warm_up(llm: &dyn ChatModel, config: &EngineConfig) -> Result<WarmUp, EngineError> {
    let instructions = flows::repl::agent::root_instructions(config);
    let mut request = ChatRequest::new(
        ModelRole::Root,
        vec![Message::system(instructions), Message::user(".")],
    );
    request.max_output_tokens = Some(1);
    let started = std::time::Instant::now();
    let reply = llm
        .chat(request)
        .await
        .map_err(|e| EngineError::ModelUnavailable(e.to_string()))?;
    Ok(WarmUp {
        prompt_tokens: reply.usage.input_tokens,
        kept_tokens: reply.usage.cached_tokens.unwrap_or(0),
        elapsed: started.elapsed(),
    })
}

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

    /// [`warm_up`] with this engine's model and settings.
    pub async fn warm_up(&self) -> Result<WarmUp, EngineError> {
        warm_up(self.llm.as_ref(), &self.config).await
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
