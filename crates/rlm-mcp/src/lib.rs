//! The Model Context Protocol server of `rlm`, for coding agents and
//! assistants: `rlm mcp` over stdio (JSON-RPC 2.0, one message a line,
//! [`serve_stdio`]), and the same server over streamable HTTP at `/mcp` of
//! `rlm serve` ([`http_service`]). Tools `ask`, `search`, `show`,
//! `list_documents` and, with `rlm mcp --allow-index`, `index`; the
//! documents as resources. Built on the official Rust SDK (`rmcp`).
//!
//! `ask` takes the path every surface takes
//! ([`rlm_engine::ask_in_session`]); under `rlm serve` it is one of the
//! server's runs.
//!
//! Standard output belongs to the protocol: [`protocol_output`] keeps a
//! copy of it for the transport and points file descriptor 1 at standard
//! error, so a stray print (ours, a library's, llama.cpp's) cannot corrupt
//! the stream.
//!
//! - `server.rs`: the handler (which tools and resources, who answers);
//! - `tools.rs`: the tools' names, descriptions and input schemas;
//! - `args.rs`: a tool call's arguments, checked;
//! - `ask.rs`: `ask` of `rlm mcp`, its result and progress notifications;
//!   `served.rs`: `ask` under `rlm serve`;
//! - `docs.rs`: `search`, `show`, `list_documents`, `index`, the resources;
//! - `state.rs`: the store, engine and limits every call shares;
//!   `http.rs`: the endpoint `rlm serve` mounts.

#![warn(missing_docs)]

mod args;
mod ask;
mod docs;
mod http;
mod served;
mod server;
mod sessions;
mod state;
mod tools;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use rlm_engine::Engine;
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

pub use http::{McpEndpoint, http_service};
use server::RlmServer;
use state::{Backend, McpState, OwnStore};
pub use state::{StoreHost, StoreView};

/// Why the MCP server stopped with an error. Each says what failed; its
/// source says why.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The protocol's first exchange failed (a client that is not an MCP
    /// client, a closed stream).
    #[error("the MCP session did not start")]
    Start(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The session ended with an error.
    #[error("the MCP session failed")]
    Session(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Standard output could not be kept for the protocol.
    #[error("{0}")]
    Output(&'static str, #[source] std::io::Error),
}

/// How `rlm mcp` serves its store.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The store folder (its `index` tool writes it; messages name it).
    pub store_dir: PathBuf,
    /// List and run the `index` tool (`--allow-index`).
    pub allow_index: bool,
    /// Questions answered at once; more `ask` calls wait for a slot.
    pub max_runs: usize,
    /// Longest accepted question, in characters.
    pub max_question_chars: usize,
    /// Domain instructions for every question's system prompt.
    pub briefing: Option<String>,
}

/// Serves one MCP session over `input` and `output` with `engine` (its
/// settings are every question's defaults) until the client leaves or
/// `shutdown` resolves. `view` is the store as opened (`None`: no store
/// yet, `--allow-index` only); `host` indexes and reopens it and keeps its
/// sessions.
pub async fn serve_stdio(
    engine: Engine,
    view: Option<StoreView>,
    host: Box<dyn StoreHost>,
    options: StdioOptions,
    transport: (
        impl AsyncRead + Send + Unpin + 'static,
        impl AsyncWrite + Send + Unpin + 'static,
    ),
    shutdown: impl Future<Output = ()>,
) -> Result<(), McpError> {
    let state = Arc::new(McpState {
        store_dir: options.store_dir.clone(),
        backend: Backend::Own(Box::new(OwnStore::new(
            view,
            engine,
            host,
            options.briefing,
            options.max_runs,
        ))),
        allow_index: options.allow_index,
        max_question_chars: options.max_question_chars,
    });
    eprintln!(
        "rlm mcp: serving {} over stdio (tools: ask, search, show, list_documents{})",
        options.store_dir.display(),
        if options.allow_index { ", index" } else { "" }
    );
    let serving = async {
        let running = RlmServer::new(state)
            .serve(transport)
            .await
            .map_err(|e| McpError::Start(Box::new(e)))?;
        running
            .waiting()
            .await
            .map_err(|e| McpError::Session(Box::new(e)))?;
        Ok(())
    };
    tokio::select! {
        r = serving => r,
        _ = shutdown => {
            eprintln!("rlm mcp: stopped by a signal");
            Ok(())
        }
    }
}

/// The writer of the protocol: the original standard output. File
/// descriptor 1 then points at standard error.
#[cfg(unix)]
pub fn protocol_output() -> Result<tokio::fs::File, McpError> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let failed = |what| move |e| McpError::Output(what, e);
    let mut stdout = std::io::stdout().lock();
    stdout
        .flush()
        .map_err(failed("cannot flush standard output"))?;
    let saved = stdout
        .as_fd()
        .try_clone_to_owned()
        .map_err(failed("cannot duplicate standard output"))?;
    // SAFETY: dup2 on two descriptors this process owns (0-2 are open in
    // any process started with standard streams; a failure is reported).
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(failed("cannot point standard output at standard error")(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(tokio::fs::File::from_std(std::fs::File::from(saved)))
}

/// The writer of the protocol: standard output.
#[cfg(not(unix))]
pub fn protocol_output() -> Result<tokio::io::Stdout, McpError> {
    Ok(tokio::io::stdout())
}
