//! Matching a claim to the passage that backs it: claim terms, sentences
//! and windows of sentences, the quote the engine attaches, and the
//! excerpts that share the most of a question.

use std::collections::HashSet;

use crate::citations::{
    Citation, CitationKind, CitationOrigin, CitationSource, CitationStatus, SourceChunk,
};
use crate::claims;
use crate::corpus::Corpus;
use crate::text;

/// Longest quote the engine attaches.
const QUOTE_CHARS: usize = 300;

/// True when a passage of `chunks` (or a chunk the claim names) backs some
/// claim of `answer`, as [`ground`] would back it.
pub(crate) fn backs_a_claim(
    answer: &str,
    question: &str,
    chunks: &[SourceChunk],
    corpus: &Corpus,
) -> bool {
    claims::claims(answer)
        .iter()
        .filter(|c| !c.structural)
        .any(|c| {
            let (claim, named) = without_source_refs(&strip_markers(c.said(answer)), corpus);
            let looked_at: Vec<SourceChunk> =
                named.into_iter().chain(chunks.iter().cloned()).collect();
            support_from(&claim, question, &looked_at).is_some()
        })
}

/// True when a claim of `answer` states a fact of `chunks`: a passage backs
/// it (as [`backs_a_claim`]), and the quote holds a term of the claim that
/// the question does not, a number or a word. So "The code is 8316." is a
/// fact read from the passages; "I will search for the code" and the
/// question said back are not, however many of its words they share.
pub(crate) fn states_a_fact_of(answer: &str, question: &str, chunks: &[SourceChunk]) -> bool {
    let (q_numbers, q_words) = claim_terms(question);
    claims::claims(answer)
        .iter()
        .filter(|c| !c.structural)
        .any(|c| {
            let claim = strip_markers(c.said(answer));
            let Some((_, _, quote)) = support_from(&claim, question, chunks) else {
                return false;
            };
            let quoted: HashSet<String> = text::words(&quote).collect();
            let (numbers, words) = claim_terms(&claim);
            numbers
                .iter()
                .chain(&words)
                .any(|t| !q_numbers.contains(t) && !q_words.contains(t) && quoted.contains(t))
        })
}

