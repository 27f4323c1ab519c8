//! Scripts: what the [`super::ScriptedServer`] answers, built in Rust or
//! loaded from JSON.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use super::request::ReceivedRequest;

/// A script could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid test script: {0}")]
pub struct ScriptError(pub String);

/// Token counts the server reports with a text reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyUsage {
    /// Word counts of the prompt and the reply (deterministic, plausible).
    #[default]
    Counted,
    /// No `usage` field at all (the client must estimate).
    Omitted,
    /// Exactly these numbers.
    Exact {
        /// Prompt tokens, including cached.
        input: u64,
        /// Generated tokens.
        output: u64,
        /// Cached prompt tokens.
        cached: Option<u64>,
    },
}

/// A failure the server acts out instead of answering.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 429 with `Retry-After` (whole seconds) or `retry-after-ms` (fractions).
    RateLimited {
        /// The wait to ask for; no header when `None`.
        retry_after_secs: Option<f64>,
    },
    /// 500 Internal Server Error.
    ServerError,
    /// 503 Service Unavailable.
    ServiceUnavailable,
    /// 401 with an invalid-key message.
    Unauthorized,
    /// 404 with a `model_not_found` error.
    UnknownModel,
    /// Any status with a provider-style error message.
    Status {
        /// HTTP status.
        status: u16,
        /// The error message.
        message: String,
    },
    /// Close the connection without answering.
    DropConnection,
    /// Never answer (until the client gives up or the server stops).
    Hang,
    /// 200 with a body that is not JSON.
    MalformedJson,
    /// 200 with `choices: []` (Anthropic: `content: []`).
    EmptyChoices,
    /// 200 with the start of a valid body, then the connection drops.
    TruncatedBody,
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Text to answer with, or a fault to act out.
    pub outcome: Result<String, Fault>,
    /// Wait before answering; `None` uses the script's default latency.
    pub latency: Option<Duration>,
    /// Reported token counts.
    pub usage: ReplyUsage,
    /// OpenAI-style finish reason (`stop`, `length`, ...).
    pub finish_reason: String,
    /// The model name reported in the response; the requested one when `None`.
    pub model: Option<String>,
}

impl Reply {
    /// Answers with `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Reply {
            outcome: Ok(text.into()),
            latency: None,
            usage: ReplyUsage::Counted,
            finish_reason: "stop".into(),
            model: None,
        }
    }

    /// Acts out `fault`.
    pub fn fault(fault: Fault) -> Self {
        Reply {
            outcome: Err(fault),
            ..Reply::text("")
        }
    }

    /// Waits `latency` before answering.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// Waits `ms` milliseconds before answering.
    pub fn with_latency_ms(self, ms: u64) -> Self {
        self.with_latency(Duration::from_millis(ms))
    }

    /// Reports exactly these token counts.
    pub fn with_usage(mut self, input: u64, output: u64) -> Self {
        self.usage = ReplyUsage::Exact {
            input,
            output,
            cached: None,
        };
        self
    }

    /// Reports exactly these token counts, some of the input cached.
    pub fn with_cached_usage(mut self, input: u64, output: u64, cached: u64) -> Self {
        self.usage = ReplyUsage::Exact {
            input,
            output,
            cached: Some(cached),
        };
        self
    }

    /// Sends no usage.
    pub fn without_usage(mut self) -> Self {
        self.usage = ReplyUsage::Omitted;
        self
    }

    /// Reports `model` as the answering model (as local servers report a
    /// file path, or Azure the model behind a deployment).
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the finish reason (OpenAI names; mapped for Anthropic).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = reason.into();
        self
    }
}

impl From<&str> for Reply {
    fn from(text: &str) -> Self {
        Reply::text(text)
    }
}

impl From<String> for Reply {
    fn from(text: String) -> Self {
        Reply::text(text)
    }
}

impl From<Fault> for Reply {
    fn from(fault: Fault) -> Self {
        Reply::fault(fault)
    }
}

/// A condition on a received request.
#[derive(Clone)]
pub enum Matcher {
    /// The last message contains this text.
    LastContains(String),
    /// The last message matches this regex.
    LastMatches(Regex),
    /// Some message contains this text.
    AnyContains(String),
    /// A system message (OpenAI) or the system field (Anthropic) contains this.
    SystemContains(String),
    /// The requested model (Azure: deployment) is exactly this.
    Model(String),
    /// All of these hold.
    All(Vec<Matcher>),
    /// Any custom predicate.
    Predicate(Arc<dyn Fn(&ReceivedRequest) -> bool + Send + Sync>),
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::LastContains(s) => write!(f, "LastContains({s:?})"),
            Matcher::LastMatches(r) => write!(f, "LastMatches({:?})", r.as_str()),
            Matcher::AnyContains(s) => write!(f, "AnyContains({s:?})"),
            Matcher::SystemContains(s) => write!(f, "SystemContains({s:?})"),
            Matcher::Model(s) => write!(f, "Model({s:?})"),
            Matcher::All(m) => write!(f, "All({m:?})"),
            Matcher::Predicate(_) => write!(f, "Predicate(..)"),
        }
    }
}

