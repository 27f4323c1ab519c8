//! The store's tools (`search`, `show`, `list_documents`, `index`) and its
//! documents as resources (`rlm://doc/<id>`, `rlm://chunk/<id>`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use rlm_corpus::{IndexOptions, RetrievalMode, SearchOptions};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourceTemplatesResult, ListResourcesResult,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use serde_json::{Value, json};

use super::args::{BadArgs, ToolArgs};
use super::state::{Backend, McpState};

/// Documents per `resources/list` page.
const RESOURCE_PAGE: usize = 500;
/// Characters of a document's text `show` returns unless asked otherwise.
const SHOW_CHARS: u64 = 50_000;
/// Chunks of a document `show` lists.
const SHOW_CHUNKS: usize = 1_000;

/// What a tool returns: a Markdown text block and the same as structured content.
fn result(markdown: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(markdown)]);
    r.structured_content = Some(structured);
    r
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

fn bad(e: BadArgs) -> CallToolResult {
    tool_error(format!("invalid arguments: {}", e.0))
}

/// Runs `work` on a blocking thread (SQLite, tantivy, whole documents).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(format!("the lookup failed: {e}")))
}

/// `search`.
pub(super) async fn search(state: Arc<McpState>, args: ToolArgs) -> CallToolResult {
    let query = match args.required_string("query", r#"{"query": "termination notice"}"#) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    let k = match args.count("k", 1..=10_000, 10) {
        Ok(k) => k as usize,
        Err(e) => return bad(e),
    };
    let high_recall = match args.bool("high_recall") {
        Ok(h) => h.unwrap_or(false),
        Err(e) => return bad(e),
    };
    let mode = match args.string("mode") {
        Ok(None) => RetrievalMode::Bm25,
        Ok(Some(m)) => match m.parse::<RetrievalMode>() {
            Ok(m) => m,
            Err(_) => {
                return bad(BadArgs(format!(
                    "`mode` must be bm25, vector or hybrid, got {m:?}"
                )));
            }
        },
        Err(e) => return bad(e),
    };
    let view = match state.view() {
        Ok(v) => v,
        Err(e) => return tool_error(e),
    };
    let q = query.clone();
    let hits = blocking(move || {
        if mode == RetrievalMode::Bm25 && !high_recall {
            let hits = view.store.search(&q, k).map_err(|e| e.to_string())?;
            return Ok(hits
                .into_iter()
                .map(|h| (h.chunk_id, h.doc_id, h.path, h.ordinal, h.score, h.snippet))
                .collect::<Vec<_>>());
        }
        if mode != RetrievalMode::Bm25 && view.embedder.is_none() {
            return Err(rlm_corpus::RetrievalError::NoEmbeddings {
                store: view.store.location(),
            }
            .to_string());
        }
        let opts = SearchOptions {
            mode,
            k,
            high_recall,
            ..SearchOptions::default()
        };
        let results = view
            .store
            .search_hybrid(&q, &opts, view.embedder.as_deref())
            .map_err(|e| e.to_string())?;
        Ok(results
            .hits
            .into_iter()
            .map(|h| (h.chunk_id, h.doc_id, h.path, h.ordinal, h.score, h.snippet))
            .collect())
    })
    .await;
    let hits = match hits {
        Ok(h) => h,
        Err(e) => return tool_error(e),
    };
    let mut md = if hits.is_empty() {
        format!("No chunks match {query:?}.")
    } else {
        format!("{} chunks match {query:?}:\n", hits.len())
    };
    let mut list = Vec::new();
    for (rank, (chunk_id, doc_id, path, ordinal, score, snippet)) in hits.into_iter().enumerate() {
        let _ = write!(
            md,
            "\n{}. `{path}` chunk `{chunk_id}` (score {score:.3})\n   {}",
            rank + 1,
            snippet.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        list.push(json!({
            "rank": rank + 1, "chunk_id": chunk_id, "doc_id": doc_id, "path": path,
            "ordinal": ordinal, "score": score, "snippet": snippet,
        }));
    }
    result(
        md,
        json!({"query": query, "mode": mode.as_str(), "hits": list}),
    )
}

/// `show`.
pub(super) async fn show(state: Arc<McpState>, args: ToolArgs) -> CallToolResult {
    let id = match args.required_string("id", r#"{"id": "3f2a9c0d1e4b5a6c-0"}"#) {
        Ok(id) => id.trim().to_string(),
        Err(e) => return bad(e),
    };
    let offset = match args.count("offset", 0..=u64::MAX >> 1, 0) {
        Ok(o) => o as usize,
        Err(e) => return bad(e),
    };
    let max_chars = match args.count("max_chars", 1..=1_000_000, SHOW_CHARS) {
        Ok(m) => m as usize,
        Err(e) => return bad(e),
    };
    let view = match state.view() {
        Ok(v) => v,
        Err(e) => return tool_error(e),
    };
    let shown = blocking(move || {
        let store = &view.store;
        if let Some(chunk) = store.chunk(&id).map_err(|e| e.to_string())? {
            let doc = store
                .document(&chunk.doc_id)
                .map_err(|e| e.to_string())?
                .ok_or("the chunk's document is missing: re-index the store")?;
            let mut md = format!(
                "`{}` chunk {} of {} (`{}`), lines {}-{}",
                doc.path,
                chunk.ordinal,
                doc.chunk_count,
                chunk.id,
                chunk.line_start,
                chunk.line_end
            );
            if let Some(p) = chunk.place() {
                let _ = write!(md, ", {p}");
            }
            if let Some(h) = &chunk.heading {
                let _ = write!(md, ", section \"{h}\"");
            }
            let _ = write!(md, "\n\n{}", fenced(&chunk.text));
            let structured = json!({"chunk": chunk, "document": doc});
            return Ok((md, structured));
        }
        let doc = match store.document(&id).map_err(|e| e.to_string())? {
            Some(d) => d,
            None => store
                .document_by_path(&id)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| {
                    format!(
                        "no chunk or document has the id or path {id:?}; ids come from `search` (chunk ids), `list_documents` (document ids and paths) and `ask` sources"
                    )
                })?,
        };
        let text = store.document_text(&doc.id).map_err(|e| e.to_string())?;
        let chunks = store.chunks_of(&doc.id).map_err(|e| e.to_string())?;
        let total_chars = text.chars().count();
        let piece: String = text.chars().skip(offset).take(max_chars).collect();
        let end = offset.saturating_add(piece.chars().count());
        let next_offset = (end < total_chars).then_some(end);
        let mut md = format!(
            "`{}` (document `{}`, {}, {} chunks, {} characters): \"{}\"",
            doc.path,
            doc.id,
            doc.kind.as_str(),
            doc.chunk_count,
            total_chars,
            doc.title
        );
        if offset > 0 || next_offset.is_some() {
            let _ = write!(
                md,
                "\n\nCharacters {offset}..{end} of {total_chars}{}",
                match next_offset {
                    Some(n) => format!("; the rest: `show` with \"offset\": {n}"),
                    None => String::new(),
                }
            );
        }
        let _ = write!(md, "\n\n{}", fenced(&piece));
        let chunk_list: Vec<Value> = chunks
            .iter()
            .take(SHOW_CHUNKS)
            .map(|c| {
                json!({"id": c.id, "ordinal": c.ordinal, "line_start": c.line_start,
                    "line_end": c.line_end, "page": c.page, "location": c.location,
                    "heading": c.heading})
            })
            .collect();
        let structured = json!({
            "document": doc, "chunks": chunk_list, "text": piece, "offset": offset,
            "total_chars": total_chars, "next_offset": next_offset,
        });
        Ok((md, structured))
    })
    .await;
    match shown {
        Ok((md, structured)) => result(md, structured),
        Err(e) => tool_error(e),
    }
}

