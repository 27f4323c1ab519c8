//! Settings of the `pipeline`, `rag` and `auto` flows, from the environment.

use serde::{Deserialize, Serialize};

use super::Flow;
use crate::citations::CitationPolicy;
use crate::values::{ConfigError, FromSettings, Lookup, Reader, Setting, table};

/// The per-file inspector of the `pipeline` flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Inspector {
    /// The iterative inspector (preferred): prefilter, boolean phase A, up to
    /// `RLM_ITERATIVE_ROUNDS` generated `inspect_iteration(chunks)` programs.
    #[default]
    Iterative,
    /// The per-chunk inspector: one generated `evaluate_chunk_relevance` per chunk.
    PerChunk,
    /// The hypothesis inspector: a hypothesis, batched per-chunk relevance scores, stop rules.
    Hypothesis,
    /// The `repl` loop scoped to one file's chunks.
    Repl,
}

impl Inspector {
    /// The name used on the command line and in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Inspector::Iterative => "iterative",
            Inspector::PerChunk => "per-chunk",
            Inspector::Hypothesis => "hypothesis",
            Inspector::Repl => "repl",
        }
    }
}

impl std::str::FromStr for Inspector {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "iterative" => Ok(Inspector::Iterative),
            "per-chunk" | "perchunk" => Ok(Inspector::PerChunk),
            "hypothesis" => Ok(Inspector::Hypothesis),
            "repl" => Ok(Inspector::Repl),
            other => Err(format!(
                "unknown inspector {other:?}; use iterative, per-chunk, hypothesis or repl"
            )
            .into()),
        }
    }
}

/// When selected chunks are ordered most recent first (recency
/// prioritization: the current role before earlier ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecencyMode {
    /// On only when the frozen intent asks about the present.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl std::str::FromStr for RecencyMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(RecencyMode::Auto),
            "on" | "true" | "1" => Ok(RecencyMode::On),
            "off" | "false" | "0" => Ok(RecencyMode::Off),
            other => Err(format!("unknown recency mode {other:?}; use auto, on or off").into()),
        }
    }
}

/// Settings of the flows beside `repl`. Every field has an environment
/// variable (docs/configuration.md lists them); [`FlowsConfig::default`] holds the defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowsConfig {
    /// `RLM_ENABLED` (default true): with no flow named in the request, use the
    /// RLM flow `rlm_flow`; false → `rag`.
    pub rlm_enabled: bool,
    /// `RLM_FLOW` (default `repl`): the RLM flow used when enabled (`repl` or `pipeline`).
    pub rlm_flow: Flow,
    /// `RLM_LOW_RECALL_MODE` (default false): when true the pipeline's stage-1
    /// retrieval uses the normal `k` instead of high recall.
    pub low_recall_mode: bool,
    /// `RLM_RAG_K` (default 10): chunks retrieved by `rag` and by the pipeline in low-recall mode.
    pub rag_k: usize,
    /// `RLM_HIGH_RECALL_K` (default 200): entry chunks in high-recall mode.
    pub high_recall_k: usize,
    /// `RLM_MAX_FILES` (default 20): files expanded at most.
    pub max_files: usize,
    /// `RLM_MAX_CHUNKS` (default 500): chunks expanded at most, over all files.
    pub max_chunks: usize,
    /// `RLM_CITATION_POLICY`: `strict` drops claims without a verified
    /// citation, `best_effort` keeps and reports them. Unset: `RLM_CITATIONS`.
    pub citation_policy: Option<CitationPolicy>,
    /// `RLM_INSPECTOR` (default `iterative`).
    pub inspector: Inspector,
    /// `RLM_MAX_PREFILTER_CHUNKS` (default 60): iterative mode's candidate cap.
    pub max_prefilter_chunks: usize,
    /// `RLM_ITERATIVE_ROUNDS` (default 5): iterative rounds.
    pub max_rlm_iterations: u32,
    /// `RLM_MIN_KEEP` (default 2): fewest chunks a non-final round keeps.
    pub min_keep: usize,
    /// `RLM_MAX_SELECTED_CHUNKS_PER_FILE` (default 8).
    pub max_selected_chunks_per_file: usize,
    /// `RLM_MAX_TOTAL_CHARS_FOR_SUMMARY` (default 12,000).
    pub max_total_chars_for_summary: usize,
    /// `RLM_MAX_EXTRACTED_BYTES` (default 50,000): iterative `extracted_data` cap.
    pub max_extracted_bytes: usize,
    /// `RLM_HYPOTHESIS_MAX_DEPTH` (default 5).
    pub hypothesis_max_depth: u32,
    /// `RLM_HYPOTHESIS_CONFIDENCE` (default 0.85): average score that stops.
    pub hypothesis_confidence: f64,
    /// `RLM_HYPOTHESIS_KEEP` (default 0.5): score a chunk needs to stay.
    pub hypothesis_keep: f64,
    /// `RLM_RELEVANCE_BATCH` (default 8): chunks scored per relevance call.
    pub relevance_batch: usize,
    /// `RLM_CODEGEN_MODEL`: model for code generation, intent, triage and
    /// scoring (default: the sub model).
    pub codegen_model: Option<String>,
    /// `RLM_SUMMARY_MODEL`: model for per-file summaries and the merge
    /// (default: the root model).
    pub summary_model: Option<String>,
    /// `RLM_RECENCY` (default `auto`).
    pub recency: RecencyMode,
    /// `RLM_CHUNK_EVAL_TIMEOUT_MS` (default 2,000): per-chunk program time.
    pub chunk_eval_timeout_ms: u64,
    /// `RLM_CHUNK_EVAL_MEMORY_MB` (default 256).
    pub chunk_eval_memory_mb: u64,
    /// `RLM_ITERATION_TIMEOUT_MS` (default 5,000): `inspect_iteration` time.
    pub iteration_timeout_ms: u64,
    /// `RLM_ITERATION_MEMORY_MB` (default 512).
    pub iteration_memory_mb: u64,
}

