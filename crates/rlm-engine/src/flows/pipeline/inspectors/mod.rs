//! The per-file inspectors of the `pipeline` flow: each selects the chunks of
//! one file that bear on the frozen intent.
//!
//! - [`iterative`] (the default): a prefilter, then up to `MAX_RLM_ITERATIONS`
//!   generated `inspect_iteration(chunks)` programs that narrow the selection
//!   under guardrails (the select-all guard, a minimum kept, the narrowing
//!   rule, confidence boosting);
//! - [`per_chunk`]: one generated `evaluate_chunk_relevance(chunk)` program
//!   per chunk;
//! - [`hypothesis`]: a hypothesis, batched per-chunk relevance scores, stop
//!   rules on depth and confidence;
//! - [`repl`]: the `repl` flow's agent loop scoped to the file's chunks.

pub(crate) mod hypothesis;
pub(crate) mod iterative;
pub(crate) mod per_chunk;
pub(crate) mod repl;
