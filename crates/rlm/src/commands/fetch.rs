//! Fetching the embedded model's files: the download with its progress
//! bar, and the automatic pull a command that answers makes when the
//! default model is missing (`RLM_AUTO_PULL`, `--offline`).

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rlm_local::{PullOptions, PullProgress};

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

/// Pulls `spec` into the models directory, drawing a progress bar on stderr
/// unless `quiet`. Resumes what an interrupted pull left.
pub(crate) fn download(
    spec: &rlm_local::ModelSpec,
    quiet: bool,
) -> anyhow::Result<rlm_local::PullOutcome> {
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

pub(crate) fn human_size(bytes: u64) -> String {
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
