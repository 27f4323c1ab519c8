//! `/mcp`: a service another crate answers it with (the `rlm` binary's
//! Model Context Protocol server over streamable HTTP), mounted inside the
//! access layers so the token, Host and Origin checks cover it as they
//! cover the API. This crate knows nothing of the protocol.

use std::convert::Infallible;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;

/// An HTTP service for `/mcp` (see [`crate::serve_with_mcp`]); it sees the
/// paths below `/mcp` (`/mcp` itself as `/`).
#[derive(Clone)]
pub struct McpService(pub(crate) Router);

impl McpService {
    /// Wraps any tower service that answers every request.
    pub fn new<S>(service: S) -> Self
    where
        S: tower_service::Service<Request, Error = Infallible> + Clone + Send + Sync + 'static,
        S::Response: IntoResponse,
        S::Future: Send + 'static,
    {
        McpService(Router::new().fallback_service(service))
    }
}

impl std::fmt::Debug for McpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpService")
    }
}
