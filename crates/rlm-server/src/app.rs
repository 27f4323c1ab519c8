//! The typed core under the handlers: the corpus, the engine, sessions and
//! the runs (questions being answered or answered), with every limit the
//! server enforces.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rlm_corpus::{CorpusStore, Embedder, Store};
use rlm_engine::session::{MAX_SESSION_TURNS, cap_findings, validate_session_name};
use rlm_engine::trace::{Trace, now_rfc3339};
use rlm_engine::values::table;
use rlm_engine::{AskedTurn, Conversation, Question, SessionTurn, ask_in_session};
use rlm_engine::{CancelToken, QuestionSettings, ResolvedQuestion, Surface};
use rlm_engine::{Corpus, Engine, Turn};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ApiError, StartError};
use crate::options::ServerOptions;
use crate::run_record::valid_run_id;
pub use crate::run_record::{RUNS_DIR, RunInfo, RunStatus, RunSummary, RunView};
use crate::state::{EventLog, ServerState, off_runtime};
use crate::store_watch::StoreWatch;

/// Limits the server enforces on every request.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Runs in progress at once; more are refused with 429 (`RLM_SERVE_MAX_RUNS`, default 2).
    pub max_concurrent_runs: usize,
    /// Longest question in characters (default 20,000).
    pub max_question_chars: usize,
    /// Longest briefing in characters (`--max-briefing-chars`, default 20,000).
    pub max_briefing_chars: usize,
    /// Largest uploaded file in bytes (`--max-upload-bytes`, default 64 MiB).
    pub max_upload_bytes: usize,
    /// Largest request body in bytes (default 1 MiB).
    pub max_body_bytes: usize,
    /// Finished runs kept in memory for `/api/runs`; older ones are read back
    /// from `<store>/runs/` (default 200).
    pub kept_runs: usize,
    /// Finished runs kept on disk in `<store>/runs/` (answer and trace); the
    /// oldest beyond this are deleted as new ones finish (`--keep-runs`,
    /// default 1,000).
    pub saved_runs: usize,
    /// Time a client has to send a request's head, and between requests on
    /// a kept-alive connection to start the next one; the connection is
    /// closed beyond it (`--header-timeout`, default 10 s).
    pub header_timeout: Duration,
    /// Time a client has to send a request's whole body, from the request's
    /// start; 408 beyond it (`--body-timeout`, default 30 s).
    pub body_timeout: Duration,
    /// Time a write to a client may stay blocked (a client that stopped
    /// reading, such as an event stream nobody reads) before the connection
    /// is closed (default 60 s).
    pub write_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed
    /// (`--max-connections`, default 256).
    pub max_connections: usize,
    /// Connections open at once from one client address; more are answered
    /// 503 and closed, so one client cannot hold every place
    /// (`--max-connections-per-client`, default 128; behind a proxy every
    /// request comes from its address: raise it to `max_connections`).
    pub max_connections_per_client: usize,
    /// At shutdown, time given to runs to save their partial answers and to
    /// connections to finish (default 20 s).
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrent_runs: 2,
            max_question_chars: 20_000,
            max_briefing_chars: 20_000,
            max_upload_bytes: 64 << 20,
            max_body_bytes: 1 << 20,
            kept_runs: 200,
            saved_runs: 1000,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(60),
            max_connections: 256,
            max_connections_per_client: 128,
            shutdown_grace: Duration::from_secs(20),
        }
    }
}

