//! Grounding: what a run's agents actually saw (the evidence ledger), and,
//! once the answer is committed, the support of each of its claims.
//!
//! A claim (a sentence, list item or table row of the answer) is supported
//! when a citation of the model verified (its quote is in the cited chunk),
//! or else when the engine finds a passage that backs it: first among the
//! chunks in the ledger, then by a full-text search for the claim. The
//! engine's citation quotes the chunk verbatim (a sentence holding every
//! number of the claim and most of its words) with the chunk's span, and
//! says it was the engine's. Claims nothing backs are marked unsupported.

use std::collections::HashSet;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::citations::{
    Citation, CitationKind, CitationOrigin, CitationSource, CitationStatus, SourceChunk,
    VerificationReport, normalize,
};
use crate::claims;
use crate::corpus::Corpus;
use crate::text;

/// Entries a ledger keeps at most (later ones are counted, not kept).
const LEDGER_ENTRIES: usize = 2_000;
/// Characters of text kept per ledger entry.
const ENTRY_CHARS: usize = 2_000;
/// Printed lines per cell mapped back to chunks.
const LINES_PER_OUTPUT: usize = 12;
/// Shortest printed line worth mapping back to a chunk.
const MIN_LINE_CHARS: usize = 30;
/// Longest quote the engine attaches.
const QUOTE_CHARS: usize = 300;

/// What an agent saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A hit of `search()`.
    SearchHit,
    /// Corpus text a cell printed.
    Printed,
    /// Corpus text passed to a sub-model or sub-agent.
    SubPrompt,
    /// What a sub-model or sub-agent answered.
    SubAnswer,
}

/// One entry of the evidence ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// What kind of sighting.
    pub kind: EvidenceKind,
    /// The agent that saw it.
    pub agent: String,
    /// The chunk it maps to, when it is corpus text.
    pub chunk_id: Option<String>,
    /// That chunk's document.
    pub doc_index: Option<usize>,
    /// Byte span of the chunk in its document.
    pub byte_start: Option<u64>,
    /// End of that span.
    pub byte_end: Option<u64>,
    /// The text seen (capped).
    pub text: String,
}

impl Evidence {
    fn new(kind: EvidenceKind, agent: &str, chunk: Option<&SourceChunk>, text: &str) -> Self {
        Evidence {
            kind,
            agent: agent.to_string(),
            chunk_id: chunk.map(|c| c.id.clone()),
            doc_index: chunk.map(|c| c.doc_index),
            byte_start: chunk.map(|c| c.byte_start),
            byte_end: chunk.map(|c| c.byte_end),
            text: capped(text),
        }
    }
}

/// The evidence ledger of one run.
#[derive(Debug, Default)]
pub struct Ledger {
    inner: Mutex<LedgerInner>,
}

#[derive(Debug, Default)]
struct LedgerInner {
    entries: Vec<Evidence>,
    dropped: usize,
}

fn capped(text: &str) -> String {
    match text.char_indices().nth(ENTRY_CHARS) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}

impl Ledger {
    /// Records one entry (past [`LEDGER_ENTRIES`], only counts it).
    pub fn record(&self, e: Evidence) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.entries.len() >= LEDGER_ENTRIES {
            inner.dropped += 1;
        } else {
            inner.entries.push(e);
        }
    }

    /// Records a chunk an agent saw whole (a search hit).
    pub fn saw_chunk(&self, kind: EvidenceKind, agent: &str, chunk: &SourceChunk) {
        self.record(Evidence::new(kind, agent, Some(chunk), &chunk.text));
    }

    /// The entries, in the order they were seen, and how many were dropped.
    pub fn snapshot(&self) -> (Vec<Evidence>, usize) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (inner.entries.clone(), inner.dropped)
    }

    /// Chunk ids the agents saw, first sighting first.
    fn chunk_ids(&self) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = HashSet::new();
        inner
            .entries
            .iter()
            .filter_map(|e| e.chunk_id.clone())
            .filter(|id| seen.insert(id.clone()))
            .collect()
    }
}

