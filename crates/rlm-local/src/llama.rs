//! In-process inference with llama.cpp: one worker thread owns the model and
//! its context and decodes every admitted request together (continuous
//! batching over parallel sequences of one unified KV cache).
//!
//! On a CPU, generating one token for four sequences costs little more than
//! for one (the weights are read once per step), so `llm_query_batched`
//! fan-out runs at several times the single-request rate. Requests beyond
//! the parallel slots, or whose prompt plus answer would not fit the free
//! cache, wait in a FIFO queue.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::oneshot;

use crate::LocalError;
use crate::gguf::read_header;
use crate::prefix_state::{self, SaveLog};
use crate::stream::{StreamCursor, TextSink};

/// Settings of the local model. [`LocalModelOptions::from_env`] reads the
/// `RLM_LOCAL_*` variables.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalModelOptions {
    /// KV cache size in tokens, shared by all parallel sequences
    /// (`RLM_LOCAL_CONTEXT`, default 16384; capped at the model's training
    /// context).
    pub context_tokens: u32,
    /// Sequences decoded together (`RLM_LOCAL_PARALLEL`, default 4).
    pub parallel: u32,
    /// CPU threads (`RLM_LOCAL_THREADS`, default: all cores).
    pub threads: i32,
    /// Tokens per decode step (prompt chunks plus one per generating sequence).
    pub batch_tokens: u32,
    /// Output cap when a request sets none (`RLM_LOCAL_MAX_OUTPUT_TOKENS`, default 1024).
    pub default_max_tokens: u32,
    /// Temperature when a request sets none (default 0.2: a small model at
    /// temperature 0 tends to repeat itself word for word).
    pub default_temperature: f32,
    /// Repetition penalty over the last `repeat_last_n` tokens (default 1.1).
    pub repeat_penalty: f32,
    /// Window of the repetition penalty (default 64 tokens).
    pub repeat_last_n: i32,
    /// Sampling seed (`RLM_LOCAL_SEED`, default 42): the same request gets
    /// the same answer.
    pub seed: u32,
    /// Where the model's state after a request's fixed prefix (its system
    /// turn) is kept between processes, so a new process starts decoding
    /// after it (`RLM_LOCAL_PREFIX_CACHE`: a directory, or `off`).
    /// [`LocalModelOptions::from_env`] defaults to `prefix-state` in the
    /// models directory; `None` (the [`Default`], so that a library user's
    /// model writes nothing unasked) keeps nothing on disk.
    pub prefix_cache: Option<PathBuf>,
}

impl Default for LocalModelOptions {
    fn default() -> Self {
        LocalModelOptions {
            context_tokens: 16_384,
            parallel: 4,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get() as i32),
            batch_tokens: 512,
            default_max_tokens: 1024,
            default_temperature: 0.2,
            repeat_penalty: 1.1,
            repeat_last_n: 64,
            seed: 42,
            prefix_cache: None,
        }
    }
}

impl LocalModelOptions {
    /// Defaults overridden by `RLM_LOCAL_CONTEXT`, `RLM_LOCAL_PARALLEL`,
    /// `RLM_LOCAL_THREADS`, `RLM_LOCAL_MAX_OUTPUT_TOKENS`, `RLM_LOCAL_SEED`;
    /// the prefix cache is `RLM_LOCAL_PREFIX_CACHE` (`off`, a directory, or
    /// unset/empty for `prefix-state` in the models directory).
    pub fn from_env() -> Result<Self, LocalError> {
        Self::from_env_with(|name| std::env::var(name).ok())
    }

