//! A structured answer's sources, anchored before they are checked: a
//! quote that is verbatim in another passage the run saw names that
//! passage, and a quote that drifts into the model's own words keeps only
//! its verbatim part (see [`grounding::repair`]). Each repair is a trace
//! step, so the change is never silent.

use std::sync::Arc;

use serde_json::{Value, json};

use super::structured::Statement;
use crate::citations::{CitationSource, SourceChunk};
use crate::corpus::Corpus;
use crate::grounding::{self, Repair};
use crate::run::Run;

/// `statements` with their sources anchored to the chunks the run saw and
/// to `listed` (the `chunk:ID` references a call was shown besides).
pub(crate) async fn anchored(
    ctx: &Arc<Run>,
    agent: &str,
    statements: Vec<Statement>,
    listed: Vec<String>,
) -> Vec<Statement> {
    let run = ctx.clone();
    let original = statements.clone();
    let anchored = tokio::task::spawn_blocking(move || {
        let corpus: &Corpus = &run.corpus;
        let mut seen = run.ledger.chunks(corpus);
        for id in listed.iter().filter_map(|r| r.strip_prefix("chunk:")) {
            if !seen.iter().any(|c| c.id == id)
                && let Some(chunk) = corpus.chunk(id)
            {
                seen.push(chunk);
            }
        }
        let mut statements = statements;
        let repairs = anchor(&mut statements, corpus, &seen);
        (statements, repairs)
    })
    .await;
    let Ok((statements, repairs)) = anchored else {
        return original;
    };
    if !repairs.is_empty() {
        ctx.step(
            agent,
            "citations",
            format!(
                "{} source(s) anchored to the passage their quote is from",
                repairs.len()
            ),
            json!({"anchored": repairs}),
        );
    }
    statements
}

/// Anchors each statement's source in place; returns what changed.
fn anchor(
    statements: &mut [Statement],
    corpus: &dyn CitationSource,
    seen: &[SourceChunk],
) -> Vec<Value> {
    let mut repairs = Vec::new();
    for (i, s) in statements.iter_mut().enumerate() {
        let Some(src) = s.source.as_mut() else {
            continue;
        };
        let cited = passage_text(corpus, &src.reference);
        let Some(repair) = grounding::repair(&src.reference, &src.quote, cited.as_deref(), seen)
        else {
            continue;
        };
        let from = std::mem::take(&mut src.reference);
        match repair {
            Repair::Moved { to } => {
                repairs.push(json!({"statement": i, "moved": {"from": from, "to": to}}));
                src.reference = to;
            }
            Repair::Cut { to, kept } => {
                repairs.push(json!({
                    "statement": i,
                    "cut": {"from": from, "to": to, "quote": src.quote, "kept": kept},
                }));
                src.reference = to;
                src.quote = kept;
            }
        }
    }
    repairs
}

/// The text of a `chunk:ID` or `doc:N` reference, if it exists.
fn passage_text(corpus: &dyn CitationSource, reference: &str) -> Option<String> {
    let reference = reference.trim();
    if let Some(id) = reference.strip_prefix("chunk:") {
        return corpus.chunk(id).map(|c| c.text);
    }
    let index: usize = reference.strip_prefix("doc:")?.parse().ok()?;
    if index >= corpus.document_count() {
        return None;
    }
    let chunks = corpus.document_chunks(index);
    (!chunks.is_empty()).then(|| crate::citations::joined(&chunks))
}
