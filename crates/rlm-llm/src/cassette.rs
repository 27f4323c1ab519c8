//! Record/replay of exchanges as JSONL "cassettes".
//!
//! Each line holds one resolved [`ModelRequest`], the [`ModelReply`] it got,
//! and the request's hash. Requests carry no credentials and headers are never
//! stored, so a cassette is safe to commit. [`RecordingProvider`] wraps any
//! provider; [`ReplayProvider`] answers from a cassette without the network.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bounded::{self, CappedLines};
use crate::error::LlmError;
use crate::provider::{BoxFuture, Provider};
use crate::types::{ModelReply, ModelRequest};

/// One cassette line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CassetteEntry {
    /// [`request_hash`] of `request`.
    pub key: String,
    /// The provider that answered when recording.
    pub provider: String,
    /// The request as sent.
    pub request: ModelRequest,
    /// The reply as received (empty when `refused`).
    pub reply: ModelReply,
    /// The endpoint refused the request's schema instead of replying: the
    /// client then sent it again without, the next line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<RecordedRefusal>,
}

/// A schema refusal as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRefusal {
    /// The HTTP status; `None` when the provider could not express the
    /// schema ([`LlmError::SchemaUnsupported`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What the provider said.
    pub message: String,
}

impl RecordedRefusal {
    /// The refusal `err` is, if it is one of a request with a schema.
    fn of(request: &ModelRequest, err: &LlmError) -> Option<Self> {
        if request.schema.is_none() || !err.is_schema_refusal() {
            return None;
        }
        Some(match err.root() {
            LlmError::BadRequest {
                status, message, ..
            } => RecordedRefusal {
                status: Some(*status),
                message: message.clone(),
            },
            LlmError::NotFound { message, .. } | LlmError::UnknownModel { message, .. } => {
                RecordedRefusal {
                    status: Some(404),
                    message: message.clone(),
                }
            }
            LlmError::SchemaUnsupported { reason, .. } => RecordedRefusal {
                status: None,
                message: reason.clone(),
            },
            other => RecordedRefusal {
                status: Some(400),
                message: other.to_string(),
            },
        })
    }

    /// The error the refusal was, as replay gives it back.
    fn replayed(&self) -> LlmError {
        match self.status {
            Some(status) => LlmError::BadRequest {
                provider: "replay".into(),
                status,
                message: self.message.clone(),
            },
            None => LlmError::SchemaUnsupported {
                provider: "replay".into(),
                reason: self.message.clone(),
            },
        }
    }
}

