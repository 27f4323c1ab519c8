//! OpenAI Chat Completions, at api.openai.com, any compatible server, or
//! Azure OpenAI (deployment in the path, `api-version`, `api-key` header).

use serde_json::{Value, json};

use super::http::{self, Target};
use super::{BoxFuture, Provider};
use crate::config::ApiKey;
use crate::error::LlmError;
use crate::types::{FinishReason, ModelReply, ModelRequest, ReportedUsage};

#[derive(Debug, Clone)]
enum Flavor {
    OpenAi,
    Azure { api_version: String },
}

/// The Chat Completions protocol.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: reqwest::Client,
    base_url: String,
    key: ApiKey,
    flavor: Flavor,
}

impl OpenAiProvider {
    /// OpenAI or a compatible server at `base_url` (e.g. `.../v1`).
    pub fn openai(http: reqwest::Client, base_url: &str, key: ApiKey) -> Self {
        OpenAiProvider {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            flavor: Flavor::OpenAi,
        }
    }

    /// Azure OpenAI at the resource endpoint `base_url`; the request's model
    /// is the deployment name.
    pub fn azure(http: reqwest::Client, base_url: &str, key: ApiKey, api_version: &str) -> Self {
        OpenAiProvider {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            flavor: Flavor::Azure {
                api_version: api_version.to_string(),
            },
        }
    }

    fn chat_url(&self, model: &str) -> String {
        match &self.flavor {
            Flavor::OpenAi => format!("{}/chat/completions", self.base_url),
            Flavor::Azure { api_version } => format!(
                "{}/openai/deployments/{}/chat/completions?api-version={}",
                self.base_url, model, api_version
            ),
        }
    }

    fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.flavor {
            Flavor::OpenAi => req.bearer_auth(self.key.expose()),
            Flavor::Azure { .. } => req.header("api-key", self.key.expose()),
        }
    }

    /// OpenAI's own API (and Azure) want `max_completion_tokens` (reasoning
    /// models reject `max_tokens`); compatible servers know `max_tokens`.
    fn wants_max_completion_tokens(&self) -> bool {
        matches!(self.flavor, Flavor::Azure { .. }) || self.base_url.contains("api.openai.com")
    }

    fn body(&self, request: &ModelRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        let mut body = json!({ "messages": messages });
        if matches!(self.flavor, Flavor::OpenAi) {
            body["model"] = json!(request.model);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(max) = request.max_output_tokens {
            let field = if self.wants_max_completion_tokens() {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(max);
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        body
    }

    fn provider_name(&self) -> &'static str {
        match self.flavor {
            Flavor::OpenAi => "openai",
            Flavor::Azure { .. } => "azure",
        }
    }
}

/// Parses a Chat Completions response body.
pub(crate) fn parse_reply(
    provider: &str,
    requested_model: &str,
    body: &Value,
) -> Result<ModelReply, LlmError> {
    let malformed = |detail: &str| http::malformed(provider, detail, body);
    let choices = body
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no 'choices' array"))?;
    let choice = choices.first().ok_or_else(|| LlmError::NoChoices {
        provider: provider.to_string(),
    })?;
    let message = choice
        .get("message")
        .ok_or_else(|| malformed("choice has no 'message'"))?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(_) => return Err(malformed("'content' is not a string")),
    };
    let finish_reason =
        FinishReason::from_wire(choice.get("finish_reason").and_then(Value::as_str));
    let usage = body.get("usage").and_then(|u| {
        let input = u.get("prompt_tokens")?.as_u64()?;
        let output = u.get("completion_tokens")?.as_u64()?;
        let cached = u
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))
            .and_then(Value::as_u64);
        // Some servers send zeros rather than nothing; zeros for a non-empty
        // answer are no information, so estimate instead.
        (input > 0 || output > 0 || text.is_empty()).then_some(ReportedUsage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
        })
    });
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(requested_model)
        .to_string();
    Ok(ModelReply {
        text,
        finish_reason,
        model,
        usage,
    })
}

/// Parses a `/models` listing (`data[].id`), shared with Anthropic.
pub(crate) fn parse_model_list(provider: &str, body: &Value) -> Result<Vec<String>, LlmError> {
    let data = body
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| http::malformed(provider, "model list has no 'data' array", body))?;
    Ok(data
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
        .collect())
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        self.provider_name()
    }

    fn endpoint(&self) -> &str {
        &self.base_url
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>> {
        Box::pin(async move {
            let url = self.chat_url(&request.model);
            let builder = self
                .authorize(self.http.post(&url))
                .json_body(&self.body(request));
            let target = Target {
                provider: self.provider_name(),
                model: Some(&request.model),
            };
            let body = http::exchange(builder, &url, target).await?;
            parse_reply(self.provider_name(), &request.model, &body)
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>> {
        Box::pin(async move {
            if let Flavor::Azure { .. } = self.flavor {
                return Err(LlmError::Unsupported(
                    "Azure OpenAI does not list deployments on its inference API".into(),
                ));
            }
            let url = format!("{}/models", self.base_url);
            let target = Target {
                provider: self.provider_name(),
                model: None,
            };
            let body = http::exchange(self.authorize(self.http.get(&url)), &url, target).await?;
            parse_model_list(self.provider_name(), &body)
        })
    }
}

/// Sets a JSON body without reqwest's `json` feature.
pub(crate) trait JsonBody {
    /// Serializes `body` with a JSON content type.
    fn json_body(self, body: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, body: &Value) -> Self {
        self.header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
    }
}
