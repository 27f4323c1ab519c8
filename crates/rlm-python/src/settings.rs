//! The Python keyword arguments as the engine's settings, each checked by
//! the rules every other surface follows: the model (`backend_kwargs` over
//! `RLM_*` over `rlm.toml`'s `[llm]`, `rlm_llm::LlmConfig`), the question's
//! budgets and citation settings (`QuestionSettings::resolve`, as `rlm ask`
//! flags and API fields), and the sandbox (`environment_kwargs`, with the
//! ranges of `rlm repl`'s flags).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use rlm_engine::values::{Found, LAYER_QUESTION, Reader, Setting, table};
use rlm_engine::{EngineSettings, QuestionSettings, ResolvedQuestion, SettingsFile, Surface};
use rlm_llm::{ApiKey, ConfigOverrides, LlmConfig, LlmError, ProviderKind};
use rlm_sandbox::{SandboxConfig, WorkerCommand};

/// The model settings from `backend_kwargs` (values as text, checked here)
/// over the environment and the config file.
pub fn llm_config(
    provider: &str,
    kwargs: &HashMap<String, String>,
    config_file: Option<PathBuf>,
) -> Result<LlmConfig, String> {
    let provider: ProviderKind = provider.parse().map_err(|e: LlmError| e.to_string())?;
    if provider == ProviderKind::Local && !cfg!(feature = "local-model") {
        return Err(
            "backend=\"local\": this build of rlm_rs has no embedded model; use a hosted or OpenAI-compatible backend, or build the wheel with the `local-model` feature".into(),
        );
    }
    let text = |key: &str| kwargs.get(key).map(|v| v.trim().to_string());
    let number = |key: &str, what: &str| -> Result<Option<f64>, String> {
        text(key)
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| format!("backend_kwargs[{key:?}]={v:?} is not {what}"))
            })
            .transpose()
    };
    let whole = |key: &str| -> Result<Option<u64>, String> {
        text(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("backend_kwargs[{key:?}]={v:?} is not a whole number"))
            })
            .transpose()
    };
    let overrides = ConfigOverrides {
        config_file,
        provider: Some(provider),
        base_url: text("base_url"),
        api_key: text("api_key").filter(|k| !k.is_empty()).map(ApiKey::new),
        primary_model: text("model_name"),
        sub_model: text("sub_model_name"),
        timeout_secs: number("timeout", "a number of seconds")?,
        max_concurrent: whole("max_concurrent")?.map(|n| n as usize),
        max_retries: whole("max_retries")?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        names: Some(backend_kwarg),
        ..ConfigOverrides::default()
    };
    let mut config = LlmConfig::load(&overrides).map_err(|e| e.to_string())?;
    if let Some(v) = text("api_version") {
        config.azure_api_version = v;
    }
    Ok(config)
}

/// A model setting named as the Python caller wrote it: the
/// `backend_kwargs` key that sets it.
fn backend_kwarg(setting: &Setting) -> String {
    let key = match setting.key {
        "primary_model" => "model_name",
        "sub_model" => "sub_model_name",
        "timeout_secs" => "timeout",
        other => other,
    };
    format!("backend_kwargs[{key:?}]")
}

/// One question setting: the keyword argument, the `QuestionSettings`
/// field it fills (and that errors of `resolve` name).
const QUESTION_KWARGS: [(&str, &str); 13] = [
    ("flow", "flow"),
    ("inspector", "inspector"),
    ("citations", "citations"),
    ("verify", "verify"),
    ("coverage", "coverage"),
    ("context_shape", "context_shape"),
    ("turn_format", "turn_format"),
    ("subcall_cache", "subcall_cache"),
    ("max_llm_calls", "max_llm_calls"),
    ("max_iterations", "max_iterations"),
    ("max_depth", "max_depth"),
    ("max_budget", "max_cost_usd"),
    ("max_timeout", "max_wall_secs"),
];

/// Settings the engine reads from `RLM_*` keys that `QuestionSettings` does
/// not carry: the keyword argument and its key.
const BUDGET_KWARGS: [(&str, &Setting); 2] = [
    ("max_tokens", &table::MAX_TOKENS),
    ("max_errors", &table::MAX_ERRORS),
];

