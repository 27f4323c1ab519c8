//! The indexing jobs of a server (queued, running, done) and the sources a
//! re-index reads, kept in the store folder. `indexing.rs` runs the jobs.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::storage::write_atomic;
use crate::sync::lock;

/// The file in the store folder listing the sources the server knows.
pub const SOURCES_FILE: &str = "server-sources.json";
/// Finished jobs kept for `GET /api/index/jobs`.
pub(crate) const KEPT_JOBS: usize = 20;
/// Jobs waiting at once, at most (429 beyond).
pub(crate) const MAX_QUEUED: usize = 8;

/// An indexing job as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) kind: &'static str,
    pub(crate) paths: Vec<String>,
    pub(crate) status: &'static str,
    pub(crate) phase: &'static str,
    pub(crate) files_found: u64,
    pub(crate) done_bytes: u64,
    pub(crate) total_bytes: u64,
    pub(crate) started_at: Option<String>,
    pub(crate) finished_at: Option<String>,
    pub(crate) report: Option<Value>,
    pub(crate) error: Option<String>,
    pub(crate) documents: Option<u64>,
}

pub(crate) type SharedJob = Arc<Mutex<Job>>;

/// The jobs and the sources.
#[derive(Debug)]
pub(crate) struct Indexer {
    /// `None` for a store that is not a folder: the sources are kept in
    /// memory only.
    sources_file: Option<PathBuf>,
    sources: Mutex<Vec<PathBuf>>,
    /// Oldest first.
    pub(crate) jobs: Mutex<VecDeque<SharedJob>>,
    /// Held by the job that is running: jobs run one at a time, in order.
    pub(crate) running: tokio::sync::Mutex<()>,
}

impl Indexer {
    /// The indexer of the store at `dir`, with the sources saved there.
    pub(crate) fn new(dir: Option<&Path>) -> Self {
        let sources_file = dir.map(|d| d.join(SOURCES_FILE));
        let sources = sources_file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|b| serde_json::from_slice::<Vec<PathBuf>>(&b).ok())
            .unwrap_or_default();
        Indexer {
            sources_file,
            sources: Mutex::new(sources),
            jobs: Mutex::new(VecDeque::new()),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// Adds `paths` to the sources (saved in the store folder; a failure
    /// to save is reported on stderr: the sources still hold for this run).
    pub(crate) fn remember(&self, paths: &[PathBuf]) {
        let mut sources = lock(&self.sources);
        let before = sources.len();
        for p in paths {
            if !sources.contains(p) {
                sources.push(p.clone());
            }
        }
        if sources.len() != before
            && let Some(file) = &self.sources_file
        {
            let text = serde_json::to_vec_pretty(&*sources).unwrap_or_default();
            if let Err(e) = write_atomic(file, &text) {
                eprintln!(
                    "rlm serve: cannot save the sources in {}: {e}",
                    file.display()
                );
            }
        }
    }

    /// The sources, in the order they were added.
    pub(crate) fn sources(&self) -> Vec<PathBuf> {
        lock(&self.sources).clone()
    }

    /// The job queued or running, if any.
    pub(crate) fn current(&self) -> Option<Job> {
        lock(&self.jobs)
            .iter()
            .rev()
            .map(|j| lock(j).clone())
            .find(|j| matches!(j.status, "queued" | "running"))
    }

    pub(crate) fn job(&self, id: &str) -> Option<Job> {
        lock(&self.jobs)
            .iter()
            .map(|j| lock(j).clone())
            .find(|j| j.id == id)
    }

    pub(crate) fn list(&self) -> Vec<Job> {
        lock(&self.jobs)
            .iter()
            .rev()
            .map(|j| lock(j).clone())
            .collect()
    }
}
