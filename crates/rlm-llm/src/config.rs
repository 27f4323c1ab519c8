//! Configuration: flags > environment > `rlm.toml` (`[llm]` table) > defaults.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use crate::error::LlmError;
use crate::pricing::{ContextWindows, Price, PriceTable};
use crate::types::ModelRole;

/// The config file read when none is named: `./rlm.toml`, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = "rlm.toml";
/// Default per-attempt timeout (`RLM_TIMEOUT`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);
/// Default concurrency limit per client (`RLM_MAX_CONCURRENT`).
pub const DEFAULT_MAX_CONCURRENT: usize = 12;
/// Upper bound on `RLM_MAX_CONCURRENT`.
pub const MAX_CONCURRENT_LIMIT: usize = 1024;
/// Default per-attempt timeout of the `local` provider: a request may wait
/// behind others for a free sequence.
pub const DEFAULT_LOCAL_TIMEOUT: Duration = Duration::from_secs(1800);
/// Name of the default local model (its file is `<name>.gguf`).
pub const DEFAULT_LOCAL_MODEL_NAME: &str = "qwen2.5-coder-1.5b-instruct";
/// Default context window of the `local` provider (`RLM_LOCAL_CONTEXT`).
pub const DEFAULT_LOCAL_CONTEXT: u64 = 16_384;
/// Default Azure OpenAI `api-version`.
pub const DEFAULT_AZURE_API_VERSION: &str = "2024-10-21";
/// Default `anthropic-version` header.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// Which wire protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderKind {
    /// OpenAI Chat Completions at api.openai.com or any compatible server.
    #[default]
    OpenAi,
    /// Azure OpenAI: deployment in the path, `api-version`, `api-key` header.
    Azure,
    /// Anthropic Messages API.
    Anthropic,
    /// The embedded model: a GGUF run in-process by llama.cpp (`rlm-local`;
    /// needs the `local` feature). No key, no network.
    Local,
}

impl ProviderKind {
    /// `openai`, `azure` or `anthropic`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Azure => "azure",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Local => "local",
        }
    }

    /// The provider's own API-key variable, the fallback for `RLM_API_KEY`.
    pub fn key_env_var(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Azure => "AZURE_OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            // The local model needs no key; a stray RLM_API_KEY is ignored.
            ProviderKind::Local => "RLM_API_KEY",
        }
    }

    /// The default base URL; Azure has none (it is the resource endpoint).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some("https://api.openai.com/v1"),
            ProviderKind::Azure => None,
            ProviderKind::Anthropic => Some("https://api.anthropic.com/v1"),
            ProviderKind::Local => None,
        }
    }

    /// Default (root, sub) models; Azure deployments have no default names.
    fn default_models(self) -> Option<(&'static str, &'static str)> {
        match self {
            ProviderKind::OpenAi => Some(("gpt-4.1", "gpt-4.1-mini")),
            ProviderKind::Azure => None,
            ProviderKind::Anthropic => Some(("claude-sonnet-4-5", "claude-haiku-4-5")),
            // Named after the model file; resolved in `LlmConfig::resolve`.
            ProviderKind::Local => None,
        }
    }
}

