//! The MCP server over streamable HTTP, which `rlm serve` mounts at `/mcp`
//! inside its access layers (token, Host, Origin). Stateful sessions
//! (`Mcp-Session-Id`): a call's progress notifications and its result stream
//! back as server-sent events on the POST that made it.

use std::sync::Arc;

use rlm_corpus::Embedder;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::server::RlmServer;
use super::state::{Backend, McpState, Served};

/// What `rlm serve` mounts at `/mcp`, and the switch that ends its sessions.
pub struct McpEndpoint {
    /// The service for [`rlm_server::serve_with_mcp`].
    pub service: rlm_server::McpService,
    /// Ends every session and its event streams (at shutdown: an open
    /// stream would hold the server's graceful stop for its whole grace
    /// period).
    pub stop_sessions: Box<dyn Fn() + Send + Sync>,
}

/// The MCP endpoint over `app`: its store and corpus as they are at each
/// call (a re-index through the API is seen by the next one), its runs and
/// limits; `embedder` is the query embedder the server answers with.
pub fn http_service(app: Arc<rlm_server::App>, embedder: Option<Arc<dyn Embedder>>) -> McpEndpoint {
    let state = Arc::new(McpState {
        store_dir: app
            .local_store()
            .map(|s| s.dir().to_path_buf())
            .unwrap_or_default(),
        max_question_chars: app.limits().max_question_chars,
        // rlm serve adds documents through its own API (indexing jobs
        // that swap the corpus in between questions), not through MCP.
        allow_index: false,
        backend: Backend::Served(Served {
            app: app.clone(),
            embedder,
        }),
    });
    // The server's access layer checks the Host header before this service
    // sees a request (localhost, the bound address, --allowed-host), and the
    // Origin of every POST and DELETE: rmcp's own loopback-only list would
    // refuse what the server allows (a LAN address, --allowed-host), so
    // there is one list, the server's.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(app.limits().max_body_bytes);
    let stop = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(RlmServer::new(state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    McpEndpoint {
        service: rlm_server::McpService::new(service),
        stop_sessions: Box::new(move || stop.cancel()),
    }
}
