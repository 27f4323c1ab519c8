//! The HTTP face of `rlm` (`rlm serve`): a JSON API whose runs stream every
//! step as server-sent events, sessions, an OpenAPI document, and the web UI
//! served by the binary itself.
//!
//! - [`App`] is the typed core: the corpus, the engine, sessions (SQLite in
//!   the store folder) and runs (kept in memory, saved to `<store>/runs/` as
//!   they finish: the answer as JSON, the trace as JSONL), with the limits
//!   of [`Limits`] enforced.
//! - [`router`] maps the endpoints (see `API.md` and `GET /api/openapi.json`)
//!   to thin handlers over it, under one layer of access checks (token,
//!   Host, Origin: [`ServerOptions`]); [`serve`] runs it on a listener.
//!
//! ```no_run
//! # async fn demo(engine: rlm_engine::Engine, store: std::sync::Arc<rlm_corpus::Store>) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let app = Arc::new(rlm_server::App::new(engine, store, rlm_server::Limits::default(), None, None)?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! rlm_server::serve(listener, app, std::future::pending()).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
// The OpenAPI document is one large `json!` literal.
#![recursion_limit = "256"]

mod access;
mod api;
mod app;
mod assets;
mod body;
mod compress;
mod conn;
mod docs_page;
mod documents;
mod error;
mod health;
mod indexing;
mod jobs;
mod local_state;
mod mount;
mod openai;
mod openapi;
mod options;
mod run_record;
mod sessions;
pub mod state;
mod storage;
mod store_watch;
mod sync;

pub use api::{INDEX_HTML, router, router_with_mcp};
pub use app::{App, AskBody, Limits, RUNS_DIR, Run, RunInfo, RunStatus, RunSummary, RunView};
pub use error::{ApiError, StartError, StateError};
pub use jobs::SOURCES_FILE;
pub use local_state::folder_state;
pub use mount::McpService;
pub use openapi::document as openapi_document;
pub use options::ServerOptions;
pub use store_watch::{GenerationSource, StoreWatch};

/// Serves the API and the UI on `listener` until `shutdown` resolves, with
/// the connection limits of the app's [`Limits`] (header, body and write
/// timeouts; connections at once). At shutdown, runs in progress are
/// cancelled and given [`Limits::shutdown_grace`] to save their partial
/// answers.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: std::sync::Arc<App>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_mcp(listener, app, None, shutdown).await
}

/// [`serve`] with `mcp` answering `/mcp` behind the same access checks
/// (the `rlm` binary's MCP server over streamable HTTP).
pub async fn serve_with_mcp(
    listener: tokio::net::TcpListener,
    app: std::sync::Arc<App>,
    mcp: Option<McpService>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = app.limits().clone();
    if let Ok(addr) = listener.local_addr() {
        app.set_bound_addr(addr);
    }
    let leases = tokio::spawn(app.clone().keep_leases());
    let on_shutdown = async {
        app.cancel_all();
        app.wait_idle(limits.shutdown_grace).await;
    };
    let served = conn::serve_connections(
        listener,
        router_with_mcp(app.clone(), mcp),
        &limits,
        shutdown,
        on_shutdown,
    )
    .await;
    leases.abort();
    served
}