/// Ledger entries for text an agent saw or passed on, mapped back to the
/// chunks it was copied from (its longer lines, found verbatim in a chunk);
/// a sub-answer that maps to no chunk is kept as it is.
pub fn evidence_of(kind: EvidenceKind, agent: &str, text: &str, corpus: &Corpus) -> Vec<Evidence> {
    let chunks = locate(corpus, text);
    if chunks.is_empty() {
        return if kind == EvidenceKind::SubAnswer && !text.trim().is_empty() {
            vec![Evidence::new(kind, agent, None, text)]
        } else {
            Vec::new()
        };
    }
    chunks
        .iter()
        .map(|(chunk, line)| Evidence::new(kind, agent, Some(chunk), line))
        .collect()
}

/// The chunks that the longer lines of `text` were copied from.
fn locate(corpus: &Corpus, text: &str) -> Vec<(SourceChunk, String)> {
    let mut out: Vec<(SourceChunk, String)> = Vec::new();
    let lines = text
        .lines()
        .map(str::trim)
        .filter(|l| l.chars().count() >= MIN_LINE_CHARS)
        .take(LINES_PER_OUTPUT);
    for line in lines {
        let query: String = line
            .split_whitespace()
            .take(30)
            .collect::<Vec<_>>()
            .join(" ");
        let Ok(hits) = corpus.store().search(&query, 3) else {
            continue;
        };
        let needle = normalize(line);
        for h in hits {
            if out.iter().any(|(c, _)| c.id == h.chunk_id) {
                continue;
            }
            if normalize(&h.text).contains(&needle)
                && let Some(chunk) = corpus.chunk(&h.chunk_id)
            {
                out.push((chunk, line.to_string()));
                break;
            }
        }
    }
    out
}

/// How well a claim is backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// A citation with a quote found in its chunk backs it.
    Supported,
    /// Nothing checked backs it.
    Unsupported,
}

/// The semantic check's judgment of a claim against its quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The quotes state it.
    Supported,
    /// The quotes state part of it.
    Partly,
    /// The quotes do not state it.
    Unsupported,
    /// The quotes conflict with it.
    Contradicted,
}

/// What the semantic check found, and what it cost (shown apart from the
/// answer's own cost; it is part of the run's usage and budget).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SemanticSummary {
    /// Claims judged (those with a quote).
    pub checked: usize,
    /// Judged supported.
    pub supported: usize,
    /// Judged partly supported.
    pub partly: usize,
    /// Judged unsupported.
    pub unsupported: usize,
    /// Judged contradicted.
    pub contradicted: usize,
    /// Model calls of the check.
    pub calls: u32,
    /// Their input tokens.
    pub input_tokens: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// Their cost, when the model's price is known.
    pub cost_usd: Option<f64>,
    /// Why the check stopped early, if it did (budget, model failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// One claim of the answer with its citations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimReport {
    /// The claim's text.
    pub text: String,
    /// Byte span of the claim in the answer.
    pub start: usize,
    /// End of that span.
    pub end: usize,
    /// The citations that back (or fail to back) it.
    pub citations: Vec<Citation>,
    /// Whether it is backed.
    pub support: Support,
    /// Who supplied the backing citation: `model`, `engine`, or `none`.
    pub origin: String,
    /// The semantic check's judgment, when it ran and the claim had a quote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Claims supported out of claims made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Grounded {
    /// Claims in the answer (structure such as headings excluded).
    pub claims: usize,
    /// Claims backed by a quote found in its chunk.
    pub supported: usize,
    /// Of those, backed by a citation the engine attached.
    pub engine_attached: usize,
    /// The semantic check, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<SemanticSummary>,
    /// Coverage, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// The claims of `answer` and their support, from the model's verified
