//! Request and response types shared by every provider.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stream::TokenSink;

/// Who wrote a message in a chat transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The caller's turn.
    User,
    /// The model's turn.
    Assistant,
}

impl Role {
    /// The wire name (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a chat transcript.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Which configured model answers a call: the root agent's (the primary model)
/// or the sub-agents' (the sub model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelRole {
    /// The root agent (depth 0), `RLM_PRIMARY_MODEL`.
    #[default]
    Root,
    /// Sub-agents and `llm_query` calls, `RLM_SUB_MODEL`.
    Sub,
}

impl ModelRole {
    /// `root` or `sub`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelRole::Root => "root",
            ModelRole::Sub => "sub",
        }
    }
}

/// A chat call as the engine states it: the transcript plus optional overrides.
/// Unset fields take the configured value for the request's [`ModelRole`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The transcript, oldest first.
    pub messages: Vec<Message>,
    /// Which configured model answers when `model` is not set.
    pub role: ModelRole,
    /// An explicit model name, overriding the role's model.
    pub model: Option<String>,
    /// Sampling temperature, overriding the role's.
    pub temperature: Option<f32>,
    /// Maximum tokens to generate, overriding the role's.
    pub max_output_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Depth of the calling agent in the RLM call tree (0 = root); used for
    /// accounting only.
    pub depth: u32,
    /// Receives the reply's text as it is generated, where the provider
    /// streams (the local model); others deliver only the whole reply.
    pub on_token: Option<TokenSink>,
    /// A JSON Schema the reply must follow: the provider constrains decoding
    /// to it where it can; see [`ChatResponse::schema_use`].
    pub schema: Option<ReplySchema>,
}

/// A JSON Schema a reply must follow. Providers constrain decoding to it
/// where they can: OpenAI-compatible servers and Azure with
/// `response_format` (strict `json_schema`), Anthropic with a forced tool
/// whose input schema it is, the embedded model with a llama.cpp grammar
/// built from it. The reply's text is then the JSON document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplySchema {
    /// A short name (ASCII letters, digits, `_` and `-`), sent where the wire
    /// protocol wants one (OpenAI's schema name, Anthropic's tool name).
    pub name: String,
    /// The JSON Schema.
    pub schema: serde_json::Value,
    /// Strings of the schema (JSON pointers, `#/properties/code`) the
    /// embedded model's grammar lets hold unescaped double quotes: a small
    /// model writing Python in a JSON string ends the string at the first
    /// `"` of `d["key"]` otherwise. The reply is then no strict JSON; its
    /// reader must expect that. Other providers ignore it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw_quotes: Vec<String>,
    /// A narrower schema the embedded model's grammar is built from instead
    /// of `schema`: every reply it admits, `schema` admits too. For what a
    /// server's schema cannot say (OpenAI's strict mode refuses a root
    /// `anyOf`), so other providers send `schema`. `raw_quotes` and
    /// `prefixes` then point into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<serde_json::Value>,
    /// Strings of the grammar's schema (JSON pointer, text) that must start
    /// with the text in the embedded model's grammar (a code step that
    /// starts with the call the turn declared). Other providers ignore it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<(String, String)>,
}

impl ReplySchema {
    /// A schema called `name`.
    pub fn new(name: impl Into<String>, schema: serde_json::Value) -> Self {
        ReplySchema {
            name: name.into(),
            schema,
            raw_quotes: Vec::new(),
            grammar: None,
            prefixes: Vec::new(),
        }
    }

    /// The schema, with the embedded model's grammar built from the
    /// narrower `grammar` ([`ReplySchema::grammar`]), whose strings at the
    /// paths of `prefixes` start with their text.
    pub fn with_grammar(
        mut self,
        grammar: serde_json::Value,
        prefixes: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        self.grammar = Some(grammar);
        self.prefixes = prefixes.into_iter().collect();
        self
    }

    /// The embedded model's grammar (GBNF) for this schema.
    pub fn to_gbnf(&self) -> Result<String, crate::schema::SchemaError> {
        crate::schema::to_gbnf_with(
            self.grammar.as_ref().unwrap_or(&self.schema),
            &self.raw_quotes,
            &self.prefixes,
        )
    }

    /// The schema, with the strings at `paths` allowed unescaped quotes
    /// in the embedded model's grammar ([`ReplySchema::raw_quotes`]).
    pub fn with_raw_quotes(mut self, paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.raw_quotes = paths.into_iter().map(Into::into).collect();
        self
    }
}

/// Whether a request's [`ReplySchema`] shaped the reply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SchemaUse {
    /// The request had no schema.
    #[default]
    NotAsked,
    /// The provider was given the schema and constrained the reply to it.
    Constrained,
    /// The endpoint refused the schema (now or on an earlier call: it is
    /// remembered per endpoint), so the request went as plain text; the
    /// reply may not follow the schema.
    Refused {
        /// What the endpoint said, or that it refused before.
        reason: String,
    },
}

