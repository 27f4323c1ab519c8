//! `GET /api/health`: is the model provider reachable (one bounded request
//! for its model list; the embedded model: loaded or not) and can the store
//! be read. Cached for a few seconds and computed once for all callers at a
//! time, so pages polling it do not hammer the provider.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rlm_llm::{LlmClient, LlmError};
use serde_json::{Value, json};

use crate::app::App;

/// How long an answer is reused.
const CACHE_FOR: Duration = Duration::from_secs(5);
/// The model check's time limit.
const MODEL_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// `GET /api/health`.
pub(crate) async fn health(State(app): State<Arc<App>>) -> Response {
    let (status, body) = app.health.get_or_make(CACHE_FOR, || check(&app)).await;
    (status, Json(body)).into_response()
}

async fn check(app: &App) -> (StatusCode, Value) {
    let store = store_health(app);
    let model = match &app.options().model {
        Some(client) => model_health(client).await,
        None => {
            json!({"status": "unknown", "message": "the server was given no model client to check"})
        }
    };
    let job = app.indexer.current();
    let worst = [&model["status"], &store["status"]]
        .iter()
        .map(|s| match s.as_str() {
            Some("down") => 2,
            Some("degraded") => 1,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    let (status, word) = match worst {
        2 => (StatusCode::SERVICE_UNAVAILABLE, "down"),
        1 => (StatusCode::OK, "degraded"),
        _ => (StatusCode::OK, "ok"),
    };
    let body = json!({
        "status": word,
        "checked_at": rlm_engine::trace::now_rfc3339(),
        "model": model,
        "store": store,
        "indexing": {"running": job.is_some(), "job": job},
    });
    (status, body)
}

fn store_health(app: &App) -> Value {
    let store = app.store();
    let path = store.location();
    // The folder itself is looked at: an open handle keeps reading a store
    // whose files were deleted under it.
    if let Some(local) = app.local_store()
        && let Err(e) = std::fs::metadata(local.dir())
    {
        return json!({"status": "down", "path": path, "message": format!("the store folder cannot be read: {e}")});
    }
    match store.stats() {
        Ok(s) => {
            json!({"status": "ok", "path": path, "documents": s.documents, "chunks": s.chunks})
        }
        Err(e) => {
            json!({"status": "down", "path": path, "message": format!("the store cannot be read: {e}")})
        }
    }
}

async fn model_health(client: &LlmClient) -> Value {
    let config = client.config();
    let provider = client.provider();
    let mut v = json!({
        "provider": provider.name(),
        "endpoint": provider.endpoint(),
        "root": config.root.model,
        "sub": config.sub.model,
    });
    if provider.name() == "local" {
        // The embedded model is loaded when its provider is made.
        v["loaded"] = json!(true);
    }
    let started = Instant::now();
    let listed = tokio::time::timeout(MODEL_CHECK_TIMEOUT, client.list_models()).await;
    v["latency_ms"] = json!(started.elapsed().as_millis() as u64);
    let (status, message) = match listed {
        Err(_) => (
            "down",
            format!(
                "no answer from {} within {} s",
                provider.endpoint(),
                MODEL_CHECK_TIMEOUT.as_secs()
            ),
        ),
        Ok(Ok(models)) => {
            let missing: Vec<&str> = [config.root.model.as_str(), config.sub.model.as_str()]
                .into_iter()
                .filter(|m| !models.is_empty() && !models.iter().any(|x| x == m))
                .collect();
            if missing.is_empty() {
                ("ok", String::new())
            } else {
                (
                    "degraded",
                    format!(
                        "the provider does not list the model(s) {}; questions may fail (check RLM_PRIMARY_MODEL / RLM_SUB_MODEL)",
                        missing.join(", ")
                    ),
                )
            }
        }
        Ok(Err(e)) => match e {
            LlmError::Unreachable { .. }
            | LlmError::ConnectionDropped { .. }
            | LlmError::Timeout { .. }
            | LlmError::Unauthorized { .. }
            | LlmError::MissingApiKey { .. }
            | LlmError::Config(_) => ("down", e.to_string()),
            // It answered, but not with a model list (a proxy without
            // /models, a replayed cassette, a rate limit): reachable.
            other => (
                "degraded",
                format!("reachable, but its model list could not be read: {other}"),
            ),
        },
    };
    v["status"] = json!(status);
    if !message.is_empty() {
        v["message"] = json!(crate::error::one_line(message));
    }
    v
}
