//! What a question produces: the [`Answer`] every flow returns, the reports
//! that say what shaped it (route, frozen intent, retrieval, expansion, per-file
//! summaries), and [`EngineError`] for questions that cannot be attempted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::budget::UsageReport;
pub use crate::citations::Source;
use crate::citations::{Citation, CitationPolicy, VerificationReport};
use crate::config::Inspector;
use crate::grounding::{ClaimReport, Evidence, Grounded, QuoteCheck, Support, Verdict};
use crate::session::Finding;

/// Identifies the trace of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Run id.
    pub id: String,
    /// Events emitted.
    pub events: u64,
}

/// The result of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The answer text (with flags inline under the strict citation policy).
    pub answer: String,
    /// True when the run did not finish normally (budget, cap, cancel).
    pub partial: bool,
    /// Why it is partial.
    pub partial_reason: Option<String>,
    /// Citations found in the answer, resolved and checked.
    pub citations: Vec<Citation>,
    /// The verification report; `None` when verification is off.
    pub verification: Option<VerificationReport>,
    /// Calls, tokens, cost, time.
    pub usage: UsageReport,
    /// The trace.
    pub trace: TraceInfo,
    /// Findings added during this run (the session keeps them).
    pub findings: Vec<Finding>,
    /// The answer's claims, each with its citations (the model's, and one
    /// the engine attached), whether its passage entails it (`support`)
    /// and, apart, whether its quote is verbatim (`quote_check`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimReport>,
    /// The claims by outcome (supported, related, unverified…); `None` when
    /// verification is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounded: Option<Grounded>,
    /// The evidence ledger: what the run's agents saw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// `pipeline` flow: one summary per inspected file, citing its chunks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_summaries: Vec<FileSummary>,
    /// `pipeline`, `rag`, `auto`: route, frozen intent, retrieval, caps,
    /// dropped or unsupported claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_report: Option<FlowReport>,
    /// The answer as JSON following the schema the question asked for
    /// (`--schema`, `response_schema`), each value with its citations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<crate::typed_answer::TypedAnswer>,
    /// The sets the run's code counted over (`grep()`, `grep_count()`), each
    /// counted again when the answer was checked: what an answer about a set
    /// was computed from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted: Vec<crate::scan::CountedSet>,
}

/// Errors that stop a question before it can produce any answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The question is empty.
    #[error(
        "the question is empty; ask something, e.g. rlm ask \"What is the notice period?\" --store DIR"
    )]
    EmptyQuestion,
    /// The store has no documents.
    #[error("the store has no documents; add some with `rlm index PATH --store DIR`")]
    EmptyCorpus,
    /// The sandbox could not start.
    #[error("{0}")]
    Sandbox(rlm_sandbox::SandboxError),
    /// Not one model call succeeded: nothing to answer from.
    #[error("{0}")]
    ModelUnavailable(String),
    /// The schema the answer should follow is not one rlm supports.
    #[error("the answer schema cannot be used: {0}")]
    AnswerSchema(String),
}

/// One inspected file of a `pipeline` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSummary {
    /// Document id.
    pub file_id: String,
    /// Corpus-relative path.
    pub path: String,
    /// The inspector that selected the chunks.
    pub inspector: Inspector,
    /// Retrieved chunks that led to this file.
    pub entry_chunk_ids: Vec<String>,
    /// Chunks of the file that were inspected.
    pub total_chunks: usize,
    /// Chunks the summary was written from, in the order given to it.
    pub selected_chunk_ids: Vec<String>,
    /// The summary, citing its chunks with `[[chunk:ID "quote"]]`.
    pub summary: String,
    /// The inspector's confidence (iterative, hypothesis), if it has one.
    pub confidence: Option<f64>,
    /// Hypothesis inspector: relevance score of every chunk it scored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chunk_confidence: BTreeMap<String, f64>,
    /// Iterative rounds or hypothesis depth reached.
    pub depth: Option<u32>,
    /// Iterative inspector: `extracted_data` accumulated over the rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted_data: Option<Value>,
    /// Whether the selected chunks were ordered most recent first.
    pub recency_ordered: bool,
    /// Every fallback taken for this file, with its reason.
    pub fallbacks: Vec<String>,
    /// Position of the file in retrieval order (answers list files in it).
    #[serde(skip)]
    pub(crate) rank: usize,
}

