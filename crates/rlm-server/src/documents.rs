//! The store's documents: listed and searched (`GET /api/documents`), and
//! one read in pages of its extracted text (`GET /api/documents/{id}`), the
//! text chunk offsets point into.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use rlm_corpus::Document;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::error::ApiError;

/// Longest search text, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 500;
/// Full-text hits read for a search (their documents follow the path matches).
const TEXT_HITS: usize = 200;
/// Default and largest page of a document's text, in bytes.
const TEXT_PAGE: usize = 64 * 1024;
const MAX_TEXT_PAGE: usize = 1 << 20;

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    q: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

fn document_json(d: &Document) -> Value {
    json!({
        "id": d.id,
        "path": d.path,
        "title": d.title,
        "kind": d.kind,
        "size_bytes": d.size_bytes,
        "chars": d.chars,
        "chunk_count": d.chunk_count,
    })
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("cannot read the store: {e}"))
}

/// `GET /api/documents?q=&offset=&limit=`.
pub(crate) async fn list_documents(
    State(app): State<Arc<App>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = crate::body::query(q)?;
    let offset = q.offset.unwrap_or(0);
    let limit = crate::body::limit(q.limit, 50, 500)?;
    let query = q.q.as_deref().map(str::trim).unwrap_or("");
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(ApiError::bad_request(format!(
            "q has {chars} characters; the limit is {MAX_QUERY_CHARS}"
        )));
    }
    let store = app.current_corpus().store().clone();
    let text_query = query.to_string();
    let (docs, hits) = read_store(move || {
        let docs = store.documents().map_err(internal)?;
        // The documents whose text matches, best first (a query the
        // full-text parser makes nothing of finds nothing more).
        let hits = if text_query.is_empty() {
            Vec::new()
        } else {
            store.search(&text_query, TEXT_HITS).unwrap_or_default()
        };
        Ok((docs, hits))
    })
    .await?;
    let matches: Vec<Value> = if query.is_empty() {
        docs.iter().map(document_json).collect()
    } else {
        let needle = query.to_lowercase();
        let mut seen = HashSet::new();
        let mut out: Vec<Value> = docs
            .iter()
            .filter(|d| {
                d.path.to_lowercase().contains(&needle) || d.title.to_lowercase().contains(&needle)
            })
            .map(|d| {
                seen.insert(d.id.clone());
                let mut v = document_json(d);
                v["match"] = json!("path");
                v
            })
            .collect();
        // Then the documents whose text matches.
        for hit in hits {
            if !seen.insert(hit.doc_id.clone()) {
                continue;
            }
            if let Some(d) = docs.iter().find(|d| d.id == hit.doc_id) {
                let mut v = document_json(d);
                v["match"] = json!("text");
                v["snippet"] = json!(hit.snippet);
                out.push(v);
            }
        }
        out
    };
    let total = matches.len();
    let page: Vec<Value> = matches.into_iter().skip(offset).take(limit).collect();
    Ok(Json(
        json!({"total": total, "offset": offset, "limit": limit, "documents": page}),
    ))
}

#[derive(Debug, Deserialize)]
pub(crate) struct TextQuery {
    offset: Option<usize>,
    limit: Option<usize>,
}

/// `GET /api/documents/{id}?offset=&limit=`.
pub(crate) async fn get_document(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    q: Result<Query<TextQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let q = crate::body::query(q)?;
    let limit = crate::body::limit(q.limit, TEXT_PAGE, MAX_TEXT_PAGE)?;
    let offset = q.offset.unwrap_or(0) as u64;
    let store = app.current_corpus().store().clone();
    read_store(move || {
        let doc = store.document(&id).map_err(internal)?.ok_or_else(|| {
            ApiError::not_found(format!(
                "no document {id:?} in this store; GET /api/documents lists them"
            ))
        })?;
        // Only the page's bytes are read, not the whole text.
        let page = store
            .text_page(&id, offset, limit as u64)
            .map_err(internal)?;
        let mut v = document_json(&doc);
        v["hash"] = json!(doc.hash);
        v["text"] = json!({
            "offset": page.start,
            "end": page.end,
            "total_bytes": page.total_bytes,
            "content": page.content,
            "next_offset": (page.end < page.total_bytes).then_some(page.end),
        });
        Ok(Json(v))
    })
    .await
}

/// Runs a store read off the async workers: on a large store a read takes
/// long, and the workers serve every other request meanwhile.
pub(crate) async fn read_store<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| internal(format!("the read stopped: {e}")))?
}