/// A stable hash of a resolved request (SHA-256 of its JSON form, hex).
pub fn request_hash(request: &ModelRequest) -> String {
    let json = serde_json::to_vec(request).expect("a ModelRequest always serializes");
    let digest = Sha256::digest(&json);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Wraps a provider and appends every successful exchange to a cassette.
pub struct RecordingProvider {
    inner: Arc<dyn Provider>,
    path: PathBuf,
    file: Mutex<File>,
}

impl RecordingProvider {
    /// Creates (or truncates) the cassette at `path` and records `inner`.
    pub fn create(path: &Path, inner: Arc<dyn Provider>) -> Result<Self, LlmError> {
        let file = File::create(path).map_err(|e| LlmError::Cassette {
            path: path.display().to_string(),
            detail: format!("cannot create: {e}"),
        })?;
        Ok(RecordingProvider {
            inner,
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    fn append(
        &self,
        request: &ModelRequest,
        reply: &ModelReply,
        refused: Option<RecordedRefusal>,
    ) -> Result<(), LlmError> {
        let entry = CassetteEntry {
            key: request_hash(request),
            provider: self.inner.name().to_string(),
            request: request.clone(),
            reply: reply.clone(),
            refused,
        };
        let mut line = serde_json::to_string(&entry).map_err(|e| LlmError::Cassette {
            path: self.path.display().to_string(),
            detail: e.to_string(),
        })?;
        line.push('\n');
        // One write per line under the lock keeps parallel calls' lines whole.
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| LlmError::Cassette {
                path: self.path.display().to_string(),
                detail: format!("cannot write: {e}"),
            })
    }
}

impl Provider for RecordingProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Never: a reply served from a cache would be missing from the
    /// cassette being recorded.
    fn reproducible(&self, _request: &ModelRequest) -> bool {
        false
    }

    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>> {
        Box::pin(async move {
            let reply = match self.inner.complete(request).await {
                Ok(reply) => reply,
                Err(err) => {
                    // A refused schema is part of the session: replay
                    // refuses it again, and the client falls back the same.
                    if let Some(refusal) = RecordedRefusal::of(request, &err) {
                        let empty = ModelReply {
                            text: String::new(),
                            finish_reason: crate::types::FinishReason::Stop,
                            model: request.model.clone(),
                            usage: None,
                            draft: None,
                        };
                        self.append(request, &empty, Some(refusal))?;
                    }
                    return Err(err);
                }
            };
            self.append(request, &reply, None)?;
            Ok(reply)
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>> {
        self.inner.list_models()
    }
}

/// Answers requests from a cassette. A request recorded several times gets its
/// replies in recorded order, then the last one again.
pub struct ReplayProvider {
    path: String,
    entries: Vec<CassetteEntry>,
    by_key: HashMap<String, Vec<usize>>,
    served: Mutex<HashMap<String, usize>>,
}

impl ReplayProvider {
    /// Loads the cassette at `path`.
    pub fn open(path: &Path) -> Result<Self, LlmError> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|e| LlmError::Cassette {
            path: shown.clone(),
            detail: format!("cannot open: {e}"),
        })?;
        let mut entries = Vec::new();
        // Streamed with a cap per line: an endless file is an error, not a hang.
        let lines = CappedLines::new(BufReader::new(file), bounded::JSONL_LINE_LIMIT);
        for line in lines {
            let (n, line) = line.map_err(|e| LlmError::Cassette {
                path: shown.clone(),
                detail: e.to_string(),
            })?;
            let entry: CassetteEntry =
                serde_json::from_str(&line).map_err(|e| LlmError::Cassette {
                    path: shown.clone(),
                    detail: format!("line {n}: not a cassette entry: {e}"),
                })?;
            entries.push(entry);
        }
        Ok(Self::from_entries(shown, entries))
    }

    /// A replayer over in-memory entries; `name` appears in messages.
    pub fn from_entries(name: impl Into<String>, entries: Vec<CassetteEntry>) -> Self {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            // Re-hash rather than trust the stored key: an edited request must
            // still match what it now says.
            by_key.entry(request_hash(&e.request)).or_default().push(i);
        }
        ReplayProvider {
            path: name.into(),
            entries,
            by_key,
            served: Mutex::new(HashMap::new()),
        }
    }

    /// Number of recorded exchanges.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the cassette holds no exchange.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn miss(&self, request: &ModelRequest) -> LlmError {
        let detail = match self
            .entries
            .iter()
            .max_by_key(|e| similarity(&e.request, request))
        {
            None => "the cassette is empty".to_string(),
            Some(closest) => format!(
                "closest of {} recorded requests differs at {}",
                self.entries.len(),
                first_difference(&closest.request, request)
            ),
        };
        LlmError::ReplayMiss {
            cassette: self.path.clone(),
            detail,
        }
    }
}

impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    /// Never: the cassette is the record of what was answered; a store's
    /// cache in front of it would hide what the cassette holds.
    fn reproducible(&self, _request: &ModelRequest) -> bool {
        false
    }

    fn endpoint(&self) -> &str {
        &self.path
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>> {
        Box::pin(async move {
            let key = request_hash(request);
            let Some(indices) = self.by_key.get(&key) else {
                return Err(self.miss(request));
            };
            let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
            let n = served.entry(key).or_insert(0);
            let index = indices[(*n).min(indices.len() - 1)];
            *n += 1;
            drop(served);
            if let Some(refusal) = &self.entries[index].refused {
                return Err(refusal.replayed());
            }
            let reply = self.entries[index].reply.clone();
            // A recorded stream replays as one delta: the text is the same,
            // its timing was never recorded.
            if let Some(sink) = &request.on_token {
                sink.send(&reply.text);
            }
            Ok(reply)
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>> {
        let mut models: Vec<String> = self
            .entries
            .iter()
            .map(|e| e.request.model.clone())
            .collect();
        models.sort();
        models.dedup();
        Box::pin(async move { Ok(models) })
    }
}

/// Orders recorded requests by likeness to `wanted`: same model, then the
/// longest run of equal leading messages, then the longest equal prefix of
/// the first differing message.
fn similarity(recorded: &ModelRequest, wanted: &ModelRequest) -> (bool, usize, usize, bool) {
    let equal_messages = recorded
        .messages
        .iter()
        .zip(&wanted.messages)
        .take_while(|(a, b)| a == b)
        .count();
    let prefix = match (
        recorded.messages.get(equal_messages),
        wanted.messages.get(equal_messages),
    ) {
        (Some(a), Some(b)) => common_prefix_chars(&a.content, &b.content),
        _ => 0,
    };
    let same_params = recorded.temperature == wanted.temperature
        && recorded.max_output_tokens == wanted.max_output_tokens
        && recorded.stop == wanted.stop
        && recorded.schema == wanted.schema;
    (
        recorded.model == wanted.model,
        equal_messages,
        prefix,
        same_params,
    )
}

fn common_prefix_chars(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// Names the first field where `recorded` and `wanted` differ.
fn first_difference(recorded: &ModelRequest, wanted: &ModelRequest) -> String {
    if recorded.model != wanted.model {
        return format!(
            "model: recorded '{}', requested '{}'",
            recorded.model, wanted.model
        );
    }
    for (i, (a, b)) in recorded.messages.iter().zip(&wanted.messages).enumerate() {
        if a.role != b.role {
            return format!(
                "messages[{i}].role: recorded {}, requested {}",
                a.role.as_str(),
                b.role.as_str()
            );
        }
        if a.content != b.content {
            let at = common_prefix_chars(&a.content, &b.content);
            return format!(
                "messages[{i}].content at character {at}: recorded \"{}\", requested \"{}\"",
                excerpt(&a.content, at),
                excerpt(&b.content, at)
            );
        }
    }
    if recorded.messages.len() != wanted.messages.len() {
        return format!(
            "message count: recorded {}, requested {}",
            recorded.messages.len(),
            wanted.messages.len()
        );
    }
    if recorded.temperature != wanted.temperature {
        return format!(
            "temperature: recorded {:?}, requested {:?}",
            recorded.temperature, wanted.temperature
        );
    }
    if recorded.max_output_tokens != wanted.max_output_tokens {
        return format!(
            "max_output_tokens: recorded {:?}, requested {:?}",
            recorded.max_output_tokens, wanted.max_output_tokens
        );
    }
    if recorded.stop != wanted.stop {
        return format!(
            "stop: recorded {:?}, requested {:?}",
            recorded.stop, wanted.stop
        );
    }
    let schema = |r: &ModelRequest| {
        r.schema.as_ref().map_or_else(
            || "none".to_string(),
            |s| format!("{} {}", s.name, s.schema),
        )
    };
    let (a, b) = (schema(recorded), schema(wanted));
    let at = common_prefix_chars(&a, &b);
    format!(
        "schema at character {at}: recorded \"{}\", requested \"{}\"",
        excerpt(&a, at),
        excerpt(&b, at)
    )
}

/// Up to 40 characters of `text` around character `at`, marked with `…`.
fn excerpt(text: &str, at: usize) -> String {
    let start = at.saturating_sub(15);
    let chars: Vec<char> = text.chars().collect();
    let end = (at + 25).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(chars[start.min(chars.len())..end].iter());
    if end < chars.len() {
        out.push('…');
    }
    out.replace('\n', "\\n")
}
