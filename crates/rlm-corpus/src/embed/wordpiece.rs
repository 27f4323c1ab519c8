//! BERT's uncased WordPiece tokenizer, as Hugging Face `tokenizers` runs it for
//! all-MiniLM-L6-v2: `BertNormalizer` (clean text, pad CJK ideographs, strip
//! accents, lowercase), `BertPreTokenizer` (split on whitespace and around each
//! punctuation character), then greedy longest-match WordPiece with `##`
//! continuations. Written here rather than pulling the `tokenizers` crate,
//! whose regex and training machinery this one model does not need.

use std::collections::HashMap;
use std::path::Path;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

use super::EmbedError;

/// Words longer than this many characters become `[UNK]`, like the reference.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary with the special tokens BERT needs.
#[derive(Debug, Clone)]
pub struct WordPieceTokenizer {
    vocab: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
}

impl WordPieceTokenizer {
    /// Reads `vocab.txt` (one token per line; the line number is the id).
    pub fn from_vocab_file(path: &Path) -> Result<WordPieceTokenizer, EmbedError> {
        let text = std::fs::read_to_string(path).map_err(|e| EmbedError::BadModel {
            path: path.display().to_string(),
            detail: format!("cannot read the vocabulary: {e}"),
        })?;
        Self::from_vocab(text.lines()).map_err(|e| EmbedError::BadModel {
            path: path.display().to_string(),
            detail: e.to_string(),
        })
    }

    /// Builds a tokenizer from vocabulary lines in id order; one without
    /// `[CLS]`, `[SEP]` or `[UNK]` is [`EmbedError::MissingToken`].
    pub fn from_vocab<'a>(lines: impl Iterator<Item = &'a str>) -> Result<Self, EmbedError> {
        let vocab: HashMap<String, u32> = lines
            .enumerate()
            .map(|(i, t)| (t.trim_end_matches('\r').to_string(), i as u32))
            .collect();
        let special = |name: &str| {
            vocab
                .get(name)
                .copied()
                .ok_or_else(|| EmbedError::MissingToken(name.to_string()))
        };
        Ok(WordPieceTokenizer {
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            unk: special("[UNK]")?,
            vocab,
        })
    }

    /// Token ids of `text` framed by `[CLS]` … `[SEP]`, at most `max_tokens`
    /// long in all (the tail is cut, as sentence-transformers truncates).
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let budget = max_tokens.saturating_sub(2);
        let mut ids = Vec::with_capacity(budget.min(text.len() / 3 + 2) + 2);
        ids.push(self.cls);
        let normalized = normalize(text);
        'words: for word in pre_tokenize(&normalized) {
            for id in self.word_pieces(word) {
                if ids.len() > budget {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    fn word_pieces(&self, word: &str) -> Vec<u32> {
        if word.chars().count() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut candidate = String::with_capacity(word.len() + 2);
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                candidate.push_str(&word[start..end]);
                if let Some(&id) = self.vocab.get(candidate.as_str()) {
                    found = Some(id);
                    break;
                }
                // Step back one character, not one byte.
                end = word[..end]
                    .char_indices()
                    .next_back()
                    .map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    pieces.push(id);
                    start = end;
                }
                None => return vec![self.unk],
            }
        }
        pieces
    }
}

/// `BertNormalizer` with clean_text, handle_chinese_chars, strip_accents and lowercase on.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if c.is_whitespace() {
            cleaned.push(' ');
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    let stripped: String = cleaned
        .nfd()
        .filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark)
        .collect();
    stripped.to_lowercase()
}

/// Whitespace splits and disappears; each punctuation character is a word of its own.
fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                words.push(&text[s..i]);
            }
        } else if is_punctuation(c) {
            if let Some(s) = start.take() {
                words.push(&text[s..i]);
            }
            words.push(&text[i..i + c.len_utf8()]);
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words.into_iter()
}

fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Unassigned
            | GeneralCategory::PrivateUse
    )
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            get_general_category(c),
            GeneralCategory::ConnectorPunctuation
                | GeneralCategory::DashPunctuation
                | GeneralCategory::OpenPunctuation
                | GeneralCategory::ClosePunctuation
                | GeneralCategory::InitialPunctuation
                | GeneralCategory::FinalPunctuation
                | GeneralCategory::OtherPunctuation
        )
}

/// The CJK Unified Ideograph blocks BERT pads with spaces.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPieceTokenizer {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncafe\nplay\n##ing\n,\n!\n北";
        WordPieceTokenizer::from_vocab(vocab.lines()).unwrap()
    }

    #[test]
    fn splits_accents_punctuation_and_pieces() {
        let t = tiny();
        // [CLS] the cafe , play ##ing ! 北 [UNK] [SEP]
        assert_eq!(
            t.encode("The  Café,playing!北京", 64),
            vec![2, 4, 5, 8, 6, 7, 9, 10, 1, 3]
        );
    }

    #[test]
    fn unknown_word_is_one_unk_and_truncation_keeps_sep() {
        let t = tiny();
        assert_eq!(t.encode("xyzzy the", 64), vec![2, 1, 4, 3]);
        assert_eq!(t.encode("the the the the", 4), vec![2, 4, 4, 3]);
        assert_eq!(t.encode("", 8), vec![2, 3]);
    }

    #[test]
    fn missing_special_token_is_an_error() {
        let err = WordPieceTokenizer::from_vocab("[PAD]\n[UNK]\n".lines()).unwrap_err();
        assert!(matches!(&err, EmbedError::MissingToken(t) if t == "[CLS]"));
        assert_eq!(err.to_string(), "the vocabulary has no [CLS] token");
    }
}
