//! The scripted server's responses: a reply in the wire format the request
//! used (a JSON body, an OpenAI event stream, Anthropic message events),
//! the errors a real endpoint gives, and the body type that can fail
//! part-way through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::Response;
use serde_json::{Value, json};

use super::request::{ReceivedRequest, WireApi};
use super::script::{Reply, ReplyUsage};

pub(super) fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// A successful answer in the request's format. With `truncate`, only the
/// first half of it is sent before the connection fails.
pub(super) fn success(
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
pub(super) fn as_event_stream(
    answer: Response<ScriptBody>,
    request: &Value,
) -> Response<ScriptBody> {
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
pub(super) fn as_message_events(answer: Response<ScriptBody>) -> Response<ScriptBody> {
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
pub(super) fn word_pieces(text: &str) -> Vec<&str> {
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

pub(super) fn event_stream_response(sse: String) -> Response<ScriptBody> {
    let mut r = Response::new(ScriptBody::full(Bytes::from(sse)));
    r.headers_mut().insert(
        "content-type",
        "text/event-stream".parse().expect("valid header"),
    );
    r
}

pub(super) fn unknown_model(api: WireApi, model: &str) -> Response<ScriptBody> {
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
pub(super) fn schema_rejected(api: WireApi) -> Response<ScriptBody> {
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

pub(super) fn models_response(models: &[String]) -> Response<ScriptBody> {
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

pub(super) fn error_response(
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

pub(super) fn json_response(
    status: u16,
    body: &Value,
    headers: &[(&str, &str)],
) -> Response<ScriptBody> {
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

pub(super) fn plain(status: u16, text: &str) -> Response<ScriptBody> {
    let mut r = Response::new(ScriptBody::full(Bytes::from(text.to_string())));
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    r
}

/// A response body: whole, or a first part followed (after a pause, so the
/// part is flushed) by an error that makes hyper close the connection.
pub struct ScriptBody {
    pub(super) data: Option<Bytes>,
    fail: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl ScriptBody {
    pub(super) fn full(data: Bytes) -> Self {
        ScriptBody {
            data: Some(data),
            fail: None,
        }
    }

    pub(super) fn truncated(data: Bytes) -> Self {
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
