//! Budgets shared by the whole call tree of one question.
//!
//! One [`Budget`] is created per question and shared (behind an `Arc`) by the
//! root agent, every sub-agent and every `llm_query`. Each model call first
//! reserves a slot with [`Budget::reserve_call`]; exhaustion is a value, never a
//! panic, and the engine answers it with one synthesis call (see `engine`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::values::{ConfigError, FromSettings, Lookup, Reader, table};

/// Limits for one question. Every field has an
/// environment variable (see [`BudgetConfig::from_env`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetConfig {
    /// Deepest agent level: 0 = root, 1 = sub-agent, ... `rlm_query` at this
    /// depth degrades to a plain `llm_query`. `RLM_MAX_DEPTH`, default 2.
    pub max_depth: u32,
    /// Model turns (REPL rounds) of the root agent. `RLM_MAX_ITERATIONS`,
    /// default 25. Traces keep the key they always had (`max_iterations`),
    /// so traces written before the rename still read.
    #[serde(rename = "root_iterations")]
    pub max_iterations: u32,
    /// Model turns of each sub-agent. `RLM_SUB_AGENT_CALLS`, default 8.
    pub sub_iterations: u32,
    /// Model calls across the whole tree. `RLM_MAX_LLM_CALLS`, default 50.
    pub max_llm_calls: u32,
    /// Calls only the root may use (for its synthesis). `RLM_ROOT_RESERVED`, default 5.
    pub root_reserved_calls: u32,
    /// Model calls and sub-agents in flight at once. `RLM_MAX_CONCURRENT`, default 12.
    pub max_concurrent: usize,
    /// Input + output tokens across the tree; checked at 95% before each call.
    /// `RLM_MAX_TOKENS`, default 1,500,000.
    pub max_total_tokens: u64,
    /// Cost cap in USD (calls with unknown price count as zero). `RLM_MAX_COST_USD`, none by default.
    pub max_cost_usd: Option<f64>,
    /// Wall-clock cap for the whole question. `RLM_MAX_WALL_SECS`, default 1800 s.
    pub wall_clock: Duration,
    /// Consecutive erroring cells before an agent gives up. `RLM_MAX_ERRORS`, default 5.
    pub max_consecutive_errors: u32,
    /// Characters of REPL output fed back to the model (head + tail).
    /// `RLM_TRUNCATE_LEN`, default 20,000.
    pub truncate_len: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            max_depth: 2,
            max_iterations: 25,
            sub_iterations: 8,
            max_llm_calls: 50,
            root_reserved_calls: 5,
            max_concurrent: 12,
            max_total_tokens: 1_500_000,
            max_cost_usd: None,
            wall_clock: Duration::from_secs(1800),
            max_consecutive_errors: 5,
            truncate_len: 20_000,
        }
    }
}

/// Fraction of `max_total_tokens` at which new calls are refused.
pub const TOKEN_CHECK_RATIO: f64 = 0.95;

impl FromSettings for BudgetConfig {
    /// The limits from `lookup` (a question's own settings, the environment,
    /// a settings file), every value range-checked by [`crate::values`].
    fn from_settings(lookup: Lookup<'_>) -> Result<Self, ConfigError> {
        let r = Reader::new(lookup);
        let mut c = BudgetConfig::default();
        if let Some(v) = r.whole(&table::MAX_DEPTH)? {
            c.max_depth = v;
        }
        if let Some(v) = r.whole(&table::MAX_ITERATIONS)? {
            c.max_iterations = v;
        }
        if let Some(v) = r.whole(&table::SUB_AGENT_CALLS)? {
            c.sub_iterations = v;
        }
        let calls = r.found(&table::MAX_LLM_CALLS);
        if let Some(v) = r.whole(&table::MAX_LLM_CALLS)? {
            c.max_llm_calls = v;
        }
        // The root's reserve shrinks to fit a call limit set at a stronger
        // layer (a question's own limit beats the environment's reserve).
        let reserve = r.found(&table::ROOT_RESERVED);
        if let Some(v) = r.whole(&table::ROOT_RESERVED)? {
            c.root_reserved_calls = v;
        }
        match (&reserve, &calls) {
            (None, _) => c.fit_reserve(),
            (Some(res), Some(calls)) if calls.layer < res.layer => c.fit_reserve(),
            _ => {}
        }
        if let Some(v) = r.whole(&table::ENGINE_MAX_CONCURRENT)? {
            c.max_concurrent = v;
        }
        if let Some(v) = r.whole(&table::MAX_TOKENS)? {
            c.max_total_tokens = v;
        }
        if let Some(v) = r.number(&table::MAX_COST_USD)? {
            c.max_cost_usd = Some(v);
        }
        if let Some(v) = r.number(&table::MAX_WALL_SECS)? {
            c.wall_clock = Duration::from_secs_f64(v);
        }
        if let Some(v) = r.whole(&table::MAX_ERRORS)? {
            c.max_consecutive_errors = v;
        }
        if let Some(v) = r.whole(&table::TRUNCATE_LEN)? {
            c.truncate_len = v;
        }
        c.validate()?;
        Ok(c)
    }
}

