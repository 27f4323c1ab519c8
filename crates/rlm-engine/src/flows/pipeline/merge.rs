//! Per-file summaries, the cross-file merge, the citation policy of the
//! `pipeline` and `rag` flows, and the answer.
//!
//! Policy: the answer is split into claims (sentences and list items; the
//! citation markers after a sentence belong to it). A claim is supported when
//! at least one of its citations verifies. `strict` drops unsupported claims
//! and lists them in `flow_report.dropped_claims`; `best_effort` keeps them and
//! lists in `flow_report.unsupported_claims` those no passage the engine
//! attached backs either. Headings and short lines ending in `:` are
//! structure, not claims.

use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use serde_json::{Value, json};

use super::file::{FileCtx, call_failure};
use crate::answer::{FileSummary, Intent};
use crate::prompts::render;
use crate::retrieval::{FileChunk, excerpts};
use crate::run::{CallError, ROOT_AGENT, Run};
use crate::text::head;
use crate::trace::CallPurpose;

/// Prompt of a per-file summary.
pub const SUMMARY_PROMPT: &str = include_str!("../../../prompts/pipeline/summary.md");
/// Prompt of the cross-file merge.
pub const MERGE_PROMPT: &str = include_str!("../../../prompts/pipeline/merge.md");

/// The passages as prompts show them: `[chunk:ID]` then the text, within
/// `max_chars` in total.
pub(crate) fn passages(chunks: &[FileChunk], max_chars: usize) -> String {
    let mut out = String::new();
    let mut left = max_chars;
    for c in chunks {
        if left == 0 {
            break;
        }
        let text = head(&c.text, left);
        left = left.saturating_sub(text.chars().count());
        out.push_str(&format!("[chunk:{}]\n{}\n\n", c.id, text.trim_end()));
    }
    out
}

/// The summary of one file from its selected chunks; when the call fails,
/// the excerpts of the chunks (a `fallback` event says why). Returns the
/// summary and why the run is partial, if a budget refused the call.
pub(crate) async fn summarize_file(
    f: &Arc<FileCtx>,
    chosen: &[FileChunk],
    extracted: Option<&Value>,
) -> (String, Option<String>) {
    if chosen.is_empty() {
        return ("No passage of this file was selected.".into(), None);
    }
    let extracted = extracted
        .map(|v| {
            format!(
                "Facts extracted by the inspector: {}\n",
                head(&v.to_string(), 2000)
            )
        })
        .unwrap_or_default();
    let prompt = render(
        SUMMARY_PROMPT,
        &[
            ("question", &f.question),
            ("intent", &f.intent.describe()),
            ("file", &f.file.path),
            ("extracted", &extracted),
            (
                "chunks",
                &passages(chosen, f.cfg.max_total_chars_for_summary),
            ),
        ],
    );
    let r =
        f.fx.call(
            &f.agent,
            1,
            ModelRole::Root,
            &[Message::user(prompt)],
            f.cfg.summary_model.clone(),
            CallPurpose::Summary,
        )
        .await;
    match r {
        Ok(text) if !text.trim().is_empty() => {
            f.fx.step(
                &f.agent,
                "summary",
                format!("{}: summary of {} chunk(s)", f.file.path, chosen.len()),
                json!({"chunks": chosen.iter().map(|c| &c.id).collect::<Vec<_>>()}),
            );
            (text.trim().to_string(), None)
        }
        other => {
            let (budget, reason) = match &other {
                Err(e) => call_failure(e),
                Ok(_) => (false, "the summary reply was empty".to_string()),
            };
            f.fallback(
                "summary",
                &format!("{reason}; the summary lists the selected passages instead"),
            );
            (excerpts(chosen), budget.then_some(reason))
        }
    }
}

fn summaries_block(summaries: &[FileSummary]) -> String {
    summaries
        .iter()
        .enumerate()
        .map(|(i, s)| format!("## File {}: {}\n{}\n", i + 1, s.path, s.summary.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Without a model: the file summaries one after another.
pub(crate) fn summaries_as_answer(summaries: &[FileSummary]) -> String {
    summaries_block(summaries)
}

/// The cross-file merge call.
pub(crate) async fn merge(
    fx: &Run,
    question: &str,
    intent: &Intent,
    summaries: &[FileSummary],
    model: Option<String>,
) -> Result<String, CallError> {
    let prompt = render(
        MERGE_PROMPT,
        &[
            ("question", question),
            ("intent", &intent.describe()),
            ("summaries", &summaries_block(summaries)),
        ],
    );
    let text = fx
        .call(
            ROOT_AGENT,
            0,
            ModelRole::Root,
            &[Message::user(prompt)],
            model,
            CallPurpose::Merge,
        )
        .await?;
    if text.trim().is_empty() {
        return Err(CallError::Model("the merge reply was empty".into()));
    }
    fx.step(
        ROOT_AGENT,
        "merge",
        format!("Merged {} file summaries", summaries.len()),
        json!({"files": summaries.len()}),
    );
    Ok(text.trim().to_string())
}
