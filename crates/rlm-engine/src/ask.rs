//! One question in its conversation, the path every surface takes (`rlm
//! ask`, `rlm mcp`, `rlm serve` and its OpenAI endpoint, the Python
//! package): [`ask_in_session`] fills the request, reads the session's
//! earlier turns, runs the engine and appends the new turn, on any
//! [`SessionBackend`] (a store folder's `sessions.sqlite`, PostgreSQL).
//! The surfaces keep only what is theirs: reading their arguments,
//! reporting progress, showing the answer.

use std::sync::Arc;

use rlm_corpus::Embedder;

use crate::answer::{Answer, EngineError};
use crate::blocking::off_runtime;
use crate::cancel::CancelToken;
use crate::corpus::Corpus;
use crate::engine::Engine;
use crate::request::{AskRequest, ResolvedQuestion};
use crate::session::{MAX_SESSION_TURNS, SessionBackend, SessionError, SessionState, Turn};
use crate::trace::Trace;

/// One question as a surface hands it over.
pub struct Question<'a> {
    /// The question.
    pub text: String,
    /// The question's settings laid over the engine's: the engine settings
    /// it runs with, its flow, inspector and citation policy.
    pub settings: ResolvedQuestion,
    /// The store's query embedder (hybrid retrieval), if it has one.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Domain instructions added to the system prompt.
    pub briefing: Option<String>,
    /// Where the run's events go.
    pub trace: Arc<Trace>,
    /// Stops the run early; the answer is then partial.
    pub cancel: CancelToken,
    /// Where earlier turns come from and where this one goes.
    pub conversation: Conversation<'a>,
    /// A JSON Schema the answer is also returned in (`Answer::data`).
    pub answer_schema: Option<serde_json::Value>,
}

/// The conversation a question belongs to.
pub enum Conversation<'a> {
    /// A question on its own.
    None,
    /// Earlier turns given with the question (the OpenAI endpoint's
    /// messages): used like a session's history, saved nowhere. No turns is
    /// a question on its own.
    Given(Vec<Turn>),
    /// A named session: read before the run, the new turn appended after.
    Session(SessionTurn<'a>),
}

/// A named session a question is asked in.
pub struct SessionTurn<'a> {
    /// Where the session is kept.
    pub sessions: &'a dyn SessionBackend,
    /// Its (validated) name.
    pub name: String,
    /// The id of the run answering the question, kept with the turn.
    pub run_id: Option<String>,
    /// Whether a cancelled run's (partial) answer is appended too: a server
    /// keeps it with the run the client can read; `rlm mcp` does not (a
    /// cancelled call gets no response, so nobody saw the answer).
    pub keep_cancelled: bool,
    /// The turns the model is given, by the runs that answered them (a
    /// branch of the conversation); every turn when `None`.
    pub history_runs: Option<Vec<String>>,
}

/// A question answered.
#[derive(Debug)]
pub struct AskedTurn {
    /// The answer.
    pub answer: Answer,
    /// Why the turn could not be appended to its session, if it could not
    /// (the answer stands; each surface says so its own way).
    pub not_saved: Option<SessionError>,
}

/// Why a question got no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The session's earlier turns could not be read.
    #[error(transparent)]
    Session(SessionError),
    /// The engine could not attempt the question.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Answers `question` over `corpus` with `engine` (its model client and
/// sandbox pool; the question's settings replace its own): reads the
/// session's turns and findings (or takes the given turns), runs the flow
/// the settings name, and appends the question and its answer to the
/// session. Session reads and writes run off the async workers
/// ([`off_runtime`]).
pub async fn ask_in_session(
    engine: &Engine,
    corpus: Arc<Corpus>,
    question: Question<'_>,
) -> Result<AskedTurn, AskError> {
    let Question {
        text,
        settings,
        embedder,
        briefing,
        trace,
        cancel,
        conversation,
        answer_schema,
    } = question;
    let session = match &conversation {
        Conversation::None => None,
        Conversation::Given(history) if history.is_empty() => None,
        Conversation::Given(history) => Some(SessionState {
            name: String::new(),
            history: history.clone(),
            findings: Vec::new(),
        }),
        Conversation::Session(s) => Some(off_runtime(|| branch(s)).map_err(AskError::Session)?),
    };
    let mut request = AskRequest::new(text.clone());
    request.flow = settings.flow;
    request.pipeline = settings.pipeline;
    request.pipeline.embedder = embedder;
    request.briefing = briefing;
    request.session = session;
    request.trace = trace;
    request.cancel = cancel.clone();
    request.answer_schema = answer_schema;
    let answer = engine
        .with_config(settings.config)
        .ask(corpus, request)
        .await?;
    let not_saved = match &conversation {
        Conversation::Session(s) if s.keep_cancelled || !cancel.is_cancelled() => {
            let turn = Turn {
                question: text,
                answer: answer.answer.clone(),
                partial: answer.partial,
                citations: answer.citations.clone(),
            };
            off_runtime(|| {
                s.sessions
                    .append_run(&s.name, &turn, &answer.findings, s.run_id.as_deref())
            })
            .err()
        }
        _ => None,
    };
    Ok(AskedTurn { answer, not_saved })
}

/// A session's state for a new question: its turns (only those answered by
/// the runs `history_runs` names, in that order, when it names some) and
/// its findings.
fn branch(s: &SessionTurn<'_>) -> Result<SessionState, SessionError> {
    let Some(runs) = &s.history_runs else {
        return s.sessions.load(&s.name);
    };
    let page = s.sessions.page(&s.name, None, MAX_SESSION_TURNS)?;
    let by_run: std::collections::HashMap<&str, &Turn> = page
        .turn_meta
        .iter()
        .zip(&page.history)
        .filter_map(|(meta, turn)| Some((meta.run_id.as_deref()?, turn)))
        .collect();
    Ok(SessionState {
        name: page.name,
        history: runs
            .iter()
            .filter_map(|r| by_run.get(r.as_str()).map(|t| (*t).clone()))
            .collect(),
        findings: page.findings,
    })
}