    /// [`LocalModelOptions::from_env`] with an explicit lookup.
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Result<Self, LocalError> {
        // The names and ranges are declared with every other setting.
        use rlm_settings::{Reader, Setting, table};
        let found = |s: &Setting| rlm_settings::env_found(s, &env);
        let r = Reader::new(&found);
        let config = |e: rlm_settings::SettingError| LocalError::Config(e.to_string());
        let mut o = LocalModelOptions::default();
        if let Some(v) = r.whole(&table::LOCAL_CONTEXT).map_err(config)? {
            o.context_tokens = v;
        }
        if let Some(v) = r.whole(&table::LOCAL_PARALLEL).map_err(config)? {
            o.parallel = v;
        }
        if let Some(v) = r.whole(&table::LOCAL_THREADS).map_err(config)? {
            o.threads = v;
        }
        if let Some(v) = r.whole(&table::LOCAL_MAX_OUTPUT_TOKENS).map_err(config)? {
            o.default_max_tokens = v;
        }
        if let Some(v) = r.whole(&table::LOCAL_SEED).map_err(config)? {
            o.seed = v;
        }
        o.prefix_cache = prefix_state::dir_from_env(&env);
        Ok(o)
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// A chat completion request for the local model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GenerateRequest {
    /// The conversation, rendered with the model's own chat template.
    pub turns: Vec<Turn>,
    /// Output cap; [`LocalModelOptions::default_max_tokens`] when `None`.
    pub max_tokens: Option<u32>,
    /// Temperature; [`LocalModelOptions::default_temperature`] when `None`.
    /// 0 is greedy.
    pub temperature: Option<f32>,
    /// Generation ends before any of these strings.
    pub stop: Vec<String>,
    /// Receives the text as it is generated (whole characters, never part
    /// of a stop string); the pieces add up to [`Generation::text`].
    pub on_text: Option<TextSink>,
    /// A GBNF grammar (root rule `root`) the output must follow: llama.cpp
    /// samples only tokens it admits, and generation ends when it is
    /// complete. `stop` is not applied then (a stop string inside a JSON
    /// string would cut the document). A grammar llama.cpp cannot parse
    /// fails the request with [`LocalError::Grammar`].
    pub grammar: Option<String>,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// End-of-turn token or a stop string.
    Stop,
    /// The output cap (or the context window) was reached.
    Length,
}

/// The answer to a [`GenerateRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated text (stop string excluded).
    pub text: String,
    /// Prompt tokens after the chat template, by the model's tokenizer.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub output_tokens: u32,
    /// Why it ended.
    pub finish: Finish,
    /// Time waiting for a free sequence slot.
    pub queued: Duration,
    /// Time from admission to the first generated token (prompt processing).
    pub prompt_time: Duration,
    /// Time from the first to the last generated token.
    pub generation_time: Duration,
    /// Prompt tokens that were not decoded again: cache entries reused from
    /// an earlier request in the same sequence (a conversation's shared
    /// prefix), or restored from the prefix state on disk.
    pub cached_prompt_tokens: u32,
    /// Of [`Generation::cached_prompt_tokens`], those restored from the
    /// prefix state on disk ([`LocalModelOptions::prefix_cache`]): the
    /// system turn, saved by an earlier process. 0 when nothing was restored.
    pub disk_prompt_tokens: u32,
}

struct Job {
    request: GenerateRequest,
    submitted: Instant,
    reply: oneshot::Sender<Result<Generation, LocalError>>,
}

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
        Ok(LocalModel {
            name,
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

/// A request being decoded in one sequence of the shared cache.
struct Slot {
    seq: i32,
    job: Job,
    admitted: Instant,
    first_token: Option<Instant>,
    prompt: Vec<LlamaToken>,
    /// Prompt tokens already decoded.
    fed: usize,
    /// The sampled token still to be decoded (after the prompt is in).
    next: Option<LlamaToken>,
    /// Index in the current batch whose logits belong to this slot.
    logits_at: Option<i32>,
    sampler: LlamaSampler,
    output: Vec<u8>,
    output_tokens: u32,
    max_tokens: u32,
    /// Cells reserved in the cache: prompt + max output.
    reserved: u32,
    /// Prompt tokens reused from the sequence's cache (including `disk`).
    reused: usize,
    /// Prompt tokens restored from a prefix state file.
    disk: usize,
    /// The prefix (token count, file) to save once it is decoded: the
    /// prompt is fed up to it, then the sequence's state is written.
    save_prefix: Option<(usize, PathBuf)>,
    /// Generated tokens decoded into the cache (all but a final unfed one).
    fed_output: Vec<LlamaToken>,
    /// What of `output` went to the request's [`TextSink`].
    streamed: StreamCursor,
}

/// A sequence between requests. Its cache keeps the tokens of the last
/// request it served, so the next turn of the same conversation (whose prompt
/// starts with that one) decodes only what is new — multi-turn loops resend
/// a long shared prefix every turn.
struct IdleSeq {
    seq: i32,
    cached: Vec<LlamaToken>,
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

enum Outcome {
    Continue,
    Done(Finish),
}

/// The inference thread: loads the model, says on `ready` whether it did
/// (and the context size it got), then serves `inbox` until every handle is
/// dropped and the requests in flight are answered.
fn worker(
    backend: &'static LlamaBackend,
    path: &Path,
    options: LocalModelOptions,
    inbox: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<u32, LocalError>>,
) {
    let model = match LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(LocalError::Load {
                path: path.to_path_buf(),
                detail: e.to_string(),
            }));
            return;
        }
    };
    let mut batcher = match Batcher::new(backend, &model, path, options) {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(batcher.n_ctx));
    batcher.run(&inbox);
}

