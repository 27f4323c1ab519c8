//! The per-chunk inspector: per chunk, the model writes `evaluate_chunk_relevance`;
//! it is validated, sanity-tested and run in the sandbox (2 s / 256 MB).
//! Guardrails: more than 90% of more than 5 chunks selected → deterministic
//! top-k with confidence 0.2; none selected → the first 3 chunks.

use std::collections::BTreeMap;
use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use serde_json::json;

use crate::flows::pipeline::file::{FileCtx, Selection, call_failure};
use crate::flows::pipeline::program::{self, ProgramRunner};
use crate::flows::pipeline::select;
use crate::prompts::render;
use crate::retrieval::FileChunk;
use crate::text::head;
use crate::trace::CallPurpose;

/// Prompt asking for one chunk's program.
pub const CHUNK_PROGRAM_PROMPT: &str =
    include_str!("../../../../prompts/pipeline/chunk_program.md");

/// Characters of the chunk shown in the codegen prompt.
const PROMPT_CHUNK_CHARS: usize = 3000;

/// Generates and validates one chunk's program. `Err((budget, reason))`.
async fn generate(f: &FileCtx, chunk: &FileChunk) -> Result<String, (bool, String)> {
    let prompt = render(
        CHUNK_PROGRAM_PROMPT,
        &[
            ("question", &f.question),
            ("intent", &f.intent.describe()),
            ("file", &f.file.path),
            ("chunk_id", &chunk.id),
            ("chunk_text", head(&chunk.text, PROMPT_CHUNK_CHARS)),
        ],
    );
    let reply =
        f.fx.call(
            &f.agent,
            1,
            ModelRole::Sub,
            &[Message::user(prompt)],
            f.cfg.codegen_model.clone(),
            CallPurpose::Codegen,
        )
        .await
        .map_err(|e| call_failure(&e))?;
    let code = program::extract_program(&reply, "evaluate_chunk_relevance").ok_or((
        false,
        "the reply holds no `def evaluate_chunk_relevance(...)`".to_string(),
    ))?;
    program::validate_chunk_program(&code, &f.question, &chunk.text)
        .map_err(|e| (false, format!("program rejected: {e}")))?;
    Ok(code)
}

/// Boolean evaluation of every chunk (also iterative mode's phase A): the
/// programs are generated concurrently, then run one by one in one sandbox.
/// A chunk whose program cannot be generated, is invalid, fails a sanity test
/// or raises counts as not relevant (a `fallback` event says why). Returns
/// the approved ids and, when a budget refused calls, why the run is partial.
pub(crate) async fn evaluate_chunks(
    f: &Arc<FileCtx>,
    chunks: &[FileChunk],
) -> (Vec<String>, Option<String>) {
    let mut set = tokio::task::JoinSet::new();
    for (i, c) in chunks.iter().enumerate() {
        let (f, c) = (f.clone(), c.clone());
        set.spawn(async move { (i, generate(&f, &c).await) });
    }
    let mut programs: Vec<Option<Result<String, (bool, String)>>> = vec![None; chunks.len()];
    while let Some(joined) = set.join_next().await {
        if let Ok((i, r)) = joined {
            programs[i] = Some(r);
        }
    }
    let mut runner = ProgramRunner::new(
        &f.fx.sandbox_config(),
        f.cfg.chunk_eval_timeout_ms,
        f.cfg.chunk_eval_memory_mb,
    );
    let mut approved = Vec::new();
    let mut rejected: BTreeMap<String, String> = BTreeMap::new();
    let mut budget_refused = 0usize;
    let mut partial = None;
    for (c, p) in chunks.iter().zip(programs) {
        let code = match p {
            Some(Ok(code)) => code,
            Some(Err((true, reason))) => {
                budget_refused += 1;
                partial.get_or_insert(reason);
                continue;
            }
            Some(Err((false, reason))) => {
                f.fallback(
                    "chunk_program",
                    &format!("chunk {}: {reason}; counted as not relevant", c.id),
                );
                rejected.insert(c.id.clone(), reason);
                continue;
            }
            None => {
                rejected.insert(c.id.clone(), "generation task lost".into());
                continue;
            }
        };
        match program::evaluate_chunk(&mut runner, &code, &c.text).await {
            Ok(true) => approved.push(c.id.clone()),
            Ok(false) => {}
            Err(e) => {
                f.fallback(
                    "chunk_program",
                    &format!("chunk {}: {e}; counted as not relevant", c.id),
                );
                rejected.insert(c.id.clone(), e.to_string());
            }
        }
    }
    runner.close().await;
    if budget_refused > 0 {
        f.fallback(
            "chunk_program",
            &format!(
                "{budget_refused} chunk program(s) not generated: {}; those chunks count as not relevant",
                partial.clone().unwrap_or_default()
            ),
        );
    }
    f.fx.step(
        &f.agent,
        "chunk_evaluation",
        format!(
            "{}: {} of {} chunks evaluated relevant",
            f.file.path,
            approved.len(),
            chunks.len()
        ),
        json!({"approved": approved, "rejected": rejected, "not_generated": budget_refused}),
    );
    (approved, partial)
}

/// The per-chunk inspector.
pub(crate) async fn run(f: &Arc<FileCtx>) -> Selection {
    let chunks = &f.file.chunks;
    let (approved, partial) = evaluate_chunks(f, chunks).await;
    let n = chunks.len();
    let ratio = approved.len() as f64 / n.max(1) as f64;
    if ratio > 0.9 && n > 5 {
        let refs: Vec<&FileChunk> = chunks.iter().collect();
        let k = select::fallback_k(n, &f.cfg);
        f.fallback(
            "select_all_guard",
            &format!(
                "{} of {n} chunks selected (more than 90%): deterministic top-{k} fallback, confidence 0.2",
                approved.len()
            ),
        );
        return Selection {
            chunk_ids: select::top_k(&refs, &f.question, k),
            confidence: Some(0.2),
            partial,
            ..Selection::default()
        };
    }
    if approved.is_empty() {
        f.fallback(
            "empty_selection",
            "no chunk was selected: the first 3 chunks are used",
        );
        return Selection {
            chunk_ids: f.first_ids(3),
            partial,
            ..Selection::default()
        };
    }
    Selection {
        chunk_ids: approved,
        partial,
        ..Selection::default()
    }
}
