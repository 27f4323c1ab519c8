//! `rlm-engine`: the Recursive Language Model engine of `rlm`.
//!
//! The corpus is never pasted into a prompt: it is loaded as `context` inside a
//! sandboxed Python REPL, the model writes code to inspect it, calls sub-models
//! on the pieces it picks, sees what its code printed, and repeats until it
//! commits an answer with `FINAL`. Beside that loop (the `repl` flow) the
//! engine has a retrieval pipeline with per-file inspectors (`pipeline`),
//! plain retrieval (`rag`) and a triage router (`auto`).
//!
//! The modules and one question's path through them are described in the
//! repository's `docs/architecture.md`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use rlm_engine::{AskRequest, Corpus, Engine, EngineConfig};
//! use rlm_engine::values::FromSettings;
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

#![warn(missing_docs)]

mod answer;
pub mod ask;
mod blocking;
pub mod budget;
mod cancel;
pub mod citations;
mod claims;
pub mod config;
pub mod console;
pub mod corpus;
mod engine;
mod flows;
pub mod grounding;
pub mod host;
mod notices;
pub mod parse;
pub mod prompts;
mod replies;
mod request;
mod retrieval;
mod run;
pub mod scan;
pub mod session;
pub mod settings;
mod text;
pub mod trace;
mod translate;
mod typed_answer;
pub mod values;

pub use answer::{
    Answer, ClaimSummary, EngineError, ExpansionReport, FileSummary, FlowReport, Intent,
    RetrievalReport, RouteDecision, Source, TraceInfo,
};
pub use ask::{AskError, AskedTurn, Conversation, Question, SessionTurn, ask_in_session};
pub use blocking::off_runtime;
pub use budget::{Budget, BudgetConfig, Exhausted, UsageReport};
pub use cancel::CancelToken;
pub use citations::{Citation, CitationPolicy, VerificationReport};
pub use config::{EngineConfig, Flow, FlowsConfig, Inspector, RecencyMode, TurnFormat, VerifyMode};
pub use corpus::{ContextShape, Corpus};
pub use engine::{Engine, WarmUp, warm_up};
pub use request::{AskRequest, PipelineRequest, QuestionSettings, ResolvedQuestion, Surface};
/// Checks a schema asked for a typed answer: JSON Schema of the subset
/// every provider can be constrained to (`--schema`, `response_schema`).
pub use rlm_llm::schema::check as check_answer_schema;
pub use session::{
    Finding, FolderSessions, SessionBackend, SessionError, SessionState, SessionStore, Turn,
};
pub use settings::{EngineSettings, SettingsFile};
pub use trace::{Trace, TraceEvent, TraceRecord};
pub use typed_answer::{FieldCitations, TypedAnswer};
pub use values::ConfigError;
