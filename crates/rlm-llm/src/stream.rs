//! Token streaming: a [`TokenSink`] on a [`crate::ChatRequest`] receives the
//! reply's text as the provider produces it, for live rendering and the trace.
//!
//! The final [`crate::ChatResponse`] stays the authority: the deltas of one
//! attempt concatenate to exactly its reply text, and a retried call starts a
//! new attempt (the receiver drops what the failed attempt streamed).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A piece of a reply as it was generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenDelta<'a> {
    /// 1-based attempt of the call this text belongs to; a higher number
    /// than before means the earlier attempt failed and its text is void.
    pub attempt: u32,
    /// New text (whole UTF-8 characters; never a stop sequence).
    pub text: &'a str,
}

type Callback = dyn Fn(TokenDelta<'_>) + Send + Sync;

/// A retry about to be made: its 1-based attempt, the most attempts the
/// call makes, and why the previous attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry<'a> {
    /// The attempt about to start (2 for the first retry).
    pub attempt: u32,
    /// The most attempts the call makes (retries included).
    pub of: u32,
    /// The error of the attempt before.
    pub reason: &'a str,
}

type RetryCallback = dyn Fn(Retry<'_>) + Send + Sync;

/// Where streamed text goes. Cheap to clone; clones share the callback and
/// the attempt counter. Providers that do not stream never call it.
#[derive(Clone)]
pub struct TokenSink {
    callback: Arc<Callback>,
    attempt: Arc<AtomicU32>,
    on_retry: Option<Arc<RetryCallback>>,
}

impl TokenSink {
    /// A sink calling `callback` for every delta. The callback runs on the
    /// thread producing tokens (for the local model, the inference thread):
    /// keep it short.
    pub fn new(callback: impl Fn(TokenDelta<'_>) + Send + Sync + 'static) -> Self {
        TokenSink {
            callback: Arc::new(callback),
            attempt: Arc::new(AtomicU32::new(1)),
            on_retry: None,
        }
    }

    /// Also calls `callback` when the client is about to retry the call
    /// (before it waits out the backoff), streaming or not.
    pub fn on_retry(mut self, callback: impl Fn(Retry<'_>) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(Arc::new(callback));
        self
    }

    /// Announces a retry; called by the client.
    pub fn retrying(&self, attempt: u32, of: u32, reason: &str) {
        if let Some(f) = &self.on_retry {
            f(Retry {
                attempt,
                of,
                reason,
            });
        }
    }

    /// Marks the start of attempt `attempt` (1-based); called by the client.
    pub fn start_attempt(&self, attempt: u32) {
        self.attempt.store(attempt, Ordering::SeqCst);
    }

    /// Passes on `text` (ignored when empty); called by providers.
    pub fn send(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        (self.callback)(TokenDelta {
            attempt: self.attempt.load(Ordering::SeqCst),
            text,
        });
    }
}

impl fmt::Debug for TokenSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSink")
            .field("attempt", &self.attempt.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

/// Two sinks are equal when they are clones of one another (requests compare
/// by content; a sink has none worth comparing).
impl PartialEq for TokenSink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.callback, &other.callback)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn deltas_carry_the_current_attempt_and_skip_empty_text() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let sink =
            TokenSink::new(move |d| log.lock().unwrap().push((d.attempt, d.text.to_string())));
        sink.send("Hel");
        sink.send("");
        sink.clone().start_attempt(2);
        sink.send("Hello");
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(1, "Hel".to_string()), (2, "Hello".to_string())]
        );
        assert_eq!(sink, sink.clone());
        assert_ne!(sink, TokenSink::new(|_| {}));
    }
}
