//! Local token counting (tiktoken) for providers that report no usage and for
//! the context-window pre-check.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::types::Message;

/// Tokens a chat format adds around each message (role markers, separators).
const PER_MESSAGE_OVERHEAD: u64 = 4;
/// Tokens that prime the assistant's reply.
const REPLY_PRIMING: u64 = 3;

fn o200k() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

fn cl100k() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
}

/// The encoding used to estimate `model`'s tokens: o200k for the GPT-4o
/// generation and later, cl100k (a fair approximation) for everything else.
fn encoding_for(model: &str) -> Option<&'static CoreBPE> {
    let newer = ["gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o"];
    if newer.iter().any(|p| model.starts_with(p)) {
        o200k()
    } else {
        cl100k()
    }
}

/// Tokens of `text` under `model`'s encoding. Falls back to one token per
/// four bytes if the tokenizer data cannot be loaded.
pub fn count_text(model: &str, text: &str) -> u64 {
    match encoding_for(model) {
        Some(bpe) => bpe.encode_ordinary(text).len() as u64,
        None => (text.len() as u64).div_ceil(4),
    }
}

/// Estimated prompt tokens of a transcript, including the chat format's
/// per-message overhead.
pub fn count_messages(model: &str, messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| PER_MESSAGE_OVERHEAD + count_text(model, &m.content))
        .sum::<u64>()
        + REPLY_PRIMING
}

/// An upper bound on [`count_messages`] that costs nothing: a BPE token
/// always covers at least one byte.
pub fn upper_bound_messages(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| PER_MESSAGE_OVERHEAD + m.content.len() as u64)
        .sum::<u64>()
        + REPLY_PRIMING
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plausible_and_bounded_by_bytes() {
        let text = "The quick brown fox jumps over the lazy dog.";
        let n = count_text("gpt-4o", text);
        assert!((8..=12).contains(&n), "{n}");
        let msgs = vec![Message::user(text)];
        assert!(count_messages("qwen", &msgs) <= upper_bound_messages(&msgs));
    }
}
