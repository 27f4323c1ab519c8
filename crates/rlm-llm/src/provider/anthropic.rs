//! The Anthropic Messages API: system prompt as a top-level field,
//! `x-api-key` and `anthropic-version` headers, `max_tokens` required.

use serde_json::{Value, json};

use super::http::{self, Target};
use super::openai::{JsonBody, parse_model_list};
use super::{BoxFuture, Provider};
use crate::config::ApiKey;
use crate::error::LlmError;
use crate::types::{FinishReason, ModelReply, ModelRequest, ReportedUsage, Role};

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
}

impl AnthropicProvider {
    /// The API at `base_url` (e.g. `https://api.anthropic.com/v1`).
    pub fn new(http: reqwest::Client, base_url: &str, key: ApiKey, version: &str) -> Self {
        AnthropicProvider {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            version: version.to_string(),
        }
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
        if !request.stop.is_empty() {
            body["stop_sequences"] = json!(request.stop);
        }
        body
    }
}

/// Parses a Messages response body.
pub(crate) fn parse_reply(requested_model: &str, body: &Value) -> Result<ModelReply, LlmError> {
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
    let text: String = content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
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
    Ok(ModelReply {
        text,
        finish_reason: FinishReason::from_wire(body.get("stop_reason").and_then(Value::as_str)),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(requested_model)
            .to_string(),
        usage,
    })
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
            let builder = self
                .headers(self.http.post(&url))
                .json_body(&Self::body(request));
            let target = Target {
                provider: "anthropic",
                model: Some(&request.model),
            };
            let body = http::exchange(builder, &url, target).await?;
            parse_reply(&request.model, &body)
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