/// What a client sends to ask a question (`POST /api/runs`, `POST /api/chat`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskBody {
    /// The question.
    pub question: String,
    /// Session name: earlier turns and findings carry over, and this turn is saved.
    #[serde(default)]
    pub session: Option<String>,
    /// `repl`, `pipeline`, `rag` or `auto`; the server's default when absent.
    #[serde(default)]
    pub flow: Option<String>,
    /// The RLM switch: true → the configured RLM flow, false → `rag`.
    /// Ignored when `flow` is given.
    #[serde(default)]
    pub use_rlm: Option<bool>,
    /// Per-file inspector of the `pipeline` flow.
    #[serde(default)]
    pub inspector: Option<String>,
    /// `strict` or `best_effort`.
    #[serde(default)]
    pub citations: Option<String>,
    /// Also report the documents that match the question but back no claim.
    #[serde(default)]
    pub coverage: Option<bool>,
    /// How the agents reply each turn: `auto`, `structured` or `text`.
    #[serde(default)]
    pub turn_format: Option<String>,
    /// False: make every model call afresh, without the store's reply
    /// cache (`RLM_SUBCALL_CACHE`).
    #[serde(default)]
    pub subcall_cache: Option<bool>,
    /// A JSON Schema the answer is also returned in (the answer's `data`:
    /// the value and each value's citations).
    #[serde(default)]
    pub response_schema: Option<Value>,
    /// The pipeline's stage-1 retrieval: many entry chunks (true) or few.
    #[serde(default)]
    pub high_recall: Option<bool>,
    /// Expand entry chunks to whole files: true → `pipeline`, false → `rag`.
    #[serde(default)]
    pub expand_files: Option<bool>,
    /// Inspect and summarize each file: true → `pipeline`, false → `rag`.
    #[serde(default)]
    pub rlm_summarize: Option<bool>,
    /// Model calls across the call tree.
    #[serde(default)]
    pub max_llm_calls: Option<serde_json::Number>,
    /// Model turns of the root agent.
    #[serde(default)]
    pub max_iterations: Option<serde_json::Number>,
    /// Deepest agent level.
    #[serde(default)]
    pub max_depth: Option<serde_json::Number>,
    /// Cost cap in USD.
    #[serde(default)]
    pub max_cost_usd: Option<serde_json::Number>,
    /// Wall-clock cap in seconds.
    #[serde(default)]
    pub max_wall_secs: Option<serde_json::Number>,
    /// Which Python runs the REPL: `monty` or `cpython`.
    #[serde(default)]
    pub sandbox: Option<String>,
    /// Domain instructions for the system prompt (replaces the server's
    /// own); `{date}` in it becomes today's date.
    #[serde(default)]
    pub briefing: Option<String>,
    /// With `session`: the session's turns the model is given, by the runs
    /// that answered them, oldest first (a branch of the conversation: a
    /// question edited or an answer regenerated leaves out what it
    /// replaces). Every turn of the session when absent.
    #[serde(default)]
    pub history_runs: Option<Vec<String>>,
    /// Earlier turns of the conversation given with the question itself
    /// (the OpenAI-compatible endpoint's messages), used like a session's
    /// history but saved nowhere. Not a field of the JSON API.
    #[serde(skip)]
    pub history: Vec<Turn>,
}

/// A question being answered or answered, with its live trace.
#[derive(Debug)]
pub struct Run {
    /// Its trace (whole history kept in memory for the event stream).
    pub trace: Arc<Trace>,
    cancel: CancelToken,
    view: Mutex<RunView>,
    file: Mutex<Box<dyn EventLog>>,
    not_saved: Mutex<Option<String>>,
}

impl std::fmt::Debug for dyn EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventLog")
    }
}

impl Run {
    /// The run as the API shows it now.
    pub fn view(&self) -> RunView {
        lock(&self.view).clone()
    }

    /// Once finished: what of it could not be saved (its session turn, its
    /// trace, its record) and why; `None` when everything was.
    pub fn not_saved(&self) -> Option<String> {
        lock(&self.not_saved).clone()
    }

    /// True once it finished (done, failed or cancelled).
    pub fn finished(&self) -> bool {
        lock(&self.view).run.status != RunStatus::Running
    }

    /// Resolves once it finished, calling `each` whenever its trace moved
    /// (or it was woken) meanwhile.
    pub(crate) async fn until_finished(&self, mut each: impl FnMut()) {
        loop {
            let changed = self.trace.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.finished() {
                return;
            }
            each();
            changed.await;
        }
    }
}

pub(crate) use crate::sync::lock;