/// citations, the ledger, then the corpus.
pub fn ground(
    answer: &str,
    question: &str,
    verification: &VerificationReport,
    ledger: &Ledger,
    corpus: &Corpus,
) -> (Vec<ClaimReport>, Grounded) {
    let ledger_chunks: Vec<SourceChunk> = ledger
        .chunk_ids()
        .iter()
        .filter_map(|id| corpus.chunk(id))
        .collect();
    let mut reports = Vec::new();
    let mut grounded = Grounded::default();
    for c in claims::claims(answer) {
        if c.structural {
            continue;
        }
        let text = answer[c.start..c.end].trim().to_string();
        let own: Vec<Citation> = verification
            .citations
            .iter()
            .filter(|x| x.answer_offset >= c.start && x.answer_offset < c.end)
            .cloned()
            .collect();
        // Source references in prose ("the passage from chunk:ab12-0 says",
        // a path, a malformed marker) name where the model read the claim,
        // not what it says: they are no terms to match, and the chunks they
        // name are looked at first.
        let (claim_text, named) = without_source_refs(&strip_markers(&text), corpus);
        let (numbers, words) = claim_terms(&claim_text);
        if numbers.is_empty()
            && words.is_empty()
            && !own.iter().any(|x| x.status == CitationStatus::Verified)
        {
            // Punctuation, a stray `]]`, "see [[chunk:ID]]": nothing to back.
            continue;
        }
        grounded.claims += 1;
        if own.iter().any(|x| x.status == CitationStatus::Verified) {
            grounded.supported += 1;
            reports.push(ClaimReport {
                text,
                start: c.start,
                end: c.end,
                citations: own,
                support: Support::Supported,
                origin: "model".into(),
                verdict: None,
            });
            continue;
        }
        // A one-word answer ("Tromso") is searched with the question's words.
        let query = if is_short(&claim_text) {
            format!("{claim_text} {question}")
        } else {
            claim_text.clone()
        };
        let looked_at: Vec<SourceChunk> = named
            .into_iter()
            .chain(ledger_chunks.iter().cloned())
            .collect();
        let attached = support_from(&claim_text, question, &looked_at)
            .or_else(|| support_from(&claim_text, question, &search_chunks(corpus, &query)))
            .map(|(chunk, offset, quote)| {
                let mut cite = engine_citation(c.start, &chunk, offset, quote);
                cite.line = line_of(corpus, chunk.doc_index, cite.byte_start);
                cite
            });
        let mut citations = own;
        let (support, origin) = match attached {
            Some(cite) => {
                citations.push(cite);
                grounded.supported += 1;
                grounded.engine_attached += 1;
                (Support::Supported, "engine")
            }
            None => (Support::Unsupported, "none"),
        };
        reports.push(ClaimReport {
            text,
            start: c.start,
            end: c.end,
            citations,
            support,
            origin: origin.into(),
            verdict: None,
        });
    }
    (reports, grounded)
}

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
            let (claim, named) =
                without_source_refs(&strip_markers(&answer[c.start..c.end]), corpus);
            let looked_at: Vec<SourceChunk> =
                named.into_iter().chain(chunks.iter().cloned()).collect();
            support_from(&claim, question, &looked_at).is_some()
        })
}

/// The excerpts of `passages` (chunk id, text) that share the most content
/// words with `question`: a sentence and the one after it (a question
/// often names its subject in one sentence and its answer sits in the
/// next), sharing at least two of the words and a third of them; best first
/// (the earlier on a tie), no two overlapping, at most `n`, each verbatim
/// with its chunk id.
pub(crate) fn question_sentences(
    question: &str,
    passages: &[(&str, &str)],
    n: usize,
) -> Vec<(String, String)> {
    let (numbers, mut wanted) = claim_terms(question);
    wanted.extend(numbers);
    // (shared, passage, first sentence, span in the passage)
    let mut scored: Vec<(usize, usize, usize, usize, usize)> = Vec::new();
    for (p, (_, passage)) in passages.iter().enumerate() {
        let sents = sentences(passage);
        let tokens: Vec<HashSet<String>> = sents
            .iter()
            .map(|(_, sentence)| text::words(sentence).collect())
            .collect();
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
        let (id, passage) = passages[p];
        out.push((id.to_string(), passage[start..end].to_string()));
    }
    out
}