impl Matcher {
    /// The last message contains `needle`.
    pub fn last_contains(needle: impl Into<String>) -> Self {
        Matcher::LastContains(needle.into())
    }

    /// The last message matches `pattern`. Panics on an invalid regex, like
    /// an assertion would: this is test code.
    pub fn last_matches(pattern: &str) -> Self {
        match Regex::new(pattern) {
            Ok(re) => Matcher::LastMatches(re),
            Err(e) => panic!("invalid regex {pattern:?} in test script: {e}"),
        }
    }

    /// Some message contains `needle`.
    pub fn any_contains(needle: impl Into<String>) -> Self {
        Matcher::AnyContains(needle.into())
    }

    /// The system prompt contains `needle`.
    pub fn system_contains(needle: impl Into<String>) -> Self {
        Matcher::SystemContains(needle.into())
    }

    /// The requested model is `model`.
    pub fn model(model: impl Into<String>) -> Self {
        Matcher::Model(model.into())
    }

    /// A custom predicate.
    pub fn predicate(f: impl Fn(&ReceivedRequest) -> bool + Send + Sync + 'static) -> Self {
        Matcher::Predicate(Arc::new(f))
    }

    /// Both this and `other` hold.
    pub fn and(self, other: Matcher) -> Self {
        match self {
            Matcher::All(mut all) => {
                all.push(other);
                Matcher::All(all)
            }
            first => Matcher::All(vec![first, other]),
        }
    }

    /// True when `request` satisfies the condition.
    pub fn matches(&self, request: &ReceivedRequest) -> bool {
        match self {
            Matcher::LastContains(s) => request.last_message().contains(s.as_str()),
            Matcher::LastMatches(re) => re.is_match(request.last_message()),
            Matcher::AnyContains(s) => request
                .messages
                .iter()
                .any(|m| m.content.contains(s.as_str())),
            Matcher::SystemContains(s) => request.system().contains(s.as_str()),
            Matcher::Model(m) => request.model == *m,
            Matcher::All(all) => all.iter().all(|m| m.matches(request)),
            Matcher::Predicate(f) => f(request),
        }
    }
}

type Responder = Arc<dyn Fn(&ReceivedRequest) -> Option<Reply> + Send + Sync>;

/// A conditional answer.
#[derive(Clone)]
pub enum Rule {
    /// When `matcher` holds, answer with the next of `replies`; the last one
    /// repeats forever if `repeat_last`, else the rule stops matching.
    When {
        /// The condition.
        matcher: Matcher,
        /// Replies in order.
        replies: VecDeque<Reply>,
        /// Keep answering with the last reply.
        repeat_last: bool,
    },
    /// A function of the request; `None` passes to the next rule.
    Respond(Responder),
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::When {
                matcher,
                replies,
                repeat_last,
            } => f
                .debug_struct("When")
                .field("matcher", matcher)
                .field("replies", &replies.len())
                .field("repeat_last", repeat_last)
                .finish(),
            Rule::Respond(_) => f.write_str("Respond(..)"),
        }
    }
}

/// What the server answers. Build with the methods below or load JSON with
/// [`Script::from_json`].
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub(crate) rules: Vec<Rule>,
    pub(crate) ordered: VecDeque<Reply>,
    pub(crate) otherwise: Option<Reply>,
    pub(crate) models: Option<Vec<String>>,
    pub(crate) api_key: Option<String>,
    pub(crate) latency: Duration,
    pub(crate) reject_schemas: bool,
}

impl Script {
    /// An empty script: every request gets "script exhausted".
    pub fn new() -> Self {
        Script::default()
    }

    /// Appends an ordered reply (text, [`Reply`] or [`Fault`]).
    pub fn reply(mut self, reply: impl Into<Reply>) -> Self {
        self.ordered.push_back(reply.into());
        self
    }

    /// Appends several ordered replies.
    pub fn replies<R: Into<Reply>>(mut self, replies: impl IntoIterator<Item = R>) -> Self {
        self.ordered.extend(replies.into_iter().map(Into::into));
        self
    }

