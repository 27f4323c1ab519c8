//! The HTTP surface: thin handlers over [`crate::App`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use rlm_engine::TraceRecord;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::{App, AskBody, Run};
use crate::error::ApiError;
use crate::state::EventCursor;
use crate::{documents, indexing, sessions};

/// The web UI's page (`ui/index.html`); the files it loads are under
/// `ui/` too and served at their paths (see `assets.rs`).
pub const INDEX_HTML: &str = include_str!("../ui/index.html");

/// Every route of the API and the UI, under the layers every request
/// passes (outermost first): the body deadline (and draining of refused
/// bodies), gzip of JSON answers (and `nosniff` on all), the refusal of
/// declared-too-large bodies, and the access checks (Host, Origin, token).
pub fn router(app: Arc<App>) -> Router {
    router_with_mcp(app, None)
}

/// [`router`] with `mcp` answering `/mcp` and the paths below it, inside
/// the same layers (`None`: `/mcp` is 404 as any unknown path).
pub fn router_with_mcp(app: Arc<App>, mcp: Option<crate::McpService>) -> Router {
    crate::assets::warm();
    let limits = app.limits().clone();
    let body_timeout = limits.body_timeout;
    let mut routes = Router::new()
        .route("/", get(page))
        .route("/api/info", get(info))
        .route("/api/health", get(crate::health::health))
        .route("/api/openapi.json", get(openapi))
        .route("/api/docs", get(docs_page))
        .route("/api/runs", get(list_runs).post(start_run))
        .route("/api/chat", post(chat))
        .route("/api/runs/{id}", get(get_run).delete(cancel_run))
        .route("/api/runs/{id}/events", get(run_events))
        .route(
            "/api/sessions",
            get(sessions::list_sessions).post(sessions::create_session),
        )
        .route(
            "/api/sessions/{name}",
            get(sessions::get_session)
                .patch(sessions::rename_session)
                .delete(sessions::delete_session),
        )
        .route("/api/chunks/{id}", get(get_chunk))
        .route("/api/documents", get(documents::list_documents))
        .route("/api/documents/{id}", get(documents::get_document))
        .route(
            "/api/uploads",
            post(indexing::upload).layer(DefaultBodyLimit::max(limits.max_upload_bytes)),
        )
        .route("/api/index", post(indexing::index_path))
        .route("/api/reindex", post(indexing::reindex))
        .route("/api/index/jobs", get(indexing::list_jobs))
        .route("/api/index/jobs/{id}", get(indexing::get_job))
        .route("/v1/models", get(crate::openai::list_models))
        .route(
            "/v1/chat/completions",
            post(crate::openai::chat_completions),
        );
    if let Some(mcp) = mcp {
        routes = routes.nest_service("/mcp", mcp.0);
    }
    routes
        .fallback(static_file)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            crate::access::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            limits,
            crate::access::refuse_declared_too_large,
        ))
        .layer(axum::middleware::from_fn(crate::compress::compress_json))
        .layer(axum::middleware::map_request(
            move |req: axum::extract::Request| async move {
                crate::conn::with_body_deadline(req, body_timeout)
            },
        ))
        .with_state(app)
}

type ApiResult<T> = Result<T, ApiError>;

/// `GET /`: the page.
async fn page(headers: HeaderMap) -> Response {
    match crate::assets::asset("/") {
        Some(a) => crate::assets::respond(a, &headers),
        None => not_found().into_response(),
    }
}

/// Any other path: a file of the page, or 404 (405 for a file asked with
/// another method than GET or HEAD).
async fn static_file(method: Method, uri: axum::http::Uri, headers: HeaderMap) -> Response {
    match crate::assets::asset(uri.path()) {
        Some(a) if method == Method::GET || method == Method::HEAD => {
            crate::assets::respond(a, &headers)
        }
        Some(_) => {
            let mut r = method_not_allowed().await.into_response();
            r.headers_mut().insert(
                header::ALLOW,
                axum::http::HeaderValue::from_static("GET,HEAD"),
            );
            r
        }
        None => not_found().into_response(),
    }
}

fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; GET /api/openapi.json lists them")
}

/// `GET /api/docs`: the OpenAPI document as one HTML page.
async fn docs_page() -> Response {
    let html = crate::docs_page::html();
    let mut r = (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html.to_string(),
    )
        .into_response();
    crate::assets::page_headers(r.headers_mut(), Some(crate::docs_page::csp()));
    r
}

