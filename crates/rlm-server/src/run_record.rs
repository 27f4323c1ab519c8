//! A run as the API shows it and as every state back-end keeps it: its
//! status, times, answer and error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The name of the folder inside the store that keeps finished runs.
pub const RUNS_DIR: &str = "runs";

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Being answered.
    Running,
    /// Answered (possibly partially: see the answer's `partial`).
    Done,
    /// No answer could be attempted, or the server stopped before it was
    /// (see `error`).
    Failed,
    /// Stopped by `DELETE /api/runs/{id}`; the answer is what was gathered.
    Cancelled,
}

/// What every view of a run says about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Run id.
    pub id: String,
    /// The question.
    pub question: String,
    /// Its session, if any.
    pub session: Option<String>,
    /// The flow asked for (`configured` when the server's default applies).
    pub flow: String,
    /// Where it is.
    pub status: RunStatus,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC, once finished.
    pub finished_at: Option<String>,
    /// The session turns its question was asked after, by their runs
    /// (`history_runs` of the question); absent: every earlier turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_runs: Option<Vec<String>>,
}

/// A run as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    /// Id, question, status, times.
    #[serde(flatten)]
    pub run: RunInfo,
    /// The answer (as `rlm ask --json` prints it), once finished.
    pub answer: Option<Value>,
    /// Why no answer could be attempted, or what of an answered run could
    /// not be saved and why.
    pub error: Option<String>,
}

/// A run's line in `GET /api/runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Id, question, status, times.
    #[serde(flatten)]
    pub run: RunInfo,
    /// Whether the answer is partial (once finished).
    pub partial: Option<bool>,
}

impl RunView {
    /// Its line in `GET /api/runs`.
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            run: self.run.clone(),
            partial: self
                .answer
                .as_ref()
                .and_then(|a| a.get("partial"))
                .and_then(Value::as_bool),
        }
    }
}

/// Ids are used as file names: only what the server makes (`r<ms>-<hex>`).
pub(crate) fn valid_run_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 40 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}
