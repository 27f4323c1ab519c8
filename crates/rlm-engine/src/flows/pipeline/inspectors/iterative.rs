//! The iterative inspector (the preferred one): prefilter (exact duplicates
//! removed by hash, at most `MAX_PREFILTER_CHUNKS` by cheap score), phase A
//! boolean evaluation, then up to `MAX_RLM_ITERATIONS` generated
//! `inspect_iteration(chunks)` programs run in the sandbox (5 s / 512 MB),
//! with every post-processing rule (select-all guard, minimum kept, narrowing rule, confidence boost).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use serde_json::{Map, Value, json};

use crate::budget::Exhausted;
use crate::flows::pipeline::file::{FileCtx, Selection};
use crate::flows::pipeline::program::{self, ProgramRunner};
use crate::flows::pipeline::{inspectors::per_chunk as inspector_per_chunk, select};
use crate::prompts::render;
use crate::retrieval::FileChunk;
use crate::run::CallError;
use crate::trace::CallPurpose;

/// Prompt asking for one round's program.
pub const ITERATION_PROGRAM_PROMPT: &str =
    include_str!("../../../../prompts/pipeline/iteration_program.md");

/// Exact-duplicate removal (whitespace-normalized text hash) and the
/// candidate cap by cheap score; document order is kept.
pub(crate) fn prefilter(
    chunks: &[FileChunk],
    query: &str,
    cap: usize,
) -> (Vec<FileChunk>, usize, usize) {
    let mut seen = HashSet::new();
    let mut unique: Vec<&FileChunk> = Vec::new();
    for c in chunks {
        let mut h = DefaultHasher::new();
        c.text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .hash(&mut h);
        if seen.insert(h.finish()) {
            unique.push(c);
        }
    }
    let duplicates = chunks.len() - unique.len();
    let capped = unique.len().saturating_sub(cap);
    let keep: HashSet<String> = if unique.len() > cap {
        select::top_k(&unique, query, cap).into_iter().collect()
    } else {
        unique.iter().map(|c| c.id.clone()).collect()
    };
    let out = unique
        .into_iter()
        .filter(|c| keep.contains(&c.id))
        .cloned()
        .collect();
    (out, duplicates, capped)
}

