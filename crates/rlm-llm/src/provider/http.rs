//! The HTTP exchange shared by all providers: send, read the whole body, map
//! statuses and transport failures to [`LlmError`].

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::parse_retry_after;
use crate::error::LlmError;

/// Longest excerpt of a body quoted in an error.
const SNIPPET_CHARS: usize = 300;

/// A connection pool for one client. The per-attempt timeout is enforced by
/// the client; connecting gets its own, shorter bound so an unroutable
/// address fails fast.
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(15)))
        .pool_max_idle_per_host(64)
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build HTTP client: {}", chain(&e))))
}

/// What went wrong where, for error messages.
pub(crate) struct Target<'a> {
    /// Provider name.
    pub provider: &'a str,
    /// The requested model, for unknown-model errors.
    pub model: Option<&'a str>,
}

/// Sends `request` and returns the parsed JSON body of a 2xx answer.
pub(crate) async fn exchange(
    request: reqwest::RequestBuilder,
    url: &str,
    target: Target<'_>,
) -> Result<Value, LlmError> {
    let response = request.send().await.map_err(|e| send_error(&e, url))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| LlmError::TruncatedResponse {
            provider: target.provider.to_string(),
            detail: chain(&e),
        })?;
    if !(200..300).contains(&status) {
        return Err(status_error(status, &headers, &body, url, &target));
    }
    serde_json::from_slice(&body).map_err(|e| LlmError::MalformedResponse {
        provider: target.provider.to_string(),
        detail: format!(
            "{e}; body starts: {}",
            snippet(&String::from_utf8_lossy(&body))
        ),
    })
}

/// Sends `request` and returns the response of a 2xx answer unread (for
/// streaming); any other status is read and mapped like [`exchange`] does.
pub(crate) async fn open(
    request: reqwest::RequestBuilder,
    url: &str,
    target: Target<'_>,
) -> Result<reqwest::Response, LlmError> {
    let response = request.send().await.map_err(|e| send_error(&e, url))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap_or_default();
    Err(status_error(status, &headers, &body, url, &target))
}

/// How a streamed answer arrived.
pub(crate) enum Streamed {
    /// The server ignored the request to stream and sent one JSON body.
    Whole(Value),
    /// Server-sent events were read; true when the handler saw the end.
    Events { ended: bool },
}

/// Reads a 2xx answer to a streaming request: the `data:` payload of every
/// server-sent event goes to `on_data` (which returns true at the stream's
/// end marker); a plain JSON body is returned whole.
pub(crate) async fn read_stream(
    mut response: reqwest::Response,
    provider: &str,
    mut on_data: impl FnMut(&str) -> Result<bool, LlmError>,
) -> Result<Streamed, LlmError> {
    let truncated = |e: reqwest::Error| LlmError::TruncatedResponse {
        provider: provider.to_string(),
        detail: chain(&e),
    };
    let is_sse = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        let bytes = response.bytes().await.map_err(truncated)?;
        return serde_json::from_slice(&bytes)
            .map(Streamed::Whole)
            .map_err(|e| LlmError::MalformedResponse {
                provider: provider.to_string(),
                detail: format!(
                    "{e}; body starts: {}",
                    snippet(&String::from_utf8_lossy(&bytes))
                ),
            });
    }
    let mut pending: Vec<u8> = Vec::new();
    let mut line_done = |line: &[u8]| -> Result<bool, LlmError> {
        let line = String::from_utf8_lossy(line);
        match line.trim_end_matches(['\r', '\n']).strip_prefix("data:") {
            Some(data) if !data.trim().is_empty() => on_data(data.trim()),
            // Comments, `event:`, `id:` and blank separators carry nothing we need.
            _ => Ok(false),
        }
    };
    loop {
        let Some(chunk) = response.chunk().await.map_err(truncated)? else {
            break;
        };
        pending.extend_from_slice(&chunk);
        // Lines end at a newline; one may arrive in pieces.
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if line_done(&line)? {
                return Ok(Streamed::Events { ended: true });
            }
        }
    }
    let ended = line_done(&pending)?;
    Ok(Streamed::Events { ended })
}

