//! The MCP server over streamable HTTP, which `rlm serve` mounts at `/mcp`
//! inside its access layers (token, Host, Origin). Stateful sessions
//! (`Mcp-Session-Id`): a call's progress notifications and its result stream
//! back as server-sent events on the POST that made it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use rlm_corpus::Embedder;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::server::RlmServer;
use super::sessions::{MAX_SESSIONS, Sessions};
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
    let sessions = Arc::new(Sessions::default());
    let service = StreamableHttpService::new(
        move || Ok(RlmServer::new(state.clone())),
        sessions.clone(),
        config,
    );
    McpEndpoint {
        service: rlm_server::McpService::new(JsonRpcErrors { service, sessions }),
        stop_sessions: Box::new(move || stop.cancel()),
    }
}

/// Answers what the SDK refuses in plain text with a JSON-RPC error: a body
/// that is not JSON (the SDK says 415) becomes a 400 with a parse error
/// (-32700), any other refusal of a request keeps its status with an
/// invalid-request error (-32600). An MCP client reads JSON-RPC errors, not
/// text.
#[derive(Clone)]
struct JsonRpcErrors<S> {
    service: S,
    /// Counted before a new session is asked for: past the cap, a 503.
    sessions: Arc<Sessions>,
}

/// How much of a refusal's text is kept as the error message.
const REFUSAL_TEXT_BYTES: usize = 4 * 1024;

impl<S> tower_service::Service<Request> for JsonRpcErrors<S>
where
    S: tower_service::Service<Request, Error = Infallible>,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.service.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let new_session = req.method() == axum::http::Method::POST
            && !req.headers().contains_key("mcp-session-id");
        if new_session && self.sessions.open() >= MAX_SESSIONS {
            let full = json_rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                format!(
                    "the server has {MAX_SESSIONS} MCP sessions open, its limit: close one (DELETE /mcp with its Mcp-Session-Id) or retry when an idle one has ended"
                ),
            );
            return Box::pin(async move { Ok(full) });
        }
        let answer = self.service.call(req);
        Box::pin(async move {
            let Ok(response) = answer.await;
            Ok(as_json_rpc_error(response.into_response()).await)
        })
    }
}

async fn as_json_rpc_error(response: Response) -> Response {
    let status = response.status();
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.starts_with("text/plain"));
    if !status.is_client_error() || !plain || status == StatusCode::NOT_FOUND {
        return response;
    }
    let (_, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, REFUSAL_TEXT_BYTES * 4).await {
        Ok(bytes) => {
            String::from_utf8_lossy(&bytes[..bytes.len().min(REFUSAL_TEXT_BYTES)]).into_owned()
        }
        Err(_) => String::new(),
    };
    let not_json = status == StatusCode::UNSUPPORTED_MEDIA_TYPE && !text.contains("Content-Type");
    let (status, code, message) = if not_json {
        (
            StatusCode::BAD_REQUEST,
            -32700,
            format!("parse error: the body is not a JSON-RPC message ({text})"),
        )
    } else {
        (status, -32600, text)
    };
    json_rpc_error(status, code, message)
}

/// A JSON-RPC error answer that belongs to no request.
fn json_rpc_error(status: StatusCode, code: i64, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    }
    response
}
