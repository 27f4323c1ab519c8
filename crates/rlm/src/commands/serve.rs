//! `rlm serve`: the HTTP API and the web UI over one store.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use rlm_engine::{Engine, SettingsFile};
use rlm_sandbox::{SandboxConfig, WorkerPool};
use rlm_server::{App, Limits};

use super::ask::{query_embedder, read_briefing, worker_command};
use super::corpus::StoreArg;
use super::llm::LlmFlags;

/// Arguments of `rlm serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Address to listen on; port 0 picks a free one (the first line on stdout says which).
    #[arg(long, env = "RLM_SERVE_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Questions answered at once; more get 429 Too Many Requests.
    #[arg(
        long,
        env = "RLM_SERVE_MAX_RUNS",
        default_value_t = 2,
        value_name = "N"
    )]
    pub max_runs: usize,
    /// Longest accepted question, in characters.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_question_chars: usize,
    /// Finished runs kept on disk in <store>/runs/ (answer and trace); older ones are deleted.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub keep_runs: usize,
    /// Seconds a client has to send a request's head (and, on a kept-alive connection, to start the next request); the connection is closed beyond.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub header_timeout: f64,
    /// Seconds a client has to send a request's whole body; 408 beyond.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub body_timeout: f64,
    /// Seconds a write to a client may stay blocked (it stopped reading, e.g. an event stream) before the connection is closed.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub write_timeout: f64,
    /// Connections open at once; more are answered 503 and closed.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections: usize,
    /// Domain instructions for every question's system prompt (like a project's PROMPT.md); a request's own `briefing` replaces it.
    #[arg(long, value_name = "FILE")]
    pub briefing: Option<PathBuf>,
    #[command(flatten)]
    pub llm: LlmFlags,
}

/// `rlm serve`.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    if args.max_runs == 0 {
        anyhow::bail!("--max-runs 0 would refuse every question; use 1 or more");
    }
    if args.keep_runs == 0 {
        anyhow::bail!(
            "--keep-runs must be 1 or more (the last run's answer is read back from disk)"
        );
    }
    if args.max_question_chars == 0 {
        anyhow::bail!("--max-question-chars must be 1 or more");
    }
    if args.max_connections == 0 {
        anyhow::bail!("--max-connections must be 1 or more");
    }
    let seconds = |flag: &str, value: f64| {
        if value.is_finite() && (0.05..=86_400.0).contains(&value) {
            Ok(std::time::Duration::from_secs_f64(value))
        } else {
            Err(anyhow::anyhow!(
                "{flag} {value} is out of range: use seconds from 0.05 to 86400"
            ))
        }
    };
    let header_timeout = seconds("--header-timeout", args.header_timeout)?;
    let body_timeout = seconds("--body-timeout", args.body_timeout)?;
    let write_timeout = seconds("--write-timeout", args.write_timeout)?;
    let settings = SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = settings.engine_config().map_err(anyhow::Error::msg)?;
    let briefing = read_briefing(args.briefing.as_deref())?;
    let store = Arc::new(args.store.open()?);
    let llm_config = args.llm.load_for_answering()?;
    let embedder = query_embedder(&store, &llm_config, args.llm.config.as_deref());
    config.set_models(
        &llm_config.root.model,
        &llm_config.sub.model,
        llm_config.provider == rlm_llm::ProviderKind::Local,
    );
    let client = rlm_llm::LlmClient::from_config(llm_config)?;
    let limits = Limits {
        max_concurrent_runs: args.max_runs,
        max_question_chars: args.max_question_chars,
        saved_runs: args.keep_runs,
        header_timeout,
        body_timeout,
        write_timeout,
        max_connections: args.max_connections,
        ..Limits::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let pool = WorkerPool::new(SandboxConfig::new(worker_command()?), args.max_runs).await?;
        let engine = Engine::new(Arc::new(client), pool, config);
        let app = Arc::new(
            App::new(engine, store, limits, embedder, briefing).map_err(anyhow::Error::msg)?,
        );
        let listener = tokio::net::TcpListener::bind(&args.addr)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {}: is another server using it? pick another with --addr HOST:PORT",
                    args.addr
                )
            })?;
        let addr = listener.local_addr()?;
        {
            // The first stdout line is for scripts (and tests) that pick port 0.
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on http://{addr}")?;
            out.flush()?;
        }
        eprintln!(
            "rlm serve: web UI at http://{addr}/, API at http://{addr}/api (OpenAPI: /api/openapi.json); Ctrl-C stops"
        );
        rlm_server::serve(listener, app, shutdown_signal()).await?;
        eprintln!("rlm serve: stopped");
        anyhow::Ok(())
    })
}

/// Ctrl-C or SIGTERM (also what stops `rlm mcp`).
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
