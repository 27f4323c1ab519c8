//! The model layer of `rlm`: chat models behind one trait, made dependable
//! and accounted for.
//!
//! - [`LlmConfig::load`] reads flags, environment and `rlm.toml`.
//! - [`LlmClient::from_config`] builds a client for OpenAI-compatible servers,
//!   Azure OpenAI or Anthropic, optionally recording to or replaying from a
//!   JSONL cassette.
//! - [`LlmClient::chat`] sends a [`ChatRequest`] for the root or sub role with
//!   a context-window pre-check, a shared concurrency limit, a per-attempt
//!   timeout, and retries with backoff; it returns the text and its [`Usage`]
//!   (tokens, estimated or reported, latency, retries, cost).
//! - [`UsageTotals`] sums usage per model and per depth.
//! - [`schema`] checks, validates and turns into grammars the JSON Schemas
//!   of structured replies ([`ChatRequest::with_schema`]).
//! - With the `testing` feature, [`testing::ScriptedServer`] is a real HTTP
//!   server that answers from a script, for tests of anything built on this.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rlm_llm::LlmError> {
//! use rlm_llm::{ChatRequest, ConfigOverrides, LlmClient, LlmConfig, Message, ModelRole};
//!
//! let client = LlmClient::from_config(LlmConfig::load(&ConfigOverrides::default())?)?;
//! let answer = client
//!     .chat(ChatRequest::new(ModelRole::Sub, vec![Message::user("Summarize: ...")]).at_depth(1))
//!     .await?;
//! println!("{} ({} tokens in)", answer.text, answer.usage.input_tokens);
//! println!("so far: {:?}", client.usage().total.cost_usd());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod bounded;
mod cassette;
mod client;
mod config;
mod error;
mod pricing;
pub mod provider;
pub mod schema;
mod stream;
pub mod tokens;
mod types;
mod usage;

#[cfg(feature = "testing")]
pub mod testing;

pub use cassette::{
    CassetteEntry, RecordedRefusal, RecordingProvider, ReplayProvider, request_hash,
};
pub use client::{ChatModel, LlmClient};
pub use config::{
    ApiKey, ConfigOverrides, DEFAULT_ANTHROPIC_VERSION, DEFAULT_AZURE_API_VERSION,
    DEFAULT_CONFIG_FILE, DEFAULT_MAX_CONCURRENT, DEFAULT_TIMEOUT, LlmConfig, MAX_CONCURRENT_LIMIT,
    ProviderKind, RetryPolicy, RoleSettings,
};
pub use error::LlmError;
pub use pricing::{ContextWindows, Price, PriceTable};
pub use provider::{BoxFuture, Provider};
pub use stream::{Retry, TokenDelta, TokenSink};
pub use types::{
    ChatRequest, ChatResponse, DraftTokens, FinishReason, Message, ModelReply, ModelRequest,
    ModelRole, ReplySchema, ReportedUsage, Role, SchemaUse, Usage,
};
pub use usage::{UsageSum, UsageTotals};
