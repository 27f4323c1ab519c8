//! The `ask` tool of `rlm mcp`: one question through the engine, exactly as
//! `rlm ask` runs it (the same settings check, request, trace and cancel
//! token), with the trace's steps sent as `notifications/progress` and
//! `notifications/cancelled` cancelling the run. Also what `rlm serve`'s
//! `ask` (`served.rs`) shares with it: the arguments, the result, the steps.

use std::fmt::Write as _;
use std::sync::Arc;

use rlm_engine::values::table;
use rlm_engine::{
    Answer, AskError, AskedTurn, CancelToken, Conversation, Question as EngineQuestion,
    QuestionSettings, SessionTurn, Surface, Trace, TraceEvent, TraceRecord, ask_in_session,
};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorCode, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde::Serialize;
use serde_json::json;

use super::args::{BadArgs, ToolArgs};
use super::state::{Backend, McpState};

/// What `ask` was asked, checked.
pub(super) struct Question {
    /// The question.
    pub text: String,
    /// Flow, checks and budgets as given (not yet resolved).
    pub settings: QuestionSettings,
    /// The session the turn belongs to.
    pub session: Option<String>,
    /// A JSON Schema the answer is also returned in.
    pub response_schema: Option<serde_json::Value>,
}

/// `ask`'s arguments, checked for types, the question's length and the
/// session's name (the settings are resolved by whoever answers).
pub(super) fn read_question(state: &McpState, args: &ToolArgs) -> Result<Question, BadArgs> {
    let text = args.required_string("question", r#"{"question": "What is the notice period?"}"#)?;
    let chars = text.chars().count();
    if chars > state.max_question_chars {
        return Err(BadArgs(format!(
            "`question` has {chars} characters; the limit is {} (the server's --max-question-chars)",
            state.max_question_chars
        )));
    }
    let session = args.string("session")?;
    if let Some(name) = &session {
        rlm_engine::session::validate_session_name(name).map_err(|e| BadArgs(e.to_string()))?;
    }
    let mut settings = QuestionSettings::new(Surface::Api)
        .with(&table::INSPECTOR, args.string("inspector")?)
        .with(&table::CITATIONS, args.string("citations")?)
        .with(&table::VERIFY, args.string("verify")?)
        .with(&table::TURN_FORMAT, args.string("turn_format")?)
        .with(
            &table::COVERAGE,
            args.bool("coverage")?.map(|c| c.to_string()),
        )
        .with(
            &table::SUBCALL_CACHE,
            args.bool("subcall_cache")?.map(|c| c.to_string()),
        )
        .with(&table::MAX_LLM_CALLS, args.number_text("max_llm_calls")?)
        .with(&table::MAX_ITERATIONS, args.number_text("max_iterations")?)
        .with(&table::MAX_DEPTH, args.number_text("max_depth")?)
        .with(&table::MAX_COST_USD, args.number_text("max_cost_usd")?)
        .with(&table::MAX_WALL_SECS, args.number_text("max_wall_secs")?)
        .with(&table::SANDBOX, args.string("sandbox")?);
    settings.flow = args.string("flow")?;
    let response_schema = args.object("response_schema")?;
    if let Some(schema) = &response_schema {
        rlm_engine::check_answer_schema(schema)
            .map_err(|e| BadArgs(format!("`response_schema`: {e}")))?;
    }
    Ok(Question {
        text,
        settings,
        session,
        response_schema,
    })
}

/// The error a cancelled request ends with; the SDK drops it (the spec
/// says a cancelled request gets no response), so no client sees it.
pub(super) fn cancelled() -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        "the request was cancelled",
        None,
    )
}