/// The worker's state between decode steps: the context of the model, the
/// requests waiting for a sequence, those being decoded, and the sequences
/// between requests.
struct Batcher<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    template: LlamaChatTemplate,
    options: LocalModelOptions,
    /// The KV cache size in tokens.
    n_ctx: u32,
    prefix_states: Option<PrefixStates>,
    batch: LlamaBatch<'static>,
    idle: Vec<IdleSeq>,
    pending: VecDeque<Job>,
    slots: Vec<Slot>,
    /// Cache cells promised to the running slots (prompt + max output each).
    reserved_cells: u32,
    inbox_open: bool,
}

/// What of a new request's prompt its sequence already holds.
struct Reuse {
    /// Prompt tokens reused from the sequence's cache (including `disk`).
    reused: usize,
    /// Prompt tokens restored from a prefix state file.
    disk: usize,
    /// The prefix (token count, file) to save once it is decoded.
    save_prefix: Option<(usize, PathBuf)>,
}

impl<'m> Batcher<'m> {
    /// Creates the context (capped at the model's training context) and the
    /// idle sequences; a context llama.cpp cannot create is
    /// [`LocalError::Load`].
    fn new(
        backend: &LlamaBackend,
        model: &'m LlamaModel,
        path: &Path,
        options: LocalModelOptions,
    ) -> Result<Self, LocalError> {
        let n_ctx = options.context_tokens.min(model.n_ctx_train().max(512));
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(options.batch_tokens)
            .with_n_ubatch(options.batch_tokens)
            .with_n_seq_max(options.parallel)
            .with_kv_unified(true)
            .with_n_threads(options.threads)
            .with_n_threads_batch(options.threads);
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| LocalError::Load {
                path: path.to_path_buf(),
                detail: format!("cannot create a {n_ctx}-token context: {e}"),
            })?;
        // The chat template the model was trained with; ChatML (Qwen, many
        // others) when the file carries none.
        let template = model
            .chat_template(None)
            .or_else(|_| LlamaChatTemplate::new("chatml"))
            .expect("chatml is a valid template name");
        let prefix_states = options.prefix_cache.as_ref().and_then(|dir| {
            Some(PrefixStates {
                identity: prefix_state::model_identity(path).ok()?,
                dir: dir.clone(),
                log: SaveLog::default(),
            })
        });
        let idle = (0..options.parallel as i32)
            .rev()
            .map(|seq| IdleSeq {
                seq,
                cached: Vec::new(),
            })
            .collect();
        Ok(Batcher {
            model,
            ctx,
            template,
            n_ctx,
            prefix_states,
            batch: LlamaBatch::new(options.batch_tokens as usize, 1),
            idle,
            pending: VecDeque::new(),
            slots: Vec::new(),
            reserved_cells: 0,
            inbox_open: true,
            options,
        })
    }

    /// Decode steps until the inbox is closed and nothing is left to answer.
    fn run(&mut self, inbox: &mpsc::Receiver<Job>) {
        while self.receive(inbox) {
            self.drop_withdrawn();
            self.admit();
            if self.slots.is_empty() {
                continue;
            }
            self.fill_batch();
            if let Err(e) = self.ctx.decode(&mut self.batch) {
                self.fail_all(&e);
                continue;
            }
            self.save_prefixes();
            let finished = self.sample();
            self.finish(finished);
        }
    }

    /// Waits for work when idle; otherwise takes whatever arrived. False
    /// when there is nothing to do and no request can come any more.
    fn receive(&mut self, inbox: &mpsc::Receiver<Job>) -> bool {
        if self.slots.is_empty() && self.pending.is_empty() {
            if !self.inbox_open {
                return false;
            }
            match inbox.recv() {
                Ok(job) => self.pending.push_back(job),
                Err(_) => return false,
            }
        }
        loop {
            match inbox.try_recv() {
                Ok(job) => self.pending.push_back(job),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.inbox_open = false;
                    break;
                }
            }
        }
        true
    }

    /// Withdrawn requests free their sequence.
    fn drop_withdrawn(&mut self) {
        self.pending.retain(|job| !job.reply.is_closed());
        let (ctx, idle, reserved_cells) = (&mut self.ctx, &mut self.idle, &mut self.reserved_cells);
        self.slots.retain(|slot| {
            if slot.job.reply.is_closed() {
                let _ = ctx.clear_kv_cache_seq(Some(slot.seq as u32), None, None);
                idle.push(IdleSeq {
                    seq: slot.seq,
                    cached: Vec::new(),
                });
                *reserved_cells -= slot.reserved;
                false
            } else {
                true
            }
        });
    }

    /// Admits in arrival order while a sequence and enough cache are free.
    fn admit(&mut self) {
        while let Some(job) = self.pending.front() {
            if self.idle.is_empty() {
                break;
            }
            let prompt = match render_prompt(self.model, &self.template, &job.request.turns) {
                Ok(p) => p,
                Err(e) => {
                    let job = self.pending.pop_front().expect("front exists");
                    let _ = job.reply.send(Err(e));
                    continue;
                }
            };
            let prompt_tokens = prompt.len() as u32;
            if prompt_tokens + 1 > self.n_ctx {
                let job = self.pending.pop_front().expect("front exists");
                let _ = job.reply.send(Err(LocalError::ContextExceeded {
                    prompt_tokens,
                    window: self.n_ctx,
                }));
                continue;
            }
            let wanted = job
                .request
                .max_tokens
                .unwrap_or(self.options.default_max_tokens)
                .max(1);
            let max_tokens = wanted.min(self.n_ctx - prompt_tokens);
            let reserved = prompt_tokens + max_tokens;
            // The idle sequence whose cache shares the longest prefix.
            let pick = (0..self.idle.len())
                .max_by_key(|&i| {
                    (
                        common_prefix(&self.idle[i].cached, &prompt),
                        std::cmp::Reverse(self.idle[i].cached.len()),
                    )
                })
                .expect("idle is not empty");
            if !self.make_room(pick, reserved) {
                // Wait for running sequences to finish and free the cache.
                break;
            }
            let job = self.pending.pop_front().expect("front exists");
            self.start(job, prompt, pick, max_tokens, reserved);
        }
    }

    /// Other idle caches than `pick` give their cells back, least useful
    /// first, until `reserved` more cells fit. False if they do not fit
    /// while other sequences run (a request alone gets the cache anyway).
    fn make_room(&mut self, pick: usize, reserved: u32) -> bool {
        let held_by_others = |idle: &[IdleSeq]| -> u32 {
            idle.iter()
                .enumerate()
                .filter(|(i, _)| *i != pick)
                .map(|(_, s)| s.cached.len() as u32)
                .sum()
        };
        while self.reserved_cells + reserved + held_by_others(&self.idle) > self.n_ctx {
            let Some(victim) = (0..self.idle.len())
                .filter(|&i| i != pick && !self.idle[i].cached.is_empty())
                .min_by_key(|&i| self.idle[i].cached.len())
            else {
                break;
            };
            let _ = self
                .ctx
                .clear_kv_cache_seq(Some(self.idle[victim].seq as u32), None, None);
            self.idle[victim].cached.clear();
        }
        self.reserved_cells + reserved + held_by_others(&self.idle) <= self.n_ctx
            || self.slots.is_empty()
    }

    /// Starts `job` in the idle sequence `pick` (or answers it with the
    /// error of a grammar llama.cpp cannot parse).
    fn start(
        &mut self,
        job: Job,
        prompt: Vec<LlamaToken>,
        pick: usize,
        max_tokens: u32,
        reserved: u32,
    ) {
        let temperature = job
            .request
            .temperature
            .unwrap_or(self.options.default_temperature);
        // Each slot has a sampler of its own: a grammar's state is per sequence.
        let sampler = match sampler(
            self.model,
            &self.options,
            temperature,
            job.request.grammar.as_deref(),
        ) {
            Ok(sampler) => sampler,
            Err(e) => {
                let _ = job.reply.send(Err(e));
                return;
            }
        };
        let admitted = Instant::now();
        let IdleSeq { seq, cached } = self.idle.swap_remove(pick);
        // Keep the shared prefix, drop the rest of the old request. The
        // last prompt token is always decoded again: its logits start
        // the answer.
        let reused = common_prefix(&cached, &prompt).min(prompt.len() - 1);
        let trimmed = self
            .ctx
            .clear_kv_cache_seq(Some(seq as u32), Some(reused as u32), None)
            .unwrap_or(false);
        let reused = if trimmed {
            reused
        } else {
            let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
            0
        };
        let Reuse {
            reused,
            disk,
            save_prefix,
        } = self.reuse_prefix_state(seq, &job.request.turns, &prompt, reused);
        self.reserved_cells += reserved;
        self.slots.push(Slot {
            seq,
            sampler,
            admitted,
            first_token: None,
            prompt,
            fed: reused,
            reused,
            disk,
            save_prefix,
            fed_output: Vec::new(),
            streamed: StreamCursor::default(),
            next: None,
            logits_at: None,
            output: Vec::new(),
            output_tokens: 0,
            max_tokens,
            reserved,
            job,
        });
    }

    /// A fixed prefix (the system turn) longer than the `reused` tokens
    /// sequence `seq` holds: restore it from disk, or plan to save it once
    /// it is decoded.
    fn reuse_prefix_state(
        &mut self,
        seq: i32,
        turns: &[Turn],
        prompt: &[LlamaToken],
        mut reused: usize,
    ) -> Reuse {
        let mut disk = 0;
        let mut save_prefix = None;
        if let Some(states) = &mut self.prefix_states
            && let Some(prefix_len) = fixed_prefix(self.model, &self.template, turns, prompt)
            && reused < prefix_len
        {
            let prefix = &prompt[..prefix_len];
            let ids: Vec<i32> = prefix.iter().map(|t| t.0).collect();
            let name = prefix_state::file_name(&states.identity, &ids);
            let file = states.dir.join(&name);
            match restore_prefix(&mut self.ctx, seq, &file, prefix) {
                Restore::Done => {
                    reused = prefix_len;
                    disk = prefix_len;
                }
                Restore::Absent => {}
                Restore::Failed { clobbered } => {
                    // A bad file is replaced by the state decoded now.
                    let _ = std::fs::remove_file(&file);
                    if clobbered {
                        let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
                        reused = 0;
                    }
                }
            }
            if disk == 0 && states.log.first_attempt(&name) {
                save_prefix = Some((prefix_len, file));
            }
        }
        Reuse {
            reused,
            disk,
            save_prefix,
        }
    }

    /// Fills the batch of one decode step: a token for every generating
    /// sequence, then prompt chunks in admission order.
    fn fill_batch(&mut self) {
        let batch = &mut self.batch;
        batch.clear();
        let capacity = self.options.batch_tokens as usize;
        for slot in &mut self.slots {
            slot.logits_at = None;
            if let Some(token) = slot.next {
                let pos = (slot.prompt.len() as u32 + slot.output_tokens - 1) as i32;
                slot.logits_at = Some(batch.n_tokens());
                batch
                    .add(token, pos, &[slot.seq], true)
                    .expect("the batch holds a token per sequence");
                slot.fed_output.push(token);
            }
        }
        for slot in &mut self.slots {
            if slot.fed == slot.prompt.len() {
                continue;
            }
            let room = capacity - batch.n_tokens() as usize;
            if room == 0 {
                break;
            }
            // A prefix to save ends its chunk: after this step the sequence
            // holds exactly the prefix.
            let limit = match &slot.save_prefix {
                Some((n, _)) if slot.fed < *n => *n,
                _ => slot.prompt.len(),
            };
            let end = (slot.fed + room).min(limit);
            for i in slot.fed..end {
                let last = i + 1 == slot.prompt.len();
                if last {
                    slot.logits_at = Some(batch.n_tokens());
                }
                batch
                    .add(slot.prompt[i], i as i32, &[slot.seq], last)
                    .expect("room was checked");
            }
            slot.fed = end;
        }
    }

    /// Nothing in a failed step can be trusted: fails every request in it.
    fn fail_all(&mut self, error: &llama_cpp_2::DecodeError) {
        for slot in self.slots.drain(..) {
            let _ = self
                .ctx
                .clear_kv_cache_seq(Some(slot.seq as u32), None, None);
            self.idle.push(IdleSeq {
                seq: slot.seq,
                cached: Vec::new(),
            });
            let _ = slot.job.reply.send(Err(LocalError::Inference(format!(
                "llama.cpp decode failed: {error}"
            ))));
        }
        self.reserved_cells = 0;
    }

    /// Writes the state of the sequences that now hold exactly their prefix.
    fn save_prefixes(&mut self) {
        if let Some(states) = &mut self.prefix_states {
            for slot in &mut self.slots {
                if let Some((n, file)) = slot.save_prefix.take_if(|(n, _)| *n == slot.fed) {
                    save_prefix(&self.ctx, slot.seq, &slot.prompt[..n], &file, states);
                }
            }
        }
    }

    /// Samples a token for every slot whose logits the step computed and
    /// streams the new text; returns the slots (index, why) that are done.
    fn sample(&mut self) -> Vec<(usize, Finish)> {
        let vocab = self.model.vocab();
        let mut finished = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let Some(at) = slot.logits_at else { continue };
            let token = slot.sampler.sample(&self.ctx, at);
            let now = Instant::now();
            slot.first_token.get_or_insert(now);
            let outcome = if vocab.is_eog(token) {
                Outcome::Done(Finish::Stop)
            } else {
                slot.output_tokens += 1;
                slot.output
                    .extend_from_slice(&vocab.token_to_piece(token, false, None));
                if cut_at_stop(&mut slot.output, &slot.job.request.stop) {
                    Outcome::Done(Finish::Stop)
                } else if slot.output_tokens >= slot.max_tokens {
                    Outcome::Done(Finish::Length)
                } else {
                    slot.next = Some(token);
                    Outcome::Continue
                }
            };
            // A withdrawn request's last token goes nowhere.
            if let Some(sink) = &slot.job.request.on_text
                && !slot.job.reply.is_closed()
            {
                let text = match outcome {
                    Outcome::Continue => {
                        slot.streamed.advance(&slot.output, &slot.job.request.stop)
                    }
                    Outcome::Done(_) => slot.streamed.finish(&slot.output),
                };
                if let Some(text) = text {
                    sink.send(&text);
                }
            }
            if let Outcome::Done(finish) = outcome {
                finished.push((index, finish));
            }
        }
        finished
    }

    /// Answers the `finished` slots (in ascending index order) and returns
    /// their sequences to the idle ones.
    fn finish(&mut self, finished: Vec<(usize, Finish)>) {
        for (index, finish) in finished.into_iter().rev() {
            let mut slot = self.slots.swap_remove(index);
            // The cache now holds the prompt and every generated token that
            // was fed back; the sequence keeps them for the next request.
            let mut cached = std::mem::take(&mut slot.prompt);
            let prompt_tokens = cached.len() as u32;
            cached.extend_from_slice(&slot.fed_output);
            self.idle.push(IdleSeq {
                seq: slot.seq,
                cached,
            });
            self.reserved_cells -= slot.reserved;
            let first = slot.first_token.unwrap_or(slot.admitted);
            let generation = Generation {
                text: String::from_utf8_lossy(&slot.output).into_owned(),
                prompt_tokens,
                cached_prompt_tokens: slot.reused as u32,
                disk_prompt_tokens: slot.disk as u32,
                output_tokens: slot.output_tokens,
                finish,
                queued: slot.admitted.duration_since(slot.job.submitted),
                prompt_time: first.duration_since(slot.admitted),
                generation_time: first.elapsed(),
            };
            let _ = slot.job.reply.send(Ok(generation));
        }
    }
}

