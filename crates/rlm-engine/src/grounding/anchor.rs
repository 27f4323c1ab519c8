//! Anchoring a model's source to the passage its quote is from.
//!
//! A structured answer names a source (`chunk:ID` or `doc:N`) and quotes
//! it. Small models get one of the two slightly wrong: the quote is
//! verbatim, but from a neighbouring document the run also showed, or the
//! quote starts verbatim and then drifts into the model's own words. Both
//! would fail the quote check although the passage the model read is known.
//! Anchoring repairs them before the check, and only with the corpus's own
//! words: a quote found whole in a passage the run saw moves the reference
//! there; otherwise the quote is cut to its longest run of words that is
//! verbatim in the cited passage (or a seen one), when that run is most of
//! the quote. The quote check and the entailment judge then see what the
//! passage really says; nothing the model invented is kept as a quote.

use crate::citations::{SourceChunk, contains_all, normalize, quote_pieces};

/// A cut quote must keep at least this many characters.
const MIN_KEPT_CHARS: usize = 20;

/// How a source was repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Repair {
    /// The quote is whole in another passage the run saw: the reference
    /// moved there (`to` is a `chunk:ID` reference).
    Moved {
        /// The new reference.
        to: String,
    },
    /// Only part of the quote is verbatim: the quote was cut to it.
    Cut {
        /// The reference the kept words are in.
        to: String,
        /// The verbatim part that is kept.
        kept: String,
    },
}

/// The repair for a source whose quote is not verbatim in the passage it
/// names; `None` when the quote checks (or nothing verbatim is long
/// enough). `cited` is the text of the named passage, if it exists; `seen`
/// the chunks the run showed, first sighting first.
pub(crate) fn repair(
    reference: &str,
    quote: &str,
    cited: Option<&str>,
    seen: &[SourceChunk],
) -> Option<Repair> {
    let pieces = quote_pieces(quote);
    if pieces.is_empty() {
        return None;
    }
    let cited_norm = cited.map(normalize);
    if cited_norm
        .as_deref()
        .is_some_and(|c| contains_all(c, &pieces))
    {
        return None;
    }
    let seen_norm: Vec<(String, String)> = seen
        .iter()
        .map(|c| (format!("chunk:{}", c.id), normalize(&c.text)))
        .collect();
    if let Some((to, _)) = seen_norm.iter().find(|(_, t)| contains_all(t, &pieces)) {
        return Some(Repair::Moved { to: to.clone() });
    }
    // Ellipses join pieces the model chose; cutting across them would
    // invent a contiguous quote.
    if quote.contains("...") || quote.contains('…') {
        return None;
    }
    let words: Vec<&str> = quote.split_whitespace().collect();
    let total = words.join(" ").chars().count();
    let mut best: Option<(usize, String, String)> = None;
    let candidates = cited_norm
        .iter()
        .map(|c| (reference.to_string(), c.as_str()))
        .chain(seen_norm.iter().map(|(r, t)| (r.clone(), t.as_str())));
    for (to, text) in candidates {
        let run = longest_verbatim_run(&words, text);
        let chars = run.chars().count();
        if chars > best.as_ref().map_or(0, |b| b.0) {
            best = Some((chars, to, run));
        }
    }
    let (chars, to, kept) = best?;
    (chars >= MIN_KEPT_CHARS && chars * 2 >= total).then_some(Repair::Cut { to, kept })
}

