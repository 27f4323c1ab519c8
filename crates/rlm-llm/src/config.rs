//! Configuration: flags > environment > `rlm.toml` (`[llm]` table) > defaults.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use rlm_settings::{Found, Reader, Setting, SettingError, SettingsFile, table};

use crate::error::LlmError;
use crate::pricing::{ContextWindows, Price, PriceTable};
use crate::types::ModelRole;

/// The config file read when none is named: `./rlm.toml`, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = rlm_settings::DEFAULT_SETTINGS_FILE;
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
        let file = SettingsFile::load(flags.config_file.as_deref()).map_err(config_error)?;
        Self::resolve(flags, &env, &file)
    }

    /// Builds from an in-memory `rlm.toml` text (flags and `env` still win).
    pub fn from_toml_str(
        toml_text: &str,
        flags: &ConfigOverrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let file = SettingsFile::parse(toml_text, Path::new("<string>")).map_err(config_error)?;
        let mut config = Self::resolve(flags, &env, &file)?;
        config.config_file = None;
        Ok(config)
    }

    /// Every value from `flags`, then `env`, then `file`, each checked
    /// against its declaration in `rlm-settings`.
    fn resolve(
        flags: &ConfigOverrides,
        env: &dyn Fn(&str) -> Option<String>,
        file: &SettingsFile,
    ) -> Result<Self, LlmError> {
        let question = |s: &Setting| flags.found(s);
        let env_or_file = |s: &Setting| file.env_then_file(s, env);
        let layers: [rlm_settings::Layer<'_>; 2] = [&question, &env_or_file];
        let lookup = rlm_settings::layered(&layers);
        let r = Reader::new(&lookup);
        let (provider, local_auto_selected) = choose_provider(flags, env, file, &r)?;
        let local_model = rlm_settings::env_found(&table::LOCAL_MODEL, env)
            .map(|f| PathBuf::from(f.value))
            .or_else(|| file.path_value(&table::LOCAL_MODEL));
        let base_url = base_url(provider, &r)?;
        let (api_key, api_key_source) = api_key(flags, provider, env, file);
        let (root_model, sub_model) = model_names(provider, local_model.as_deref(), &r)?;
        let timeout = match r.number(&table::TIMEOUT).map_err(config_error)? {
            Some(t) => Duration::from_secs_f64(t),
            // CPU inference queues fan-out behind a few parallel sequences.
            None if provider == ProviderKind::Local => DEFAULT_LOCAL_TIMEOUT,
            None => DEFAULT_TIMEOUT,
        };
        let max_concurrent = r
            .whole(&table::MAX_CONCURRENT)
            .map_err(config_error)?
            .unwrap_or(DEFAULT_MAX_CONCURRENT);
        let root = role_settings(
            root_model,
            &table::ROOT_TEMPERATURE,
            &table::ROOT_MAX_OUTPUT_TOKENS,
            &r,
        )?;
        let sub = role_settings(
            sub_model,
            &table::SUB_TEMPERATURE,
            &table::SUB_MAX_OUTPUT_TOKENS,
            &r,
        )?;
        let retry = retry_policy(&r)?;
        let stream = r
            .boolean(&table::STREAM)
            .map_err(config_error)?
            .unwrap_or(true);
        let prices = local_prices(provider, &root, &sub, structured(file, "llm.prices")?);
        let windows = structured(file, "llm.context_windows")?;
        let context_windows = local_windows(provider, &root, &sub, env, windows)?;
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
            azure_api_version: r
                .text(&table::AZURE_API_VERSION)
                .unwrap_or_else(|| DEFAULT_AZURE_API_VERSION.to_string()),
            anthropic_version: r
                .text(&table::ANTHROPIC_VERSION)
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_VERSION.to_string()),
            prices: PriceTable::with_overrides(prices),
            context_windows: ContextWindows::with_overrides(context_windows),
            record: flags.record.clone(),
            replay: flags.replay.clone(),
            config_file: file.path().map(Path::to_path_buf),
            local_model,
            local_auto_selected,
            stream,
        })
    }
}

