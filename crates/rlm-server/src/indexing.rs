//! Adding documents while the server runs: uploads (`--allow-upload`),
//! paths on the server (`--allow-index-paths`) and a re-index of every
//! source the server knows (`POST /api/reindex`, the original system's
//! reload-context). Each is an indexing job whose progress the page polls.
//!
//! Jobs run one at a time. A job first waits until no question is being
//! answered, holds new ones back while it writes the store (under the
//! store's write lock, which also keeps `rlm index` from another process
//! out), then re-opens the store and swaps it in: a question never sees the
//! store change under it.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rlm_corpus::{IndexOptions, IndexProgress, IndexReport, Store};
use rlm_engine::Corpus;
use rlm_engine::trace::now_rfc3339;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::{App, lock};
use crate::error::ApiError;
use crate::jobs::{Job, KEPT_JOBS, MAX_QUEUED, SharedJob};
use crate::storage::write_atomic;

/// Longest upload name, in bytes.
const MAX_UPLOAD_NAME_BYTES: usize = 1024;
/// Errors listed in a job's report, at most.
const MAX_REPORTED_ERRORS: usize = 50;

impl App {
    /// Queues an indexing job over `paths`; one still queued over the same
    /// paths is joined instead (its walk will see what was added since).
    pub(crate) fn start_index(
        self: &Arc<Self>,
        kind: &'static str,
        paths: Vec<PathBuf>,
    ) -> Result<Job, ApiError> {
        let Some(store) = self.local_store() else {
            return Err(ApiError::conflict(format!(
                "this server's store is PostgreSQL ({}): index it with rlm index --store URL PATH (running nodes see the new documents at their next question)",
                self.store().location()
            )));
        };
        let dir = store.dir().to_path_buf();
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        let job = {
            let mut jobs = lock(&self.indexer.jobs);
            if let Some(queued) = jobs.iter().find(|j| {
                let j = lock(j);
                j.status == "queued" && j.phase == "queued" && j.paths == shown
            }) {
                return Ok(lock(queued).clone());
            }
            let waiting = jobs.iter().filter(|j| lock(j).status == "queued").count();
            if waiting >= MAX_QUEUED {
                return Err(ApiError::busy(format!(
                    "{waiting} indexing jobs are waiting already; try again when one finished (GET /api/index/jobs)"
                )));
            }
            let job = Arc::new(Mutex::new(Job {
                id: format!("j{:x}-{:06x}", unix_ms(), fastrand::u32(..1 << 24)),
                kind,
                paths: shown,
                status: "queued",
                phase: "queued",
                files_found: 0,
                done_bytes: 0,
                total_bytes: 0,
                started_at: None,
                finished_at: None,
                report: None,
                error: None,
                documents: None,
            }));
            jobs.push_back(job.clone());
            while jobs.len() > KEPT_JOBS
                && jobs
                    .front()
                    .is_some_and(|j| matches!(lock(j).status, "done" | "failed"))
            {
                jobs.pop_front();
            }
            job
        };
        let shown = lock(&job).clone();
        tokio::spawn(self.clone().run_job(job, dir, paths));
        Ok(shown)
    }

    async fn run_job(self: Arc<Self>, job: SharedJob, dir: PathBuf, paths: Vec<PathBuf>) {
        let _one_at_a_time = self.indexer.running.lock().await;
        lock(&job).phase = "waiting";
        let _alone = self.store_gate.write().await;
        {
            let mut j = lock(&job);
            j.status = "running";
            j.phase = "walking";
            j.started_at = Some(now_rfc3339());
        }
        let (present, missing): (Vec<PathBuf>, Vec<PathBuf>) =
            paths.into_iter().partition(|p| p.exists());
        let progress_job = job.clone();
        let written =
            tokio::task::spawn_blocking(move || -> Result<(IndexReport, Arc<Corpus>), String> {
                if present.is_empty() {
                    return Err("none of its paths exists any more".into());
                }
                let report = Store::index(&dir, &present, &IndexOptions::default(), &mut |p| {
                    let mut j = lock(&progress_job);
                    match p {
                        IndexProgress::Walking { found } => {
                            j.phase = "walking";
                            j.files_found = found;
                        }
                        IndexProgress::Processing {
                            done_bytes,
                            total_bytes,
                        } => {
                            j.phase = "processing";
                            j.done_bytes = done_bytes;
                            j.total_bytes = total_bytes;
                        }
                        IndexProgress::Committing => j.phase = "committing",
                    }
                })
                .map_err(|e| e.to_string())?;
                // The served handle's full-text reader and document list are
                // from before: the store is opened again.
                let store = Arc::new(Store::open(&dir).map_err(|e| e.to_string())?);
                let corpus = Arc::new(Corpus::load(store).map_err(|e| e.to_string())?);
                Ok((report, corpus))
            })
            .await
            .unwrap_or_else(|e| Err(format!("the indexing task failed: {e}")));
        let mut j = lock(&job);
        j.finished_at = Some(now_rfc3339());
        j.phase = "done";
        match written {
            Ok((report, corpus)) => {
                j.documents = Some(corpus.documents().len() as u64);
                self.swap_corpus(corpus);
                j.status = "done";
                j.report = Some(report_json(&report, &missing));
            }
            Err(e) => {
                j.status = "failed";
                j.error = Some(crate::error::one_line(format!("indexing failed: {e}")));
                j.report = Some(json!({"missing_sources": missing}));
            }
        }
    }

