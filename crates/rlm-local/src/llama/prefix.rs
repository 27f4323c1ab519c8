//! The fixed prompt prefix (the system turn) saved to and restored from
//! disk between processes.

use std::path::{Path, PathBuf};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

use super::request::*;
use crate::prefix_state::{self, SaveLog};

/// The prefix states on disk of the worker's model.
pub(super) struct PrefixStates {
    pub(super) dir: PathBuf,
    /// [`prefix_state::model_identity`] of the model file.
    pub(super) identity: Vec<u8>,
    pub(super) log: SaveLog,
}

/// The length of the prompt's fixed prefix worth keeping on disk: the
/// tokens the prompt shares with its first turn alone when that is the
/// system turn (the RLM loop's system prompt does not contain the
/// question). `None` when there is no system turn, the shared part is
/// shorter than [`prefix_state::MIN_PREFIX_TOKENS`], or it is the whole
/// prompt (the last prompt token is always decoded: its logits start the
/// answer).
pub(super) fn fixed_prefix(
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

pub(super) enum Restore {
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
pub(super) fn restore_prefix(
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
pub(super) fn save_prefix(
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

pub(super) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
