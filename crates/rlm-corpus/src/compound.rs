//! Compound words in full-text queries, for languages that write them as
//! one word (German `Kündigungsfrist`, Dutch `opzegtermijn`): a query word
//! also finds the indexed words that hold it (`Frist` finds
//! `Kündigungsfristen`), and a compound query word the words it is made of
//! (`Kündigungsfrist` finds a passage about the `Frist` of a `Kündigung`).
//!
//! The store's own vocabulary is the dictionary: a part counts only when the
//! index holds it as a word, so no word list per language is needed. The
//! folder store's full-text index and the PostgreSQL store (its kept
//! lexeme statistics as the vocabulary) both widen queries with it.

use std::collections::HashMap;

/// Weight of a compound that holds a query word, and of the parts of a
/// compound query word, beside the query's own words (1.0): they widen
/// recall without outranking a passage that has the words as asked. On the
/// German evaluation set 0.25 ranked best; 1.0 cost 24 points of recall@1
/// (a common word's compounds outweighed the question's rare words).
pub const COMPOUND_BOOST: f32 = 0.25;

/// Shortest query stem looked up inside longer words: shorter ones are
/// inside too many words to mean anything (`er`, `an`).
pub const MIN_PART_CHARS: usize = 4;
/// How many characters longer than the part a word must be to count as a
/// compound holding it (a mere inflection is the stemmer's job).
const MIN_EXTRA_CHARS: usize = 3;
/// Compounds kept per query stem, the most frequent first.
pub const MAX_COMPOUNDS_PER_PART: usize = 12;
/// Shortest query word tried as a compound of two parts.
const MIN_COMPOUND_CHARS: usize = 8;
/// Shortest part of a split compound.
const MIN_SPLIT_PART_CHARS: usize = 3;
/// Linking letters between the parts of a compound (German `Fugen`:
/// `Kündigung-s-frist`, `Straße-n-bahn`; Dutch and Scandinavian ones are
/// among them).
const LINKS: [&str; 7] = ["", "s", "es", "n", "en", "e", "er"];

/// Finds, for each query stem (at least [`MIN_PART_CHARS`] characters),
/// the indexed words that hold it and are at least three characters
/// longer: offer it every indexed word with its document frequency (a word
/// offered again, from another index segment, adds up), then take the
/// [`MAX_COMPOUNDS_PER_PART`] most frequent per stem. Only the words that
/// hold a stem are kept, so a large vocabulary streams through it.
pub struct CompoundFinder {
    parts: Vec<String>,
    found: Vec<HashMap<String, u64>>,
}

impl CompoundFinder {
    /// A finder for `stems` (shorter ones are dropped).
    pub fn new(stems: &[String]) -> CompoundFinder {
        let mut parts: Vec<String> = stems
            .iter()
            .filter(|s| s.chars().count() >= MIN_PART_CHARS)
            .cloned()
            .collect();
        parts.dedup();
        let found = vec![HashMap::new(); parts.len()];
        CompoundFinder { parts, found }
    }

    /// True when there is no stem to look for.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Offers one indexed word.
    pub fn offer(&mut self, word: &str, frequency: u64) {
        for (part, found) in self.parts.iter().zip(&mut self.found) {
            if word.len() >= part.len() + MIN_EXTRA_CHARS
                && word.chars().count() >= part.chars().count() + MIN_EXTRA_CHARS
                && word.contains(part.as_str())
            {
                *found.entry(word.to_string()).or_default() += frequency;
            }
        }
    }

    /// Each stem that some word holds, with those words, the most frequent
    /// first (ties by word).
    pub fn finish(self) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for (part, found) in self.parts.into_iter().zip(self.found) {
            if found.is_empty() {
                continue;
            }
            let mut words: Vec<(u64, String)> = found.into_iter().map(|(w, f)| (f, w)).collect();
            words.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            words.truncate(MAX_COMPOUNDS_PER_PART);
            out.push((part, words.into_iter().map(|(_, w)| w).collect()));
        }
        out
    }
}

