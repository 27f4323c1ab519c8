//! The engine's settings: [`EngineConfig`] (budgets, context shape, citation
//! checks, the REPL loop's knobs) with the flows' own settings
//! ([`FlowsConfig`]), and [`Flow`], the strategy that answers a question.
//! Every value is read from `RLM_*` names through one lookup (flags,
//! request fields, the environment and `rlm.toml` all end up here) and
//! range-checked by [`crate::values`].

mod flows;

use serde::{Deserialize, Serialize};

pub use flows::{FlowsConfig, Inspector, RecencyMode};

use crate::budget::BudgetConfig;
use crate::citations::CitationPolicy;
use crate::corpus::ContextShape;
use crate::values::{ConfigError, FromSettings, Lookup, Reader, table};

/// Engine settings beyond the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Limits shared by the call tree.
    pub budget: BudgetConfig,
    /// Shape of `context` in the REPL. `RLM_CONTEXT_SHAPE`, default `string`.
    pub context_shape: ContextShape,
    /// What verification does to the answer. `RLM_CITATIONS`, default `best_effort`.
    pub citation_policy: CitationPolicy,
    /// Run citation verification. `RLM_VERIFY` (`off` turns it off), default true.
    pub verify_citations: bool,
    /// After verification, a sub-model judges whether each claim's passage
    /// entails it (one batched call per answer); without it claims with a
    /// passage stay unverified. `RLM_VERIFY` `on` (default) or `semantic`;
    /// `quotes` and `off` turn it off.
    #[serde(default = "default_judge_claims")]
    pub judge_claims: bool,
    /// Also mark in the answer text the claims the judge found not entailed
    /// or contradicted (dropped under the strict policy). `RLM_VERIFY=semantic`,
    /// default off.
    #[serde(default)]
    pub semantic_check: bool,
    /// End each REPL turn's reply at the end of its first code block (a stop
    /// sequence; the cell's real output comes next turn). `RLM_STOP_AFTER_CODE`:
    /// `on`, `off`, or `auto` (default: on for the embedded model, which
    /// otherwise invents an "Output:" and goes on in prose).
    /// `None` is `auto`: the command that picks the model decides.
    #[serde(default)]
    pub stop_after_code: Option<bool>,
    /// How the agents' replies are shaped (`RLM_TURN_FORMAT`), default `auto`.
    #[serde(default)]
    pub turn_format: TurnFormat,
    /// Report the documents that match the question but back no claim
    /// (`RLM_COVERAGE`, `--coverage`), default off.
    #[serde(default)]
    pub coverage: bool,
    /// Defer a FINAL written in the same turn as sub-calls (its results were not seen yet).
    /// `RLM_DEFER_FINAL`, default true.
    pub defer_final_after_fanout: bool,
    /// Full-text hits for the question shown by the root's inspection cell
    /// (their matching lines). `RLM_INSPECT_SEARCH_K`, default 3; 0 = off.
    #[serde(default = "default_inspect_search_k")]
    pub inspect_search_k: usize,
    /// Replies in a row without code or FINAL after which the agent gets its
    /// last turn (shown its first such reply, which is often an unmarked
    /// answer). `RLM_MAX_NO_CODE_REPLIES`, default 3.
    #[serde(default = "default_max_replies_without_code")]
    pub max_replies_without_code: u32,
    /// How much text the prompt says a sub-model can take, in characters.
    /// `RLM_SUB_CONTEXT_CHARS`, default 100,000.
    pub sub_context_chars: usize,
    /// Root model name (for the trace; the client decides the real one).
    pub root_model: String,
    /// Sub model name (for the trace).
    pub sub_model: String,
    /// Settings of the `pipeline`, `rag` and `auto` flows and the RLM switch.
    #[serde(default)]
    pub flows: FlowsConfig,
    /// Which Python runs the REPL's cells: `monty` (default) or `cpython`
    /// (the user's Python under OS isolation). `RLM_SANDBOX`, `--sandbox`.
    #[serde(default)]
    pub sandbox: rlm_sandbox::SandboxBackend,
    /// Serve a reproducible model call answered before from the store's
    /// reply cache, free of budget, and keep new replies there.
    /// `RLM_SUBCALL_CACHE`, `--no-cache`; default on.
    pub reply_cache: bool,
    /// The reply cache's size cap in bytes (`RLM_SUBCALL_CACHE_MB`, default
    /// 256 MiB); the least recently used replies go first.
    pub reply_cache_bytes: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            budget: BudgetConfig::default(),
            context_shape: ContextShape::String,
            citation_policy: CitationPolicy::BestEffort,
            verify_citations: true,
            judge_claims: true,
            semantic_check: false,
            coverage: false,
            stop_after_code: None,
            turn_format: TurnFormat::Auto,
            defer_final_after_fanout: true,
            max_replies_without_code: default_max_replies_without_code(),
            inspect_search_k: default_inspect_search_k(),
            sub_context_chars: 100_000,
            root_model: String::new(),
            sub_model: String::new(),
            flows: FlowsConfig::default(),
            sandbox: rlm_sandbox::SandboxBackend::Monty,
            reply_cache: true,
            reply_cache_bytes: rlm_corpus::reply_cache::DEFAULT_REPLY_CACHE_BYTES,
        }
    }
}

