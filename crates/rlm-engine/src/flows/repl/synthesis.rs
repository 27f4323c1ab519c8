//! What an agent gathered (findings, sub-call results, variables, last
//! outputs): the notes of the extraction call when an agent stops without a
//! committed answer, and the account given when no model call can be made.

use rlm_sandbox::truncate_output;

use crate::notices::{Notice, write};
use crate::run::{Run, SubResult};
use crate::session::Finding;

/// What an agent produced.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) answer: String,
    pub(crate) partial_reason: Option<String>,
}

/// What the agents wrote down: the findings recorded, the sets their code
/// counted over and the sub-call results of `agent`'s children (empty when
/// there are none).
pub(crate) fn agents_notes(ctx: &Run, agent: &str) -> String {
    let mut m = String::new();
    // A count the code computed survives the agent: a run stopped by its
    // wall clock still reports the number it had.
    let counted: Vec<String> = ctx
        .scans
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|s| !s.by_engine)
        .map(|s| match s.sum {
            Some(sum) => format!("- {}: {} (Σ {sum})\n", s.written(), s.lines),
            None => format!("- {}: {}\n", s.written(), s.lines),
        })
        .collect();
    if !counted.is_empty() {
        m.push_str(&write(Notice::Counted, ctx.notice_language, "", ""));
        m.push('\n');
        m.extend(counted);
        m.push('\n');
    }
    let findings = ctx
        .findings
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let all_findings: Vec<&Finding> = ctx.session.findings.iter().chain(findings.iter()).collect();
    if !all_findings.is_empty() {
        m.push_str(&write(
            Notice::FindingsRecorded,
            ctx.notice_language,
            "",
            "",
        ));
        m.push('\n');
        for f in all_findings {
            m.push_str(&format!(
                "- {}{}\n",
                f.text,
                f.source
                    .as_ref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            ));
        }
        m.push('\n');
    }
    let subs: Vec<SubResult> = ctx
        .sub_results
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|s| s.parent == agent)
        .cloned()
        .collect();
    if !subs.is_empty() {
        let lang = ctx.notice_language;
        m.push_str(&write(Notice::SubCallResults, lang, "", ""));
        m.push('\n');
        let per = (40_000 / subs.len()).clamp(500, 8000);
        let (asked, answered) = (
            write(Notice::Asked, lang, "", ""),
            write(Notice::Answered, lang, "", ""),
        );
        for s in subs {
            m.push_str(&format!(
                "* {asked} {}\n  {answered} {}\n",
                s.prompt,
                truncate_output(&s.result, per)
            ));
        }
        m.push('\n');
    }
    m
}

/// What `agent` gathered, for the extraction call's notes: the agents'
/// notes and `extra` (its variables, last outputs, a deferred draft).
pub(crate) fn material_from_ctx(ctx: &Run, agent: &str, extra: &str) -> String {
    let mut m = agents_notes(ctx, agent);
    m.push_str(extra);
    if m.trim().is_empty() {
        m.push_str("(nothing was gathered before the run stopped)");
    }
    truncate_output(&m, 60_000)
}

/// A plain-text account of what was gathered, when no model call can be made.
pub(crate) fn gathered_summary(ctx: &Run, agent: &str, reason: &str, extra: &str) -> String {
    format!(
        "{}\n\n{}",
        write(Notice::NoCompleteAnswer, ctx.notice_language, reason, ""),
        truncate_output(&material_from_ctx(ctx, agent, extra), 8000)
    )
}
