//! Where sessions are kept, as every surface reads and saves them.

use std::path::Path;

use super::store::SessionStore;
use super::types::*;

/// Where sessions are kept: a store folder's `sessions.sqlite`
/// ([`FolderSessions`]) or, in the `rlm-cluster` crate, PostgreSQL. Every
/// surface reads and saves sessions through it (see [`crate::ask`]).
/// Methods may wait on I/O: call them through [`crate::off_runtime`] from
/// async code.
pub trait SessionBackend: Send + Sync {
    /// A session for a new question (empty if it does not exist yet): its
    /// newest turns within the page cap and its kept findings.
    fn load(&self, name: &str) -> Result<SessionState, SessionError>;
    /// One bounded page of turns before position `before`, plus findings.
    fn page(
        &self,
        name: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionPage, SessionError>;
    /// Every session, most recently active first.
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError>;
    /// One session's summary; `None` if there is no such session.
    fn summary(&self, name: &str) -> Result<Option<SessionSummary>, SessionError>;
    /// Creates an empty session; false if one by that name exists.
    fn create(&self, name: &str, title: Option<&str>) -> Result<bool, SessionError>;
    /// Gives a session a new title; false if there is no such session.
    fn rename(&self, name: &str, title: &str) -> Result<bool, SessionError>;
    /// Deletes a session; false if there was none.
    fn delete(&self, name: &str) -> Result<bool, SessionError>;
    /// Appends an answered turn (within the session caps) with the id of
    /// the run that answered it (none for `rlm ask --session`); a failure
    /// changes nothing stored.
    fn append_run(
        &self,
        name: &str,
        turn: &Turn,
        findings: &[Finding],
        run_id: Option<&str>,
    ) -> Result<(), SessionError>;
}

/// The sessions of a store folder: its `sessions.sqlite`, one connection
/// shared by the callers.
#[derive(Debug)]
pub struct FolderSessions(std::sync::Mutex<SessionStore>);

impl FolderSessions {
    /// Opens (creating if needed) `<store_dir>/sessions.sqlite`.
    pub fn open(store_dir: &Path) -> Result<Self, SessionError> {
        Ok(FolderSessions(std::sync::Mutex::new(SessionStore::open(
            store_dir,
        )?)))
    }

    fn store(&self) -> std::sync::MutexGuard<'_, SessionStore> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl SessionBackend for FolderSessions {
    fn load(&self, name: &str) -> Result<SessionState, SessionError> {
        self.store().load(name)
    }
    fn page(
        &self,
        name: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionPage, SessionError> {
        self.store().page(name, before, limit)
    }
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        self.store().list()
    }
    fn summary(&self, name: &str) -> Result<Option<SessionSummary>, SessionError> {
        self.store().summary(name)
    }
    fn create(&self, name: &str, title: Option<&str>) -> Result<bool, SessionError> {
        self.store().create(name, title)
    }
    fn rename(&self, name: &str, title: &str) -> Result<bool, SessionError> {
        self.store().rename(name, title)
    }
    fn delete(&self, name: &str) -> Result<bool, SessionError> {
        self.store().delete(name)
    }
    fn append_run(
        &self,
        name: &str,
        turn: &Turn,
        findings: &[Finding],
        run_id: Option<&str>,
    ) -> Result<(), SessionError> {
        self.store().append_run(name, turn, findings, run_id)
    }
}
