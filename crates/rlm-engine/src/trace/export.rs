//! Export of a trace to the reference library's `RLMLogger` JSONL format
//! (`rlm trace export --format rlm-logger`).

use super::{TraceEvent, TraceRecord};

/// Converts a trace to the reference library's (`rlm`, alexzhang13/rlm)
/// `RLMLogger` JSONL format: one `metadata` line, then one `iteration` line per
/// root-agent turn with the prompt (message list), response, code blocks with
/// their results and sub-LLM calls, and the final answer.
pub fn export_rlm_logger(records: &[TraceRecord]) -> Vec<serde_json::Value> {
    use serde_json::{Value, json};
    let mut out = Vec::new();
    let mut meta = json!({"type": "metadata", "timestamp": "", "root_model": "", "max_depth": 1,
        "max_iterations": 0, "backend": "openai", "backend_kwargs": {}, "environment_type": "local",
        "environment_kwargs": {}, "other_backends": null});
    let mut conversation: Vec<Value> = Vec::new();
    // The iteration being assembled: (prompt, response, code blocks, final, start ms).
    struct Iter {
        prompt: Vec<Value>,
        response: String,
        blocks: Vec<Value>,
        final_answer: Option<String>,
        start_ms: u64,
        end_ms: u64,
    }
    let mut cur: Option<Iter> = None;
    let mut pending_calls: Vec<Value> = Vec::new();
    let mut subcall_prompts: std::collections::HashMap<String, (String, u64)> = Default::default();
    let mut n = 0u64;
    let flush = |cur: &mut Option<Iter>, out: &mut Vec<Value>, n: &mut u64| {
        if let Some(it) = cur.take() {
            *n += 1;
            out.push(
                json!({"type": "iteration", "iteration": *n, "timestamp": "",
                "prompt": it.prompt, "response": it.response, "code_blocks": it.blocks,
                "final_answer": it.final_answer,
                "iteration_time": (it.end_ms.saturating_sub(it.start_ms)) as f64 / 1000.0}),
            );
        }
    };
    for r in records {
        match &r.event {
            TraceEvent::RunStarted {
                root_model, budget, ..
            } => {
                meta["timestamp"] = json!(r.ts);
                meta["root_model"] = json!(root_model);
                meta["max_depth"] = budget.get("max_depth").cloned().unwrap_or(json!(2));
                meta["max_iterations"] =
                    budget.get("root_iterations").cloned().unwrap_or(json!(25));
                meta["backend_kwargs"] = json!({"model_name": root_model});
                meta["environment_kwargs"] = json!({"sandbox": "monty"});
            }
            TraceEvent::LlmRequest {
                agent,
                new_messages,
                ..
            } if agent == "0" => {
                flush(&mut cur, &mut out, &mut n);
                conversation.extend(
                    new_messages
                        .iter()
                        .map(|m| json!({"role": m.role, "content": m.content})),
                );
                cur = Some(Iter {
                    prompt: conversation.clone(),
                    response: String::new(),
                    blocks: Vec::new(),
                    final_answer: None,
                    start_ms: r.t_ms,
                    end_ms: r.t_ms,
                });
            }
            TraceEvent::LlmResponse { agent, text, .. } if agent == "0" => {
                if let Some(it) = cur.as_mut() {
                    it.response = text.clone();
                    it.end_ms = r.t_ms;
                }
                conversation.push(json!({"role": "assistant", "content": text}));
            }
            TraceEvent::Cell { agent, code, .. } if agent == "0" => {
                pending_calls.clear();
                if let Some(it) = cur.as_mut() {
                    it.blocks
                        .push(json!({"code": code, "result": {"stdout": "", "stderr": "",
                        "locals": {}, "execution_time": 0.0, "rlm_calls": []}}));
                }
            }
            TraceEvent::SubcallStart {
                agent,
                parent,
                prompt_preview,
                ..
            } if parent == "0" => {
                subcall_prompts.insert(agent.clone(), (prompt_preview.clone(), r.t_ms));
            }
            TraceEvent::SubcallEnd {
                agent,
                parent,
                result,
                elapsed_ms,
                ..
            } if parent == "0" => {
                let prompt = subcall_prompts
                    .remove(agent)
                    .map(|p| p.0)
                    .unwrap_or_default();
                pending_calls.push(json!({"root_model": meta["root_model"], "prompt": prompt,
                    "response": result, "usage_summary": {"model_usage_summaries": {}},
                    "execution_time": *elapsed_ms as f64 / 1000.0}));
            }
            TraceEvent::CellOutput {
                agent,
                stdout,
                error,
                elapsed_ms,
                ..
            } if agent == "0" => {
                if let Some(it) = cur.as_mut()
                    && let Some(b) = it.blocks.last_mut()
                {
                    b["result"]["stdout"] = json!(stdout);
                    b["result"]["stderr"] = json!(error.clone().unwrap_or_default());
                    b["result"]["execution_time"] = json!(*elapsed_ms as f64 / 1000.0);
                    b["result"]["rlm_calls"] = Value::Array(std::mem::take(&mut pending_calls));
                    it.end_ms = r.t_ms;
                }
            }
            TraceEvent::Final {
                agent,
                answer,
                deferred: false,
                ..
            } if agent == "0" => {
                if let Some(it) = cur.as_mut() {
                    it.final_answer = Some(answer.clone());
                }
            }
            _ => {}
        }
    }
    flush(&mut cur, &mut out, &mut n);
    out.insert(0, meta);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::now_rfc3339;
    use crate::trace::tests::sample;

    #[test]
    fn export_matches_reference_shape() {
        let recs: Vec<TraceRecord> = sample()
            .into_iter()
            .enumerate()
            .map(|(i, event)| TraceRecord {
                seq: i as u64,
                t_ms: i as u64 * 10,
                ts: now_rfc3339(),
                event,
            })
            .collect();
        let lines = export_rlm_logger(&recs);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["type"], "metadata");
        assert_eq!(lines[0]["root_model"], "m");
        assert_eq!(lines[0]["max_iterations"], 25);
        assert_eq!(lines[1]["type"], "iteration");
        assert_eq!(lines[1]["iteration"], 1);
        assert_eq!(lines[1]["prompt"].as_array().unwrap().len(), 2);
        assert_eq!(lines[1]["code_blocks"][0]["result"]["stdout"], "y\n");
        assert_eq!(
            lines[1]["code_blocks"][0]["result"]["rlm_calls"][0]["response"],
            "y"
        );
        assert_eq!(
            lines[2]["prompt"].as_array().unwrap().len(),
            4,
            "prompt grows with history"
        );
        assert_eq!(lines[2]["final_answer"], "y");
        assert!(lines[1]["final_answer"].is_null());
    }
}
