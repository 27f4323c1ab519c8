//! The integration tests of this crate, one module per file, linked into
//! one test binary. Run one file's tests with
//! `cargo test -p rlm-mcp --test integration -- FILE::`. The tests of `rlm
//! mcp` and `/mcp` as a client reaches them (the real `rlm` binary) are in
//! `crates/rlm/tests` (`mcp_stdio.rs`, `mcp_http.rs`, `mcp_client/`).

mod stdio_sessions;