    /// Answers every request matching `matcher` with `reply`.
    pub fn on(mut self, matcher: Matcher, reply: impl Into<Reply>) -> Self {
        self.rules.push(Rule::When {
            matcher,
            replies: VecDeque::from([reply.into()]),
            repeat_last: true,
        });
        self
    }

    /// Answers requests matching `matcher` with `replies` in order, then stops
    /// matching.
    pub fn on_sequence<R: Into<Reply>>(
        mut self,
        matcher: Matcher,
        replies: impl IntoIterator<Item = R>,
    ) -> Self {
        self.rules.push(Rule::When {
            matcher,
            replies: replies.into_iter().map(Into::into).collect(),
            repeat_last: false,
        });
        self
    }

    /// Shorthand for `on(Matcher::last_contains(needle), reply)`.
    pub fn on_last_contains(self, needle: &str, reply: impl Into<Reply>) -> Self {
        self.on(Matcher::last_contains(needle), reply)
    }

    /// Answers with a function of the request; returning `None` passes the
    /// request on to later rules and the ordered replies.
    pub fn respond_with(
        mut self,
        f: impl Fn(&ReceivedRequest) -> Option<Reply> + Send + Sync + 'static,
    ) -> Self {
        self.rules.push(Rule::Respond(Arc::new(f)));
        self
    }

    /// The reply when no rule matches and the ordered replies are used up.
    pub fn otherwise(mut self, reply: impl Into<Reply>) -> Self {
        self.otherwise = Some(reply.into());
        self
    }

