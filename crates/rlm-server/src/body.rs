//! Request bodies: JSON read from a request, or the error that says what was
//! wrong with it.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;

use crate::error::ApiError;

/// A JSON request body, or the error that says what was wrong with it (and
/// closes the connection when the rest of the body cannot be skipped).
pub(crate) fn json_body<T>(
    body: Result<Json<T>, JsonRejection>,
    expected: &str,
) -> Result<T, ApiError> {
    match body {
        Ok(Json(b)) => Ok(b),
        Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the question as JSON with Content-Type: application/json",
        )
        .closing()),
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is larger than the server accepts (1 MiB by default)",
        )
        .closing()),
        Err(e) if e.body_text().contains(crate::conn::BODY_TIMED_OUT) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "{}; send the whole body at once",
                crate::conn::BODY_TIMED_OUT
            ),
        )
        .closing()),
        // The body could not be read: broken chunked framing, a client gone.
        Err(JsonRejection::BytesRejection(e)) => Err(ApiError::bad_request(format!(
            "the request body could not be read: {}",
            e.body_text()
        ))
        .closing()),
        Err(e) => {
            let text = e.body_text();
            // axum's prefixes say nothing serde's message does not.
            let detail = [
                "Failed to deserialize the JSON body into the target type: ",
                "Failed to parse the request body as JSON: ",
            ]
            .iter()
            .find_map(|p| text.strip_prefix(p))
            .unwrap_or(&text);
            Err(ApiError::bad_request(format!(
                "invalid request body: {detail}; send {expected}"
            )))
        }
    }
}