impl Default for FlowsConfig {
    fn default() -> Self {
        FlowsConfig {
            rlm_enabled: true,
            rlm_flow: Flow::Repl,
            low_recall_mode: false,
            rag_k: 10,
            high_recall_k: 200,
            max_files: 20,
            max_chunks: 500,
            citation_policy: None,
            inspector: Inspector::Iterative,
            max_prefilter_chunks: 60,
            max_rlm_iterations: 5,
            min_keep: 2,
            max_selected_chunks_per_file: 8,
            max_total_chars_for_summary: 12_000,
            max_extracted_bytes: 50_000,
            hypothesis_max_depth: 5,
            hypothesis_confidence: 0.85,
            hypothesis_keep: 0.5,
            relevance_batch: 8,
            codegen_model: None,
            summary_model: None,
            recency: RecencyMode::Auto,
            chunk_eval_timeout_ms: 2_000,
            chunk_eval_memory_mb: 256,
            iteration_timeout_ms: 5_000,
            iteration_memory_mb: 512,
        }
    }
}

impl FromSettings for FlowsConfig {
    /// The settings from `lookup`, every value checked by [`crate::values`].
    fn from_settings(lookup: Lookup<'_>) -> Result<Self, ConfigError> {
        let r = Reader::new(lookup);
        let mut c = FlowsConfig::default();
        if let Some(v) = r.boolean(&table::ENABLED)? {
            c.rlm_enabled = v;
        }
        if let Some(f) = r.found(&table::FLOW) {
            c.rlm_flow = match f.value.parse::<Flow>() {
                Ok(flow @ (Flow::Repl | Flow::Pipeline)) => flow,
                _ => {
                    return Err(format!(
                        "{}={:?} is not an RLM flow; use repl or pipeline",
                        f.name, f.value
                    )
                    .into());
                }
            };
        }
        if let Some(v) = r.boolean(&table::LOW_RECALL_MODE)? {
            c.low_recall_mode = v;
        }
        let wholes: [(&Setting, &mut usize); 8] = [
            (&table::RAG_K, &mut c.rag_k),
            (&table::HIGH_RECALL_K, &mut c.high_recall_k),
            (&table::MAX_FILES, &mut c.max_files),
            (&table::MAX_CHUNKS, &mut c.max_chunks),
            (&table::MAX_PREFILTER_CHUNKS, &mut c.max_prefilter_chunks),
            (&table::MIN_KEEP, &mut c.min_keep),
            (
                &table::MAX_SELECTED_CHUNKS_PER_FILE,
                &mut c.max_selected_chunks_per_file,
            ),
            (
                &table::MAX_TOTAL_CHARS_FOR_SUMMARY,
                &mut c.max_total_chars_for_summary,
            ),
        ];
        for (key, slot) in wholes {
            if let Some(v) = r.whole(key)? {
                *slot = v;
            }
        }
        if let Some(v) = r.whole(&table::MAX_EXTRACTED_BYTES)? {
            c.max_extracted_bytes = v;
        }
        if let Some(v) = r.whole(&table::RELEVANCE_BATCH)? {
            c.relevance_batch = v;
        }
        if let Some(v) = r.whole(&table::ITERATIVE_ROUNDS)? {
            c.max_rlm_iterations = v;
        }
        if let Some(v) = r.whole(&table::HYPOTHESIS_MAX_DEPTH)? {
            c.hypothesis_max_depth = v;
        }
        if let Some(v) = r.number(&table::HYPOTHESIS_CONFIDENCE)? {
            c.hypothesis_confidence = v;
        }
        if let Some(v) = r.number(&table::HYPOTHESIS_KEEP)? {
            c.hypothesis_keep = v;
        }
        if let Some(v) = r.parsed(&table::CITATION_POLICY)? {
            c.citation_policy = Some(v);
        }
        if let Some(v) = r.parsed(&table::INSPECTOR)? {
            c.inspector = v;
        }
        c.codegen_model = r.text(&table::CODEGEN_MODEL);
        c.summary_model = r.text(&table::SUMMARY_MODEL);
        if let Some(v) = r.parsed(&table::RECENCY)? {
            c.recency = v;
        }
        let limits: [(&Setting, &mut u64); 4] = [
            (&table::CHUNK_EVAL_TIMEOUT_MS, &mut c.chunk_eval_timeout_ms),
            (&table::CHUNK_EVAL_MEMORY_MB, &mut c.chunk_eval_memory_mb),
            (&table::ITERATION_TIMEOUT_MS, &mut c.iteration_timeout_ms),
            (&table::ITERATION_MEMORY_MB, &mut c.iteration_memory_mb),
        ];
        for (key, slot) in limits {
            if let Some(v) = r.whole(key)? {
                *slot = v;
            }
        }
        c.validate()?;
        Ok(c)
    }
}