impl BudgetConfig {
    /// Rejects limits that cannot work, with a message saying which and why.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_iterations == 0 {
            return Err("root iterations (RLM_MAX_ITERATIONS) must be at least 1".into());
        }
        if self.max_llm_calls == 0 {
            return Err("max LLM calls (RLM_MAX_LLM_CALLS) must be at least 1".into());
        }
        if self.max_concurrent == 0 {
            return Err("max concurrency (RLM_MAX_CONCURRENT) must be at least 1".into());
        }
        if self.root_reserved_calls >= self.max_llm_calls && self.max_depth > 0 {
            // Sub-agents would have no calls at all; allowed but almost surely a mistake.
            return Err(format!(
                "RLM_ROOT_RESERVED ({}) must be smaller than RLM_MAX_LLM_CALLS ({})",
                self.root_reserved_calls, self.max_llm_calls
            )
            .into());
        }
        if self.truncate_len < 100 {
            return Err("RLM_TRUNCATE_LEN must be at least 100 characters".into());
        }
        Ok(())
    }

    /// Shrinks the default root reserve when `max_llm_calls` was lowered below
    /// it (used when the reserve was not set explicitly): half the calls at most.
    pub fn fit_reserve(&mut self) {
        if self.root_reserved_calls >= self.max_llm_calls {
            self.root_reserved_calls = self.max_llm_calls / 2;
        }
    }

    /// Iteration cap of an agent at `depth`.
    pub fn iterations_at(&self, depth: u32) -> u32 {
        if depth == 0 {
            self.max_iterations
        } else {
            self.sub_iterations
        }
    }
}

/// Why a budget stopped the run (or an agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Exhausted {
    /// The tree-wide model call limit (or the part of it sub-agents may use).
    Calls {
        /// Calls made so far.
        used: u32,
        /// The limit that applied to this caller.
        limit: u32,
    },
    /// The token budget would pass 95% with this call.
    Tokens {
        /// Tokens used so far.
        used: u64,
        /// The configured maximum.
        limit: u64,
    },
    /// The cost cap.
    Cost {
        /// Micro-dollars spent so far.
        used_micro_usd: u64,
        /// Cap in micro-dollars.
        limit_micro_usd: u64,
    },
    /// The wall-clock cap.
    WallClock {
        /// Seconds allowed.
        limit_secs: u64,
    },
    /// An agent used all its model turns.
    Iterations {
        /// The cap that applied.
        limit: u32,
    },
    /// Too many cells in a row raised errors.
    Errors {
        /// The cap that applied.
        limit: u32,
    },
    /// A cost cap is set but a call's model has no known price, so the cap
    /// cannot be enforced: the run stops rather than spend blindly.
    Unpriced {
        /// The model without a price.
        model: String,
    },
    /// The run was cancelled (Ctrl-C or the caller dropped it).
    Cancelled,
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exhausted::Calls { used, limit } => {
                write!(f, "LLM call budget exhausted ({used}/{limit} calls)")
            }
            Exhausted::Tokens { used, limit } => write!(
                f,
                "token budget exhausted ({used} of {limit} tokens, 95% cap)"
            ),
            Exhausted::Cost {
                used_micro_usd,
                limit_micro_usd,
            } => write!(
                f,
                "cost cap reached (${:.4} of ${:.4})",
                *used_micro_usd as f64 / 1e6,
                *limit_micro_usd as f64 / 1e6
            ),
            Exhausted::WallClock { limit_secs } => {
                write!(f, "wall-clock limit of {limit_secs} s reached")
            }
            Exhausted::Iterations { limit } => {
                write!(f, "iteration cap of {limit} turns reached without FINAL")
            }
            Exhausted::Errors { limit } => write!(f, "{limit} consecutive cells raised errors"),
            Exhausted::Unpriced { model } => write!(
                f,
                "the cost cap cannot be enforced: model {model} has no known price (set [llm.prices.\"{model}\"] input_per_mtok and output_per_mtok in rlm.toml, or drop the cost cap)"
            ),
            Exhausted::Cancelled => write!(f, "cancelled"),
        }
    }
}

