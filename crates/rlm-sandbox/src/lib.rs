//! The sandboxed Python REPL the model programs.
//!
//! Python runs in [monty](https://github.com/pydantic/monty) inside a separate
//! worker process (memory-limited, killed on timeout, crash-isolated). The
//! parent starts a [`Session`] with named inputs (`context`, `documents`, ...)
//! and host function names, runs cells with [`Session::run_cell`], and answers
//! the host calls Python makes through a [`HostHandler`]. The sandbox knows
//! nothing about models: `llm_query`, `FINAL`, ... are whatever the handler does.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rlm_sandbox::SandboxError> {
//! use std::sync::Arc;
//! use rlm_sandbox::*;
//! struct Echo;
//! impl HostHandler for Echo {
//!     async fn handle(&self, call: HostCall) -> Result<serde_json::Value, HostError> {
//!         Ok(serde_json::json!(format!("{} was called", call.name)))
//!     }
//! }
//! let config = SandboxConfig::new(WorkerCommand::locate()?);
//! let spec = SessionSpec::new()
//!     .input("context", InputValue::Text("hello world".into()))
//!     .function("llm_query", HostFunctionKind::Sync);
//! let mut session = Session::start(&config, &spec).await?;
//! let result = session.run_cell("print(llm_query(context[:5]))", &Arc::new(Echo)).await?;
//! assert_eq!(result.stdout, "llm_query was called\n");
//! # Ok(()) }
//! ```

mod convert;
mod hints;
mod names;
pub mod protocol;
pub mod replay;
mod session;
pub mod worker;

#[cfg(feature = "testing")]
pub mod testing;

pub use hints::add_hint;
/// The counting global allocator a worker process must install (re-exported so
/// binaries that host the worker subcommand need no direct monty dependency).
pub use monty_alloc::LimitedAllocator;
pub use session::{
    CellError, CellResult, DEFAULT_TRUNCATE_CHARS, DocumentRecord, HostCall, HostError,
    HostFunctionKind, HostHandler, InputValue, Piece, RLM_WORKER_SUBCOMMAND, SandboxConfig,
    SandboxError, Session, SessionSpec, SourceDocument, TextSource, WORKER_BIN, WORKER_ENV, Worker,
    WorkerCommand, WorkerPool, truncate_output, worker_beside,
};