/// How the agents' replies are shaped (`RLM_TURN_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnFormat {
    /// Structured; an endpoint that refuses the schema gets text replies.
    #[default]
    Auto,
    /// A JSON turn the provider constrains: code to run, an answer whose
    /// sources name passages the run was shown, or "not found".
    Structured,
    /// The paper's protocol: ```repl blocks and `FINAL(...)`.
    Text,
}

impl TurnFormat {
    /// True when replies are asked for in the structured format.
    pub fn structured(self) -> bool {
        self != TurnFormat::Text
    }
}

impl std::str::FromStr for TurnFormat {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(TurnFormat::Auto),
            "structured" | "json" => Ok(TurnFormat::Structured),
            "text" => Ok(TurnFormat::Text),
            other => {
                Err(format!("unknown turn format {other:?}; use auto, structured or text").into())
            }
        }
    }
}

fn default_judge_claims() -> bool {
    true
}

fn default_max_replies_without_code() -> u32 {
    3
}

fn default_inspect_search_k() -> usize {
    3
}

impl EngineConfig {
    /// Records the models the client will call (for the trace) and settles
    /// what `auto` settings depend on them: `embedded` is true for the
    /// in-process model, which gets the stop after a code block.
    pub fn set_models(&mut self, root: &str, sub: &str, embedded: bool) {
        self.root_model = root.to_string();
        self.sub_model = sub.to_string();
        self.stop_after_code.get_or_insert(embedded);
    }
}

impl FromSettings for EngineConfig {
    /// The settings from `lookup` (a question's own settings, the
    /// environment, a settings file, strongest first). Every setting of the
    /// engine is read here, with the rules of [`crate::values`]: this is the
    /// one place values from flags, API requests, the environment and
    /// `rlm.toml` are checked.
    fn from_settings(lookup: Lookup<'_>) -> Result<Self, ConfigError> {
        let r = Reader::new(lookup);
        let mut c = EngineConfig {
            budget: BudgetConfig::from_settings(lookup)?,
            flows: FlowsConfig::from_settings(lookup)?,
            ..Default::default()
        };
        if let Some(v) = r.parsed(&table::CONTEXT_SHAPE)? {
            c.context_shape = v;
        }
        if let Some(v) = r.parsed(&table::SANDBOX)? {
            c.sandbox = v;
        }
        if let Some(v) = r.parsed(&table::CITATIONS)? {
            c.citation_policy = v;
        }
        if let Some(v) = r.parsed::<VerifyMode>(&table::VERIFY)? {
            v.apply(&mut c);
        }
        if let Some(v) = r.boolean(&table::COVERAGE)? {
            c.coverage = v;
        }
        if let Some(f) = r.found(&table::STOP_AFTER_CODE) {
            c.stop_after_code = match f.value.trim().to_ascii_lowercase().as_str() {
                "auto" => None,
                _ => r.boolean(&table::STOP_AFTER_CODE)?,
            };
        }
        if let Some(v) = r.parsed(&table::TURN_FORMAT)? {
            c.turn_format = v;
        }
        if let Some(v) = r.boolean(&table::SUBCALL_CACHE)? {
            c.reply_cache = v;
        }
        if let Some(v) = r.whole::<u64>(&table::SUBCALL_CACHE_MB)? {
            c.reply_cache_bytes = v * 1024 * 1024;
        }
        if let Some(v) = r.boolean(&table::DEFER_FINAL)? {
            c.defer_final_after_fanout = v;
        }
        if let Some(v) = r.whole(&table::INSPECT_SEARCH_K)? {
            c.inspect_search_k = v;
        }
        if let Some(v) = r.whole(&table::MAX_NO_CODE_REPLIES)? {
            c.max_replies_without_code = v;
        }
        if let Some(v) = r.whole(&table::SUB_CONTEXT_CHARS)? {
            c.sub_context_chars = v;
        }
        Ok(c)
    }
}

/// How answers are checked: `off`, `quotes` (citations verified, claims
/// given passages, no judge: claims are then unverified, never supported),
/// `on` (and a sub-model judges whether each passage entails its claim) or
/// `semantic` (and the claims it does not find entailed are marked in the
/// answer text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyMode {
    /// No checks.
    Off,
    /// Citations verified, claims given passages; no judge call.
    Quotes,
    /// As `Quotes`, plus the entailment judge.
    On,
    /// As `On`, and the answer text marked by the verdicts.
    Semantic,
}

