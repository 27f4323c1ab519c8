//! The Anthropic Messages API: system prompt as a top-level field,
//! `x-api-key` and `anthropic-version` headers, `max_tokens` required.

use serde_json::{Value, json};

use super::http::{self, Target};
use super::openai::{JsonBody, parse_model_list};
use super::{BoxFuture, Provider, wire_schema_name};
use crate::config::ApiKey;
use crate::error::LlmError;
use crate::types::{FinishReason, ModelReply, ModelRequest, ReplySchema, ReportedUsage, Role};

/// `max_tokens` sent when neither the request nor the role sets one; the
/// Messages API requires the field.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u32 = 4096;

/// The Messages protocol.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    http: reqwest::Client,
    base_url: String,
    key: ApiKey,
    version: String,
    stream: bool,
}

impl AnthropicProvider {
    /// The API at `base_url` (e.g. `https://api.anthropic.com/v1`).
    pub fn new(http: reqwest::Client, base_url: &str, key: ApiKey, version: &str) -> Self {
        AnthropicProvider {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            version: version.to_string(),
            stream: false,
        }
    }

    /// Streams replies (server-sent events) for requests with a token sink.
    pub fn with_streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    fn headers(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req.header("x-api-key", self.key.expose())
            .header("anthropic-version", &self.version)
    }

    fn body(request: &ModelRequest) -> Value {
        // System messages, wherever they are, become the top-level prompt.
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let messages: Vec<Value> = request
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        let mut body = json!({
            "model": request.model,
            "max_tokens": request.max_output_tokens.unwrap_or(DEFAULT_ANTHROPIC_MAX_TOKENS),
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        // A stop sequence could only cut a constrained document short.
        if !request.stop.is_empty() && request.schema.is_none() {
            body["stop_sequences"] = json!(request.stop);
        }
        if let Some(schema) = &request.schema {
            let name = wire_schema_name(&schema.name);
            body["tools"] = json!([{
                "name": name,
                "description": "Reply by calling this tool: its input is the whole reply.",
                "input_schema": SchemaTool::of(schema).input_schema(schema),
            }]);
            body["tool_choice"] = json!({"type": "tool", "name": name});
        }
        body
    }
}

/// A request's schema as Anthropic's forced tool: the reply is the tool
/// call's input. Tool inputs are objects, so another schema is wrapped as
/// the one property `value` and unwrapped from the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SchemaTool {
    wrapped: bool,
}

impl SchemaTool {
    fn of(schema: &ReplySchema) -> Self {
        SchemaTool {
            wrapped: schema.schema.get("type").and_then(Value::as_str) != Some("object"),
        }
    }

    /// The tool's input schema. A wrapper takes the definitions up to its
    /// root, where the schema's `#/$defs/...` references look for them.
    fn input_schema(self, schema: &ReplySchema) -> Value {
        if !self.wrapped {
            return schema.schema.clone();
        }
        let mut inner = schema.schema.clone();
        let mut wrapper = json!({"type": "object", "required": ["value"]});
        for defs in ["$defs", "definitions"] {
            if let Some(found) = inner.as_object_mut().and_then(|m| m.remove(defs)) {
                wrapper[defs] = found;
            }
        }
        wrapper["properties"] = json!({ "value": inner });
        wrapper
    }

    /// The reply text of a tool input: its JSON, unwrapped.
    fn reply_text(self, input: &Value) -> String {
        match input.get("value") {
            Some(value) if self.wrapped => value.to_string(),
            _ => input.to_string(),
        }
    }
}

/// Parses a Messages response body. With a schema `tool`, the reply is
/// the input of its `tool_use` block.
fn parse_reply(
    requested_model: &str,
    body: &Value,
    tool: Option<SchemaTool>,
) -> Result<ModelReply, LlmError> {
    let malformed = |detail: &str| http::malformed("anthropic", detail, body);
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no 'content' array"))?;
    if content.is_empty() {
        return Err(LlmError::NoChoices {
            provider: "anthropic".into(),
        });
    }
    let tool_input = tool.and_then(|t| {
        content
            .iter()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .and_then(|b| b.get("input"))
            .map(|input| t.reply_text(input))
    });
    let answered_by_tool = tool_input.is_some();
    let text: String = tool_input.unwrap_or_else(|| {
        content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect()
    });
    let usage = body.get("usage").and_then(|u| {
        let uncached = u.get("input_tokens")?.as_u64()?;
        let output = u.get("output_tokens")?.as_u64()?;
        let read = u
            .get("cache_read_input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let written = u
            .get("cache_creation_input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        // Anthropic counts cache reads and writes apart from `input_tokens`;
        // our input count includes them, as OpenAI's does.
        Some(ReportedUsage {
            input_tokens: uncached + read + written,
            output_tokens: output,
            cached_tokens: u.get("cache_read_input_tokens").map(|_| read),
        })
    });
    let stop_reason = body.get("stop_reason").and_then(Value::as_str);
    Ok(ModelReply {
        text,
        finish_reason: stop_reason_of(stop_reason, answered_by_tool),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(requested_model)
            .to_string(),
        usage,
        draft: None,
    })
}

/// Why a reply ended. A forced tool call is how a schema reply ends: the
/// reply is complete, not a request to run a tool.
fn stop_reason_of(stop_reason: Option<&str>, answered_by_tool: bool) -> FinishReason {
    match stop_reason {
        Some("tool_use") if answered_by_tool => FinishReason::Stop,
        other => FinishReason::from_wire(other),
    }
}

/// What a streamed Messages answer has said so far: `message_start`
/// (model, input usage), `content_block_delta` (text, or the schema tool's
/// input as `input_json_delta`), `message_delta` (stop reason, output
/// usage), `message_stop` (the end).
#[derive(Default)]
struct MessageStream {
    text: String,
    model: Option<String>,
    stop_reason: Option<String>,
    /// The usage object of `message_start`, updated by `message_delta`.
    usage: Option<Value>,
    started: bool,
    /// The request's schema tool, if it had a schema.
    tool: Option<SchemaTool>,
    /// The schema tool's input JSON as it came, once its block started.
    tool_json: Option<String>,
}

impl MessageStream {
    /// Takes one event; true at `message_stop`.
    fn event(&mut self, event: &Value, sink: &crate::TokenSink) -> Result<bool, LlmError> {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.started = true;
                let message = &event["message"];
                self.model = message["model"].as_str().map(str::to_string);
                self.usage = message.get("usage").cloned();
            }
            Some("content_block_start")
                if self.tool.is_some() && event["content_block"]["type"] == "tool_use" =>
            {
                self.tool_json.get_or_insert_with(String::new);
            }
            Some("content_block_delta") => self.delta(&event["delta"], sink),
            Some("message_delta") => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                if let (Some(Value::Object(usage)), Some(Value::Object(more))) =
                    (self.usage.as_mut(), event.get("usage"))
                {
                    for (k, v) in more {
                        usage.insert(k.clone(), v.clone());
                    }
                }
            }
            Some("message_stop") => return Ok(true),
            Some("error") => {
                let message = event["error"]["message"]
                    .as_str()
                    .unwrap_or("error in the event stream");
                return Err(LlmError::Server {
                    provider: "anthropic".into(),
                    status: 500,
                    retry_after: None,
                    message: http::snippet(message),
                });
            }
            _ => {} // ping, text content_block_start, content_block_stop
        }
        Ok(false)
    }