/// What shaped an answer of `pipeline`, `rag` or `auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    /// The flow that produced the answer (`pipeline` or `rag`).
    pub flow: String,
    /// How the flow was chosen (`RLM_ENABLED` or triage).
    pub route: Option<RouteDecision>,
    /// The frozen intent (pipeline).
    pub intent: Option<Intent>,
    /// Stage-1 retrieval.
    pub retrieval: Option<RetrievalReport>,
    /// Chunk → file expansion and what the caps cut (pipeline).
    pub expansion: Option<ExpansionReport>,
    /// The inspector used (pipeline).
    pub inspector: Option<Inspector>,
    /// The citation policy applied.
    pub citation_policy: CitationPolicy,
    /// `strict`: claims removed because no citation of theirs was verified.
    pub dropped_claims: Vec<String>,
    /// `best_effort`: claims kept although no verified citation backs them,
    /// neither the answer's own nor a passage the engine attached: the
    /// claims `grounded` counts as without a passage, never one it counts
    /// as supported (empty when the answer was not grounded).
    pub unsupported_claims: Vec<String>,
}

/// The decision of `--flow auto`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteDecision {
    /// The flow requested (`auto`, or `configured` when RLM_ENABLED decided).
    pub requested: String,
    /// The flow that ran.
    pub chosen: String,
    /// Why.
    pub reason: String,
}

impl Answer {
    /// The claims no passage found supports, as written (what every surface
    /// lists under the answer). Claims with a passage that does not entail
    /// them are [`Answer::related_sources`]' claims, not these.
    pub fn unsupported_claims(&self) -> Vec<&str> {
        self.claims
            .iter()
            .filter(|c| c.support == Support::Unsupported)
            .map(|c| c.text.as_str())
            .collect()
    }

    /// The sources of the supported claims (those their passage entails):
    /// each claim's citations whose quote verified, in answer order, each
    /// place and quote once. Without a claims report (grounding off), the
    /// valid citations of the answer as written.
    pub fn sources(&self) -> Vec<Source> {
        if self.grounded.is_none() {
            return distinct_sources(self.citations.iter());
        }
        self.sources_where(|s| s == Support::Supported)
    }

    /// The passages found for claims they do not support: not judged to
    /// entail their claim (related), contradicting it, or not judged at all
    /// (unverified). Surfaces show them as related, never as support.
    pub fn related_sources(&self) -> Vec<Source> {
        self.sources_where(|s| {
            matches!(
                s,
                Support::Related | Support::Contradicted | Support::Unverified
            )
        })
    }

    /// Each claim as the surfaces list it: its text, whether its passage
    /// entails it and, apart, its quote check, with the numbers of its
    /// passages in [`Answer::sources`] followed by [`Answer::related_sources`].
    pub fn claim_summaries(&self) -> Vec<ClaimSummary> {
        let numbered: Vec<Source> = self
            .sources()
            .into_iter()
            .chain(self.related_sources())
            .collect();
        self.claims
            .iter()
            .map(|c| ClaimSummary {
                text: c.text.clone(),
                support: c.support,
                quote_check: c.quote_check,
                verdict: c.verdict,
                passages: c.passage_numbers(&numbered),
            })
            .collect()
    }

    fn sources_where(&self, wanted: impl Fn(Support) -> bool) -> Vec<Source> {
        distinct_sources(
            self.claims
                .iter()
                .filter(|c| wanted(c.support))
                .flat_map(|c| c.citations.iter()),
        )
    }
}

