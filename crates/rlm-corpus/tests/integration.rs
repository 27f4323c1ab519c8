//! The integration tests of this crate, one module per file, linked into
//! one test binary (a binary per file cost a link and ~80 MB of disk each).
//! Run one file's tests with `cargo test --test integration -- FILE::`.

mod retrieval_support;

mod languages;
mod memory_store;
mod retrieval;
mod retrieval_e5;
mod retrieval_eval;
mod retrieval_model;
mod store;