    /// A piece of text, or of the schema tool's input: streamed as it
    /// comes unless the input is wrapped (then the whole unwrapped reply
    /// is sent at the end).
    fn delta(&mut self, delta: &Value, sink: &crate::TokenSink) {
        match (delta["type"].as_str(), &mut self.tool_json) {
            (Some("text_delta"), _) => {
                if let Some(text) = delta["text"].as_str() {
                    self.text.push_str(text);
                    sink.send(text);
                }
            }
            (Some("input_json_delta"), Some(json)) => {
                if let Some(piece) = delta["partial_json"].as_str() {
                    json.push_str(piece);
                    if self.tool.is_some_and(|t| !t.wrapped) {
                        sink.send(piece);
                    }
                }
            }
            _ => {}
        }
    }

    /// The reply, read like a whole Messages body. A schema tool's input
    /// is the text: as streamed, or unwrapped (and sent now) if wrapped.
    fn finish(
        self,
        requested_model: &str,
        sink: &crate::TokenSink,
    ) -> Result<ModelReply, LlmError> {
        if !self.started {
            return Err(LlmError::NoChoices {
                provider: "anthropic".into(),
            });
        }
        let answered_by_tool = self.tool_json.is_some();
        let text = match (self.tool, self.tool_json) {
            (Some(tool), Some(json)) if tool.wrapped => {
                let text = serde_json::from_str(&json)
                    .map_or(json, |input: Value| tool.reply_text(&input));
                sink.send(&text);
                text
            }
            (Some(_), Some(json)) if json.trim().is_empty() => {
                // An empty object's input may come as no pieces at all.
                sink.send("{}");
                "{}".to_string()
            }
            (_, Some(json)) => json,
            (_, None) => self.text,
        };
        let stop_reason = match stop_reason_of(self.stop_reason.as_deref(), answered_by_tool) {
            FinishReason::Stop => Some("end_turn".to_string()),
            _ => self.stop_reason,
        };
        let mut body = json!({
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "model": self.model.as_deref().unwrap_or(requested_model),
        });
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        parse_reply(requested_model, &body, None)
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn endpoint(&self) -> &str {
        &self.base_url
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>> {
        Box::pin(async move {
            let url = format!("{}/messages", self.base_url);
            let mut body = Self::body(request);
            let sink = request.on_token.as_ref().filter(|_| self.stream);
            if sink.is_some() {
                body["stream"] = json!(true);
            }
            let builder = self.headers(self.http.post(&url)).json_body(&body);
            let target = Target {
                provider: "anthropic",
                model: Some(&request.model),
            };
            let tool = request.schema.as_ref().map(SchemaTool::of);
            let Some(sink) = sink else {
                let body = http::exchange(builder, &url, target).await?;
                return parse_reply(&request.model, &body, tool);
            };
            let response = http::open(builder, &url, target).await?;
            let mut stream = MessageStream {
                tool,
                ..MessageStream::default()
            };
            let streamed = http::read_stream(response, "anthropic", |data| {
                stream.event(&http::event_json("anthropic", data)?, sink)
            })
            .await?;
            match streamed {
                http::Streamed::Whole(body) => {
                    let reply = parse_reply(&request.model, &body, tool)?;
                    sink.send(&reply.text);
                    Ok(reply)
                }
                http::Streamed::Events { ended: true } => stream.finish(&request.model, sink),
                http::Streamed::Events { ended: false } => Err(http::cut_short("anthropic")),
            }
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>> {
        Box::pin(async move {
            let url = format!("{}/models?limit=1000", self.base_url);
            let target = Target {
                provider: "anthropic",
                model: None,
            };
            let body = http::exchange(self.headers(self.http.get(&url)), &url, target).await?;
            parse_model_list("anthropic", &body)
        })
    }
}