/// Everything the handlers work with.
pub struct App {
    engine: Engine,
    /// The store and its documents, swapped together when an indexing job
    /// re-opens the store.
    corpus: Mutex<Arc<Corpus>>,
    /// Sessions and runs: the store folder's files, or PostgreSQL.
    pub(crate) state: ServerState,
    runs: Mutex<Runs>,
    limits: Limits,
    embedder: Option<Arc<dyn Embedder>>,
    briefing: Option<String>,
    options: ServerOptions,
    /// Questions hold it shared while they are answered; an indexing job
    /// holds it alone while it writes the store and swaps it in.
    pub(crate) store_gate: tokio::sync::RwLock<()>,
    /// The address `serve` listens on (the Host check accepts it).
    bound: OnceLock<SocketAddr>,
    pub(crate) health: crate::sync::Cached<(axum::http::StatusCode, Value)>,
    pub(crate) indexer: crate::jobs::Indexer,
    /// Looks for a re-index made by another process (a shared store).
    watch: Option<StoreWatch>,
    /// Recent requests with a wrong token: their refusals are slowed down.
    pub(crate) wrong_tokens: crate::sync::WrongTokens,
}

#[derive(Default)]
struct Runs {
    by_id: HashMap<String, Arc<Run>>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    /// Places taken by runs being started (checked, not yet listed): they
    /// count against the limit, so the check and the start are one step.
    reserved: usize,
}

/// A place among the concurrent runs, given back when dropped unless the
/// run was listed in it.
struct RunPlace<'a> {
    runs: &'a Mutex<Runs>,
    taken: bool,
}

