//! A SentencePiece Unigram tokenizer as Hugging Face `tokenizers` runs
//! XLM-RoBERTa's (the tokenizer of multilingual-e5-small):
//!
//! 1. normalization: decomposed sequences composed (NFC, as the model's
//!    NFKC-based character map does for them), then the model's per-character
//!    map (NFKC, control characters dropped, every kind of space made `' '`),
//!    then runs of spaces made one;
//! 2. metaspace: `' '` becomes `▁`, a `▁` is put before the text, and the text
//!    is split before every `▁` into words;
//! 3. per word, the Viterbi segmentation with the highest sum of piece scores;
//!    a character no piece covers becomes its UTF-8 bytes' `<0xNN>` pieces when
//!    the vocabulary has them, else `<unk>` (consecutive ones fused);
//! 4. `<s>` … `</s>` around at most `max_tokens - 2` pieces.
//!
//! Control pieces (`<s>`, `</s>`, `<pad>`, `<mask>`) are never matched in the
//! text: a document that contains the string `</s>` is just text. Written here
//! rather than pulling the `tokenizers` crate, whose regex and training
//! machinery one model does not need.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

/// SentencePiece's word-boundary marker, U+2581.
pub const METASPACE: char = '\u{2581}';
/// How far below the lowest piece score an unknown character scores, as in
/// SentencePiece (`kUnkPenalty`).
const UNKNOWN_PENALTY: f32 = 10.0;

/// What a SentencePiece Unigram model is made of.
#[derive(Debug, Clone, Default)]
pub struct UnigramVocab {
    /// Every piece with its log-probability score, in id order.
    pub pieces: Vec<(String, f32)>,
    /// Id of `<unk>`.
    pub unk_id: u32,
    /// Id of `<s>`, put before the pieces.
    pub bos_id: u32,
    /// Id of `</s>`, put after them.
    pub eos_id: u32,
    /// Ids never matched in text (`<s>`, `</s>`, `<pad>`, `<mask>`).
    pub control_ids: Vec<u32>,
    /// The normalizer's per-character replacements; an empty string drops
    /// the character.
    pub char_map: HashMap<char, String>,
}

/// A Unigram tokenizer over a [`UnigramVocab`].
#[derive(Debug, Clone)]
pub struct SentencePieceTokenizer {
    /// Matchable pieces (not the control ones or `<unk>`) to their ids.
    ids: HashMap<Box<str>, u32>,
    scores: Vec<f32>,
    pieces: Vec<Box<str>>,
    max_piece_bytes: usize,
    unk_id: u32,
    bos_id: u32,
    eos_id: u32,
    unk_score: f32,
    /// `<0x00>` … `<0xFF>`, when the vocabulary has all of them.
    byte_ids: Option<Vec<u32>>,
    char_map: HashMap<char, String>,
}

/// The best way found so far to reach one character position of a word.
#[derive(Clone, Copy)]
struct Best {
    score: f32,
    /// Char index the last piece starts at.
    from: usize,
    /// Its id, or `None` for an unknown character.
    id: Option<u32>,
}

impl SentencePieceTokenizer {
    /// Builds the tokenizer; a vocabulary whose special ids point nowhere is
    /// refused with the reason.
    pub fn new(vocab: UnigramVocab) -> Result<SentencePieceTokenizer, String> {
        let n = vocab.pieces.len();
        for (what, id) in [
            ("<unk>", vocab.unk_id),
            ("<s>", vocab.bos_id),
            ("</s>", vocab.eos_id),
        ] {
            if id as usize >= n {
                return Err(format!(
                    "the vocabulary of {n} pieces has no id {id} for {what}"
                ));
            }
        }
        // Byte pieces stand in for unknown characters when all 256 are
        // there; like the control pieces they are never matched in the text.
        let byte_names: HashMap<String, u8> =
            (0..=255u8).map(|b| (format!("<0x{b:02X}>"), b)).collect();
        let mut bytes = vec![None; 256];
        for (id, (piece, _)) in vocab.pieces.iter().enumerate() {
            if let Some(&b) = byte_names.get(piece) {
                bytes[b as usize].get_or_insert(id as u32);
            }
        }
        let byte_ids: Option<Vec<u32>> = bytes.into_iter().collect();
        let mut ids = HashMap::with_capacity(n);
        let mut max_piece_bytes = 1;
        let mut lowest = f32::INFINITY;
        for (id, (piece, score)) in vocab.pieces.iter().enumerate() {
            let id = id as u32;
            if !score.is_finite() {
                return Err(format!("piece {id} ({piece:?}) has the score {score}"));
            }
            lowest = lowest.min(*score);
            let special = id == vocab.unk_id || vocab.control_ids.contains(&id);
            let byte = byte_ids.is_some() && byte_names.contains_key(piece);
            if piece.is_empty() || special || byte {
                continue;
            }
            max_piece_bytes = max_piece_bytes.max(piece.len());
            // The first of duplicate pieces wins, as in SentencePiece.
            ids.entry(piece.as_str().into()).or_insert(id);
        }
        Ok(SentencePieceTokenizer {
            ids,
            scores: vocab.pieces.iter().map(|(_, s)| *s).collect(),
            pieces: vocab.pieces.into_iter().map(|(p, _)| p.into()).collect(),
            max_piece_bytes,
            unk_id: vocab.unk_id,
            bos_id: vocab.bos_id,
            eos_id: vocab.eos_id,
            unk_score: lowest - UNKNOWN_PENALTY,
            byte_ids,
            char_map: vocab.char_map,
        })
    }