/// Runs `ask` on `rlm mcp`'s own engine. Bad arguments and questions that
/// cannot be attempted are tool errors (`isError`, a message saying what to do).
pub(super) async fn run(
    state: Arc<McpState>,
    args: ToolArgs,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let Backend::Own(own) = &state.backend else {
        return Err(ErrorData::internal_error(
            "this server answers through rlm serve",
            None,
        ));
    };
    let question = match read_question(&state, &args) {
        Ok(q) => q,
        Err(BadArgs(e)) => return Ok(tool_error(format!("invalid arguments: {e}"))),
    };
    let settings = match question.settings.resolve(own.engine.config()) {
        Ok(r) => r,
        Err(e) => return Ok(tool_error(format!("invalid arguments: {e}"))),
    };
    let view = match state.view() {
        Ok(v) => v,
        Err(e) => return Ok(tool_error(e)),
    };
    // The store's sessions, as `rlm ask --session` keeps them.
    let sessions = match &question.session {
        Some(_) => match rlm_engine::off_runtime(|| own.host.sessions()) {
            Ok(s) => Some(s),
            Err(e) => return Ok(tool_error(format!("the session cannot be read: {e}"))),
        },
        None => None,
    };
    // A slot among `--max-runs`; a cancelled wait ends here.
    let _slot = tokio::select! {
        slot = own.runs.clone().acquire_owned() => match slot {
            Ok(s) => s,
            Err(_) => return Err(ErrorData::internal_error("the server is shutting down", None)),
        },
        _ = context.ct.cancelled() => return Err(cancelled()),
    };
    let trace = Arc::new(Trace::new());
    let cancel = CancelToken::new();
    let progress = context.meta.get_progress_token().map(|token| {
        tokio::spawn(send_progress(
            trace.subscribe(),
            context.peer.clone(),
            token,
        ))
    });
    let conversation = match (&sessions, question.session) {
        (Some(sessions), Some(name)) => Conversation::Session(SessionTurn {
            sessions: sessions.as_ref(),
            name,
            run_id: None,
            // A cancelled request gets no response, and its (partial)
            // answer is not saved in the session: the client never saw it.
            keep_cancelled: false,
            history_runs: None,
        }),
        _ => Conversation::None,
    };
    let run = ask_in_session(
        &own.engine,
        view.corpus.clone(),
        EngineQuestion {
            text: question.text,
            settings,
            embedder: view.embedder.clone(),
            briefing: own.briefing.clone(),
            trace: trace.clone(),
            cancel: cancel.clone(),
            conversation,
            answer_schema: question.response_schema,
        },
    );
    tokio::pin!(run);
    let asked = loop {
        tokio::select! {
            asked = &mut run => break asked,
            _ = context.ct.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
        }
    };
    // The progress task ends with the run's last event, or when the trace
    // is gone (a question refused before it started); it never holds the
    // answer back for long.
    drop(trace);
    if let Some(p) = progress {
        let abort = p.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_secs(2), p)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
    // A cancelled request gets no response.
    if context.ct.is_cancelled() {
        return Err(cancelled());
    }
    match asked {
        Ok(AskedTurn { answer, not_saved }) => {
            Ok(answer_with_sources(&answer, &view.store, not_saved.map(|e| e.to_string())).await)
        }
        Err(AskError::Session(e)) => Ok(tool_error(format!("the session cannot be read: {e}"))),
        Err(AskError::Engine(e)) => Ok(tool_error(format!("no answer: {e}"))),
    }
}

/// The tool result of `answer`, its passages' lines looked up in `store`.
pub(super) async fn answer_with_sources(
    answer: &Answer,
    store: &Arc<dyn rlm_corpus::CorpusStore>,
    not_saved: Option<String>,
) -> CallToolResult {
    let found = (sources(answer), related(answer));
    let store = store.clone();
    let (found, near) = tokio::task::spawn_blocking(move || {
        let (mut found, mut near) = found;
        fill_lines(store.as_ref(), &mut found);
        fill_lines(store.as_ref(), &mut near);
        (found, near)
    })
    .await
    .unwrap_or_else(|_| (sources(answer), related(answer)));
    answer_result(answer, found, near, not_saved)
}

/// A tool result with `isError` and one message.
pub(super) fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// One passage of an answer: a verified quote of a chunk.
#[derive(Debug, Serialize, PartialEq)]
struct Source {
    chunk_id: Option<String>,
    doc_id: Option<String>,
    path: Option<String>,
    line: Option<u32>,
    /// The place a person cites (`page 12`, `slide 4`, `sheet "Q3", rows 10–14`).
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<String>,
    quote: Option<String>,
    /// `model` (the model's citation) or `engine` (attached by the engine).
    origin: &'static str,
}

