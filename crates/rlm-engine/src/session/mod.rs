//! Multi-turn sessions (`rlm ask --session NAME`): earlier questions, answers
//! and findings, persisted in `<store>/sessions.sqlite` (a file of its own, so
//! the corpus schema is never touched).
//!
//! What a session stores and reads back is bounded (the `MAX_*` constants):
//! each turn's question and answer text, its citations and the findings it
//! adds are cut to fixed sizes when saved, a session keeps only its newest
//! turns and findings, and reading one (for a question's prompt or for
//! `GET /api/sessions/{name}`) returns at most a bounded page, whatever an
//! older file holds.

mod backend;
mod store;
mod types;

pub use backend::{FolderSessions, SessionBackend};
pub use store::SessionStore;
pub use types::*;
