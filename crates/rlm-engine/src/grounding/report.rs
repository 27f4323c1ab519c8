//! What grounding reports: each claim's support, quote check and citations,
//! the summary of a run, the entailment judge's verdicts and coverage.

use serde::{Deserialize, Serialize};

use crate::citations::{Citation, ClaimOrigin, Source};
use crate::text::named_enum;

named_enum! {
    /// Whether a passage of the documents states a claim. Finding a passage
    /// (the model's verified quote, or one the engine found by the claim's
    /// words) only makes it a candidate: a claim is `supported` when the
    /// judge finds that the passage entails it.
    pub enum Support {
        /// Its passage entails it (judged).
        Supported = "supported",
        /// A passage was found, but the judge did not find that it states
        /// the claim: shown as related, never as support.
        Related = "related",
        /// The judge found that its passage states something that
        /// conflicts with it.
        Contradicted = "contradicted",
        /// A passage was found, but no judge gave a usable verdict (the
        /// check was off, its reply was malformed, the call failed, the
        /// budget was out): never shown as support.
        Unverified = "unverified",
        /// No passage found.
        Unsupported = "unsupported",
    }
}

named_enum! {
    /// The entailment judge's verdict on a claim and its passage.
    pub enum Verdict {
        /// The passage states the claim, all of it. (Answers written before
        /// the judge decided support said `supported`.)
        #[serde(alias = "supported")]
        Entailed = "entailed",
        /// The passage does not state it (or only part of it).
        #[serde(alias = "partly", alias = "unsupported")]
        NotEntailed = "not_entailed",
        /// The passage states something that conflicts with it.
        Contradicted = "contradicted",
        /// The sentence states no fact: a remark about the material or the
        /// answer, the question said back, list or table scaffolding. Such
        /// sentences are dropped from the claims.
        NotAClaim = "not_a_claim",
    }
}

named_enum! {
    /// The mechanical quote check of a claim, reported apart from
    /// entailment: whether the quote shown for it is verbatim in its chunk.
    pub enum QuoteCheck {
        /// A quote the model wrote is in the chunk it cites.
        Verified = "verified",
        /// The model cited the claim, but no quote of its was found in the
        /// cited chunk (or the id does not exist, or there was no quote).
        NotFound = "not_found",
        /// The model did not cite the claim; the quote is the one the
        /// engine attached, verbatim from its chunk.
        Engine = "engine",
        /// No quote at all.
        None = "none",
    }
}

impl Support {
    /// In words, for the surfaces that list claims.
    pub fn label(self) -> &'static str {
        match self {
            Support::Supported => "entailed by its passage",
            Support::Related => "related: its passage does not state it",
            Support::Contradicted => "contradicted by its passage",
            Support::Unverified => "unverified: no verdict on its passage",
            Support::Unsupported => "no passage found",
        }
    }
}

impl QuoteCheck {
    /// In words, for the surfaces that list claims.
    pub fn label(self) -> &'static str {
        match self {
            QuoteCheck::Verified => "quote verified",
            QuoteCheck::NotFound => "the model's quote is not in its source",
            QuoteCheck::Engine => "quote verified (attached by the engine)",
            QuoteCheck::None => "no quote",
        }
    }
}

/// A claim report read without a quote check (written before there was
/// one) had none.
fn no_quote_check() -> QuoteCheck {
    QuoteCheck::None
}

