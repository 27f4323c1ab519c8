//! A run's use of its store's reply cache ([`rlm_corpus::ReplyCache`]): a
//! model call whose reply is reproducible (the model client gives it a key:
//! temperature 0, or the embedded model's fixed seed) is looked up before
//! it is made, and kept after. A reply served from the cache is free: it
//! takes no budget, no concurrency slot and no model time.
//!
//! The cache belongs to the store (the folder's `replies.sqlite`, the
//! PostgreSQL store's table), so a question asked again — in the next
//! session, on another node — repeats no model call whose prompt is the
//! same. A cache that cannot be opened or written is noted once in the
//! trace and the run goes on without it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rlm_corpus::{CachedReply, CorpusStore, ReplyCache};
use rlm_llm::{ChatResponse, FinishReason, ModelRole, SchemaUse, Usage};
use tokio::sync::OnceCell;

/// The reply cache as one run uses it.
pub(crate) struct RunReplies {
    store: Option<Arc<dyn CorpusStore>>,
    cap_bytes: u64,
    cache: OnceCell<Option<Arc<dyn ReplyCache>>>,
    /// A failure of the cache was noted in the trace (once per run).
    failure_noted: AtomicBool,
}

/// What went wrong with the cache, for the trace's one note.
pub(crate) type CacheFailure = String;

impl RunReplies {
    /// Uses `store`'s cache when `enabled`, holding it to `cap_bytes`.
    pub(crate) fn new(store: &Arc<dyn CorpusStore>, enabled: bool, cap_bytes: u64) -> Self {
        RunReplies {
            store: enabled.then(|| store.clone()),
            cap_bytes,
            cache: OnceCell::new(),
            failure_noted: AtomicBool::new(false),
        }
    }

    /// True the first time a failure is reported: the caller notes it.
    pub(crate) fn first_failure(&self) -> bool {
        !self.failure_noted.swap(true, Ordering::SeqCst)
    }

    /// The store's cache, opened on first use (`None`: off, none, or it
    /// cannot be opened — the error is returned once, then `None`).
    async fn cache(&self) -> Result<Option<Arc<dyn ReplyCache>>, CacheFailure> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let mut failure = None;
        let cache = self
            .cache
            .get_or_init(|| async {
                let store = store.clone();
                match blocking(move || store.reply_cache()).await {
                    Ok(Ok(cache)) => cache,
                    Ok(Err(e)) => {
                        failure = Some(e.to_string());
                        None
                    }
                    Err(e) => {
                        failure = Some(e);
                        None
                    }
                }
            })
            .await
            .clone();
        match failure {
            Some(f) => Err(format!("the store's reply cache cannot be opened: {f}")),
            None => Ok(cache),
        }
    }

    /// The reply kept under `key`, if any.
    pub(crate) async fn lookup(&self, key: &str) -> Result<Option<CachedReply>, CacheFailure> {
        let Some(cache) = self.cache().await? else {
            return Ok(None);
        };
        let key = key.to_string();
        blocking(move || cache.get(&key))
            .await?
            .map_err(|e| format!("the reply cache could not be read: {e}"))
    }

    /// Keeps `response` under `key`.
    pub(crate) async fn keep(
        &self,
        key: &str,
        response: &ChatResponse,
    ) -> Result<(), CacheFailure> {
        let Some(cache) = self.cache().await? else {
            return Ok(());
        };
        let reply = CachedReply {
            text: response.text.clone(),
            model: response.usage.model.clone(),
            finish_reason: response.finish_reason.as_str().to_string(),
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
        };
        let (key, cap) = (key.to_string(), self.cap_bytes);
        blocking(move || cache.put(&key, &reply, cap))
            .await?
            .map_err(|e| format!("the reply cache could not be written: {e}"))
    }
}

/// A cached reply as the model layer's response to the call it answers.
pub(crate) fn as_response(
    reply: CachedReply,
    role: ModelRole,
    depth: u32,
    asked_schema: bool,
) -> ChatResponse {
    ChatResponse {
        finish_reason: FinishReason::from_wire(Some(&reply.finish_reason)),
        usage: Usage {
            model: reply.model,
            role,
            depth,
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
            cached_tokens: None,
            estimated: false,
            latency: std::time::Duration::ZERO,
            retries: 0,
            cost_usd: Some(0.0),
            draft: None,
        },
        schema_use: if asked_schema {
            SchemaUse::Constrained
        } else {
            SchemaUse::NotAsked
        },
        text: reply.text,
    }
}

/// Runs a store call on tokio's blocking threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CacheFailure> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the reply cache's task failed: {e}"))
}
