//! Export of a trace to the reference library's `RLMLogger` JSONL format
//! (`rlm trace export --format rlm-logger`).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{CallPurpose, TraceEvent, TraceRecord};

/// Converts a trace to the reference library's (`rlm`, alexzhang13/rlm)
/// `RLMLogger` JSONL format: one `metadata` line, then one `iteration` line per
/// root-agent turn with the prompt (message list), response, code blocks with
/// their results and sub-LLM calls, and the final answer.
pub fn export_rlm_logger(records: &[TraceRecord]) -> Vec<Value> {
    let mut export = LoggerExport::new();
    for r in records {
        export.record(r);
    }
    export.finish()
}

/// The root agent's turn being assembled.
struct Iteration {
    prompt: Vec<Value>,
    response: String,
    blocks: Vec<Value>,
    final_answer: Option<String>,
    start_ms: u64,
    end_ms: u64,
}

/// The export so far: the metadata line, the finished iteration lines, and
/// what the current iteration still waits for.
struct LoggerExport {
    meta: Value,
    lines: Vec<Value>,
    /// The root's conversation up to now (each iteration's prompt).
    conversation: Vec<Value>,
    current: Option<Iteration>,
    /// Sub-calls of the current cell that have ended.
    pending_calls: Vec<Value>,
    /// Prompts of the root's sub-calls under way, by agent id.
    subcall_prompts: HashMap<String, String>,
    /// A call of the entailment judge is under way (no turn of the root).
    judging: bool,
}

impl LoggerExport {
    fn new() -> Self {
        LoggerExport {
            meta: json!({"type": "metadata", "timestamp": "", "root_model": "", "max_depth": 1,
                "max_iterations": 0, "backend": "openai", "backend_kwargs": {}, "environment_type": "local",
                "environment_kwargs": {}, "other_backends": null}),
            lines: Vec::new(),
            conversation: Vec::new(),
            current: None,
            pending_calls: Vec::new(),
            subcall_prompts: HashMap::new(),
            judging: false,
        }
    }

    /// Ends the current iteration: its line.
    fn flush(&mut self) {
        if let Some(it) = self.current.take() {
            let n = self.lines.len() + 1;
            self.lines
                .push(json!({"type": "iteration", "iteration": n, "timestamp": "",
                "prompt": it.prompt, "response": it.response, "code_blocks": it.blocks,
                "final_answer": it.final_answer,
                "iteration_time": (it.end_ms.saturating_sub(it.start_ms)) as f64 / 1000.0}));
        }
    }

    /// The metadata line followed by the iteration lines.
    fn finish(mut self) -> Vec<Value> {
        self.flush();
        self.lines.insert(0, self.meta);
        self.lines
    }

    /// Takes in one record (only the root agent's turns make lines).
    fn record(&mut self, r: &TraceRecord) {
        // The judge's calls on the answer's claims are no turns of the root.
        match &r.event {
            TraceEvent::LlmRequest { purpose, .. } if *purpose == CallPurpose::SemanticCheck => {
                self.judging = true;
                return;
            }
            TraceEvent::LlmResponse { agent, .. } | TraceEvent::LlmError { agent, .. }
                if self.judging && agent == "0" =>
            {
                self.judging = false;
                return;
            }
            _ => {}
        }
        match &r.event {
            TraceEvent::RunStarted {
                root_model, budget, ..
            } => {
                let meta = &mut self.meta;
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
                self.flush();
                self.conversation.extend(
                    new_messages
                        .iter()
                        .map(|m| json!({"role": m.role, "content": m.content})),
                );
                self.current = Some(Iteration {
                    prompt: self.conversation.clone(),
                    response: String::new(),
                    blocks: Vec::new(),
                    final_answer: None,
                    start_ms: r.t_ms,
                    end_ms: r.t_ms,
                });
            }
            TraceEvent::LlmResponse { agent, text, .. } if agent == "0" => {
                if let Some(it) = self.current.as_mut() {
                    it.response = text.clone();
                    it.end_ms = r.t_ms;
                }
                self.conversation
                    .push(json!({"role": "assistant", "content": text}));
            }
            TraceEvent::Cell { agent, code, .. } if agent == "0" => {
                self.pending_calls.clear();
                if let Some(it) = self.current.as_mut() {
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
                self.subcall_prompts
                    .insert(agent.clone(), prompt_preview.clone());
            }
            TraceEvent::SubcallEnd {
                agent,
                parent,
                result,
                elapsed_ms,
                ..
            } if parent == "0" => {
                let prompt = self.subcall_prompts.remove(agent).unwrap_or_default();
                self.pending_calls.push(
                    json!({"root_model": self.meta["root_model"], "prompt": prompt,
                    "response": result, "usage_summary": {"model_usage_summaries": {}},
                    "execution_time": *elapsed_ms as f64 / 1000.0}),
                );
            }
            TraceEvent::CellOutput {
                agent,
                stdout,
                error,
                elapsed_ms,
                ..
            } if agent == "0" => {
                if let Some(it) = self.current.as_mut()
                    && let Some(b) = it.blocks.last_mut()
                {
                    b["result"]["stdout"] = json!(stdout);
                    b["result"]["stderr"] = json!(error.clone().unwrap_or_default());
                    b["result"]["execution_time"] = json!(*elapsed_ms as f64 / 1000.0);
                    b["result"]["rlm_calls"] =
                        Value::Array(std::mem::take(&mut self.pending_calls));
                    it.end_ms = r.t_ms;
                }
            }
            TraceEvent::Final {
                agent,
                answer,
                deferred: false,
                ..
            } if agent == "0" => {
                if let Some(it) = self.current.as_mut() {
                    it.final_answer = Some(answer.clone());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::now_rfc3339;
    use crate::trace::tests::sample;

    #[test]
    fn export_matches_reference_shape() {
        // The judge's call after the run is no turn of the root.
        let judge = [
            TraceEvent::LlmRequest {
                agent: "0".into(),
                depth: 0,
                iteration: 0,
                model: "s".into(),
                purpose: CallPurpose::SemanticCheck,
                message_count: 2,
                new_messages: Vec::new(),
            },
            TraceEvent::LlmResponse {
                agent: "0".into(),
                depth: 0,
                model: "s".into(),
                text: "{\"verdicts\": []}".into(),
                input_tokens: 1,
                output_tokens: 1,
                cached_input_tokens: 0,
                cost_usd: None,
                latency_ms: 1,
                from_cache: false,
                draft: None,
            },
        ];
        let recs: Vec<TraceRecord> = sample()
            .into_iter()
            .chain(judge)
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
