//! The HTTP side of the scripted server: hyper on 127.0.0.1:0, one task per
//! connection, so a scripted connection drop can close exactly one socket.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinSet};

use super::request::{ReceivedRequest, WireApi};
use super::responses::{
    ScriptBody, as_event_stream, as_message_events, error_response, models_response, plain,
    schema_rejected, success, unknown_model,
};
use super::script::{Fault, Reply, Rule, Script};
use crate::client::LlmClient;
use crate::config::{ApiKey, ConfigOverrides, LlmConfig, ProviderKind};
use crate::types::{Message, Role};

/// The API key [`ScriptedServer::config`] puts in its configurations.
pub const TEST_API_KEY: &str = "test-key";

struct State {
    script: Mutex<Script>,
    requests: Mutex<Vec<ReceivedRequest>>,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts a request in flight for as long as it lives.
struct InFlight<'a>(&'a State);

impl<'a> InFlight<'a> {
    fn enter(state: &'a State) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.peak.fetch_max(now, Ordering::SeqCst);
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running scripted model server. Stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<AbortHandle>,
    background: Option<(
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    )>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl ScriptedServer {
    /// Starts the server on the current tokio runtime.
    pub async fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("scripted server: cannot bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("bound socket has an address");
        let state = Arc::new(State {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        });
        let task = tokio::spawn(accept_loop(listener, state.clone()));
        ScriptedServer {
            addr,
            state,
            accept: Some(task.abort_handle()),
            background: None,
        }
    }

    /// Starts the server on its own thread and runtime, for synchronous tests
    /// (e.g. ones that run the `rlm` binary).
    pub fn spawn(script: Script) -> Self {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("scripted-llm".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("scripted server: cannot build a tokio runtime");
                runtime.block_on(async move {
                    let server = ScriptedServer::start(script).await;
                    let _ = ready_tx.send((server.addr, server.state.clone()));
                    let _ = stop_rx.await;
                    drop(server);
                });
            })
            .expect("scripted server: cannot spawn its thread");
        let (addr, state) = ready_rx
            .recv()
            .expect("scripted server thread died while starting");
        ScriptedServer {
            addr,
            state,
            accept: None,
            background: Some((stop_tx, thread)),
        }
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (also the Azure resource endpoint).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: base URL for OpenAI and Anthropic clients.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// A configuration pointing at this server: key [`TEST_API_KEY`], root
    /// model `root-model`, sub model `sub-model`, 10 s timeout, 4 retries
    /// with 5–50 ms backoff, 8 concurrent requests.
    pub fn config(&self, provider: ProviderKind) -> LlmConfig {
        let overrides = ConfigOverrides {
            provider: Some(provider),
            base_url: Some(match provider {
                ProviderKind::Azure => self.url(),
                _ => self.base_url(),
            }),
            api_key: Some(ApiKey::new(TEST_API_KEY)),
            primary_model: Some("root-model".into()),
            sub_model: Some("sub-model".into()),
            timeout_secs: Some(10.0),
            max_concurrent: Some(8),
            max_retries: Some(4),
            ..ConfigOverrides::default()
        };
        let mut config = LlmConfig::from_toml_str("", &overrides, |_| None)
            .expect("scripted server: test configuration is valid");
        config.retry.initial_backoff = Duration::from_millis(5);
        config.retry.max_backoff = Duration::from_millis(50);
        config
    }

    /// An OpenAI-protocol client for [`ScriptedServer::config`].
    pub fn client(&self) -> LlmClient {
        LlmClient::from_config(self.config(ProviderKind::OpenAi))
            .expect("scripted server: test client builds")
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.state.requests).clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        lock(&self.state.requests).len()
    }

    /// The most requests ever in progress at once.
    pub fn peak_concurrency(&self) -> usize {
        self.state.peak.load(Ordering::SeqCst)
    }

    /// Ordered replies not yet used.
    pub fn remaining_replies(&self) -> usize {
        lock(&self.state.script).ordered.len()
    }

    /// Appends an ordered reply while running.
    pub fn push_reply(&self, reply: impl Into<Reply>) {
        lock(&self.state.script).ordered.push_back(reply.into());
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(task) = self.accept.take() {
            task.abort();
        }
        if let Some((stop, thread)) = self.background.take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}

/// Accepts connections; the set owns the connection tasks so aborting this
/// task stops them all.
async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                connections.spawn(serve_connection(stream, state.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(stream: tokio::net::TcpStream, state: Arc<State>) {
    let kill = Arc::new(Notify::new());
    let kill_for_service = kill.clone();
    let service = service_fn(move |req| {
        let state = state.clone();
        let kill = kill_for_service.clone();
        async move { Ok::<_, Infallible>(handle(&state, &kill, req).await) }
    });
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    // Dropping the connection future closes the socket: that is the drop fault.
    tokio::select! {
        _ = connection => {}
        _ = kill.notified() => {}
    }
}

async fn handle(state: &State, kill: &Notify, req: Request<Incoming>) -> Response<ScriptBody> {
    let _in_flight = InFlight::enter(state);
    let mut received = match read_request(req).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let Decision {
        reply,
        latency,
        models,
    } = decide(state, &received);
    received.outcome = match &reply {
        Ok(r) => match &r.outcome {
            Ok(_) => "text".to_string(),
            Err(f) => fault_name(f).to_string(),
        },
        Err(what) => what.to_string(),
    };
    let index = {
        let mut requests = lock(&state.requests);
        received.index = requests.len();
        requests.push(received.clone());
        received.index
    };

    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let Some(response) = respond(&received, reply, &models, kill).await else {
        return plain(500, "unreachable");
    };
    lock(&state.requests)[index].answered_at = Some(Instant::now());
    response
}

/// The request as recorded: its API (by route), model, messages, body and
/// headers. A request no API takes is answered here: an unreadable body,
/// an unknown route, a body that is not JSON.
async fn read_request(req: Request<Incoming>) -> Result<ReceivedRequest, Response<ScriptBody>> {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
    let bare_path = req.uri().path().to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(plain(400, "cannot read request body")),
    };

    let azure = bare_path.starts_with("/openai/deployments/")
        && bare_path.ends_with("/chat/completions")
        && bare_path.matches('/').count() == 5;
    let api = if method == Method::GET && bare_path == "/v1/models" {
        WireApi::Models
    } else if method == Method::POST && bare_path == "/v1/chat/completions" {
        WireApi::OpenAi
    } else if method == Method::POST && azure {
        WireApi::Azure
    } else if method == Method::POST && bare_path == "/v1/messages" {
        WireApi::Anthropic
    } else {
        return Err(plain(
            404,
            &format!("scripted server has no route {method} {bare_path}"),
        ));
    };

    let json: Value = if api == WireApi::Models {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| error_response(api, 400, "invalid_request_error", &e.to_string(), None))?
    };
    let model = match api {
        WireApi::Azure => bare_path
            .trim_start_matches("/openai/deployments/")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string(),
        _ => json
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    let field = |name: &str| json.get(name).filter(|v| !v.is_null()).cloned();
    Ok(ReceivedRequest {
        index: 0,
        api,
        path,
        model,
        messages: parse_messages(api, &json),
        response_format: field("response_format"),
        tools: field("tools"),
        tool_choice: field("tool_choice"),
        body: json,
        headers,
        received_at: Instant::now(),
        answered_at: None,
        outcome: String::new(),
    })
}

/// What the script says to a request, decided under its lock.
struct Decision {
    /// The scripted reply, or what else to answer: `unauthorized`,
    /// `models`, `unknown_model` or `script_exhausted`.
    reply: Result<Reply, &'static str>,
    /// How long to wait before answering.
    latency: Duration,
    /// The models the server lists.
    models: Vec<String>,
}

fn decide(state: &State, received: &ReceivedRequest) -> Decision {
    let mut script = lock(&state.script);
    let authorized = script
        .api_key
        .as_ref()
        .is_none_or(|key| presented_key(received) == Some(key.as_str()));
    let models = script
        .models
        .clone()
        .unwrap_or_else(|| vec!["root-model".into(), "sub-model".into()]);
    let reply = if !authorized {
        Err("unauthorized")
    } else if received.api == WireApi::Models {
        Err("models")
    } else if script
        .models
        .as_ref()
        .is_some_and(|m| !m.contains(&received.model))
    {
        Err("unknown_model")
    } else if script.reject_schemas && received.carries_schema() {
        Err("schema_rejected")
    } else {
        pick(&mut script, received).ok_or("script_exhausted")
    };
    let latency = match &reply {
        Ok(r) => r.latency.unwrap_or(script.latency),
        Err(_) => Duration::ZERO,
    };
    Decision {
        reply,
        latency,
        models,
    }
}

/// The answer to `received` (recorded as request `received.index`) by its
/// decided `reply`; `None` if a fault had nothing to send.
async fn respond(
    received: &ReceivedRequest,
    reply: Result<Reply, &'static str>,
    models: &[String],
    kill: &Notify,
) -> Option<Response<ScriptBody>> {
    let api = received.api;
    Some(match reply {
        Err("unauthorized") => error_response(
            api,
            401,
            "invalid_api_key",
            "Incorrect API key provided (scripted server)",
            None,
        ),
        Err("models") => models_response(models),
        Err("unknown_model") => unknown_model(api, &received.model),
        Err("schema_rejected") => schema_rejected(api),
        Err(_) => error_response(
            api,
            400,
            "script_exhausted",
            &format!(
                "scripted server: no reply left for request #{} (last message: {:?})",
                received.index,
                received.last_message().chars().take(80).collect::<String>()
            ),
            None,
        ),
        Ok(reply) => match reply.outcome {
            Ok(ref text) => {
                let answer = success(api, received, text, &reply, false);
                match (api, received.body["stream"] == true) {
                    (_, false) => answer,
                    (WireApi::Anthropic, true) => as_message_events(answer),
                    (_, true) => as_event_stream(answer, &received.body),
                }
            }
            Err(fault) => act_out(api, received, fault, kill).await?,
        },
    })
}

/// The first applicable rule's reply, else the next ordered one, else
/// `otherwise`.
fn pick(script: &mut Script, request: &ReceivedRequest) -> Option<Reply> {
    for rule in script.rules.iter_mut() {
        match rule {
            Rule::When {
                matcher,
                replies,
                repeat_last,
            } => {
                if replies.is_empty() || !matcher.matches(request) {
                    continue;
                }
                if replies.len() == 1 && *repeat_last {
                    return replies.front().cloned();
                }
                return replies.pop_front();
            }
            Rule::Respond(f) => {
                if let Some(reply) = f(request) {
                    return Some(reply);
                }
            }
        }
    }
    script
        .ordered
        .pop_front()
        .or_else(|| script.otherwise.clone())
}

fn fault_name(fault: &Fault) -> &'static str {
    match fault {
        Fault::RateLimited { .. } => "rate_limited",
        Fault::ServerError => "server_error",
        Fault::ServiceUnavailable => "service_unavailable",
        Fault::Unauthorized => "unauthorized",
        Fault::UnknownModel => "unknown_model",
        Fault::Status { .. } => "status",
        Fault::DropConnection => "drop_connection",
        Fault::Hang => "hang",
        Fault::MalformedJson => "malformed_json",
        Fault::EmptyChoices => "empty_choices",
        Fault::TruncatedBody => "truncated_body",
    }
}

/// The key the client sent in its protocol's header.
fn presented_key(request: &ReceivedRequest) -> Option<&str> {
    match request.api {
        WireApi::Azure => request.header("api-key"),
        WireApi::Anthropic => request.header("x-api-key"),
        WireApi::OpenAi => request
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer ")),
        WireApi::Models => request
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| request.header("x-api-key"))
            .or_else(|| request.header("api-key")),
    }
}

/// Text of a `content` field: a string or a list of text blocks.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn parse_messages(api: WireApi, body: &Value) -> Vec<Message> {
    let mut out = Vec::new();
    if api == WireApi::Anthropic
        && let Some(system) = body.get("system")
    {
        out.push(Message::system(content_text(system)));
    }
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("system") | Some("developer") => Role::System,
            Some("assistant") => Role::Assistant,
            _ => Role::User,
        };
        out.push(Message {
            role,
            content: content_text(m.get("content").unwrap_or(&Value::Null)),
        });
    }
    out
}

