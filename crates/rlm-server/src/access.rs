//! What is refused before any handler runs, in layers over the whole router
//! (so a route added later is covered too): the `Host` header (against DNS
//! rebinding), the `Origin` of state-changing requests (against other
//! sites' pages posting to a server on 127.0.0.1), the bearer token of
//! `rlm serve --token` on `/api`, `/v1` and `/mcp`, and bodies declared
//! larger than accepted.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, HOST, ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::error::ApiError;

/// The layer: a refusal, or the request passed on. A wrong token is
/// answered after a delay that grows with the wrong tokens of the last
/// minute, so guessing is slow (a right token is never delayed).
pub(crate) async fn check(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    match refusal(&app, &req) {
        Some((refused, wrong_token)) => {
            if wrong_token {
                tokio::time::sleep(app.wrong_tokens.record()).await;
            }
            refused
        }
        None => next.run(req).await,
    }
}

/// The refusal of `req`, if any, and whether it is for a wrong token.
fn refusal(app: &App, req: &Request) -> Option<(Response, bool)> {
    let path = req.uri().path();
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    let Some(host) = host else {
        return Some((
            refuse(
                path,
                StatusCode::FORBIDDEN,
                "the request has no Host header; send one (HTTP/1.1 requires it)".into(),
                None,
            ),
            false,
        ));
    };
    let allowed = &app.options().allowed_hosts;
    if !host_allowed(&host, app.bound_addr(), allowed) {
        return Some((
            refuse(
                path,
                StatusCode::FORBIDDEN,
                format!(
                    "this server does not answer to the host {host:?} (a guard against DNS rebinding); use localhost or its address, or start rlm serve with --allowed-host {}",
                    host_name(&host)
                ),
                None,
            ),
            false,
        ));
    }
    if changes_state(req.method())
        && let Some(origin) = req.headers().get(ORIGIN)
    {
        let origin = origin.to_str().unwrap_or("");
        if !origin_allowed(origin, &host, allowed) {
            return Some((
                refuse(
                    path,
                    StatusCode::FORBIDDEN,
                    format!(
                        "a {} from the page at {origin:?} is refused: only this server's own page may change things (cross-site request); add its host with --allowed-host if it is yours",
                        req.method()
                    ),
                    None,
                ),
                false,
            ));
        }
    }
    let token = app.options().token.as_deref()?;
    if !needs_token(path) {
        return None;
    }
    let query = query_token(req.uri().query());
    let sent = match req.headers().get(AUTHORIZATION) {
        Some(v) => {
            let v = v.to_str().unwrap_or("");
            match v.split_once(' ') {
                Some((scheme, t)) if scheme.eq_ignore_ascii_case("bearer") => Some(t.trim()),
                _ => {
                    return Some((refuse(
                        path,
                        StatusCode::UNAUTHORIZED,
                        "the Authorization header is not a Bearer token; send Authorization: Bearer <token>".into(),
                        Some("Bearer realm=\"rlm\", error=\"invalid_request\""),
                    ), false));
                }
            }
        }
        None if req.method() == Method::GET && is_event_stream(path) => query.as_deref(),
        None => None,
    };
    match sent {
        None => Some((refuse(
            path,
            StatusCode::UNAUTHORIZED,
            "this server requires a token: send Authorization: Bearer <token>, the token rlm serve was started with (--token or RLM_SERVE_TOKEN)".into(),
            Some("Bearer realm=\"rlm\""),
            ),
            false,
        )),
        Some(t) if same_secret(t, token) => None,
        Some(_) => Some((refuse(
            path,
            StatusCode::UNAUTHORIZED,
            "the token does not match this server's; send the token rlm serve was started with (--token or RLM_SERVE_TOKEN)".into(),
            Some("Bearer realm=\"rlm\", error=\"invalid_token\""),
            ),
            true,
        )),
    }
}

