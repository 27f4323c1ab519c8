//! `rlm llm chat` and `rlm llm check`: smoke tests of the model configuration.
//!
//! [`LlmFlags`] is the set of model flags any command that calls a model can
//! flatten into its arguments; they beat the environment and `rlm.toml`.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rlm_llm::{
    ApiKey, ChatRequest, ChatResponse, ConfigOverrides, LlmClient, LlmConfig, LlmError, Message,
    ModelRole, ProviderKind,
};
use serde_json::json;

/// `rlm llm ...`.
#[derive(Debug, Args)]
pub struct LlmArgs {
    #[command(subcommand)]
    command: LlmCommand,
}

#[derive(Debug, Subcommand)]
enum LlmCommand {
    /// Send one message with the current configuration; print the reply and its usage.
    Chat(ChatArgs),
    /// Verify the configuration: API key present, endpoint reachable, models listed.
    Check(CheckArgs),
}

/// Model configuration flags (each beats its environment variable and `rlm.toml`).
/// API keys have no flag on purpose: command lines end up in shell history and
/// process lists. Use `RLM_API_KEY`.
#[derive(Debug, Clone, Default, Args)]
pub struct LlmFlags {
    /// Config file to read instead of ./rlm.toml ([llm], [embeddings] and [engine] tables).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Provider: openai (any compatible server), azure or anthropic [env: RLM_PROVIDER].
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// API base URL, e.g. http://127.0.0.1:8088/v1 [env: RLM_BASE_URL].
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Root model (Azure: deployment) [env: RLM_PRIMARY_MODEL].
    #[arg(long, value_name = "MODEL")]
    pub primary_model: Option<String>,
    /// Sub-agent model [env: RLM_SUB_MODEL].
    #[arg(long, value_name = "MODEL")]
    pub sub_model: Option<String>,
    /// Per-attempt timeout in seconds [env: RLM_TIMEOUT].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Model requests in flight at once [env: RLM_MAX_CONCURRENT].
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,
    /// Retries after a failed attempt (429, 5xx, connection errors).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// Record every model exchange to this JSONL cassette (no keys are written).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Answer model calls from this cassette instead of the network.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Never download the local model: when it is missing, fail with the
    /// command that fetches it [env: RLM_AUTO_PULL=off].
    #[arg(long)]
    pub offline: bool,
}

impl LlmFlags {
    /// The flags as configuration overrides.
    pub fn overrides(&self) -> anyhow::Result<ConfigOverrides> {
        Ok(ConfigOverrides {
            config_file: self.config.clone(),
            provider: self
                .provider
                .as_deref()
                .map(str::parse::<ProviderKind>)
                .transpose()?,
            base_url: self.base_url.clone(),
            primary_model: self.primary_model.clone(),
            sub_model: self.sub_model.clone(),
            timeout_secs: self.timeout,
            max_concurrent: self.max_concurrent,
            max_retries: self.max_retries,
            record: self.record.clone(),
            replay: self.replay.clone(),
            ..ConfigOverrides::default()
        })
    }

    /// Loads the configuration: these flags, then the environment, then the file.
    pub fn load(&self) -> anyhow::Result<LlmConfig> {
        Ok(LlmConfig::load(&self.overrides()?)?)
    }

    /// [`LlmFlags::load`] for a command about to answer: when the
    /// configuration runs the default local model and it is not on disk yet,
    /// pulls it first (or refuses, with `--offline` / `RLM_AUTO_PULL=off`).
    pub fn load_for_answering(&self) -> anyhow::Result<LlmConfig> {
        let config = self.load()?;
        super::fetch::ensure_local_model(&config, self.offline)?;
        Ok(config)
    }
}

/// `rlm llm chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The message to send; `-` reads it from standard input.
    prompt: String,
    /// Model to ask, instead of the configured one.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Use the sub-agent role (RLM_SUB_MODEL and its settings) instead of the root.
    #[arg(long)]
    sub: bool,
    /// A system message to send first.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Sampling temperature (0 to 2).
    #[arg(long, value_name = "T")]
    temperature: Option<f32>,
    /// Maximum tokens to generate.
    #[arg(long, value_name = "N")]
    max_output_tokens: Option<u32>,
    /// Print the reply and its usage as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    llm: LlmFlags,
}

/// `rlm llm check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    llm: LlmFlags,
}

/// Runs `rlm llm ...`.
pub fn run(args: LlmArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match args.command {
        LlmCommand::Chat(args) => runtime.block_on(chat(args)),
        LlmCommand::Check(args) => runtime.block_on(check(args)),
    }
}

async fn chat(args: ChatArgs) -> anyhow::Result<()> {
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the prompt from standard input")?;
        text
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty: pass the message as an argument, or `-` to read it from stdin");
    }
    if let Some(t) = args.temperature
        && !(0.0..=2.0).contains(&t)
    {
        bail!("--temperature {t} must be between 0 and 2");
    }
    if args.max_output_tokens == Some(0) {
        bail!("--max-output-tokens must be at least 1");
    }
    let client = LlmClient::from_config(args.llm.load_for_answering()?)?;
    let role = if args.sub {
        ModelRole::Sub
    } else {
        ModelRole::Root
    };
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::system(system));
    }
    messages.push(Message::user(prompt));
    let mut request = ChatRequest::new(role, messages);
    request.model = args.model.clone();
    request.temperature = args.temperature;
    request.max_output_tokens = args.max_output_tokens;

    let response = client.chat(request).await?;
    if args.json {
        println!("{}", serde_json::to_string(&response)?);
    } else {
        println!("{}", response.text);
        eprintln!("{}", usage_line(&response));
    }
    Ok(())
}

