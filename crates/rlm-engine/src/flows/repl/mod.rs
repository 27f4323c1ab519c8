//! The `repl` flow: the Recursive Language Model loop.
//!
//! One question runs as a tree of agents. The root (depth 0) gets the corpus
//! as `context` in a sandboxed interpreter, sees the output of an inspection
//! cell the engine ran for it, and then loops: model reply → code cells →
//! truncated output back → ... until it commits with `FINAL`. Code can call
//! sub-models (`llm_query`, `llm_query_batched`, `llm_query_async`) and start
//! child agents (`rlm_query`) one level deeper, each with its own sandbox. The
//! run's one budget bounds the whole tree; running out of it (or of turns)
//! ends in one extraction call over the best passages the run saw and an answer marked
//! partial, never an error string as the answer.
//!
//! Replies follow one of two protocols (`RLM_TURN_FORMAT`): structured
//! turns (`structured.rs`, one JSON document the provider constrains) or
//! the paper's text (```repl blocks and `FINAL`, read by `parse.rs` with
//! its rules for a small model's prose).

pub(crate) mod agent;
pub(crate) mod extraction;
pub(crate) mod host;
mod host_args;
pub(crate) mod inspection;
mod scanning;
mod sources;
pub(crate) mod structured;
pub(crate) mod synthesis;
mod turns;

use std::sync::Arc;

use crate::answer::{Answer, EngineError};
use crate::budget::Exhausted;
use crate::request::AskRequest;
use crate::run::{Finished, MODEL_FAILED, ROOT_AGENT, Run, synthesis_grace};
use crate::trace::TraceEvent;
use extraction::{Ended, extract};
use synthesis::{Outcome, gathered_summary, material_from_ctx};

/// Answers `req` with the root agent over the whole corpus.
pub(crate) async fn run(run: Arc<Run>, req: &AskRequest) -> Result<Answer, EngineError> {
    let root = agent::run_agent(
        run.clone(),
        ROOT_AGENT.into(),
        0,
        req.question.clone(),
        None,
    );
    let outcome = match run.until_stopped(&req.cancel, root).await {
        Ok(r) => r.map_err(EngineError::Sandbox)?,
        Err(reason @ Exhausted::Cancelled) => Outcome {
            answer: gathered_summary(&run, ROOT_AGENT, &reason.to_string(), ""),
            partial_reason: Some(reason.to_string()),
        },
        Err(reason) => {
            // The tree is dropped (sandboxes killed, requests cancelled); one
            // synthesis call from what reached the shared state, within a
            // bounded grace period: past the wall clock, a slow model must
            // not hold the answer hostage.
            let material = material_from_ctx(&run, ROOT_AGENT, "");
            let why = reason.to_string();
            let grace = synthesis_grace(run.config.budget.wall_clock);
            let synthesis = extract(
                &run,
                ROOT_AGENT,
                0,
                &req.question,
                Ended::Stopped(why.clone()),
                material,
            );
            match tokio::time::timeout(grace, synthesis).await {
                Ok(outcome) => outcome,
                Err(_) => Outcome {
                    answer: gathered_summary(&run, ROOT_AGENT, &why, ""),
                    partial_reason: Some(why),
                },
            }
        }
    };
    // A model that never answered is a configuration problem to report, not
    // an answer: there is nothing gathered to synthesize from.
    if run.budget.report().calls == 0
        && let Some(reason) = &outcome.partial_reason
        && reason.starts_with(MODEL_FAILED)
    {
        run.trace.emit(TraceEvent::RunFinished {
            partial: true,
            reason: Some(reason.clone()),
            usage: run.budget.report(),
        });
        return Err(EngineError::ModelUnavailable(reason.clone()));
    }
    Ok(run
        .finish(Finished {
            text: outcome.answer,
            partial_reason: outcome.partial_reason,
            report: None,
            file_summaries: Vec::new(),
        })
        .await)
}