/// `text` in a Markdown code fence longer than any backtick run inside it.
fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{}\n{fence}", text.trim_end_matches('\n'))
}

/// `list_documents`.
pub(super) async fn list_documents(state: Arc<McpState>, args: ToolArgs) -> CallToolResult {
    let offset = match args.count("offset", 0..=u64::MAX >> 1, 0) {
        Ok(o) => o as usize,
        Err(e) => return bad(e),
    };
    let limit = match args.count("limit", 1..=10_000, 500) {
        Ok(l) => l as usize,
        Err(e) => return bad(e),
    };
    let view = match state.view() {
        Ok(v) => v,
        Err(e) => return tool_error(e),
    };
    let docs = match blocking(move || view.store.documents().map_err(|e| e.to_string())).await {
        Ok(d) => d,
        Err(e) => return tool_error(e),
    };
    let total = docs.len();
    let page: Vec<_> = docs.into_iter().skip(offset).take(limit).collect();
    let end = offset.saturating_add(page.len());
    let mut md = format!("{total} documents");
    if offset > 0 || end < total {
        let _ = write!(md, "; {offset}..{end} shown");
        if end < total {
            let _ = write!(md, " (the rest: \"offset\": {end})");
        }
    }
    md.push_str("\n\n| id | path | kind | bytes | chunks | title |\n|---|---|---|---|---|---|");
    for d in &page {
        let _ = write!(
            md,
            "\n| `{}` | `{}` | {} | {} | {} | {} |",
            d.id,
            d.path,
            d.kind.as_str(),
            d.size_bytes,
            d.chunk_count,
            d.title.replace('|', "\\|").replace('\n', " ")
        );
    }
    let next_offset = (end < total).then_some(end);
    result(
        md,
        json!({"total": total, "offset": offset, "next_offset": next_offset, "documents": page}),
    )
}