/// The excerpts of `chunks` that share the most content
/// words with `question`: a sentence and the one after it (a question
/// often names its subject in one sentence and its answer sits in the
/// next), sharing at least two of the words and a third of them; best first
/// (the earlier on a tie), no two overlapping, at most `n`, each verbatim
/// with its chunk id.
pub(crate) fn question_sentences(
    question: &str,
    chunks: &[SourceChunk],
    n: usize,
) -> Vec<(String, String)> {
    let (numbers, mut wanted) = claim_terms(question);
    wanted.extend(numbers);
    let split: Vec<Sentences> = chunks.iter().map(Sentences::of).collect();
    // (shared, chunk, first sentence, span in the chunk's text)
    let mut scored: Vec<(usize, usize, usize, usize, usize)> = Vec::new();
    for (p, Sentences { sents, tokens, .. }) in split.iter().enumerate() {
        for i in 0..sents.len() {
            let last = (i + 1).min(sents.len() - 1);
            let shared = wanted
                .iter()
                .filter(|w| tokens[i..=last].iter().any(|t| t.contains(*w)))
                .count();
            if shared >= 2 && shared * 3 >= wanted.len() {
                let end = sents[last].0 + sents[last].1.len();
                scored.push((shared, p, i, sents[i].0, end));
            }
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    for (_, p, i, start, end) in scored {
        if out.len() == n {
            break;
        }
        if chosen
            .iter()
            .any(|&(cp, ci)| cp == p && ci.abs_diff(i) <= 1)
        {
            continue;
        }
        chosen.push((p, i));
        let chunk = &chunks[p];
        out.push((chunk.id.clone(), chunk.text[start..end].to_string()));
    }
    out
}

/// The 1-based line of document `index` that byte `at` falls on.
pub(super) fn line_of(corpus: &Corpus, index: usize, at: Option<u64>) -> Option<u32> {
    let text = corpus.document_text(index).ok()?;
    let at = (at? as usize).min(text.len());
    let before = text.get(..at)?;
    Some(before.matches('\n').count() as u32 + 1)
}

pub(super) fn strip_markers(text: &str) -> String {
    crate::citations::without_markers(text)
}

/// `text` without the references to sources it holds (chunk ids, with or
/// without `chunk:` and brackets; document paths), and the chunks it names
/// that exist.
pub(super) fn without_source_refs(text: &str, corpus: &Corpus) -> (String, Vec<SourceChunk>) {
    let mut named: Vec<SourceChunk> = Vec::new();
    let mut kept: Vec<&str> = Vec::new();
    for token in text.split_whitespace() {
        let bare = token.trim_matches(|c: char| !c.is_alphanumeric() && c != ':');
        let (prefixed, id) = match bare.strip_prefix("chunk:") {
            Some(id) => (true, id.trim_matches(|c: char| !c.is_alphanumeric())),
            None => (false, bare),
        };
        // Chunk ids are `DOCUMENT-ORDINAL`: only such a token is looked up.
        let id_shaped = id.rsplit_once('-').is_some_and(|(doc, n)| {
            !doc.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        });
        let chunk = id_shaped.then(|| corpus.chunk(id)).flatten();
        let is_path = token.matches('/').count() >= 2;
        if prefixed || chunk.is_some() || is_path {
            if let Some(c) = chunk
                && !named.iter().any(|n| n.id == c.id)
            {
                named.push(c);
            }
            continue;
        }
        kept.push(token);
    }
    (kept.join(" "), named)
}

pub(super) fn search_chunks(corpus: &Corpus, claim: &str) -> Vec<SourceChunk> {
    // Words only: quotes and colons in a claim are not query syntax.
    let query: String = text::words(claim).take(40).collect::<Vec<_>>().join(" ");
    corpus
        .store()
        .search(&query, 5)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| corpus.chunk(&h.chunk_id))
        .collect()
}

/// The words of a claim that a supporting passage must share: numbers and
/// content words (three letters or more, not stop words of English or of
/// the claim's language).
pub(super) fn claim_terms(claim: &str) -> (Vec<String>, Vec<String>) {
    let language = rlm_corpus::language::guess(claim);
    let mut numbers = Vec::new();
    let mut words = Vec::new();
    for lower in text::words(claim) {
        if lower.chars().any(|c| c.is_ascii_digit()) {
            if !numbers.contains(&lower) {
                numbers.push(lower);
            }
        } else if lower.chars().count() >= 3
            && !text::is_stop_word(&lower, language)
            && !words.contains(&lower)
        {
            words.push(lower);
        }
    }
    (numbers, words)
}

/// True for a claim of a single term (a one-word or one-number answer).
pub(super) fn is_short(claim: &str) -> bool {
    let (numbers, words) = claim_terms(claim);
    numbers.len() + words.len() == 1
}

/// A chunk's sentences (with their byte offsets) and the words of each.
struct Sentences<'a> {
    chunk: &'a SourceChunk,
    sents: Vec<(usize, &'a str)>,
    tokens: Vec<HashSet<String>>,
}

impl<'a> Sentences<'a> {
    fn of(chunk: &'a SourceChunk) -> Self {
        let sents = sentences(&chunk.text);
        let tokens = sents
            .iter()
            .map(|(_, sentence)| text::words(sentence).collect())
            .collect();
        Sentences {
            chunk,
            sents,
            tokens,
        }
    }
}

/// The chunk and sentence that back `claim`. A claim of several terms is
/// backed by the first sentence that holds every number of the claim and at
/// least 60% of its content words (at least two); failing that, by two,
/// then three, neighbouring sentences that do together, the first and the
/// last each holding some of it (a claim often joins a sentence naming its
/// subject with the next one stating the fact). A one-term claim (an answer
/// like "Tromso") is backed by a sentence that holds the term and one of
/// the question's content words, and whose window (the sentence and its
/// neighbours: questions paraphrase the sentence their answer is read from,
/// and its subject is often named one sentence earlier) shares at least two
/// of the question's content words and a third of them; of those, the one
/// sharing the most wins, the earlier chunk on a tie. Returns the chunk, the
/// byte offset of the quote in the chunk's text and the quote, verbatim.
pub(super) fn support_from(
    claim: &str,
    question: &str,
    chunks: &[SourceChunk],
) -> Option<(SourceChunk, usize, String)> {
    let (numbers, words) = claim_terms(claim);
    let short = numbers.len() + words.len() == 1;
    if numbers.len() + words.len() < 2 && !short {
        return None;
    }
    let (_, question_words) = claim_terms(question);
    let mut terms: Vec<&str> = numbers.iter().map(String::as_str).collect();
    terms.extend(words.iter().map(String::as_str));
    let split: Vec<Sentences> = chunks.iter().map(Sentences::of).collect();
    if short {
        // The best candidate: (question words shared, chunk, start, sentence).
        let mut best: Option<(usize, &SourceChunk, usize, &str)> = None;
        for Sentences {
            chunk,
            sents,
            tokens,
        } in &split
        {
            for (i, (start, sentence)) in sents.iter().enumerate() {
                let here = &tokens[i];
                if !terms.iter().all(|t| here.contains(*t)) {
                    continue;
                }
                let window = &tokens[i.saturating_sub(1)..(i + 2).min(tokens.len())];
                let shared = question_words
                    .iter()
                    .filter(|w| window.iter().any(|t| t.contains(*w)))
                    .count();
                let in_sentence = question_words.iter().any(|w| here.contains(w));
                if in_sentence
                    && shared >= 2
                    && shared * 3 >= question_words.len()
                    && best.is_none_or(|(n, ..)| shared > n)
                {
                    best = Some((shared, chunk, *start, sentence));
                }
            }
        }
        let (_, chunk, start, sentence) = best?;
        terms.extend(question_words.iter().map(String::as_str));
        let (offset, quote) = quote_window(sentence, &terms);
        return Some((chunk.clone(), start + offset, quote.to_string()));
    }
    let holds_some = |t: &HashSet<String>| {
        words.iter().any(|w| t.contains(w)) || numbers.iter().any(|n| t.contains(n))
    };
    for span in 1..=3 {
        for Sentences {
            chunk,
            sents,
            tokens,
        } in &split
        {
            for i in (span - 1)..sents.len() {
                let window = &tokens[i + 1 - span..=i];
                if span > 1 && (!holds_some(&window[0]) || !holds_some(&window[span - 1])) {
                    continue;
                }
                if !numbers.iter().all(|n| window.iter().any(|t| t.contains(n))) {
                    continue;
                }
                let matched = words
                    .iter()
                    .filter(|w| window.iter().any(|t| t.contains(*w)))
                    .count();
                if !backs(&numbers, words.len(), matched) {
                    continue;
                }
                let (start, end) = (sents[i + 1 - span].0, sents[i].0 + sents[i].1.len());
                let (offset, quote) = quote_window(&chunk.text[start..end], &terms);
                return Some(((*chunk).clone(), start + offset, quote.to_string()));
            }
        }
    }
    None
}

/// True when a passage holding `matched` of a claim's `words` content words
/// (and every one of its `numbers`) backs it: at least 60% of the words, and
/// two terms at least.
fn backs(numbers: &[String], words: usize, matched: usize) -> bool {
    let needed = ((words as f64) * 0.6).ceil() as usize;
    matched + numbers.len() >= 2 && matched >= needed
}

/// Sentences of `text` with their byte offsets: split after `.`, `!`, `?`
/// followed by whitespace, and at line breaks.
fn sentences(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, ch) in text.char_indices() {
        let end_here = ch == '\n'
            || (matches!(ch, '.' | '!' | '?')
                && bytes.get(i + 1).is_some_and(|b| b.is_ascii_whitespace()));
        if end_here {
            let end = if ch == '\n' { i } else { i + 1 };
            push_sentence(text, start, end, &mut out);
            start = i + 1;
        }
    }
    push_sentence(text, start, text.len(), &mut out);
    out
}

