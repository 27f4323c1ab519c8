//! The one ask path every surface takes (`rlm_engine::ask_in_session`) on
//! both session back-ends, a store folder's `sessions.sqlite` and
//! PostgreSQL (`rlm_store_pg::testing`; skipped with a message when there
//! is none): the session's turns and findings reach the model, the new turn
//! is appended with its run id, given turns are used and saved nowhere, a
//! cancelled run's turn is kept only when asked to be, and a back-end that
//! fails says so without losing the answer.

use std::sync::Arc;

use rlm_cluster::{Cluster, ClusterOptions};
use rlm_corpus::{IndexOptions, Store};
use rlm_engine::session::{Finding, SessionPage, SessionState, SessionSummary, Turn};
use rlm_engine::{
    AskError, CancelToken, Conversation, Corpus, Engine, EngineConfig, Flow, FolderSessions,
    PipelineRequest, Question, ResolvedQuestion, SessionBackend, SessionError, SessionTurn, Trace,
    ask_in_session,
};
use rlm_llm::testing::{Matcher, Script, ScriptedServer};
use rlm_sandbox::{SandboxConfig, WorkerPool};
use rlm_store_pg::testing::test_database;

const FINAL: &str = "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])";

/// A model that records a finding in a cell, then answers with a quote.
fn model() -> ScriptedServer {
    ScriptedServer::spawn(
        Script::new()
            .on(Matcher::any_contains("REPL output"), FINAL)
            .otherwise(
                "```repl\nadd_finding('the code is 4721', '[[doc:1]]')\nprint('noted')\n```",
            ),
    )
}

/// Three small documents indexed into a store folder; the second holds the code.
fn corpus(dir: &std::path::Path) -> Arc<Corpus> {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, text) in [
        ("a_intro.txt", "This memo describes the office move.\n"),
        (
            "b_notes.txt",
            "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
        ),
        ("c_misc.txt", "Lunch options and parking spaces.\n"),
    ] {
        std::fs::write(docs.join(name), text).unwrap();
    }
    let store_dir = dir.join("store");
    Store::index(&store_dir, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    Arc::new(Corpus::load(Arc::new(Store::open(&store_dir).unwrap())).unwrap())
}

async fn engine(server: &ScriptedServer) -> Engine {
    let pool = WorkerPool::new(SandboxConfig::new(rlm_sandbox::testing::worker()), 1)
        .await
        .unwrap();
    let config = EngineConfig {
        root_model: "root-model".into(),
        sub_model: "sub-model".into(),
        ..EngineConfig::default()
    };
    Engine::new(Arc::new(server.client()), pool, config)
}

fn question<'a>(engine: &Engine, text: &str, conversation: Conversation<'a>) -> Question<'a> {
    Question {
        text: text.into(),
        settings: ResolvedQuestion {
            config: engine.config().clone(),
            flow: Flow::Repl,
            pipeline: PipelineRequest::default(),
        },
        embedder: None,
        briefing: None,
        trace: Arc::new(Trace::new()),
        cancel: CancelToken::new(),
        conversation,
        answer_schema: None,
    }
}

fn in_session<'a>(
    sessions: &'a dyn SessionBackend,
    run_id: &str,
    keep_cancelled: bool,
) -> Conversation<'a> {
    Conversation::Session(SessionTurn {
        sessions,
        name: "case-1".into(),
        run_id: Some(run_id.into()),
        keep_cancelled,
        history_runs: None,
    })
}