/// The prefix states on disk of the worker's model.
struct PrefixStates {
    dir: PathBuf,
    /// [`prefix_state::model_identity`] of the model file.
    identity: Vec<u8>,
    log: SaveLog,
}

/// The length of the prompt's fixed prefix worth keeping on disk: the
/// tokens the prompt shares with its first turn alone when that is the
/// system turn (the RLM loop's system prompt does not contain the
/// question). `None` when there is no system turn, the shared part is
/// shorter than [`prefix_state::MIN_PREFIX_TOKENS`], or it is the whole
/// prompt (the last prompt token is always decoded: its logits start the
/// answer).
fn fixed_prefix(
    model: &LlamaModel,
    template: &LlamaChatTemplate,
    turns: &[Turn],
    prompt: &[LlamaToken],
) -> Option<usize> {
    let first = turns.first().filter(|t| t.role == "system")?;
    let message =
        LlamaChatMessage::new(first.role.clone(), first.content.replace('\0', "")).ok()?;
    let text = model
        .apply_chat_template(template, &[message], false)
        .ok()?;
    let tokens = model.vocab().tokenize(text.as_bytes(), true, true);
    let n = common_prefix(&tokens, prompt);
    (n >= prefix_state::MIN_PREFIX_TOKENS && n < prompt.len()).then_some(n)
}