impl FromStr for ProviderKind {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, LlmError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" => Ok(ProviderKind::OpenAi),
            "azure" | "azure-openai" | "azure_openai" => Ok(ProviderKind::Azure),
            "anthropic" | "claude" => Ok(ProviderKind::Anthropic),
            "local" | "llama.cpp" | "llamacpp" => Ok(ProviderKind::Local),
            other => Err(LlmError::Config(format!(
                "unknown provider '{other}': use openai, azure, anthropic or local"
            ))),
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An API key. Its `Debug` never shows the value, and it is never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The secret itself, for the auth header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Model and sampling settings of one [`ModelRole`].
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSettings {
    /// Model (or Azure deployment) name.
    pub model: String,
    /// Sampling temperature; provider default when `None`.
    pub temperature: Option<f32>,
    /// Output token cap; provider default when `None` (Anthropic: 4096).
    pub max_output_tokens: Option<u32>,
}

/// How failed attempts are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts beyond the first (0 = never retry).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles each time.
    pub initial_backoff: Duration,
    /// Backoff ceiling.
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited for: the call fails.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

/// Everything a client needs. Build it with [`LlmConfig::load`].
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// Wire protocol.
    pub provider: ProviderKind,
    /// API base, e.g. `https://api.openai.com/v1`, `http://127.0.0.1:8088/v1`,
    /// `https://my-resource.openai.azure.com` (Azure).
    pub base_url: String,
    /// The key, when one was found.
    pub api_key: Option<ApiKey>,
    /// Where the key came from (a variable name, `--api-key` or the config file).
    pub api_key_source: Option<String>,
    /// The root agent's model and sampling.
    pub root: RoleSettings,
    /// The sub-agents' model and sampling.
    pub sub: RoleSettings,
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Requests in flight at once per client.
    pub max_concurrent: usize,
    /// Retry behavior.
    pub retry: RetryPolicy,
    /// Azure `api-version` query parameter.
    pub azure_api_version: String,
    /// Anthropic `anthropic-version` header.
    pub anthropic_version: String,
    /// Prices for cost accounting.
    pub prices: PriceTable,
    /// Context windows for the pre-check.
    pub context_windows: ContextWindows,
    /// Record every exchange to this JSONL cassette.
    pub record: Option<PathBuf>,
    /// Answer from this cassette instead of the network.
    pub replay: Option<PathBuf>,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// The GGUF the `local` provider runs (`RLM_LOCAL_MODEL` / `local_model`);
    /// `None`: the default model in the models directory.
    pub local_model: Option<PathBuf>,
    /// True when `local` was chosen because nothing else was configured (no
    /// provider, key, base URL or replay cassette); the CLI says so once.
    pub local_auto_selected: bool,
    /// Ask OpenAI-compatible servers to stream replies (server-sent events)
    /// when the request has a token sink (`RLM_STREAM`, `[llm] stream`;
    /// default on). The local model always streams; Anthropic replies arrive
    /// whole.
    pub stream: bool,
}

impl LlmConfig {
    /// The settings of `role`.
    pub fn role(&self, role: ModelRole) -> &RoleSettings {
        match role {
            ModelRole::Root => &self.root,
            ModelRole::Sub => &self.sub,
        }
    }

    /// Loads from `flags`, the process environment and the config file
    /// (`flags.config_file`, else `./rlm.toml` if present).
    pub fn load(flags: &ConfigOverrides) -> Result<Self, LlmError> {
        Self::load_with_env(flags, |name| std::env::var(name).ok())
    }

    /// Like [`LlmConfig::load`] with an explicit environment lookup (for tests
    /// and for embedding).
    pub fn load_with_env(
        flags: &ConfigOverrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let (file, config_file) = read_config_file(flags.config_file.as_deref())?;
        Self::resolve(flags, &env, file, config_file)
    }

    /// Builds from an in-memory `rlm.toml` text (flags and `env` still win).
    pub fn from_toml_str(
        toml_text: &str,
        flags: &ConfigOverrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let file = parse_config_text(toml_text, "<string>")?;
        Self::resolve(flags, &env, file, None)
    }

    fn resolve(
        flags: &ConfigOverrides,
        env: &dyn Fn(&str) -> Option<String>,
        file: LlmFile,
        config_file: Option<PathBuf>,
    ) -> Result<Self, LlmError> {
        // Empty variables count as unset, as shells make them easy to leave behind.
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());

        let provider = match (&flags.provider, env("RLM_PROVIDER"), &file.provider) {
            (Some(p), _, _) => *p,
            (None, Some(v), _) => v.parse()?,
            (None, None, Some(v)) => v.parse()?,
            (None, None, None) => ProviderKind::default(),
        };
        // Nothing configured at all: with the embedded model built in, run
        // on it instead of failing for want of an API key.
        let local_auto_selected = cfg!(feature = "local")
            && flags.provider.is_none()
            && env("RLM_PROVIDER").is_none()
            && file.provider.is_none()
            && flags.api_key.is_none()
            && env("RLM_API_KEY").is_none()
            && [
                "OPENAI_API_KEY",
                "AZURE_OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
            ]
            .iter()
            .all(|var| env(var).is_none())
            && file.api_key.is_none()
            && flags.base_url.is_none()
            && env("RLM_BASE_URL").is_none()
            && file.base_url.is_none()
            && flags.replay.is_none();
        let provider = if local_auto_selected {
            ProviderKind::Local
        } else {
            provider
        };
        let local_model = env("RLM_LOCAL_MODEL")
            .map(PathBuf::from)
            .or_else(|| file.local_model.clone());