/// `index` (only with `--allow-index`).
pub(super) async fn index(state: Arc<McpState>, args: ToolArgs) -> CallToolResult {
    let own = match &state.backend {
        Backend::Own(own) if state.allow_index => own,
        _ => {
            return tool_error(
                "indexing is off on this server; start it with `rlm mcp --allow-index`, or run `rlm index PATH --store DIR` in a shell",
            );
        }
    };
    let read = || -> Result<_, BadArgs> {
        let paths = args.strings("paths")?.unwrap_or_default();
        if paths.iter().all(|p| p.trim().is_empty()) {
            return Err(BadArgs(
                r#"`paths` is missing or empty; send the files or folders to index, e.g. {"paths": ["./docs"]}"#
                    .into(),
            ));
        }
        Ok((
            paths,
            args.strings("include")?.unwrap_or_default(),
            args.strings("exclude")?.unwrap_or_default(),
        ))
    };
    let (paths, include, exclude) = match read() {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let _one = own.indexing.lock().await;
    let st = state.clone();
    let done = blocking(move || {
        let Backend::Own(own) = &st.backend else {
            return Err("indexing is off on this server".to_string());
        };
        let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
        let opts = IndexOptions {
            include,
            exclude,
            ..IndexOptions::default()
        };
        let report = own.host.index(&paths, &opts).map_err(|e| one_line(&e))?;
        let view = own.host.open().map_err(|e| one_line(&e))?;
        own.replace(view);
        Ok(report)
    })
    .await;
    let report = match done {
        Ok(r) => r,
        Err(e) => return tool_error(format!("indexing failed: {e}")),
    };
    let mut md = format!(
        "Indexed into {}: {} added, {} updated, {} unchanged, {} removed ({} chunks written).",
        state.store_dir.display(),
        report.added,
        report.updated,
        report.unchanged,
        report.removed,
        report.chunks_written
    );
    if let Some(t) = &report.totals {
        let _ = write!(
            md,
            "\nThe store has {} documents, {} chunks.",
            t.documents, t.chunks
        );
    }
    if !report.errors.is_empty() {
        let _ = write!(
            md,
            "\n{} files could not be indexed (everything else was):",
            report.errors.len()
        );
        for (path, msg) in &report.errors {
            let _ = write!(md, "\n- `{path}`: {msg}");
        }
    }
    let structured = serde_json::to_value(&report).unwrap_or(Value::Null);
    result(md, structured)
}

/// An error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        msg.push_str(": ");
        msg.push_str(&cause.to_string());
    }
    msg
}

