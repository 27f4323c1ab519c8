//! Noticing a re-index made by another process: a store shared by several
//! servers (PostgreSQL) is re-indexed by `rlm index --store URL`, not
//! through any one server, so each server compares the store's generation
//! with the one its documents were listed at and lists them again when it
//! moved on (see [`crate::App::current_corpus`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

use rlm_corpus::CorpusError;

/// Reads a store's generation (the number of its last committed indexing
/// run), or says why it could not.
pub type GenerationSource = Box<dyn Fn() -> Result<u64, CorpusError> + Send + Sync>;

/// How a server looks for a new store generation: at most once per
/// `every`, from the requests that read the documents.
pub struct StoreWatch {
    every: Duration,
    generation: GenerationSource,
    state: Mutex<WatchState>,
}

struct WatchState {
    /// The generation the server's documents were listed at.
    seen: u64,
    /// When the generation was last read (or a read started).
    checked: Option<Instant>,
    /// A check is running (another request does not start a second one).
    busy: bool,
    /// The last check failed (its error was reported once).
    failing: bool,
}

impl std::fmt::Debug for StoreWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWatch")
            .field("every", &self.every)
            .field("seen", &lock(&self.state).seen)
            .finish_non_exhaustive()
    }
}

/// A check that is due, until [`Due::done`] (or its drop, should the check
/// panic) lets the next one start.
pub(crate) struct Due<'a> {
    watch: &'a StoreWatch,
    /// The generation the documents were listed at.
    pub(crate) seen: u64,
}

impl Drop for Due<'_> {
    fn drop(&mut self) {
        lock(&self.watch.state).busy = false;
    }
}

impl StoreWatch {
    /// Watches a store whose documents were listed at generation `seen`,
    /// reading its generation with `generation` at most once per `every`.
    pub fn new(
        every: Duration,
        seen: u64,
        generation: impl Fn() -> Result<u64, CorpusError> + Send + Sync + 'static,
    ) -> Self {
        StoreWatch {
            every,
            generation: Box::new(generation),
            state: Mutex::new(WatchState {
                seen,
                checked: None,
                busy: false,
                failing: false,
            }),
        }
    }

    /// `Some` when it is time to read the generation and no other request
    /// is reading it; the caller then calls [`Due::read`] and [`Due::done`].
    pub(crate) fn due(&self) -> Option<Due<'_>> {
        let mut s = lock(&self.state);
        if s.busy || s.checked.is_some_and(|t| t.elapsed() < self.every) {
            return None;
        }
        s.busy = true;
        s.checked = Some(Instant::now());
        Some(Due {
            watch: self,
            seen: s.seen,
        })
    }
}

impl Due<'_> {
    /// The store's generation now (blocking: a database round trip).
    pub(crate) fn read(&self) -> Result<u64, String> {
        (self.watch.generation)().map_err(|e| e.to_string())
    }

    /// Ends a check: `Ok(Some(g))` when the documents of generation `g`
    /// were swapped in, `Ok(None)` when nothing changed, `Err` when the
    /// check failed (reported once, until a check succeeds again; the
    /// documents listed before keep answering).
    pub(crate) fn done(self, outcome: Result<Option<u64>, String>) {
        let mut s = lock(&self.watch.state);
        match outcome {
            Ok(generation) => {
                if let Some(g) = generation {
                    s.seen = g;
                }
                s.failing = false;
            }
            Err(e) => {
                if !s.failing {
                    eprintln!(
                        "rlm serve: cannot look for a re-index of the store ({e}); answering from the documents listed before until it can"
                    );
                }
                s.failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn watch(every: Duration, generation: Arc<AtomicU64>) -> StoreWatch {
        StoreWatch::new(every, 1, move || match generation.load(Ordering::SeqCst) {
            0 => Err(CorpusError::Backend("the database is unreachable".into())),
            g => Ok(g),
        })
    }

    #[test]
    fn one_check_per_interval_and_one_at_a_time() {
        let w = watch(Duration::from_secs(3600), Arc::new(AtomicU64::new(1)));
        let due = w.due().expect("the first check is due at once");
        assert!(w.due().is_none(), "a second check started during the first");
        assert_eq!(due.read(), Ok(1));
        due.done(Ok(None));
        assert!(w.due().is_none(), "checked again within the interval");
    }

    #[test]
    fn a_new_generation_is_remembered_and_a_failure_changes_nothing() {
        let generation = Arc::new(AtomicU64::new(1));
        let w = watch(Duration::ZERO, generation.clone());
        generation.store(2, Ordering::SeqCst);
        let due = w.due().unwrap();
        assert_eq!(due.seen, 1);
        let g = due.read().unwrap();
        due.done(Ok(Some(g)));
        assert_eq!(w.due().unwrap().seen, 2);
        // The database goes away: the check fails, the generation stays.
        generation.store(0, Ordering::SeqCst);
        let due = w.due().unwrap();
        let failed = due.read();
        assert_eq!(failed, Err("the database is unreachable".to_string()));
        due.done(failed.map(Some));
        assert!(lock(&w.state).failing);
        let due = w.due().unwrap();
        assert_eq!(due.seen, 2);
        due.done(Ok(None));
        assert!(
            !lock(&w.state).failing,
            "a check that works clears the failure"
        );
    }

    #[test]
    fn a_check_that_never_ends_does_not_stop_the_next() {
        let w = watch(Duration::ZERO, Arc::new(AtomicU64::new(1)));
        drop(w.due().unwrap()); // as when the check panics
        assert!(w.due().is_some());
    }
}