/// The engine settings: `RLM_*` variables over `rlm.toml`'s `[engine]`,
/// then the keyword arguments (`max_depth` already in the engine's own
/// scale), checked once.
pub fn engine_settings(
    kwargs: &HashMap<String, String>,
    sandbox: Option<&str>,
    config_file: Option<&std::path::Path>,
) -> Result<ResolvedQuestion, String> {
    let known = |k: &str| {
        QUESTION_KWARGS.iter().any(|(kw, _)| *kw == k)
            || BUDGET_KWARGS.iter().any(|(kw, _)| *kw == k)
    };
    if let Some(unknown) = kwargs.keys().find(|k| !known(k)) {
        return Err(format!("no engine setting {unknown:?}"));
    }
    let file = SettingsFile::load(config_file)?;
    let base = file.engine_config()?;
    let get = |kw: &str| kwargs.get(kw).cloned();
    let mut settings = QuestionSettings::new(Surface::Api).with(&table::SANDBOX, sandbox);
    for (kw, field) in QUESTION_KWARGS {
        let Some(value) = get(kw) else { continue };
        if kw == "flow" {
            settings.flow = Some(value);
            continue;
        }
        let setting = QuestionSettings::SETTINGS
            .iter()
            .find(|s| s.api == Some(field))
            .ok_or_else(|| format!("no engine setting {kw:?}"))?;
        settings.set(setting, value);
    }
    let mut resolved = settings
        .resolve(&base)
        .map_err(|e| e.to_string())
        .map_err(|e| match e.strip_prefix("sandbox:") {
            // The back-end comes in environment_kwargs (`sandbox` is the field's name).
            Some(rest) => format!("environment_kwargs[\"sandbox\"]:{rest}"),
            None => as_kwarg(&e),
        })?;
    let lookup = |setting: &Setting| {
        let (kw, _) = BUDGET_KWARGS.iter().find(|(_, s)| *s == setting)?;
        kwargs.get(*kw).map(|v| Found {
            value: v.clone(),
            name: kw.to_string(),
            layer: LAYER_QUESTION,
        })
    };
    let r = Reader::new(&lookup);
    let b = &mut resolved.config.budget;
    if let Some(v) = r.whole(&table::MAX_TOKENS)? {
        b.max_total_tokens = v;
    }
    if let Some(v) = r.whole(&table::MAX_ERRORS)? {
        b.max_consecutive_errors = v;
    }
    b.validate()?;
    Ok(resolved)
}

/// An error of `resolve` that names a field, renamed to the keyword
/// argument the user wrote (`max_cost_usd=…` → `max_budget=…`).
fn as_kwarg(message: &str) -> String {
    for (kw, field) in QUESTION_KWARGS {
        if kw != field
            && let Some(rest) = message.strip_prefix(field)
            && (rest.starts_with('=') || rest.starts_with(':'))
        {
            return format!("{kw}{rest}");
        }
    }
    message.to_string()
}

/// Ranges of the sandbox settings (`rlm repl --cell-timeout`, `--memory-mib`).
const CELL_TIMEOUT_SECS: (u64, u64) = (1, 3600);
const MEMORY_MIB: (u64, u64) = (0, 65536);

/// The sandbox: the worker command and `environment_kwargs`
/// (`cell_timeout` seconds, `memory_mib`; 0 is unlimited memory). Its
/// `sandbox` (the back-end) is the engine's setting: see [`engine_settings`].
pub fn sandbox_config(
    worker: &[String],
    kwargs: &HashMap<String, String>,
) -> Result<SandboxConfig, String> {
    let (program, args) = worker
        .split_first()
        .ok_or("the sandbox worker command is empty")?;
    let mut command = WorkerCommand::new(program);
    command.args = args.iter().map(Into::into).collect();
    let mut config = SandboxConfig::new(command);
    let whole = |key: &str, (min, max): (u64, u64)| -> Result<Option<u64>, String> {
        kwargs
            .get(key)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "environment_kwargs[{key:?}]={v:?} is not a whole number from {min} to {max}"
                        )
                    })
            })
            .transpose()
    };
    if let Some(unknown) = kwargs
        .keys()
        .find(|k| !["cell_timeout", "memory_mib", "sandbox"].contains(&k.as_str()))
    {
        return Err(format!(
            "environment_kwargs has no setting {unknown:?}; it takes cell_timeout (seconds per cell), memory_mib (sandbox memory, 0 = unlimited) and sandbox (monty or cpython)"
        ));
    }
    if let Some(secs) = whole("cell_timeout", CELL_TIMEOUT_SECS)? {
        config.cell_time_limit = Duration::from_secs(secs);
    }
    if let Some(mib) = whole("memory_mib", MEMORY_MIB)? {
        config.memory_limit_bytes = mib << 20;
    }
    Ok(config)
}
