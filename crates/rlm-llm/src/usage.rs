//! Sums of [`Usage`] per model and per depth, for budgets and reports.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::types::{Usage, duration_ms};

/// Totals over a set of calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageSum {
    /// Calls counted.
    pub calls: u64,
    /// Prompt tokens, including cached.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from cache (calls whose provider said).
    pub cached_tokens: u64,
    /// Calls whose token counts were estimated locally.
    pub estimated_calls: u64,
    /// Retries over all calls.
    pub retries: u64,
    /// Summed call latency (not wall time: parallel calls overlap).
    #[serde(with = "duration_ms", rename = "latency_ms")]
    pub latency: Duration,
    /// Cost of the calls whose model has a known price.
    pub known_cost_usd: f64,
    /// Calls whose model has no known price.
    pub unpriced_calls: u64,
}

impl UsageSum {
    /// Adds one call.
    pub fn add(&mut self, usage: &Usage) {
        self.calls += 1;
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cached_tokens += usage.cached_tokens.unwrap_or(0);
        self.estimated_calls += u64::from(usage.estimated);
        self.retries += u64::from(usage.retries);
        self.latency += usage.latency;
        match usage.cost_usd {
            Some(c) => self.known_cost_usd += c,
            None => self.unpriced_calls += 1,
        }
    }

    /// Adds another sum.
    pub fn merge(&mut self, other: &UsageSum) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.estimated_calls += other.estimated_calls;
        self.retries += other.retries;
        self.latency += other.latency;
        self.known_cost_usd += other.known_cost_usd;
        self.unpriced_calls += other.unpriced_calls;
    }

    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Total cost, or `None` if any call's price is unknown (a partial sum
    /// would understate it; see `known_cost_usd` for the priced part).
    pub fn cost_usd(&self) -> Option<f64> {
        (self.unpriced_calls == 0).then_some(self.known_cost_usd)
    }
}

/// Usage of many calls: overall, per model and per depth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Everything.
    pub total: UsageSum,
    /// Keyed by the model that answered.
    pub by_model: BTreeMap<String, UsageSum>,
    /// Keyed by the caller's depth (0 = root).
    pub by_depth: BTreeMap<u32, UsageSum>,
}

impl UsageTotals {
    /// Adds one call.
    pub fn add(&mut self, usage: &Usage) {
        self.total.add(usage);
        self.by_model
            .entry(usage.model.clone())
            .or_default()
            .add(usage);
        self.by_depth.entry(usage.depth).or_default().add(usage);
    }

    /// Adds another aggregate (e.g. a sub-agent's).
    pub fn merge(&mut self, other: &UsageTotals) {
        self.total.merge(&other.total);
        for (model, sum) in &other.by_model {
            self.by_model.entry(model.clone()).or_default().merge(sum);
        }
        for (depth, sum) in &other.by_depth {
            self.by_depth.entry(*depth).or_default().merge(sum);
        }
    }
}

impl<'a> FromIterator<&'a Usage> for UsageTotals {
    fn from_iter<I: IntoIterator<Item = &'a Usage>>(iter: I) -> Self {
        let mut totals = UsageTotals::default();
        for u in iter {
            totals.add(u);
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ModelRole;

    fn usage(model: &str, depth: u32, cost: Option<f64>) -> Usage {
        Usage {
            model: model.into(),
            role: ModelRole::Sub,
            depth,
            input_tokens: 100,
            output_tokens: 10,
            cached_tokens: Some(5),
            estimated: depth == 2,
            latency: Duration::from_millis(20),
            retries: 1,
            cost_usd: cost,
            draft: None,
        }
    }

    #[test]
    fn sums_per_model_and_depth_and_unknown_cost_stays_unknown() {
        let calls = [
            usage("a", 0, Some(0.5)),
            usage("b", 1, Some(0.25)),
            usage("b", 1, Some(0.25)),
        ];
        let mut totals: UsageTotals = calls.iter().collect();
        assert_eq!(totals.total.calls, 3);
        assert_eq!(totals.total.input_tokens, 300);
        assert_eq!(totals.total.cached_tokens, 15);
        assert_eq!(totals.total.cost_usd(), Some(1.0));
        assert_eq!(totals.by_model["b"].calls, 2);
        assert_eq!(totals.by_depth[&1].output_tokens, 20);

        let mut other = UsageTotals::default();
        other.add(&usage("c", 2, None));
        totals.merge(&other);
        assert_eq!(totals.total.calls, 4);
        assert_eq!(totals.total.cost_usd(), None);
        assert_eq!(totals.total.known_cost_usd, 1.0);
        assert_eq!(totals.by_depth[&2].estimated_calls, 1);
        assert_eq!(totals.total.latency, Duration::from_millis(80));
    }
}
