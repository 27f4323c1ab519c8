//! The entailment judge's verdicts, remembered by (judge model, claim,
//! passage) so that asking again costs no judge call. One cache serves every
//! run of an engine (and the engines made from it with other settings); it
//! is bounded, the oldest verdicts going first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::report::Verdict;

/// Verdicts kept by default.
pub const VERDICT_CACHE_ENTRIES: usize = 10_000;

/// What a verdict is remembered by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    model: String,
    claim: String,
    passage: String,
}

#[derive(Debug, Default)]
struct Entries {
    verdicts: HashMap<Key, Verdict>,
    /// Keys in the order they were added (oldest first).
    order: VecDeque<Key>,
}

/// A bounded in-memory cache of the judge's verdicts.
#[derive(Debug)]
pub struct VerdictCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

impl Default for VerdictCache {
    fn default() -> Self {
        VerdictCache::with_capacity(VERDICT_CACHE_ENTRIES)
    }
}

impl VerdictCache {
    /// A cache keeping at most `capacity` verdicts.
    pub fn with_capacity(capacity: usize) -> Self {
        VerdictCache {
            capacity,
            entries: Mutex::new(Entries::default()),
        }
    }

    fn key(model: &str, claim: &str, passage: &str) -> Key {
        Key {
            model: model.to_string(),
            claim: claim.to_string(),
            passage: passage.to_string(),
        }
    }

    /// The verdict `model` gave on `claim` against `passage`, if remembered.
    pub fn get(&self, model: &str, claim: &str, passage: &str) -> Option<Verdict> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .verdicts
            .get(&Self::key(model, claim, passage))
            .copied()
    }

    /// Remembers a verdict, forgetting the oldest beyond the capacity.
    pub fn put(&self, model: &str, claim: &str, passage: &str, verdict: Verdict) {
        if self.capacity == 0 {
            return;
        }
        let key = Self::key(model, claim, passage);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.verdicts.insert(key.clone(), verdict).is_none() {
            entries.order.push_back(key);
        }
        while entries.order.len() > self.capacity {
            if let Some(old) = entries.order.pop_front() {
                entries.verdicts.remove(&old);
            }
        }
    }

    /// Verdicts remembered.
    pub fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.verdicts.len()
    }

    /// True when no verdict is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_kept_by_model_claim_and_passage_and_bounded() {
        let cache = VerdictCache::with_capacity(2);
        cache.put("m", "claim", "passage", Verdict::Entailed);
        assert_eq!(cache.get("m", "claim", "passage"), Some(Verdict::Entailed));
        assert_eq!(cache.get("other", "claim", "passage"), None);
        assert_eq!(cache.get("m", "claim", "another passage"), None);
        cache.put("m", "b", "p", Verdict::NotEntailed);
        cache.put("m", "c", "p", Verdict::Contradicted);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("m", "claim", "passage"), None, "the oldest goes");
        assert_eq!(cache.get("m", "c", "p"), Some(Verdict::Contradicted));
    }
}
