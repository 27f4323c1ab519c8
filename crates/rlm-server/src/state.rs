//! Where a server keeps what outlives a request: sessions (turns, titles,
//! findings) and runs (records, trace events, leases, cancel requests).
//!
//! Two back-ends implement these traits: the store folder
//! (`sessions.sqlite`, [`rlm_engine::FolderSessions`], and `runs/`, one
//! process) and, in the `rlm-cluster` crate, PostgreSQL (any number of
//! `rlm serve` nodes over one database). [`crate::App`] holds one [`ServerState`] and never
//! knows which.

use std::time::Duration;

use rlm_engine::trace::{Trace, TraceRecord};

use crate::error::ApiError;
use crate::run_record::{RunSummary, RunView};

/// What a run back-end could not do (declared with the server's other errors).
pub use crate::error::StateError;

/// Sessions: conversations with their turns and findings (the trait lives
/// in the engine, whose [`rlm_engine::ask_in_session`] every surface asks
/// through).
pub use rlm_engine::session::SessionBackend;

/// Where a running run's trace events go as they happen.
pub trait EventLog: Send {
    /// Writes the events of `trace` not written yet. A failure is kept and
    /// reported by [`EventLog::finish`]; the run goes on.
    fn catch_up(&mut self, trace: &Trace);
    /// Writes the rest and makes it durable; says what was lost, if anything.
    fn finish(&mut self, trace: &Trace) -> Result<(), StateError>;
}

/// Reads a saved run's events in order, a batch at a time.
pub trait EventCursor: Send {
    /// The next events with a sequence number of at least `from`, at most
    /// `max`; empty when there are none (yet).
    fn next_batch(&mut self, from: u64, max: usize) -> Vec<TraceRecord>;
}

/// What a node learns when it renews the leases of the runs it answers.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Heartbeat {
    /// Runs of this node that another node asked to cancel.
    pub cancel: Vec<String>,
    /// Runs of this node whose lease was lost (another node marked them
    /// failed): they are stopped here too.
    pub lost: Vec<String>,
}

/// Runs: their records, their events, and (for a shared back-end) leases
/// and cancel requests between nodes.
pub trait RunBackend: Send + Sync {
    /// Records a new run as running (before any model call) and opens
    /// where its events go. An error means nothing was kept.
    fn create(&self, view: &RunView) -> Result<Box<dyn EventLog>, StateError>;
    /// Replaces a run's record with its outcome. Err when it could not be
    /// saved, or when the run is no longer this node's (its lease expired
    /// and another node marked it failed).
    fn save(&self, view: &RunView) -> Result<(), StateError>;
    /// A run's record as saved; `None` when unknown. A record that cannot
    /// be read is 410.
    fn read(&self, id: &str) -> Result<Option<RunView>, ApiError>;
    /// Saved runs, newest first, skipping the ids in `skip`, at most
    /// `limit`, of `session` only when given.
    fn list(
        &self,
        limit: usize,
        session: Option<&str>,
        skip: &dyn Fn(&str) -> bool,
    ) -> Vec<RunSummary>;
    /// Reads a run's events from the start.
    fn events(&self, id: &str) -> Box<dyn EventCursor>;
    /// The time of a run's last event.
    fn last_event_ts(&self, id: &str) -> Option<String>;
    /// Deletes the oldest finished runs beyond `keep` (never one for which
    /// `in_use` is true); returns the ids deleted.
    fn prune(&self, keep: usize, in_use: &dyn Fn(&str) -> bool) -> Vec<String>;
    /// Ids of the runs saved as running by this back-end's earlier
    /// processes that no process can be answering any more (a store folder
    /// has one server: all of them; a shared store: none, leases decide).
    fn orphaned_at_start(&self) -> Vec<String>;
    /// True when a run saved as running but not in this process's memory
    /// is one that nobody answers (a store folder); false when another
    /// node may be answering it.
    fn single_node(&self) -> bool;
    /// Asks the node answering run `id` to cancel it (a shared store); the
    /// run as saved. Folder stores answer `Ok(None)`.
    fn request_cancel(&self, id: &str) -> Result<Option<RunView>, ApiError>;
    /// How often [`RunBackend::heartbeat`] must be called; `None` when it
    /// need not (a store folder).
    fn heartbeat_every(&self) -> Option<Duration>;
    /// Renews the leases of `running` (this node's runs in progress),
    /// marks runs whose lease expired as failed (with a last event saying
    /// why), and says which of `running` to cancel.
    fn heartbeat(&self, running: &[String]) -> Result<Heartbeat, StateError>;
    /// Where the state is kept, for messages and `GET /api/info`.
    fn location(&self) -> String;
}

/// Runs blocking work off the async workers; the server calls every
/// [`SessionBackend`] and [`RunBackend`] method through it.
pub use rlm_engine::off_runtime;

/// The state a server keeps: sessions and runs of one back-end.
pub struct ServerState {
    /// Sessions.
    pub sessions: Box<dyn SessionBackend>,
    /// Runs.
    pub runs: Box<dyn RunBackend>,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("runs", &self.runs.location())
            .finish_non_exhaustive()
    }
}