    /// Number of pieces in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The piece of `id`, if there is one.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(|p| &**p)
    }

    /// The text as the model reads it: normalized, spaces as `▁`, with the
    /// leading `▁`.
    pub fn normalize(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 3);
        let mut after_space = false;
        let mut push = |c: char| {
            // Runs of spaces are one space (a `▁` written in the text is not
            // a space and stays).
            if c == ' ' && after_space {
                return;
            }
            after_space = c == ' ';
            if out.is_empty() && c != ' ' && c != METASPACE {
                out.push(METASPACE);
            }
            out.push(if c == ' ' { METASPACE } else { c });
        };
        let mut map = |c: char| match self.char_map.get(&c) {
            Some(replacement) => replacement.chars().for_each(&mut push),
            None => push(c),
        };
        if text.is_ascii() {
            text.chars().for_each(&mut map);
        } else {
            text.nfc().for_each(&mut map);
        }
        out
    }

    /// `<s>`, the pieces of `text` (cut so that the whole is at most
    /// `max_tokens` long, `max_tokens` ≥ 2), `</s>`.
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let budget = max_tokens.saturating_sub(2);
        let normalized = self.normalize(text);
        let mut ids = vec![self.bos_id];
        let mut word_start = 0;
        // Words start at every `▁`: no piece has one inside, so this is the
        // segmentation of the whole text, in bounded lattices.
        for (i, c) in normalized
            .char_indices()
            .chain([(normalized.len(), METASPACE)])
        {
            if c == METASPACE && i > word_start {
                // `ids` holds `<s>` and the pieces so far.
                if ids.len() > budget {
                    break;
                }
                self.encode_word(&normalized[word_start..i], &mut ids);
                word_start = i;
            }
        }
        ids.truncate(budget + 1);
        ids.push(self.eos_id);
        ids
    }

    /// Appends the best segmentation of `word` to `out`.
    fn encode_word(&self, word: &str, out: &mut Vec<u32>) {
        // Byte offset of every char, plus the end.
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(b, _)| b)
            .chain([word.len()])
            .collect();
        let chars = bounds.len() - 1;
        let unset = Best {
            score: f32::NEG_INFINITY,
            from: 0,
            id: None,
        };
        let mut best = vec![unset; chars + 1];
        best[0].score = 0.0;
        for start in 0..chars {
            let base = best[start].score;
            if base == f32::NEG_INFINITY {
                continue;
            }
            let mut single_char_piece = false;
            for end in start + 1..=chars {
                let piece = &word[bounds[start]..bounds[end]];
                if piece.len() > self.max_piece_bytes {
                    break;
                }
                let Some(&id) = self.ids.get(piece) else {
                    continue;
                };
                single_char_piece |= end == start + 1;
                let score = base + self.scores[id as usize];
                if score > best[end].score {
                    best[end] = Best {
                        score,
                        from: start,
                        id: Some(id),
                    };
                }
            }
            // Only a character no piece covers may be unknown, as in
            // SentencePiece's lattice.
            let unknown = base + self.unk_score;
            if !single_char_piece && unknown > best[start + 1].score {
                best[start + 1] = Best {
                    score: unknown,
                    from: start,
                    id: None,
                };
            }
        }
        let mut path = Vec::new();
        let mut at = chars;
        while at > 0 {
            path.push((best[at].from, at, best[at].id));
            at = best[at].from;
        }
        for (from, to, id) in path.into_iter().rev() {
            match (id, &self.byte_ids) {
                (Some(id), _) => out.push(id),
                (None, Some(bytes)) => {
                    let text = &word[bounds[from]..bounds[to]];
                    out.extend(text.bytes().map(|b| bytes[b as usize]));
                }
                // Consecutive unknown characters are one `<unk>`.
                (None, None) if out.last() == Some(&self.unk_id) => {}
                (None, None) => out.push(self.unk_id),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny XLM-R-like vocabulary: specials, then pieces with scores.
    fn vocab(pieces: &[(&str, f32)]) -> UnigramVocab {
        let mut all: Vec<(String, f32)> = ["<s>", "<pad>", "</s>", "<unk>"]
            .iter()
            .map(|p| (p.to_string(), 0.0))
            .collect();
        all.extend(pieces.iter().map(|(p, s)| (p.to_string(), *s)));
        UnigramVocab {
            pieces: all,
            unk_id: 3,
            bos_id: 0,
            eos_id: 2,
            control_ids: vec![0, 1, 2],
            char_map: [('\t', " "), ('\u{3000}', " "), ('\u{1}', ""), ('ﬁ', "fi")]
                .into_iter()
                .map(|(c, r)| (c, r.to_string()))
                .collect(),
        }
    }

    fn tokenizer(pieces: &[(&str, f32)]) -> SentencePieceTokenizer {
        SentencePieceTokenizer::new(vocab(pieces)).unwrap()
    }

    fn pieces_of(t: &SentencePieceTokenizer, text: &str) -> Vec<String> {
        t.encode(text, 512)
            .into_iter()
            .map(|id| t.piece(id).unwrap().to_string())
            .collect()
    }

    #[test]
    fn normalization_marks_words_and_folds_spaces() {
        let t = tokenizer(&[]);
        assert_eq!(t.normalize("a b"), "▁a▁b");
        assert_eq!(t.normalize(" a"), "▁a");
        assert_eq!(t.normalize("a \t  b "), "▁a▁b▁");
        assert_eq!(t.normalize("a\u{3000}b\u{1}c"), "▁a▁bc");
        assert_eq!(t.normalize("ﬁx"), "▁fix");
        // A decomposed umlaut is composed, as the model's own map does.
        assert_eq!(t.normalize("Mu\u{308}nchen"), "▁München");
        assert_eq!(t.normalize(""), "");
    }

    #[test]
    fn viterbi_takes_the_best_scoring_segmentation() {
        // "▁Haus" + "tür" (-2 - 2) beats "▁Hau" + "stür" (-1 - 4) and the
        // single letters.
        let t = tokenizer(&[
            ("▁Haus", -2.0),
            ("tür", -2.0),
            ("▁Hau", -1.0),
            ("stür", -4.0),
            ("▁", -3.0),
            ("H", -5.0),
            ("a", -5.0),
            ("u", -5.0),
            ("s", -5.0),
            ("t", -5.0),
            ("ü", -5.0),
            ("r", -5.0),
        ]);
        assert_eq!(pieces_of(&t, "Haustür"), ["<s>", "▁Haus", "tür", "</s>"]);
        // A better whole-word piece wins over the parts.
        let t2 = tokenizer(&[("▁Haus", -2.0), ("tür", -2.0), ("▁Haustür", -3.5)]);
        assert_eq!(pieces_of(&t2, "Haustür"), ["<s>", "▁Haustür", "</s>"]);
    }

    #[test]
    fn unknown_characters_become_one_unk() {
        let t = tokenizer(&[("▁", -1.0), ("a", -1.0), ("▁a", -0.5)]);
        assert_eq!(
            pieces_of(&t, "a xyz a"),
            ["<s>", "▁a", "▁", "<unk>", "▁a", "</s>"]
        );
        assert_eq!(
            t.encode("a xyz a", 512),
            [0, t.ids["▁a"], t.ids["▁"], 3, t.ids["▁a"], 2]
        );
    }

    #[test]
    fn byte_pieces_replace_unknown_characters_when_present() {
        let mut pieces: Vec<(String, f32)> = (0..=255u8)
            .map(|b| (format!("<0x{b:02X}>"), -10.0))
            .collect();
        pieces.push(("▁".into(), -1.0));
        pieces.push(("a".into(), -1.0));
        let refs: Vec<(&str, f32)> = pieces.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        let t = tokenizer(&refs);
        assert_eq!(
            pieces_of(&t, "aß"),
            ["<s>", "▁", "a", "<0xC3>", "<0x9F>", "</s>"]
        );
    }

    #[test]
    fn control_pieces_are_never_matched_in_text() {
        let t = tokenizer(&[
            ("▁", -1.0),
            ("<", -1.0),
            (">", -1.0),
            ("s", -1.0),
            ("/", -1.0),
        ]);
        assert_eq!(
            pieces_of(&t, "</s>"),
            ["<s>", "▁", "<", "/", "s", ">", "</s>"]
        );
    }

    #[test]
    fn long_texts_are_cut_to_the_limit() {
        let t = tokenizer(&[("▁a", -1.0)]);
        let text = "a ".repeat(2000);
        let ids = t.encode(&text, 512);
        assert_eq!(ids.len(), 512);
        assert_eq!((ids[0], ids[511]), (0, 2));
        assert_eq!(t.encode(&text, 2), [0, 2]);
        assert_eq!(t.encode("", 512), [0, 2]);
    }

    #[test]
    fn a_vocabulary_without_its_specials_is_refused() {
        let mut v = vocab(&[]);
        v.unk_id = 99;
        let err = SentencePieceTokenizer::new(v).unwrap_err();
        assert!(err.contains("no id 99 for <unk>"), "{err}");
        let mut v = vocab(&[("x", f32::NAN)]);
        v.unk_id = 3;
        assert!(SentencePieceTokenizer::new(v).is_err());
    }
}