/// The provider asked for, and whether `local` was chosen because nothing
/// at all was configured: with the embedded model built in, a bare run uses
/// it instead of failing for want of an API key.
fn choose_provider(
    flags: &ConfigOverrides,
    env: &dyn Fn(&str) -> Option<String>,
    file: &SettingsFile,
    r: &Reader<'_>,
) -> Result<(ProviderKind, bool), LlmError> {
    let provider = match r.found(&table::PROVIDER) {
        Some(f) => f.value.parse()?,
        None => ProviderKind::default(),
    };
    let set = |s: &Setting| r.found(s).is_some();
    let provider_keys = [
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ];
    let nothing_configured = !set(&table::PROVIDER)
        && flags.api_key.is_none()
        && file.env_then_file(&table::API_KEY, env).is_none()
        && provider_keys
            .iter()
            .all(|var| env(var).is_none_or(|v| v.trim().is_empty()))
        && !set(&table::BASE_URL)
        && flags.replay.is_none();
    let auto = cfg!(feature = "local") && nothing_configured;
    Ok(if auto {
        (ProviderKind::Local, true)
    } else {
        (provider, false)
    })
}

fn base_url(provider: ProviderKind, r: &Reader<'_>) -> Result<String, LlmError> {
    let base_url = r
        .text(&table::BASE_URL)
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
    Ok(base_url)
}

/// The key and where it came from: `--api-key`, `RLM_API_KEY`, the
/// provider's own variable, then the file.
fn api_key(
    flags: &ConfigOverrides,
    provider: ProviderKind,
    env: &dyn Fn(&str) -> Option<String>,
    file: &SettingsFile,
) -> (Option<ApiKey>, Option<String>) {
    let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(k) = &flags.api_key {
        (Some(k.clone()), Some("--api-key".to_string()))
    } else if let Some(k) = env("RLM_API_KEY") {
        (Some(ApiKey::new(k)), Some("RLM_API_KEY".to_string()))
    } else if let Some(k) = env(provider.key_env_var()) {
        (
            Some(ApiKey::new(k)),
            Some(provider.key_env_var().to_string()),
        )
    } else if let Some(f) = file.found(&table::API_KEY) {
        (
            Some(ApiKey::new(f.value)),
            Some("rlm.toml [llm] api_key".to_string()),
        )
    } else {
        (None, None)
    }
}

/// The root and sub model names. One named model serves both roles unless
/// the other is named too: a local server usually has exactly one.
fn model_names(
    provider: ProviderKind,
    local_model: Option<&Path>,
    r: &Reader<'_>,
) -> Result<(String, String), LlmError> {
    // The local model is named after its file (`qwen2.5-coder-1.5b-instruct`).
    let local_name = local_model_name(local_model);
    let defaults = match provider {
        ProviderKind::Local => Some((local_name.as_str(), local_name.as_str())),
        _ => provider.default_models(),
    };
    let primary = r.found(&table::PRIMARY_MODEL).map(|f| f.value);
    let sub = r.found(&table::SUB_MODEL).map(|f| f.value);
    match (primary, sub, defaults) {
        (Some(p), Some(s), _) => Ok((p, s)),
        (Some(p), None, _) => Ok((p.clone(), p)),
        (None, Some(s), Some((d, _))) => Ok((d.to_string(), s)),
        (None, None, Some((d, s))) => Ok((d.to_string(), s.to_string())),
        (None, _, None) => Err(LlmError::Config(
            "Azure OpenAI has no default deployment: set RLM_PRIMARY_MODEL (and optionally RLM_SUB_MODEL) to your deployment names".into(),
        )),
    }
}

fn role_settings(
    model: String,
    temperature: &Setting,
    max_output_tokens: &Setting,
    r: &Reader<'_>,
) -> Result<RoleSettings, LlmError> {
    if model.trim().is_empty() {
        let role = temperature
            .table
            .unwrap_or("llm")
            .trim_start_matches("llm.");
        return Err(LlmError::Config(format!("{role} model name is empty")));
    }
    Ok(RoleSettings {
        model,
        temperature: r
            .number(temperature)
            .map_err(config_error)?
            .map(|t| t as f32),
        max_output_tokens: r.whole(max_output_tokens).map_err(config_error)?,
    })
}

