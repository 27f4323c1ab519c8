//! API errors: a status and one line saying what was wrong and what to do,
//! sent as `{"error": {"status": N, "message": "..."}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::http::header::RETRY_AFTER;
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

    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            run: None,
        }
    }
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
        response
    }
}
