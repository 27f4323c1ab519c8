//! The model handle: loading a GGUF and queueing requests to the worker
//! thread that owns the llama.cpp context.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use llama_cpp_2::llama_backend::LlamaBackend;
use tokio::sync::oneshot;

use super::batcher::*;
use super::request::*;
use crate::LocalError;
use crate::gguf::read_header;

/// A GGUF model running in this process. Cheap to share behind an `Arc`;
/// requests from any thread are queued to the one worker that owns the
/// llama.cpp context. Dropping the last handle stops the worker once the
/// requests in flight are answered.
pub struct LocalModel {
    name: String,
    path: PathBuf,
    context_tokens: u32,
    parallel: u32,
    load_time: Duration,
    reply_identity: String,
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("context_tokens", &self.context_tokens)
            .field("parallel", &self.parallel)
            .finish()
    }
}

fn reply_identity(path: &Path, o: &LocalModelOptions) -> String {
    let (size, modified) = std::fs::metadata(path)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (m.len(), modified)
        })
        .unwrap_or((0, 0));
    format!(
        "{} size={size} mtime={modified} seed={} repeat={}/{} temperature={} max_tokens={}",
        path.display(),
        o.seed,
        o.repeat_penalty,
        o.repeat_last_n,
        o.default_temperature,
        o.default_max_tokens
    )
}

fn backend() -> Result<&'static LlamaBackend, LocalError> {
    static BACKEND: OnceLock<Result<LlamaBackend, llama_cpp_2::LlamaCppError>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs every tensor at load time; rlm's stderr is for people.
            llama_cpp_2::send_logs_to_tracing(
                llama_cpp_2::LogOptions::default().with_logs_enabled(false),
            );
            LlamaBackend::init()
        })
        .as_ref()
        .map_err(|e| LocalError::Inference(format!("cannot start llama.cpp: {e}")))
}

impl LocalModel {
    /// Loads the GGUF at `path` (blocking: about a second for a 1 GB file
    /// once it is in the page cache) and starts the worker. A missing file is
    /// [`LocalError::ModelMissing`]; a file that is not a GGUF or that
    /// llama.cpp cannot load is [`LocalError::CorruptModel`] /
    /// [`LocalError::Load`].
    pub fn load(path: &Path, options: LocalModelOptions) -> Result<Self, LocalError> {
        read_header(path)?;
        let backend = backend()?;
        let started = Instant::now();
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<u32, LocalError>>();
        let worker_path = path.to_path_buf();
        let worker_options = options.clone();
        std::thread::Builder::new()
            .name("rlm-local-llama".into())
            .spawn(move || worker(backend, &worker_path, worker_options, inbox, ready_tx))
            .map_err(LocalError::io("cannot start the inference thread"))?;
        let context_tokens = ready_rx.recv().map_err(|_| {
            LocalError::Inference("the inference thread died while loading".into())
        })??;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".to_string());
        let reply_identity = reply_identity(path, &options);
        Ok(LocalModel {
            name,
            reply_identity,
            path: path.to_path_buf(),
            context_tokens,
            parallel: options.parallel,
            load_time: started.elapsed(),
            jobs,
        })
    }

    /// The model's name: its file name without `.gguf`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GGUF file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The KV cache size in tokens (the context window of one request).
    pub fn context_tokens(&self) -> u32 {
        self.context_tokens
    }

    /// Sequences decoded together.
    pub fn parallel(&self) -> u32 {
        self.parallel
    }

    /// What decides this model's reply to a request besides the request:
    /// the GGUF (path, size, modification time) and the sampling defaults
    /// (seed, repetition penalty, default temperature and output cap). Two
    /// loads with the same identity answer the same request the same way.
    pub fn reply_identity(&self) -> &str {
        &self.reply_identity
    }

    /// How long [`LocalModel::load`] took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Answers one request. Requests beyond the parallel slots wait their
    /// turn; dropping the future withdraws the request (its sequence is freed
    /// at the next decode step).
    pub async fn generate(&self, mut request: GenerateRequest) -> Result<Generation, LocalError> {
        if request.grammar.is_some() {
            request.stop.clear();
        }
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job {
                request,
                submitted: Instant::now(),
                reply,
            })
            .map_err(|_| LocalError::Inference("the inference thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| LocalError::Inference("the inference thread has stopped".into()))?
    }
}
