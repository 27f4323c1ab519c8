//! The Model Context Protocol server for coding agents and assistants:
//! `rlm mcp` over stdio (JSON-RPC 2.0, one message a line), and the same
//! server over streamable HTTP at `/mcp` of `rlm serve` ([`http_service`]).
//! Tools `ask`, `search`, `show`, `list_documents` and, with `rlm mcp
//! --allow-index`, `index`; the documents as resources. Built on the
//! official Rust SDK (`rmcp`).
//!
//! Standard output belongs to the protocol: the server keeps a copy of it
//! for the transport and points file descriptor 1 at standard error, so a
//! stray print (ours, a library's, llama.cpp's) cannot corrupt the stream.

mod args;
mod ask;
mod docs;
mod http;
mod served;
mod server;
mod state;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rlm_engine::{Engine, EngineSettings, SettingsFile};
use rlm_sandbox::WorkerPool;
use rmcp::ServiceExt;

use crate::commands::ask::{read_briefing, sandbox_config};
use crate::commands::corpus::StoreArg;
use crate::commands::llm::LlmFlags;
pub use http::http_service;
use server::RlmServer;
use state::{Backend, McpState, OwnStore, open_view};

/// Arguments of `rlm mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// List the `index` tool, which reads files and folders of this machine
    /// into the store (off: the tool is neither listed nor run). With it,
    /// the store may not exist yet.
    #[arg(long)]
    pub allow_index: bool,
    /// Questions answered at once; more `ask` calls wait for a slot.
    #[arg(long, env = "RLM_MCP_MAX_RUNS", default_value_t = 2, value_name = "N")]
    pub max_runs: usize,
    /// Longest accepted question, in characters.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_question_chars: usize,
    /// Domain instructions for every question's system prompt (like a project's PROMPT.md).
    #[arg(long, value_name = "FILE")]
    pub briefing: Option<PathBuf>,
    #[command(flatten)]
    pub llm: LlmFlags,
}

/// `rlm mcp`.
pub fn mcp(args: McpArgs) -> anyhow::Result<()> {
    if args.max_runs == 0 {
        anyhow::bail!("--max-runs 0 would refuse every question; use 1 or more");
    }
    if args.max_question_chars == 0 {
        anyhow::bail!("--max-question-chars must be 1 or more");
    }
    let settings = SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = settings.engine_config().map_err(anyhow::Error::msg)?;
    let briefing = read_briefing(args.briefing.as_deref())?;
    let llm_config = args.llm.load_for_answering()?;
    let dir = &args.store.store;
    if super::corpus::postgres_url(dir).is_some() {
        anyhow::bail!(
            "rlm mcp reads store folders only, not PostgreSQL stores yet: give --store a folder"
        );
    }
    let view = match open_view(dir, &llm_config, args.llm.config.as_deref()) {
        Ok(v) => Some(v),
        // With --allow-index an agent may build the store itself.
        Err(e)
            if args.allow_index
                && matches!(
                    e.downcast_ref::<rlm_corpus::CorpusError>(),
                    Some(rlm_corpus::CorpusError::NotAStore(_))
                ) =>
        {
            eprintln!(
                "rlm mcp: {} is not a store yet; the `index` tool creates it",
                dir.display()
            );
            None
        }
        Err(e) => return Err(e),
    };
    config.set_models(
        &llm_config.root.model,
        &llm_config.sub.model,
        llm_config.provider == rlm_llm::ProviderKind::Local,
    );
    let client = rlm_llm::LlmClient::from_config(llm_config.clone())?;
    // The protocol's stdout is taken before anything else can print.
    let output = protocol_output()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        let pool = WorkerPool::new(sandbox_config(config.sandbox)?, args.max_runs).await?;
        let engine = Engine::new(Arc::new(client), pool, config);
        let state = Arc::new(McpState {
            store_dir: dir.clone(),
            backend: Backend::Own(Box::new(OwnStore::new(
                view,
                engine,
                llm_config,
                args.llm.config.clone(),
                briefing,
                args.max_runs,
            ))),
            allow_index: args.allow_index,
            max_question_chars: args.max_question_chars,
        });
        eprintln!(
            "rlm mcp: serving {} over stdio (tools: ask, search, show, list_documents{})",
            dir.display(),
            if args.allow_index { ", index" } else { "" }
        );
        let serving = async {
            let running = RlmServer::new(state)
                .serve((tokio::io::stdin(), output))
                .await
                .context("the MCP session did not start")?;
            running.waiting().await.context("the MCP session failed")?;
            anyhow::Ok(())
        };
        tokio::select! {
            r = serving => r,
            _ = crate::commands::shutdown_signal() => {
                eprintln!("rlm mcp: stopped by a signal");
                Ok(())
            }
        }
    });
    // Runs still going when the client left were cancelled with the session
    // (the SDK first gives running handlers 5 s to answer); blocking reads
    // of stdin cannot be cancelled, so do not wait for them.
    runtime.shutdown_timeout(Duration::from_secs(2));
    outcome
}

/// The writer of the protocol: the original standard output. File
/// descriptor 1 then points at standard error.
#[cfg(unix)]
fn protocol_output() -> anyhow::Result<tokio::fs::File> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let mut stdout = std::io::stdout().lock();
    stdout.flush()?;
    let saved = stdout
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate standard output")?;
    // SAFETY: dup2 on two descriptors this process owns (0-2 are open in
    // any process started with standard streams; a failure is reported).
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot point standard output at standard error");
    }
    Ok(tokio::fs::File::from_std(std::fs::File::from(saved)))
}

#[cfg(not(unix))]
fn protocol_output() -> anyhow::Result<tokio::io::Stdout> {
    Ok(tokio::io::stdout())
}