/// Usage of one depth level of the tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DepthUsage {
    /// Depth (0 = root).
    pub depth: u32,
    /// Model calls.
    pub calls: u32,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Cost in USD of the calls with a known price.
    pub cost_usd: f64,
    /// Calls served from the store's reply cache (not in `calls`).
    #[serde(default)]
    pub cached_calls: u32,
    /// Tokens (input and output) those calls cost when first made.
    #[serde(default)]
    pub tokens_saved: u64,
}

/// Totals of one question, as reported in the answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Model calls made.
    pub calls: u32,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens served from prompt caches.
    pub cached_input_tokens: u64,
    /// Cost in USD; `None` if any call had an unknown price.
    pub cost_usd: Option<f64>,
    /// True when some token counts were estimated locally.
    pub estimated: bool,
    /// Wall time of the question in milliseconds.
    pub wall_ms: u64,
    /// Per-depth breakdown, depth 0 first.
    pub by_depth: Vec<DepthUsage>,
    /// Calls served from the store's reply cache: free, and not counted in
    /// `calls` or the token totals.
    #[serde(default)]
    pub cached_calls: u32,
    /// Tokens (input and output) the cached calls cost when first made.
    #[serde(default)]
    pub tokens_saved: u64,
}

/// One call's usage, as reported by the model layer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cached input tokens.
    pub cached_input_tokens: u64,
    /// Cost in USD, `None` when the price is unknown.
    pub cost_usd: Option<f64>,
    /// Token counts were estimated, not reported by the provider.
    pub estimated: bool,
}

/// The shared budget of one question.
#[derive(Debug)]
pub struct Budget {
    config: BudgetConfig,
    started: Instant,
    calls: AtomicU32,
    tokens: AtomicU64,
    cost_micro_usd: AtomicU64,
    cost_unknown: AtomicBool,
    /// First model answered without a known price while a cost cap is set.
    unpriced: Mutex<Option<String>>,
    estimated: AtomicBool,
    cancelled: AtomicBool,
    by_depth: Mutex<Vec<DepthUsage>>,
}

impl Budget {
    /// A fresh budget; the wall clock starts now.
    pub fn new(config: BudgetConfig) -> Self {
        Budget {
            config,
            started: Instant::now(),
            calls: AtomicU32::new(0),
            tokens: AtomicU64::new(0),
            cost_micro_usd: AtomicU64::new(0),
            cost_unknown: AtomicBool::new(false),
            unpriced: Mutex::new(None),
            estimated: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            by_depth: Mutex::new(Vec::new()),
        }
    }

    /// The limits.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    /// Time since the question started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Time left on the wall clock.
    pub fn remaining_time(&self) -> Duration {
        self.config.wall_clock.saturating_sub(self.elapsed())
    }