/// `model: 12 in (3 cached) + 5 out tokens (estimated), 842 ms, 1 retry, $0.000123`.
fn usage_line(response: &ChatResponse) -> String {
    let u = &response.usage;
    let mut line = format!("{}: {} in", u.model, u.input_tokens);
    if let Some(c) = u.cached_tokens {
        line.push_str(&format!(" ({c} cached)"));
    }
    line.push_str(&format!(" + {} out tokens", u.output_tokens));
    if u.estimated {
        line.push_str(" (estimated)");
    }
    line.push_str(&format!(", {} ms", u.latency.as_millis()));
    if u.retries > 0 {
        let s = if u.retries == 1 { "retry" } else { "retries" };
        line.push_str(&format!(", {} {s}", u.retries));
    }
    match u.cost_usd {
        Some(c) => line.push_str(&format!(", ${c:.6}")),
        None => line.push_str(", cost unknown"),
    }
    if response.finish_reason != rlm_llm::FinishReason::Stop {
        line.push_str(&format!(", stopped: {}", response.finish_reason.as_str()));
    }
    line
}

/// One line of the check report.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

async fn check(args: CheckArgs) -> anyhow::Result<()> {
    let mut config = args.llm.load()?;
    let mut checks = settings_checks(&mut config);
    // Probe once, quickly: a check should not sit through retries.
    config.retry.max_retries = 0;
    config.timeout = config.timeout.min(Duration::from_secs(15));
    config.record = None;
    let roles = [
        ("root model", config.root.model.clone()),
        ("sub model", config.sub.model.clone()),
    ];
    let client = LlmClient::from_config(config)?;
    checks.extend(endpoint_checks(&client, &roles).await);

    let failures = checks.iter().filter(|c| !c.ok).count();
    if args.json {
        let list: Vec<_> = checks
            .iter()
            .map(|c| json!({"check": c.name, "ok": c.ok, "detail": c.detail}))
            .collect();
        println!("{}", json!({"ok": failures == 0, "checks": list}));
    } else {
        for c in &checks {
            println!(
                "{:<4} {:<10} {}",
                if c.ok { "ok" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
    }
    if failures > 0 {
        bail!("model configuration check failed ({failures} problem(s) above)");
    }
    Ok(())
}

/// The checks of the configuration itself: what it says, and where the API
/// key comes from. A missing key is replaced by an empty one, so that the
/// endpoint is still probed (reachability is worth knowing).
fn settings_checks(config: &mut LlmConfig) -> Vec<Check> {
    let mut checks = vec![Check {
        name: "config",
        ok: true,
        detail: format!(
            "provider {}, base URL {}, root model {}, sub model {}{}",
            config.provider,
            config.base_url,
            config.root.model,
            config.sub.model,
            config
                .config_file
                .as_ref()
                .map(|p| format!(", file {}", p.display()))
                .unwrap_or_default()
        ),
    }];
    if config.replay.is_some() {
        checks.push(Check {
            name: "api key",
            ok: true,
            detail: "not needed: replaying a cassette".into(),
        });
    } else {
        match &config.api_key_source {
            Some(source) => checks.push(Check {
                name: "api key",
                ok: true,
                detail: format!("from {source}"),
            }),
            None => {
                checks.push(Check {
                    name: "api key",
                    ok: false,
                    detail: format!(
                        "missing: set RLM_API_KEY or {} (local servers accept any value, e.g. RLM_API_KEY=x)",
                        config.provider.key_env_var()
                    ),
                });
                // Still probe the endpoint: reachability is worth knowing.
                config.api_key = Some(ApiKey::new(""));
            }
        }
    }
    checks
}

/// The checks of the endpoint: reachable, and serving the models of
/// `roles` (an endpoint that lists none, like Azure's, is asked for one
/// token per model).
async fn endpoint_checks(client: &LlmClient, roles: &[(&'static str, String)]) -> Vec<Check> {
    let mut checks = Vec::new();
    match client.list_models().await {
        Ok(models) => {
            checks.push(Check {
                name: "endpoint",
                ok: true,
                detail: format!(
                    "{} reachable, serves {} model(s)",
                    client.provider().endpoint(),
                    models.len()
                ),
            });
            for (name, model) in dedup_roles(roles) {
                let listed = models.iter().any(|m| m == &model);
                checks.push(Check {
                    name,
                    ok: listed,
                    detail: if listed {
                        format!("{model} is listed")
                    } else {
                        format!(
                            "{model} is not among the models the endpoint serves ({}); set RLM_PRIMARY_MODEL / RLM_SUB_MODEL",
                            preview(&models)
                        )
                    },
                });
            }
        }
        Err(LlmError::Unsupported(_)) => {
            // Azure lists no deployments: ask each one for a single token.
            for (name, model) in dedup_roles(roles) {
                let probe = ChatRequest::user("ping")
                    .with_model(model.clone())
                    .with_max_output_tokens(1);
                let (ok, detail) = match client.chat(probe).await {
                    Ok(_) => (true, format!("deployment {model} answers")),
                    Err(e) => (false, e.to_string()),
                };
                checks.push(Check { name, ok, detail });
            }
        }
        Err(err) => checks.push(Check {
            name: "endpoint",
            ok: false,
            detail: err.to_string(),
        }),
    }
    checks
}

/// The roles to check, once per distinct model.
fn dedup_roles(roles: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    if roles[0].1 == roles[1].1 {
        vec![("models", roles[0].1.clone())]
    } else {
        roles.to_vec()
    }
}

/// The first few model names, for error messages.
fn preview(models: &[String]) -> String {
    if models.is_empty() {
        return "it lists none".into();
    }
    let shown: Vec<&str> = models.iter().take(8).map(String::as_str).collect();
    let more = models.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{}, and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