/// Methods that change something: refused from another site's page.
fn changes_state(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The paths the token guards. The page, its files and the API's shape
/// (`/api/openapi.json`, `/api/docs`) hold no data and stay open, so the page
/// can load and ask for the token.
fn needs_token(path: &str) -> bool {
    let guarded = ["/api", "/v1", "/mcp"].iter().any(|p| {
        path == *p || path.starts_with(&format!("{p}/")) || (*p == "/mcp" && path.starts_with(p))
    });
    guarded && !matches!(path, "/api/openapi.json" | "/api/docs")
}

/// `GET /api/runs/{id}/events`: the one route that also takes
/// `?access_token=` (`EventSource` cannot send headers).
fn is_event_stream(path: &str) -> bool {
    path.strip_prefix("/api/runs/")
        .and_then(|rest| rest.strip_suffix("/events"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// `access_token` of a query string, percent-decoded.
fn query_token(query: Option<&str>) -> Option<String> {
    let raw = query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("access_token="))?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Compares two secrets in time independent of where they differ: both are
/// hashed, then every byte of the hashes is compared.
fn same_secret(sent: &str, expected: &str) -> bool {
    let (a, b) = (
        Sha256::digest(sent.as_bytes()),
        Sha256::digest(expected.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The host of a `Host` value (`name:port`, `[v6]:port`), lowercase,
/// without a trailing dot.
fn host_name(host: &str) -> String {
    let h = host.trim();
    let name = if let Some(rest) = h.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else if h.matches(':').count() > 1 {
        h // a bare IPv6 address
    } else {
        h.split(':').next().unwrap_or("")
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `localhost`, the bound address (any IP address when bound to all
/// interfaces, or when not known), or an allowed name. DNS rebinding needs a
/// name the attacker controls, so IP addresses are never its vehicle.
fn host_allowed(host: &str, bound: Option<SocketAddr>, allowed: &[String]) -> bool {
    let name = host_name(host);
    if name == "localhost" || allowed.iter().any(|a| a.eq_ignore_ascii_case(&name)) {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => match bound {
            Some(b) if !b.ip().is_unspecified() => b.ip() == ip,
            _ => true,
        },
        Err(_) => false,
    }
}

/// The page's own origin (`http(s)://` + the request's Host), or an allowed
/// host's.
fn origin_allowed(origin: &str, host: &str, allowed: &[String]) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false; // "null" (sandboxed frames, file: pages) and junk
    };
    if !matches!(scheme, "http" | "https") {
        return false;
    }
    if authority.eq_ignore_ascii_case(host.trim()) {
        return true;
    }
    let name = host_name(authority);
    allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

/// A refusal in the shape of the API the path belongs to (OpenAI's under
/// `/v1`), with `WWW-Authenticate` for a 401.
fn refuse(
    path: &str,
    status: StatusCode,
    message: String,
    challenge: Option<&'static str>,
) -> Response {
    let mut response = if path.starts_with("/v1/") || path == "/v1" {
        crate::openai::OpenAiError::access(status, message).into_response()
    } else {
        ApiError::new(status, message).into_response()
    };
    if let Some(c) = challenge {
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(c));
    }
    response
}

/// The largest body a request to `path` may have: an upload's, or any
/// other request's.
pub(crate) fn body_limit(limits: &crate::Limits, path: &str) -> usize {
    if path == "/api/uploads" {
        limits.max_upload_bytes
    } else {
        limits.max_body_bytes
    }
}

/// What body an operation takes, from the OpenAPI document (the one list of
/// the operations and their bodies): JSON, or bytes of any type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Json,
    Bytes,
}

/// The body `method` on `path` takes, if any.
fn body_kind(method: &Method, path: &str) -> Option<BodyKind> {
    static OPS: std::sync::OnceLock<Vec<(String, Vec<String>, BodyKind)>> =
        std::sync::OnceLock::new();
    let ops = OPS.get_or_init(|| {
        let doc = crate::openapi::document();
        let mut ops = Vec::new();
        for (pattern, item) in doc["paths"].as_object().into_iter().flatten() {
            for (m, op) in item.as_object().into_iter().flatten() {
                let Some(content) = op["requestBody"]["content"].as_object() else {
                    continue;
                };
                let kind = if content.contains_key("application/json") {
                    BodyKind::Json
                } else {
                    BodyKind::Bytes
                };
                let segments = pattern.split('/').map(str::to_string).collect();
                ops.push((m.to_ascii_uppercase(), segments, kind));
            }
        }
        ops
    });
    let parts: Vec<&str> = path.split('/').collect();
    ops.iter()
        .find(|(m, segments, _)| {
            m == method.as_str()
                && segments.len() == parts.len()
                && segments
                    .iter()
                    .zip(&parts)
                    .all(|(s, p)| s == p || (s.starts_with('{') && !p.is_empty()))
        })
        .map(|(_, _, kind)| *kind)
}

/// A Content-Type the JSON endpoints read (`application/json`, or
/// `application/...+json`); any other is refused with 415 before the body
/// is read.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let essence = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The layer refusing at once (413) a request whose declared
/// `Content-Length` is over its limit, before any of the body is read (a
/// client announcing 10^14 bytes is not waited for). Only an operation that
/// reads the body does: another method is 405 and a JSON endpoint sent
/// another type 415, both at once too. What the client still sends is read
/// and dropped as for any refused body (see `conn::with_body_deadline`).
pub(crate) async fn refuse_declared_too_large(
    State(limits): State<crate::Limits>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let reads_body = match body_kind(req.method(), path) {
        Some(BodyKind::Json) => is_json(req.headers()),
        Some(BodyKind::Bytes) => true,
        None => false,
    };
    let limit = body_limit(&limits, path);
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u128>().ok());
    match declared {
        Some(len) if reads_body && len > limit as u128 => {
            let what = if path == "/api/uploads" {
                "rlm serve --max-upload-bytes"
            } else {
                "request bodies are capped"
            };
            let e = ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is larger than the server accepts: {len} bytes (its Content-Length), at most {limit} ({what})"
                ),
            )
            .closing();
            if path.starts_with("/v1/") {
                crate::openai::OpenAiError::from(e).into_response()
            } else {
                e.into_response()
            }
        }
        _ => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_names_and_addresses() {
        let bound: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let allowed = vec!["rlm.example.org".to_string()];
        for ok in [
            "localhost:8080",
            "LOCALHOST",
            "127.0.0.1:8080",
            "rlm.example.org",
            "rlm.example.org.:443",
        ] {
            assert!(host_allowed(ok, Some(bound), &allowed), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.2:8080",
            "[::1]:8080",
            "localhost.evil.example",
            "",
        ] {
            assert!(!host_allowed(bad, Some(bound), &allowed), "{bad}");
        }
        let any: SocketAddr = "0.0.0.0:80".parse().unwrap();
        assert!(host_allowed("192.168.1.20", Some(any), &[]));
        assert!(host_allowed("[fe80::1]:80", Some(any), &[]));
        assert!(!host_allowed("attacker.example", Some(any), &[]));
    }

    #[test]
    fn origins_and_tokens() {
        assert!(origin_allowed(
            "http://127.0.0.1:8080",
            "127.0.0.1:8080",
            &[]
        ));
        assert!(origin_allowed(
            "https://rlm.example.org",
            "10.0.0.1",
            &["rlm.example.org".into()]
        ));
        for bad in [
            "null",
            "http://evil.example",
            "http://127.0.0.1:9999",
            "file://",
            "ftp://127.0.0.1:8080",
        ] {
            assert!(!origin_allowed(bad, "127.0.0.1:8080", &[]), "{bad}");
        }
        assert!(same_secret("s3cret", "s3cret"));
        assert!(!same_secret("s3cret", "s3cres"));
        assert!(!same_secret("", "s3cret"));
        assert!(needs_token("/api/info") && needs_token("/v1/models") && needs_token("/mcp"));
        assert!(
            !needs_token("/") && !needs_token("/api/docs") && !needs_token("/api/openapi.json")
        );
        assert!(!needs_token("/apiary.js") && !needs_token("/v1x"));
        assert!(is_event_stream("/api/runs/r1-2/events") && !is_event_stream("/api/runs/events"));
        assert_eq!(
            query_token(Some("a=1&access_token=T")).as_deref(),
            Some("T")
        );
        assert_eq!(
            query_token(Some("access_token=a%26b%3D")).as_deref(),
            Some("a&b=")
        );
        assert_eq!(
            query_token(Some("access_token=50%")).as_deref(),
            Some("50%")
        );
    }
}
