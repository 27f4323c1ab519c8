//! Prices and context windows of known models.
//!
//! Lookups match a model name exactly, or a known name followed by a dated
//! snapshot suffix (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`,
//! `...-latest`); anything else is unknown, never guessed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::ReportedUsage;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached prompt tokens.
    pub input_per_mtok: f64,
    /// Generated tokens.
    pub output_per_mtok: f64,
    /// Prompt tokens read from cache; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    const fn new(input: f64, cached: f64, output: f64) -> Self {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: Some(cached),
        }
    }

    /// Cost in USD of the given token counts.
    pub fn cost(&self, usage: &ReportedUsage) -> f64 {
        let cached = usage.cached_tokens.unwrap_or(0).min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        (uncached as f64 * self.input_per_mtok
            + cached as f64 * cached_price
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// Built-in list prices (USD per million tokens: input, cached input, output).
const DEFAULT_PRICES: &[(&str, Price)] = &[
    ("gpt-4o", Price::new(2.50, 1.25, 10.00)),
    ("gpt-4o-mini", Price::new(0.15, 0.075, 0.60)),
    ("gpt-4.1", Price::new(2.00, 0.50, 8.00)),
    ("gpt-4.1-mini", Price::new(0.40, 0.10, 1.60)),
    ("gpt-4.1-nano", Price::new(0.10, 0.025, 0.40)),
    ("gpt-5", Price::new(1.25, 0.125, 10.00)),
    ("gpt-5-mini", Price::new(0.25, 0.025, 2.00)),
    ("gpt-5-nano", Price::new(0.05, 0.005, 0.40)),
    ("o3", Price::new(2.00, 0.50, 8.00)),
    ("o3-mini", Price::new(1.10, 0.55, 4.40)),
    ("o4-mini", Price::new(1.10, 0.275, 4.40)),
    ("claude-opus-4-1", Price::new(15.00, 1.50, 75.00)),
    ("claude-opus-4", Price::new(15.00, 1.50, 75.00)),
    ("claude-sonnet-4-5", Price::new(3.00, 0.30, 15.00)),
    ("claude-sonnet-4", Price::new(3.00, 0.30, 15.00)),
    ("claude-3-7-sonnet", Price::new(3.00, 0.30, 15.00)),
    ("claude-haiku-4-5", Price::new(1.00, 0.10, 5.00)),
    ("claude-3-5-haiku", Price::new(0.80, 0.08, 4.00)),
];

/// Built-in context windows in tokens.
const DEFAULT_CONTEXT_WINDOWS: &[(&str, u64)] = &[
    ("gpt-4o", 128_000),
    ("gpt-4o-mini", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-4.1-nano", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-5-mini", 400_000),
    ("gpt-5-nano", 400_000),
    ("o3", 200_000),
    ("o3-mini", 200_000),
    ("o4-mini", 200_000),
    ("claude-opus-4-1", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4-5", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-3-7-sonnet", 200_000),
    ("claude-haiku-4-5", 200_000),
    ("claude-3-5-haiku", 200_000),
];

/// True when `suffix` (what follows a known name) is a snapshot tag.
fn is_snapshot_suffix(suffix: &str) -> bool {
    let Some(rest) = suffix.strip_prefix('-') else {
        return false;
    };
    rest == "latest" || (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '-'))
}

/// Finds `model` in `entries`: exact match first, then the longest known name
/// that `model` extends by a snapshot suffix.
fn lookup<'a, V>(entries: impl Iterator<Item = (&'a str, V)>, model: &str) -> Option<V> {
    let mut best: Option<(usize, V)> = None;
    for (name, value) in entries {
        if name == model {
            return Some(value);
        }
        if let Some(suffix) = model.strip_prefix(name)
            && is_snapshot_suffix(suffix)
            && best.as_ref().is_none_or(|(len, _)| name.len() > *len)
        {
            best = Some((name.len(), value));
        }
    }
    best.map(|(_, v)| v)
}