/// The URI of a document.
fn doc_uri(id: &str) -> String {
    format!("rlm://doc/{id}")
}

/// `resources/list`: one resource per document, `RESOURCE_PAGE` a page; the
/// cursor is the offset of the next page.
pub(super) async fn list_resources(
    state: Arc<McpState>,
    cursor: Option<String>,
) -> Result<ListResourcesResult, ErrorData> {
    let offset = match cursor.as_deref() {
        None => 0,
        Some(c) => c.parse::<usize>().map_err(|_| {
            ErrorData::invalid_params(
                format!("invalid cursor {c:?}: pass the nextCursor of the previous page"),
                None,
            )
        })?,
    };
    let Ok(view) = state.view() else {
        return Ok(ListResourcesResult::with_all_items(Vec::new()));
    };
    let docs = blocking(move || view.store.documents().map_err(|e| e.to_string()))
        .await
        .map_err(|e| ErrorData::internal_error(e, None))?;
    let total = docs.len();
    let resources: Vec<Resource> = docs
        .into_iter()
        .skip(offset)
        .take(RESOURCE_PAGE)
        .map(|d| {
            Resource::new(doc_uri(&d.id), d.path.clone())
                .with_title(d.title.clone())
                .with_description(format!(
                    "{} ({}, {} characters, {} chunks)",
                    d.path,
                    d.kind.as_str(),
                    d.chars,
                    d.chunk_count
                ))
                .with_mime_type("text/plain")
        })
        .collect();
    let end = offset + resources.len();
    let mut page = ListResourcesResult::with_all_items(resources);
    page.next_cursor = (end < total).then(|| end.to_string());
    Ok(page)
}

/// `resources/templates/list`: documents and chunks by id.
pub(super) fn resource_templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new("rlm://doc/{id}", "document")
            .with_description("A document's extracted text, by document id")
            .with_mime_type("text/plain"),
        ResourceTemplate::new("rlm://chunk/{id}", "chunk")
            .with_description("A chunk's text, by chunk id (`<doc-id>-<n>`)")
            .with_mime_type("text/plain"),
    ])
}

/// `resources/read` of `rlm://doc/<id>` (the document's extracted text) or
/// `rlm://chunk/<id>`.
pub(super) async fn read_resource(
    state: Arc<McpState>,
    uri: String,
) -> Result<ReadResourceResult, ErrorData> {
    let view = state
        .view()
        .map_err(|e| ErrorData::resource_not_found(e, None))?;
    let u = uri.clone();
    let text = blocking(move || {
        let not_found = || {
            format!(
                "no resource {u:?}: resources are rlm://doc/<document id> (resources/list) and rlm://chunk/<chunk id>"
            )
        };
        if let Some(id) = u.strip_prefix("rlm://doc/") {
            if view.store.document(id).map_err(|e| e.to_string())?.is_none() {
                return Err(not_found());
            }
            return view.store.document_text(id).map_err(|e| e.to_string());
        }
        if let Some(id) = u.strip_prefix("rlm://chunk/") {
            return view
                .store
                .chunk(id)
                .map_err(|e| e.to_string())?
                .map(|c| c.text)
                .ok_or_else(not_found);
        }
        Err(not_found())
    })
    .await
    .map_err(|e| ErrorData::resource_not_found(e, Some(json!({"uri": uri}))))?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type("text/plain"),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(fenced("a\n"), "```\na\n```");
        assert_eq!(fenced("x ```` y"), "`````\nx ```` y\n`````");
    }
}
