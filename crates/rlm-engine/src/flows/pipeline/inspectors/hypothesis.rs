//! The hypothesis inspector: hypothesis-driven recursion, per file: from the frozen intent
//! and the current chunks a hypothesis `{statement, confidence, gaps}`; every
//! chunk scored 0–1 against it (batched calls); chunks scoring at least
//! `RLM_HYPOTHESIS_KEEP` stay. Stops on average confidence ≥
//! `RLM_HYPOTHESIS_CONFIDENCE`, no further filtering, the depth limit, or
//! fewer than 5 chunks kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use serde_json::{Value, json};

use crate::flows::pipeline::file::{FileCtx, Selection, call_failure};
use crate::parse::parse_json_object;
use crate::prompts::render;
use crate::retrieval::FileChunk;
use crate::text::head;
use crate::trace::CallPurpose;

/// Prompt of the hypothesis call.
pub const HYPOTHESIS_PROMPT: &str = include_str!("../../../../prompts/pipeline/hypothesis.md");
/// Prompt of a batched relevance call.
pub const RELEVANCE_PROMPT: &str = include_str!("../../../../prompts/pipeline/relevance.md");

/// Characters of each chunk shown in the hypothesis prompt, and in total.
const HYPOTHESIS_CHUNK_CHARS: usize = 600;
const HYPOTHESIS_TOTAL_CHARS: usize = 12_000;
/// Characters of each chunk shown in a relevance prompt.
const RELEVANCE_CHUNK_CHARS: usize = 1500;

fn listing(chunks: &[FileChunk], per: usize, total: usize) -> String {
    let mut out = String::new();
    for c in chunks {
        let piece = format!("[{}]\n{}\n\n", c.id, head(&c.text, per));
        if !out.is_empty() && out.len() + piece.len() > total {
            out.push_str("(more passages not shown)\n");
            break;
        }
        out.push_str(&piece);
    }
    out
}

/// A hypothesis of one round.
#[derive(Debug, Clone)]
struct Hypothesis {
    statement: String,
    confidence: f64,
    gaps: Vec<String>,
}

