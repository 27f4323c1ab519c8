//! A request as the scripted server received it: what [`super::Matcher`]s and
//! responders in a [`super::Script`] inspect, and what
//! [`super::ScriptedServer::requests`] returns. Shared by `script.rs` and
//! `server.rs`, so neither depends on the other for it.

use std::time::Instant;

use serde_json::Value;

use crate::types::{Message, Role};

/// Which wire format a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// `POST .../chat/completions`.
    OpenAi,
    /// `POST /openai/deployments/{deployment}/chat/completions`.
    Azure,
    /// `POST .../messages`.
    Anthropic,
    /// `GET .../models`.
    Models,
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// Arrival order, from 0.
    pub index: usize,
    /// The wire format.
    pub api: WireApi,
    /// Path and query.
    pub path: String,
    /// Requested model (Azure: the deployment in the path).
    pub model: String,
    /// The transcript; Anthropic's `system` field becomes a leading system message.
    pub messages: Vec<Message>,
    /// The parsed JSON body (`Null` for GET).
    pub body: Value,
    /// The body's `response_format` (OpenAI, Azure), if any.
    pub response_format: Option<Value>,
    /// The body's `tools` (Anthropic's schema tool, say), if any.
    pub tools: Option<Value>,
    /// The body's `tool_choice`, if any.
    pub tool_choice: Option<Value>,
    /// Headers, lowercase names.
    pub headers: Vec<(String, String)>,
    /// When the request was fully read.
    pub received_at: Instant,
    /// When the answer was sent; `None` for hangs and drops.
    pub answered_at: Option<Instant>,
    /// `text` or the fault acted out (`rate_limited`, `drop_connection`, ...),
    /// `unauthorized`, `unknown_model`, `schema_rejected`,
    /// `script_exhausted`, `models`.
    pub outcome: String,
}

impl ReceivedRequest {
    /// The last message's text (empty when there is none).
    pub fn last_message(&self) -> &str {
        self.messages.last().map_or("", |m| m.content.as_str())
    }

    /// All system text, joined with blank lines.
    pub fn system(&self) -> String {
        self.messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The first user message (after the system messages, however many).
    pub fn first_user(&self) -> &str {
        self.messages
            .iter()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str())
    }

    /// True when the request asks for a structured reply: it carries
    /// `response_format` or `tools`.
    pub fn carries_schema(&self) -> bool {
        self.response_format.is_some() || self.tools.is_some()
    }

    /// The name of the tool `tool_choice` forces (`{"type": "tool",
    /// "name": ...}`), if it forces one.
    pub fn forced_tool(&self) -> Option<&str> {
        let choice = self.tool_choice.as_ref()?;
        (choice.get("type").and_then(Value::as_str) == Some("tool"))
            .then(|| choice.get("name").and_then(Value::as_str))
            .flatten()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}