enum Restore {
    /// The sequence holds the prefix.
    Done,
    /// No state file.
    Absent,
    /// A file that is damaged, incompatible or of other tokens; `clobbered`
    /// if llama.cpp got to change the sequence before giving up.
    Failed { clobbered: bool },
}

/// Loads the state file of `prefix` into sequence `seq`, after checking
/// its trailer, and checks that the sequence then holds exactly `prefix`.
fn restore_prefix(
    ctx: &mut LlamaContext<'_>,
    seq: i32,
    file: &Path,
    prefix: &[LlamaToken],
) -> Restore {
    match prefix_state::check(file) {
        Ok(None) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Restore::Absent,
        Ok(Some(_)) | Err(_) => return Restore::Failed { clobbered: false },
    }
    let loaded = ctx.state_seq_load_file(file, seq, prefix.len());
    let whole = matches!(&loaded, Ok((tokens, _)) if tokens.as_slice() == prefix)
        && ctx.kv_cache_seq_pos_min(seq) == 0
        && ctx.kv_cache_seq_pos_max(seq) == prefix.len() as i32 - 1;
    if whole {
        prefix_state::touch(file);
        Restore::Done
    } else {
        Restore::Failed { clobbered: true }
    }
}

/// Writes the state of sequence `seq`, which holds exactly `prefix`, to
/// `file` (through a temporary file, renamed into place). Failures are said
/// once on stderr and otherwise ignored: the cache only saves time.
fn save_prefix(
    ctx: &LlamaContext<'_>,
    seq: i32,
    prefix: &[LlamaToken],
    file: &Path,
    states: &mut PrefixStates,
) {
    if file.exists() {
        return; // another process was quicker
    }
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = prefix_state::temp_path(&states.dir, &name);
    let saved = std::fs::create_dir_all(&states.dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            ctx.state_seq_save_file(&temp, seq, prefix)
                .map_err(|e| format!("llama.cpp: {e}"))
        })
        .and_then(|_| prefix_state::commit(&temp, file).map_err(|e| e.to_string()));
    if let Err(detail) = saved {
        let _ = std::fs::remove_file(&temp);
        states.log.warn(&states.dir, &detail);
    }
}

