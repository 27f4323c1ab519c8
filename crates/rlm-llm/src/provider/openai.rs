//! OpenAI Chat Completions, at api.openai.com, any compatible server, or
//! Azure OpenAI (deployment in the path, `api-version`, `api-key` header).

use serde_json::{Value, json};

use super::http::{self, Target};
use super::{BoxFuture, Provider, wire_schema_name};
use crate::config::ApiKey;
use crate::error::LlmError;
use crate::schema;
use crate::types::{FinishReason, ModelReply, ModelRequest, ReplySchema, ReportedUsage};

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
    stream: bool,
}

impl OpenAiProvider {
    /// OpenAI or a compatible server at `base_url` (e.g. `.../v1`).
    pub fn openai(http: reqwest::Client, base_url: &str, key: ApiKey) -> Self {
        OpenAiProvider {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            flavor: Flavor::OpenAi,
            stream: false,
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
            stream: false,
        }
    }

    /// Streams replies (server-sent events) for requests with a token sink.
    pub fn with_streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
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

    /// OpenAI's own API or Azure, rather than a compatible server.
    fn is_openai_hosted(&self) -> bool {
        matches!(self.flavor, Flavor::Azure { .. }) || self.base_url.contains("api.openai.com")
    }

    /// `response_format` for `schema`. OpenAI's own API and Azure get the
    /// strict copy where there is one (strict mode rejects some keywords;
    /// the reply is validated against the whole schema anyway), else the
    /// schema without strict mode. Compatible servers (vLLM, llama.cpp,
    /// Ollama) get the schema as it is: they constrain decoding to all of
    /// it, `maxLength` included.
    fn response_format(&self, schema: &ReplySchema) -> Value {
        let (sent, strict) = match schema::strict_copy(&schema.schema) {
            Some(copy) if self.is_openai_hosted() => (copy, true),
            _ if self.is_openai_hosted() => (schema.schema.clone(), false),
            _ => (
                schema.schema.clone(),
                schema::strict_compatible(&schema.schema),
            ),
        };
        json!({
            "type": "json_schema",
            "json_schema": {"name": wire_schema_name(&schema.name), "schema": sent, "strict": strict},
        })
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
            // OpenAI's own API (and Azure) want `max_completion_tokens`
            // (reasoning models reject `max_tokens`); compatible servers
            // know `max_tokens`.
            let field = if self.is_openai_hosted() {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(max);
        }
        // A stop sequence could only cut a constrained document short.
        if !request.stop.is_empty() && request.schema.is_none() {
            body["stop"] = json!(request.stop);
        }
        if let Some(schema) = &request.schema {
            body["response_format"] = self.response_format(schema);
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
        draft: None,
    })
}

/// Reads a streamed Chat Completions answer: `data: {chunk}` lines until
/// `data: [DONE]`, passing each piece of content to `sink`. A server that
/// ignored `stream` and answered with one JSON body is read as such.
async fn read_stream(
    provider: &str,
    requested_model: &str,
    response: reqwest::Response,
    sink: &crate::TokenSink,
) -> Result<ModelReply, LlmError> {
    let mut stream = ChunkStream::default();
    let streamed = http::read_stream(response, provider, |data| {
        if data == "[DONE]" {
            return Ok(true);
        }
        stream.chunk(provider, &http::event_json(provider, data)?, sink)?;
        Ok(false)
    })
    .await?;
    match streamed {
        http::Streamed::Whole(body) => {
            let reply = parse_reply(provider, requested_model, &body)?;
            sink.send(&reply.text);
            Ok(reply)
        }
        // Some servers end the stream after the last chunk without [DONE].
        http::Streamed::Events { ended } if ended || stream.finish_reason.is_some() => {
            stream.finish(provider, requested_model)
        }
        http::Streamed::Events { .. } => Err(http::cut_short(provider)),
    }
}

/// What a streamed answer has said so far.
#[derive(Default)]
struct ChunkStream {
    text: String,
    finish_reason: Option<String>,
    model: Option<String>,
    /// The `usage` object of the chunk that carried one (the last, with
    /// `stream_options.include_usage`).
    usage: Option<Value>,
    chunks: usize,
}

impl ChunkStream {
    /// Takes one chunk of the stream.
    fn chunk(
        &mut self,
        provider: &str,
        chunk: &Value,
        sink: &crate::TokenSink,
    ) -> Result<(), LlmError> {
        if let Some(err) = chunk.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error in the event stream");
            return Err(LlmError::Server {
                provider: provider.to_string(),
                status: 500,
                retry_after: None,
                message: http::snippet(message),
            });
        }
        self.chunks += 1;
        if let Some(m) = chunk.get("model").and_then(Value::as_str) {
            self.model.get_or_insert_with(|| m.to_string());
        }
        if let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        {
            if let Some(piece) = choice
                .get("delta")
                .and_then(|d| d.get("content"))
                .and_then(Value::as_str)
            {
                self.text.push_str(piece);
                sink.send(piece);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        Ok(())
    }

    /// The reply, read like a whole Chat Completions body.
    fn finish(self, provider: &str, requested_model: &str) -> Result<ModelReply, LlmError> {
        if self.chunks == 0 {
            return Err(LlmError::NoChoices {
                provider: provider.to_string(),
            });
        }
        let mut body = json!({
            "choices": [{"message": {"content": self.text}, "finish_reason": self.finish_reason}],
            "model": self.model.as_deref().unwrap_or(requested_model),
        });
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        parse_reply(provider, requested_model, &body)
    }
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
            let mut body = self.body(request);
            let sink = request.on_token.as_ref().filter(|_| self.stream);
            if sink.is_some() {
                body["stream"] = json!(true);
                body["stream_options"] = json!({"include_usage": true});
            }
            let builder = self.authorize(self.http.post(&url)).json_body(&body);
            let target = Target {
                provider: self.provider_name(),
                model: Some(&request.model),
            };
            let Some(sink) = sink else {
                let body = http::exchange(builder, &url, target).await?;
                return parse_reply(self.provider_name(), &request.model, &body);
            };
            let response = http::open(builder, &url, target).await?;
            read_stream(self.provider_name(), &request.model, response, sink).await
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
        // Schemas list their properties in the order replies should follow.
        self.header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(schema::ordered_json(body))
    }
}
