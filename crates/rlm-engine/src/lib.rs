//! `rlm-engine`: the Recursive Language Model loop of `rlm`.
//!
//! The corpus is never pasted into a prompt: it is loaded as `context` inside a
//! sandboxed Python REPL, the model writes code to inspect it, calls sub-models
//! on the pieces it picks, sees what its code printed, and repeats until it
//! commits an answer with `FINAL`. This crate holds the loop ([`Engine`]), the
//! budgets shared by the whole call tree ([`budget`]), the prompts
//! ([`prompts`]), citation verification ([`citations`]), sessions
//! ([`session`]) and the trace ([`trace`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use rlm_engine::{AskRequest, Corpus, Engine, EngineConfig};
//!
//! let store = Arc::new(rlm_corpus::Store::open(std::path::Path::new(".rlm"))?);
//! let corpus = Arc::new(Corpus::load(store)?);
//! let llm = rlm_llm::LlmClient::from_config(rlm_llm::LlmConfig::load(&Default::default())?)?;
//! let sandbox = rlm_sandbox::SandboxConfig::new(rlm_sandbox::WorkerCommand::locate()?);
//! let pool = rlm_sandbox::WorkerPool::new(sandbox, 2).await?;
//! let engine = Engine::new(Arc::new(llm), pool, EngineConfig::from_env().map_err(anyhow::Error::msg)?);
//! let answer = engine.ask(corpus, AskRequest::new("What is the notice period?")).await?;
//! println!("{} (partial: {})", answer.answer, answer.partial);
//! # Ok(()) }
//! ```

pub mod budget;
pub mod citations;
pub mod corpus;
mod engine;
pub mod parse;
pub mod pipeline;
pub mod prompts;
pub mod session;
pub mod settings;
pub mod trace;

pub use budget::{Budget, BudgetConfig, Exhausted, UsageReport};
pub use citations::{Citation, CitationPolicy, VerificationReport};
pub use corpus::{ContextShape, Corpus};
pub use engine::{
    Answer, AskRequest, CancelToken, Engine, EngineConfig, EngineError, Flow, TraceInfo,
};
pub use pipeline::{FileSummary, FlowReport, FlowsConfig, Inspector, PipelineRequest};
pub use session::{Finding, SessionState, SessionStore, Turn};
pub use settings::SettingsFile;
pub use trace::{Trace, TraceEvent, TraceRecord};