/// A streamed answer that stopped before its end.
pub(crate) fn cut_short(provider: &str) -> LlmError {
    LlmError::TruncatedResponse {
        provider: provider.to_string(),
        detail: "the event stream ended before the reply was complete".into(),
    }
}

/// A JSON payload of an event stream.
pub(crate) fn event_json(provider: &str, data: &str) -> Result<Value, LlmError> {
    serde_json::from_str(data).map_err(|e| LlmError::MalformedResponse {
        provider: provider.to_string(),
        detail: format!("stream event is not JSON ({e}): {}", snippet(data)),
    })
}

/// The error text and its causes on one line.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut msg = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = cause.source();
    }
    msg
}

/// Maps a transport failure before any response arrived.
pub(crate) fn send_error(err: &reqwest::Error, url: &str) -> LlmError {
    let detail = chain(err);
    if err.is_connect() {
        LlmError::Unreachable {
            url: url.to_string(),
            detail,
        }
    } else {
        LlmError::ConnectionDropped {
            url: url.to_string(),
            detail,
        }
    }
}

/// Maps a non-2xx answer.
pub(crate) fn status_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    url: &str,
    target: &Target<'_>,
) -> LlmError {
    let (message, code) = error_message(body);
    let provider = target.provider.to_string();
    let mentions_model = {
        let m = message.to_ascii_lowercase();
        code.as_deref()
            .is_some_and(|c| c.contains("model_not_found") || c.contains("DeploymentNotFound"))
            || (m.contains("model") || m.contains("deployment"))
                && (m.contains("not found")
                    || m.contains("does not exist")
                    || m.contains("unknown")
                    || m.contains("not_found")
                    || m.starts_with("model:"))
    };
    match status {
        401 | 403 => LlmError::Unauthorized {
            provider,
            status,
            message,
        },
        404 | 400 | 422 if mentions_model && target.model.is_some() => LlmError::UnknownModel {
            provider,
            model: target.model.unwrap_or_default().to_string(),
            message,
        },
        404 => LlmError::NotFound {
            url: url.to_string(),
            message,
        },
        429 => LlmError::RateLimited {
            provider,
            retry_after: parse_retry_after(headers),
            message,
        },
        // Not implemented: asking again will not change that.
        501 => LlmError::BadRequest {
            provider,
            status,
            message,
        },
        408 | 409 | 500..=599 => LlmError::Server {
            provider,
            status,
            retry_after: parse_retry_after(headers),
            message,
        },
        _ => LlmError::BadRequest {
            provider,
            status,
            message,
        },
    }
}

/// The provider's explanation in an error body (`error.message`, `message`,
/// `detail`, or the raw text) and its error code, if any.
fn error_message(body: &[u8]) -> (String, Option<String>) {
    let text = String::from_utf8_lossy(body);
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        let t = text.trim();
        return (
            if t.is_empty() {
                "(empty body)".into()
            } else {
                snippet(t)
            },
            None,
        );
    };
    let err = json.get("error").unwrap_or(&json);
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| err.as_str())
        .or_else(|| json.get("message").and_then(Value::as_str))
        .or_else(|| json.get("detail").and_then(Value::as_str))
        .map(snippet)
        .unwrap_or_else(|| snippet(text.trim()));
    let code = err
        .get("code")
        .or_else(|| err.get("type"))
        .and_then(Value::as_str)
        .map(str::to_string);
    (message, code)
}

/// A body that parsed as JSON but not as the provider's format.
pub(crate) fn malformed(provider: &str, detail: &str, body: &Value) -> LlmError {
    LlmError::MalformedResponse {
        provider: provider.to_string(),
        detail: format!("{detail}; body starts: {}", snippet(&body.to_string())),
    }
}

/// At most [`SNIPPET_CHARS`] characters of `text`, on one line.
pub(crate) fn snippet(text: &str) -> String {
    crate::schema::excerpt(text, SNIPPET_CHARS)
}