async fn hypothesis(
    f: &FileCtx,
    chunks: &[FileChunk],
    depth: u32,
    previous: Option<&Hypothesis>,
) -> Result<Hypothesis, (bool, String)> {
    let prev = previous
        .map(|h| format!("{} (confidence {:.2})", h.statement, h.confidence))
        .unwrap_or_else(|| "none".into());
    let prompt = render(
        HYPOTHESIS_PROMPT,
        &[
            ("depth", &depth.to_string()),
            ("intent", &f.intent.describe()),
            ("file", &f.file.path),
            ("previous", &prev),
            (
                "chunks",
                &listing(chunks, HYPOTHESIS_CHUNK_CHARS, HYPOTHESIS_TOTAL_CHARS),
            ),
        ],
    );
    let reply =
        f.fx.call(
            &f.agent,
            1,
            ModelRole::Sub,
            &[Message::user(prompt)],
            f.cfg.codegen_model.clone(),
            CallPurpose::Hypothesis,
        )
        .await
        .map_err(|e| call_failure(&e))?;
    let v = parse_json_object(&reply).ok_or((
        false,
        "the hypothesis reply was not a JSON object".to_string(),
    ))?;
    let statement = v
        .get("statement")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    if statement.is_empty() {
        return Err((false, "the hypothesis has no statement".into()));
    }
    Ok(Hypothesis {
        statement,
        confidence: v
            .get("confidence")
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
            .clamp(0.0, 1.0),
        gaps: v
            .get("gaps")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Scores of one batch: `Ok(map)` (ids the model skipped are missing).
async fn score_batch(
    f: Arc<FileCtx>,
    batch: Vec<FileChunk>,
    h: Hypothesis,
) -> Result<BTreeMap<String, f64>, (bool, String)> {
    let prompt = render(
        RELEVANCE_PROMPT,
        &[
            ("intent", &f.intent.describe()),
            ("hypothesis", &h.statement),
            ("gaps", &h.gaps.join("; ")),
            (
                "chunks",
                &listing(&batch, RELEVANCE_CHUNK_CHARS, usize::MAX),
            ),
        ],
    );
    let reply =
        f.fx.call(
            &f.agent,
            1,
            ModelRole::Sub,
            &[Message::user(prompt)],
            f.cfg.codegen_model.clone(),
            CallPurpose::Relevance,
        )
        .await
        .map_err(|e| call_failure(&e))?;
    let v = parse_json_object(&reply).ok_or((
        false,
        "the relevance reply was not a JSON object".to_string(),
    ))?;
    let scores = v.get("scores").unwrap_or(&v);
    let mut out = BTreeMap::new();
    for c in &batch {
        if let Some(s) = scores.get(&c.id).and_then(Value::as_f64) {
            out.insert(c.id.clone(), s.clamp(0.0, 1.0));
        }
    }
    Ok(out)
}

/// Scores every chunk of `relevant` against `h`, in batches run in
/// parallel. A chunk without a score (a failed batch, an id the model
/// skipped) gets 0.5: weakly related, kept. A budget that refused a batch
/// is the selection's partial reason.
async fn score_round(
    f: &Arc<FileCtx>,
    relevant: &[FileChunk],
    h: &Hypothesis,
    depth: u32,
    partial: &mut Option<String>,
) -> BTreeMap<String, f64> {
    let mut set = tokio::task::JoinSet::new();
    for batch in relevant.chunks(f.cfg.relevance_batch) {
        set.spawn(score_batch(f.clone(), batch.to_vec(), h.clone()));
    }
    let mut batch_errors = Vec::new();
    let mut round: BTreeMap<String, f64> = BTreeMap::new();
    while let Some(j) = set.join_next().await {
        match j {
            Ok(Ok(m)) => round.extend(m),
            Ok(Err((budget, reason))) => {
                if budget {
                    partial.get_or_insert(reason.clone());
                }
                batch_errors.push(reason);
            }
            Err(e) => batch_errors.push(e.to_string()),
        }
    }
    let mut unscored = 0usize;
    for c in relevant {
        if !round.contains_key(&c.id) {
            unscored += 1;
            round.insert(c.id.clone(), 0.5);
        }
    }
    if unscored > 0 {
        f.fallback(
            "relevance",
            &format!(
                "depth {depth}: {unscored} chunk(s) got no score ({}); scored 0.5 (weakly related, kept)",
                if batch_errors.is_empty() { "skipped by the model".to_string() } else { batch_errors.join("; ") }
            ),
        );
    }
    round
}

/// The hypothesis inspector.
pub(crate) async fn run(f: &Arc<FileCtx>) -> Selection {
    let cfg = &f.cfg;
    let mut relevant: Vec<FileChunk> = f.file.chunks.clone();
    let mut scores: BTreeMap<String, f64> = BTreeMap::new();
    let mut previous: Option<Hypothesis> = None;
    let mut partial = None;
    let mut depth = 0u32;
    let mut avg = 0.0;
    loop {
        let h = match hypothesis(f, &relevant, depth, previous.as_ref()).await {
            Ok(h) => h,
            Err((budget, reason)) => {
                if budget {
                    f.fallback(
                        "hypothesis",
                        &format!("depth {depth}: {reason}; the current chunks are kept"),
                    );
                    partial = Some(reason);
                    break;
                }
                f.fallback(
                    "hypothesis",
                    &format!(
                        "depth {depth}: {reason}; the frozen intent stands in for the hypothesis"
                    ),
                );
                Hypothesis {
                    statement: f.intent.semantic_intent.clone(),
                    confidence: 0.0,
                    gaps: Vec::new(),
                }
            }
        };
        let round = score_round(f, &relevant, &h, depth, &mut partial).await;
        scores.extend(round.clone());
        let next: Vec<FileChunk> = relevant
            .iter()
            .filter(|c| round.get(&c.id).copied().unwrap_or(0.0) >= cfg.hypothesis_keep)
            .cloned()
            .collect();
        avg = scores.values().sum::<f64>() / scores.len().max(1) as f64;
        let reasons: Vec<&str> = [
            (
                avg >= cfg.hypothesis_confidence,
                "average confidence reached the threshold",
            ),
            (next.len() == relevant.len(), "no further filtering"),
            (depth + 1 >= cfg.hypothesis_max_depth, "depth limit"),
            (next.len() < 5, "fewer than 5 chunks kept"),
        ]
        .into_iter()
        .filter_map(|(c, r)| c.then_some(r))
        .collect();
        f.fx.step(
            &f.agent,
            "hypothesis",
            format!(
                "{} depth {depth}: \"{}\" ({:.2}); {} of {} chunks kept, average score {avg:.2}",
                f.file.path,
                h.statement.chars().take(80).collect::<String>(),
                h.confidence,
                next.len(),
                relevant.len()
            ),
            json!({"depth": depth, "hypothesis": h.statement, "confidence": h.confidence, "gaps": h.gaps,
                   "scores": round, "kept": next.iter().map(|c| &c.id).collect::<Vec<_>>(), "average": avg, "stop": reasons}),
        );
        previous = Some(h);
        if !reasons.is_empty() {
            if next.is_empty() {
                f.fallback(
                    "hypothesis_empty",
                    &format!(
                        "depth {depth}: no chunk scored at least {}; the previous set is kept",
                        cfg.hypothesis_keep
                    ),
                );
            } else {
                relevant = next;
            }
            break;
        }
        relevant = next;
        depth += 1;
    }
    Selection {
        chunk_ids: relevant.iter().map(|c| c.id.clone()).collect(),
        confidence: Some(avg),
        chunk_confidence: scores,
        depth: Some(depth),
        extracted: previous.map(
            |h| json!({"hypothesis": h.statement, "confidence": h.confidence, "gaps": h.gaps}),
        ),
        partial,
    }
}
