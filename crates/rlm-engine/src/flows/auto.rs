//! The `auto` flow: one cheap triage call decides whether the question needs
//! the RLM flow (reading, counting, comparing across documents) or plain
//! retrieval (`rag`) suffices. An unusable triage reply routes to the RLM flow.

use rlm_llm::{Message, ModelRole};

use crate::answer::RouteDecision;
use crate::config::Flow;
use crate::parse::{json_field, parse_json_object};
use crate::prompts::render;
use crate::run::{CallError, ROOT_AGENT, Run};
use crate::trace::CallPurpose;

/// Prompt of the triage call.
pub const TRIAGE_PROMPT: &str = include_str!("../../prompts/pipeline/triage.md");

/// The flow `auto` picks for `question`: `rag` or the configured RLM flow.
pub(crate) async fn route(run: &Run, question: &str) -> (Flow, RouteDecision) {
    let cfg = &run.config().flows;
    let (rag, reason) = triage(run, question, cfg.codegen_model.clone()).await;
    let flow = if rag { Flow::Rag } else { cfg.rlm_flow };
    let decision = RouteDecision {
        requested: "auto".into(),
        chosen: flow.as_str().into(),
        reason,
    };
    (flow, decision)
}

/// One cheap call: `rag` (true) or the RLM flow (false), with the reason.
/// An unusable reply routes to the RLM flow (the product's default) and is
/// logged as a fallback.
async fn triage(fx: &Run, question: &str, model: Option<String>) -> (bool, String) {
    let docs = fx.corpus().documents().len().to_string();
    let chars = fx.corpus().total_chars().to_string();
    let prompt = render(
        TRIAGE_PROMPT,
        &[
            ("documents", &docs),
            ("chars", &chars),
            ("question", question),
        ],
    );
    let r = fx
        .call(
            ROOT_AGENT,
            0,
            ModelRole::Sub,
            &[Message::user(prompt)],
            model,
            CallPurpose::Triage,
        )
        .await;
    let decision = match r {
        Ok(text) => parse_json_object(&text).and_then(|v| {
            let route = json_field(&v, "route").to_lowercase();
            let reason = json_field(&v, "reason");
            match route.as_str() {
                "rag" => Some((true, reason)),
                "rlm" | "repl" | "pipeline" => Some((false, reason)),
                _ => None,
            }
        }),
        Err(CallError::Budget(e)) => {
            fx.fallback(
                ROOT_AGENT,
                "triage",
                &format!("{e}; routing to the RLM flow"),
            );
            return (false, format!("triage impossible: {e}"));
        }
        Err(e) => {
            fx.fallback(
                ROOT_AGENT,
                "triage",
                &format!("{e}; routing to the RLM flow"),
            );
            return (false, format!("triage failed: {e}"));
        }
    };
    match decision {
        Some((rag, reason)) => {
            let reason = if reason.is_empty() {
                "(the triage gave no reason)".to_string()
            } else {
                reason
            };
            (rag, reason)
        }
        None => {
            fx.fallback(
                ROOT_AGENT,
                "triage",
                "the triage reply had no route \"rag\" or \"rlm\"; routing to the RLM flow",
            );
            (false, "triage reply unusable".into())
        }
    }
}