/// A path that exists, asked with another method (its `Allow` header lists
/// the methods it takes).
async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this endpoint does not take that method (its Allow header lists those it takes); GET /api/openapi.json lists the endpoints",
    )
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}

async fn info(State(app): State<Arc<App>>) -> ApiResult<Json<Value>> {
    let stats = app
        .store()
        .stats()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let languages = app
        .store()
        .languages()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    // The first look for CPython starts it under bubblewrap once (~0.3 s;
    // cached for the process): off the async workers.
    let sandboxes = tokio::task::spawn_blocking(sandboxes)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let c = app.engine().config();
    let b = &c.budget;
    Ok(Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "auth": {"required": app.options().token.is_some()},
        "features": {
            "upload": app.options().upload_dir.is_some(),
            "index_paths": app.options().allow_index_paths,
            "reindex": !app.indexer.sources().is_empty(),
        },
        "store": {
            "path": app.store().location(),
            "documents": stats.documents,
            "chunks": stats.chunks,
            "bytes": stats.bytes,
            "chars": stats.chars,
            "languages": languages,
        },
        "models": {"root": c.root_model, "sub": c.sub_model},
        "defaults": {
            "flow": if c.flows.rlm_enabled { c.flows.rlm_flow.as_str() } else { "rag" },
            "rlm_enabled": c.flows.rlm_enabled,
            "rlm_flow": c.flows.rlm_flow.as_str(),
            "inspector": c.flows.inspector.as_str(),
            "citations": c.citation_policy,
            "high_recall": !c.flows.low_recall_mode,
            "max_llm_calls": b.max_llm_calls,
            "max_iterations": b.max_iterations,
            "max_depth": b.max_depth,
            "max_cost_usd": b.max_cost_usd,
            "max_wall_secs": b.wall_clock.as_secs_f64(),
            "sandbox": c.sandbox,
        },
        "flows": ["repl", "pipeline", "rag", "auto"],
        // The back-ends a question may ask for; CPython where its isolation
        // can be set up here (else why not).
        "sandboxes": sandboxes,
        "inspectors": ["iterative", "per-chunk", "hypothesis", "repl"],
        "limits": {
            "max_question_chars": app.limits().max_question_chars,
            "max_briefing_chars": app.limits().max_briefing_chars,
            "max_title_chars": rlm_engine::session::MAX_SESSION_TITLE_CHARS,
            "max_upload_bytes": app.limits().max_upload_bytes,
            "max_concurrent_runs": app.limits().max_concurrent_runs,
            "max_body_bytes": app.limits().max_body_bytes,
            "max_connections": app.limits().max_connections,
            "header_timeout_secs": app.limits().header_timeout.as_secs_f64(),
            "body_timeout_secs": app.limits().body_timeout.as_secs_f64(),
            "write_timeout_secs": app.limits().write_timeout.as_secs_f64(),
        },
    })))
}

/// The sandbox back-ends and whether a question can run on each here.
fn sandboxes() -> Value {
    let cpython = rlm_sandbox::cpython::launcher(None);
    json!([
        {"name": "monty", "available": true},
        {"name": "cpython", "available": cpython.is_ok(), "reason": cpython.err().map(|e| e.to_string())},
    ])
}

/// The JSON body, or a 400/413/415 that says what was wrong with it.
fn ask_body(body: Result<Json<AskBody>, JsonRejection>) -> ApiResult<AskBody> {
    crate::body::json_body(
        body,
        "{\"question\": \"...\"} plus optional settings (AskBody in GET /api/openapi.json)",
    )
}

async fn start_run(
    State(app): State<Arc<App>>,
    body: Result<Json<AskBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = app.start_run(ask_body(body)?)?;
    let id = run.view().run.id;
    let location = format!("/api/runs/{id}");
    let body = json!({
        "id": id,
        "status": "running",
        "url": location,
        "events": format!("/api/runs/{id}/events"),
    });
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response())
}

async fn chat(
    State(app): State<Arc<App>>,
    body: Result<Json<AskBody>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    let run = app.start_run(ask_body(body)?)?;
    // A client that hangs up cancels its question rather than leaving it
    // running unobserved.
    let guard = crate::app::CancelOnDrop(Some((app.clone(), run.view().run.id)));
    run.until_finished(|| {}).await;
    std::mem::forget(guard);
    let view = serde_json::to_value(run.view()).unwrap_or(Value::Null);
    // Answered but not (all) kept: the client must not take it as saved.
    if let Some(not_saved) = run.not_saved() {
        return Err(ApiError::insufficient_storage(not_saved).with_run(view));
    }
    Ok(Json(view))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<usize>,
    session: Option<String>,
}

