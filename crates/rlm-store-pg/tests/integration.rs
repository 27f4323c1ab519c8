//! The integration tests of this crate, one module per file, linked into
//! one test binary (a binary per file cost a link and ~80 MB of disk each).
//! Run one file's tests with `cargo test --test integration -- FILE::`.

mod pg_languages;
mod pg_ranking;
mod pg_replies;
mod pg_store;
mod retrieval_eval;