/// A claim as the surfaces list it (see [`Answer::claim_summaries`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimSummary {
    /// The claim as written.
    pub text: String,
    /// Whether its passage entails it.
    pub support: Support,
    /// Whether its quote is verbatim in its chunk (apart from entailment).
    pub quote_check: QuoteCheck,
    /// The judge's verdict, when it gave one.
    pub verdict: Option<Verdict>,
    /// The 1-based numbers of its passages among the answer's sources
    /// followed by its related passages.
    pub passages: Vec<usize>,
}

/// The valid citations of `cited` as sources, each place and quote once.
fn distinct_sources<'a>(cited: impl Iterator<Item = &'a Citation>) -> Vec<Source> {
    let mut sources: Vec<Source> = Vec::new();
    for c in cited.filter(|c| c.status.is_valid()) {
        let source = Source {
            path: c.path.clone().unwrap_or_else(|| "?".into()),
            line: c.line,
            location: c.location.clone(),
            chunk_id: c.chunk_id.clone(),
            quote: c.quote.clone().unwrap_or_default(),
            attached_by_engine: c.origin == crate::citations::CitationOrigin::Engine,
        };
        if !sources
            .iter()
            .any(|s| s.path == source.path && s.line == source.line && s.quote == source.quote)
        {
            sources.push(source);
        }
    }
    sources
}

/// What the question asks, normalized once and frozen for the whole run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Intent {
    /// Who or what the question is about.
    pub entity: String,
    /// What about it is asked.
    pub attribute: String,
    /// The shape of the answer (list, text, number, ...).
    pub output_type: String,
    /// One sentence: what information would answer the question.
    pub semantic_intent: String,
}

impl Intent {
    /// One line for prompts.
    pub fn describe(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// True when the intent asks about the present (current employer,
    /// latest status): turns recency prioritization on in `auto` mode.
    pub fn asks_about_present(&self, question: &str) -> bool {
        let text =
            format!("{} {} {}", question, self.attribute, self.semantic_intent).to_lowercase();
        text.split(|c: char| !c.is_alphanumeric()).any(|w| {
            matches!(
                w,
                "current"
                    | "currently"
                    | "present"
                    | "presently"
                    | "now"
                    | "latest"
                    | "today"
                    | "still"
                    | "recent"
                    | "recently"
                    | "nowadays"
                    | "ongoing"
            )
        })
    }
}

/// What stage-1 retrieval did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RetrievalReport {
    /// `bm25` (or `hybrid` once the store has embeddings).
    pub mode: String,
    /// Results asked for.
    pub k: usize,
    /// High-recall mode (many entry chunks, `RLM_HIGH_RECALL_K`).
    pub high_recall: bool,
    /// The query sent.
    pub query: String,
    /// Chunks returned.
    pub hits: usize,
    /// Why retrieval failed, if it did.
    pub error: Option<String>,
}

impl RetrievalReport {
    pub(crate) fn failed(e: &str) -> Self {
        RetrievalReport {
            error: Some(e.to_string()),
            ..Default::default()
        }
    }
}

/// What the expansion kept and what the caps cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ExpansionReport {
    /// Files expanded.
    pub files: usize,
    /// Chunks over all expanded files.
    pub total_chunks: usize,
    /// Files left out by `RLM_MAX_FILES` / `RLM_MAX_CHUNKS`.
    pub files_dropped: usize,
    /// Chunks left out (of kept and dropped files).
    pub chunks_dropped: usize,
    /// `RLM_MAX_FILES` applied.
    pub max_files: usize,
    /// `RLM_MAX_CHUNKS` applied.
    pub max_chunks: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_tense_intents() {
        let i = Intent {
            attribute: "current employer".into(),
            ..Intent::default()
        };
        assert!(i.asks_about_present("Where does Kevin work?"));
        assert!(!Intent::default().asks_about_present("List Alexis's skills"));
    }
}