fn push_sentence<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<(usize, &'a str)>) {
    let s = &text[start..end];
    let lead = s.len() - s.trim_start().len();
    let t = s.trim();
    if !t.is_empty() {
        out.push((start + lead, t));
    }
}

/// The quote a sentence gives: the whole sentence when it has at most
/// [`QUOTE_CHARS`] characters; otherwise the window of whole words around
/// the words of `terms` it holds (numbers first), so a long sentence (PDF
/// text, a transcript) is quoted where it backs the claim, never cut in the
/// middle of a word. Returns the window's byte offset in the sentence.
fn quote_window<'a>(sentence: &'a str, terms: &[&str]) -> (usize, &'a str) {
    if sentence.chars().count() <= QUOTE_CHARS {
        return (0, sentence);
    }
    // Words with their byte spans, as `text::words` splits them.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut word_start = None;
    for (i, c) in sentence.char_indices() {
        match (c.is_alphanumeric(), word_start) {
            (true, None) => word_start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                word_start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = word_start {
        spans.push((s, sentence.len()));
    }
    if spans.is_empty() {
        return (0, text::head(sentence, QUOTE_CHARS));
    }
    let hits: Vec<usize> = spans
        .iter()
        .enumerate()
        .filter(|(_, (s, e))| terms.contains(&sentence[*s..*e].to_lowercase().as_str()))
        .map(|(i, _)| i)
        .collect();
    // The densest run of hits that fits: grow from each hit while the
    // window stays within the limit; keep the one covering most hits.
    let chars_between = |a: usize, b: usize| sentence[spans[a].0..spans[b].1].chars().count();
    let (mut best, mut best_count) = ((0, 0), 0);
    for (n, &first) in hits.iter().enumerate() {
        let mut last = first;
        let mut count = 1;
        for &h in &hits[n + 1..] {
            if chars_between(first, h) > QUOTE_CHARS {
                break;
            }
            last = h;
            count += 1;
        }
        if count > best_count {
            (best, best_count) = ((first, last), count);
        }
    }
    // Widen by whole words on both sides while it fits.
    let (mut a, mut b) = best;
    loop {
        let mut grew = false;
        if b + 1 < spans.len() && chars_between(a, b + 1) <= QUOTE_CHARS {
            b += 1;
            grew = true;
        }
        if a > 0 && chars_between(a - 1, b) <= QUOTE_CHARS {
            a -= 1;
            grew = true;
        }
        if !grew {
            break;
        }
    }
    let (start, end) = (spans[a].0, spans[b].1);
    // One word longer than the limit (a hash, base64): its head.
    (start, text::head(&sentence[start..end], QUOTE_CHARS))
}

pub(super) fn engine_citation(
    claim_start: usize,
    chunk: &SourceChunk,
    offset: usize,
    quote: String,
) -> Citation {
    let start = chunk.byte_start + offset as u64;
    Citation {
        marker: String::new(),
        answer_offset: claim_start,
        kind: CitationKind::Chunk,
        id: chunk.id.clone(),
        quote: Some(quote.clone()),
        chunk_id: Some(chunk.id.clone()),
        doc_id: Some(chunk.doc_id.clone()),
        doc_index: Some(chunk.doc_index),
        path: Some(chunk.path.clone()),
        byte_start: Some(start),
        byte_end: Some(start + quote.len() as u64),
        status: CitationStatus::Verified,
        detail: None,
        origin: CitationOrigin::Engine,
        line: None,
        location: chunk.location.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claims_terms_leave_out_the_stop_words_of_its_language() {
        let (numbers, words) =
            claim_terms("Die Frist für die Kündigung des Vertrags beträgt 3 Monate.");
        assert_eq!(numbers, vec!["3"]);
        assert_eq!(
            words,
            vec!["frist", "kündigung", "vertrags", "beträgt", "monate"]
        );
        let (_, words) = claim_terms("The notice period for the lease is three months.");
        assert_eq!(words, vec!["notice", "period", "lease", "three", "months"]);
    }

    #[test]
    fn a_long_sentence_is_quoted_around_its_matching_words() {
        let filler = "lorem ipsum dolor sit amet consectetur ".repeat(20);
        let sentence =
            format!("{filler}the vault access code for the Lisbon office is 58213 and {filler}end");
        let (offset, quote) = quote_window(&sentence, &["58213", "vault", "lisbon"]);
        assert!(quote.chars().count() <= QUOTE_CHARS, "{quote}");
        assert!(quote.contains("vault access code for the Lisbon office is 58213"));
        assert_eq!(&sentence[offset..offset + quote.len()], quote);
        // Whole words at both ends.
        let before = sentence[..offset].chars().last();
        let after = sentence[offset + quote.len()..].chars().next();
        assert!(before.is_none_or(|c| !c.is_alphanumeric()), "{quote}");
        assert!(after.is_none_or(|c| !c.is_alphanumeric()), "{quote}");
        // A short sentence is quoted whole; words only where they fit.
        assert_eq!(
            quote_window("A short one.", &["short"]),
            (0, "A short one.")
        );
        let blob = "x".repeat(1000);
        assert_eq!(quote_window(&blob, &["y"]).1.chars().count(), QUOTE_CHARS);
        let dots = ".".repeat(400);
        assert_eq!(quote_window(&dots, &[]).1.chars().count(), QUOTE_CHARS);
    }

    #[test]
    fn words_scattered_over_a_window_do_not_back_a_claim() {
        // Two of its four content words ("each" and "will" are function
        // words), spread over three sentences: chance.
        let c = [chunk(
            "Fossils have more comb-rows than modern forms. The family tree was debated. All the other traditional groups are descendants.",
        )];
        assert!(
            support_from(
                "I will analyze the modern and traditional buildings of each town.",
                "",
                &c
            )
            .is_none()
        );
    }

    #[test]
    fn a_number_in_the_next_sentence_completes_a_claim() {
        let c = [chunk(
            "The Denver Broncos defeated the Panthers to earn their third Super Bowl title. The game was played on February 7, 2016. Tickets sold out.",
        )];
        let claim = "The Denver Broncos secured a Super Bowl title for the third time in 2016.";
        let (_, _, quote) = support_from(claim, "", &c).unwrap();
        assert!(quote.ends_with("February 7, 2016."), "{quote}");
        assert!(
            support_from(
                "The Broncos won their third Super Bowl title in 2019.",
                "",
                &c
            )
            .is_none()
        );
    }

    #[test]
    fn sentences_sharing_the_question_words_come_first() {
        let passages = [
            chunk_with(
                "a-0",
                "Newcastle keeps a medieval street layout. Stairs lead to the Castle Keep.",
            ),
            chunk_with(
                "b-0",
                "Close, Sandhill and Quayside contain modern buildings. The towns grew.",
            ),
        ];
        let q = "What kind of buildings are in the towns of Close, Sandhill and Quayside?";
        let found = question_sentences(q, &passages, 3);
        assert_eq!(
            found,
            [(
                "b-0".to_string(),
                "Close, Sandhill and Quayside contain modern buildings. The towns grew."
                    .to_string()
            )]
        );
        // The subject in one sentence, the answer in the next.
        let passages = [chunk_with(
            "c-0",
            "Alexis Torres, resume. Contact: based in Madrid, Spain. Hobbies: chess.",
        )];
        let found = question_sentences("Where does Alexis Torres live?", &passages, 3);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].1,
            "Alexis Torres, resume. Contact: based in Madrid, Spain."
        );
        assert!(question_sentences("Who won the cup in 1999?", &passages, 3).is_empty());
    }

    #[test]
    fn sentences_keep_their_offsets() {
        let text = "First one. Second: 4721!\nThird line";
        let s = sentences(text);
        assert_eq!(s.len(), 3);
        for (start, sentence) in &s {
            assert_eq!(&text[*start..*start + sentence.len()], *sentence);
        }
        assert_eq!(s[1].1, "Second: 4721!");
    }

    fn chunk(text: &str) -> SourceChunk {
        chunk_with("d-0", text)
    }

    fn chunk_with(id: &str, text: &str) -> SourceChunk {
        SourceChunk {
            id: id.into(),
            doc_id: "d".into(),
            doc_index: 0,
            path: "a.txt".into(),
            byte_start: 100,
            byte_end: 100 + text.len() as u64,
            text: text.into(),
            location: None,
        }
    }

    #[test]
    fn support_needs_the_numbers_and_most_words() {
        let c = [chunk(
            "Meeting notes. The secret code is 4721. Keep it safe.",
        )];
        let (found, offset, quote) = support_from("The secret code is 4721.", "", &c).unwrap();
        assert_eq!(quote, "The secret code is 4721.");
        assert_eq!(&found.text[offset..offset + quote.len()], quote);
        assert!(support_from("The secret code is 9999.", "", &c).is_none());
        assert!(support_from("The launch is scheduled for Mars.", "", &c).is_none());
        // A one-word answer, backed by the sentence holding it and the question's words.
        let q = "What is the secret code of the meeting notes?";
        let (_, _, quote) = support_from("4721", q, &c).unwrap();
        assert_eq!(quote, "The secret code is 4721.");
        assert!(support_from("4721", "What is the launch date?", &c).is_none());
        assert!(support_from("Keep", q, &c).is_none());
        // A paraphrased question: the answer's sentence names part of it, the
        // sentence before names the rest; the densest window wins.
        let c = [
            chunk("Tickets for the 2015 season sold out. The club moved in 2015."),
            chunk(
                "Denver hosted the Super Bowl parade. The Broncos won their third title in 2015. Tickets sold out.",
            ),
        ];
        let q = "What year did the Denver Broncos secure a Super Bowl title for the third time?";
        let (year_chunk, at, year_quote) = support_from("2015", q, &c).unwrap();
        assert_eq!(year_quote, "The Broncos won their third title in 2015.");
        assert_eq!(&year_chunk.text[at..at + year_quote.len()], year_quote);
        assert!(support_from("2015", "When did the club move?", &c[1..]).is_none());
        // A claim joining two adjacent sentences, quoted as their span.
        let c = [chunk(
            "Media day was re-branded as Super Bowl Opening Night. It featured player introductions on a replica of the Golden Gate Bridge. Tickets sold out.",
        )];
        let claim = "According to the passage, a replica of the Golden Gate Bridge was at Super Bowl Opening Night.";
        let (pair_chunk, at, pair_quote) = support_from(claim, "", &c).unwrap();
        assert_eq!(
            pair_quote,
            "Media day was re-branded as Super Bowl Opening Night. It featured player introductions on a replica of the Golden Gate Bridge."
        );
        assert_eq!(&pair_chunk.text[at..at + pair_quote.len()], pair_quote);
        // Neither sentence alone backs it, and one holding nothing of it
        // does not join.
        let c = [chunk(
            "Tickets sold out. It featured a replica of the Golden Gate Bridge.",
        )];
        assert!(support_from(claim, "", &c).is_none());
        let cite = engine_citation(0, &found, offset, quote);
        assert_eq!(cite.byte_start, Some(100 + 15));
        assert_eq!(cite.origin, CitationOrigin::Engine);
    }
}