/// The sources of the answer's supported claims (their passage entails
/// them: the ones `rlm ask` numbers under its answer); with no claims
/// report (verification off), its verified citations.
fn sources(answer: &Answer) -> Vec<Source> {
    with_documents(answer, answer.sources())
}

/// The passages found for claims they do not support (related,
/// contradicted, or not judged): listed apart, never as sources.
fn related(answer: &Answer) -> Vec<Source> {
    with_documents(answer, answer.related_sources())
}

/// `found` as this tool lists them: with the document id of each chunk.
fn with_documents(answer: &Answer, found: Vec<rlm_engine::Source>) -> Vec<Source> {
    let cited: Vec<&rlm_engine::Citation> = answer
        .claims
        .iter()
        .flat_map(|c| c.citations.iter())
        .chain(&answer.citations)
        .collect();
    found
        .into_iter()
        .map(|s| Source {
            doc_id: cited
                .iter()
                .find(|c| c.chunk_id.is_some() && c.chunk_id == s.chunk_id)
                .and_then(|c| c.doc_id.clone()),
            chunk_id: s.chunk_id,
            path: Some(s.path),
            line: s.line,
            location: s.location,
            quote: Some(s.quote),
            origin: if s.attached_by_engine {
                "engine"
            } else {
                "model"
            },
        })
        .collect()
}

/// The line each quote starts on, where the engine did not say (a model's
/// own citation resolves to its chunk, not to the quote's line).
fn fill_lines(store: &dyn rlm_corpus::CorpusStore, sources: &mut [Source]) {
    for s in sources.iter_mut().filter(|s| s.line.is_none()) {
        if let (Some(id), Some(quote)) = (&s.chunk_id, &s.quote) {
            s.line = store.quote_line(id, quote);
        }
    }
}

/// A numbered Markdown list of passages, from `after + 1`.
fn passage_list(md: &mut String, title: &str, passages: &[Source], after: usize) {
    if passages.is_empty() {
        return;
    }
    let _ = write!(md, "\n\n**{title}**\n");
    for (i, s) in passages.iter().enumerate() {
        let place = rlm_engine::citations::place_words(
            s.location.as_deref(),
            s.line,
            s.chunk_id.as_deref(),
        );
        let _ = write!(
            md,
            "\n{}. `{}`, {place} (chunk `{}`): \"{}\"{}",
            after + i + 1,
            s.path.as_deref().unwrap_or("?"),
            s.chunk_id.as_deref().unwrap_or("?"),
            s.quote.as_deref().unwrap_or_default().replace('\n', " "),
            if s.origin == "engine" {
                " (attached by the engine)"
            } else {
                ""
            }
        );
    }
}