/// The model requests of the question `text` (its own words in the last
/// user message of each).
fn requests_of(server: &ScriptedServer, text: &str) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.messages.iter().any(|m| m.content.contains(text)))
        .map(|r| {
            r.messages
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// The whole path on `sessions`, which must hold no session "case-1" yet.
async fn asks_through_one_path(sessions: &dyn SessionBackend) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let server = model();
    let engine = engine(&server).await;

    // The first question starts the session; its turn, run id and finding are kept.
    let first = "What is the secret code of the first memo?";
    let asked = ask_in_session(
        &engine,
        corpus.clone(),
        question(&engine, first, in_session(sessions, "r1", true)),
    )
    .await
    .unwrap();
    assert!(
        asked.answer.answer.contains("4721"),
        "{}",
        asked.answer.answer
    );
    assert!(asked.not_saved.is_none(), "{:?}", asked.not_saved);
    let page = sessions.page("case-1", None, 20).unwrap();
    assert_eq!(page.turns_total, 1);
    assert_eq!(page.history[0].question, first);
    assert_eq!(page.history[0].answer, asked.answer.answer);
    assert_eq!(page.history[0].citations, asked.answer.citations);
    assert_eq!(page.turn_meta[0].run_id.as_deref(), Some("r1"));
    assert_eq!(page.findings[0].text, "the code is 4721");

    // The second sees the first turn and its finding.
    let second = "And who must keep it safe?";
    let asked = ask_in_session(
        &engine,
        corpus.clone(),
        question(&engine, second, in_session(sessions, "r2", true)),
    )
    .await
    .unwrap();
    assert!(asked.not_saved.is_none());
    let prompt = &requests_of(&server, second)[0];
    assert!(prompt.contains(first), "{prompt}");
    assert!(prompt.contains("the code is 4721"), "{prompt}");
    let page = sessions.page("case-1", None, 20).unwrap();
    let runs: Vec<_> = page.turn_meta.iter().map(|m| m.run_id.clone()).collect();
    assert_eq!(runs, [Some("r1".to_string()), Some("r2".to_string())]);

    // Given turns (the OpenAI endpoint's messages) reach the model and are saved nowhere.
    let given = Turn {
        question: "Which memo was it in?".into(),
        answer: "The meeting notes.".into(),
        ..Turn::default()
    };
    let third = "Repeat the code, please.";
    ask_in_session(
        &engine,
        corpus.clone(),
        question(&engine, third, Conversation::Given(vec![given])),
    )
    .await
    .unwrap();
    assert!(requests_of(&server, third)[0].contains("Which memo was it in?"));
    assert_eq!(sessions.list().unwrap().len(), 1);
    assert_eq!(sessions.page("case-1", None, 20).unwrap().turns_total, 2);

    // A cancelled run's partial turn is kept only when the surface asks.
    for keep in [false, true] {
        let q = question(&engine, "Cancelled?", in_session(sessions, "r3", keep));
        q.cancel.cancel();
        let asked = ask_in_session(&engine, corpus.clone(), q).await.unwrap();
        assert!(asked.answer.partial);
        assert!(asked.not_saved.is_none());
    }
    let page = sessions.page("case-1", None, 20).unwrap();
    assert_eq!(page.turns_total, 3, "only the kept cancelled turn");
    assert!(page.history[2].partial);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ask_path_over_a_store_folder() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = FolderSessions::open(dir.path()).unwrap();
    asks_through_one_path(&sessions).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ask_path_over_postgresql() {
    let Some(db) = test_database() else { return };
    let cluster = Cluster::connect(db.url(), ClusterOptions::default()).unwrap();
    let state = cluster.state();
    asks_through_one_path(state.sessions.as_ref()).await;
}

/// A back-end that can neither read nor save.
struct Broken;

fn broken<T>() -> Result<T, SessionError> {
    Err(SessionError::storage(
        "read session \"case-1\"",
        "disk I/O error",
    ))
}

impl SessionBackend for Broken {
    fn load(&self, _: &str) -> Result<SessionState, SessionError> {
        broken()
    }
    fn page(&self, _: &str, _: Option<u64>, _: usize) -> Result<SessionPage, SessionError> {
        broken()
    }
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        broken()
    }
    fn summary(&self, _: &str) -> Result<Option<SessionSummary>, SessionError> {
        broken()
    }
    fn create(&self, _: &str, _: Option<&str>) -> Result<bool, SessionError> {
        broken()
    }
    fn rename(&self, _: &str, _: &str) -> Result<bool, SessionError> {
        broken()
    }
    fn delete(&self, _: &str) -> Result<bool, SessionError> {
        broken()
    }
    fn append_run(
        &self,
        _: &str,
        _: &Turn,
        _: &[Finding],
        _: Option<&str>,
    ) -> Result<(), SessionError> {
        Err(SessionError::storage(
            "save session \"case-1\"",
            "database or disk is full",
        ))
    }
}

/// Reads but cannot save.
struct Full;

impl SessionBackend for Full {
    fn load(&self, name: &str) -> Result<SessionState, SessionError> {
        Ok(SessionState {
            name: name.into(),
            ..SessionState::default()
        })
    }
    fn page(&self, n: &str, b: Option<u64>, l: usize) -> Result<SessionPage, SessionError> {
        Broken.page(n, b, l)
    }
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        Broken.list()
    }
    fn summary(&self, n: &str) -> Result<Option<SessionSummary>, SessionError> {
        Broken.summary(n)
    }
    fn create(&self, n: &str, t: Option<&str>) -> Result<bool, SessionError> {
        Broken.create(n, t)
    }
    fn rename(&self, n: &str, t: &str) -> Result<bool, SessionError> {
        Broken.rename(n, t)
    }
    fn delete(&self, n: &str) -> Result<bool, SessionError> {
        Broken.delete(n)
    }
    fn append_run(
        &self,
        n: &str,
        t: &Turn,
        f: &[Finding],
        r: Option<&str>,
    ) -> Result<(), SessionError> {
        Broken.append_run(n, t, f, r)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_cannot_be_read_or_saved_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let server = model();
    let engine = engine(&server).await;
    let q = question(
        &engine,
        "What is the code?",
        in_session(&Broken, "r1", true),
    );
    let e = ask_in_session(&engine, corpus.clone(), q)
        .await
        .unwrap_err();
    assert!(matches!(e, AskError::Session(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "cannot read session \"case-1\": disk I/O error"
    );
    assert!(
        server.requests().is_empty(),
        "no model call without the session"
    );

    let q = question(&engine, "What is the code?", in_session(&Full, "r1", true));
    let asked = ask_in_session(&engine, corpus, q).await.unwrap();
    assert!(asked.answer.answer.contains("4721"));
    assert_eq!(
        asked.not_saved.unwrap().to_string(),
        "cannot save session \"case-1\": database or disk is full"
    );
}