    /// Marks the run cancelled: every later reservation fails with `Cancelled`.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// True once [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Checks the limits that do not depend on a call: cancellation, wall clock, cost.
    pub fn check_standing(&self) -> Result<(), Exhausted> {
        if self.is_cancelled() {
            return Err(Exhausted::Cancelled);
        }
        if self.elapsed() >= self.config.wall_clock {
            return Err(Exhausted::WallClock {
                limit_secs: self.config.wall_clock.as_secs(),
            });
        }
        if let Some(model) = self
            .unpriced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Err(Exhausted::Unpriced { model });
        }
        if let Some(cap) = self.config.max_cost_usd {
            let used = self.cost_micro_usd.load(Ordering::SeqCst);
            let limit = (cap * 1e6) as u64;
            if used >= limit {
                return Err(Exhausted::Cost {
                    used_micro_usd: used,
                    limit_micro_usd: limit,
                });
            }
        }
        Ok(())
    }

    /// Reserves one model call for an agent at `depth` whose prompt is about
    /// `estimated_input_tokens` long. Sub-agents (depth > 0) may not touch the
    /// calls reserved for the root. On success the call counts as made.
    pub fn reserve_call(&self, depth: u32, estimated_input_tokens: u64) -> Result<(), Exhausted> {
        self.check_standing()?;
        let used_tokens = self.tokens.load(Ordering::SeqCst);
        let cap = (self.config.max_total_tokens as f64 * TOKEN_CHECK_RATIO) as u64;
        if used_tokens.saturating_add(estimated_input_tokens) > cap {
            return Err(Exhausted::Tokens {
                used: used_tokens,
                limit: self.config.max_total_tokens,
            });
        }
        let limit = if depth == 0 {
            self.config.max_llm_calls
        } else {
            self.config
                .max_llm_calls
                .saturating_sub(self.config.root_reserved_calls)
        };
        self.calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|used| Exhausted::Calls { used, limit })
    }

    /// Reserves the one synthesis call a run may make after a budget ran out.
    /// Only cancellation refuses it: answering from what was gathered is the
    /// point of the reserve, even when the root itself spent it.
    pub fn reserve_synthesis_call(&self) -> Result<(), Exhausted> {
        if self.is_cancelled() {
            return Err(Exhausted::Cancelled);
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Gives back a reserved call that was never sent (e.g. the request failed
    /// before reaching the provider).
    pub fn release_call(&self) {
        let _ = self
            .calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Notes that `model` answered a call without a known price: with a
    /// cost cap set, every later call is refused ([`Exhausted::Unpriced`]).
    pub fn note_unpriced(&self, model: &str) {
        if self.config.max_cost_usd.is_some() {
            self.unpriced
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(|| model.to_string());
        }
    }

    /// Records the usage of a finished call made at `depth`.
    pub fn record(&self, depth: u32, usage: CallUsage) {
        self.tokens
            .fetch_add(usage.input_tokens + usage.output_tokens, Ordering::SeqCst);
        match usage.cost_usd {
            Some(c) => {
                self.cost_micro_usd
                    .fetch_add((c.max(0.0) * 1e6).round() as u64, Ordering::SeqCst);
            }
            None => self.cost_unknown.store(true, Ordering::SeqCst),
        }
        if usage.estimated {
            self.estimated.store(true, Ordering::SeqCst);
        }
        let mut levels = self.by_depth.lock().unwrap_or_else(|e| e.into_inner());
        let l = level(&mut levels, depth);
        l.calls += 1;
        l.input_tokens += usage.input_tokens;
        l.output_tokens += usage.output_tokens;
        l.cached_input_tokens += usage.cached_input_tokens;
        l.cost_usd += usage.cost_usd.unwrap_or(0.0);
    }

    /// A call served from the reply cache: free (no call, token or cost
    /// counted), recorded as saved.
    pub fn record_cached(&self, depth: u32, tokens_saved: u64) {
        let mut levels = self.by_depth.lock().unwrap_or_else(|e| e.into_inner());
        let l = level(&mut levels, depth);
        l.cached_calls += 1;
        l.tokens_saved += tokens_saved;
    }

    /// Calls reserved so far (made or in flight).
    pub fn calls_used(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Tokens used so far.
    pub fn tokens_used(&self) -> u64 {
        self.tokens.load(Ordering::SeqCst)
    }

    /// The usage report for the answer.
    pub fn report(&self) -> UsageReport {
        let by_depth = self
            .by_depth
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let sum = |f: fn(&DepthUsage) -> u64| by_depth.iter().map(f).sum::<u64>();
        UsageReport {
            calls: by_depth.iter().map(|d| d.calls).sum(),
            input_tokens: sum(|d| d.input_tokens),
            output_tokens: sum(|d| d.output_tokens),
            cached_input_tokens: sum(|d| d.cached_input_tokens),
            cost_usd: (!self.cost_unknown.load(Ordering::SeqCst))
                .then(|| self.cost_micro_usd.load(Ordering::SeqCst) as f64 / 1e6),
            estimated: self.estimated.load(Ordering::SeqCst),
            wall_ms: self.elapsed().as_millis() as u64,
            cached_calls: by_depth.iter().map(|d| d.cached_calls).sum(),
            tokens_saved: sum(|d| d.tokens_saved),
            by_depth,
        }
    }
}

/// The usage of depth `depth`, levels up to it created as needed.
fn level(levels: &mut Vec<DepthUsage>, depth: u32) -> &mut DepthUsage {
    while levels.len() <= depth as usize {
        let d = levels.len() as u32;
        levels.push(DepthUsage {
            depth: d,
            ..Default::default()
        });
    }
    &mut levels[depth as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn an_unpriced_model_under_a_cost_cap_stops_the_run() {
        let capped = Budget::new(BudgetConfig {
            max_cost_usd: Some(1.0),
            ..BudgetConfig::default()
        });
        capped.note_unpriced("mystery-model");
        capped.note_unpriced("other-model");
        let e = capped.reserve_call(0, 10).unwrap_err();
        assert_eq!(
            e,
            Exhausted::Unpriced {
                model: "mystery-model".into()
            }
        );
        assert!(
            e.to_string().contains("[llm.prices.\"mystery-model\"]"),
            "{e}"
        );
        // Without a cap an unknown price only makes the reported cost unknown.
        let free = Budget::new(BudgetConfig::default());
        free.note_unpriced("mystery-model");
        assert!(free.reserve_call(0, 10).is_ok());
    }

    #[test]
    fn env_overrides_defaults() {
        let c = BudgetConfig::from_lookup(env(&[
            ("RLM_MAX_DEPTH", "1"),
            ("RLM_MAX_CALLS", "7"),
            ("RLM_SUB_AGENT_CALLS", "3"),
            ("RLM_MAX_LLM_CALLS", "20"),
            ("RLM_ROOT_RESERVED", "2"),
            ("RLM_MAX_CONCURRENT", "4"),
            ("RLM_MAX_TOKENS", "1000"),
            ("RLM_TRUNCATE_LEN", "500"),
            ("RLM_MAX_COST_USD", "0.5"),
            ("RLM_MAX_WALL_SECS", "60"),
        ]))
        .unwrap();
        assert_eq!(c.max_depth, 1);
        assert_eq!(c.max_iterations, 7);
        assert_eq!(c.sub_iterations, 3);
        assert_eq!(c.max_llm_calls, 20);
        assert_eq!(c.root_reserved_calls, 2);
        assert_eq!(c.max_concurrent, 4);
        assert_eq!(c.max_total_tokens, 1000);
        assert_eq!(c.truncate_len, 500);
        assert_eq!(c.max_cost_usd, Some(0.5));
        assert_eq!(c.wall_clock, Duration::from_secs(60));
        assert_eq!(
            BudgetConfig::from_lookup(env(&[])).unwrap(),
            BudgetConfig::default()
        );
    }

    #[test]
    fn bad_env_value_is_a_clear_error() {
        let e = BudgetConfig::from_lookup(env(&[("RLM_MAX_LLM_CALLS", "lots")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RLM_MAX_LLM_CALLS"), "{e}");
        let e = BudgetConfig::from_lookup(env(&[("RLM_MAX_CONCURRENT", "0")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RLM_MAX_CONCURRENT"), "{e}");
        let e = BudgetConfig::from_lookup(env(&[("RLM_ROOT_RESERVED", "60")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RLM_ROOT_RESERVED"), "{e}");
        // Lowering the call limit alone shrinks the default reserve.
        let c = BudgetConfig::from_lookup(env(&[("RLM_MAX_LLM_CALLS", "4")])).unwrap();
        assert_eq!(c.root_reserved_calls, 2);
        let e = BudgetConfig::from_lookup(env(&[
            ("RLM_MAX_LLM_CALLS", "4"),
            ("RLM_ROOT_RESERVED", "4"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("RLM_ROOT_RESERVED"), "{e}");
    }

    #[test]
    fn sub_agents_cannot_use_root_reserve() {
        let b = Budget::new(BudgetConfig {
            max_llm_calls: 4,
            root_reserved_calls: 2,
            ..Default::default()
        });
        assert!(b.reserve_call(1, 0).is_ok());
        assert!(b.reserve_call(1, 0).is_ok());
        assert_eq!(
            b.reserve_call(1, 0),
            Err(Exhausted::Calls { used: 2, limit: 2 })
        );
        assert!(b.reserve_call(0, 0).is_ok());
        assert!(b.reserve_call(0, 0).is_ok());
        assert_eq!(
            b.reserve_call(0, 0),
            Err(Exhausted::Calls { used: 4, limit: 4 })
        );
        // The one synthesis call is still allowed.
        assert!(b.reserve_synthesis_call().is_ok());
    }

    #[test]
    fn tokens_checked_at_95_percent() {
        let b = Budget::new(BudgetConfig {
            max_total_tokens: 1000,
            ..Default::default()
        });
        b.record(
            0,
            CallUsage {
                input_tokens: 900,
                output_tokens: 40,
                ..Default::default()
            },
        );
        assert!(b.reserve_call(0, 10).is_ok());
        assert!(matches!(
            b.reserve_call(0, 20),
            Err(Exhausted::Tokens {
                used: 940,
                limit: 1000
            })
        ));
    }

    #[test]
    fn cost_cap_and_unknown_cost() {
        let b = Budget::new(BudgetConfig {
            max_cost_usd: Some(0.01),
            ..Default::default()
        });
        b.record(
            0,
            CallUsage {
                cost_usd: Some(0.004),
                ..Default::default()
            },
        );
        assert!(b.reserve_call(0, 0).is_ok());
        b.record(
            1,
            CallUsage {
                cost_usd: Some(0.007),
                ..Default::default()
            },
        );
        assert!(matches!(b.reserve_call(0, 0), Err(Exhausted::Cost { .. })));
        assert!((b.report().cost_usd.unwrap() - 0.011).abs() < 1e-9);
        b.record(
            1,
            CallUsage {
                cost_usd: None,
                ..Default::default()
            },
        );
        assert_eq!(
            b.report().cost_usd,
            None,
            "one unknown price makes the total unknown"
        );
    }

    #[test]
    fn wall_clock_and_cancel() {
        let b = Budget::new(BudgetConfig {
            wall_clock: Duration::ZERO,
            ..Default::default()
        });
        assert!(matches!(
            b.reserve_call(0, 0),
            Err(Exhausted::WallClock { .. })
        ));
        let b = Budget::new(BudgetConfig::default());
        b.cancel();
        assert_eq!(b.reserve_call(0, 0), Err(Exhausted::Cancelled));
        assert_eq!(b.reserve_synthesis_call(), Err(Exhausted::Cancelled));
    }

    #[test]
    fn report_sums_by_depth() {
        let b = Budget::new(BudgetConfig::default());
        b.record(
            0,
            CallUsage {
                input_tokens: 10,
                output_tokens: 1,
                cached_input_tokens: 5,
                ..Default::default()
            },
        );
        b.record(
            2,
            CallUsage {
                input_tokens: 20,
                output_tokens: 2,
                estimated: true,
                ..Default::default()
            },
        );
        let r = b.report();
        assert_eq!(r.calls, 2);
        assert_eq!(r.input_tokens, 30);
        assert_eq!(r.cached_input_tokens, 5);
        assert_eq!(r.by_depth.len(), 3);
        assert_eq!(r.by_depth[1].calls, 0);
        assert!(r.estimated);
    }

    #[test]
    fn concurrent_reservations_never_exceed_limit() {
        let b = std::sync::Arc::new(Budget::new(BudgetConfig {
            max_llm_calls: 100,
            ..Default::default()
        }));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..50).filter(|_| b.reserve_call(0, 0).is_ok()).count())
            })
            .collect();
        let ok: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(ok, 100);
    }
}
