//! What an agent gathered, and the synthesis fallback: when a budget, a cap
//! or a failure stops an agent without a committed answer, one model call
//! writes the answer from its findings, sub-call results, variables and last
//! outputs, and the answer is marked partial.

use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use rlm_sandbox::truncate_output;

use crate::parse::{self, FinalDirective};
use crate::prompts::{self, render};
use crate::run::{CallOpts, Run, SubResult};
use crate::session::Finding;
use crate::trace::{CallPurpose, CommitVia, TraceEvent};

/// What an agent produced.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) answer: String,
    pub(crate) partial_reason: Option<String>,
}

pub(crate) fn material_from_ctx(ctx: &Run, agent: &str, extra: &str) -> String {
    let mut m = String::new();
    let findings = ctx
        .findings
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let all_findings: Vec<&Finding> = ctx.session.findings.iter().chain(findings.iter()).collect();
    if !all_findings.is_empty() {
        m.push_str("Findings recorded:\n");
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
        m.push_str("Sub-call results:\n");
        let per = (40_000 / subs.len()).clamp(500, 8000);
        for s in subs {
            m.push_str(&format!(
                "* Asked: {}\n  Answer: {}\n",
                s.prompt,
                truncate_output(&s.result, per)
            ));
        }
        m.push('\n');
    }
    m.push_str(extra);
    if m.trim().is_empty() {
        m.push_str("(nothing was gathered before the run stopped)");
    }
    truncate_output(&m, 60_000)
}

/// A plain-text account of what was gathered, when no model call can be made.
pub(crate) fn gathered_summary(ctx: &Run, agent: &str, reason: &str, extra: &str) -> String {
    format!(
        "No complete answer was reached ({reason}). What was gathered before stopping:\n\n{}",
        truncate_output(&material_from_ctx(ctx, agent, extra), 8000)
    )
}

/// The synthesis fallback: one call from the gathered material, marked partial.
pub(crate) async fn synthesize(
    ctx: &Arc<Run>,
    agent: &str,
    depth: u32,
    task: &str,
    reason: &str,
    material: String,
) -> Outcome {
    let prompt = render(
        prompts::SYNTHESIS,
        &[
            ("reason", reason),
            ("question", task),
            ("material", &material),
        ],
    );
    let messages = [Message::user(prompt)];
    let role = if depth == 0 {
        ModelRole::Root
    } else {
        ModelRole::Sub
    };
    let answer = match ctx
        .call_model(
            agent,
            depth,
            role,
            &messages,
            0,
            CallOpts::default(),
            CallPurpose::Synthesis,
            0,
        )
        .await
    {
        Ok(resp) if !resp.text.trim().is_empty() => {
            // Models sometimes wrap the synthesis in FINAL(...) anyway.
            match parse::find_prose_final(&resp.text) {
                Some(FinalDirective::Answer(a)) => a,
                _ => resp.text.trim().to_string(),
            }
        }
        _ => format!(
            "No complete answer was reached ({reason}). What was gathered before stopping:\n\n{}",
            truncate_output(&material, 8000)
        ),
    };
    ctx.trace.emit(TraceEvent::Final {
        agent: agent.into(),
        depth,
        answer: answer.clone(),
        via: CommitVia::Synthesis,
        deferred: false,
    });
    Outcome {
        answer,
        partial_reason: Some(reason.to_string()),
    }
}