        let base_url = flags
            .base_url
            .clone()
            .or_else(|| env("RLM_BASE_URL"))
            .or(file.base_url)
            .or_else(|| provider.default_base_url().map(str::to_string))
            // The local model has no URL; `local:` keeps messages meaningful.
            .or_else(|| (provider == ProviderKind::Local).then(|| "local:".to_string()))
            .ok_or_else(|| {
                LlmError::Config(
                    "Azure OpenAI needs the resource endpoint: set RLM_BASE_URL=https://<resource>.openai.azure.com"
                        .into(),
                )
            })?;
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if provider != ProviderKind::Local
            && !(base_url.starts_with("http://") || base_url.starts_with("https://"))
        {
            return Err(LlmError::Config(format!(
                "base URL '{base_url}' must start with http:// or https://"
            )));
        }

        let (api_key, api_key_source) = if let Some(k) = &flags.api_key {
            (Some(k.clone()), Some("--api-key".to_string()))
        } else if let Some(k) = env("RLM_API_KEY") {
            (Some(ApiKey::new(k)), Some("RLM_API_KEY".to_string()))
        } else if let Some(k) = env(provider.key_env_var()) {
            (
                Some(ApiKey::new(k)),
                Some(provider.key_env_var().to_string()),
            )
        } else if let Some(k) = file.api_key.clone() {
            (
                Some(ApiKey::new(k)),
                Some("rlm.toml [llm] api_key".to_string()),
            )
        } else {
            (None, None)
        };

        let primary = flags
            .primary_model
            .clone()
            .or_else(|| env("RLM_PRIMARY_MODEL"))
            .or(file.primary_model);
        let sub = flags
            .sub_model
            .clone()
            .or_else(|| env("RLM_SUB_MODEL"))
            .or(file.sub_model);
        // The local model is named after its file (`qwen2.5-coder-1.5b-instruct`).
        let local_name = local_model_name(local_model.as_deref());
        let defaults = match provider {
            ProviderKind::Local => Some((local_name.as_str(), local_name.as_str())),
            _ => provider.default_models(),
        };
        // One named model serves both roles unless the other is named too: a
        // local server usually has exactly one.
        let (root_model, sub_model) = match (primary, sub, defaults) {
            (Some(p), Some(s), _) => (p, s),
            (Some(p), None, _) => (p.clone(), p),
            (None, Some(s), Some((d, _))) => (d.to_string(), s),
            (None, None, Some((d, s))) => (d.to_string(), s.to_string()),
            (None, _, None) => {
                return Err(LlmError::Config(
                    "Azure OpenAI has no default deployment: set RLM_PRIMARY_MODEL (and optionally RLM_SUB_MODEL) to your deployment names".into(),
                ));
            }
        };

        let timeout_secs = match (flags.timeout_secs, env("RLM_TIMEOUT")) {
            (Some(t), _) => Some(t),
            (None, Some(v)) => Some(parse_env::<f64>("RLM_TIMEOUT", &v, "a number of seconds")?),
            (None, None) => file.timeout_secs,
        };
        let timeout = match timeout_secs {
            // CPU inference queues fan-out behind a few parallel sequences.
            None if provider == ProviderKind::Local => DEFAULT_LOCAL_TIMEOUT,
            None => DEFAULT_TIMEOUT,
            Some(t) if t.is_finite() && t > 0.0 && t <= 86_400.0 => Duration::from_secs_f64(t),
            Some(t) => {
                return Err(LlmError::Config(format!(
                    "timeout {t} must be more than 0 and at most 86400 seconds"
                )));
            }
        };

