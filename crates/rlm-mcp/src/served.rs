//! `ask` under `rlm serve` (`/mcp`): the question is one of the server's
//! runs, started as `POST /api/runs` starts one (the same checks, limits,
//! store gate, sessions and run records; it shows in `GET /api/runs` and the
//! page's history), its steps sent as `notifications/progress`,
//! `notifications/cancelled` (or the session's end) cancelling it.

use std::sync::Arc;

use rlm_engine::Answer;
use rlm_engine::values::{Setting, table};
use rlm_server::{App, AskBody, RunStatus};
use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use rmcp::service::{RequestContext, RoleServer};

use super::args::{BadArgs, ToolArgs};
use super::ask::{Progress, Question, answer_with_sources, cancelled, read_question, tool_error};
use super::state::{Backend, McpState};

/// How often a call waiting for a free run slot tries again.
const SLOT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Cancels the run when the call ends before it did (cancelled, or its
/// session closed): nobody would read its answer.
struct CancelUnlessFinished {
    app: Arc<App>,
    id: String,
    armed: bool,
}

impl Drop for CancelUnlessFinished {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.app.cancel(&self.id);
        }
    }
}

/// Runs `ask` as a run of the server.
pub(super) async fn ask(
    state: Arc<McpState>,
    args: ToolArgs,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let Backend::Served(served) = &state.backend else {
        return Err(ErrorData::internal_error(
            "this server does not run inside rlm serve",
            None,
        ));
    };
    let body = match read_question(&state, &args).and_then(ask_body) {
        Ok(b) => b,
        Err(BadArgs(e)) => return Ok(tool_error(format!("invalid arguments: {e}"))),
    };
    let app = served.app.clone();
    // As in `rlm mcp`, a call beyond --max-runs waits for a slot (the JSON
    // API answers 429 instead): an agent that cancelled a question and asks
    // again at once would otherwise be refused while the cancelled run is
    // still winding down.
    let run = loop {
        match app.start_run(body.clone()) {
            Ok(r) => break r,
            Err(e) if e.status.as_u16() == 429 => {
                tokio::select! {
                    _ = tokio::time::sleep(SLOT_POLL) => {}
                    _ = context.ct.cancelled() => return Err(cancelled()),
                }
            }
            Err(e) if e.status.as_u16() == 400 => {
                return Ok(tool_error(format!("invalid arguments: {}", e.message)));
            }
            // 507: no room to record the run.
            Err(e) => return Ok(tool_error(e.message)),
        }
    };
    let id = run.view().run.id;
    let mut guard = CancelUnlessFinished {
        app: app.clone(),
        id: id.clone(),
        armed: true,
    };
    let mut progress = context
        .meta
        .get_progress_token()
        .map(|token| Progress::new(context.peer.clone(), token));
    let mut next = 0;
    loop {
        let changed = run.trace.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        // Finished is read before the events: once it is seen, the last
        // events are surely in the history.
        let finished = run.finished();
        let records = run.trace.records_from(next);
        next += records.len();
        if let Some(p) = progress.as_mut() {
            for rec in &records {
                if !p.report(rec).await {
                    progress = None; // the client is gone; the run goes on
                    break;
                }
            }
        }
        if !records.is_empty() {
            continue;
        }
        if finished {
            break;
        }
        tokio::select! {
            _ = changed => {}
            // The guard cancels the run; no response is sent.
            _ = context.ct.cancelled() => return Err(cancelled()),
        }
    }
    guard.armed = false;
    let view = run.view();
    let value = match (view.run.status, view.answer) {
        (RunStatus::Failed, _) | (_, None) => {
            return Ok(tool_error(format!(
                "no answer: {}",
                view.error.as_deref().unwrap_or("the run ended without one")
            )));
        }
        (_, Some(v)) => v,
    };
    let answer: Answer = match serde_json::from_value(value) {
        Ok(a) => a,
        Err(e) => {
            return Err(ErrorData::internal_error(
                format!("the run's answer cannot be read: {e}"),
                None,
            ));
        }
    };
    let store = match state.view() {
        Ok(v) => v.store,
        Err(e) => return Ok(tool_error(e)),
    };
    let mut result = answer_with_sources(&answer, &store, run.not_saved()).await;
    // The server's run id: GET /api/runs/{id} (and its events) show it.
    if let Some(s) = result.structured_content.as_mut() {
        s["run_id"] = id.into();
    }
    Ok(result)
}

/// The server's request for `question`.
fn ask_body(question: Question) -> Result<AskBody, BadArgs> {
    let s = question.settings;
    let text = |setting: &Setting| s.get(setting).map(str::to_string);
    let number = |setting: &Setting| -> Result<_, BadArgs> {
        let name = setting.api.unwrap_or(setting.key);
        text(setting)
            .map(|t| {
                t.parse::<serde_json::Number>()
                    .map_err(|_| BadArgs(format!("`{name}` must be a number, got {t:?}")))
            })
            .transpose()
    };
    Ok(AskBody {
        question: question.text,
        session: question.session,
        flow: s.flow.clone(),
        inspector: text(&table::INSPECTOR),
        sandbox: text(&table::SANDBOX),
        citations: text(&table::CITATIONS),
        coverage: s.get(&table::COVERAGE).map(|c| c == "true"),
        turn_format: text(&table::TURN_FORMAT),
        response_schema: question.response_schema,
        max_llm_calls: number(&table::MAX_LLM_CALLS)?,
        max_iterations: number(&table::MAX_ITERATIONS)?,
        max_depth: number(&table::MAX_DEPTH)?,
        max_cost_usd: number(&table::MAX_COST_USD)?,
        max_wall_secs: number(&table::MAX_WALL_SECS)?,
        ..AskBody::default()
    })
}
