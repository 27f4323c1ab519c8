//! Small shared-state helpers: a lock that survives a panicked holder, and
//! an answer cached for a while and computed once for all callers at a time.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Locks `m`; a holder that panicked leaves the data as it was, still usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A value reused for a while: callers arriving while it is being computed
/// wait for it and share it.
#[derive(Debug)]
pub(crate) struct Cached<T> {
    last: tokio::sync::Mutex<Option<(Instant, T)>>,
}

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Cached {
            last: tokio::sync::Mutex::new(None),
        }
    }
}

impl<T: Clone> Cached<T> {
    /// The value computed less than `ttl` ago, else a new one from `make`.
    pub(crate) async fn get_or_make<F: Future<Output = T>>(
        &self,
        ttl: Duration,
        make: impl FnOnce() -> F,
    ) -> T {
        let mut last = self.last.lock().await;
        if let Some((at, value)) = last.as_ref()
            && at.elapsed() < ttl
        {
            return value.clone();
        }
        let value = make().await;
        *last = Some((Instant::now(), value.clone()));
        value
    }
}