/// Documents that match the question's words but back no claim (opt-in,
/// for questions that ask for all items: what the answer may have missed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Documents among the question's full-text hits.
    pub matching: usize,
    /// Of those, documents a supported claim cites.
    pub cited: usize,
    /// The others' paths, best match first.
    pub uncited: Vec<String>,
}

/// Full-text hits looked at for coverage.
const COVERAGE_HITS: usize = 100;

/// The documents matching `question` that no supported claim cites.
pub fn coverage(question: &str, claims: &[ClaimReport], corpus: &Corpus) -> Coverage {
    let cited: HashSet<usize> = claims
        .iter()
        .filter(|c| c.support == Support::Supported)
        .flat_map(|c| c.citations.iter())
        .filter(|c| c.status == CitationStatus::Verified)
        .filter_map(|c| c.doc_index)
        .collect();
    let mut matching: Vec<(usize, String)> = Vec::new();
    for h in corpus
        .store()
        .search(question, COVERAGE_HITS)
        .unwrap_or_default()
    {
        if let Some(i) = corpus.index_of(&h.doc_id)
            && !matching.iter().any(|(j, _)| *j == i)
        {
            matching.push((i, h.path));
        }
    }
    Coverage {
        matching: matching.len(),
        cited: matching.iter().filter(|(i, _)| cited.contains(i)).count(),
        uncited: matching
            .into_iter()
            .filter(|(i, _)| !cited.contains(i))
            .map(|(_, p)| p)
            .collect(),
    }
}

/// Claims the semantic check can judge in one call.
pub(crate) const SEMANTIC_BATCH: usize = 15;

/// The quotes a claim is checked against.
fn quotes_of(claim: &ClaimReport) -> Vec<&str> {
    claim
        .citations
        .iter()
        .filter(|c| c.status == CitationStatus::Verified)
        .filter_map(|c| c.quote.as_deref())
        .collect()
}

/// Indexes of the claims the semantic check can judge (those with a
/// verified quote).
pub(crate) fn checkable(claims: &[ClaimReport]) -> Vec<usize> {
    (0..claims.len())
        .filter(|&i| !quotes_of(&claims[i]).is_empty())
        .collect()
}

/// The semantic check's prompt for `batch` (indexes into `claims`).
pub(crate) fn semantic_prompt(claims: &[ClaimReport], batch: &[usize]) -> String {
    let mut listing = String::new();
    for (n, &i) in batch.iter().enumerate() {
        listing.push_str(&format!(
            "Claim {}: {}\n",
            n + 1,
            strip_markers(&claims[i].text).trim()
        ));
        for q in quotes_of(&claims[i]) {
            listing.push_str(&format!("  Quote: \"{q}\"\n"));
        }
    }
    crate::prompts::render(crate::prompts::SEMANTIC_CHECK, &[("claims", &listing)])
}

/// The verdicts of a reply, one per claim of a batch of `n` (`None` where
/// the reply gave none).
pub(crate) fn parse_verdicts(reply: &str, n: usize) -> Vec<Option<Verdict>> {
    let mut out = vec![None; n];
    let Some(v) = crate::parse::parse_json_object(reply) else {
        return out;
    };
    for item in v["verdicts"].as_array().into_iter().flatten() {
        let Some(k) = item["claim"].as_u64().map(|k| k as usize) else {
            continue;
        };
        let verdict = match item["verdict"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("supported") => Verdict::Supported,
            Some("partly") | Some("partly supported") | Some("partial") => Verdict::Partly,
            Some("unsupported") => Verdict::Unsupported,
            Some("contradicted") => Verdict::Contradicted,
            _ => continue,
        };
        if (1..=n).contains(&k) {
            out[k - 1] = Some(verdict);
        }
    }
    out
}

