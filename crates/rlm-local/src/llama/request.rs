//! What a request to the local model is, and the model's settings.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::LocalError;
use crate::prefix_state::{self};
use crate::stream::TextSink;

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
    /// A draft model of the same family for speculative decoding
    /// (`RLM_LOCAL_DRAFT`): it proposes [`LocalModelOptions::draft_tokens`]
    /// tokens that the model checks in one batch, whenever one request is
    /// generating alone. The text is the same as without it. `None` (the
    /// [`Default`]): no draft.
    pub draft: Option<PathBuf>,
    /// Tokens the draft proposes per check (`RLM_LOCAL_DRAFT_TOKENS`,
    /// default 2). On a CPU, llama.cpp multiplies batches of four or more
    /// rows with another kernel than one row, which rounds differently: with
    /// more than 2 proposals (a check of 4+ tokens) a near tie between two
    /// tokens can come out the other way than in plain decoding.
    pub draft_tokens: u32,
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
            draft: None,
            draft_tokens: 2,
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
        if let Some(v) = r.whole(&table::LOCAL_DRAFT_TOKENS).map_err(config)? {
            o.draft_tokens = v;
        }
        let models_dir = crate::cache::models_dir_with_env(|n| env(n).map(Into::into)).ok();
        o.draft = crate::draft_choice::draft_from_setting(
            r.text(&table::LOCAL_DRAFT).as_deref(),
            models_dir.as_deref(),
            o.threads,
        );
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
    /// Tokens the draft model proposed (speculative decoding; 0 without a
    /// draft, or when other requests were generating at the same time).
    pub draft_proposed: u32,
    /// Of [`Generation::draft_proposed`], those the model kept.
    pub draft_accepted: u32,
}

pub(super) struct Job {
    pub(super) request: GenerateRequest,
    pub(super) submitted: Instant,
    pub(super) reply: oneshot::Sender<Result<Generation, LocalError>>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
