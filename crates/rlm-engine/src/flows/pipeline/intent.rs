//! Intent extraction: one call per question, then frozen for the whole run
//! (the hypothesis inspector and the merge work from it, never re-deriving it).

use rlm_llm::{Message, ModelRole};
use serde_json::Value;

use crate::answer::Intent;
use crate::parse::{json_field, parse_json_object};
use crate::prompts::render;
use crate::run::{ROOT_AGENT, Run};
use crate::trace::{CallPurpose, TraceEvent};

/// Prompt of the intent call.
pub const INTENT_PROMPT: &str = include_str!("../../../prompts/pipeline/intent.md");

/// One call returns the intent; on failure the question itself is the intent
/// (a `fallback` event says why). Either way it is emitted as the `intent`
/// step and never changes afterwards.
pub(crate) async fn extract_intent(fx: &Run, question: &str, model: Option<String>) -> Intent {
    let prompt = render(INTENT_PROMPT, &[("question", question)]);
    let r = fx
        .call(
            ROOT_AGENT,
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
                entity: json_field(&v, "entity"),
                attribute: json_field(&v, "attribute"),
                output_type: json_field(&v, "output_type"),
                semantic_intent: json_field(&v, "semantic_intent"),
            })
            .filter(|i| !i.semantic_intent.is_empty() || !i.attribute.is_empty())
            .ok_or_else(|| "the intent reply was not the JSON object asked for".to_string()),
        Err(e) => Err(e.to_string()),
    };
    let intent = match parsed {
        Ok(i) => i,
        Err(reason) => {
            fx.fallback(
                ROOT_AGENT,
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
        agent: ROOT_AGENT.into(),
        step: "intent".into(),
        message: format!("Intent frozen: {}", intent.describe()),
        data: serde_json::to_value(&intent).unwrap_or(Value::Null),
    });
    intent
}
