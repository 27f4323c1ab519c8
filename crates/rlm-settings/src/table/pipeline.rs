//! Retrieval and the pipeline flow's inspectors (`[engine]`), and the per-question retrieval toggles.

use crate::spec::{Group, Kind, OldName, Setting};

use super::ENGINE;
use Group::Pipeline;

// ---- Retrieval and the pipeline ([engine]) --------------------------------

/// Per-file inspector.
pub const INSPECTOR: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "inspector",
    Some("RLM_INSPECTOR"),
    Kind::Choice(&["iterative", "per-chunk", "hypothesis", "repl"]),
    "iterative",
    "The pipeline flow's per-file inspector.",
)
.flag("--inspector")
.api("inspector");
/// The pipeline's citation policy.
pub const CITATION_POLICY: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "citation_policy",
    Some("RLM_CITATION_POLICY"),
    Kind::Choice(&["best_effort", "strict"]),
    "RLM_CITATIONS",
    "The pipeline's policy: `strict` drops claims without a verified citation, `best_effort` keeps and reports them. A question's `--citations` beats it.",
);
/// Low-recall stage 1.
pub const LOW_RECALL_MODE: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "low_recall_mode",
    Some("RLM_LOW_RECALL_MODE"),
    Kind::Bool,
    "false",
    "True: the pipeline's stage 1 retrieves `RLM_RAG_K` chunks instead of `RLM_HIGH_RECALL_K`. A question sets the opposite, `high_recall`.",
);
/// Per-question high recall.
pub const HIGH_RECALL: Setting = Setting::new(
    Pipeline,
    None,
    "high_recall",
    None,
    Kind::Bool,
    "not low_recall_mode",
    "Per question: the pipeline's stage 1 retrieves `RLM_HIGH_RECALL_K` entry chunks (true) or `RLM_RAG_K` (false).",
)
.flag("--high-recall")
.api("high_recall");
/// Per-question file expansion.
pub const EXPAND_FILES: Setting = Setting::new(
    Pipeline,
    None,
    "expand_files",
    None,
    Kind::Bool,
    "the flow's",
    "Per question: expand entry chunks to whole files (true asks for the pipeline flow, false for rag).",
)
.api("expand_files");
/// Per-question per-file inspection.
pub const RLM_SUMMARIZE: Setting = Setting::new(
    Pipeline,
    None,
    "rlm_summarize",
    None,
    Kind::Bool,
    "the flow's",
    "Per question: inspect and summarize each file (true asks for the pipeline flow, false for rag).",
)
.api("rlm_summarize");
/// Chunks of rag and low-recall stage 1.
pub const RAG_K: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "rag_k",
    Some("RLM_RAG_K"),
    Kind::Whole(1, 1_000),
    "10",
    "Chunks retrieved by `rag` and by the pipeline in low-recall mode.",
);
/// Entry chunks in high-recall mode.
pub const HIGH_RECALL_K: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "high_recall_k",
    Some("RLM_HIGH_RECALL_K"),
    Kind::Whole(1, 10_000),
    "200",
    "Entry chunks of the high-recall stage-1 retrieval.",
);
/// Files expanded at most.
pub const MAX_FILES: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "max_files",
    Some("RLM_MAX_FILES"),
    Kind::Whole(1, 10_000),
    "20",
    "Files the pipeline expands at most.",
);
/// Chunks expanded at most.
pub const MAX_CHUNKS: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "max_chunks",
    Some("RLM_MAX_CHUNKS"),
    Kind::Whole(1, 1_000_000),
    "500",
    "Chunks the pipeline expands at most, over all files.",
);
/// Iterative candidate cap.
pub const MAX_PREFILTER_CHUNKS: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "max_prefilter_chunks",
    Some("RLM_MAX_PREFILTER_CHUNKS"),
    Kind::Whole(1, 10_000),
    "60",
    "The iterative inspector's candidate cap per file.",
)
.old(&[OldName::Env("MAX_PREFILTER_CHUNKS")]);
/// Iterative rounds.
pub const ITERATIVE_ROUNDS: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "iterative_rounds",
    Some("RLM_ITERATIVE_ROUNDS"),
    Kind::Whole(1, 100),
    "5",
    "Rounds of the iterative inspector (`inspect_iteration` programs) per file.",
)
.old(&[
    OldName::Env("MAX_RLM_ITERATIONS"),
    OldName::Toml("max_rlm_iterations"),
]);
/// Fewest chunks a round keeps.
pub const MIN_KEEP: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "min_keep",
    Some("RLM_MIN_KEEP"),
    Kind::Whole(0, 1_000),
    "2",
    "Fewest chunks a non-final iterative round keeps.",
);
/// Chunks per file summary.
pub const MAX_SELECTED_CHUNKS_PER_FILE: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "max_selected_chunks_per_file",
    Some("RLM_MAX_SELECTED_CHUNKS_PER_FILE"),
    Kind::Whole(1, 10_000),
    "8",
    "Chunks a file's summary is written from.",
)
.old(&[OldName::Env("MAX_SELECTED_CHUNKS_PER_FILE")]);
/// Characters per file summary.
pub const MAX_TOTAL_CHARS_FOR_SUMMARY: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "max_total_chars_for_summary",
    Some("RLM_MAX_TOTAL_CHARS_FOR_SUMMARY"),
    Kind::Whole(1, 10_000_000),
    "12000",
    "Characters a file's summary is written from.",
)
.old(&[OldName::Env("MAX_TOTAL_CHARS_FOR_SUMMARY")]);
/// Iterative extracted data cap.
pub const MAX_EXTRACTED_BYTES: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "max_extracted_bytes",
    Some("RLM_MAX_EXTRACTED_BYTES"),
    Kind::Whole(0, 100_000_000),
    "50000",
    "Cap on the iterative inspector's `extracted_data`, in bytes.",
);
/// Hypothesis rounds.
pub const HYPOTHESIS_MAX_DEPTH: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "hypothesis_max_depth",
    Some("RLM_HYPOTHESIS_MAX_DEPTH"),
    Kind::Whole(1, 100),
    "5",
    "Rounds of the hypothesis inspector.",
);
/// Hypothesis stop score.
pub const HYPOTHESIS_CONFIDENCE: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "hypothesis_confidence",
    Some("RLM_HYPOTHESIS_CONFIDENCE"),
    Kind::Between(0.0, 1.0),
    "0.85",
    "Average relevance score at which the hypothesis inspector stops.",
);
/// Hypothesis keep score.
pub const HYPOTHESIS_KEEP: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "hypothesis_keep",
    Some("RLM_HYPOTHESIS_KEEP"),
    Kind::Between(0.0, 1.0),
    "0.5",
    "Score a chunk needs to stay in the hypothesis inspector.",
);
/// Chunks per relevance call.
pub const RELEVANCE_BATCH: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "relevance_batch",
    Some("RLM_RELEVANCE_BATCH"),
    Kind::Whole(1, 1_000),
    "8",
    "Chunks scored per relevance call.",
);
/// Model for code generation and triage.
pub const CODEGEN_MODEL: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "codegen_model",
    Some("RLM_CODEGEN_MODEL"),
    Kind::Text,
    "the sub model",
    "Model for the pipeline's code generation, intent, triage, hypotheses and relevance.",
);
/// Model for summaries.
pub const SUMMARY_MODEL: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "summary_model",
    Some("RLM_SUMMARY_MODEL"),
    Kind::Text,
    "the root model",
    "Model for per-file summaries and the cross-file merge.",
);
/// Recency ranking.
pub const RECENCY: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "recency",
    Some("RLM_RECENCY"),
    Kind::Choice(&["auto", "on", "off"]),
    "auto",
    "Prefer recent documents: `auto` for present-tense intents only, `on`, `off`.",
);
/// Per-chunk program time.
pub const CHUNK_EVAL_TIMEOUT_MS: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "chunk_eval_timeout_ms",
    Some("RLM_CHUNK_EVAL_TIMEOUT_MS"),
    Kind::Whole(1, 600_000),
    "2000",
    "Time limit of a per-chunk program, in milliseconds.",
);
/// Per-chunk program memory.
pub const CHUNK_EVAL_MEMORY_MB: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "chunk_eval_memory_mb",
    Some("RLM_CHUNK_EVAL_MEMORY_MB"),
    Kind::Whole(16, 65_536),
    "256",
    "Memory limit of a per-chunk program, in MiB.",
);
/// `inspect_iteration` time.
pub const ITERATION_TIMEOUT_MS: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "iteration_timeout_ms",
    Some("RLM_ITERATION_TIMEOUT_MS"),
    Kind::Whole(1, 600_000),
    "5000",
    "Time limit of an `inspect_iteration` program, in milliseconds.",
);
/// `inspect_iteration` memory.
pub const ITERATION_MEMORY_MB: Setting = Setting::new(
    Pipeline,
    ENGINE,
    "iteration_memory_mb",
    Some("RLM_ITERATION_MEMORY_MB"),
    Kind::Whole(16, 65_536),
    "512",
    "Memory limit of an `inspect_iteration` program, in MiB.",
);
