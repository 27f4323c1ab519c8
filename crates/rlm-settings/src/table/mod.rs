//! Every setting of `rlm`, declared once, one file per part of the
//! program. Readers in every crate name a setting by its constant
//! (re-exported here); `docs/configuration.md` is generated from [`ALL`]
//! (a test fails when the two differ).

mod engine;
mod models;
mod pipeline;
mod store;

pub use engine::*;
pub use models::*;
pub use pipeline::*;
pub use store::*;

use crate::spec::Setting;

const ENGINE: Option<&str> = Some("engine");
const LLM: Option<&str> = Some("llm");
const ROOT: Option<&str> = Some("llm.root");
const SUB: Option<&str> = Some("llm.sub");
const EMBEDDINGS: Option<&str> = Some("embeddings");
const STORE_TABLE: Option<&str> = Some("store");
const ENV_ONLY: Option<&str> = None;

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
    &LOCAL_DRAFT,
    &LOCAL_DRAFT_TOKENS,
    &AUTO_PULL,
    &PYPI_URL,
    &HUB_URL,
    &MAX_DEPTH,
    &MAX_ITERATIONS,
    &SUB_AGENT_CALLS,
    &MAX_LLM_CALLS,
    &SUBCALL_CACHE,
    &SUBCALL_CACHE_MB,
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
    &TURN_FORMAT,
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
    &EMBED_LOCAL_MODEL,
    &EMBED_E5_MODEL,
    &EMBED_PROVIDER_MODEL,
    &EMBED_BATCH,
    &OCR,
    &TESSERACT,
    &OCR_LANGUAGES,
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
        "RLM_REQUIRE_E5",
        "`1`: the multilingual-e5-small tests fail instead of skipping when its folder is missing",
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