/// The answer as a tool result: the Markdown an agent reads, and the same
/// as structured content.
fn answer_result(
    answer: &Answer,
    sources: Vec<Source>,
    related: Vec<Source>,
    not_saved: Option<String>,
) -> CallToolResult {
    let unsupported = answer.unsupported_claims();
    let claims = answer.claim_summaries();
    let mut md = answer.answer.trim_end().to_string();
    passage_list(&mut md, "Sources", &sources, 0);
    passage_list(
        &mut md,
        "Related passages (found, but not judged to state their claim; not sources)",
        &related,
        sources.len(),
    );
    if !answer.claims.is_empty() {
        md.push_str("\n\n**Claims** (entailment; quote check, apart)\n");
        for c in &claims {
            let refs: String = c.passages.iter().map(|n| format!(" [{n}]")).collect();
            let _ = write!(
                md,
                "\n- {}{refs}; {}: {}",
                c.support.label(),
                c.quote_check.label(),
                c.text.trim().replace('\n', " ")
            );
        }
    }
    if !unsupported.is_empty() {
        md.push_str("\n\n**Not supported by any passage found**\n");
        for c in &unsupported {
            let _ = write!(md, "\n- {}", c.replace('\n', " "));
        }
    }
    if let Some(g) = &answer.grounded {
        let _ = write!(
            md,
            "\n\nGrounded: {} of {} claims supported ({} by a citation the engine attached); {} related, {} contradicted, {} unverified, {} without a passage.",
            g.supported,
            g.claims,
            g.engine_attached,
            g.related,
            g.contradicted,
            g.unverified,
            g.unsupported
        );
    }
    if !answer.counted.is_empty() {
        md.push_str("\n\n**Counted over**\n");
        for c in &answer.counted {
            let again = match c.recounted {
                Some(true) => "counted again: same",
                Some(false) => "counted again: DIFFERENT",
                None => "not counted again",
            };
            let _ = write!(md, "\n- `{}`: {}; {again}", c.written(), c.extent());
        }
    }
    if answer.partial {
        let _ = write!(
            md,
            "\n\n**Partial answer**: {}.",
            answer
                .partial_reason
                .as_deref()
                .unwrap_or("the run did not finish")
        );
    }
    if let Some(e) = &not_saved {
        let _ = write!(md, "\n\nThe session turn was not saved: {e}.");
    }
    if let Some(data) = &answer.data {
        match &data.value {
            Some(v) => {
                let _ = write!(md, "\n\n**Answer as JSON**\n```json\n{v:#}\n```");
            }
            None => {
                let _ = write!(
                    md,
                    "\n\nNo answer in the response_schema's shape: {}.",
                    data.error.as_deref().unwrap_or("unknown reason")
                );
            }
        }
    }
    let structured = json!({
        "answer": answer.answer,
        "partial": answer.partial,
        "partial_reason": answer.partial_reason,
        "sources": sources,
        "related_sources": related,
        "claims": claims,
        "unsupported_claims": unsupported,
        "grounded": answer.grounded,
        "counted": answer.counted,
        "usage": answer.usage,
        "run_id": answer.trace.id,
        "session_not_saved": not_saved,
        "data": answer.data,
    });
    let mut result = CallToolResult::success(vec![ContentBlock::text(md)]);
    result.structured_content = Some(structured);
    result
}

/// Sends one `notifications/progress` per step of the run (the root's
/// turns, cells, flow steps, the final answer) until it finishes.
async fn send_progress(
    mut rx: tokio::sync::broadcast::Receiver<TraceRecord>,
    peer: Peer<RoleServer>,
    token: ProgressToken,
) {
    let mut progress = Progress::new(peer, token);
    loop {
        let rec = match rx.recv().await {
            Ok(r) => r,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => break,
        };
        let finished = matches!(rec.event, TraceEvent::RunFinished { .. });
        if !progress.report(&rec).await || finished {
            break;
        }
    }
}

/// The progress notifications of one `ask` call: one per step of its run,
/// numbered from 1.
pub(super) struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: u32,
    sub_calls: u32,
}

impl Progress {
    /// Notifications to `peer` under the request's `token`.
    pub(super) fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Progress {
            peer,
            token,
            sent: 0,
            sub_calls: 0,
        }
    }

    /// Sends `rec` when it is a step; false once the client cannot be
    /// reached any more.
    pub(super) async fn report(&mut self, rec: &TraceRecord) -> bool {
        if let TraceEvent::SubcallEnd { .. } = rec.event {
            self.sub_calls += 1;
        }
        let Some(message) = step_message(&rec.event, self.sub_calls) else {
            return true;
        };
        self.sent += 1;
        let note = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent))
            .with_message(format!("[{:.1}s] {message}", rec.t_ms as f64 / 1000.0));
        self.peer.notify_progress(note).await.is_ok()
    }
}