    /// Saves an uploaded file in the upload folder and queues its indexing.
    fn save_upload(self: &Arc<Self>, name: &str, bytes: &[u8]) -> Result<Value, ApiError> {
        let Some(dir) = self.options().upload_dir.clone() else {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "uploads are off; start rlm serve with --allow-upload",
            ));
        };
        let rel = upload_path(name).map_err(ApiError::bad_request)?;
        let path = dir.join(&rel);
        let saved = create_folders(&dir, &rel).and_then(|()| write_atomic(&path, bytes));
        if let Err(e) = &saved
            && e.kind() == std::io::ErrorKind::InvalidInput
        {
            return Err(ApiError::bad_request(format!(
                "cannot save the upload as {name:?}: {e}"
            )));
        }
        if let Err(e) = saved {
            return Err(ApiError::insufficient_storage(format!(
                "cannot save the upload as {}: {e}",
                path.display()
            )));
        }
        let job = self.start_index("upload", vec![dir])?;
        Ok(
            json!({"name": name, "path": path.display().to_string(), "bytes": bytes.len(), "job": job}),
        )
    }
}

/// Creates the folders of `rel` inside `dir`, one by one, never through a
/// symbolic link (one placed in the upload folder would lead the write
/// outside it); the file itself is replaced by a rename, which does not
/// follow a link either.
fn create_folders(dir: &Path, rel: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut at = dir.to_path_buf();
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    for part in parent.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} in the upload folder is a symbolic link; uploads are never saved through one",
                        at.strip_prefix(dir).unwrap_or(&at).display()
                    ),
                ));
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} in the upload folder is a file, not a folder",
                        at.strip_prefix(dir).unwrap_or(&at).display()
                    ),
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// What a job's report shows of the store's report.
fn report_json(r: &IndexReport, missing: &[PathBuf]) -> Value {
    let errors: Vec<_> = r.errors.iter().take(MAX_REPORTED_ERRORS).collect();
    json!({
        "added": r.added,
        "updated": r.updated,
        "unchanged": r.unchanged,
        "removed": r.removed,
        "chunks_written": r.chunks_written,
        "skipped": r.skipped,
        "errors": errors,
        "errors_total": r.errors.len(),
        "missing_sources": missing,
        // Scanned PDF pages: read by OCR, or left without text (no OCR
        // engine installed, or it found none).
        "pages_read_by_ocr": r.pages_read_by_ocr,
        "pages_without_text": r.pages_without_text,
        "ocr_available": rlm_corpus::ocr::available(),
    })
}

/// An upload's name as a path inside the upload folder: relative,
/// `/`-separated parts that are plain names not starting with `.`.
fn upload_path(name: &str) -> Result<PathBuf, String> {
    if name.is_empty() {
        return Err("name the file: POST /api/uploads?name=folder/file.md".into());
    }
    if name.len() > MAX_UPLOAD_NAME_BYTES {
        return Err(format!(
            "the name has {} bytes; the limit is {MAX_UPLOAD_NAME_BYTES}",
            name.len()
        ));
    }
    let mut path = PathBuf::new();
    for part in name.split('/') {
        if part.is_empty() || part.starts_with('.') {
            return Err(format!(
                "invalid name {name:?}: each part between '/' must be a plain name, not empty and not starting with '.'"
            ));
        }
        if part.chars().any(|c| c.is_control() || c == '\\') || part.len() > 255 {
            return Err(format!(
                "invalid name {name:?}: no control characters or backslashes, at most 255 bytes a part"
            ));
        }
        let p = Path::new(part);
        if p.components().count() != 1
            || !matches!(p.components().next(), Some(Component::Normal(_)))
        {
            return Err(format!(
                "invalid name {name:?}: use a relative path of plain names"
            ));
        }
        path.push(part);
    }
    Ok(path)
}