impl FlowsConfig {
    /// Rejects settings that cannot work, naming the variable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive: [(&str, usize); 8] = [
            ("RLM_RAG_K", self.rag_k),
            ("RLM_HIGH_RECALL_K", self.high_recall_k),
            ("RLM_MAX_FILES", self.max_files),
            ("RLM_MAX_CHUNKS", self.max_chunks),
            ("RLM_MAX_PREFILTER_CHUNKS", self.max_prefilter_chunks),
            (
                "RLM_MAX_SELECTED_CHUNKS_PER_FILE",
                self.max_selected_chunks_per_file,
            ),
            (
                "RLM_MAX_TOTAL_CHARS_FOR_SUMMARY",
                self.max_total_chars_for_summary,
            ),
            ("RLM_RELEVANCE_BATCH", self.relevance_batch),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(format!("{name} must be at least 1").into());
            }
        }
        if self.max_rlm_iterations == 0 || self.hypothesis_max_depth == 0 {
            return Err(
                "RLM_ITERATIVE_ROUNDS and RLM_HYPOTHESIS_MAX_DEPTH must be at least 1".into(),
            );
        }
        for (name, v) in [
            ("RLM_HYPOTHESIS_CONFIDENCE", self.hypothesis_confidence),
            ("RLM_HYPOTHESIS_KEEP", self.hypothesis_keep),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must be between 0 and 1").into());
            }
        }
        if self.chunk_eval_timeout_ms == 0 || self.iteration_timeout_ms == 0 {
            return Err(
                "RLM_CHUNK_EVAL_TIMEOUT_MS and RLM_ITERATION_TIMEOUT_MS must be at least 1".into(),
            );
        }
        if self.chunk_eval_memory_mb < 16 || self.iteration_memory_mb < 16 {
            return Err(
                "RLM_CHUNK_EVAL_MEMORY_MB and RLM_ITERATION_MEMORY_MB must be at least 16".into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_env() {
        let c = FlowsConfig::from_lookup(|_| None).unwrap();
        assert_eq!(c, FlowsConfig::default());
        assert!(c.rlm_enabled);
        assert_eq!(c.max_prefilter_chunks, 60);
        let c = FlowsConfig::from_lookup(|k| {
            match k {
                "RLM_ENABLED" => Some("false"),
                "RLM_FLOW" => Some("pipeline"),
                "RLM_INSPECTOR" => Some("per-chunk"),
                "MAX_RLM_ITERATIONS" => Some("3"),
                "RLM_CITATION_POLICY" => Some("strict"),
                "RLM_SUMMARY_MODEL" => Some("big"),
                _ => None,
            }
            .map(String::from)
        })
        .unwrap();
        assert!(!c.rlm_enabled);
        assert_eq!(c.rlm_flow, Flow::Pipeline);
        assert_eq!(c.inspector, Inspector::PerChunk);
        assert_eq!(c.max_rlm_iterations, 3);
        assert_eq!(c.citation_policy, Some(CitationPolicy::Strict));
        assert_eq!(c.summary_model.as_deref(), Some("big"));
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (k, v, needle) in [
            ("RLM_ENABLED", "maybe", "RLM_ENABLED"),
            ("RLM_FLOW", "rag", "RLM_FLOW"),
            ("RLM_MAX_FILES", "0", "RLM_MAX_FILES"),
            ("RLM_MAX_CHUNKS", "many", "RLM_MAX_CHUNKS"),
            ("RLM_INSPECTOR", "magic", "per-chunk"),
            ("RLM_HYPOTHESIS_KEEP", "1.5", "RLM_HYPOTHESIS_KEEP"),
        ] {
            let e = FlowsConfig::from_lookup(|key| (key == k).then(|| v.to_string()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{k}={v}: {e}");
        }
    }
}