impl Drop for RunPlace<'_> {
    fn drop(&mut self) {
        if self.taken {
            lock(self.runs).reserved -= 1;
        }
    }
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("store", &self.store().location())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl App {
    /// A server over the store at `store`'s folder, answering with `engine`.
    /// Opens (creating) `sessions.sqlite` and `runs/` in the store folder.
    pub fn new(
        engine: Engine,
        store: Arc<Store>,
        limits: Limits,
        embedder: Option<Arc<dyn Embedder>>,
        briefing: Option<String>,
    ) -> Result<Self, StartError> {
        let state = crate::local_state::folder_state(store.dir())?;
        let corpus = Arc::new(Corpus::load(store).map_err(|e| StartError::Corpus(e.to_string()))?);
        Self::with_state(engine, corpus, state, limits, embedder, briefing)
    }

    /// A server over `corpus` (any store) keeping its sessions and runs in
    /// `state` (the store folder's files, or a shared database: several
    /// servers over one database answer and stream each other's runs).
    pub fn with_state(
        engine: Engine,
        corpus: Arc<Corpus>,
        state: ServerState,
        limits: Limits,
        embedder: Option<Arc<dyn Embedder>>,
        briefing: Option<String>,
    ) -> Result<Self, StartError> {
        if limits.max_concurrent_runs == 0 {
            return Err("the server must allow at least one run at a time".into());
        }
        if limits.saved_runs == 0 {
            return Err("the server must keep at least one finished run on disk".into());
        }
        if limits.max_connections == 0 || limits.max_connections_per_client == 0 {
            return Err("the server must accept at least one connection at a time".into());
        }
        let dir = corpus.local_store().map(|s| s.dir().to_path_buf());
        let app = App {
            engine,
            corpus: Mutex::new(corpus),
            state,
            runs: Mutex::new(Runs::default()),
            limits,
            embedder,
            briefing,
            options: ServerOptions::default(),
            store_gate: tokio::sync::RwLock::new(()),
            bound: OnceLock::new(),
            health: crate::sync::Cached::default(),
            indexer: crate::jobs::Indexer::new(dir.as_deref()),
            watch: None,
            wrong_tokens: crate::sync::WrongTokens::default(),
        };
        app.recover_interrupted();
        Ok(app)
    }

    /// Runs saved as running by an earlier process (killed, crashed) are
    /// recorded as failed: interrupted. A failure to write (a full disk) is
    /// left alone: reading such a run says the same.
    fn recover_interrupted(&self) {
        for id in self.state.runs.orphaned_at_start() {
            if let Ok(Some(view)) = self.state.runs.read(&id)
                && view.run.status == RunStatus::Running
            {
                let _ = self.state.runs.save(&self.interrupted(view));
            }
        }
    }

    /// A run saved as running that no process is answering any more.
    fn interrupted(&self, mut view: RunView) -> RunView {
        let id = view.run.id.clone();
        let last = self.state.runs.last_event_ts(&id);
        view.run.status = RunStatus::Failed;
        view.run.finished_at = Some(last.unwrap_or_else(|| view.run.started_at.clone()));
        view.error = Some(format!(
            "interrupted: the server stopped (killed, crashed or out of disk space) before this run finished; its steps up to then are kept (GET /api/runs/{id}/events)"
        ));
        view
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The same app with the access rules, upload folder, sources and model
    /// client of `options` (see [`ServerOptions`]); an invalid option (an
    /// empty token, a bad host name) is an error saying which.
    pub fn with_options(mut self, options: ServerOptions) -> Result<Self, StartError> {
        options.validate()?;
        self.options = options;
        self.indexer.remember(&self.options.sources);
        if let Some(dir) = &self.options.upload_dir {
            self.indexer.remember(std::slice::from_ref(dir));
        }
        Ok(self)
    }

    /// The options in force.
    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// Records the address the server listens on (the Host check accepts
    /// it); [`crate::serve`] calls it.
    pub fn set_bound_addr(&self, addr: SocketAddr) {
        let _ = self.bound.set(addr);
    }

    /// The address the server listens on, once known.
    pub fn bound_addr(&self) -> Option<SocketAddr> {
        self.bound.get().copied()
    }

    /// The store (the one re-opened by the last indexing job).
    pub fn store(&self) -> Arc<dyn CorpusStore> {
        self.corpus().store().clone()
    }

    /// The store's folder, when the store is one (not PostgreSQL).
    pub fn local_store(&self) -> Option<Arc<Store>> {
        self.corpus().local_store()
    }

    /// Where the server keeps sessions and runs (the store's `runs/`
    /// folder, or a database), for messages.
    pub fn state_location(&self) -> String {
        self.state.runs.location()
    }

    /// The engine with the server's default settings.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Documents and chunks of the corpus.
    pub fn corpus(&self) -> Arc<Corpus> {
        lock(&self.corpus).clone()
    }

    /// The same app listing the store's documents again whenever `watch`
    /// sees a new store generation (a re-index by another process, as
    /// `rlm index --store URL` does to a store shared by several nodes).
    /// The store object stays: its lookups and searches already read the
    /// store as it is.
    pub fn with_store_watch(mut self, watch: StoreWatch) -> Self {
        self.watch = Some(watch);
        self
    }

    /// The documents as of the store's last generation: with a
    /// [`StoreWatch`], checks it (at most once per its interval; blocking,
    /// off the async workers) and swaps in the documents listed afresh
    /// when it changed. A run holds the corpus it started with, so runs in
    /// flight keep their document list. A failed check keeps the documents
    /// listed before.
    pub fn current_corpus(&self) -> Arc<Corpus> {
        let current = self.corpus();
        let Some(due) = self.watch.as_ref().and_then(StoreWatch::due) else {
            return current;
        };
        let fresh = off_runtime(|| -> Result<Option<(u64, Corpus)>, String> {
            let generation = due.read()?;
            if generation == due.seen {
                return Ok(None);
            }
            let corpus = Corpus::load(current.store().clone())
                .map_err(|e| format!("listing the documents of generation {generation}: {e}"))?;
            Ok(Some((generation, corpus)))
        });
        match fresh {
            Ok(Some((generation, corpus))) => {
                let corpus = Arc::new(corpus);
                self.swap_corpus(corpus.clone());
                due.done(Ok(Some(generation)));
                corpus
            }
            Ok(None) => {
                due.done(Ok(None));
                current
            }
            Err(e) => {
                due.done(Err(e));
                current
            }
        }
    }

    /// Replaces the store and its documents (an indexing job, holding
    /// [`App::store_gate`] alone, after it wrote the store).
    pub(crate) fn swap_corpus(&self, corpus: Arc<Corpus>) {
        *lock(&self.corpus) = corpus;
    }

    /// Checks `body` and starts answering it in the background.
    pub fn start_run(self: &Arc<Self>, body: AskBody) -> Result<Arc<Run>, ApiError> {
        let prepared = self.prepare(&body)?;
        let id = new_run_id();
        let view = RunView {
            run: RunInfo {
                id: id.clone(),
                question: body.question.clone(),
                session: body.session.clone(),
                flow: prepared.flow.as_str().to_string(),
                status: RunStatus::Running,
                started_at: now_rfc3339(),
                finished_at: None,
                history_runs: body.history_runs.clone(),
            },
            answer: None,
            error: None,
        };
        let mut place = {
            // Checked and taken under one lock: two requests cannot both
            // take the last free place, even while the first is saved.
            let mut runs = lock(&self.runs);
            let running = runs.by_id.values().filter(|r| !r.finished()).count() + runs.reserved;
            if running >= self.limits.max_concurrent_runs {
                return Err(ApiError::busy(format!(
                    "the server is answering {running} questions already (limit {}); try again when one finishes, or raise RLM_SERVE_MAX_RUNS",
                    self.limits.max_concurrent_runs
                )));
            }
            runs.reserved += 1;
            RunPlace {
                runs: &self.runs,
                taken: true,
            }
        };
        // Saved as running before any model call: after a crash the run is
        // listed as interrupted instead of lost. Without room for that, no
        // model budget is spent on an answer that could not be kept.
        let file = off_runtime(|| self.state.runs.create(&view))
            .map_err(|e| ApiError::insufficient_storage(format!("cannot start the run: {e}")))?;
        let run = Arc::new(Run {
            trace: Arc::new(Trace::new().with_history()),
            cancel: CancelToken::new(),
            file: Mutex::new(file),
            not_saved: Mutex::new(None),
            view: Mutex::new(view),
        });
        {
            let mut runs = lock(&self.runs);
            runs.by_id.insert(id.clone(), run.clone());
            runs.order.push_back(id.clone());
            // The listed run holds the place now.
            runs.reserved -= 1;
            place.taken = false;
            self.forget_old_runs(&mut runs);
        }
        let app = self.clone();
        let task_run = run.clone();
        tokio::spawn(async move { app.answer(task_run, body, prepared).await });
        tokio::spawn(keep_trace_written(run.clone()));
        Ok(run)
    }

    /// Validates a request into engine settings. Every problem is a 400
    /// naming the field.
    fn prepare(&self, body: &AskBody) -> Result<ResolvedQuestion, ApiError> {
        let question = body.question.trim();
        if question.is_empty() {
            return Err(ApiError::bad_request(
                "the question is empty; send {\"question\": \"...\"}",
            ));
        }
        let chars = body.question.chars().count();
        if chars > self.limits.max_question_chars {
            return Err(ApiError::bad_request(format!(
                "the question has {chars} characters; the limit is {}",
                self.limits.max_question_chars
            )));
        }
        if let Some(name) = &body.session {
            validate_session_name(name)?;
        }
        if let Some(runs) = &body.history_runs {
            if body.session.is_none() {
                return Err(ApiError::bad_request(
                    "history_runs names turns of a session: give session too",
                ));
            }
            if runs.len() > MAX_SESSION_TURNS || runs.iter().any(|r| !valid_run_id(r)) {
                return Err(ApiError::bad_request(format!(
                    "history_runs: at most {MAX_SESSION_TURNS} run ids (as the server makes them: letters, digits and -)"
                )));
            }
        }
        if let Some(schema) = &body.response_schema {
            rlm_llm::schema::check(schema)
                .map_err(|e| ApiError::bad_request(format!("response_schema: {e}")))?;
        }
        let number = |n: &Option<serde_json::Number>| n.as_ref().map(ToString::to_string);
        let mut settings = QuestionSettings::new(Surface::Api)
            .with(&table::INSPECTOR, body.inspector.clone())
            .with(&table::CITATIONS, body.citations.clone())
            .with(&table::COVERAGE, body.coverage.map(|c| c.to_string()))
            .with(&table::TURN_FORMAT, body.turn_format.clone())
            .with(
                &table::SUBCALL_CACHE,
                body.subcall_cache.map(|c| c.to_string()),
            )
            .with(&table::HIGH_RECALL, body.high_recall.map(|c| c.to_string()))
            .with(
                &table::EXPAND_FILES,
                body.expand_files.map(|c| c.to_string()),
            )
            .with(
                &table::RLM_SUMMARIZE,
                body.rlm_summarize.map(|c| c.to_string()),
            )
            .with(&table::MAX_LLM_CALLS, number(&body.max_llm_calls))
            .with(&table::MAX_ITERATIONS, number(&body.max_iterations))
            .with(&table::MAX_DEPTH, number(&body.max_depth))
            .with(&table::MAX_COST_USD, number(&body.max_cost_usd))
            .with(&table::MAX_WALL_SECS, number(&body.max_wall_secs))
            .with(&table::SANDBOX, body.sandbox.clone());
        settings.flow = body.flow.clone();
        settings.use_rlm = body.use_rlm;
        let resolved = settings
            .resolve(self.engine.config())
            .map_err(ApiError::bad_request)?;
        if let Some(briefing) = &body.briefing {
            let chars = briefing.chars().count();
            if chars > self.limits.max_briefing_chars {
                return Err(ApiError::bad_request(format!(
                    "the briefing has {chars} characters; the limit is {} (rlm serve --max-briefing-chars)",
                    self.limits.max_briefing_chars
                )));
            }
        }
        Ok(resolved)
    }

    /// Runs the engine and records the outcome.
    async fn answer(self: Arc<Self>, run: Arc<Run>, body: AskBody, prepared: ResolvedQuestion) {
        let conversation = match &body.session {
            Some(name) => Conversation::Session(SessionTurn {
                sessions: self.state.sessions.as_ref(),
                name: name.clone(),
                run_id: Some(run.view().run.id),
                keep_cancelled: true,
                history_runs: body.history_runs.clone(),
            }),
            None => Conversation::Given(body.history.clone()),
        };
        let question = Question {
            text: body.question.clone(),
            settings: prepared,
            embedder: self.embedder.clone(),
            briefing: body
                .briefing
                .as_ref()
                .or(self.briefing.as_ref())
                .map(|b| with_date(b)),
            trace: run.trace.clone(),
            cancel: run.cancel.clone(),
            conversation,
            answer_schema: body.response_schema.clone(),
        };
        // Held while answering: an indexing job waits for it, and a question
        // asked during one starts when it ends, over the new store.
        let _reading = self.store_gate.read().await;
        match ask_in_session(&self.engine, self.current_corpus(), question).await {
            Ok(AskedTurn {
                mut answer,
                not_saved,
            }) => {
                // The findings kept with the run: as many as a session turn
                // keeps, whatever the engine gathered.
                let (findings, omitted) = cap_findings(&answer.findings);
                answer.findings = findings;
                let not_saved: Vec<String> = not_saved
                    .map(|e| format!("the session turn ({e})"))
                    .into_iter()
                    .collect();
                let status = if run.cancel.is_cancelled() {
                    RunStatus::Cancelled
                } else {
                    RunStatus::Done
                };
                let mut value = serde_json::to_value(&answer).unwrap_or(Value::Null);
                // As `rlm ask --json` has them: the sources of the supported
                // claims, and apart the related passages (never sources).
                value["sources"] = serde_json::json!(answer.sources());
                value["related_sources"] = serde_json::json!(answer.related_sources());
                if omitted > 0 {
                    value["findings_omitted"] = omitted.into();
                }
                self.finish(&run, status, Some(value), None, not_saved);
            }
            Err(e) => self.finish(
                &run,
                RunStatus::Failed,
                None,
                Some(e.to_string()),
                Vec::new(),
            ),
        }
    }

    /// Records the outcome: the trace written to its end and synced, the
    /// record replaced atomically, then the run shown as finished. Whatever
    /// could not be saved is said in `error` and [`Run::not_saved`].
    fn finish(
        &self,
        run: &Run,
        status: RunStatus,
        answer: Option<Value>,
        error: Option<String>,
        not_saved: Vec<String>,
    ) {
        off_runtime(|| self.finish_saving(run, status, answer, error, not_saved));
    }

    /// [`App::finish`]'s work (which may wait on the state's I/O).
    fn finish_saving(
        &self,
        run: &Run,
        status: RunStatus,
        answer: Option<Value>,
        error: Option<String>,
        mut not_saved: Vec<String>,
    ) {
        if let Err(e) = lock(&run.file).finish(&run.trace) {
            not_saved.push(e.to_string());
        }
        let mut view = run.view();
        view.run.status = status;
        view.run.finished_at = Some(now_rfc3339());
        view.answer = answer;
        view.error = outcome_error(&error, &not_saved);
        if let Err(e) = self.state.runs.save(&view) {
            not_saved.push(e.to_string());
            view.error = outcome_error(&error, &not_saved);
        }
        if !not_saved.is_empty() {
            eprintln!(
                "rlm serve: run {}: {}",
                view.run.id,
                view.error.as_deref().unwrap_or_default()
            );
            *lock(&run.not_saved) = view.error.clone();
        }
        *lock(&run.view) = view;
        run.trace.wake();
        self.prune_saved_runs();
    }

    /// Waits (at most `grace`) until no run is in progress: at shutdown,
    /// cancelled runs save their partial answers.
    pub async fn wait_idle(&self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let running = lock(&self.runs).by_id.values().any(|r| !r.finished());
            if !running || tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Deletes the oldest saved runs beyond [`Limits::saved_runs`], never one
    /// still in memory and running.
    fn prune_saved_runs(&self) {
        let in_use = |id: &str| self.run(id).is_some_and(|r| !r.finished());
        let removed = self.state.runs.prune(self.limits.saved_runs, &in_use);
        if !removed.is_empty() {
            let mut runs = lock(&self.runs);
            for id in removed {
                runs.by_id.remove(&id);
            }
        }
    }

    fn forget_old_runs(&self, runs: &mut Runs) {
        while runs.order.len() > self.limits.kept_runs {
            let Some(oldest) = runs.order.front().cloned() else {
                break;
            };
            if runs.by_id.get(&oldest).is_some_and(|r| !r.finished()) {
                break; // Never forget a run in progress.
            }
            runs.order.pop_front();
            runs.by_id.remove(&oldest);
        }
    }

    /// The run with `id`, if it is in memory.
    pub fn run(&self, id: &str) -> Option<Arc<Run>> {
        lock(&self.runs).by_id.get(id).cloned()
    }

    /// The run with `id`: in memory, else as saved in `runs/` when it finished.
    pub fn run_view(&self, id: &str) -> Result<RunView, ApiError> {
        if let Some(run) = self.run(id) {
            return Ok(run.view());
        }
        self.saved_run(id)?
            .ok_or_else(|| ApiError::not_found(unknown_run(id)))
    }

    /// A run no longer in memory, as saved; over a store folder, one saved
    /// as running is one that an earlier process never finished:
    /// interrupted (over a shared store another node may be answering it;
    /// its lease says when it is not).
    fn saved_run(&self, id: &str) -> Result<Option<RunView>, ApiError> {
        let view = self.state.runs.read(id)?;
        Ok(view.map(|v| {
            if v.run.status == RunStatus::Running
                && self.run(id).is_none()
                && self.state.runs.single_node()
            {
                self.interrupted(v)
            } else {
                v
            }
        }))
    }

    /// A saved run's events in order (a run no longer in memory, or one
    /// another node answers).
    pub(crate) fn saved_events(&self, id: &str) -> Box<dyn crate::state::EventCursor> {
        self.state.runs.events(id)
    }

    /// Runs newest first: those in memory, then saved ones, up to `limit`;
    /// only those of `session` when given.
    pub fn list_runs(&self, limit: usize, session: Option<&str>) -> Vec<RunSummary> {
        let wanted = |r: &RunSummary| session.is_none_or(|s| r.run.session.as_deref() == Some(s));
        let mut out: Vec<RunSummary> = {
            let runs = lock(&self.runs);
            runs.order
                .iter()
                .rev()
                .filter_map(|id| runs.by_id.get(id))
                .map(|r| r.view().summary())
                .filter(wanted)
                .collect()
        };
        if out.len() < limit {
            let in_memory: std::collections::HashSet<String> =
                lock(&self.runs).by_id.keys().cloned().collect();
            let skip = |id: &str| in_memory.contains(id);
            let single = self.state.runs.single_node();
            for summary in self.state.runs.list(limit - out.len(), session, &skip) {
                let summary = if single && summary.run.status == RunStatus::Running {
                    // Saved as running, in no process's memory: interrupted.
                    match self.saved_run(&summary.run.id) {
                        Ok(Some(v)) => v.summary(),
                        _ => continue,
                    }
                } else {
                    summary
                };
                out.push(summary);
            }
        }
        out.truncate(limit);
        out
    }

    /// Cancels a running run.
    pub fn cancel(&self, id: &str) -> Result<RunView, ApiError> {
        let run = match self.run(id) {
            Some(r) => r,
            None => {
                if !self.state.runs.single_node() {
                    // Another node's run: the request reaches it with its
                    // next heartbeat.
                    if let Some(view) = self.state.runs.request_cancel(id)? {
                        return Ok(view);
                    }
                }
                return match self.saved_run(id)? {
                    Some(_) => Err(ApiError::conflict(format!("run {id} already finished"))),
                    None => Err(ApiError::not_found(unknown_run(id))),
                };
            }
        };
        if run.finished() {
            return Err(ApiError::conflict(format!("run {id} already finished")));
        }
        run.cancel.cancel();
        Ok(run.view())
    }

    /// Over a shared store: renews the leases of this node's runs, marks
    /// runs of dead nodes failed, and cancels the runs another node asked
    /// to cancel (or that this node lost), for as long as the server runs.
    /// Returns at once over a store folder.
    pub async fn keep_leases(self: Arc<Self>) {
        let Some(every) = self.state.runs.heartbeat_every() else {
            return;
        };
        let mut last_error: Option<String> = None;
        loop {
            let running: Vec<String> = lock(&self.runs)
                .by_id
                .iter()
                .filter(|(_, r)| !r.finished())
                .map(|(id, _)| id.clone())
                .collect();
            match off_runtime(|| self.state.runs.heartbeat(&running)) {
                Ok(beat) => {
                    last_error = None;
                    for id in beat.cancel.iter().chain(&beat.lost) {
                        if let Some(run) = self.run(id) {
                            run.cancel.cancel();
                        }
                    }
                }
                Err(e) => {
                    // Said once per outage, not every beat.
                    let e = e.to_string();
                    if last_error.as_ref() != Some(&e) {
                        eprintln!("rlm serve: cannot renew this node's leases: {e}");
                    }
                    last_error = Some(e);
                }
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Cancels every run in progress (server shutdown).
    pub fn cancel_all(&self) {
        for run in lock(&self.runs).by_id.values() {
            if !run.finished() {
                run.cancel.cancel();
            }
        }
    }
}

/// `text` with every `{date}` replaced by today's date (YYYY-MM-DD, UTC),
/// as the original system's PROMPT.md placeholder.
pub(crate) fn with_date(text: &str) -> String {
    if !text.contains("{date}") {
        return text.to_string();
    }
    let today: String = now_rfc3339().chars().take(10).collect();
    text.replace("{date}", &today)
}

fn unknown_run(id: &str) -> String {
    format!("no run {id:?}; GET /api/runs lists the runs")
}

/// `r<ms since epoch, hex>-<random>`: sortable, unguessable enough to keep
/// clients from tripping over each other, safe as a file name.
fn new_run_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!("r{ms:x}-{:08x}", fastrand::u32(..))
}

/// A run's `error`: why it failed, then what of it was not saved.
fn outcome_error(error: &Option<String>, not_saved: &[String]) -> Option<String> {
    let not_saved = (!not_saved.is_empty()).then(|| not_saved.join("; "));
    match (error, not_saved) {
        (None, None) => None,
        (Some(e), None) => Some(e.clone()),
        (None, Some(n)) => Some(format!(
            "answered, but not saved: {n}; free space in the store's folder"
        )),
        (Some(e), Some(n)) => Some(format!("{e}; also not saved: {n}")),
    }
}

/// Appends the run's events to its trace file as they come, until the run
/// finishes ([`App::finish`] writes the rest).
async fn keep_trace_written(run: Arc<Run>) {
    run.until_finished(|| off_runtime(|| lock(&run.file).catch_up(&run.trace)))
        .await;
}

/// Cancels a run when dropped: a handler that waits for a run holds one, so
/// a client that hangs up cancels its question rather than leaving it
/// running unobserved (`std::mem::forget` it once the run finished).
pub(crate) struct CancelOnDrop(pub(crate) Option<(Arc<App>, String)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some((app, id)) = self.0.take() {
            let _ = app.cancel(&id);
        }
    }
}
