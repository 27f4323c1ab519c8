//! `ask` of `rlm mcp` in a session, in process: the server over an
//! in-memory stream, the scripted model over real HTTP, real sandbox
//! workers. Its turns go where `rlm ask --session` keeps them, whichever
//! back-end the store's sessions are on: a store folder, or PostgreSQL
//! (`rlm_store_pg::testing`; skipped with a message when there is none).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rlm_corpus::{CorpusStore, IndexOptions, IndexReport, Store};
use rlm_engine::{Corpus, Engine, EngineConfig, FolderSessions, SessionBackend};
use rlm_llm::testing::{Matcher, Script, ScriptedServer};
use rlm_mcp::{StdioOptions, StoreHost, StoreView};
use rlm_sandbox::{SandboxConfig, WorkerPool};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Opens the store folder; its sessions come from `sessions`.
struct Host {
    dir: PathBuf,
    sessions: Box<dyn Fn() -> Box<dyn SessionBackend> + Send + Sync>,
}

impl StoreHost for Host {
    fn open(&self) -> anyhow::Result<StoreView> {
        let store: Arc<dyn CorpusStore> = Arc::new(Store::open(&self.dir)?);
        let corpus = Arc::new(Corpus::load(store.clone())?);
        Ok(StoreView {
            store,
            corpus,
            embedder: None,
        })
    }
    fn index(&self, _: &[PathBuf], _: &IndexOptions) -> anyhow::Result<IndexReport> {
        anyhow::bail!("not in this test")
    }
    fn sessions(&self) -> anyhow::Result<Box<dyn SessionBackend>> {
        Ok((self.sessions)())
    }
}

/// Three small documents indexed into `<dir>/store`.
fn store(dir: &Path) -> PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "This memo describes the office move.\n").unwrap();
    std::fs::write(
        docs.join("b.txt"),
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    )
    .unwrap();
    let store = dir.join("store");
    Store::index(&store, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    store
}

/// One JSON-RPC line out, the reply with `id` back (notifications skipped).
struct Client {
    to: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    from: BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    next_id: i64,
}

impl Client {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.to.write_all(line.as_bytes()).await.unwrap();
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let mut line = String::new();
            assert!(self.from.read_line(&mut line).await.unwrap() > 0, "closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

/// Two questions in session `case-1` through `rlm mcp`'s `ask`; the second
/// sees the first, and both turns are in `sessions()`.
async fn ask_twice_in_a_session(
    sessions: impl Fn() -> Box<dyn SessionBackend> + Send + Sync + 'static,
) {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = store(dir.path());
    let server = ScriptedServer::start(
        Script::new()
            .on(
                Matcher::system_contains(rlm_engine::grounding::JUDGE_PROMPT_START),
                r#"{"verdicts": [{"claim": 1, "verdict": "entailed"}]}"#,
            )
            .on(
                Matcher::any_contains("REPL output"),
                // In other words than its passage, so the judge is asked.
                "FINAL(The code is 4721 [[doc:1 \"The secret code is 4721\"]])",
            )
            .otherwise("```repl\nprint(context[:200])\n```"),
    )
    .await;
    let pool = WorkerPool::new(SandboxConfig::new(rlm_sandbox::testing::worker()), 1)
        .await
        .unwrap();
    let engine = Engine::new(
        Arc::new(server.client()),
        pool,
        EngineConfig {
            root_model: "root-model".into(),
            sub_model: "sub-model".into(),
            ..EngineConfig::default()
        },
    );
    let sessions = Arc::new(sessions);
    let for_host = sessions.clone();
    let host = Host {
        dir: store_dir.clone(),
        sessions: Box::new(move || for_host()),
    };
    let view = host.open().unwrap();
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (server_in, server_out) = tokio::io::split(theirs);
    let options = StdioOptions {
        store_dir,
        allow_index: false,
        max_runs: 1,
        max_question_chars: 1000,
        briefing: None,
    };
    let serving = tokio::spawn(rlm_mcp::serve_stdio(
        engine,
        Some(view),
        Box::new(host),
        options,
        (server_in, server_out),
        std::future::pending(),
    ));
    let (from, to) = tokio::io::split(ours);
    let mut client = Client {
        to,
        from: BufReader::new(from),
        next_id: 0,
    };
    let init = client
        .call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "stdio_sessions test", "version": "0"}}),
        )
        .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "rlm", "{init}");
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    for n in 1..=2 {
        let r = client
            .call(
                "tools/call",
                json!({"name": "ask", "arguments": {
                    "question": format!("What is the secret code? ({n})"), "session": "case-1"}}),
            )
            .await;
        let result = &r["result"];
        assert_eq!(result["isError"], false, "{r}");
        assert!(
            result["structuredContent"]["answer"]
                .as_str()
                .unwrap()
                .contains("4721"),
            "{r}"
        );
        assert_eq!(
            result["structuredContent"]["session_not_saved"],
            Value::Null
        );
        // The claim: entailed by its passage, and its quote verified, apart.
        let claim = &result["structuredContent"]["claims"][0];
        assert_eq!(claim["support"], "supported", "{r}");
        assert_eq!(claim["quote_check"], "verified", "{r}");
        assert_eq!(claim["passages"], json!([1]), "{r}");
        assert_eq!(
            result["structuredContent"]["sources"][0]["quote"],
            "The secret code is 4721"
        );
        let md = result["content"][0]["text"].as_str().unwrap();
        assert!(
            md.contains("- entailed by its passage [1]; quote verified: The code is 4721"),
            "{md}"
        );
    }
    // The second answer's verdict came from the engine's cache.
    let judged = server
        .requests()
        .iter()
        .filter(|r| {
            r.system()
                .contains(rlm_engine::grounding::JUDGE_PROMPT_START)
        })
        .count();
    assert_eq!(judged, 1);
    let second: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.messages.iter().any(|m| m.content.contains("(2)")))
        .collect();
    assert!(
        second[0]
            .messages
            .iter()
            .any(|m| m.content.contains("What is the secret code? (1)")),
        "the second question sees the first"
    );
    let page = sessions().page("case-1", None, 20).unwrap();
    let questions: Vec<_> = page.history.iter().map(|t| t.question.as_str()).collect();
    assert_eq!(
        questions,
        [
            "What is the secret code? (1)",
            "What is the secret code? (2)"
        ]
    );
    serving.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_keeps_its_session_in_the_store_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    ask_twice_in_a_session(move || Box::new(FolderSessions::open(&path).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_keeps_its_session_in_postgresql() {
    let Some(db) = rlm_store_pg::testing::test_database() else {
        return;
    };
    let url = db.url().to_string();
    ask_twice_in_a_session(move || {
        rlm_cluster::Cluster::connect(&url, rlm_cluster::ClusterOptions::default())
            .unwrap()
            .state()
            .sessions
    })
    .await;
}