/// Flags claims the check found unsupported or contradicted in `text` (or,
/// when `drop`, removes them), keeping every claim's span in step.
pub(crate) fn flag_by_verdict(text: &mut String, claims: &mut [ClaimReport], drop: bool) {
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(claims[i].start));
    for i in order {
        let flag = match claims[i].verdict {
            Some(Verdict::Unsupported) => "[not supported by its source]",
            Some(Verdict::Contradicted) => "[contradicted by its source]",
            _ => continue,
        };
        let (start, end) = (claims[i].start, claims[i].end);
        if end > text.len() || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
            continue;
        }
        let replacement = if drop {
            String::new()
        } else {
            format!("{} {flag}", text[start..end].trim_end())
        };
        let delta = replacement.len() as isize - (end - start) as isize;
        text.replace_range(start..end, &replacement);
        claims[i].end = start + replacement.len();
        for c in claims.iter_mut().filter(|c| c.start > start) {
            c.start = (c.start as isize + delta) as usize;
            c.end = (c.end as isize + delta) as usize;
            for cite in &mut c.citations {
                cite.answer_offset = (cite.answer_offset as isize + delta).max(0) as usize;
            }
        }
    }
}

/// The 1-based line of document `index` that byte `at` falls on.
fn line_of(corpus: &Corpus, index: usize, at: Option<u64>) -> Option<u32> {
    let text = corpus.document_text(index).ok()?;
    let at = (at? as usize).min(text.len());
    let before = text.get(..at)?;
    Some(before.matches('\n').count() as u32 + 1)
}

fn strip_markers(text: &str) -> String {
    let mut out = text.to_string();
    for m in crate::citations::extract_citations(text).iter().rev() {
        out.replace_range(m.offset..m.offset + m.marker.len(), " ");
    }
    out
}

