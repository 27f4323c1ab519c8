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

/// A request's query string read into `T`, or a 400 (JSON, like every
/// error) that says which parameter was wrong.
pub(crate) fn query<T>(
    q: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, ApiError> {
    q.map(|axum::extract::Query(v)| v).map_err(|e| {
        ApiError::bad_request(format!(
            "the query string is not valid: {}",
            e.body_text()
                .trim_start_matches("Failed to deserialize query string: ")
        ))
    })
}

/// A `limit` parameter: `default` when absent, refused when 0 or past `max`.
pub(crate) fn limit(value: Option<usize>, default: usize, max: usize) -> Result<usize, ApiError> {
    match value {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::bad_request(format!(
            "limit={n} is out of range; give 1 to {max}"
        ))),
    }
}