/// What the entailment judge found, and what it cost (shown apart from the
/// answer's own cost; it is part of the run's usage and budget).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SemanticSummary {
    /// Claims given a verdict (by a call or from the cache).
    pub checked: usize,
    /// Judged entailed by their passage.
    #[serde(default)]
    pub entailed: usize,
    /// Judged not entailed.
    #[serde(default)]
    pub not_entailed: usize,
    /// Judged contradicted.
    pub contradicted: usize,
    /// Sentences judged not to be claims (dropped from the claims).
    #[serde(default)]
    pub not_claims: usize,
    /// Claims with a passage the judge gave no usable verdict.
    #[serde(default)]
    pub no_verdict: usize,
    /// Verdicts taken from the cache (no call made for them).
    #[serde(default)]
    pub cached: usize,
    /// Claims entailed without a call: their passage holds them word for
    /// word.
    #[serde(default)]
    pub verbatim: usize,
    /// Model calls of the judge.
    pub calls: u32,
    /// Their input tokens.
    pub input_tokens: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// Their cost, when the model's price is known.
    pub cost_usd: Option<f64>,
    /// Why the judge stopped early, if it did (budget, model failure).
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
    /// The citations of the claim: the model's (checked), and the one the
    /// engine attached when none of the model's was verified.
    pub citations: Vec<Citation>,
    /// Whether a passage entails it.
    pub support: Support,
    /// Whether the quote shown for it is verbatim in its chunk (apart from
    /// whether it entails the claim).
    #[serde(default = "no_quote_check")]
    pub quote_check: QuoteCheck,
    /// Who supplied the passage: `model`, `engine`, or `none`.
    pub origin: ClaimOrigin,
    /// The judge's verdict, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// The passage the judge reads: the quotes with a little of the text
    /// around them in their chunks; empty when none was found.
    #[serde(skip)]
    pub(crate) passage: String,
}

impl ClaimReport {
    /// The 1-based numbers, in `passages`, of this claim's verified
    /// citations (a surface numbers the answer's sources, then its related
    /// passages, and refers to them by number).
    pub fn passage_numbers(&self, passages: &[Source]) -> Vec<usize> {
        let mut numbers: Vec<usize> = self
            .citations
            .iter()
            .filter(|c| c.status.is_valid())
            .filter_map(|c| {
                passages.iter().position(|s| {
                    // Not by line: surfaces fill in the lines of the sources.
                    c.path.as_deref() == Some(s.path.as_str())
                        && c.chunk_id == s.chunk_id
                        && c.quote.as_deref() == Some(s.quote.as_str())
                })
            })
            .map(|i| i + 1)
            .collect();
        numbers.dedup();
        numbers
    }
}

/// The claims of an answer by outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Grounded {
    /// Claims in the answer (structure, and sentences the judge found are
    /// no claims, excluded).
    pub claims: usize,
    /// Claims a passage entails.
    pub supported: usize,
    /// Of those, backed by a passage the engine found.
    pub engine_attached: usize,
    /// Claims with a passage that does not entail them.
    #[serde(default)]
    pub related: usize,
    /// Claims their passage contradicts.
    #[serde(default)]
    pub contradicted: usize,
    /// Claims with a passage but no usable verdict.
    #[serde(default)]
    pub unverified: usize,
    /// Claims with no passage.
    #[serde(default)]
    pub unsupported: usize,
    /// The entailment judge, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<SemanticSummary>,
    /// Coverage, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

impl Grounded {
    /// The counts of `claims` (the judge's summary and coverage kept).
    pub(crate) fn recount(&mut self, claims: &[ClaimReport]) {
        let count = |s: Support| claims.iter().filter(|c| c.support == s).count();
        self.claims = claims.len();
        self.supported = count(Support::Supported);
        self.engine_attached = claims
            .iter()
            .filter(|c| c.support == Support::Supported && c.origin == ClaimOrigin::Engine)
            .count();
        self.related = count(Support::Related);
        self.contradicted = count(Support::Contradicted);
        self.unverified = count(Support::Unverified);
        self.unsupported = count(Support::Unsupported);
    }
}

/// Documents that match the question but back no claim (opt-in,
/// for questions that ask for all items: what the answer may have missed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Documents among the question's full-text hits.
    pub matching: usize,
    /// Of those, documents a claim's passage comes from.
    pub cited: usize,
    /// The others' paths, best match first.
    pub uncited: Vec<String>,
}