/// `text` without the references to sources it holds (chunk ids, with or
/// without `chunk:` and brackets; document paths), and the chunks it names
/// that exist.
fn without_source_refs(text: &str, corpus: &Corpus) -> (String, Vec<SourceChunk>) {
    let mut named: Vec<SourceChunk> = Vec::new();
    let mut kept: Vec<&str> = Vec::new();
    for token in text.split_whitespace() {
        let bare = token.trim_matches(|c: char| !c.is_alphanumeric() && c != ':');
        let (prefixed, id) = match bare.strip_prefix("chunk:") {
            Some(id) => (true, id.trim_matches(|c: char| !c.is_alphanumeric())),
            None => (false, bare),
        };
        let chunk = corpus.chunk(id);
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

fn search_chunks(corpus: &Corpus, claim: &str) -> Vec<SourceChunk> {
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
/// content words (three letters or more, not stop words).
fn claim_terms(claim: &str) -> (Vec<String>, Vec<String>) {
    let mut numbers = Vec::new();
    let mut words = Vec::new();
    for lower in text::words(claim) {
        if lower.chars().any(|c| c.is_ascii_digit()) {
            if !numbers.contains(&lower) {
                numbers.push(lower);
            }
        } else if lower.chars().count() >= 3
            && !text::STOP_WORDS.contains(&lower.as_str())
            && !words.contains(&lower)
        {
            words.push(lower);
        }
    }
    (numbers, words)
}

/// True for a claim of a single term (a one-word or one-number answer).
fn is_short(claim: &str) -> bool {
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
fn support_from(
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

fn engine_citation(
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn verdicts_parse_and_flag() {
        let v = parse_verdicts(
            r#"{"verdicts": [{"claim": 2, "verdict": "contradicted"}, {"claim": 1, "verdict": "supported"}, {"claim": 9, "verdict": "supported"}]}"#,
            3,
        );
        assert_eq!(
            v,
            vec![Some(Verdict::Supported), Some(Verdict::Contradicted), None]
        );
        let mut text = "A is 1. B is 2. C is 3.".to_string();
        let claim = |start: usize, end: usize, verdict| ClaimReport {
            text: String::new(),
            start,
            end,
            citations: Vec::new(),
            support: Support::Supported,
            origin: "model".into(),
            verdict,
        };
        let mut claims = vec![
            claim(0, 7, Some(Verdict::Supported)),
            claim(8, 15, Some(Verdict::Contradicted)),
            claim(16, 23, Some(Verdict::Unsupported)),
        ];
        flag_by_verdict(&mut text, &mut claims, false);
        assert_eq!(
            text,
            "A is 1. B is 2. [contradicted by its source] C is 3. [not supported by its source]"
        );
        assert_eq!(
            &text[claims[2].start..claims[2].end],
            "C is 3. [not supported by its source]"
        );
        let mut text = "A is 1. B is 2. C is 3.".to_string();
        let mut claims = vec![claim(0, 7, None), claim(8, 15, Some(Verdict::Contradicted))];
        flag_by_verdict(&mut text, &mut claims, true);
        assert_eq!(text, "A is 1.  C is 3.");
    }

    #[test]
    fn source_references_in_prose_are_no_terms_and_quotes_are_no_query_syntax() {
        let event = "Media day was re-branded as Super Bowl Opening Night. \
            The event was held on February 1, 2016 at SAP Center. \
            It featured player introductions on a replica of the Golden Gate Bridge.";
        let corpus = Corpus::in_memory(
            &[
                rlm_corpus::MemoryDocument::new(
                    "notes/harbour.txt",
                    "The harbour opened in 1840. Ships came from the north.",
                ),
                rlm_corpus::MemoryDocument::new("notes/event.txt", event),
            ],
            2000,
        )
        .unwrap();
        let id = rlm_corpus::chunk_id(&rlm_corpus::document_id("notes/event.txt"), 0);
        let answer = format!(
            "The passage from chunk:{id} says: \"The event was held on February 1, 2016 at SAP Center.\"\n\
             [[chunk:{id}] A replica of the Golden Gate Bridge was present at Super Bowl Opening Night. ]]\n\
             According to corpus/notes/event.txt, the media day was re-branded as Super Bowl Opening Night.\n"
        );
        let report = crate::citations::verify(&answer, &corpus);
        let (claims, grounded) = ground(&answer, "", &report, &Ledger::default(), &corpus);
        // The stray `]]` is no claim; the three sentences are, each backed by
        // the event note although no search for the claim as typed finds it
        // (a quote is a phrase query, an id or a path holds no word of it).
        assert_eq!(grounded.claims, 3, "{claims:#?}");
        assert_eq!(grounded.supported, 3, "{claims:#?}");
        for c in &claims {
            let cite = c
                .citations
                .iter()
                .find(|x| x.origin == CitationOrigin::Engine)
                .unwrap();
            assert_eq!(cite.chunk_id.as_deref(), Some(id.as_str()), "{c:#?}");
            assert!(event.contains(cite.quote.as_deref().unwrap()), "{c:#?}");
        }
        // The claim joining the first and third sentences is quoted over all three.
        assert!(
            claims[1].citations[0]
                .quote
                .as_deref()
                .unwrap()
                .starts_with("Media day")
        );
        // A reference does not back what the passage does not say.
        let wrong =
            format!("The passage chunk:{id} says the replica was of the Eiffel Tower in Paris.");
        let report = crate::citations::verify(&wrong, &corpus);
        let (_, grounded) = ground(&wrong, "", &report, &Ledger::default(), &corpus);
        assert_eq!((grounded.claims, grounded.supported), (1, 0));
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
            (
                "a-0",
                "Newcastle keeps a medieval street layout. Stairs lead to the Castle Keep.",
            ),
            (
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
        let passages = [(
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
        SourceChunk {
            id: "d-0".into(),
            doc_id: "d".into(),
            doc_index: 0,
            path: "a.txt".into(),
            byte_start: 100,
            byte_end: 100 + text.len() as u64,
            text: text.into(),
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
