//! The `repl` inspector: the engine's RLM loop as a sub-agent whose
//! `context` is one file's chunks (a list of strings, each headed
//! `[chunk:ID]`), committing the ids of the relevant chunks with `FINAL`.

use std::sync::Arc;

use rlm_sandbox::InputValue;

use crate::flows::pipeline::file::{FileCtx, Selection};
use crate::flows::repl::agent::run_agent;
use crate::prompts::render;

/// The task given to the scoped agent.
pub const REPL_INSPECTOR_PROMPT: &str =
    include_str!("../../../../prompts/pipeline/repl_inspector.md");

/// Known chunk ids of the file in the order the answer names them (an id
/// followed by more id characters, `d-1` inside `d-12`, does not count).
pub(crate) fn ids_in(answer: &str, known: &[String]) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for id in known {
        let whole = answer.match_indices(id.as_str()).find(|(p, _)| {
            !answer[p + id.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
        });
        if let Some((p, _)) = whole {
            found.push((p, id.clone()));
        }
    }
    found.sort();
    found.into_iter().map(|(_, id)| id).collect()
}

/// The repl inspector.
pub(crate) async fn run(f: &Arc<FileCtx>) -> Selection {
    let input = InputValue::TextList(
        f.file
            .chunks
            .iter()
            .map(|c| format!("[chunk:{}]\n{}", c.id, c.text))
            .collect(),
    );
    let task = render(
        REPL_INSPECTOR_PROMPT,
        &[
            ("file", &f.file.path),
            ("question", &f.question),
            ("intent", &f.intent.describe()),
            (
                "max_selected",
                &f.cfg.max_selected_chunks_per_file.to_string(),
            ),
        ],
    );
    let known: Vec<String> = f.file.chunks.iter().map(|c| c.id.clone()).collect();
    let outcome = run_agent(f.fx.clone(), f.agent.clone(), 1, task, Some(input))
        .await
        .map(|o| (o.answer, o.partial_reason));
    match outcome {
        Ok((answer, partial)) => {
            let ids = ids_in(&answer, &known);
            if ids.is_empty() {
                f.fallback(
                    "repl_selection",
                    "the agent's answer names no chunk id of the file: the first 3 chunks are used",
                );
                return Selection {
                    chunk_ids: f.first_ids(3),
                    partial,
                    ..Selection::default()
                };
            }
            Selection {
                chunk_ids: ids,
                partial,
                ..Selection::default()
            }
        }
        Err(e) => {
            f.fallback(
                "repl_selection",
                &format!("the agent's sandbox could not start ({e}): the first 3 chunks are used"),
            );
            Selection {
                chunk_ids: f.first_ids(3),
                ..Selection::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_answer_order_without_prefix_confusion() {
        let known = vec!["d-1".to_string(), "d-12".to_string(), "d-3".to_string()];
        assert_eq!(ids_in("[\"d-12\", \"d-3\"]", &known), ["d-12", "d-3"]);
        assert_eq!(ids_in("d-3 then d-1", &known), ["d-3", "d-1"]);
    }
}
