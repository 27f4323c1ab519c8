//! The errors a model call can end in. Each message says what went wrong and
//! what to do about it, in one line.

use std::time::Duration;

use thiserror::Error;

/// Everything that can go wrong in this crate.
#[derive(Debug, Error)]
pub enum LlmError {
    /// No API key in flags, environment or config file.
    #[error(
        "no API key for provider {provider}: set {hint} (local servers accept any value, e.g. RLM_API_KEY=x)"
    )]
    MissingApiKey {
        /// Provider name.
        provider: String,
        /// The variables that were looked at.
        hint: String,
    },

    /// The configuration is invalid (bad value, bad file).
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The base URL could not be reached (DNS, refused, reset).
    #[error("cannot reach {url}: {detail}; check RLM_BASE_URL and that the server is running")]
    Unreachable {
        /// The URL that was requested.
        url: String,
        /// The transport's explanation.
        detail: String,
    },

    /// The connection closed before a response arrived.
    #[error("connection to {url} dropped before a response: {detail}")]
    ConnectionDropped {
        /// The URL that was requested.
        url: String,
        /// The transport's explanation.
        detail: String,
    },

    /// An attempt took longer than the per-request timeout.
    #[error("no answer from {url} within {}s (RLM_TIMEOUT)", .after.as_secs_f64())]
    Timeout {
        /// The URL that was requested.
        url: String,
        /// The timeout that expired.
        after: Duration,
    },

    /// The provider rejected the credentials (401/403).
    #[error("{provider} rejected the API key (HTTP {status}): {message}; check RLM_API_KEY")]
    Unauthorized {
        /// Provider name.
        provider: String,
        /// 401 or 403.
        status: u16,
        /// The provider's explanation.
        message: String,
    },

    /// The provider does not know the model (or Azure deployment).
    #[error(
        "{provider} does not know model '{model}': {message}; check RLM_PRIMARY_MODEL / RLM_SUB_MODEL (`rlm llm check` lists what the endpoint serves)"
    )]
    UnknownModel {
        /// Provider name.
        provider: String,
        /// The model that was asked for.
        model: String,
        /// The provider's explanation.
        message: String,
    },

    /// The URL answered 404 for something other than a model.
    #[error(
        "{url} answered 404 Not Found: {message}; check RLM_BASE_URL (OpenAI-compatible servers usually end in /v1)"
    )]
    NotFound {
        /// The URL that was requested.
        url: String,
        /// The provider's explanation.
        message: String,
    },

    /// The provider refused the request as malformed (400, 422, ...).
    #[error("{provider} refused the request (HTTP {status}): {message}")]
    BadRequest {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's explanation.
        message: String,
    },

    /// 429: too many requests.
    #[error("{provider} is rate limiting (HTTP 429{}): {message}", .retry_after.map(|d| format!(", retry after {}s", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        /// Provider name.
        provider: String,
        /// What the provider asked us to wait, when it said.
        retry_after: Option<Duration>,
        /// The provider's explanation.
        message: String,
    },

    /// 5xx: the provider failed.
    #[error("{provider} failed (HTTP {status}): {message}")]
    Server {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// What the provider asked us to wait, when it said.
        retry_after: Option<Duration>,
        /// The provider's explanation.
        message: String,
    },

    /// The body could not be parsed as the provider's response format.
    #[error("malformed response from {provider}: {detail}")]
    MalformedResponse {
        /// Provider name.
        provider: String,
        /// What was wrong, with the start of the body.
        detail: String,
    },

    /// The connection ended before the whole body arrived.
    #[error("truncated response from {provider}: {detail}")]
    TruncatedResponse {
        /// Provider name.
        provider: String,
        /// The transport's explanation.
        detail: String,
    },

    /// A well-formed response that carries no answer.
    #[error("{provider} returned a response with no choices (nothing generated)")]
    NoChoices {
        /// Provider name.
        provider: String,
    },

    /// The prompt does not fit the model's context window.
    #[error("prompt of ~{estimated_tokens} tokens exceeds the {window}-token context window of {model} by {} tokens; shorten the prompt or raise [llm.context_windows] in rlm.toml", .estimated_tokens - .window)]
    ContextWindowExceeded {
        /// Model name.
        model: String,
        /// Estimated prompt tokens.
        estimated_tokens: u64,
        /// The model's configured window.
        window: u64,
    },

    /// Retries ran out; `last` is the final attempt's error.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: Box<LlmError>,
    },

    /// Replay found no recorded response for the request.
    #[error("replay miss in {cassette}: no recorded response for this request; {detail}")]
    ReplayMiss {
        /// The cassette path.
        cassette: String,
        /// The first difference from the closest recorded request.
        detail: String,
    },

    /// The record/replay file could not be read or written.
    #[error("cassette {path}: {detail}")]
    Cassette {
        /// The cassette path.
        path: String,
        /// What went wrong.
        detail: String,
    },

    /// The provider cannot constrain the reply to the request's schema (the
    /// embedded model's grammar cannot express it). [`crate::LlmClient`]
    /// then sends the request without the schema.
    #[error("{provider} cannot constrain the reply to the schema: {reason}")]
    SchemaUnsupported {
        /// Provider name.
        provider: String,
        /// What cannot be expressed.
        reason: String,
    },

    /// The provider cannot do this (e.g. Azure listing models).
    #[error("{0}")]
    Unsupported(String),
}

impl LlmError {
    /// True for errors worth another attempt: 429, 5xx, connection errors,
    /// truncated bodies and timeouts.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::Unreachable { .. }
                | LlmError::ConnectionDropped { .. }
                | LlmError::Timeout { .. }
                | LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::TruncatedResponse { .. }
        )
    }

    /// True when this answers a request with a reply schema by refusing
    /// the schema (or may have: a 400 for another reason looks the same):
    /// HTTP 400, 404, 415, 422, 501 and the like, or a schema the provider
    /// cannot express. Not authentication, rate limits, server failures or
    /// timeouts. [`crate::LlmClient`] then sends the request without it.
    pub fn is_schema_refusal(&self) -> bool {
        matches!(
            self.root(),
            LlmError::BadRequest { .. }
                | LlmError::NotFound { .. }
                | LlmError::UnknownModel { .. }
                | LlmError::SchemaUnsupported { .. }
        )
    }

    /// The wait the provider asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } | LlmError::Server { retry_after, .. } => {
                *retry_after
            }
            LlmError::RetriesExhausted { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// The innermost error: the last attempt's when retries ran out.
    pub fn root(&self) -> &LlmError {
        match self {
            LlmError::RetriesExhausted { last, .. } => last.root(),
            other => other,
        }
    }
}
