//! What grounding reports: each claim's support and citations, the summary
//! of a run, the semantic check's verdicts and coverage.

use serde::{Deserialize, Serialize};

use crate::citations::{Citation, ClaimOrigin};

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
    pub origin: ClaimOrigin,
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