fn retry_policy(r: &Reader<'_>) -> Result<RetryPolicy, LlmError> {
    let defaults = RetryPolicy::default();
    let millis = |s: &Setting| -> Result<Option<Duration>, LlmError> {
        Ok(r.whole::<u64>(s)
            .map_err(config_error)?
            .map(Duration::from_millis))
    };
    Ok(RetryPolicy {
        max_retries: r
            .whole(&table::MAX_RETRIES)
            .map_err(config_error)?
            .unwrap_or(defaults.max_retries),
        initial_backoff: millis(&table::INITIAL_BACKOFF_MS)?.unwrap_or(defaults.initial_backoff),
        max_backoff: millis(&table::MAX_BACKOFF_MS)?.unwrap_or(defaults.max_backoff),
        max_retry_after: r
            .whole::<u64>(&table::MAX_RETRY_AFTER_SECS)
            .map_err(config_error)?
            .map(Duration::from_secs)
            .unwrap_or(defaults.max_retry_after),
    })
}

/// A structured table of the file (`llm.prices`, `llm.context_windows`).
fn structured<T: serde::de::DeserializeOwned + Default>(
    file: &SettingsFile,
    name: &str,
) -> Result<T, LlmError> {
    match file.structured(name) {
        None => Ok(T::default()),
        Some(value) => value.clone().try_into().map_err(|e: toml::de::Error| {
            LlmError::Config(format!(
                "{}: [{name}] {}",
                file.path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                e.to_string().trim().replace('\n', " ")
            ))
        }),
    }
}

fn config_error(e: SettingError) -> LlmError {
    LlmError::Config(e.to_string())
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
    /// How errors name these values: `None` by their flags (the command
    /// line); an embedding program names them its own way (the Python
    /// package: `backend_kwargs["timeout"]`).
    pub names: Option<fn(&Setting) -> String>,
}

impl ConfigOverrides {
    /// The value this command line gives `setting`, named by its flag.
    fn found(&self, setting: &Setting) -> Option<Found> {
        let given: [(&Setting, Option<String>); 11] = [
            (&table::PROVIDER, self.provider.map(|v| v.to_string())),
            (&table::BASE_URL, self.base_url.clone()),
            (&table::PRIMARY_MODEL, self.primary_model.clone()),
            (&table::SUB_MODEL, self.sub_model.clone()),
            (&table::TIMEOUT, self.timeout_secs.map(|v| v.to_string())),
            (
                &table::MAX_CONCURRENT,
                self.max_concurrent.map(|v| v.to_string()),
            ),
            (&table::MAX_RETRIES, self.max_retries.map(|v| v.to_string())),
            (
                &table::ROOT_TEMPERATURE,
                self.root_temperature.map(|v| v.to_string()),
            ),
            (
                &table::SUB_TEMPERATURE,
                self.sub_temperature.map(|v| v.to_string()),
            ),
            (
                &table::ROOT_MAX_OUTPUT_TOKENS,
                self.root_max_output_tokens.map(|v| v.to_string()),
            ),
            (
                &table::SUB_MAX_OUTPUT_TOKENS,
                self.sub_max_output_tokens.map(|v| v.to_string()),
            ),
        ];
        let value = given
            .into_iter()
            .find(|(s, _)| *s == setting)
            .and_then(|(_, v)| v)?;
        Some(Found {
            value,
            name: match self.names {
                Some(name_of) => name_of(setting),
                None => setting.flag.unwrap_or(setting.key).to_string(),
            },
            layer: rlm_settings::LAYER_QUESTION,
        })
    }
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
        let found = |s: &Setting| rlm_settings::env_found(s, env);
        let window = Reader::new(&found)
            .whole(&table::LOCAL_CONTEXT)
            .map_err(config_error)?
            .unwrap_or(DEFAULT_LOCAL_CONTEXT);
        for name in [&root.model, &sub.model] {
            windows.entry(name.clone()).or_insert(window);
        }
    }
    Ok(windows)
}