/// Model name → price: the built-in defaults plus `[llm.prices]` overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    overrides: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The built-in table with the given overrides (which win).
    pub fn with_overrides(overrides: BTreeMap<String, Price>) -> Self {
        PriceTable { overrides }
    }

    /// The price of `model`, or `None` when unknown.
    pub fn price(&self, model: &str) -> Option<Price> {
        lookup(self.overrides.iter().map(|(k, v)| (k.as_str(), *v)), model)
            .or_else(|| lookup(DEFAULT_PRICES.iter().map(|(k, v)| (*k, *v)), model))
    }

    /// Cost in USD, or `None` when the model has no known price.
    pub fn cost(&self, model: &str, usage: &ReportedUsage) -> Option<f64> {
        self.price(model).map(|p| p.cost(usage))
    }

    /// Cost of a call that asked for `requested` and was answered by
    /// `answered` (the model name in the response). A configured price for
    /// the requested name wins (the user said so); otherwise the answering
    /// model decides, so a local server reached under a default name like
    /// `gpt-4.1` is not billed at OpenAI's price, and an Azure deployment is
    /// priced by the model behind it.
    pub fn cost_of_call(
        &self,
        requested: &str,
        answered: &str,
        usage: &ReportedUsage,
    ) -> Option<f64> {
        let overridden = lookup(
            self.overrides.iter().map(|(k, v)| (k.as_str(), *v)),
            requested,
        );
        let price = match overridden {
            Some(p) => Some(p),
            None if answered.is_empty() => self.price(requested),
            None => self.price(answered),
        };
        price.map(|p| p.cost(usage))
    }
}

/// Model name → context window: built-in defaults plus `[llm.context_windows]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextWindows {
    overrides: BTreeMap<String, u64>,
}

impl ContextWindows {
    /// The built-in table with the given overrides (which win).
    pub fn with_overrides(overrides: BTreeMap<String, u64>) -> Self {
        ContextWindows { overrides }
    }

    /// The window of `model` in tokens, or `None` when unknown (no check).
    pub fn window(&self, model: &str) -> Option<u64> {
        lookup(self.overrides.iter().map(|(k, v)| (k.as_str(), *v)), model)
            .or_else(|| lookup(DEFAULT_CONTEXT_WINDOWS.iter().map(|(k, v)| (*k, *v)), model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_match_their_family_but_other_variants_do_not() {
        let table = PriceTable::default();
        assert_eq!(table.price("gpt-4o-2024-08-06"), table.price("gpt-4o"));
        assert_eq!(
            table.price("gpt-4o-mini-2024-07-18"),
            table.price("gpt-4o-mini")
        );
        assert_ne!(table.price("gpt-4o-mini"), table.price("gpt-4o"));
        assert!(table.price("gpt-4o-audio-preview").is_none());
        assert!(table.price("qwen2.5-coder").is_none());
        assert_eq!(
            table.price("claude-sonnet-4-5-20250929"),
            table.price("claude-sonnet-4-5")
        );
    }

    #[test]
    fn cost_splits_cached_and_uncached_input() {
        let price = Price::new(2.0, 0.5, 8.0);
        let usage = ReportedUsage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cached_tokens: Some(400_000),
        };
        let cost = price.cost(&usage);
        assert!(
            (cost - (0.6 * 2.0 + 0.4 * 0.5 + 0.5 * 8.0)).abs() < 1e-9,
            "{cost}"
        );
    }

    #[test]
    fn overrides_win_and_unknown_is_none() {
        let mut o = BTreeMap::new();
        o.insert(
            "local".to_string(),
            Price {
                input_per_mtok: 0.0,
                output_per_mtok: 0.0,
                cached_input_per_mtok: None,
            },
        );
        let table = PriceTable::with_overrides(o);
        let usage = ReportedUsage {
            input_tokens: 10,
            output_tokens: 10,
            cached_tokens: None,
        };
        assert_eq!(table.cost("local", &usage), Some(0.0));
        assert_eq!(table.cost("mystery", &usage), None);
        assert!(ContextWindows::default().window("mystery").is_none());
        assert_eq!(ContextWindows::default().window("gpt-4o"), Some(128_000));
    }
}
