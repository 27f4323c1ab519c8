//! [`LlmClient`]: the one object the engine talks to. It resolves roles to
//! models, checks the context window, bounds concurrency, retries, times out,
//! and accounts for every call.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::cassette::{RecordingProvider, ReplayProvider};
use crate::config::{LlmConfig, RetryPolicy};
use crate::error::LlmError;
use crate::provider::{BoxFuture, Provider, http_provider};
use crate::tokens;
use crate::types::{
    ChatRequest, ChatResponse, ModelReply, ModelRequest, ReportedUsage, SchemaUse, Usage,
};
use crate::usage::UsageTotals;

/// Anything that answers chat requests. [`LlmClient`] is the real one; the
/// engine takes `Arc<dyn ChatModel>` so callers may wrap or replace it.
pub trait ChatModel: Send + Sync {
    /// Answers one request. Dropping the future cancels the call.
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>>;

    /// The key a reply to `request` may be kept under for reuse, when the
    /// reply is reproducible (temperature 0, or a provider whose sampling
    /// has a fixed seed); `None` when it is not, or the model cannot tell.
    /// The key covers everything that decides the reply: the provider and
    /// its endpoint, the model, the whole prompt, the sampling parameters,
    /// the stop sequences and the reply schema.
    fn reply_key(&self, _request: &ChatRequest) -> Option<String> {
        None
    }
}

/// A model client. Cheap to clone; clones share the connection pool, the
/// concurrency limit and the usage totals.
#[derive(Clone)]
pub struct LlmClient {
    inner: Arc<Inner>,
}

struct Inner {
    config: LlmConfig,
    provider: Arc<dyn Provider>,
    slots: Semaphore,
    totals: Mutex<UsageTotals>,
    /// Models of the endpoint that refused a reply schema, with what the
    /// endpoint said: later requests go without the schema.
    schema_refusals: Mutex<HashMap<String, String>>,
}

/// Longest refusal reason kept in [`SchemaUse::Refused`].
const REFUSAL_REASON_CHARS: usize = 200;

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("provider", &self.inner.provider.name())
            .field("endpoint", &self.inner.provider.endpoint())
            .field("root_model", &self.inner.config.root.model)
            .field("sub_model", &self.inner.config.sub.model)
            .finish()
    }
}

impl LlmClient {
    /// The client `config` describes: its HTTP provider, or the replay
    /// cassette (`config.replay`, no key needed), wrapped in a recorder when
    /// `config.record` is set. Fails on a missing API key or an unreadable
    /// cassette.
    pub fn from_config(config: LlmConfig) -> Result<Self, LlmError> {
        let mut provider: Arc<dyn Provider> = match &config.replay {
            Some(path) => Arc::new(ReplayProvider::open(path)?),
            None => Arc::from(http_provider(&config)?),
        };
        if let Some(path) = &config.record {
            provider = Arc::new(RecordingProvider::create(path, provider)?);
        }
        Ok(Self::with_provider(config, provider))
    }

