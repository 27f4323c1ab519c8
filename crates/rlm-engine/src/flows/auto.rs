//! The `auto` flow: one cheap triage call decides whether plain retrieval
//! (`rag`) suffices, the answer is computed over every line (`scan`: the
//! `repl` flow, whose code reads everything with `grep()`), or the question
//! needs the configured RLM flow (reading, comparing across documents). An
//! unusable triage reply routes to the RLM flow.

use rlm_llm::{Message, ModelRole};

use crate::answer::RouteDecision;
use crate::config::Flow;
use crate::parse::{json_field, parse_json_object};
use crate::prompts::render;
use crate::run::{CallError, ROOT_AGENT, Run};
use crate::trace::CallPurpose;

/// Prompt of the triage call.
pub const TRIAGE_PROMPT: &str = include_str!("../../prompts/pipeline/triage.md");

/// What the triage decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// A fact a few passages hold.
    Rag,
    /// Computed over every line: the `repl` flow.
    Scan,
    /// The configured RLM flow.
    Rlm,
}

/// The flow `auto` picks for `question`: `rag`, `repl` for a question about
/// every line, or the configured RLM flow.
pub(crate) async fn route(run: &Run, question: &str) -> (Flow, RouteDecision) {
    let cfg = &run.config().flows;
    let (route, reason) = triage(run, question, cfg.codegen_model.clone()).await;
    let flow = match route {
        Route::Rag => Flow::Rag,
        Route::Scan => Flow::Repl,
        Route::Rlm => cfg.rlm_flow,
    };
    let decision = RouteDecision {
        requested: "auto".into(),
        chosen: flow.as_str().into(),
        reason,
    };
    (flow, decision)
}

/// One cheap call: the route, with the reason. An unusable reply routes to
/// the RLM flow (the product's default) and is logged as a fallback.
async fn triage(fx: &Run, question: &str, model: Option<String>) -> (Route, String) {
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
                "rag" => Some((Route::Rag, reason)),
                "scan" => Some((Route::Scan, reason)),
                "rlm" | "repl" | "pipeline" => Some((Route::Rlm, reason)),
                _ => None,
            }
        }),
        Err(CallError::Budget(e)) => {
            fx.fallback(
                ROOT_AGENT,
                "triage",
                &format!("{e}; routing to the RLM flow"),
            );
            return (Route::Rlm, format!("triage impossible: {e}"));
        }
        Err(e) => {
            fx.fallback(
                ROOT_AGENT,
                "triage",
                &format!("{e}; routing to the RLM flow"),
            );
            return (Route::Rlm, format!("triage failed: {e}"));
        }
    };
    match decision {
        Some((route, reason)) => {
            let reason = if reason.is_empty() {
                "(the triage gave no reason)".to_string()
            } else {
                reason
            };
            (route, reason)
        }
        None => {
            fx.fallback(
                ROOT_AGENT,
                "triage",
                "the triage reply had no route \"rag\", \"scan\" or \"rlm\"; routing to the RLM flow",
            );
            (Route::Rlm, "triage reply unusable".into())
        }
    }
}