/// [`CompoundFinder`] over a whole vocabulary at once.
#[cfg(test)]
pub fn compounds_holding<'v>(
    stems: &[String],
    vocabulary: impl IntoIterator<Item = (&'v str, u64)>,
) -> Vec<(String, Vec<String>)> {
    let mut finder = CompoundFinder::new(stems);
    for (word, frequency) in vocabulary {
        finder.offer(word, frequency);
    }
    finder.finish()
}

/// The best split of a lower-cased query `word` into two parts that are
/// indexed words, each given as its stem: `stem` analyzes a part into the
/// index's form (`None` when it is no word, e.g. a stop word), `frequency`
/// is its document frequency (0 when not indexed). The best split is the
/// one whose parts are most frequent together (geometric mean), as
/// corpus-driven splitters choose; `None` when no split has both parts.
pub fn split_compound(
    word: &str,
    mut stem: impl FnMut(&str) -> Option<String>,
    frequency: impl Fn(&str) -> u64,
) -> Option<[String; 2]> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    if chars.len() < MIN_COMPOUND_CHARS || !chars.iter().all(|(_, c)| c.is_alphabetic()) {
        return None;
    }
    let mut best: Option<(u64, [String; 2])> = None;
    for &(at, _) in &chars[MIN_SPLIT_PART_CHARS..=chars.len() - MIN_SPLIT_PART_CHARS] {
        let (head, rest) = word.split_at(at);
        for link in LINKS {
            let Some(tail) = rest.strip_prefix(link) else {
                continue;
            };
            if tail.chars().count() < MIN_SPLIT_PART_CHARS {
                continue;
            }
            let (Some(a), Some(b)) = (stem(head), stem(tail)) else {
                continue;
            };
            let (fa, fb) = (frequency(&a), frequency(&b));
            if fa == 0 || fb == 0 || a == b {
                continue;
            }
            // Integer geometric mean, compared squared.
            let score = fa.saturating_mul(fb);
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, [a, b]));
            }
        }
    }
    best.map(|(_, parts)| parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_finds_the_compounds_that_hold_it() {
        let vocabulary = [
            ("kundigungsfrist", 3),
            ("frist", 5),
            ("fristablauf", 1),
            ("fristen", 2),
            ("miet", 4),
        ];
        let found = compounds_holding(&["frist".to_string(), "an".to_string()], vocabulary);
        assert_eq!(
            found,
            vec![(
                "frist".to_string(),
                vec!["kundigungsfrist".to_string(), "fristablauf".to_string()]
            )]
        );
        assert!(compounds_holding(&["ab".to_string()], vocabulary).is_empty());
    }

    #[test]
    fn at_most_a_few_compounds_per_part_the_most_frequent_first() {
        let words: Vec<String> = (0..40).map(|i| format!("vertrag{i:02}x")).collect();
        let vocabulary = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_str(), i as u64));
        let found = compounds_holding(&["vertrag".to_string()], vocabulary);
        assert_eq!(found[0].1.len(), MAX_COMPOUNDS_PER_PART);
        assert_eq!(found[0].1[0], "vertrag39x");
    }

    #[test]
    fn a_compound_splits_into_indexed_words_across_a_link() {
        let index: HashMap<&str, u64> = [("kundig", 4), ("frist", 9), ("gung", 1)].into();
        let stem = |w: &str| {
            Some(
                w.trim_end_matches("ung")
                    .replace('ü', "u")
                    .trim_end_matches("en")
                    .to_string(),
            )
        };
        let freq = |w: &str| index.get(w).copied().unwrap_or(0);
        assert_eq!(
            split_compound("kündigungsfrist", stem, freq),
            Some(["kundig".to_string(), "frist".to_string()])
        );
        assert_eq!(split_compound("kündigung", stem, freq), None);
        assert_eq!(split_compound("frist", stem, freq), None);
        assert_eq!(split_compound("abc-2024-xyz", stem, freq), None);
    }
}