fn preview(s: &str, n: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// One round's program: generated and validated, else the query-term
/// fallback program (a `fallback` event says why). `Err` = a budget refused.
async fn program_for(
    f: &FileCtx,
    active: &[FileChunk],
    iteration: u32,
    previous: &Map<String, Value>,
    fallback_program: &str,
) -> Result<String, Exhausted> {
    let previews = active
        .iter()
        .take(10)
        .map(|c| format!("- {}: {}", c.id, preview(&c.text, 100)))
        .collect::<Vec<_>>()
        .join("\n");
    let prev = if previous.is_empty() {
        "none".to_string()
    } else {
        preview(&Value::Object(previous.clone()).to_string(), 1500)
    };
    let prompt = render(
        ITERATION_PROGRAM_PROMPT,
        &[
            ("iteration", &iteration.to_string()),
            ("max_iterations", &f.cfg.max_rlm_iterations.to_string()),
            ("question", &f.question),
            ("intent", &f.intent.describe()),
            ("file", &f.file.path),
            ("active_count", &active.len().to_string()),
            ("chunk_previews", &previews),
            ("previous_data", &prev),
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
        .await;
    let failure = match reply {
        Err(CallError::Budget(refused)) => return Err(refused),
        Err(e @ CallError::Model(_)) => e.to_string(),
        Ok(text) => match program::extract_program(&text, "inspect_iteration") {
            None => "the reply holds no `def inspect_iteration(chunks)`".to_string(),
            Some(code) => {
                let texts: String = active
                    .iter()
                    .map(|c| c.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                match program::validate_iteration_program(&code, &f.question, &texts) {
                    Ok(()) => return Ok(code),
                    Err(e) => format!("program rejected: {e}"),
                }
            }
        },
    };
    f.fallback(
        "iteration_program",
        &format!("iteration {iteration}: {failure}; the query-term fallback program runs instead"),
    );
    Ok(fallback_program.to_string())
}

/// The extract limit: past `max_bytes` of JSON, string values are cut
/// to 500 characters and other values dropped.
pub(crate) fn cap_extracted(
    data: Map<String, Value>,
    max_bytes: usize,
) -> (Map<String, Value>, bool) {
    if Value::Object(data.clone()).to_string().len() <= max_bytes {
        return (data, false);
    }
    let mut out = Map::new();
    for (k, v) in data {
        if let Value::String(s) = v {
            out.insert(k, Value::String(s.chars().take(500).collect()));
        }
    }
    (out, true)
}

/// One round's selection after the post-processing rules.
struct Round {
    selected: Vec<String>,
    /// The confidence the program gave.
    program_confidence: f64,
    /// The confidence after the rules.
    confidence: f64,
    stop: bool,
}

/// The iterative inspector.
pub(crate) async fn run(f: &Arc<FileCtx>) -> Selection {
    let cfg = &f.cfg;
    let (mut active, duplicates, capped) =
        prefilter(&f.file.chunks, &f.question, cfg.max_prefilter_chunks);
    f.fx.step(
        &f.agent,
        "prefilter",
        format!(
            "{}: prefilter {} → {} chunks ({duplicates} exact duplicates, {capped} over MAX_PREFILTER_CHUNKS={})",
            f.file.path,
            f.file.chunks.len(),
            active.len(),
            cfg.max_prefilter_chunks
        ),
        json!({"duplicates": duplicates, "capped": capped, "active": active.len()}),
    );
    // Phase A: boolean evaluation of every active chunk.
    let (approved, mut partial) = inspector_per_chunk::evaluate_chunks(f, &active).await;
    let approved: HashSet<String> = approved.into_iter().collect();

    let fallback_program = program::fallback_iteration_program(&program::query_terms(&format!(
        "{} {} {}",
        f.question, f.intent.entity, f.intent.attribute
    )));
    let mut runner = ProgramRunner::new(
        &f.fx.sandbox_config(),
        cfg.iteration_timeout_ms,
        cfg.iteration_memory_mb,
    );
    let mut accumulated = Map::new();
    let mut final_ids: Option<Vec<String>> = None;
    let mut confidence = 0.0f64;
    let mut streak = 0.0f64;
    let mut rounds = 0u32;
    for iteration in 1..=cfg.max_rlm_iterations {
        let code = match program_for(f, &active, iteration, &accumulated, &fallback_program).await {
            Ok(c) => c,
            Err(refused) => {
                f.fallback(
                    "iteration_program",
                    &format!("iteration {iteration}: {refused}; iterations end"),
                );
                partial.get_or_insert(refused.to_string());
                break;
            }
        };
        let Some(raw) =
            run_program(f, &mut runner, &code, &fallback_program, &active, iteration).await
        else {
            continue;
        };
        rounds = iteration;
        let round = apply_rules(f, &raw, &active, &approved, iteration);
        // 5. The extracted-data cap.
        merge_extracted(f, &raw, &mut accumulated, iteration);
        let (selected, conf, stop) = (&round.selected, round.confidence, round.stop);
        f.fx.step(
            &f.agent,
            "iteration",
            format!(
                "{} iteration {iteration}: {} active → {} selected, confidence {conf:.2}{}",
                f.file.path,
                active.len(),
                selected.len(),
                if stop { ", stop" } else { "" }
            ),
            json!({"iteration": iteration, "active": active.len(), "selected": selected, "program_confidence": round.program_confidence, "confidence": conf, "stop": stop}),
        );
        confidence = conf;
        final_ids = Some(selected.clone());
        if stop || conf > 0.9 {
            f.fx.step(
                &f.agent,
                "stop",
                format!(
                    "iteration {iteration}: stopping ({})",
                    if stop {
                        "stop flag"
                    } else {
                        "confidence > 0.9"
                    }
                ),
                json!({"iteration": iteration, "confidence": conf}),
            );
            break;
        }
        if !narrow(&mut active, selected, &mut streak) {
            f.fallback(
                "no_narrowing",
                &format!("iteration {iteration}: no narrowing for 2 iterations, stopping"),
            );
            break;
        }
    }
    runner.close().await;
    Selection {
        chunk_ids: final_chunk_ids(f, final_ids, &active),
        confidence: Some(confidence),
        depth: Some(rounds),
        extracted: (!accumulated.is_empty()).then_some(Value::Object(accumulated)),
        partial,
        ..Selection::default()
    }
}

/// Runs a round's program over the active chunks (the query-term fallback
/// program when a generated one fails): the dict it returned, `None` (with a
/// fallback event) when it returned none.
async fn run_program(
    f: &FileCtx,
    runner: &mut ProgramRunner,
    code: &str,
    fallback_program: &str,
    active: &[FileChunk],
    iteration: u32,
) -> Option<Map<String, Value>> {
    let input: Value = active
        .iter()
        .map(|c| json!({"chunk_id": c.id, "text": c.text}))
        .collect();
    let inputs = [("rlm_chunks", input)];
    let expr = "inspect_iteration(rlm_chunks)";
    let mut raw = runner.run(code, &inputs, expr).await;
    if let Err(e) = &raw
        && code != fallback_program
    {
        f.fallback(
            "iteration_program",
            &format!("iteration {iteration}: {e}; the query-term fallback program runs instead"),
        );
        raw = runner.run(fallback_program, &inputs, expr).await;
    }
    match raw {
        Ok(Value::Object(m)) => Some(m),
        Ok(other) => {
            f.fallback(
                "iteration_failed",
                &format!(
                    "iteration {iteration}: the program returned {} instead of a dict",
                    preview(&other.to_string(), 80)
                ),
            );
            None
        }
        Err(e) => {
            f.fallback("iteration_failed", &format!("iteration {iteration}: {e}"));
            None
        }
    }
}

/// The program's selection under the post-processing rules: only active
/// ids, once each; MIN_KEEP; the broad-selection guard; the confidence
/// boost from phase A's approved chunks.
fn apply_rules(
    f: &FileCtx,
    raw: &Map<String, Value>,
    active: &[FileChunk],
    approved: &HashSet<String>,
    iteration: u32,
) -> Round {
    let cfg = &f.cfg;
    let active_ids: Vec<String> = active.iter().map(|c| c.id.clone()).collect();
    let valid: HashSet<&str> = active_ids.iter().map(String::as_str).collect();
    // 1. Only ids of the active chunks, once each.
    let mut selected: Vec<String> = Vec::new();
    for v in raw
        .get("selected_chunk_ids")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if valid.contains(id.as_str()) && !selected.contains(&id) {
            selected.push(id);
        }
    }
    let mut stop = raw.get("stop").and_then(Value::as_bool).unwrap_or(false);
    let mut conf = raw
        .get("confidence")
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
        .clamp(0.0, 1.0);
    let program_confidence = conf;
    // 2. MIN_KEEP: topped up with the first active chunks in document order.
    if !stop && selected.len() < cfg.min_keep {
        let before = selected.len();
        for id in &active_ids {
            if selected.len() >= cfg.min_keep {
                break;
            }
            if !selected.contains(id) {
                selected.push(id.clone());
            }
        }
        f.fallback(
            "min_keep",
            &format!(
                "iteration {iteration}: {before} chunk(s) selected without stopping, below MIN_KEEP={}: topped up with the first active chunks to {}",
                cfg.min_keep,
                selected.len()
            ),
        );
    }
    // 3. Broad-selection guard.
    let n = active.len();
    if selected.len() as f64 / n.max(1) as f64 > 0.9 && n > 3 {
        let refs: Vec<&FileChunk> = active.iter().collect();
        let k = select::fallback_k(n, cfg);
        f.fallback(
            "broad_selection",
            &format!(
                "iteration {iteration}: {} of {n} chunks selected (more than 90%): deterministic top-{k}, confidence 0.2, stop",
                selected.len()
            ),
        );
        selected = select::top_k(&refs, &f.question, k);
        conf = 0.2;
        stop = true;
    }
    // 4. Confidence boosting from phase A's approved chunks.
    let confidence = boosted_confidence(f, &selected, approved, conf, iteration);
    Round {
        selected,
        program_confidence,
        confidence,
        stop,
    }
}

/// Rule 4, confidence boosting from phase A's approved chunks among `selected`.
fn boosted_confidence(
    f: &FileCtx,
    selected: &[String],
    approved: &HashSet<String>,
    conf: f64,
    iteration: u32,
) -> f64 {
    let approved_in = selected.iter().filter(|id| approved.contains(*id)).count();
    if approved_in == 0 {
        return conf;
    }
    let ratio = approved_in as f64 / selected.len() as f64;
    let boosted = conf.max(0.85 + ratio * 0.1);
    if boosted > conf {
        f.fx.step(
            &f.agent,
            "confidence_boost",
            format!(
                "iteration {iteration}: {approved_in}/{} selected chunks passed phase A: confidence {conf:.3} → {boosted:.3}",
                selected.len()
            ),
            json!({"from": conf, "to": boosted, "approved_ratio": ratio}),
        );
    }
    boosted
}

/// Rule 5, the extract limit: the round's extracted data joins what earlier
/// rounds extracted, both under the limit.
fn merge_extracted(
    f: &FileCtx,
    raw: &Map<String, Value>,
    accumulated: &mut Map<String, Value>,
    iteration: u32,
) {
    let max_bytes = f.cfg.max_extracted_bytes;
    let extracted = match raw.get("extracted_data") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let (extracted, cut) = cap_extracted(extracted, max_bytes);
    if cut {
        f.fallback(
            "extracted_data_cap",
            &format!(
                "iteration {iteration}: extracted_data over {max_bytes} bytes; strings cut to 500 characters"
            ),
        );
    }
    accumulated.extend(extracted);
    let (acc, _) = cap_extracted(std::mem::take(accumulated), max_bytes);
    *accumulated = acc;
}

/// Narrowing: the next round sees only the `selected` chunks. `false` when
/// the rounds stopped narrowing (the same set, or barely smaller, for two
/// rounds: `streak` counts).
fn narrow(active: &mut Vec<FileChunk>, selected: &[String], streak: &mut f64) -> bool {
    let prev: HashSet<String> = active.iter().map(|c| c.id.clone()).collect();
    let chosen: HashSet<&String> = selected.iter().collect();
    active.retain(|c| chosen.contains(&c.id));
    let now: HashSet<String> = active.iter().map(|c| c.id.clone()).collect();
    if now == prev {
        *streak += 1.0;
    }
    if now.len() as f64 / prev.len().max(1) as f64 > 0.9 {
        *streak += 0.5;
    }
    *streak < 2.0
}

/// The chunks the inspector selects: the last round's selection, else the
/// first chunks (a fallback event says why).
fn final_chunk_ids(
    f: &FileCtx,
    final_ids: Option<Vec<String>>,
    active: &[FileChunk],
) -> Vec<String> {
    match final_ids {
        Some(ids) if !ids.is_empty() => ids,
        Some(_) => {
            f.fallback(
                "empty_selection",
                "the last iteration selected nothing: the first 3 chunks are used",
            );
            active.iter().take(3).map(|c| c.id.clone()).collect()
        }
        None => {
            f.fallback(
                "all_iterations_failed",
                "no iteration produced a result: the first 3 chunks are used",
            );
            f.first_ids(3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str, text: &str) -> FileChunk {
        FileChunk {
            id: id.into(),
            ordinal: 0,
            text: text.into(),
            entry: false,
        }
    }

    #[test]
    fn prefilter_dedupes_and_caps_in_order() {
        let cs = [
            chunk("a", "python skills"),
            chunk("b", "python  skills"),
            chunk("c", "cooking"),
            chunk("d", "skills"),
        ];
        let (out, dups, capped) = prefilter(&cs, "python skills", 2);
        assert_eq!(dups, 1);
        assert_eq!(capped, 1);
        let ids: Vec<&str> = out.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "d"]);
    }

    #[test]
    fn extracted_cap() {
        let mut m = Map::new();
        m.insert("big".into(), Value::String("x".repeat(60_000)));
        m.insert("n".into(), json!(3));
        let (out, cut) = cap_extracted(m, 50_000);
        assert!(cut);
        assert_eq!(out["big"].as_str().unwrap().len(), 500);
        assert!(!out.contains_key("n"));
    }
}
