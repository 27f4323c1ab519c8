//! The HTTP side of the scripted server: hyper on 127.0.0.1:0, one task per
//! connection, so a scripted connection drop can close exactly one socket.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinSet};

use super::request::{ReceivedRequest, WireApi};
use super::script::{Fault, Reply, ReplyUsage, Rule, Script};
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

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// A successful answer in the request's format. With `truncate`, only the
/// first half of it is sent before the connection fails.
fn success(
    api: WireApi,
    request: &ReceivedRequest,
    text: &str,
    reply: &Reply,
    empty: bool,
) -> Response<ScriptBody> {
    let (input, output, cached) = match reply.usage {
        ReplyUsage::Counted => (
            request.messages.iter().map(|m| words(&m.content) + 1).sum(),
            words(text),
            None,
        ),
        ReplyUsage::Exact {
            input,
            output,
            cached,
        } => (input, output, cached),
        ReplyUsage::Omitted => (0, 0, None),
    };
    let with_usage = reply.usage != ReplyUsage::Omitted;
    let body = match api {
        WireApi::Anthropic => {
            let stop_reason = match reply.finish_reason.as_str() {
                "stop" => "end_turn",
                "length" => "max_tokens",
                other => other,
            };
            // A forced tool gets its call when the reply is a JSON object.
            let tool_call = request.forced_tool().zip(
                serde_json::from_str::<Value>(text)
                    .ok()
                    .filter(Value::is_object),
            );
            let (content, stop_reason) = match tool_call {
                _ if empty => (json!([]), stop_reason),
                Some((name, input)) => (
                    json!([{"type": "tool_use", "id": format!("toolu_scripted_{}", request.index),
                            "name": name, "input": input}]),
                    "tool_use",
                ),
                None => (json!([{"type": "text", "text": text}]), stop_reason),
            };
            let mut body = json!({
                "id": format!("msg_scripted_{}", request.index),
                "type": "message",
                "role": "assistant",
                "model": reply.model.as_deref().unwrap_or(&request.model),
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": null,
            });
            if with_usage {
                let cached_n = cached.unwrap_or(0).min(input);
                let mut usage = json!({"input_tokens": input - cached_n, "output_tokens": output});
                if let Some(c) = cached {
                    usage["cache_read_input_tokens"] = json!(c);
                }
                body["usage"] = usage;
            }
            body
        }
        _ => {
            let choices = if empty {
                json!([])
            } else {
                json!([{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": reply.finish_reason,
                }])
            };
            let mut body = json!({
                "id": format!("chatcmpl-scripted-{}", request.index),
                "object": "chat.completion",
                "created": 0,
                "model": reply.model.as_deref().unwrap_or(&request.model),
                "choices": choices,
            });
            if with_usage {
                let mut usage = json!({
                    "prompt_tokens": input,
                    "completion_tokens": output,
                    "total_tokens": input + output,
                });
                if let Some(c) = cached {
                    usage["prompt_tokens_details"] = json!({"cached_tokens": c});
                }
                body["usage"] = usage;
            }
            body
        }
    };
    json_response(200, &body, &[])
}

