//! The snippet of a search hit: the stretch of a chunk where the most of
//! the query's distinct terms meet, each weighted by how rare it is.
//! tantivy's own generator adds up every occurrence, so a manual page that
//! names its command three times in its header showed the header, not the
//! option the question's other, rarer words were about.

/// One token of a chunk's text that is a query term: its byte range and
/// the term (an index into the weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Matched {
    pub from: usize,
    pub to: usize,
    pub term: usize,
}

/// A term's weight: its inverse document frequency among `docs` chunks
/// (BM25's), so a term few chunks hold counts for more.
pub(crate) fn weight(doc_freq: u64, docs: u64) -> f32 {
    let (n, df) = (docs as f32, doc_freq as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln().max(0.0)
}

/// At most `max_bytes` of `text` around the window where the matched terms
/// (`matched`, in text order) weigh most, each distinct term counted once,
/// with `**` around every matched token and runs of whitespace made one
/// space. `None` when nothing matched.
pub(crate) fn passage(
    text: &str,
    matched: &[Matched],
    weights: &[f32],
    max_bytes: usize,
) -> Option<String> {
    let (first, last) = best_window(matched, weights, max_bytes)?;
    let (from, to) = (matched[first].from, matched[last].to);
    let slack = max_bytes.saturating_sub(to - from);
    let mut start = floor_boundary(text, from.saturating_sub(slack / 2));
    let mut end = floor_boundary(text, (start + max_bytes).min(text.len())).max(to);
    // Whole words at both ends, never cutting into the window itself.
    if start > 0
        && let Some(space) = text[start..from].find(char::is_whitespace)
    {
        start += space;
    }
    if end < text.len()
        && let Some(space) = text[to..end].rfind(char::is_whitespace)
    {
        end = to + space;
    }
    let mut out = String::with_capacity(end - start + 16);
    let mut at = start;
    for m in matched.iter().filter(|m| m.from >= start && m.to <= end) {
        if m.from < at {
            continue;
        }
        out.push_str(&text[at..m.from]);
        out.push_str("**");
        out.push_str(&text[m.from..m.to]);
        out.push_str("**");
        at = m.to;
    }
    out.push_str(&text[at..end]);
    Some(out.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The first and last matched token of the window at most `max_bytes`
/// long whose distinct terms weigh most (the earliest of equal windows).
fn best_window(matched: &[Matched], weights: &[f32], max_bytes: usize) -> Option<(usize, usize)> {
    let mut best: Option<(f32, usize, usize)> = None;
    for i in 0..matched.len() {
        let mut seen = vec![false; weights.len()];
        let (mut score, mut j) = (0.0, i);
        while j < matched.len() && matched[j].to - matched[i].from <= max_bytes {
            let term = matched[j].term;
            if let Some(flag) = seen.get_mut(term)
                && !*flag
            {
                *flag = true;
                score += weights[term];
            }
            j += 1;
        }
        let last = j.saturating_sub(1).max(i);
        if best.is_none_or(|(s, _, _)| score > s) {
            best = Some((score, i, last));
        }
    }
    best.map(|(_, first, last)| (first, last))
}

/// The largest char boundary of `text` at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte ranges of `words` in `text` as matches, term by position
    /// in `words`.
    fn matches(text: &str, words: &[&str]) -> Vec<Matched> {
        let mut out = Vec::new();
        let mut at = 0;
        for token in text.split(|c: char| !c.is_alphanumeric()) {
            let from = at;
            at += token.len() + 1;
            if let Some(term) = words.iter().position(|w| w.eq_ignore_ascii_case(token)) {
                out.push(Matched {
                    from,
                    to: from + token.len(),
                    term,
                });
            }
        }
        out
    }

    #[test]
    fn the_window_with_the_rare_terms_wins_over_repeats_of_a_common_one() {
        let header =
            "TAIL(1) Dienstprogramme TAIL(1) BEZEICHNUNG tail - Den letzten Teil ausgeben.";
        let filler = " Weitere Optionen folgen hier.".repeat(12);
        let option = " -s, --sleep-interval=N Mit -f, zwischen Iterationen etwa N Sekunden (Voreinstellung: 1.0) schlafen legen.";
        let text = format!("{header}{filler}{option}");
        let words = ["tail", "sleep", "interval"];
        let weights = [0.5, 3.0, 2.5];
        let got = passage(&text, &matches(&text, &words), &weights, 200).unwrap();
        assert!(got.contains("--**sleep**-**interval**=N"), "{got}");
        assert!(got.contains("Voreinstellung: 1.0"), "{got}");
        assert!(got.chars().count() <= 200 + 8, "{got}");
    }

    #[test]
    fn repeats_do_not_add_up_and_words_are_not_cut() {
        let text = "alpha alpha alpha alpha and later beta gamma together in one place";
        let m = matches(text, &["alpha", "beta", "gamma"]);
        let got = passage(text, &m, &[1.0, 1.0, 1.0], 30).unwrap();
        assert!(got.contains("**beta** **gamma**"), "{got}");
        for word in got.replace("**", "").split(' ') {
            assert!(text.split(' ').any(|w| w == word), "{word:?} cut in {got}");
        }
        assert_eq!(passage(text, &[], &[], 30), None);
        // Umlauts at the cut: char boundaries are kept.
        let umlauts = format!("{} Kündigungsfrist {}", "ä".repeat(200), "ö".repeat(200));
        let m = matches(&umlauts, &["kündigungsfrist"]);
        assert!(
            passage(&umlauts, &m, &[1.0], 50)
                .unwrap()
                .contains("**Kündigungsfrist**")
        );
    }

    #[test]
    fn a_rare_term_weighs_more() {
        assert!(weight(1, 1_000) > weight(500, 1_000));
        assert!(weight(1_000, 1_000) >= 0.0);
    }
}
