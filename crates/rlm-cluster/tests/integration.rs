//! The integration tests of this crate, one module per file, linked into
//! one test binary. Run one file's tests with
//! `cargo test -p rlm-cluster --test integration -- FILE::`.

mod ask_path;
mod state;
