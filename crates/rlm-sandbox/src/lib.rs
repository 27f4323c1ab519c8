//! The sandboxed Python REPL the model programs.
