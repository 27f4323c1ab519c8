//! Intent extraction (seed 002, once per question, then frozen) and the
//! triage call of `--flow auto` (seed 001).

use rlm_llm::{Message, ModelRole};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{FlowCtx, PIPELINE_AGENT};
use crate::engine::FlowCallError;
use crate::prompts::render;
use crate::trace::{CallPurpose, TraceEvent};

/// Prompt of the intent call.
pub const INTENT_PROMPT: &str = include_str!("../../prompts/pipeline/intent.md");
/// Prompt of the triage call.
pub const TRIAGE_PROMPT: &str = include_str!("../../prompts/pipeline/triage.md");

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

/// The first JSON object in a model reply (fences and prose around it are ignored).
pub fn parse_json_object(reply: &str) -> Option<Value> {
    let start = reply.find('{')?;
    let end = reply.rfind('}')?;
    if end < start {
        return None;
    }
    serde_json::from_str::<Value>(&reply[start..=end])
        .ok()
        .filter(Value::is_object)
}

fn field(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// One call returns the intent; on failure the question itself is the intent
/// (a `fallback` event says why). Either way it is emitted as the `intent`
/// step and never changes afterwards.
pub(crate) async fn extract_intent(fx: &FlowCtx, question: &str, model: Option<String>) -> Intent {
    let prompt = render(INTENT_PROMPT, &[("question", question)]);
    let r = fx
        .call(
            PIPELINE_AGENT,
            0,
            ModelRole::Sub,
            &[Message::user(prompt)],
            model,
            CallPurpose::Intent,
        )
        .await;
    let parsed = match r {
        Ok(text) => parse_json_object(&text)
            .map(|v| Intent {
                entity: field(&v, "entity"),
                attribute: field(&v, "attribute"),
                output_type: field(&v, "output_type"),
                semantic_intent: field(&v, "semantic_intent"),
            })
            .filter(|i| !i.semantic_intent.is_empty() || !i.attribute.is_empty())
            .ok_or_else(|| "the intent reply was not the JSON object asked for".to_string()),
        Err(e) => Err(e.to_string()),
    };
    let intent = match parsed {
        Ok(i) => i,
        Err(reason) => {
            fx.fallback(
                PIPELINE_AGENT,
                "intent",
                &format!("{reason}; the question itself is used as the intent"),
            );
            Intent {
                output_type: "text".into(),
                semantic_intent: question.trim().to_string(),
                ..Intent::default()
            }
        }
    };
    fx.trace().emit(TraceEvent::FlowStep {
        agent: PIPELINE_AGENT.into(),
        step: "intent".into(),
        message: format!("Intent frozen: {}", intent.describe()),
        data: serde_json::to_value(&intent).unwrap_or(Value::Null),
    });
    intent
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

/// One cheap call: `rag` (true) or the RLM flow (false), with the reason.
/// An unusable reply routes to the RLM flow (the product's default) and is
/// logged as a fallback.
pub(crate) async fn triage(fx: &FlowCtx, question: &str, model: Option<String>) -> (bool, String) {
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
            PIPELINE_AGENT,
            0,
            ModelRole::Sub,
            &[Message::user(prompt)],
            model,
            CallPurpose::Triage,
        )
        .await;
    let decision = match r {
        Ok(text) => parse_json_object(&text).and_then(|v| {
            let route = field(&v, "route").to_lowercase();
            let reason = field(&v, "reason");
            match route.as_str() {
                "rag" => Some((true, reason)),
                "rlm" | "repl" | "pipeline" => Some((false, reason)),
                _ => None,
            }
        }),
        Err(FlowCallError::Budget(e)) => {
            fx.fallback(
                PIPELINE_AGENT,
                "triage",
                &format!("{e}; routing to the RLM flow"),
            );
            return (false, format!("triage impossible: {e}"));
        }
        Err(e) => {
            fx.fallback(
                PIPELINE_AGENT,
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
                PIPELINE_AGENT,
                "triage",
                "the triage reply had no route \"rag\" or \"rlm\"; routing to the RLM flow",
            );
            (false, "triage reply unusable".into())
        }
    }
}

/// The `route` step event.
pub(crate) fn emit_route(fx: &FlowCtx, d: &RouteDecision) {
    fx.trace().emit(TraceEvent::FlowStep {
        agent: PIPELINE_AGENT.into(),
        step: "route".into(),
        message: format!("Flow {} selected ({}): {}", d.chosen, d.requested, d.reason),
        data: json!(d),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_in_prose_and_fences() {
        let v = parse_json_object("Sure:\n```json\n{\"entity\": \"Kevin\"}\n```").unwrap();
        assert_eq!(v["entity"], "Kevin");
        assert!(parse_json_object("no json").is_none());
        assert!(parse_json_object("} {").is_none());
    }

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
