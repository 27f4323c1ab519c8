//! gzip for clients that accept it: the page's files (compressed once, when
//! first served) and JSON answers of 1 KiB or more (compressed as they are
//! sent). Event streams are never compressed: each event must reach the
//! client when it is written. Every answer also says `nosniff`.

use std::io::Write;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, VARY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::write::GzEncoder;

/// JSON answers shorter than this are sent as they are (gzip would not
/// save a packet).
const MIN_COMPRESSED_BYTES: usize = 1024;

/// Largest JSON answer compressed (the largest the API sends, a session
/// page, is about 1.6 MiB); anything bigger is sent as it is.
const MAX_COMPRESSED_BYTES: usize = 32 << 20;

/// Whether the request's `Accept-Encoding` takes gzip (by name or `*`,
/// with a quality above 0).
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (name.eq_ignore_ascii_case("gzip") || name == "*") && q > 0.0
        })
}

/// `bytes` gzipped at `level`.
pub(crate) fn gzip(bytes: &[u8], level: Compression) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::with_capacity(bytes.len() / 3 + 64), level);
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(bytes);
    enc.finish().unwrap_or_default()
}

/// The layer: JSON answers gzipped when the client accepts it; `nosniff`
/// on every answer.
pub(crate) async fn compress_json(req: Request, next: Next) -> Response {
    let gzip_ok = accepts_gzip(req.headers());
    let mut response = next.run(req).await;
    response
        .headers_mut()
        .entry(X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json || response.headers().contains_key(CONTENT_ENCODING) {
        return response;
    }
    response
        .headers_mut()
        .append(VARY, HeaderValue::from_static("accept-encoding"));
    if !gzip_ok {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_COMPRESSED_BYTES).await {
        Ok(b) => b,
        // Larger than any answer the API makes, or a body that failed:
        // nothing sensible to send but the failure.
        Err(e) => {
            return crate::error::ApiError::internal(format!("cannot send the answer: {e}"))
                .closing()
                .into_response();
        }
    };
    if bytes.len() < MIN_COMPRESSED_BYTES {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let compressed = gzip(&bytes, Compression::fast());
    parts
        .headers
        .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(compressed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_read_with_qualities() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            accepts_gzip(&m)
        };
        assert!(h("gzip, deflate, br"));
        assert!(h("br;q=1.0, GZIP;q=0.5"));
        assert!(h("*"));
        assert!(!h("gzip;q=0"));
        assert!(!h("br, deflate"));
        assert!(!h("identity"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