/// The line a step of the run is reported with, `None` for the events
/// that are not steps (sub-agents' own turns, streamed text, ...).
fn step_message(event: &TraceEvent, sub_calls: u32) -> Option<String> {
    let root = |agent: &str| !agent.contains('.');
    Some(match event {
        TraceEvent::RunStarted {
            documents,
            context_chars,
            flow,
            root_model,
            ..
        } => format!(
            "started: {documents} documents, {context_chars} characters; flow {flow}, model {root_model}"
        ),
        TraceEvent::LlmResponse {
            agent,
            input_tokens,
            output_tokens,
            ..
        } if root(agent) => format!(
            "model replied: {input_tokens} tokens in, {output_tokens} out ({sub_calls} sub-calls so far)"
        ),
        TraceEvent::CellOutput {
            agent,
            error,
            elapsed_ms,
            ..
        } if root(agent) => match error {
            Some(e) => format!("cell ran in {elapsed_ms} ms: error: {}", first_line(e)),
            None => format!("cell ran in {elapsed_ms} ms"),
        },
        TraceEvent::FlowStep { step, message, .. } => {
            format!("{step}: {}", first_line(message))
        }
        TraceEvent::Final {
            agent, deferred, ..
        } if agent == "0" => {
            if *deferred {
                "FINAL deferred until the sub-calls' results are seen".to_string()
            } else {
                "final answer committed; checking citations".to_string()
            }
        }
        TraceEvent::BudgetExhausted { reason, .. } => format!("stopped: {reason}"),
        TraceEvent::Fallback { kind, reason, .. } => {
            format!("fallback ({kind}): {}", first_line(reason))
        }
        TraceEvent::LlmError { message, .. } => format!("model error: {}", first_line(message)),
        TraceEvent::LlmRetry {
            attempt,
            of,
            reason,
            ..
        } => format!("model retrying {attempt}/{of}: {}", first_line(reason)),
        TraceEvent::RunFinished { partial, usage, .. } => format!(
            "finished{}: {} model calls, {} tokens",
            if *partial { " (partial)" } else { "" },
            usage.calls,
            usage.input_tokens + usage.output_tokens
        ),
        _ => return None,
    })
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The structured content's `sources`.
    fn sources_json(answer: &Answer) -> serde_json::Value {
        serde_json::to_value(sources(answer)).unwrap()
    }

    #[test]
    fn step_messages_name_root_steps_and_skip_sub_agents() {
        let reply = |agent: &str| TraceEvent::LlmResponse {
            agent: agent.into(),
            depth: 0,
            model: "m".into(),
            text: "t".into(),
            input_tokens: 10,
            output_tokens: 2,
            cached_input_tokens: 0,
            cost_usd: None,
            latency_ms: 1,
            from_cache: false,
            draft: None,
        };
        assert_eq!(
            step_message(&reply("0"), 3).unwrap(),
            "model replied: 10 tokens in, 2 out (3 sub-calls so far)"
        );
        assert!(step_message(&reply("0.1"), 0).is_none());
    }

    #[test]
    fn an_answer_without_claims_lists_its_verified_citations() {
        let answer: Answer = serde_json::from_value(json!({
            "answer": "x", "partial": false, "partial_reason": null,
            "citations": [], "verification": null,
            "usage": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                      "cost_usd": null, "estimated": false, "wall_ms": 0, "by_depth": []},
            "trace": {"id": "r", "events": 0}, "findings": []
        }))
        .unwrap();
        assert_eq!(sources_json(&answer), json!([]));
    }

    /// The sets an answer was counted over are in the text and the
    /// structured result.
    #[test]
    fn counted_sets_are_listed() {
        let answer: Answer = serde_json::from_value(json!({
            "answer": "79", "partial": false, "partial_reason": null,
            "citations": [], "verification": null,
            "usage": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                      "cost_usd": null, "estimated": false, "wall_ms": 0, "by_depth": []},
            "trace": {"id": "r", "events": 0}, "findings": [],
            "counted": [{"agent": "root", "pattern": "refund", "ignore_case": true, "lines": 79,
                         "documents": 8, "chunk_ids": ["c-0"], "count_in_answer": true,
                         "recounted": true}]
        }))
        .unwrap();
        let result = answer_result(&answer, Vec::new(), Vec::new(), None);
        let text = serde_json::to_value(&result.content).unwrap().to_string();
        assert!(
            text.contains("`grep(\\\"refund\\\")`: 79 lines in 8 documents; counted again: same"),
            "{text}"
        );
        assert_eq!(
            result.structured_content.unwrap()["counted"][0]["lines"],
            79
        );
    }

    /// A claim with a passage but no verdict (or one that is not entailed)
    /// lists its passage as related, never as a source; the claims show
    /// entailment and the quote check apart.
    #[test]
    fn passages_of_claims_not_entailed_are_related_not_sources() {
        let cite = json!({"marker": "", "answer_offset": 0, "kind": "chunk", "id": "c-0",
            "quote": "The secret code is 4721.", "chunk_id": "c-0", "doc_id": "c",
            "doc_index": 0, "path": "b.txt", "byte_start": 0, "byte_end": 24,
            "status": "verified", "detail": null, "origin": "engine"});
        let claim = |support: &str| {
            json!({"text": "The code is 4721.", "start": 0, "end": 17, "citations": [cite],
                "support": support, "quote_check": "engine", "origin": "engine"})
        };
        for (support, found, near) in [("unverified", 0, 1), ("related", 0, 1), ("supported", 1, 0)]
        {
            let answer: Answer = serde_json::from_value(json!({
                "answer": "The code is 4721.", "partial": false, "partial_reason": null,
                "citations": [], "verification": null,
                "usage": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                          "cost_usd": null, "estimated": false, "wall_ms": 0, "by_depth": []},
                "trace": {"id": "r", "events": 0}, "findings": [],
                "claims": [claim(support)],
                "grounded": {"claims": 1, "supported": found, "engine_attached": found}
            }))
            .unwrap();
            let result = answer_result(&answer, sources(&answer), related(&answer), None);
            let s = result.structured_content.unwrap();
            assert_eq!(s["sources"].as_array().unwrap().len(), found, "{support}");
            assert_eq!(
                s["related_sources"].as_array().unwrap().len(),
                near,
                "{support}"
            );
            assert_eq!(s["claims"][0]["support"], support);
            assert_eq!(s["claims"][0]["quote_check"], "engine");
            assert_eq!(s["claims"][0]["passages"], json!([1]));
        }
    }

    /// The claims named as without a passage are the ones the Grounded line
    /// counts so: a claim backed by a passage the engine attached and judged
    /// entailed is supported, not listed as uncited.
    #[test]
    fn the_uncited_list_and_the_grounded_line_agree() {
        let cite = json!({"marker": "", "answer_offset": 0, "kind": "chunk", "id": "c-0",
            "quote": "The secret code is 4721.", "chunk_id": "c-0", "doc_id": "c",
            "doc_index": 0, "path": "b.txt", "byte_start": 0, "byte_end": 24,
            "status": "verified", "detail": null, "origin": "engine"});
        let answer: Answer = serde_json::from_value(json!({
            "answer": "The code is 4721.\nThe code was set in 1999.", "partial": false,
            "partial_reason": null, "citations": [], "verification": null,
            "usage": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                      "cost_usd": null, "estimated": false, "wall_ms": 0, "by_depth": []},
            "trace": {"id": "r", "events": 0}, "findings": [],
            "claims": [
                {"text": "The code is 4721.", "start": 0, "end": 17, "citations": [cite],
                 "support": "supported", "quote_check": "engine", "origin": "engine"},
                {"text": "The code was set in 1999.", "start": 18, "end": 43, "citations": [],
                 "support": "unsupported", "quote_check": "none", "origin": "none"}],
            "grounded": {"claims": 2, "supported": 1, "engine_attached": 1, "unsupported": 1}
        }))
        .unwrap();
        let result = answer_result(&answer, sources(&answer), related(&answer), None);
        let text = serde_json::to_value(&result.content).unwrap().to_string();
        assert!(
            text.contains("Grounded: 1 of 2 claims supported (1 by a citation the engine attached); 0 related, 0 contradicted, 0 unverified, 1 without a passage."),
            "{text}"
        );
        assert!(
            text.contains(
                "**Not supported by any passage found**\\n\\n- The code was set in 1999."
            ),
            "{text}"
        );
        let s = result.structured_content.unwrap();
        assert_eq!(
            s["unsupported_claims"],
            json!(["The code was set in 1999."])
        );
        assert_eq!(s["sources"].as_array().unwrap().len(), 1);
    }
}
