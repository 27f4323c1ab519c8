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

/// Requests with a wrong token in the last minute.
#[derive(Default)]
pub(crate) struct WrongTokens {
    recent: std::sync::Mutex<std::collections::VecDeque<std::time::Instant>>,
}

/// Wrong tokens remembered at most (the delay is at its longest by then).
const WRONG_TOKENS_KEPT: usize = 1_024;

impl WrongTokens {
    /// Records a wrong token; how long its refusal waits: 250 ms, doubled
    /// for every 16 others in the last minute, at most 4 s.
    pub(crate) fn record(&self) -> std::time::Duration {
        let now = std::time::Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > std::time::Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= WRONG_TOKENS_KEPT {
            recent.pop_front();
        }
        recent.push_back(now);
        let doublings = (recent.len() / 16).min(4) as u32;
        std::time::Duration::from_millis(250 << doublings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_tokens_wait_longer_the_more_there_are() {
        let w = WrongTokens::default();
        let ms = |d: std::time::Duration| d.as_millis();
        assert_eq!(ms(w.record()), 250);
        for _ in 0..14 {
            w.record();
        }
        assert_eq!(ms(w.record()), 500, "the 16th in a minute");
        for _ in 0..200 {
            w.record();
        }
        assert_eq!(ms(w.record()), 4_000, "capped");
    }
}
