//! What the server's test files share: a three-document store on disk, an
//! engine over real sandbox workers and the scripted model, and a harness
//! running the real server on a real socket (restartable over the same
//! store) with a small HTTP client.

// Each test file uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rlm_corpus::{IndexOptions, Store};
use rlm_engine::{BudgetConfig, Engine, EngineConfig};
use rlm_llm::testing::{Matcher, Script, ScriptedServer};
use rlm_sandbox::{SandboxConfig, WorkerPool};
use rlm_server::{App, Limits, ServerOptions};
use serde_json::Value;

/// The documents of the test store.
pub const DOCS: [(&str, &str); 3] = [
    ("a_intro.txt", "This memo describes the office move.\n"),
    (
        "b_notes.txt",
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    ),
    ("c_misc.txt", "Lunch options and parking spaces.\n"),
];

/// Writes [`DOCS`] to `<dir>/docs` and indexes them into `<dir>/store`;
/// returns the store folder.
pub fn corpus(dir: &Path) -> PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, text) in DOCS {
        std::fs::write(docs.join(name), text).unwrap();
    }
    let store_dir = dir.join("store");
    Store::index(&store_dir, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    store_dir
}

/// An engine answering with `model`, over `workers` real sandbox workers.
pub async fn engine(model: &ScriptedServer, workers: usize) -> Engine {
    let config = EngineConfig {
        budget: BudgetConfig::default(),
        root_model: "root-model".into(),
        sub_model: "sub-model".into(),
        ..EngineConfig::default()
    };
    let pool = WorkerPool::new(SandboxConfig::new(rlm_sandbox::testing::worker()), workers)
        .await
        .unwrap();
    Engine::new(Arc::new(model.client()), pool, config)
}

/// The app over the store at `store_dir`.
pub async fn app(
    store_dir: &Path,
    model: &ScriptedServer,
    limits: Limits,
    options: ServerOptions,
) -> Arc<App> {
    let store = Arc::new(Store::open(store_dir).unwrap());
    let app = App::new(engine(model, 1).await, store, limits, None, None)
        .unwrap()
        .with_options(options)
        .unwrap();
    Arc::new(app)
}

/// The root agent's requests.
pub fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

/// Requests of the engine's entailment judge (one per answer with passages).
pub fn judge() -> Matcher {
    Matcher::system_contains(rlm_engine::grounding::JUDGE_PROMPT_START)
}

/// Finds the code with a regex, then answers citing the document.
pub fn needle_script() -> Script {
    Script::new()
        .on(
            root().and(Matcher::any_contains("REPL output")),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
        )
        .on(
            root(),
            "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```",
        )
}

/// A running server over a three-document store.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub base: String,
    pub http: reqwest::Client,
    pub model: ScriptedServer,
    /// Sent as `Authorization: Bearer` by the helpers when set.
    pub token: Option<String>,
    pub options: ServerOptions,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Harness {
    pub async fn start(script: Script, limits: Limits) -> Self {
        Self::start_with(script, limits, ServerOptions::default()).await
    }

    /// With access rules and features.
    pub async fn start_with(script: Script, limits: Limits, options: ServerOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        corpus(dir.path());
        let model = ScriptedServer::start(script).await;
        let mut h = Harness {
            dir,
            base: String::new(),
            http: reqwest::Client::new(),
            model,
            token: options.token.clone(),
            options,
            stop: None,
            task: None,
        };
        h.serve(limits).await;
        h
    }

    /// (Re)starts the server over the same store.
    pub async fn serve(&mut self, limits: Limits) {
        let app = app(&self.store_dir(), &self.model, limits, self.options.clone()).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        self.base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.stop = Some(stop);
        self.task = Some(tokio::spawn(rlm_server::serve(listener, app, async {
            let _ = stopped.await;
        })));
    }

    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("the server stops")
                .unwrap()
                .unwrap();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `path` carrying the token, if any.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, self.url(path));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send_json(reqwest::Method::POST, path, body).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.send_json(reqwest::Method::PATCH, path, body).await
    }

    async fn send_json(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let r = self.request(method, path).json(&body).send().await.unwrap();
        status_json(r).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        let r = self
            .request(reqwest::Method::DELETE, path)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    /// Polls `GET path` until `done` holds (at most a minute).
    pub async fn poll(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..600 {
            let (status, v) = self.get(path).await;
            assert_eq!(status, 200, "{path}: {v}");
            if done(&v) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{path} did not get there within a minute");
    }

    /// Every SSE event of a run's stream until it closes: (event, id, data).
    pub async fn events(
        &self,
        id: &str,
        last_seen: Option<u64>,
    ) -> Vec<(String, Option<u64>, Value)> {
        let mut req = self.request(reqwest::Method::GET, &format!("/api/runs/{id}/events"));
        if let Some(n) = last_seen {
            req = req.header("Last-Event-ID", n.to_string());
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        read_events(r).await
    }
}

/// Every event of an SSE response until it closes.
pub async fn read_events(r: reqwest::Response) -> Vec<(String, Option<u64>, Value)> {
    let mut body = r.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the stream closes when the run ends");
    parse_sse(&text)
}

pub async fn status_json(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub fn parse_sse(text: &str) -> Vec<(String, Option<u64>, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = String::from("message");
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            (!data.is_empty()).then(|| (event, id, serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

pub fn error_message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

/// One raw HTTP/1.1 exchange on a new connection: the status line's code and
/// the whole answer as text (head and body), read until the server closes
/// or `Content-Length` bytes of body arrived.
pub fn raw(addr: &str, request: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if len.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}
