//! Grounding: what a run's agents actually saw (the evidence ledger), and,
//! once the answer is committed, the support of each of its claims.
//!
//! A claim (a sentence, list item or table row of the answer) gets a
//! candidate passage: the model's citations whose quote verified (the quote
//! is in the cited chunk), or else a passage the engine finds by the claim's
//! words, first among the chunks in the ledger, then by a full-text search
//! for the claim. The engine's citation quotes the chunk verbatim (a
//! sentence holding every number of the claim and most of its words) with
//! the chunk's span, and says it was the engine's. Shared words only find
//! the passage: a claim is supported when the entailment judge (one batched
//! model call per answer, see [`semantic`]) finds that the passage states
//! it; otherwise the passage is related, or the claim unverified when no
//! usable verdict came. The quote check (is the quote verbatim) is reported
//! apart, as [`QuoteCheck`]. Claims with no passage are unsupported.

mod anchor;
mod cache;
mod coverage;
mod ledger;
mod passage;
mod report;
mod semantic;
mod support;

pub(crate) use anchor::{Repair, repair};
pub use cache::VerdictCache;
pub use coverage::coverage;
pub use ledger::{Evidence, EvidenceKind, Ledger, evidence_of};
pub use report::{ClaimReport, Coverage, Grounded, QuoteCheck, SemanticSummary, Support, Verdict};
pub use semantic::{JUDGE_PROMPT_START, judge_reply, judged_claims};
pub(crate) use semantic::{
    Judgement, flag_by_verdict, judge_prompt, judge_schema, parse_verdicts, record, settle, tally,
};
pub(crate) use support::{backs_a_claim, question_sentences, states_a_fact_of};

use crate::citations::{Citation, CitationStatus, ClaimOrigin, SourceChunk, VerificationReport};
use crate::claims;
use crate::corpus::Corpus;
use support::{
    claim_terms, engine_citation, is_short, line_of, search_chunks, strip_markers, support_from,
    without_source_refs,
};

/// The claims of `answer` and their candidate passages: the model's
/// verified citations, else a passage the engine finds in the ledger, then
/// the corpus. A claim with a passage is `unverified` until the judge
/// gives its verdict ([`settle`]); one without is `unsupported`.
pub fn ground(
    answer: &str,
    question: &str,
    verification: &VerificationReport,
    ledger: &Ledger,
    corpus: &Corpus,
) -> (Vec<ClaimReport>, Grounded) {
    // A passage that speaks the engine's protocol addresses the model: it
    // is never a source the engine attaches.
    let ledger_chunks: Vec<SourceChunk> = ledger
        .chunks(corpus)
        .into_iter()
        .filter(|c| !crate::parse::speaks_the_protocol(&c.text))
        .collect();
    let mut reports = Vec::new();
    for c in claims::claims(answer) {
        if c.structural {
            continue;
        }
        let text = c.said(answer).trim().to_string();
        let own: Vec<Citation> = verification
            .citations
            .iter()
            .filter(|x| x.answer_offset >= c.start && x.answer_offset < c.end)
            .cloned()
            .collect();
        let verified: Vec<&Citation> = own
            .iter()
            .filter(|x| x.status == CitationStatus::Verified)
            .collect();
        // Source references in prose ("the passage from chunk:ab12-0 says",
        // a path, a malformed marker) name where the model read the claim,
        // not what it says: they are no terms to match, and the chunks they
        // name are looked at first.
        let (claim_text, named) = without_source_refs(&strip_markers(&text), corpus);
        let (numbers, words) = claim_terms(&claim_text);
        if numbers.is_empty() && words.is_empty() && verified.is_empty() {
            // Punctuation, a stray `]]`, "see [[chunk:ID]]": nothing to back.
            continue;
        }
        let mut report = ClaimReport {
            text,
            start: c.start,
            end: c.end,
            citations: Vec::new(),
            support: Support::Unverified,
            quote_check: QuoteCheck::Verified,
            origin: ClaimOrigin::Model,
            verdict: None,
            passage: String::new(),
        };
        if !verified.is_empty() {
            report.passage = passage::passage_of(&verified, corpus);
            report.citations = own;
            reports.push(report);
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
            .or_else(|| {
                let found: Vec<SourceChunk> = search_chunks(corpus, &query)
                    .into_iter()
                    .filter(|c| !crate::parse::speaks_the_protocol(&c.text))
                    .collect();
                support_from(&claim_text, question, &found)
            })
            .map(|(chunk, offset, quote)| {
                let mut cite = engine_citation(c.start, &chunk, offset, quote);
                cite.line = line_of(corpus, chunk.doc_index, cite.byte_start);
                cite
            });
        report.quote_check = match (own.is_empty(), &attached) {
            (false, _) => QuoteCheck::NotFound,
            (true, Some(_)) => QuoteCheck::Engine,
            (true, None) => QuoteCheck::None,
        };
        report.citations = own;
        match attached {
            Some(cite) => {
                report.passage = passage::passage_of(&[&cite], corpus);
                report.citations.push(cite);
                report.origin = ClaimOrigin::Engine;
            }
            None => {
                report.support = Support::Unsupported;
                report.origin = ClaimOrigin::Unbacked;
            }
        }
        reports.push(report);
    }
    let mut grounded = Grounded::default();
    grounded.recount(&reports);
    (reports, grounded)
}

/// The citation markers written in the documents the run showed (an
/// injection plants them for the model to copy).
pub(crate) fn injected_markers(ledger: &Ledger, corpus: &Corpus) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for chunk in ledger.chunks(corpus) {
        for raw in crate::citations::extract_citations(&chunk.text) {
            if !out.contains(&raw.marker) {
                out.push(raw.marker);
            }
        }
    }
    out
}

/// Marks the model's citations whose marker, quote and all, is one a
/// document the run showed holds: the model repeated the document's text
/// (an injection plants such markers), it did not cite. They count as
/// failed.
/// `injected` is [`injected_markers`] of the run.
pub(crate) fn mark_copied(report: &mut VerificationReport, injected: &[String]) {
    if injected.is_empty() {
        return;
    }
    for cite in &mut report.citations {
        if cite.origin == crate::citations::CitationOrigin::Model
            && !cite.marker.is_empty()
            && injected.contains(&cite.marker)
        {
            if cite.status.is_valid() {
                report.failed += 1;
            }
            cite.status = CitationStatus::CopiedFromDocument;
            cite.detail = Some(
                "this marker is text of a document the run read, copied into the answer; it is no citation"
                    .into(),
            );
        }
    }
    report.all_valid = report.failed == 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::citations::CitationOrigin;

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
        // Passages found, not judged yet.
        assert_eq!(grounded.unverified, 3, "{claims:#?}");
        assert_eq!(grounded.supported, 0, "{claims:#?}");
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
        assert_eq!((grounded.claims, grounded.unsupported), (1, 1));
    }
}