    /// The models `/v1/models` lists. Once set, chat requests for other models
    /// get 404 `model_not_found`. Unset: lists `root-model` and `sub-model`
    /// and accepts any model.
    pub fn models<S: Into<String>>(mut self, models: impl IntoIterator<Item = S>) -> Self {
        self.models = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// Requires this API key (Bearer, `api-key` or `x-api-key`); others get 401.
    pub fn require_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Answers every request that asks for a structured reply (carries
    /// `response_format` or `tools`) with HTTP 400 and an error in the
    /// protocol's style, as servers without structured outputs do; uses
    /// no scripted reply. Other requests are answered as scripted.
    pub fn reject_schemas(mut self) -> Self {
        self.reject_schemas = true;
        self
    }

    /// Latency for replies that set none.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Loads a script from JSON:
    ///
    /// ```json
    /// {
    ///   "models": ["root-model", "sub-model"],
    ///   "api_key": "test-key",
    ///   "latency_ms": 0,
    ///   "reject_schemas": false,
    ///   "replies": [
    ///     "plain text",
    ///     {"text": "with options", "latency_ms": 20, "usage": {"input": 10, "output": 2}},
    ///     {"fault": "rate_limited", "retry_after_secs": 1},
    ///     {"fault": "status", "status": 418, "message": "teapot"}
    ///   ],
    ///   "rules": [
    ///     {"last_contains": "Summarize", "reply": "summary"},
    ///     {"last_matches": "chunk \\d+", "model": "sub-model", "replies": ["a", "b"]}
    ///   ],
    ///   "otherwise": {"text": "default", "no_usage": true}
    /// }
    /// ```
    ///
    /// Faults: `rate_limited`, `server_error`, `service_unavailable`,
    /// `unauthorized`, `unknown_model`, `status`, `drop_connection`, `hang`,
    /// `malformed_json`, `empty_choices`, `truncated_body`.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let spec: ScriptSpec =
            serde_json::from_str(text).map_err(|e| ScriptError(e.to_string()))?;
        spec.into_script()
    }

    /// Loads a JSON script file.
    pub fn from_json_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScriptError(format!("cannot read {}: {e}", path.display())))?;
        Self::from_json(&text)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptSpec {
    #[serde(default)]
    models: Option<Vec<String>>,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    latency_ms: u64,
    #[serde(default)]
    reject_schemas: bool,
    #[serde(default)]
    replies: Vec<ReplySpec>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
    #[serde(default)]
    otherwise: Option<ReplySpec>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ReplySpec {
    Text(String),
    Full(FullReplySpec),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FullReplySpec {
    text: Option<String>,
    fault: Option<FaultName>,
    retry_after_secs: Option<f64>,
    status: Option<u16>,
    message: Option<String>,
    latency_ms: Option<u64>,
    usage: Option<UsageSpec>,
    #[serde(default)]
    no_usage: bool,
    finish_reason: Option<String>,
    model: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageSpec {
    input: u64,
    output: u64,
    cached: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum FaultName {
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
    UnknownModel,
    Status,
    DropConnection,
    Hang,
    MalformedJson,
    EmptyChoices,
    TruncatedBody,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    last_contains: Option<String>,
    last_matches: Option<String>,
    any_contains: Option<String>,
    system_contains: Option<String>,
    model: Option<String>,
    reply: Option<ReplySpec>,
    replies: Option<Vec<ReplySpec>>,
}

impl ReplySpec {
    fn into_reply(self) -> Result<Reply, ScriptError> {
        let spec = match self {
            ReplySpec::Text(t) => return Ok(Reply::text(t)),
            ReplySpec::Full(f) => f,
        };
        let mut reply = match (spec.text, spec.fault) {
            (Some(t), None) => Reply::text(t),
            (None, Some(fault)) => Reply::fault(match fault {
                FaultName::RateLimited => Fault::RateLimited {
                    retry_after_secs: spec.retry_after_secs,
                },
                FaultName::ServerError => Fault::ServerError,
                FaultName::ServiceUnavailable => Fault::ServiceUnavailable,
                FaultName::Unauthorized => Fault::Unauthorized,
                FaultName::UnknownModel => Fault::UnknownModel,
                FaultName::Status => Fault::Status {
                    status: spec
                        .status
                        .ok_or_else(|| ScriptError("fault 'status' needs a 'status'".into()))?,
                    message: spec.message.unwrap_or_else(|| "scripted error".into()),
                },
                FaultName::DropConnection => Fault::DropConnection,
                FaultName::Hang => Fault::Hang,
                FaultName::MalformedJson => Fault::MalformedJson,
                FaultName::EmptyChoices => Fault::EmptyChoices,
                FaultName::TruncatedBody => Fault::TruncatedBody,
            }),
            _ => {
                return Err(ScriptError(
                    "a reply needs exactly one of 'text' or 'fault'".into(),
                ));
            }
        };
        if let Some(ms) = spec.latency_ms {
            reply = reply.with_latency_ms(ms);
        }
        if let Some(u) = spec.usage {
            reply.usage = ReplyUsage::Exact {
                input: u.input,
                output: u.output,
                cached: u.cached,
            };
        }
        if spec.no_usage {
            reply = reply.without_usage();
        }
        if let Some(r) = spec.finish_reason {
            reply = reply.with_finish_reason(r);
        }
        if let Some(m) = spec.model {
            reply = reply.with_model(m);
        }
        Ok(reply)
    }
}

impl ScriptSpec {
    fn into_script(self) -> Result<Script, ScriptError> {
        let mut script = Script::new().latency(Duration::from_millis(self.latency_ms));
        script.models = self.models;
        script.api_key = self.api_key;
        script.reject_schemas = self.reject_schemas;
        for r in self.replies {
            script.ordered.push_back(r.into_reply()?);
        }
        for (i, rule) in self.rules.into_iter().enumerate() {
            let mut conditions = Vec::new();
            if let Some(s) = rule.last_contains {
                conditions.push(Matcher::LastContains(s));
            }
            if let Some(p) = rule.last_matches {
                let re = Regex::new(&p)
                    .map_err(|e| ScriptError(format!("rules[{i}].last_matches: {e}")))?;
                conditions.push(Matcher::LastMatches(re));
            }
            if let Some(s) = rule.any_contains {
                conditions.push(Matcher::AnyContains(s));
            }
            if let Some(s) = rule.system_contains {
                conditions.push(Matcher::SystemContains(s));
            }
            if let Some(s) = rule.model {
                conditions.push(Matcher::Model(s));
            }
            if conditions.is_empty() {
                return Err(ScriptError(format!("rules[{i}] has no condition")));
            }
            let matcher = if conditions.len() == 1 {
                conditions.remove(0)
            } else {
                Matcher::All(conditions)
            };
            script = match (rule.reply, rule.replies) {
                (Some(r), None) => script.on(matcher, r.into_reply()?),
                (None, Some(rs)) => {
                    let replies = rs
                        .into_iter()
                        .map(ReplySpec::into_reply)
                        .collect::<Result<Vec<_>, _>>()?;
                    script.on_sequence(matcher, replies)
                }
                _ => {
                    return Err(ScriptError(format!(
                        "rules[{i}] needs exactly one of 'reply' or 'replies'"
                    )));
                }
            };
        }
        if let Some(r) = self.otherwise {
            script.otherwise = Some(r.into_reply()?);
        }
        Ok(script)
    }
}