#[derive(Debug, Deserialize)]
pub(crate) struct UploadQuery {
    #[serde(default)]
    name: String,
}

/// `POST /api/uploads?name=...`: the body is the file.
pub(crate) async fn upload(
    State(app): State<Arc<App>>,
    Query(q): Query<UploadQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    if app.options().upload_dir.is_none() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "uploads are off; start rlm serve with --allow-upload",
        ));
    }
    let bytes = body.map_err(|e| upload_body_error(&app, e))?;
    let answer = app.save_upload(&q.name, &bytes)?;
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

fn upload_body_error(app: &App, e: BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the file is larger than the server accepts ({} bytes; rlm serve --max-upload-bytes)",
                app.limits().max_upload_bytes
            ),
        )
        .closing();
    }
    let text = e.body_text();
    if text.contains(crate::conn::BODY_TIMED_OUT) {
        return ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "{}; send the whole file at once",
                crate::conn::BODY_TIMED_OUT
            ),
        )
        .closing();
    }
    ApiError::bad_request(format!("the file could not be read: {text}")).closing()
}

/// `POST /api/index`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexBody {
    path: String,
}

pub(crate) async fn index_path(
    State(app): State<Arc<App>>,
    body: Result<Json<IndexBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    if !app.options().allow_index_paths {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "indexing paths on the server is off; start rlm serve with --allow-index-paths",
        ));
    }
    let body = crate::body::json_body(body, "{\"path\": \"/absolute/path\"}")?;
    let path = PathBuf::from(&body.path);
    if body.path.len() > 4096 || !path.is_absolute() {
        return Err(ApiError::bad_request(format!(
            "path {:?} is not an absolute path on the server; send one such as /srv/docs",
            body.path
        )));
    }
    let path = path.canonicalize().map_err(|e| {
        ApiError::bad_request(format!("path {:?} cannot be indexed: {e}", body.path))
    })?;
    // Resolved first, so a symbolic link cannot lead out of the roots.
    let inside = app.options().index_roots.iter().any(|root| {
        root.canonicalize()
            .is_ok_and(|root| path.starts_with(&root))
    });
    if !inside {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "path {:?} is outside the folders this server may index; they are set with rlm serve --index-root DIR",
                body.path
            ),
        ));
    }
    app.indexer.remember(std::slice::from_ref(&path));
    let job = app.start_index("path", vec![path])?;
    Ok((StatusCode::ACCEPTED, Json(json!({"job": job}))).into_response())
}

/// `POST /api/reindex`.
pub(crate) async fn reindex(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let sources = app.indexer.sources();
    if sources.is_empty() {
        return Err(ApiError::conflict(
            "this server knows no source of the store to re-index; start rlm serve with --source PATH (the folders given to rlm index)",
        ));
    }
    let job = app.start_index("reindex", sources)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"job": job}))).into_response())
}

pub(crate) async fn list_jobs(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({"jobs": app.indexer.list()}))
}

pub(crate) async fn get_job(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Job>, ApiError> {
    app.indexer.job(&id).map(Json).ok_or_else(|| {
        ApiError::not_found(format!(
            "no indexing job {id:?}; GET /api/index/jobs lists them"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_names_stay_inside_the_folder() {
        assert_eq!(upload_path("a.md").unwrap(), PathBuf::from("a.md"));
        assert_eq!(
            upload_path("notes/2026/a b.md").unwrap(),
            PathBuf::from("notes/2026/a b.md")
        );
        for bad in [
            "",
            "../x",
            "a/../../x",
            "/etc/passwd",
            ".hidden",
            "a//b",
            "a/",
            "a\\b",
            "a\nb",
        ] {
            assert!(upload_path(bad).is_err(), "{bad:?}");
        }
        assert!(
            upload_path(&"a".repeat(1025))
                .unwrap_err()
                .contains("1025 bytes")
        );
    }
}