/// The conversation through the model's chat template, tokenized.
fn render_prompt(
    model: &LlamaModel,
    template: &LlamaChatTemplate,
    turns: &[Turn],
) -> Result<Vec<LlamaToken>, LocalError> {
    let messages = turns
        .iter()
        .map(|t| {
            // C strings: a NUL inside a message would end it early.
            LlamaChatMessage::new(t.role.clone(), t.content.replace('\0', ""))
                .map_err(|e| LocalError::Inference(format!("bad message: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let text = model
        .apply_chat_template(template, &messages, true)
        .map_err(|e| LocalError::Inference(format!("cannot apply the chat template: {e}")))?;
    let tokens = model.vocab().tokenize(text.as_bytes(), true, true);
    if tokens.is_empty() {
        return Err(LocalError::Inference("the prompt is empty".into()));
    }
    Ok(tokens)
}

/// The sampler chain of one request. A grammar goes first: every later
/// step then chooses among the tokens it admits (a token it rejects never
/// reaches top-k), and llama.cpp advances it with each sampled token.
fn sampler(
    model: &LlamaModel,
    options: &LocalModelOptions,
    temperature: f32,
    grammar: Option<&str>,
) -> Result<LlamaSampler, LocalError> {
    let mut chain = Vec::new();
    if let Some(grammar) = grammar {
        chain.push(
            LlamaSampler::grammar(model, grammar, "root")
                .map_err(|e| LocalError::Grammar(e.to_string()))?,
        );
    }
    chain.push(LlamaSampler::penalties(
        model.n_vocab(),
        options.repeat_last_n,
        options.repeat_penalty,
        0.0,
        0.0,
    ));
    if temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
    } else {
        chain.extend([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::temp(temperature),
            LlamaSampler::dist(options.seed),
        ]);
    }
    Ok(LlamaSampler::chain_simple(chain))
}

/// Truncates `output` before the first stop string it contains; true if one
/// was found.
fn cut_at_stop(output: &mut Vec<u8>, stops: &[String]) -> bool {
    let cut = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| output.windows(s.len()).position(|w| w == s.as_bytes()))
        .min();
    match cut {
        Some(at) => {
            output.truncate(at);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_cut_the_output_at_the_earliest_match() {
        let mut out = b"answer\nFINAL(x)\n```".to_vec();
        assert!(cut_at_stop(&mut out, &["```".into(), "\nFINAL".into()]));
        assert_eq!(out, b"answer");
        let mut out = b"no stop here".to_vec();
        assert!(!cut_at_stop(&mut out, &["".into(), "zzz".into()]));
        assert_eq!(out, b"no stop here");
    }

    #[test]
    fn options_from_env_validate_ranges() {
        let o = LocalModelOptions::from_env_with(|n| match n {
            "RLM_LOCAL_CONTEXT" => Some("32768".into()),
            "RLM_LOCAL_PARALLEL" => Some("2".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!((o.context_tokens, o.parallel), (32768, 2));
        let err = LocalModelOptions::from_env_with(|n| {
            (n == "RLM_LOCAL_PARALLEL").then(|| "0".to_string())
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("RLM_LOCAL_PARALLEL=\"0\" is not a whole number from 1 to 64"),
            "{err}"
        );
        let err = LocalModelOptions::from_env_with(|n| {
            (n == "RLM_LOCAL_CONTEXT").then(|| "lots".to_string())
        })
        .unwrap_err();
        assert!(err.to_string().contains("RLM_LOCAL_CONTEXT"), "{err}");
    }

    #[test]
    fn the_prefix_cache_is_a_directory_or_off_default_in_the_models_dir() {
        let cache = |value: Option<&'static str>| {
            LocalModelOptions::from_env_with(move |n| match n {
                "RLM_LOCAL_PREFIX_CACHE" => value.map(String::from),
                "RLM_MODELS_DIR" => Some("/models".into()),
                _ => None,
            })
            .unwrap()
            .prefix_cache
        };
        assert_eq!(cache(None), Some(PathBuf::from("/models/prefix-state")));
        assert_eq!(cache(Some("")), Some(PathBuf::from("/models/prefix-state")));
        assert_eq!(
            cache(Some("  ")),
            Some(PathBuf::from("/models/prefix-state"))
        );
        assert_eq!(cache(Some("off")), None);
        assert_eq!(cache(Some("Off")), None);
        assert_eq!(cache(Some("/var/rlm")), Some(PathBuf::from("/var/rlm")));
        assert_eq!(cache(Some("./off")), Some(PathBuf::from("./off")));
        assert_eq!(LocalModelOptions::default().prefix_cache, None);
    }
}
