//! The integration tests of this crate, one module per file, linked into
//! one test binary (a binary per file cost a link and ~80 MB of disk each).
//! Run one file's tests with `cargo test --test integration -- FILE::`.

mod common;
mod serve_support;
mod ui;

mod ask_cli;
mod cluster_cli;
mod corpus_cli;
mod flow_cli;
mod hostile_cli;
mod hostile_files;
mod hostile_server;
mod llm_cli;
mod mcp_http;
mod mcp_stdio;
mod model_cli;
mod office_cli;
mod pg_cli;
mod repl_cli;
mod retrieval_cli;
mod serve_cli;
mod settings_cli;
mod ui_browser;
mod ui_thread;
