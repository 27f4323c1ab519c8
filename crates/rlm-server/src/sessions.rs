//! Sessions as conversations: an id usable in a URL, a free-text title
//! (the start of the first question by default, renameable), the turns with
//! the runs that answered them. The typed methods on [`App`] and their
//! handlers.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rlm_engine::session::{
    SessionError, SessionPage, SessionSummary, validate_session_name, validate_session_title,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::error::ApiError;

/// A session that cannot be named or titled so is the request's fault
/// (400); one that cannot be read or saved, the server's (500).
impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::InvalidName(_)
            | SessionError::EmptyTitle
            | SessionError::TitleTooLong(_)
            | SessionError::TitleNotOneLine => ApiError::bad_request(e.to_string()),
            SessionError::Citations(_) | SessionError::Storage { .. } => {
                ApiError::internal(e.to_string())
            }
        }
    }
}

impl App {
    /// Sessions, most recently used first.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>, ApiError> {
        Ok(self.state.sessions.list()?)
    }

    /// One bounded page of a session: its newest turns before position
    /// `before` (at most `limit`, and at most
    /// [`rlm_engine::session::MAX_PAGE_TURN_BYTES`] of them) and its kept
    /// findings.
    pub fn session(
        &self,
        name: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionPage, ApiError> {
        validate_session_name(name)?;
        let sessions = &self.state.sessions;
        let state = sessions.page(name, before, limit)?;
        if state.turns_total == 0 && sessions.summary(name)?.is_none() {
            return Err(ApiError::not_found(format!(
                "no session {name:?}: ask a question with \"session\": {name:?} to start it"
            )));
        }
        Ok(state)
    }

    /// One session's summary (title, times, counts), or 404.
    pub fn session_summary(&self, name: &str) -> Result<SessionSummary, ApiError> {
        validate_session_name(name)?;
        self.state.sessions.summary(name)?.ok_or_else(|| {
            ApiError::not_found(format!("no session {name:?}; GET /api/sessions lists them"))
        })
    }

    /// Creates an empty session (`id` made up when `None`); 409 if it exists.
    pub fn create_session(
        &self,
        id: Option<&str>,
        title: Option<&str>,
    ) -> Result<SessionSummary, ApiError> {
        let id = id.map_or_else(new_session_id, str::to_string);
        validate_session_name(&id)?;
        if let Some(t) = title {
            validate_session_title(t)?;
        }
        let created = self.state.sessions.create(&id, title)?;
        if !created {
            return Err(ApiError::conflict(format!(
                "a session {id:?} exists already; pick another id or leave it out"
            )));
        }
        self.session_summary(&id)
    }

    /// Gives a session a new free-text title.
    pub fn rename_session(&self, name: &str, title: &str) -> Result<SessionSummary, ApiError> {
        validate_session_name(name)?;
        validate_session_title(title)?;
        let renamed = self.state.sessions.rename(name, title)?;
        if !renamed {
            return Err(ApiError::not_found(format!(
                "no session {name:?}; GET /api/sessions lists them"
            )));
        }
        self.session_summary(name)
    }

    /// Deletes a session.
    pub fn delete_session(&self, name: &str) -> Result<(), ApiError> {
        validate_session_name(name)?;
        match self.state.sessions.delete(name) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ApiError::not_found(format!("no session {name:?}"))),
            Err(e) => Err(e.into()),
        }
    }
}

/// `s<ms since epoch, hex>-<random>`: a session id safe in a URL.
fn new_session_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!("s{ms:x}-{:08x}", fastrand::u32(..))
}

/// A session's line as the API shows it: `id` (and `name`, the same, for
/// older clients), `title`, times and counts.
fn summary_json(s: &SessionSummary) -> Value {
    json!({
        "id": s.name,
        "name": s.name,
        "title": s.title,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "turns": s.turns,
        "findings": s.findings,
    })
}

/// A session page with its summary's fields, each turn with its run id
/// and time.
fn page_json(page: SessionPage, summary: Option<SessionSummary>) -> Value {
    let meta = page.turn_meta.clone();
    let mut v = serde_json::to_value(&page).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("turn_meta");
        if let Some(s) = &summary {
            for (k, x) in summary_json(s).as_object().into_iter().flatten() {
                if !matches!(k.as_str(), "turns" | "findings") {
                    o.insert(k.clone(), x.clone());
                }
            }
        }
    }
    if let Some(history) = v.get_mut("history").and_then(Value::as_array_mut) {
        for (turn, m) in history.iter_mut().zip(meta) {
            turn["run_id"] = json!(m.run_id);
            turn["created_at"] = json!(m.created_at);
        }
    }
    v
}

pub(crate) async fn list_sessions(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let sessions: Vec<Value> = app.sessions()?.iter().map(summary_json).collect();
    Ok(Json(json!({"sessions": sessions})))
}

/// `POST /api/sessions`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewSession {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    title: Option<String>,
}

/// `PATCH /api/sessions/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rename {
    title: String,
}

pub(crate) async fn create_session(
    State(app): State<Arc<App>>,
    body: Result<Json<NewSession>, JsonRejection>,
) -> Result<Response, ApiError> {
    let body = crate::body::json_body(
        body,
        "{\"title\": \"...\"} (both id and title are optional)",
    )?;
    let summary = app.create_session(body.id.as_deref(), body.title.as_deref())?;
    Ok((StatusCode::CREATED, Json(summary_json(&summary))).into_response())
}

pub(crate) async fn rename_session(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    body: Result<Json<Rename>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = crate::body::json_body(body, "{\"title\": \"...\"}")?;
    Ok(Json(summary_json(&app.rename_session(&name, &body.title)?)))
}

#[derive(Debug, Deserialize)]
pub(crate) struct SessionQuery {
    before: Option<u64>,
    limit: Option<usize>,
}

pub(crate) async fn get_session(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(q): Query<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q.limit.unwrap_or(20).clamp(1, 100);
    let page = app.session(&name, q.before, limit)?;
    let summary = app.session_summary(&name).ok();
    Ok(Json(page_json(page, summary)))
}

pub(crate) async fn delete_session(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.delete_session(&name)?;
    Ok(StatusCode::NO_CONTENT)
}