async fn list_runs(
    State(app): State<Arc<App>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let q = crate::body::query(q)?;
    let limit = crate::body::limit(q.limit, 50, 500)?;
    Ok(Json(
        json!({"runs": app.list_runs(limit, q.session.as_deref())}),
    ))
}

async fn get_run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let view = app.run_view(&id)?;
    Ok(Json(serde_json::to_value(view).unwrap_or(Value::Null)))
}

async fn cancel_run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Response> {
    let view = app.cancel(&id)?;
    Ok((StatusCode::ACCEPTED, Json(view)).into_response())
}

/// Where an event stream is.
struct Cursor {
    app: Arc<App>,
    run: Option<Arc<Run>>,
    /// Next sequence number to send.
    next: usize,
    /// A run not in this process's memory (finished, or answered by another
    /// node over a shared store): its saved events, read a batch at a time
    /// as the client takes them (never whole: a client that stops reading
    /// holds one batch).
    saved: Option<Box<dyn EventCursor>>,
    id: String,
    done: bool,
}

async fn run_events(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    // Resuming: Last-Event-ID is the last sequence number the client saw.
    let next = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |seen| seen + 1);
    let run = app.run(&id);
    let saved = match &run {
        Some(_) => None,
        None => {
            app.run_view(&id)?; // 404 for an unknown run, 410 for one cut short
            Some(app.saved_events(&id))
        }
    };
    let cursor = Cursor {
        app,
        run,
        next,
        saved,
        id,
        done: false,
    };
    let events = stream::unfold(cursor, |mut c| async move {
        if c.done {
            return None;
        }
        let batch = next_batch(&mut c).await;
        Some((stream::iter(batch.into_iter().map(Ok)), c))
    })
    .flatten();
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Events of a saved trace read (and held) at once for one client.
const SAVED_BATCH: usize = 256;

/// How often the stream of a run another node answers looks for new
/// events (a shared store; see docs/deployment.md, "Several nodes").
const REMOTE_POLL: Duration = Duration::from_millis(50);

/// The next events to send: new trace events, or the closing `end` event.
async fn next_batch(c: &mut Cursor) -> Vec<Event> {
    if let Some(saved) = &mut c.saved {
        loop {
            // The status is read before the events: a run seen finished
            // has all its events saved already.
            let (view, batch) = crate::state::off_runtime(|| {
                (
                    c.app.run_view(&c.id).ok(),
                    saved.next_batch(c.next as u64, SAVED_BATCH),
                )
            });
            if let Some(last) = batch.last() {
                c.next = last.seq as usize + 1;
                return batch.into_iter().map(trace_event).collect();
            }
            let running = view
                .as_ref()
                .is_some_and(|v| v.run.status == crate::app::RunStatus::Running);
            if !running {
                c.done = true;
                return vec![end_event(view)];
            }
            tokio::time::sleep(REMOTE_POLL).await;
        }
    }
    let Some(run) = c.run.clone() else {
        c.done = true;
        return Vec::new();
    };
    loop {
        let changed = run.trace.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        // Finished is read before the events: the last events are then
        // surely in the history when the run is seen as finished.
        let finished = run.finished();
        let records = run.trace.records_from(c.next);
        if !records.is_empty() {
            c.next += records.len();
            return records.into_iter().map(trace_event).collect();
        }
        if finished {
            c.done = true;
            return vec![end_event(Some(run.view()))];
        }
        changed.await;
    }
}

fn trace_event(r: TraceRecord) -> Event {
    let id = r.seq.to_string();
    Event::default()
        .event("trace")
        .id(id)
        .data(serde_json::to_string(&r).unwrap_or_default())
}

fn end_event(view: Option<crate::app::RunView>) -> Event {
    Event::default()
        .event("end")
        .data(serde_json::to_string(&view).unwrap_or_default())
}

async fn get_chunk(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let store = app.store();
    crate::documents::read_store(move || {
        let chunk = store
            .chunk(&id)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no chunk {id:?} in this store; chunk ids look like <document id>-<n>"
                ))
            })?;
        let path = store
            .document(&chunk.doc_id)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map(|d| d.path);
        let mut v = serde_json::to_value(&chunk).unwrap_or(Value::Null);
        v["path"] = json!(path);
        Ok(Json(v))
    })
    .await
}