impl ChatRequest {
    /// A request with the given transcript for the given role, depth 0 for
    /// [`ModelRole::Root`] and 1 for [`ModelRole::Sub`].
    pub fn new(role: ModelRole, messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            role,
            depth: match role {
                ModelRole::Root => 0,
                ModelRole::Sub => 1,
            },
            ..ChatRequest::default()
        }
    }

    /// A root request with one user message.
    pub fn user(text: impl Into<String>) -> Self {
        ChatRequest::new(ModelRole::Root, vec![Message::user(text)])
    }

    /// Puts a system message first.
    pub fn with_system(mut self, text: impl Into<String>) -> Self {
        self.messages.insert(0, Message::system(text));
        self
    }

    /// Names the model explicitly.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps the generated tokens.
    pub fn with_max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// Adds a stop sequence.
    pub fn with_stop(mut self, stop: impl Into<String>) -> Self {
        self.stop.push(stop.into());
        self
    }

    /// Sets the depth used for accounting.
    pub fn at_depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// Streams the reply's text into `sink` as it is generated.
    pub fn streaming_to(mut self, sink: TokenSink) -> Self {
        self.on_token = Some(sink);
        self
    }

    /// Asks for a reply that follows `schema`.
    pub fn with_schema(mut self, schema: ReplySchema) -> Self {
        self.schema = Some(schema);
        self
    }
}

/// A fully resolved request as a provider sends it: the model is named and the
/// role's defaults are applied. This is what record/replay hashes and stores;
/// it never holds credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Model (or Azure deployment) name.
    pub model: String,
    /// The transcript.
    pub messages: Vec<Message>,
    /// Sampling temperature; provider default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Maximum generated tokens; provider default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// The schema the reply must follow, when one was asked for and the
    /// endpoint takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<ReplySchema>,
    /// Where a streaming provider sends text as it is generated. Not part of
    /// the request's identity: never serialized, never hashed.
    #[serde(skip)]
    pub on_token: Option<TokenSink>,
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The output token limit was reached; the text is cut off.
    Length,
    /// The provider's content filter intervened.
    ContentFilter,
    /// The model asked for a tool call.
    ToolCalls,
    /// Anything else, as the provider named it.
    Other(String),
}

impl FinishReason {
    /// Maps a provider's stop/finish reason string.
    pub fn from_wire(reason: Option<&str>) -> Self {
        match reason {
            None | Some("stop") | Some("end_turn") | Some("stop_sequence") => FinishReason::Stop,
            Some("length") | Some("max_tokens") => FinishReason::Length,
            Some("content_filter") | Some("refusal") => FinishReason::ContentFilter,
            Some("tool_calls") | Some("tool_use") | Some("function_call") => {
                FinishReason::ToolCalls
            }
            Some(other) => FinishReason::Other(other.to_string()),
        }
    }

    /// A short name for display.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Other(s) => s,
        }
    }
}

/// Token counts as a provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReportedUsage {
    /// Prompt tokens, including cached ones.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// Speculative decoding's work on one reply (the embedded model with a
/// draft model): tokens the draft proposed, and those the model kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftTokens {
    /// Tokens the draft model proposed.
    pub proposed: u32,
    /// Of those, the tokens the model kept.
    pub accepted: u32,
}

/// One provider answer before accounting: what came over the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    /// The generated text.
    pub text: String,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// The model that answered, as the provider named it.
    pub model: String,
    /// Token counts, when the provider sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ReportedUsage>,
    /// Speculative decoding's proposals, when a draft model took part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<DraftTokens>,
}

/// Accounting of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// The model that answered.
    pub model: String,
    /// The role the call was made for.
    pub role: ModelRole,
    /// Depth of the calling agent (0 = root).
    pub depth: u32,
    /// Prompt tokens, including cached ones.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from cache, when the provider says.
    pub cached_tokens: Option<u64>,
    /// True when the token counts come from the local tokenizer because the
    /// provider sent none.
    pub estimated: bool,
    /// Wall time from the first attempt to the answer, including retries and
    /// waiting for a concurrency slot.
    #[serde(with = "duration_ms", rename = "latency_ms")]
    pub latency: Duration,
    /// Attempts beyond the first.
    pub retries: u32,
    /// Cost in US dollars; `None` when the model has no known price.
    pub cost_usd: Option<f64>,
    /// Speculative decoding's proposals, when a draft model took part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<DraftTokens>,
}

/// The answer to a [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The generated text (the JSON document, when a schema constrained it).
    pub text: String,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// What the call cost.
    pub usage: Usage,
    /// Whether the request's schema shaped the reply.
    #[serde(default)]
    pub schema_use: SchemaUse,
}

/// Serializes a [`Duration`] as whole milliseconds (`latency_ms`-style fields).
pub(crate) mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