    /// A client over any provider (tests, custom transports).
    pub fn with_provider(config: LlmConfig, provider: Arc<dyn Provider>) -> Self {
        LlmClient {
            inner: Arc::new(Inner {
                slots: Semaphore::new(config.max_concurrent),
                config,
                provider,
                totals: Mutex::new(UsageTotals::default()),
                schema_refusals: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &LlmConfig {
        &self.inner.config
    }

    /// The provider in use.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.inner.provider
    }

    /// The usage of every call made through this client (and its clones).
    pub fn usage(&self) -> UsageTotals {
        self.inner
            .totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Applies the role's model and sampling defaults.
    pub fn resolve(&self, request: &ChatRequest) -> ModelRequest {
        let role = self.inner.config.role(request.role);
        ModelRequest {
            model: request.model.clone().unwrap_or_else(|| role.model.clone()),
            messages: request.messages.clone(),
            temperature: request.temperature.or(role.temperature),
            max_output_tokens: request.max_output_tokens.or(role.max_output_tokens),
            stop: request.stop.clone(),
            schema: request.schema.clone(),
            on_token: request.on_token.clone(),
        }
    }

    /// Refuses a prompt that cannot fit the model's configured window.
    pub fn check_context_window(&self, request: &ModelRequest) -> Result<(), LlmError> {
        let Some(window) = self.inner.config.context_windows.window(&request.model) else {
            return Ok(());
        };
        // Counting is linear in the prompt; skip it when even one token per
        // byte fits.
        if tokens::upper_bound_messages(&request.messages) <= window {
            return Ok(());
        }
        let estimated = tokens::count_messages(&request.model, &request.messages);
        if estimated > window {
            return Err(LlmError::ContextWindowExceeded {
                model: request.model.clone(),
                estimated_tokens: estimated,
                window,
            });
        }
        Ok(())
    }

    /// Sends one request: pre-check, wait for a slot, attempt with timeout,
    /// retry retryable failures with backoff, account. Dropping the future
    /// cancels the request and frees its slot.
    ///
    /// A request with a schema that the endpoint refuses (an HTTP 400, 404,
    /// 415, 422 or 501 answer to it, not an authentication, rate or server
    /// failure) is sent again at once without the schema, and the model is
    /// remembered as refusing schemas for this client's lifetime (clones
    /// share it): later requests go without the schema straight away. A
    /// schema the embedded model's grammar cannot express goes the same
    /// way, without being remembered. [`ChatResponse::schema_use`] says
    /// which happened; no call fails for it.
    pub async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut resolved = self.resolve(&request);
        self.check_context_window(&resolved)?;
        let started = Instant::now();
        let (reply, retries, schema_use) = self.send_with_schema(&mut resolved).await?;
        let latency = started.elapsed();

        let (reported, estimated) = match reply.usage {
            Some(u) => (u, false),
            None => (
                ReportedUsage {
                    input_tokens: tokens::count_messages(&resolved.model, &resolved.messages),
                    output_tokens: tokens::count_text(&resolved.model, &reply.text),
                    cached_tokens: None,
                },
                true,
            ),
        };
        let cost_usd =
            self.inner
                .config
                .prices
                .cost_of_call(&resolved.model, &reply.model, &reported);
        let usage = Usage {
            model: resolved.model,
            role: request.role,
            depth: request.depth,
            input_tokens: reported.input_tokens,
            output_tokens: reported.output_tokens,
            cached_tokens: reported.cached_tokens,
            estimated,
            latency,
            retries,
            cost_usd,
            draft: reply.draft,
        };
        self.inner
            .totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(&usage);
        Ok(ChatResponse {
            text: reply.text,
            finish_reason: reply.finish_reason,
            usage,
            schema_use,
        })
    }

    /// Sends `request` with its schema, unless the endpoint refuses (or
    /// refused) it: then without (see [`LlmClient::chat`]), `request` left
    /// as sent.
    async fn send_with_schema(
        &self,
        request: &mut ModelRequest,
    ) -> Result<(ModelReply, u32, SchemaUse), LlmError> {
        if request.schema.is_none() {
            let (reply, retries) = self.send_with_retries(request, 0).await?;
            return Ok((reply, retries, SchemaUse::NotAsked));
        }
        if let Some(reason) = self.refused_before(&request.model) {
            request.schema = None;
            let (reply, retries) = self.send_with_retries(request, 0).await?;
            let reason = format!("refused earlier: {reason}");
            return Ok((reply, retries, SchemaUse::Refused { reason }));
        }
        match self.send_with_retries(request, 0).await {
            Ok((reply, retries)) => Ok((reply, retries, SchemaUse::Constrained)),
            Err(err) if err.is_schema_refusal() => {
                // The refusal was one attempt; the plain request follows.
                request.schema = None;
                let (reply, retries) = self.send_with_retries(request, 1).await?;
                let reason = refusal_reason(&err);
                if !matches!(err.root(), LlmError::SchemaUnsupported { .. }) {
                    self.remember_refusal(&request.model, &reason);
                }
                Ok((reply, retries + 1, SchemaUse::Refused { reason }))
            }
            Err(err) => Err(err),
        }
    }

    /// The refusal remembered for `model` at this client's endpoint.
    fn refused_before(&self, model: &str) -> Option<String> {
        let refusals = self
            .inner
            .schema_refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        refusals.get(model).cloned()
    }

    fn remember_refusal(&self, model: &str, reason: &str) {
        self.inner
            .schema_refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(model.to_string(), reason.to_string());
    }

    /// Sends `request` with retries; `earlier` attempts of this call were
    /// made before (the numbering of streamed attempts goes on from them).
    async fn send_with_retries(
        &self,
        request: &ModelRequest,
        earlier: u32,
    ) -> Result<(ModelReply, u32), LlmError> {
        let policy = &self.inner.config.retry;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let result = {
                // A slot per attempt: a call waiting out a backoff does not
                // hold a connection's worth of concurrency.
                let _slot = self
                    .inner
                    .slots
                    .acquire()
                    .await
                    .expect("the semaphore is never closed");
                if let Some(sink) = &request.on_token {
                    sink.start_attempt(earlier + attempt);
                }
                self.attempt(request).await
            };
            let err = match result {
                Ok(reply) => return Ok((reply, attempt - 1)),
                Err(err) => err,
            };
            // Wrap only errors we stopped retrying; a different, final error
            // after retries (say a 400) is reported as itself.
            let give_up = |err: LlmError| {
                if attempt > 1 && err.is_retryable() {
                    LlmError::RetriesExhausted {
                        attempts: attempt,
                        last: Box::new(err),
                    }
                } else {
                    err
                }
            };
            if !err.is_retryable() || attempt > policy.max_retries {
                return Err(give_up(err));
            }
            let delay = match err.retry_after() {
                Some(wait) if wait > policy.max_retry_after => return Err(give_up(err)),
                Some(wait) => wait,
                None => backoff(policy, attempt),
            };
            if let Some(sink) = &request.on_token {
                sink.retrying(
                    earlier + attempt + 1,
                    earlier + policy.max_retries + 1,
                    &err.to_string(),
                );
            }
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(&self, request: &ModelRequest) -> Result<ModelReply, LlmError> {
        let timeout = self.inner.config.timeout;
        match tokio::time::timeout(timeout, self.inner.provider.complete(request)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout {
                url: self.inner.provider.endpoint().to_string(),
                after: timeout,
            }),
        }
    }

    /// The model names the endpoint serves (one attempt, with timeout).
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        let timeout = self.inner.config.timeout;
        match tokio::time::timeout(timeout, self.inner.provider.list_models()).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout {
                url: self.inner.provider.endpoint().to_string(),
                after: timeout,
            }),
        }
    }
}