/// A Chat Completions answer as OpenAI streams it: `chat.completion.chunk`
/// events carrying the text a word at a time, the finish reason, the usage
/// (when the request asked with `stream_options.include_usage`), `[DONE]`.
fn as_event_stream(answer: Response<ScriptBody>, request: &Value) -> Response<ScriptBody> {
    let bytes = answer.into_body().data.unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let choice = &body["choices"][0];
    let text = choice["message"]["content"].as_str().unwrap_or_default();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": body["id"], "object": "chat.completion.chunk", "created": 0, "model": body["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in word_pieces(text) {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    events.push(chunk(json!({}), choice["finish_reason"].clone()));
    if request["stream_options"]["include_usage"] == true && !body["usage"].is_null() {
        events.push(
            json!({"id": body["id"], "object": "chat.completion.chunk", "created": 0,
                           "model": body["model"], "choices": [], "usage": body["usage"]}),
        );
    }
    let mut sse = String::new();
    for e in &events {
        sse.push_str(&format!("data: {e}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    event_stream_response(sse)
}

/// A Messages answer as Anthropic streams it: `message_start` (input
/// usage), a text block whose deltas carry the text a word at a time (or
/// a tool_use block whose `input_json_delta`s carry its input's JSON),
/// `message_delta` (stop reason, output usage), `message_stop`.
fn as_message_events(answer: Response<ScriptBody>) -> Response<ScriptBody> {
    let bytes = answer.into_body().data.unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let block = &body["content"][0];
    let (opening, pieces) = if block["type"] == "tool_use" {
        let json = block["input"].to_string();
        let mut opening = block.clone();
        opening["input"] = json!({});
        // Pieces of a few characters, as the API cuts JSON anywhere.
        let chars: Vec<char> = json.chars().collect();
        let pieces: Vec<Value> = chars
            .chunks(7)
            .map(|p| json!({"type": "input_json_delta", "partial_json": p.iter().collect::<String>()}))
            .collect();
        (opening, pieces)
    } else {
        let text = block["text"].as_str().unwrap_or_default();
        let pieces = word_pieces(text)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        (json!({"type": "text", "text": ""}), pieces)
    };
    let mut start = body.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    if let Some(usage) = start.get_mut("usage") {
        usage["output_tokens"] = json!(1);
    }
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": start}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": opening}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for delta in pieces {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": body["stop_reason"], "stop_sequence": null}});
    if !body["usage"].is_null() {
        delta["usage"] = json!({"output_tokens": body["usage"]["output_tokens"]});
    }
    events.push(("message_delta", delta));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let sse: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    event_stream_response(sse)
}

/// Words with their following whitespace: the pieces add up to `text`.
fn word_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let end = i + c.len_utf8();
        if c.is_whitespace() && text[end..].starts_with(|n: char| !n.is_whitespace()) {
            pieces.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

fn event_stream_response(sse: String) -> Response<ScriptBody> {
    let mut r = Response::new(ScriptBody::full(Bytes::from(sse)));
    r.headers_mut().insert(
        "content-type",
        "text/event-stream".parse().expect("valid header"),
    );
    r
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

fn unknown_model(api: WireApi, model: &str) -> Response<ScriptBody> {
    match api {
        WireApi::Anthropic => error_response(
            api,
            404,
            "not_found_error",
            &format!("model: {model}"),
            None,
        ),
        _ => error_response(
            api,
            404,
            "model_not_found",
            &format!("The model `{model}` does not exist or you do not have access to it."),
            None,
        ),
    }
}

/// The 400 of a server without structured outputs, in the protocol's words.
fn schema_rejected(api: WireApi) -> Response<ScriptBody> {
    match api {
        WireApi::Anthropic => error_response(
            api,
            400,
            "invalid_request_error",
            "tools: tool use is not supported by this model (scripted)",
            None,
        ),
        _ => error_response(
            api,
            400,
            "invalid_request_error",
            "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model (scripted)",
            None,
        ),
    }
}

fn models_response(models: &[String]) -> Response<ScriptBody> {
    let data: Vec<Value> = models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "type": "model", "display_name": id, "owned_by": "scripted"}))
        .collect();
    json_response(
        200,
        &json!({"object": "list", "data": data, "has_more": false}),
        &[],
    )
}

fn error_response(
    api: WireApi,
    status: u16,
    code: &str,
    message: &str,
    headers: Option<&[(&str, &str)]>,
) -> Response<ScriptBody> {
    let body = match api {
        WireApi::Anthropic => json!({"type": "error", "error": {"type": code, "message": message}}),
        _ => json!({"error": {"message": message, "type": code, "code": code}}),
    };
    json_response(status, &body, headers.unwrap_or(&[]))
}

fn json_response(status: u16, body: &Value, headers: &[(&str, &str)]) -> Response<ScriptBody> {
    let mut r = Response::new(ScriptBody::full(Bytes::from(body.to_string())));
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("valid header"),
    );
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(value),
        ) {
            r.headers_mut().insert(n, v);
        }
    }
    r
}

fn plain(status: u16, text: &str) -> Response<ScriptBody> {
    let mut r = Response::new(ScriptBody::full(Bytes::from(text.to_string())));
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    r
}

/// A response body: whole, or a first part followed (after a pause, so the
/// part is flushed) by an error that makes hyper close the connection.
pub struct ScriptBody {
    data: Option<Bytes>,
    fail: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl ScriptBody {
    fn full(data: Bytes) -> Self {
        ScriptBody {
            data: Some(data),
            fail: None,
        }
    }

    fn truncated(data: Bytes) -> Self {
        ScriptBody {
            data: Some(data),
            fail: Some(Box::pin(tokio::time::sleep(Duration::from_millis(50)))),
        }
    }
}

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        match self.fail.as_mut() {
            None => Poll::Ready(None),
            Some(sleep) => match sleep.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    self.fail = None;
                    Poll::Ready(Some(Err(io::Error::other("scripted truncation"))))
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.fail.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.data, &self.fail) {
            (Some(d), None) => SizeHint::with_exact(d.len() as u64),
            (None, None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
