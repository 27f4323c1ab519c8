//! API errors: a status and one line saying what was wrong and what to do,
//! sent as `{"error": {"status": N, "message": "..."}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::http::header::{CONNECTION, RETRY_AFTER};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What was wrong and what to do.
    pub message: String,
    /// The run the error is about, sent beside the error as `"run"` (a
    /// question answered but not saved still shows its answer).
    pub run: Option<Box<Value>>,
    /// Sent with `Connection: close`: the request's body was left unread or
    /// broken, so the connection cannot carry another request.
    close: bool,
}

impl ApiError {
    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: nothing by that name.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 409: the thing is in a state that does not allow this.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// 429: a limit of the server is reached; try again later.
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, message)
    }

    /// 410: it existed but cannot be shown any more (a run record cut short
    /// by a crash or a full disk).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, message)
    }

    /// 500: the server failed; the message says what.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 507: something could not be saved (disk full, read-only folder); the
    /// message says what and why.
    pub fn insufficient_storage(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INSUFFICIENT_STORAGE, message)
    }

    /// The same error, sent with `run` beside it.
    pub fn with_run(mut self, run: Value) -> Self {
        self.run = Some(Box::new(run));
        self
    }

    /// The same error, answered with `Connection: close`: what is left of
    /// the request's body cannot be skipped (a body too large, too slow, not
    /// JSON, or with broken chunked framing), so the connection ends after
    /// this answer, and says so, keeping a client from sending its next
    /// request into it.
    pub(crate) fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// Whether the answer ends the connection (see [`ApiError::closing`]).
    pub(crate) fn closes(&self) -> bool {
        self.close
    }

    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: one_line(message.into()),
            run: None,
            close: false,
        }
    }
}

/// Longest message sent, and longest part of one (between `": "`), in
/// characters.
const MAX_MESSAGE_CHARS: usize = 1000;
const MAX_PART_CHARS: usize = 300;

/// A message as one line of bounded length. Messages quote what the client
/// sent (a field's name or value, up to 1 MiB, newlines included): control
/// characters are escaped, and the middle of each over-long part is left out
/// (its start and end still say what was wrong).
pub(crate) fn one_line(message: String) -> String {
    if message.len() <= MAX_PART_CHARS && !message.chars().any(char::is_control) {
        return message;
    }
    let mut escaped = String::with_capacity(message.len());
    for c in message.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    let parts: Vec<String> = escaped
        .split(": ")
        .map(|p| shorten(p, MAX_PART_CHARS))
        .collect();
    shorten(&parts.join(": "), MAX_MESSAGE_CHARS)
}

/// `text`, or its start and end around a count of what was left out.
fn shorten(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let (head, tail) = (max * 2 / 3, max / 4);
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start} [… {} characters …] {end}", n - head - tail)
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"status": self.status.as_u16(), "message": self.message}});
        if let Some(run) = self.run {
            body["run"] = *run;
        }
        let body = Json(body);
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
        }
        if self.close {
            response
                .headers_mut()
                .insert(CONNECTION, axum::http::HeaderValue::from_static("close"));
        }
        response
    }
}

/// Why a server cannot start: a limit or option that cannot work, or a
/// store whose state or corpus cannot be opened. The message says which.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A limit or option that cannot work (an empty token, zero runs at once).
    #[error("{0}")]
    Invalid(String),
    /// The sessions and runs of the store cannot be opened.
    #[error(transparent)]
    State(#[from] StateError),
    /// The store's corpus cannot be loaded.
    #[error("{0}")]
    Corpus(String),
}

impl From<&str> for StartError {
    fn from(message: &str) -> Self {
        StartError::Invalid(message.to_string())
    }
}

impl From<String> for StartError {
    fn from(message: String) -> Self {
        StartError::Invalid(message)
    }
}

/// What a run back-end could not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The back-end could not keep or read what was asked; the message says
    /// what and why (the file or database's own words).
    #[error("{0}")]
    Backend(String),
    /// The run is no longer this node's: its lease expired and another node
    /// marked it failed.
    #[error(
        "the run record (another node marked this run failed: this node's lease on it expired)"
    )]
    LeaseLost,
}

impl From<String> for StateError {
    fn from(message: String) -> Self {
        StateError::Backend(message)
    }
}

impl From<&str> for StateError {
    fn from(message: &str) -> Self {
        StateError::Backend(message.to_string())
    }
}
