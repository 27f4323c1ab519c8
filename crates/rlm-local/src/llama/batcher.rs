//! The worker thread: continuous batching of the admitted requests over
//! parallel sequences of one unified KV cache, with prompt-prefix reuse.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::draft::Drafter;
use super::prefix::*;
use super::prompt::*;
use super::request::*;
use crate::LocalError;
use crate::prefix_state::{self, SaveLog};
use crate::stream::StreamCursor;

/// A request being decoded in one sequence of the shared cache.
pub(super) struct Slot {
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
    /// Tokens the draft model proposed for this request, and those kept.
    draft_proposed: u32,
    draft_accepted: u32,
}

impl Slot {
    /// Takes `token`, sampled for this request: appends its text (or ends
    /// at the end of the turn, a stop string or the output cap), streams
    /// what is new, and keeps it as the next token to decode.
    fn take(&mut self, token: LlamaToken, vocab: &llama_cpp_2::vocab::LlamaVocab<'_>) -> Outcome {
        self.first_token.get_or_insert_with(Instant::now);
        let outcome = if vocab.is_eog(token) {
            Outcome::Done(Finish::Stop)
        } else {
            self.output_tokens += 1;
            self.output
                .extend_from_slice(&vocab.token_to_piece(token, false, None));
            if cut_at_stop(&mut self.output, &self.job.request.stop) {
                Outcome::Done(Finish::Stop)
            } else if self.output_tokens >= self.max_tokens {
                Outcome::Done(Finish::Length)
            } else {
                self.next = Some(token);
                Outcome::Continue
            }
        };
        // A withdrawn request's last token goes nowhere.
        if let Some(sink) = &self.job.request.on_text
            && !self.job.reply.is_closed()
        {
            let text = match outcome {
                Outcome::Continue => self.streamed.advance(&self.output, &self.job.request.stop),
                Outcome::Done(_) => self.streamed.finish(&self.output),
            };
            if let Some(text) = text {
                sink.send(&text);
            }
        }
        outcome
    }
}

/// A sequence between requests. Its cache keeps the tokens of the last
/// request it served, so the next turn of the same conversation (whose prompt
/// starts with that one) decodes only what is new — multi-turn loops resend
/// a long shared prefix every turn.
pub(super) struct IdleSeq {
    seq: i32,
    cached: Vec<LlamaToken>,
}

pub(super) enum Outcome {
    Continue,
    Done(Finish),
}

/// The inference thread: loads the model, says on `ready` whether it did
/// (and the context size it got), then serves `inbox` until every handle is
/// dropped and the requests in flight are answered.
pub(super) fn worker(
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
    let draft_model = match &options.draft {
        Some(draft) => {
            match LlamaModel::load_from_file(backend, draft, &LlamaModelParams::default()) {
                Ok(m) => Some(m),
                Err(e) => {
                    let _ = ready.send(Err(LocalError::Load {
                        path: draft.clone(),
                        detail: format!("the draft model (RLM_LOCAL_DRAFT): {e}"),
                    }));
                    return;
                }
            }
        }
        None => None,
    };
    let mut batcher = match Batcher::new(backend, &model, draft_model.as_ref(), path, options) {
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
pub(super) struct Batcher<'m> {
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
    /// Speculative decoding's proposer, when a draft model is loaded.
    draft: Option<Drafter<'m>>,
}

/// What of a new request's prompt its sequence already holds.
pub(super) struct Reuse {
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
        draft_model: Option<&'m LlamaModel>,
        path: &Path,
        options: LocalModelOptions,
    ) -> Result<Self, LocalError> {
        let draft = match draft_model {
            Some(d) => Some(Drafter::new(
                backend,
                d,
                model,
                options.threads,
                options.batch_tokens,
            )?),
            None => None,
        };
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
            draft,
            options,
        })
    }

    /// Decode steps until the inbox is closed and nothing is left to answer.
    fn run(&mut self, inbox: &mpsc::Receiver<Job>) {
        while self.receive(inbox) {
            self.drop_withdrawn();
            self.admit();
            if self.slots.is_empty() || self.speculate() {
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
            draft_proposed: 0,
            draft_accepted: 0,
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
            if let Outcome::Done(finish) = slot.take(token, &vocab) {
                finished.push((index, finish));
            }
        }
        finished
    }

    /// One step of speculative decoding, when a draft model is loaded and
    /// one request is generating alone: the draft proposes a few tokens, one
    /// batch decodes the pending token and the proposals, and the slot's
    /// own sampler samples each position in order, keeping proposals while
    /// they are what it sampled. The text is what plain decoding writes;
    /// the cache keeps only the tokens kept. False when it did not apply.
    fn speculate(&mut self) -> bool {
        let (Some(drafter), [slot]) = (self.draft.as_mut(), self.slots.as_mut_slice()) else {
            return false;
        };
        let Some(next) = slot.next.filter(|_| slot.fed == slot.prompt.len()) else {
            return false;
        };
        let base = slot.prompt.len() + slot.output_tokens as usize - 1;
        let left = (slot.max_tokens - slot.output_tokens) as usize;
        let room = (self.n_ctx as usize).saturating_sub(base + 2);
        let k = (self.options.draft_tokens as usize).min(left).min(room);
        if k == 0 {
            return false;
        }
        let mut history = Vec::with_capacity(base + 1);
        history.extend_from_slice(&slot.prompt);
        history.extend_from_slice(&slot.fed_output);
        history.push(next);
        let proposals = match drafter.propose(&history, k) {
            Ok(p) => p,
            Err(e) => {
                // A failing draft must not fail the request: decode without it.
                eprintln!("rlm: speculative decoding turned off: {e}");
                self.draft = None;
                return false;
            }
        };
        let batch = &mut self.batch;
        batch.clear();
        for (i, &token) in std::iter::once(&next).chain(&proposals).enumerate() {
            batch
                .add(token, (base + i) as i32, &[slot.seq], true)
                .expect("the batch holds the proposals");
        }
        slot.fed_output.push(next);
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            self.fail_all(&e);
            return true;
        }
        let vocab = self.model.vocab();
        let slot = &mut self.slots[0];
        let mut kept = 0;
        let mut done = None;
        for i in 0..=proposals.len() {
            let token = slot.sampler.sample(&self.ctx, i as i32);
            if let Outcome::Done(finish) = slot.take(token, &vocab) {
                done = Some(finish);
                break;
            }
            if proposals.get(i) != Some(&token) {
                break;
            }
            kept += 1;
            slot.fed_output.push(token);
        }
        slot.draft_proposed += proposals.len() as u32;
        slot.draft_accepted += kept as u32;
        // Positions past the kept tokens hold proposals that were not kept.
        let _ = self.ctx.clear_kv_cache_seq(
            Some(slot.seq as u32),
            Some((base + 1 + kept) as u32),
            None,
        );
        if let Some(finish) = done {
            self.finish(vec![(0, finish)]);
        }
        true
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
                draft_proposed: slot.draft_proposed,
                draft_accepted: slot.draft_accepted,
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
