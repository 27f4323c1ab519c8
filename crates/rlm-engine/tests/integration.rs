//! The integration tests of this crate, one module per file, linked into
//! one test binary (a binary per file cost a link and ~80 MB of disk each).
//! Run one file's tests with `cargo test --test integration -- FILE::`.

mod common;
mod pipeline_support;

mod aggregation;
mod conversations;
mod cpython_sandbox;
mod fan_out;
mod grounding;
mod host_caps;
mod in_memory;
mod inspection_lead;
mod loops;
mod pipeline;
mod reply_cache;
mod settings;
mod slow_subcalls;
mod structured;
mod typed;
mod warm_up;
