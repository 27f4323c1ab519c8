//! `GET /api/docs`: the OpenAPI document as one HTML page, written on the
//! server from the document itself (no script, no CDN): the operations by
//! tag with their parameters, bodies and every status, then the schemas.

use std::fmt::Write;
use std::sync::OnceLock;

use serde_json::Value;

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;background:#fff}\
@media (prefers-color-scheme:dark){body{color:#e6e6e6;background:#161616}code,pre{background:#262626!important}}\
h1{font-size:1.6rem}h2{margin-top:2.5rem;border-bottom:1px solid #8884}h3{font-size:1rem;margin:1.5rem 0 .3rem}\
code,pre{background:#f3f3f3;border-radius:4px;padding:.1rem .3rem}pre{padding:.6rem;overflow:auto;font-size:13px}\
.m{display:inline-block;min-width:4.2rem;font-weight:700}table{border-collapse:collapse}td,th{text-align:left;padding:.15rem .6rem .15rem 0;vertical-align:top}";

/// The page (built once).
pub(crate) fn html() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| render(&crate::openapi::document()))
}

/// Its Content-Security-Policy: nothing but its own style element.
pub(crate) fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| crate::assets::content_security_policy(html()))
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn render(doc: &Value) -> String {
    let mut out = String::new();
    let title = doc["info"]["title"].as_str().unwrap_or("API");
    let version = doc["info"]["version"].as_str().unwrap_or("");
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{} API {}</title><style>{STYLE}</style></head><body><h1>{} API <small>{}</small></h1><p>{}</p><p>Machine-readable: <a href=\"/api/openapi.json\">/api/openapi.json</a> (OpenAPI 3.1).</p>",
        esc(title),
        esc(version),
        esc(title),
        esc(version),
        esc(doc["info"]["description"].as_str().unwrap_or(""))
    );
    let mut ops: Vec<(String, String, String, &Value)> = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            if method == "parameters" {
                continue;
            }
            let tag = op["tags"][0].as_str().unwrap_or("other").to_string();
            ops.push((tag, path.clone(), method.clone(), op));
        }
    }
    let mut tags: Vec<String> = ops.iter().map(|o| o.0.clone()).collect();
    tags.dedup();
    let mut seen = Vec::new();
    for tag in tags {
        if seen.contains(&tag) {
            continue;
        }
        seen.push(tag.clone());
        let _ = write!(out, "<h2 id=\"{0}\">{0}</h2>", esc(&tag));
        for (_, path, method, op) in ops.iter().filter(|o| o.0 == tag) {
            let _ = write!(
                out,
                "<h3 id=\"{}\"><span class=\"m\">{}</span><code>{}</code></h3><p>{}</p>",
                esc(op["operationId"].as_str().unwrap_or("")),
                esc(&method.to_uppercase()),
                esc(path),
                esc(op["summary"].as_str().unwrap_or(""))
            );
            let mut params: Vec<&Value> = doc["paths"][path.as_str()]["parameters"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            params.extend(op["parameters"].as_array().into_iter().flatten());
            if !params.is_empty() {
                out.push_str("<table><tr><th>parameter</th><th>in</th><th>meaning</th></tr>");
                for p in params {
                    let _ = write!(
                        out,
                        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                        esc(p["name"].as_str().unwrap_or("")),
                        esc(p["in"].as_str().unwrap_or("")),
                        esc(p["description"].as_str().unwrap_or(""))
                    );
                }
                out.push_str("</table>");
            }
            if let Some(body) = op["requestBody"]["content"].as_object() {
                for (ctype, media) in body {
                    let _ = write!(
                        out,
                        "<p>Body ({}): <code>{}</code></p>",
                        esc(ctype),
                        esc(&schema_name(&media["schema"]))
                    );
                }
            }
            out.push_str("<table><tr><th>status</th><th>meaning</th></tr>");
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    esc(status),
                    esc(r["description"].as_str().unwrap_or(""))
                );
            }
            out.push_str("</table>");
        }
    }
    out.push_str("<h2 id=\"schemas\">Schemas</h2>");
    for (name, schema) in doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let _ = write!(
            out,
            "<h3 id=\"schema-{0}\">{0}</h3><pre>{1}</pre>",
            esc(name),
            esc(&serde_json::to_string_pretty(schema).unwrap_or_default())
        );
    }
    out.push_str("</body></html>");
    out
}

/// A schema shown by its name when it is a reference, else as JSON.
fn schema_name(schema: &Value) -> String {
    match schema["$ref"].as_str() {
        Some(r) => r.rsplit('/').next().unwrap_or(r).to_string(),
        None => serde_json::to_string(schema).unwrap_or_default(),
    }
}
