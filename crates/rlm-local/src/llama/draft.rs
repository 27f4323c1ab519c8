//! Speculative decoding's proposer: a small model of the same family (the
//! same vocabulary) guesses the next few tokens of the one sequence being
//! generated, and the model checks all of them in one batch
//! (`Batcher::speculate`). The model samples every position with its own
//! sampler, in order, and keeps the guesses only while they agree with what
//! it sampled, so the text is what it would have written without them; only
//! the number of decode steps changes.
//!
//! The proposer reads a window of the recent history (the last
//! [`DRAFT_WINDOW`] tokens when it starts over), not the whole prompt:
//! guesses only need the local context, and decoding a 2,000-token system
//! prompt a second time would cost more than the guesses save.

use std::num::NonZeroU32;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::prefix::common_prefix;
use crate::LocalError;

/// History tokens the proposer reads when it starts over.
pub(super) const DRAFT_WINDOW: usize = 384;

/// The proposer's cache size in tokens: its window plus a long answer.
const DRAFT_CONTEXT: u32 = 4096;

/// The draft model's context and what its cache holds.
pub(super) struct Drafter<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    sampler: LlamaSampler,
    /// Where in the history the cache starts (history index of position 0).
    window_start: usize,
    /// The tokens in the cache, from `window_start` on.
    cached: Vec<LlamaToken>,
    /// Batch size of one decode.
    batch_tokens: usize,
}

impl<'m> Drafter<'m> {
    /// A proposer over `model`; its vocabulary must be `target`'s.
    pub(super) fn new(
        backend: &LlamaBackend,
        model: &'m LlamaModel,
        target: &LlamaModel,
        threads: i32,
        batch_tokens: u32,
    ) -> Result<Self, LocalError> {
        if model.n_vocab() != target.n_vocab() {
            return Err(LocalError::Config(format!(
                "the draft model's vocabulary ({} tokens) is not the model's ({}): a draft must be of the same family",
                model.n_vocab(),
                target.n_vocab()
            )));
        }
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(DRAFT_CONTEXT))
            .with_n_batch(batch_tokens)
            .with_n_ubatch(batch_tokens)
            .with_n_seq_max(1)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| LocalError::Inference(format!("cannot create the draft context: {e}")))?;
        Ok(Drafter {
            model,
            ctx,
            batch: LlamaBatch::new(batch_tokens as usize, 1),
            sampler: LlamaSampler::greedy(),
            window_start: 0,
            cached: Vec::new(),
            batch_tokens: batch_tokens as usize,
        })
    }

    /// Up to `k` tokens the draft model expects after `history` (whose
    /// last token is the one about to be checked). Fewer when it expects
    /// the end of the text.
    pub(super) fn propose(
        &mut self,
        history: &[LlamaToken],
        k: usize,
    ) -> Result<Vec<LlamaToken>, LocalError> {
        let mut logits_at = self.sync(history)?;
        let vocab = self.model.vocab();
        let mut proposals = Vec::with_capacity(k);
        while proposals.len() < k {
            let token = self.sampler.sample(&self.ctx, logits_at);
            proposals.push(token);
            if vocab.is_eog(token) || proposals.len() == k {
                break;
            }
            self.batch.clear();
            self.batch
                .add(token, self.cached.len() as i32, &[0], true)
                .map_err(batch_error)?;
            self.decode()?;
            self.cached.push(token);
            logits_at = 0;
        }
        Ok(proposals)
    }

    /// Brings the cache to `history[window_start..]`, keeping what it
    /// shares and starting over on the last [`DRAFT_WINDOW`] tokens when it
    /// shares too little; returns the batch index of the last token's
    /// logits.
    fn sync(&mut self, history: &[LlamaToken]) -> Result<i32, LocalError> {
        let shared = history
            .get(self.window_start..)
            .map_or(0, |h| common_prefix(&self.cached, h));
        let missing = history.len().saturating_sub(self.window_start + shared);
        // Always decode at least the last token: its logits start the guess.
        let keep = if shared > 0 && missing > 0 && missing <= DRAFT_WINDOW {
            shared
        } else if shared > 0 && missing == 0 {
            shared - 1
        } else {
            self.window_start = history.len().saturating_sub(DRAFT_WINDOW);
            0
        };
        let room = DRAFT_CONTEXT as usize - DRAFT_WINDOW;
        let (keep, start) = if history.len() - self.window_start > room {
            self.window_start = history.len().saturating_sub(DRAFT_WINDOW);
            (0, self.window_start)
        } else {
            (keep, self.window_start + keep)
        };
        self.ctx
            .clear_kv_cache_seq(Some(0), Some(keep as u32), None)
            .map_err(|e| LocalError::Inference(format!("draft cache: {e}")))?;
        self.cached.truncate(keep);
        let mut last = 0;
        for chunk in history[start..].chunks(self.batch_tokens) {
            self.batch.clear();
            for (i, &token) in chunk.iter().enumerate() {
                let is_last = self.cached.len() + 1 == history.len() - self.window_start;
                self.batch
                    .add(token, self.cached.len() as i32, &[0], is_last)
                    .map_err(batch_error)?;
                if is_last {
                    last = i as i32;
                }
                self.cached.push(token);
            }
            self.decode()?;
        }
        Ok(last)
    }

    fn decode(&mut self) -> Result<(), LocalError> {
        self.ctx
            .decode(&mut self.batch)
            .map_err(|e| LocalError::Inference(format!("draft decode failed: {e}")))
    }
}

fn batch_error(e: llama_cpp_2::llama_batch::BatchAddError) -> LocalError {
    LocalError::Inference(format!("draft batch: {e}"))
}
