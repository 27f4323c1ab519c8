//! Compound words in a PostgreSQL store's queries, widened as the folder
//! store widens them ([`rlm_corpus::compound`]): in a configuration whose
//! language writes compounds as one word, a query word also finds the
//! store's lexemes that hold it (`Frist` finds `Kündigungsfristen`), and a
//! compound query word the two lexemes it is made of (`Mietvertragskündigung`
//! finds `Kündigung des Mietvertrags`). The vocabulary is `rlm_lexemes`,
//! which every index run keeps exact: no word lists.

use std::collections::HashMap;

use rlm_corpus::CorpusError;
use rlm_corpus::compound::{CompoundFinder, MIN_PART_CHARS, split_compound};

use crate::db::{Db, Param};

/// How a question is widened in one configuration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Widening {
    /// The lexemes holding one query word, with their chunks: the best of
    /// them counts.
    Compounds(Vec<(String, u64)>),
    /// The two lexemes a compound query word is made of, with their
    /// chunks: a chunk must hold both.
    Parts([(String, u64); 2]),
}

/// The widenings of `question` in configuration `cfg` (two round trips:
/// the lexemes of its words and of the parts a split may try, then the
/// vocabulary holding its words' lexemes).
pub(crate) fn widen(db: &Db, cfg: &str, question: &str) -> Result<Vec<Widening>, CorpusError> {
    // Not lower-cased here: PostgreSQL lower-cases as it did the chunks.
    let words: Vec<&str> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut asked: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    for w in &words {
        // Every part a split tries, to analyze them all at once.
        split_compound(
            w,
            |part| {
                asked.push(part.to_string());
                None
            },
            |_| 0,
        );
    }
    asked.sort_unstable();
    asked.dedup();
    let analyzed = analyze(db, cfg, asked)?;
    let stem = |w: &str| analyzed.get(w).and_then(|(lexeme, _)| lexeme.clone());
    let stems: Vec<String> = words.iter().filter_map(|w| stem(w)).collect();
    let mut out = Vec::new();
    let mut finder = CompoundFinder::new(&stems);
    if !finder.is_empty() {
        let mut chunks = HashMap::new();
        for (lexeme, n) in holding(db, cfg, &stems)? {
            finder.offer(&lexeme, n);
            chunks.insert(lexeme, n);
        }
        for (_, compounds) in finder.finish() {
            let with_chunks = compounds
                .into_iter()
                .map(|w| {
                    let n = chunks.get(&w).copied().unwrap_or(0);
                    (w, n)
                })
                .collect();
            out.push(Widening::Compounds(with_chunks));
        }
    }
    let chunks: HashMap<&str, u64> = analyzed
        .values()
        .filter_map(|(lexeme, n)| lexeme.as_deref().map(|l| (l, *n)))
        .collect();
    let frequency = |l: &str| chunks.get(l).copied().unwrap_or(0);
    for w in &words {
        if let Some([a, b]) = split_compound(w, stem, frequency) {
            let (fa, fb) = (frequency(&a), frequency(&b));
            out.push(Widening::Parts([(a, fa), (b, fb)]));
        }
    }
    Ok(out)
}

/// Each string's lexeme in `cfg` (`None` for a stop word) with the chunks
/// holding it (0 when none).
fn analyze(
    db: &Db,
    cfg: &str,
    strings: Vec<String>,
) -> Result<HashMap<String, (Option<String>, u64)>, CorpusError> {
    let rows = db.query(
        "SELECT p.w, s.l, coalesce(x.chunks, 0)
         FROM unnest($2::text[]) AS p(w)
         LEFT JOIN LATERAL (
             SELECT l FROM unnest(tsvector_to_array(to_tsvector($1::text::regconfig, p.w))) AS l
             LIMIT 1
         ) s ON true
         LEFT JOIN rlm_lexemes x ON x.cfg = $1::text::regconfig AND x.lexeme = s.l",
        vec![Box::new(cfg.to_string()) as Param, Box::new(strings)],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            let n = r.get::<_, i64>(2).max(0) as u64;
            (r.get(0), (r.get(1), n))
        })
        .collect())
}

/// The lexemes of `cfg` that hold one of `stems` (of at least
/// [`MIN_PART_CHARS`] characters), with their chunks: a scan of the
/// configuration's vocabulary.
fn holding(db: &Db, cfg: &str, stems: &[String]) -> Result<Vec<(String, u64)>, CorpusError> {
    let patterns: Vec<String> = stems
        .iter()
        .filter(|s| s.chars().count() >= MIN_PART_CHARS)
        .map(|s| format!("%{}%", like_escaped(s)))
        .collect();
    let rows = db.query(
        "SELECT lexeme, chunks FROM rlm_lexemes
         WHERE cfg = $1::text::regconfig AND lexeme LIKE ANY($2::text[])",
        vec![Box::new(cfg.to_string()) as Param, Box::new(patterns)],
    )?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get::<_, i64>(1).max(0) as u64))
        .collect())
}

/// `text` with LIKE's wildcards and escape character as plain characters.
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_hold_wildcards_as_characters() {
        assert_eq!(like_escaped("frist"), "frist");
        assert_eq!(like_escaped("a%b_c\\d"), "a\\%b\\_c\\\\d");
    }
}
