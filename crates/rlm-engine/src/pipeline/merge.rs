//! Per-file summaries, the cross-file merge, the citation policy of the
//! `pipeline` and `rag` flows, and the answer.
//!
//! Policy: the answer is split into claims (sentences and list items; the
//! citation markers after a sentence belong to it). A claim is supported when
//! at least one of its citations verifies. `strict` drops unsupported claims
//! and lists them in `flow_report.dropped_claims`; `best_effort` keeps them and
//! lists them in `flow_report.unsupported_claims`. Headings and short lines
//! ending in `:` are structure, not claims.

use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use serde_json::{Value, json};

use super::intent::Intent;
use super::retrieve::FileChunk;
use super::{FileCtx, FileSummary, FlowCtx, FlowReport, PIPELINE_AGENT, call_failure};
use crate::citations::{self, CitationPolicy, VerificationReport};
use crate::engine::{Answer, FlowCallError, TraceInfo};
use crate::prompts::render;
use crate::trace::{CallPurpose, TraceEvent};

/// Prompt of a per-file summary.
pub const SUMMARY_PROMPT: &str = include_str!("../../prompts/pipeline/summary.md");
/// Prompt of the cross-file merge.
pub const MERGE_PROMPT: &str = include_str!("../../prompts/pipeline/merge.md");

fn head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

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

/// Without a model: the start of each passage with its citation marker.
pub(crate) fn excerpts(chunks: &[FileChunk]) -> String {
    chunks
        .iter()
        .map(|c| {
            let one: String = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("- {}… [[chunk:{}]]", head(&one, 200), c.id)
        })
        .collect::<Vec<_>>()
        .join("\n")
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
    fx: &FlowCtx,
    question: &str,
    intent: &Intent,
    summaries: &[FileSummary],
    model: Option<String>,
) -> Result<String, FlowCallError> {
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
            PIPELINE_AGENT,
            0,
            ModelRole::Root,
            &[Message::user(prompt)],
            model,
            CallPurpose::Merge,
        )
        .await?;
    if text.trim().is_empty() {
        return Err(FlowCallError::Model("the merge reply was empty".into()));
    }
    fx.step(
        PIPELINE_AGENT,
        "merge",
        format!("Merged {} file summaries", summaries.len()),
        json!({"files": summaries.len()}),
    );
    Ok(text.trim().to_string())
}

/// One claim of an answer: a byte span and whether it is structure.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claim {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) structural: bool,
}

/// Splits an answer into claims: per line, sentences ending in `.`, `!` or
/// `?` followed by space; citation markers (and punctuation) right after a
/// sentence end belong to that sentence; markers are never split.
pub(crate) fn claims(text: &str) -> Vec<Claim> {
    let markers: Vec<(usize, usize)> = citations::extract_citations(text)
        .iter()
        .map(|m| (m.offset, m.offset + m.marker.len()))
        .collect();
    let marker_at = |i: usize| markers.iter().find(|(s, _)| *s == i).map(|(_, e)| *e);
    let inside = |i: usize| {
        markers
            .iter()
            .find(|(s, e)| *s < i && i < *e)
            .map(|(_, e)| *e)
    };
    let mut out = Vec::new();
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let ls = line_start;
        let le = ls + line.trim_end_matches(['\n', '\r']).len();
        line_start += line.len();
        let trimmed = text[ls..le].trim();
        if trimmed.is_empty() {
            continue;
        }
        let has_marker = markers.iter().any(|(s, _)| *s >= ls && *s < le);
        if trimmed.starts_with('#')
            || (trimmed.ends_with(':') && !has_marker && trimmed.len() < 100)
        {
            out.push(Claim {
                start: ls,
                end: le,
                structural: true,
            });
            continue;
        }
        let mut pos = ls;
        let mut i = ls;
        while i < le {
            if let Some(e) = marker_at(i).or_else(|| inside(i)) {
                i = e;
                continue;
            }
            let ch = text[i..].chars().next().unwrap_or(' ');
            let next = i + ch.len_utf8();
            if matches!(ch, '.' | '!' | '?')
                && (next >= le || text[next..].starts_with(char::is_whitespace))
            {
                // Absorb the markers (and closing punctuation) that follow.
                let mut j = next;
                loop {
                    let k = j + (text[j..le].len() - text[j..le].trim_start().len());
                    match marker_at(k) {
                        Some(e) if k < le => {
                            j = e;
                            while j < le && matches!(text.as_bytes()[j], b'.' | b',' | b';') {
                                j += 1;
                            }
                        }
                        _ => break,
                    }
                }
                if !text[pos..j].trim().is_empty() {
                    out.push(Claim {
                        start: pos,
                        end: j,
                        structural: false,
                    });
                }
                pos = j;
                i = j;
                continue;
            }
            i = next;
        }
        if !text[pos..le].trim().is_empty() {
            out.push(Claim {
                start: pos,
                end: le,
                structural: false,
            });
        }
    }
    out
}