/// The longest run of consecutive `words` whose normalized text is in
/// `haystack_norm`, as the words are written in the quote (trailing
/// punctuation of a cut end trimmed).
fn longest_verbatim_run(words: &[&str], haystack_norm: &str) -> String {
    let found = |from: usize, to: usize| {
        let piece = normalize(&words[from..to].join(" "));
        let piece = piece.trim_matches(|c: char| c == '"' || c == '\'');
        !piece.is_empty() && haystack_norm.contains(piece)
    };
    // Two pointers: a run contained in the text stays contained when it
    // shrinks, so each start extends the previous end.
    let (mut best, mut end) = ((0, 0), 0);
    for start in 0..words.len() {
        end = end.max(start);
        while end < words.len() && found(start, end + 1) {
            end += 1;
        }
        if end - start > best.1 - best.0 {
            best = (start, end);
        }
    }
    words[best.0..best.1]
        .join(" ")
        .trim_end_matches([',', ';', ':'])
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str, text: &str) -> SourceChunk {
        SourceChunk {
            id: id.into(),
            doc_id: "d".into(),
            doc_index: 0,
            path: "p.txt".into(),
            byte_start: 0,
            byte_end: text.len() as u64,
            text: text.into(),
            location: None,
        }
    }

    const BOWL: &str = "Super Bowl 50 decided the champion of the 2015 season. \
        The Denver Broncos defeated the Carolina Panthers 24–10 to earn their third title.";
    const FORT: &str = "In the aftermath, Montcalm and the Indians under his command \
        disagreed about the disposition of prisoners' personal effects.";

    #[test]
    fn a_quote_that_checks_is_left_alone() {
        let seen = [chunk("a-0", BOWL)];
        assert_eq!(
            repair(
                "chunk:a-0",
                "Denver Broncos defeated the",
                Some(BOWL),
                &seen
            ),
            None
        );
    }

    #[test]
    fn a_verbatim_quote_from_another_seen_passage_moves_there() {
        let seen = [chunk("x-0", FORT), chunk("a-0", BOWL)];
        let got = repair(
            "doc:8",
            "The Denver Broncos defeated the Carolina Panthers",
            Some("An unrelated paragraph about halftime shows."),
            &seen,
        );
        assert_eq!(
            got,
            Some(Repair::Moved {
                to: "chunk:a-0".into()
            })
        );
        // A reference to nothing that exists moves as well.
        let got = repair("doc:99", "the Carolina Panthers 24–10", None, &seen);
        assert_eq!(
            got,
            Some(Repair::Moved {
                to: "chunk:a-0".into()
            })
        );
    }

    #[test]
    fn a_quote_that_drifts_into_the_models_words_is_cut_to_the_verbatim_part() {
        let seen = [chunk("x-0", FORT)];
        let quote = "Montcalm and the Indians under his command disagreed about the \
            disposition of Fort Oswego in August 1758.";
        let got = repair("chunk:x-0", quote, Some(FORT), &seen);
        assert_eq!(
            got,
            Some(Repair::Cut {
                to: "chunk:x-0".into(),
                kept:
                    "Montcalm and the Indians under his command disagreed about the disposition of"
                        .into()
            })
        );
    }

    #[test]
    fn a_quote_mostly_invented_or_elided_is_not_repaired() {
        let seen = [chunk("x-0", FORT)];
        // Fewer than half of the quote's characters are verbatim.
        let quote = "Montcalm and the Indians quarrelled bitterly over who would keep the \
            captured cannon and the fort's stores of powder.";
        assert_eq!(repair("chunk:x-0", quote, Some(FORT), &seen), None);
        // An elided quote is the model's choice of pieces: not cut.
        let quote = "Montcalm and the Indians ... the disposition of Fort Oswego in 1758";
        assert_eq!(repair("chunk:x-0", quote, Some(FORT), &seen), None);
        // Too short to check at all.
        assert_eq!(repair("chunk:x-0", "Oswego", Some(FORT), &seen), None);
    }

    #[test]
    fn runs_compare_as_the_quote_check_does() {
        // Case, typographic quotes and line breaks do not break a run.
        let text = "He said: “the ledger is CLOSED\n on Fridays” and left.";
        let words: Vec<&str> = "\"The ledger is closed on Fridays\" and then he went home"
            .split_whitespace()
            .collect();
        assert_eq!(
            longest_verbatim_run(&words, &normalize(text)),
            "\"The ledger is closed on Fridays\" and"
        );
    }
}
