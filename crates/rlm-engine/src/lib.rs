//! `rlm-engine`: the Recursive Language Model loop of `rlm`.
//!
//! The corpus is never pasted into a prompt: it is loaded as `context` inside a
//! sandboxed Python REPL, the model writes code to inspect it, calls sub-models
//! on the pieces it picks, sees what its code printed, and repeats until it
//! commits an answer with `FINAL`. This crate holds the loop, the budgets shared
//! by the whole call tree, the prompts, citation verification and the trace.

pub mod budget;
pub mod citations;
pub mod parse;
pub mod prompts;
pub mod trace;