impl VerifyMode {
    /// Sets the checks of `config` to this mode.
    pub fn apply(self, config: &mut EngineConfig) {
        config.verify_citations = self != VerifyMode::Off;
        config.judge_claims = matches!(self, VerifyMode::On | VerifyMode::Semantic);
        config.semantic_check = self == VerifyMode::Semantic;
    }
}

impl std::str::FromStr for VerifyMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => Ok(VerifyMode::On),
            "off" | "false" | "no" | "0" => Ok(VerifyMode::Off),
            "semantic" => Ok(VerifyMode::Semantic),
            "quotes" => Ok(VerifyMode::Quotes),
            other => Err(format!(
                "{other:?} is not a verification mode; use on, quotes, semantic or off"
            )
            .into()),
        }
    }
}

/// The strategy answering a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// None named: `RLM_ENABLED` picks `RLM_FLOW` (default `repl`) or `rag`.
    #[default]
    Configured,
    /// The paper's REPL loop over the whole corpus.
    Repl,
    /// Intent, high-recall retrieval, whole files, per-file inspectors, cross-file merge.
    Pipeline,
    /// RLM off: top-k retrieval, one answer call, citations.
    Rag,
    /// One cheap triage call picks `rag` or the RLM flow.
    Auto,
}

impl Flow {
    /// The name on the command line and in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Flow::Configured => "configured",
            Flow::Repl => "repl",
            Flow::Pipeline => "pipeline",
            Flow::Rag => "rag",
            Flow::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Flow {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "repl" => Ok(Flow::Repl),
            "pipeline" => Ok(Flow::Pipeline),
            "rag" => Ok(Flow::Rag),
            "auto" => Ok(Flow::Auto),
            other => Err(format!("unknown flow {other:?}; use repl, pipeline, rag or auto").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_config() {
        let get = |k: &str| match k {
            "RLM_CONTEXT_SHAPE" => Some("list".to_string()),
            "RLM_CITATIONS" => Some("strict".to_string()),
            "RLM_VERIFY_CITATIONS" => Some("false".to_string()),
            "RLM_DEFER_FINAL" => Some("0".to_string()),
            "RLM_MAX_NO_CODE_REPLIES" => Some("5".to_string()),
            "RLM_INSPECT_SEARCH_K" => Some("0".to_string()),
            _ => None,
        };
        let c = EngineConfig::from_lookup(get).unwrap();
        assert_eq!(c.max_replies_without_code, 5);
        assert_eq!(c.inspect_search_k, 0);
        let e = EngineConfig::from_lookup(|k| (k == "RLM_INSPECT_SEARCH_K").then(|| "99".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 to 50"), "{e}");
        for bad in ["0", "two"] {
            let e = EngineConfig::from_lookup(|k| {
                (k == "RLM_MAX_NO_CODE_REPLIES").then(|| bad.to_string())
            })
            .unwrap_err()
            .to_string();
            assert!(e.contains("from 1 to 100"), "{e}");
        }
        assert_eq!(c.context_shape, ContextShape::List);
        assert_eq!(c.citation_policy, CitationPolicy::Strict);
        assert!(!c.verify_citations);
        assert!(!c.defer_final_after_fanout);
        let e = EngineConfig::from_lookup(|k| {
            (k == "RLM_VERIFY_CITATIONS").then(|| "maybe".to_string())
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("RLM_VERIFY_CITATIONS"));
        let e =
            EngineConfig::from_lookup(|k| (k == "RLM_CONTEXT_SHAPE").then(|| "tree".to_string()))
                .unwrap_err()
                .to_string();
        assert!(e.contains("string or list"));
    }

    #[test]
    fn stop_after_code_is_auto_on_or_off() {
        let with = |v: &str| {
            let v = v.to_string();
            EngineConfig::from_lookup(move |k| (k == "RLM_STOP_AFTER_CODE").then(|| v.clone()))
        };
        assert_eq!(with("auto").unwrap().stop_after_code, None);
        assert_eq!(with("on").unwrap().stop_after_code, Some(true));
        assert_eq!(with("off").unwrap().stop_after_code, Some(false));
        assert!(
            with("sometimes")
                .unwrap_err()
                .to_string()
                .contains("RLM_STOP_AFTER_CODE")
        );
        let mut c = EngineConfig::default();
        c.set_models("a", "b", true);
        assert_eq!(c.stop_after_code, Some(true));
        let mut c = with("off").unwrap();
        c.set_models("a", "b", true);
        assert_eq!(c.stop_after_code, Some(false), "an explicit setting wins");
    }

    #[test]
    fn flow_parse() {
        assert_eq!("repl".parse::<Flow>().unwrap(), Flow::Repl);
        assert_eq!("rag".parse::<Flow>().unwrap(), Flow::Rag);
        assert!(
            "magic"
                .parse::<Flow>()
                .unwrap_err()
                .to_string()
                .contains("pipeline")
        );
    }
}
