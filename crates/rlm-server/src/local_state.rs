//! The state of a server over a store folder: sessions in
//! `<store>/sessions.sqlite` and runs in `<store>/runs/` (`<id>.json`, the
//! record, replaced atomically; `<id>.jsonl`, the trace, appended as it
//! happens). One server per folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_engine::FolderSessions;
use rlm_engine::trace::{Trace, TraceRecord};

use crate::error::ApiError;
use crate::run_record::{RUNS_DIR, RunStatus, RunSummary, RunView, valid_run_id};
use crate::state::{EventCursor, EventLog, Heartbeat, RunBackend, ServerState, StateError};
use crate::storage::{TraceFile, TraceReader, last_event, remove_stale_temporaries, write_atomic};

/// The state of a server over the store folder `dir`: opens (creating)
/// `sessions.sqlite` and `runs/`.
pub fn folder_state(dir: &Path) -> Result<ServerState, StateError> {
    let sessions = FolderSessions::open(dir).map_err(|e| e.to_string())?;
    let runs_dir = dir.join(RUNS_DIR);
    std::fs::create_dir_all(&runs_dir)
        .map_err(|e| format!("cannot create {}: {e}", runs_dir.display()))?;
    remove_stale_temporaries(&runs_dir);
    Ok(ServerState {
        sessions: Box::new(sessions),
        runs: Box::new(LocalRuns { dir: runs_dir }),
    })
}

/// `runs/` of a store folder.
struct LocalRuns {
    dir: PathBuf,
}

impl LocalRuns {
    fn record_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// The trace file of a run, if there is one.
    fn trace_path(&self, id: &str) -> Option<PathBuf> {
        let path = self.dir.join(format!("{id}.jsonl"));
        (valid_run_id(id) && path.is_file()).then_some(path)
    }
}

impl EventLog for TraceFile {
    fn catch_up(&mut self, trace: &Trace) {
        TraceFile::catch_up(self, trace);
    }
    fn finish(&mut self, trace: &Trace) -> Result<(), StateError> {
        TraceFile::finish(self, trace)
    }
}

/// A trace file read in order; the sequence numbers before `from` are
/// read and skipped a batch at a time.
struct FileCursor(TraceReader);

impl EventCursor for FileCursor {
    fn next_batch(&mut self, from: u64, max: usize) -> Vec<TraceRecord> {
        let mut batch = self.0.next_batch(max);
        while !batch.is_empty() && batch.last().is_some_and(|r| r.seq < from) {
            batch = self.0.next_batch(max);
        }
        batch.retain(|r| r.seq >= from);
        batch
    }
}

impl RunBackend for LocalRuns {
    fn create(&self, view: &RunView) -> Result<Box<dyn EventLog>, StateError> {
        let id = &view.run.id;
        let trace_path = self.dir.join(format!("{id}.jsonl"));
        let file = TraceFile::create(trace_path.clone()).map_err(|e| {
            format!(
                "cannot create its trace {} ({e}); free space in the store's folder",
                trace_path.display()
            )
        })?;
        // Saved as running before any model call: after a crash the run is
        // listed as interrupted instead of lost.
        if let Err(e) = self.save(view) {
            let _ = std::fs::remove_file(&trace_path);
            return Err(format!("{e}; free space in the store's folder").into());
        }
        Ok(Box::new(file))
    }

    fn save(&self, view: &RunView) -> Result<(), StateError> {
        let path = self.record_path(&view.run.id);
        let text = serde_json::to_vec_pretty(view).map_err(|e| e.to_string())?;
        write_atomic(&path, &text)
            .map_err(|e| format!("the run record {} ({e})", path.display()).into())
    }

    fn read(&self, id: &str) -> Result<Option<RunView>, ApiError> {
        if !valid_run_id(id) {
            return Ok(None);
        }
        let path = self.record_path(id);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                ApiError::gone(format!(
                    "run {id} cannot be shown: its record {} is incomplete ({} bytes: {e}), cut short by a crash or a full disk",
                    path.display(),
                    bytes.len()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match self.trace_path(id) {
                Some(trace) => Err(ApiError::gone(format!(
                    "run {id} cannot be shown: its record {} was never saved (only its trace {} was)",
                    path.display(),
                    trace.display()
                ))),
                None => Ok(None),
            },
            Err(e) => Err(ApiError::internal(format!(
                "cannot read the record of run {id} ({}): {e}",
                path.display()
            ))),
        }
    }

    fn list(
        &self,
        limit: usize,
        session: Option<&str>,
        skip: &dyn Fn(&str) -> bool,
    ) -> Vec<RunSummary> {
        let mut saved = saved_run_files(&self.dir);
        saved.retain(|(id, _)| !skip(id));
        saved.sort_by_key(|s| std::cmp::Reverse(s.1));
        let mut out = Vec::new();
        for (id, _) in saved {
            if out.len() >= limit {
                break;
            }
            if let Ok(Some(v)) = self.read(&id) {
                let summary = v.summary();
                if session.is_none_or(|s| summary.run.session.as_deref() == Some(s)) {
                    out.push(summary);
                }
            }
        }
        out
    }

    fn events(&self, id: &str) -> Box<dyn EventCursor> {
        Box::new(FileCursor(TraceReader::open(
            self.trace_path(id).as_deref(),
        )))
    }

    fn last_event_ts(&self, id: &str) -> Option<String> {
        self.trace_path(id)
            .and_then(|p| last_event(&p))
            .map(|e| e.ts)
    }

    fn prune(&self, keep: usize, in_use: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut saved = saved_run_files(&self.dir);
        if saved.len() <= keep {
            return Vec::new();
        }
        saved.sort_by_key(|s| s.1);
        let excess = saved.len() - keep;
        let mut removed = Vec::new();
        for (id, _) in saved.into_iter().take(excess) {
            if in_use(&id) {
                continue;
            }
            for ext in ["json", "jsonl"] {
                let _ = std::fs::remove_file(self.dir.join(format!("{id}.{ext}")));
            }
            removed.push(id);
        }
        removed
    }

    fn orphaned_at_start(&self) -> Vec<String> {
        saved_run_files(&self.dir)
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| matches!(self.read(id), Ok(Some(v)) if v.run.status == RunStatus::Running))
            .collect()
    }

    fn single_node(&self) -> bool {
        true
    }

    fn request_cancel(&self, _id: &str) -> Result<Option<RunView>, ApiError> {
        Ok(None)
    }

    fn heartbeat_every(&self) -> Option<Duration> {
        None
    }

    fn heartbeat(&self, _running: &[String]) -> Result<Heartbeat, StateError> {
        Ok(Heartbeat::default())
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }
}

/// (id, modified time) of the saved runs.
fn saved_run_files(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".json")?.to_string();
            let modified = e.metadata().ok()?.modified().ok()?;
            valid_run_id(&id).then_some((id, modified))
        })
        .collect()
}
