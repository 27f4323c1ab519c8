//! The page and its files (everything under `ui/`, embedded by `build.rs`),
//! served with the headers a page on a network needs: a strict Content
//! Security Policy whose script and style hashes are computed from the
//! embedded HTML when the server starts, `nosniff`, no referrer, no
//! framing, an ETag (304 on `If-None-Match`) and gzip.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::body::Body;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
    REFERRER_POLICY, VARY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use flate2::Compression;
use sha2::{Digest, Sha256};

include!(concat!(env!("OUT_DIR"), "/ui_files.rs"));

/// One file as it is served.
#[derive(Debug)]
pub(crate) struct Asset {
    body: &'static [u8],
    /// The gzipped body, when smaller.
    gzip: Option<Vec<u8>>,
    /// `"<16 hex digits of SHA-256>"`.
    etag: String,
    content_type: &'static str,
    /// For HTML: the policy allowing exactly its inline scripts and styles.
    csp: Option<String>,
}

/// Every file by its URL path (`/` for `index.html`).
fn assets() -> &'static HashMap<String, Asset> {
    static ASSETS: OnceLock<HashMap<String, Asset>> = OnceLock::new();
    ASSETS.get_or_init(|| {
        UI_FILES
            .iter()
            .map(|(path, body)| {
                let url = if *path == "index.html" {
                    "/".to_string()
                } else {
                    format!("/{path}")
                };
                (url, make_asset(path, body))
            })
            .collect()
    })
}

/// Prepares every file (hashes, gzip) before the first request.
pub(crate) fn warm() {
    assets();
}

/// The file served at `path`, if any.
pub(crate) fn asset(path: &str) -> Option<&'static Asset> {
    assets().get(path)
}

fn make_asset(path: &str, body: &'static [u8]) -> Asset {
    let content_type = content_type(path);
    let compressible = content_type.starts_with("text/")
        || content_type.contains("javascript")
        || content_type.contains("json")
        || content_type.contains("svg");
    let gzip = compressible
        .then(|| crate::compress::gzip(body, Compression::best()))
        .filter(|g| g.len() < body.len());
    let digest = Sha256::digest(body);
    let etag = format!(
        "\"{}\"",
        digest[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let csp = content_type
        .starts_with("text/html")
        .then(|| content_security_policy(&String::from_utf8_lossy(body)));
    Asset {
        body,
        gzip,
        etag,
        content_type,
        csp,
    }
}

fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The policy of an HTML page: scripts and styles from this server, plus
/// its own inline `<script>` and `<style>` elements by their SHA-256.
pub(crate) fn content_security_policy(html: &str) -> String {
    let hashes = |tag: &str| -> String {
        inline_blocks(html, tag)
            .iter()
            .map(|b| format!(" 'sha256-{}'", base64(&Sha256::digest(b.as_bytes()))))
            .collect()
    };
    format!(
        "default-src 'none'; script-src 'self'{}; style-src 'self'{}; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        hashes("script"),
        hashes("style")
    )
}

/// The text of every `<tag>` element of `html` without a `src` attribute,
/// exactly as a browser hashes it (between the tags).
fn inline_blocks<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    // ASCII lowercasing keeps byte offsets.
    let lower = html.to_ascii_lowercase();
    let (open, close) = (format!("<{tag}"), format!("</{tag}"));
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = lower[at..].find(&open).map(|i| i + at) {
        let after = i + open.len();
        let next = lower.as_bytes().get(after).copied();
        if !matches!(next, Some(b'>' | b' ' | b'\t' | b'\n' | b'\r' | b'/')) {
            at = after;
            continue;
        }
        let Some(gt) = lower[after..].find('>').map(|g| g + after) else {
            break;
        };
        let attrs = &lower[after..gt];
        let Some(end) = lower[gt + 1..].find(&close).map(|e| e + gt + 1) else {
            break;
        };
        if !(tag == "script" && attrs.contains("src=")) {
            out.push(&html[gt + 1..end]);
        }
        at = end + close.len();
    }
    out
}

/// Standard base64 with padding (the CSP hash format).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(A[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Whether `If-None-Match` names this ETag (or `*`).
fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

/// The headers every page response carries.
pub(crate) fn page_headers(headers: &mut HeaderMap, csp: Option<&str>) {
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Some(csp) = csp.and_then(|c| HeaderValue::from_str(c).ok()) {
        headers.insert(CONTENT_SECURITY_POLICY, csp);
    }
}

/// The answer for `asset`: 304 when the client has it, else the body
/// (gzipped when the client takes it).
pub(crate) fn respond(asset: &Asset, request: &HeaderMap) -> Response {
    let mut builder = Response::builder()
        .header(ETAG, asset.etag.as_str())
        .header(CACHE_CONTROL, "no-cache")
        .header(VARY, "accept-encoding");
    if let Some(h) = builder.headers_mut() {
        page_headers(h, asset.csp.as_deref());
    }
    if not_modified(request, &asset.etag) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .unwrap_or_default();
    }
    builder = builder.header(CONTENT_TYPE, asset.content_type);
    let body = match &asset.gzip {
        Some(g) if crate::compress::accepts_gzip(request) => {
            builder = builder.header(CONTENT_ENCODING, "gzip");
            Body::from(g.clone())
        }
        _ => Body::from(asset.body),
    };
    builder.body(body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_scripts_and_styles_are_hashed_and_others_not() {
        let html = "<html><head><style>body{color:red}</style><SCRIPT src=\"/v.js\"></SCRIPT>\
                    <script>alert(1)</script><scripts>x</scripts></head></html>";
        assert_eq!(inline_blocks(html, "script"), ["alert(1)"]);
        assert_eq!(inline_blocks(html, "style"), ["body{color:red}"]);
        let csp = content_security_policy(html);
        // echo -n 'alert(1)' | openssl dgst -sha256 -binary | base64
        assert!(
            csp.contains("script-src 'self' 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"),
            "{csp}"
        );
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    }

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn every_ui_file_is_served_and_the_page_at_the_root() {
        assert!(asset("/").is_some());
        for (path, _) in UI_FILES {
            if *path != "index.html" {
                assert!(asset(&format!("/{path}")).is_some(), "{path}");
            }
        }
    }
}