async fn act_out(
    api: WireApi,
    request: &ReceivedRequest,
    fault: Fault,
    kill: &Notify,
) -> Option<Response<ScriptBody>> {
    Some(match fault {
        Fault::RateLimited { retry_after_secs } => {
            let mut headers = Vec::new();
            if let Some(secs) = retry_after_secs {
                if secs.fract() == 0.0 {
                    headers.push(("retry-after", format!("{secs}")));
                } else {
                    headers.push(("retry-after-ms", format!("{}", secs * 1000.0)));
                    headers.push(("retry-after", format!("{}", secs.ceil())));
                }
            }
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            error_response(
                api,
                429,
                "rate_limit_exceeded",
                "Rate limit reached (scripted)",
                Some(&headers),
            )
        }
        Fault::ServerError => {
            error_response(api, 500, "server_error", "internal error (scripted)", None)
        }
        Fault::ServiceUnavailable => error_response(
            api,
            503,
            "overloaded",
            "service unavailable (scripted)",
            None,
        ),
        Fault::Unauthorized => error_response(
            api,
            401,
            "invalid_api_key",
            "Incorrect API key provided (scripted)",
            None,
        ),
        Fault::UnknownModel => unknown_model(api, &request.model),
        Fault::Status { status, message } => {
            error_response(api, status, "scripted_error", &message, None)
        }
        Fault::DropConnection => {
            kill.notify_one();
            std::future::pending::<()>().await;
            return None;
        }
        Fault::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            plain(500, "hung for an hour")
        }
        Fault::MalformedJson => {
            let mut r = Response::new(ScriptBody::full(Bytes::from_static(
                b"{\"choices\": [ this is not json",
            )));
            r.headers_mut().insert(
                "content-type",
                "application/json".parse().expect("valid header"),
            );
            r
        }
        Fault::EmptyChoices => success(api, request, "", &Reply::text(""), true),
        Fault::TruncatedBody => {
            let full = success(
                api,
                request,
                "this answer will be cut off",
                &Reply::text(""),
                false,
            );
            let bytes = full.into_body().data.unwrap_or_default();
            let half = bytes.slice(..bytes.len() / 2);
            let mut r = Response::new(ScriptBody::truncated(half));
            r.headers_mut().insert(
                "content-type",
                "application/json".parse().expect("valid header"),
            );
            r
        }
    })
}