impl ChatModel for LlmClient {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(LlmClient::chat(self, request))
    }

    fn reply_key(&self, request: &ChatRequest) -> Option<String> {
        let resolved = self.resolve(request);
        let provider = &self.inner.provider;
        if !provider.reproducible(&resolved) {
            return None;
        }
        let mut hasher = Sha256::new();
        hasher.update(provider.reply_identity().as_bytes());
        hasher.update([0]);
        hasher.update(crate::cassette::request_hash(&resolved).as_bytes());
        Some(
            hasher
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        )
    }
}

/// What the endpoint said when it refused a schema, shortened.
fn refusal_reason(err: &LlmError) -> String {
    let reason = match err.root() {
        LlmError::BadRequest {
            status, message, ..
        } => format!("HTTP {status}: {message}"),
        LlmError::NotFound { message, .. } => format!("HTTP 404: {message}"),
        LlmError::UnknownModel { message, .. } => message.clone(),
        LlmError::SchemaUnsupported { reason, .. } => reason.clone(),
        other => other.to_string(),
    };
    crate::schema::excerpt(&reason, REFUSAL_REASON_CHARS)
}

/// Exponential backoff with jitter before retry number `attempt` (1-based):
/// a uniform draw from the upper half of `initial * 2^(attempt-1)`, capped.
/// The jitter spreads a burst of failed parallel calls over time.
fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let exp = policy
        .initial_backoff
        .saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u32::MAX),
        )
        .min(policy.max_backoff);
    let half = exp / 2;
    half + half.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let policy = RetryPolicy {
            max_retries: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(1),
        };
        for _ in 0..50 {
            let first = backoff(&policy, 1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = backoff(&policy, 3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let late = backoff(&policy, 40);
            assert!(late >= Duration::from_millis(500) && late <= Duration::from_millis(1000));
        }
    }
}
