//! The flows that answer a question, one module each, chosen by [`Flow`]:
//!
//! - [`repl`]: the Recursive Language Model loop over the whole corpus;
//! - [`pipeline`]: intent → retrieval → whole files → per-file inspectors →
//!   summaries → cross-file merge;
//! - [`rag`]: RLM off: top-k retrieval and one answer call;
//! - [`auto`]: a triage call picks `rag` or the RLM flow.
//!
//! With no flow named, the RLM switch (`RLM_ENABLED`) picks the RLM flow
//! (`RLM_FLOW`, default `repl`) or `rag`. Every flow runs inside the same
//! harness ([`crate::run::Run`]) and returns the same [`Answer`].

pub(crate) mod auto;
pub(crate) mod pipeline;
pub(crate) mod rag;
pub(crate) mod repl;

use std::sync::Arc;

use crate::answer::{Answer, EngineError, RouteDecision};
use crate::config::Flow;
use crate::request::AskRequest;
use crate::run::Run;

/// Routes `req` to its flow and runs it to an answer.
pub(crate) async fn answer(run: Arc<Run>, req: AskRequest) -> Result<Answer, EngineError> {
    let cfg = &run.config().flows;
    // `report_route`: the decision the answer's flow report carries. The RLM
    // switch's decision is in the trace only, so that RLM_ENABLED=false gives
    // exactly the answer of an explicit `rag` request.
    let (flow, report_route) = match req.flow {
        Flow::Configured => {
            let (flow, reason) = if cfg.rlm_enabled {
                (cfg.rlm_flow, "RLM branch selected (RLM_ENABLED=true)")
            } else {
                (
                    Flow::Rag,
                    "Default branch selected (RLM not enabled: RLM_ENABLED=false)",
                )
            };
            // The repl flow's trace starts with its `run_started` (flow
            // "repl"), which already says the RLM branch was taken.
            if flow != Flow::Repl {
                run.emit_route(&RouteDecision {
                    requested: "configured".into(),
                    chosen: flow.as_str().into(),
                    reason: reason.into(),
                });
            }
            (flow, None)
        }
        Flow::Auto => {
            // The triage call's usage stays in this run's budget.
            let (flow, decision) = auto::route(&run, &req.question).await;
            run.emit_route(&decision);
            (flow, Some(decision))
        }
        other => (other, None),
    };
    run.started(&req.question, flow);
    let c = run.config();
    let policy = req
        .pipeline
        .citation_policy
        .or(c.flows.citation_policy)
        .unwrap_or(c.citation_policy);
    match flow {
        Flow::Repl => repl::run(run, &req).await,
        Flow::Rag => Ok(rag::run(&run, &req, report_route, policy).await),
        Flow::Pipeline | Flow::Configured | Flow::Auto => {
            Ok(pipeline::run(run, &req, report_route, policy).await)
        }
    }
}