        let max_concurrent = match (flags.max_concurrent, env("RLM_MAX_CONCURRENT")) {
            (Some(n), _) => n,
            (None, Some(v)) => parse_env::<usize>("RLM_MAX_CONCURRENT", &v, "a whole number")?,
            (None, None) => file.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT),
        };
        if !(1..=MAX_CONCURRENT_LIMIT).contains(&max_concurrent) {
            return Err(LlmError::Config(format!(
                "max concurrent requests {max_concurrent} must be between 1 and {MAX_CONCURRENT_LIMIT}"
            )));
        }

        let role = |role: ModelRole,
                    model: String,
                    flag_temp: Option<f32>,
                    flag_max: Option<u32>,
                    file_role: &RoleFile|
         -> Result<RoleSettings, LlmError> {
            let upper = role.as_str().to_ascii_uppercase();
            let temp_var = format!("RLM_{upper}_TEMPERATURE");
            let max_var = format!("RLM_{upper}_MAX_OUTPUT_TOKENS");
            let temperature = match (flag_temp, env(&temp_var)) {
                (Some(t), _) => Some(t),
                (None, Some(v)) => Some(parse_env::<f32>(&temp_var, &v, "a number")?),
                (None, None) => file_role.temperature,
            };
            if let Some(t) = temperature
                && !(0.0..=2.0).contains(&t)
            {
                return Err(LlmError::Config(format!(
                    "{} temperature {t} must be between 0 and 2",
                    role.as_str()
                )));
            }
            let max_output_tokens = match (flag_max, env(&max_var)) {
                (Some(m), _) => Some(m),
                (None, Some(v)) => Some(parse_env::<u32>(&max_var, &v, "a whole number")?),
                (None, None) => file_role.max_output_tokens,
            };
            if max_output_tokens == Some(0) {
                return Err(LlmError::Config(format!(
                    "{} max output tokens must be at least 1",
                    role.as_str()
                )));
            }
            if model.trim().is_empty() {
                return Err(LlmError::Config(format!(
                    "{} model name is empty",
                    role.as_str()
                )));
            }
            Ok(RoleSettings {
                model,
                temperature,
                max_output_tokens,
            })
        };
        let root = role(
            ModelRole::Root,
            root_model,
            flags.root_temperature,
            flags.root_max_output_tokens,
            &file.root,
        )?;
        let sub = role(
            ModelRole::Sub,
            sub_model,
            flags.sub_temperature,
            flags.sub_max_output_tokens,
            &file.sub,
        )?;

        let defaults = RetryPolicy::default();
        let retry = RetryPolicy {
            max_retries: flags
                .max_retries
                .or(file.max_retries)
                .unwrap_or(defaults.max_retries),
            initial_backoff: file
                .initial_backoff_ms
                .map(Duration::from_millis)
                .unwrap_or(defaults.initial_backoff),
            max_backoff: file
                .max_backoff_ms
                .map(Duration::from_millis)
                .unwrap_or(defaults.max_backoff),
            max_retry_after: file
                .max_retry_after_secs
                .map(Duration::from_secs)
                .unwrap_or(defaults.max_retry_after),
        };
        if retry.max_retries > 20 {
            return Err(LlmError::Config(format!(
                "max_retries {} is more than 20",
                retry.max_retries
            )));
        }

        let stream = match env("RLM_STREAM") {
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "on" | "true" | "yes" | "1" => true,
                "off" | "false" | "no" | "0" => false,
                _ => {
                    return Err(LlmError::Config(format!(
                        "RLM_STREAM='{v}' is not on or off"
                    )));
                }
            },
            None => file.stream.unwrap_or(true),
        };
        let prices = local_prices(provider, &root, &sub, file.prices);
        let context_windows = local_windows(provider, &root, &sub, &env, file.context_windows)?;
        Ok(LlmConfig {
            provider,
            base_url,
            api_key,
            api_key_source,
            root,
            sub,
            timeout,
            max_concurrent,
            retry,
            azure_api_version: file
                .azure_api_version
                .unwrap_or_else(|| DEFAULT_AZURE_API_VERSION.to_string()),
            anthropic_version: file
                .anthropic_version
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_VERSION.to_string()),
            prices: PriceTable::with_overrides(prices),
            context_windows: ContextWindows::with_overrides(context_windows),
            record: flags.record.clone(),
            replay: flags.replay.clone(),
            config_file,
            local_model,
            local_auto_selected,
            stream,
        })
    }
}

/// Values given on the command line (or by an embedding program); each one
/// beats the environment and the config file.
#[derive(Debug, Clone, Default)]
pub struct ConfigOverrides {
    /// Config file to read instead of `./rlm.toml` (must exist).
    pub config_file: Option<PathBuf>,
    /// Provider.
    pub provider: Option<ProviderKind>,
    /// Base URL.
    pub base_url: Option<String>,
    /// API key.
    pub api_key: Option<ApiKey>,
    /// Root model.
    pub primary_model: Option<String>,
    /// Sub model.
    pub sub_model: Option<String>,
    /// Per-attempt timeout in seconds.
    pub timeout_secs: Option<f64>,
    /// Concurrency limit.
    pub max_concurrent: Option<usize>,
    /// Retries beyond the first attempt.
    pub max_retries: Option<u32>,
    /// Root temperature.
    pub root_temperature: Option<f32>,
    /// Sub temperature.
    pub sub_temperature: Option<f32>,
    /// Root output token cap.
    pub root_max_output_tokens: Option<u32>,
    /// Sub output token cap.
    pub sub_max_output_tokens: Option<u32>,
    /// Record exchanges to this cassette.
    pub record: Option<PathBuf>,
    /// Replay exchanges from this cassette.
    pub replay: Option<PathBuf>,
}