/// Applies the policy: returns the text to keep (strict) and the claims
/// without a verified citation.
pub(crate) fn apply_policy(
    text: &str,
    report: &VerificationReport,
    policy: CitationPolicy,
) -> (String, Vec<String>) {
    let cs = claims(text);
    let supported = |c: &Claim| {
        report
            .citations
            .iter()
            .any(|x| x.answer_offset >= c.start && x.answer_offset < c.end && x.status.is_valid())
    };
    let unsupported: Vec<String> = cs
        .iter()
        .filter(|c| !c.structural && !supported(c))
        .map(|c| text[c.start..c.end].trim().to_string())
        .collect();
    if policy == CitationPolicy::BestEffort || unsupported.is_empty() {
        return (text.to_string(), unsupported);
    }
    // Strict: rebuild line by line from the kept claims.
    let mut out = String::new();
    let mut kept_any_claim = false;
    let line_of = |c: &Claim| text[..c.start].matches('\n').count();
    let mut current_line = usize::MAX;
    let mut line_buf = String::new();
    let mut lines: Vec<String> = Vec::new();
    for c in &cs {
        let l = line_of(c);
        if l != current_line {
            if !line_buf.trim().is_empty() {
                lines.push(std::mem::take(&mut line_buf));
            }
            line_buf.clear();
            current_line = l;
        }
        if c.structural || supported(c) {
            kept_any_claim |= !c.structural;
            if !line_buf.is_empty() {
                line_buf.push(' ');
            }
            line_buf.push_str(text[c.start..c.end].trim());
        }
    }
    if !line_buf.trim().is_empty() {
        lines.push(line_buf);
    }
    if kept_any_claim {
        out.push_str(&lines.join("\n"));
    } else {
        out.push_str(
            "No claim of the answer had a verified citation, so the strict citation policy removed all of them (they are listed in dropped_claims).",
        );
    }
    (out, unsupported)
}

/// Verification, the citation policy, the final events and the answer.
pub(crate) fn finish(
    fx: &FlowCtx,
    run_id: String,
    text: String,
    partial_reason: Option<String>,
    mut report: FlowReport,
    summaries: Vec<FileSummary>,
) -> Answer {
    let mut text = text;
    let verification = if fx.config().verify_citations {
        let first = citations::verify(&text, fx.corpus().as_ref());
        let (kept, unsupported) = apply_policy(&text, &first, report.citation_policy);
        let final_report = match report.citation_policy {
            CitationPolicy::Strict if !unsupported.is_empty() => {
                fx.step(
                    PIPELINE_AGENT,
                    "citations",
                    format!(
                        "strict citation policy: {} claim(s) without a verified citation dropped",
                        unsupported.len()
                    ),
                    json!({"dropped": unsupported}),
                );
                report.dropped_claims = unsupported;
                text = kept;
                citations::verify(&text, fx.corpus().as_ref())
            }
            _ => {
                if !unsupported.is_empty() {
                    fx.step(
                        PIPELINE_AGENT,
                        "citations",
                        format!(
                            "best_effort citation policy: {} claim(s) without a verified citation kept",
                            unsupported.len()
                        ),
                        json!({"unsupported": unsupported}),
                    );
                }
                report.unsupported_claims = unsupported;
                first
            }
        };
        fx.trace().emit(TraceEvent::Verification {
            report: serde_json::to_value(&final_report).unwrap_or(Value::Null),
        });
        Some(final_report)
    } else {
        None
    };
    let usage = fx.budget().report();
    fx.trace().emit(TraceEvent::RunFinished {
        partial: partial_reason.is_some(),
        reason: partial_reason.clone(),
        usage: usage.clone(),
    });
    Answer {
        answer: text,
        partial: partial_reason.is_some(),
        partial_reason,
        citations: verification
            .as_ref()
            .map(|r| r.citations.clone())
            .unwrap_or_default(),
        verification,
        usage,
        trace: TraceInfo {
            id: run_id,
            events: fx.trace().len(),
        },
        findings: Vec::new(),
        file_summaries: summaries,
        flow_report: Some(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::citations::{Citation, CitationKind, CitationStatus};

    fn cite(text: &str, marker: &str, ok: bool) -> Citation {
        Citation {
            marker: marker.into(),
            answer_offset: text.find(marker).unwrap(),
            kind: CitationKind::Chunk,
            id: "x".into(),
            quote: None,
            chunk_id: None,
            doc_id: None,
            doc_index: None,
            path: None,
            byte_start: None,
            byte_end: None,
            status: if ok {
                CitationStatus::Verified
            } else {
                CitationStatus::QuoteNotFound
            },
            detail: None,
        }
    }

    #[test]
    fn claims_keep_markers_with_their_sentence() {
        let t = "Skills:\nAlexis knows Rust. [[chunk:a-1 \"Rust. Go.\"]] She likes tea. Bob is tall [[chunk:b-2]].\n- Python [[chunk:a-2]]\n## Notes";
        let cs = claims(t);
        let texts: Vec<&str> = cs.iter().map(|c| t[c.start..c.end].trim()).collect();
        assert_eq!(
            texts,
            [
                "Skills:",
                "Alexis knows Rust. [[chunk:a-1 \"Rust. Go.\"]]",
                "She likes tea.",
                "Bob is tall [[chunk:b-2]].",
                "- Python [[chunk:a-2]]",
                "## Notes"
            ]
        );
        assert!(cs[0].structural && cs[5].structural && !cs[1].structural);
    }

    #[test]
    fn strict_drops_and_best_effort_keeps() {
        let t = "Alexis knows Rust [[chunk:a-1]]. She likes tea. Bob is tall [[chunk:b-2]].";
        let report = VerificationReport {
            citations: vec![
                cite(t, "[[chunk:a-1]]", true),
                cite(t, "[[chunk:b-2]]", false),
            ],
            all_valid: false,
            failed: 1,
            quotes_checked: 0,
        };
        let (kept, dropped) = apply_policy(t, &report, CitationPolicy::Strict);
        assert_eq!(kept, "Alexis knows Rust [[chunk:a-1]].");
        assert_eq!(dropped, ["She likes tea.", "Bob is tall [[chunk:b-2]]."]);
        let (kept, unsupported) = apply_policy(t, &report, CitationPolicy::BestEffort);
        assert_eq!(kept, t);
        assert_eq!(unsupported.len(), 2);
        let (kept, _) = apply_policy(
            "Nothing cited here.",
            &VerificationReport::default(),
            CitationPolicy::Strict,
        );
        assert!(kept.contains("removed all"));
    }
}
