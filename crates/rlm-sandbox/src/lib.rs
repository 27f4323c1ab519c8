//! The sandboxed Python REPL the model programs.
//!
//! Python runs in [monty](https://github.com/pydantic/monty) inside a separate
//! worker process (memory-limited, killed on timeout, crash-isolated). The
//! parent starts an [`Interpreter`] with named inputs (`context`, `documents`, ...)
//! and host function names, runs cells with [`Interpreter::run_cell`], and answers
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
//! let spec = InterpreterSpec::new()
//!     .input("context", InputValue::Text("hello world".into()))
//!     .function("llm_query", HostFunctionKind::Sync);
//! let mut interp = Interpreter::start(&config, &spec).await?;
//! let result = interp.run_cell("print(llm_query(context[:5]))", &Arc::new(Echo)).await?;
//! assert_eq!(result.stdout, "llm_query was called\n");
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod alloc;
mod convert;
pub mod cpython;
mod hints;
mod interpreter;
mod names;
mod process;
pub mod protocol;
pub mod replay;
pub mod worker;

#[cfg(feature = "testing")]
pub mod testing;

/// The counting global allocator a binary that hosts the worker must install;
/// its limits (and its out-of-memory exit) apply only once the process runs
/// [`worker::run_worker`].
pub use alloc::LimitedAllocator;
pub use hints::add_hint;
pub use interpreter::{
    CellError, CellResult, DEFAULT_TRUNCATE_CHARS, DocumentRecord, HostCall, HostError,
    HostFunctionKind, HostHandler, InputValue, Interpreter, InterpreterSpec, MAX_CELL_THREADS,
    Piece, RLM_WORKER_SUBCOMMAND, SandboxBackend, SandboxConfig, SandboxError, SourceDocument,
    TextSource, TextSourceError, WORKER_BIN, WORKER_ENV, Worker, WorkerCommand, WorkerPool,
    truncate_output, worker_beside,
};