/// The `[llm]` table of `rlm.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmFile {
    provider: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    primary_model: Option<String>,
    sub_model: Option<String>,
    timeout_secs: Option<f64>,
    max_concurrent: Option<usize>,
    max_retries: Option<u32>,
    initial_backoff_ms: Option<u64>,
    max_backoff_ms: Option<u64>,
    max_retry_after_secs: Option<u64>,
    azure_api_version: Option<String>,
    anthropic_version: Option<String>,
    #[serde(default)]
    root: RoleFile,
    #[serde(default)]
    sub: RoleFile,
    #[serde(default)]
    prices: BTreeMap<String, Price>,
    #[serde(default)]
    context_windows: BTreeMap<String, u64>,
    local_model: Option<PathBuf>,
    stream: Option<bool>,
}

/// `[llm.root]` / `[llm.sub]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    temperature: Option<f32>,
    max_output_tokens: Option<u32>,
}

/// The whole file: only `[llm]` is ours; other tables belong to other crates.
#[derive(Debug, Default, Deserialize)]
struct FileRoot {
    #[serde(default)]
    llm: LlmFile,
}

fn parse_config_text(text: &str, origin: &str) -> Result<LlmFile, LlmError> {
    let root: FileRoot = toml::from_str(text).map_err(|e| {
        LlmError::Config(format!(
            "{origin}: {}",
            e.to_string().trim().replace('\n', " ")
        ))
    })?;
    Ok(root.llm)
}

fn read_config_file(explicit: Option<&Path>) -> Result<(LlmFile, Option<PathBuf>), LlmError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let p = PathBuf::from(DEFAULT_CONFIG_FILE);
            if !p.is_file() {
                return Ok((LlmFile::default(), None));
            }
            p
        }
    };
    let text = crate::bounded::read_text(&path, "config file", crate::bounded::CONFIG_FILE_LIMIT)
        .map_err(LlmError::Config)?;
    let file = parse_config_text(&text, &path.display().to_string())?;
    Ok((file, Some(path)))
}

fn parse_env<T: FromStr>(name: &str, value: &str, what: &str) -> Result<T, LlmError> {
    value
        .trim()
        .parse()
        .map_err(|_| LlmError::Config(format!("{name}='{value}' is not {what}")))
}

/// The local model's name: the file stem of `RLM_LOCAL_MODEL`, else the
/// default model's.
fn local_model_name(path: Option<&Path>) -> String {
    path.and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_LOCAL_MODEL_NAME.to_string())
}

/// The local model costs nothing: a zero price for its names unless the
/// file sets one.
fn local_prices(
    provider: ProviderKind,
    root: &RoleSettings,
    sub: &RoleSettings,
    mut prices: BTreeMap<String, Price>,
) -> BTreeMap<String, Price> {
    if provider == ProviderKind::Local {
        for name in [&root.model, &sub.model] {
            prices.entry(name.clone()).or_insert(Price {
                input_per_mtok: 0.0,
                output_per_mtok: 0.0,
                cached_input_per_mtok: None,
            });
        }
    }
    prices
}

/// The local model's window is the context it is run with
/// (`RLM_LOCAL_CONTEXT`), so the client's pre-check matches the model.
fn local_windows(
    provider: ProviderKind,
    root: &RoleSettings,
    sub: &RoleSettings,
    env: &dyn Fn(&str) -> Option<String>,
    mut windows: BTreeMap<String, u64>,
) -> Result<BTreeMap<String, u64>, LlmError> {
    if provider == ProviderKind::Local {
        let window = match env("RLM_LOCAL_CONTEXT") {
            Some(v) => parse_env::<u64>("RLM_LOCAL_CONTEXT", &v, "a whole number of tokens")?,
            None => DEFAULT_LOCAL_CONTEXT,
        };
        for name in [&root.model, &sub.model] {
            windows.entry(name.clone()).or_insert(window);
        }
    }
    Ok(windows)
}
