//! A fuzz of the request bodies of `rlm serve`: generated bodies sent over a
//! real socket to every endpoint that takes one (`POST /api/runs`,
//! `POST /api/chat`, `POST /v1/chat/completions`; the other endpoints take
//! none), against one real server (a real store, real sandbox workers, the
//! scripted model over real HTTP) running in this process.
//!
//! What it sends:
//! - JSON built from the fields of `AskBody`, with hostile values: `NaN` and
//!   `Infinity` as tokens and as strings, -1, 0, 2^64, 1e308 and 1e400,
//!   fractions where whole numbers are expected, empty, blank, control
//!   character and Unicode strings up to ~1 MiB, objects and arrays where
//!   scalars are expected, nesting thousands deep, duplicate and unknown
//!   keys, lone surrogates, raw control characters;
//! - bodies that are not JSON at all: random and non-UTF-8 bytes, valid JSON
//!   cut short or followed by more, a BOM, an empty body, bodies past the
//!   1 MiB limit (up to 9 MiB), with the Content-Type missing, wrong or odd,
//!   sent with a Content-Length or chunked, with other methods than POST,
//!   by `reqwest` or by hand on a raw socket (broken chunk sizes,
//!   `Expect: 100-continue`; then a second request on the same connection);
//! - chat completion requests built the same way from `model`, `messages`
//!   (odd roles and contents), `stream` and the sampling fields;
//! - valid bodies (every field, odd but valid values; every model, streamed
//!   or not), which must be answered: a harness that refused everything
//!   would fail.
//!
//! What must hold: no 5xx; every 4xx is `{"error": {"status", "message"}}`
//! with the status of the response (OpenAI's shape on `/v1`) and one line
//! (at most 1,000 characters) naming what was wrong (a field's name for a
//! bad field); no connection dropped without an answer, and a kept-alive
//! one still serves; a started run finishes; no panic anywhere in the
//! server; and after each property the server still answers
//! `GET /api/info` and a valid question.
//!
//! 256 cases per property by default (about 25 s on 2 cores);
//! `PROPTEST_CASES=20000` for a long run (`--nocapture` prints the answers
//! by status).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rlm_corpus::Store;
use rlm_llm::testing::{Reply, Script, ScriptedServer};
use rlm_server::{App, Limits};
use serde_json::{Value, json};

mod common;

/// Panics anywhere in this process (server tasks included) since start.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// The tests of this file (libtest names their threads after them).
const TESTS: [&str; 11] = [
    "hostile_json_is_refused_with_a_message_or_answered",
    "one_bad_field_is_named",
    "raw_bytes_and_odd_content_types_are_refused_cleanly",
    "raw_socket_bodies_get_an_answer_and_the_connection_survives",
    "valid_bodies_are_accepted_and_answered",
    "the_server_still_serves_after_a_parallel_burst",
    "a_body_refused_unread_still_gets_its_answer",
    "a_question_nested_thousands_deep_does_not_kill_the_server",
    "openai_hostile_json_is_refused_with_a_message_or_answered",
    "openai_valid_requests_are_answered",
    "openai_errors_are_one_line",
];

/// Answers seen, by status (printed with `--nocapture`).
static STATUSES: std::sync::Mutex<std::collections::BTreeMap<u16, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The endpoints that take an `AskBody`.
const ENDPOINTS: [&str; 2] = ["/api/runs", "/api/chat"];

/// The OpenAI-compatible endpoint (its own body and error shape).
const OPENAI: &str = "/v1/chat/completions";

/// Every endpoint that takes a body.
const ALL_ENDPOINTS: [&str; 3] = ["/api/runs", "/api/chat", OPENAI];

/// The models `/v1/models` lists.
const MODELS: [&str; 5] = ["rlm", "rlm-repl", "rlm-pipeline", "rlm-rag", "rlm-auto"];

/// Every field of `AskBody`.
const FIELDS: [&str; 16] = [
    "question",
    "session",
    "flow",
    "use_rlm",
    "inspector",
    "citations",
    "coverage",
    "max_llm_calls",
    "max_iterations",
    "max_depth",
    "max_cost_usd",
    "max_wall_secs",
    "briefing",
    "high_recall",
    "expand_files",
    "rlm_summarize",
];

/// The server's body limit (the default, 1 MiB).
const BODY_LIMIT: usize = 1 << 20;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- the server

struct Server {
    rt: tokio::runtime::Runtime,
    base: String,
    addr: SocketAddr,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
    _model: ScriptedServer,
}

/// Answers every prompt of every flow at once: the root agent runs one cell
/// then answers citing a document; a prompt listing chunks gets an answer
/// citing the first; anything else a short text.
fn script() -> Script {
    Script::new()
        .respond_with(|r| {
            let seen_output = r.messages.iter().any(|m| m.content.contains("REPL output"));
            if r.system()
                .contains("You are answering a question about a collection")
            {
                return Some(Reply::text(if seen_output {
                    "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])"
                } else {
                    "```repl\nprint(len(context))\n```"
                }));
            }
            let p = r.last_message();
            let id = p.split("[chunk:").nth(1)?.split_once(']')?.0.to_string();
            Some(Reply::text(format!(
                "The secret code is 4721 [[chunk:{id} \"The secret code is 4721\"]]."
            )))
        })
        .otherwise(Reply::text("Nothing relevant."))
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        // Panics of the server (its tasks run on the runtime's workers, its
        // helpers on threads of their own), not the test threads' own (a
        // failing property ends in one).
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or_default();
            if name != "main" && !TESTS.contains(&name) {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (dir, model, addr) = rt.block_on(start());
        Server {
            rt,
            base: format!("http://{addr}"),
            addr,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
            _dir: dir,
            _model: model,
        }
    })
}

async fn start() -> (tempfile::TempDir, ScriptedServer, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = common::corpus(dir.path());
    let store = Arc::new(Store::open(&store_dir).unwrap());
    let model = ScriptedServer::start(script()).await;
    let engine = common::engine(&model, 2).await;
    let limits = Limits {
        // Properties run side by side, each waiting for its runs: never 429.
        max_concurrent_runs: 64,
        // One client (this test) opens every connection.
        max_connections_per_client: 256,
        ..Limits::default()
    };
    let app = Arc::new(App::new(engine, store, limits, None, None).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(rlm_server::serve(listener, app, std::future::pending()));
    (dir, model, addr)
}

// ------------------------------------------------------------- the checks

/// What a request got.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        let t = String::from_utf8_lossy(&self.body);
        t.chars().take(600).collect()
    }
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

fn no_panic() -> Result<(), TestCaseError> {
    let n = PANICS.load(Ordering::SeqCst);
    if n > 0 {
        return Err(fail(format!("{n} panic(s) in the process (see stderr)")));
    }
    Ok(())
}

/// What every answer to a body must be: no 5xx; a 4xx is the API's error
/// shape with the response's status and a message; a 2xx started a run,
/// which then finishes. Returns the error message of a 4xx.
async fn check_answer(
    endpoint: &str,
    answer: &Answer,
    sent: &str,
) -> Result<Option<String>, TestCaseError> {
    let status = answer.status;
    *STATUSES.lock().unwrap().entry(status).or_default() += 1;
    if status >= 500 {
        return Err(fail(format!(
            "{endpoint} answered {status} to {sent}: {}",
            answer.text()
        )));
    }
    if (400..500).contains(&status) {
        if !answer.content_type.starts_with("application/json") {
            return Err(fail(format!(
                "{endpoint} answered {status} as {:?}, not JSON, to {sent}: {}",
                answer.content_type,
                answer.text()
            )));
        }
        let v = answer.json();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        // The API's errors carry their status; OpenAI's shape a type
        // instead (but a 405 for the path is the API's).
        let shaped = if endpoint == OPENAI && status != 405 {
            v["error"]["type"].is_string()
        } else {
            v["error"]["status"] == status
        };
        if !shaped || message.trim().is_empty() {
            return Err(fail(format!(
                "{endpoint} answered {status} without the error shape to {sent}: {}",
                answer.text()
            )));
        }
        if message.contains(['\n', '\r']) || message.chars().count() > 1100 {
            return Err(fail(format!(
                "{endpoint}: a message of more than one short line to {sent}: {:?}",
                shown(message.as_bytes())
            )));
        }
        return Ok(Some(message.to_string()));
    }
    if !(200..300).contains(&status) {
        return Err(fail(format!(
            "{endpoint} answered {status} to {sent}: {}",
            answer.text()
        )));
    }
    let v = answer.json();
    if endpoint == OPENAI {
        // A completion, whole or streamed to its end.
        let done = if answer.content_type.starts_with("text/event-stream") {
            String::from_utf8_lossy(&answer.body).contains("data: [DONE]")
        } else {
            v["object"] == "chat.completion" && v["choices"][0]["message"]["content"].is_string()
        };
        if !done {
            return Err(fail(format!(
                "{OPENAI} answered {status} without a whole completion to {sent}: {}",
                answer.text()
            )));
        }
    } else if endpoint == "/api/chat" {
        // Answered in one response: the run is over.
        if v["status"] == "running" || v["id"].as_str().is_none() {
            return Err(fail(format!(
                "/api/chat answered an unfinished run to {sent}: {}",
                answer.text()
            )));
        }
    } else {
        let Some(id) = v["id"].as_str() else {
            return Err(fail(format!(
                "/api/runs answered {status} without a run id to {sent}: {}",
                answer.text()
            )));
        };
        wait_finished(id, sent).await?;
    }
    Ok(None)
}

/// Waits for a run started by a fuzzed body to finish (a panic in its task
/// would leave it running forever).
async fn wait_finished(id: &str, sent: &str) -> Result<Value, TestCaseError> {
    let s = server();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let r = s
            .http
            .get(format!("{}/api/runs/{id}", s.base))
            .send()
            .await
            .map_err(|e| fail(format!("GET /api/runs/{id}: {e}")))?;
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if status != 200 {
            return Err(fail(format!("GET /api/runs/{id} answered {status}: {v}")));
        }
        if v["status"] != "running" {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(fail(format!("run {id} of {sent} still running after 90 s")));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A body sent by `reqwest`, whole (Content-Length) or chunked.
async fn send(
    endpoint: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
    chunked: Option<usize>,
) -> Result<Answer, TestCaseError> {
    send_as(reqwest::Method::POST, endpoint, content_type, body, chunked).await
}

/// The same with any method.
async fn send_as(
    method: reqwest::Method,
    endpoint: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
    chunked: Option<usize>,
) -> Result<Answer, TestCaseError> {
    let s = server();
    let mut req = s.http.request(method, format!("{}{endpoint}", s.base));
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let len = body.len();
    req = match chunked {
        Some(piece) => {
            let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
                body.chunks(piece.max(1)).map(|c| Ok(c.to_vec())).collect();
            req.body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                pieces,
            )))
        }
        None => req.body(body),
    };
    let r = req.send().await.map_err(|e| {
        fail(format!(
            "{endpoint}: no answer to a {len}-byte body ({content_type:?}, chunked {chunked:?}): {e:?}"
        ))
    })?;
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = r
        .bytes()
        .await
        .map_err(|e| fail(format!("{endpoint}: the answer was cut short: {e}")))?
        .to_vec();
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

/// Generated bytes, shown cut short in a failure report (they reach 1 MiB).
#[derive(Clone)]
struct Bytes(Vec<u8>);

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shown(&self.0))
    }
}

/// A generated value, shown cut short in a failure report.
#[derive(Clone)]
struct Cut<T>(T);

impl<T: std::fmt::Debug> std::fmt::Debug for Cut<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let full = format!("{:?}", self.0);
        let mut s: String = full.chars().take(400).collect();
        if full.len() > s.len() {
            s.push_str(&format!("… ({} bytes)", full.len()));
        }
        f.write_str(&s)
    }
}

/// A JSON text shown in a failure message (cut to a readable length).
fn shown(body: &[u8]) -> String {
    let t = String::from_utf8_lossy(body);
    let mut s: String = t.chars().take(300).collect();
    if t.chars().count() > 300 {
        s.push_str(&format!("… ({} bytes)", body.len()));
    }
    s
}

/// After a property: the server still answers, and a valid question runs.
fn still_serves() {
    eprintln!("answers so far, by status: {:?}", STATUSES.lock().unwrap());
    let s = server();
    s.rt.block_on(async {
        let r = s.http.get(format!("{}/api/info", s.base)).send().await;
        let r = r.expect("GET /api/info answers after the fuzz");
        assert_eq!(r.status().as_u16(), 200);
        let info: Value = r.json().await.unwrap();
        assert_eq!(info["store"]["documents"], 3);
        let r = s
            .http
            .post(format!("{}/api/runs", s.base))
            .json(&json!({"question": "What is the secret code?"}))
            .send()
            .await
            .expect("POST /api/runs answers after the fuzz");
        assert_eq!(r.status().as_u16(), 202);
        let v: Value = r.json().await.unwrap();
        let view = wait_finished(v["id"].as_str().unwrap(), "a valid question")
            .await
            .unwrap();
        assert_eq!(view["status"], "done", "{view}");
        let answer = view["answer"]["answer"].as_str().unwrap_or_default();
        assert!(answer.contains("4721"), "{view}");
    });
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "no panic in the process");
}

// ------------------------------------------------------- JSON generators

/// `s` as a JSON string literal.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Strings a user could send: Unicode, control characters, blanks, the
/// names the fields accept (in other cases, padded), words that look like
/// numbers, and long runs of one character (up to ~1 MiB).
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => any::<String>(),
        2 => "\\PC{0,40}",
        2 => prop::sample::select(vec![
            "", " ", "\t\n", "\u{0}", "\u{7f}", "\u{feff}", "\u{200b}", "\u{fffd}",
            "\u{10ffff}", "é", "🦀", "NaN", "nan", "Infinity", "-Infinity", "inf",
            "-inf", "-1", "0", "-0", "1e308", "1e400", "18446744073709551616",
            "0x10", "1_000", "true", "yes", "on", "null", "repl", "pipeline", "rag",
            "auto", "RAG", " repl ", "iterative", "per-chunk", "per_chunk",
            "perchunk", "hypothesis", "strict", "best_effort", "best-effort",
            "STRICT", "case-1", "a/b", "..", ".", "-", "../../etc/passwd",
            "What is the secret code?", "FINAL(x)", "```repl\nprint(1)\n```",
            "[[chunk:x \"q\"]]", "\"", "\\", "{}", "[]",
        ])
        .prop_map(str::to_string),
        1 => (any::<char>(), 0usize..70_000).prop_map(|(c, n)| c.to_string().repeat(n)),
        1 => (any::<char>(), 0usize..(BODY_LIMIT + 4096))
            .prop_map(|(c, n)| c.to_string().repeat(n / c.len_utf8())),
    ]
    .boxed()
}

/// A JSON number as text, valid or not (`NaN`, `Infinity`, `+1`, `01`, `.5`).
fn number() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(vec![
            "-1",
            "0",
            "-0",
            "1",
            "2",
            "10",
            "11",
            "1000",
            "1001",
            "100000",
            "100001",
            "604800",
            "604801",
            "1000000",
            "1000001",
            "0.0",
            "-0.0",
            "0.5",
            "1.5",
            "2.5",
            "1.0",
            "1e2",
            "1E2",
            "1e-400",
            "5e-324",
            "1e308",
            "-1e308",
            "1e309",
            "1e400",
            "-1e400",
            "1.7976931348623157e308",
            "4294967295",
            "4294967296",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "340282366920938463463374607431768211456",
            "100000000000000000000000000",
        ])
        .prop_map(str::to_string),
        prop::sample::select(vec![
            "NaN",
            "-NaN",
            "nan",
            "Infinity",
            "-Infinity",
            "+Infinity",
            "inf",
            "-inf",
            "+1",
            "01",
            "-01",
            ".5",
            "1.",
            "-",
            "1e",
            "1e+",
            "0x10",
            "1_000",
            "١",
            "undefined",
        ])
        .prop_map(str::to_string),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i128>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
        "-?[0-9]{1,40}(\\.[0-9]{1,20})?([eE][-+]?[0-9]{1,4})?",
    ]
    .boxed()
}

/// A JSON string literal as text, valid or not (raw control characters,
/// lone surrogates, bad escapes, no closing quote).
fn string_literal() -> BoxedStrategy<String> {
    prop_oneof![
        8 => text().prop_map(|s| quoted(&s)),
        1 => prop::sample::select(vec![
            "\"\\ud800\"", "\"\\udc00\"", "\"\\ud83d\\ude00\"", "\"\\uDEAD\\uBEEF\"",
            "\"\\x41\"", "\"\\u12\"", "\"\\\"", "\"abc", "\"a\u{0}b\"", "\"a\nb\"",
            "\"a\tb\"", "\"\u{1b}[31m\"", "'single'",
        ])
        .prop_map(str::to_string),
        1 => "[\\x00-\\x1f]{1,8}".prop_map(|s| format!("\"{s}\"")),
    ]
    .boxed()
}

/// Any JSON-ish scalar as text.
fn scalar() -> BoxedStrategy<String> {
    prop_oneof![
        3 => number(),
        3 => string_literal(),
        1 => prop::sample::select(vec!["true", "false", "null", "True", "NULL", "tru"])
            .prop_map(str::to_string),
    ]
    .boxed()
}

/// A value as text: scalars, arrays and objects of them, deep nesting.
fn value() -> BoxedStrategy<String> {
    let leaf = scalar();
    let nested = leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key(), inner), 0..6).prop_map(|kv| {
                let items: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", items.join(","))
            }),
        ]
    });
    prop_oneof![
        8 => nested,
        1 => (1usize..20_000).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
        1 => (1usize..20_000, any::<bool>()).prop_map(|(n, close)| {
            let open = "{\"a\":".repeat(n);
            if close { format!("{open}1{}", "}".repeat(n)) } else { open }
        }),
    ]
    .boxed()
}

/// An object key as JSON text: mostly the real fields, then unknown and odd ones.
fn key() -> BoxedStrategy<String> {
    prop_oneof![
        6 => prop::sample::select(FIELDS.to_vec()).prop_map(quoted),
        1 => prop::sample::select(vec![
            "verify", "context_shape", "temperature", "settings", "budget", "query",
            "Question", "QUESTION", "question ", " question", "max-depth",
            "maxDepth", "", "\u{0}", "__proto__", "constructor", "question\u{0}",
        ])
        .prop_map(quoted),
        1 => any::<String>().prop_map(|k| quoted(&k)),
        1 => string_literal(),
    ]
    .boxed()
}

/// A top-level body: mostly objects of fields (a question often present so
/// the other fields get checked), sometimes any other JSON value.
fn hostile_body() -> BoxedStrategy<String> {
    let entry = (key(), value()).prop_map(|(k, v)| format!("{k}:{v}"));
    let object = (
        prop::option::weighted(0.7, string_literal()),
        prop::collection::vec(entry, 0..10),
        0usize..11,
        prop::sample::select(vec!["", " ", "\n", "\t", "\r\n  "]),
    )
        .prop_map(|(question, mut entries, at, ws)| {
            if let Some(q) = question {
                entries.insert(at.min(entries.len()), format!("\"question\":{q}"));
            }
            format!("{ws}{{{ws}{}{ws}}}{ws}", entries.join(&format!(",{ws}")))
        });
    prop_oneof![
        8 => object,
        1 => value(),
        1 => prop::sample::select(vec![
            "", " ", "null", "[]", "{}", "{,}", "{\"question\"}", "{\"question\":}",
            "{\"question\":\"q\",}", "{\"question\":\"q\"}{}", "{\"question\":\"q\"} x",
            "\u{feff}{\"question\":\"q\"}", "[{\"question\":\"q\"}]", "\"question\"",
            "{\"question\":\"q\"", "{'question':'q'}", "{question:\"q\"}",
        ])
        .prop_map(str::to_string),
    ]
    .boxed()
}

// ---------------------------------------------------------- valid bodies

/// A question the server must accept: 1 to 20,000 characters, not blank,
/// any Unicode (control characters, NUL, RTL marks, astral planes).
fn valid_question() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "\\PC{0,60}",
        2 => any::<String>(),
        1 => (any::<char>(), 1usize..=20_000).prop_map(|(c, n)| c.to_string().repeat(n)),
        1 => prop::sample::select(vec![
            "What is the secret code?", "FINAL(4721)", "\"quoted\" AND (x OR y) -z +w ~2 ^3",
            "title:foo* [a TO b] {c TO d}", "\\", "''", "🦀🦀", "\u{202e}reversed",
            "a\u{0}b", "REPL output", "[[chunk:nope \"x\"]]", "```repl\nimport os\n```",
        ])
        .prop_map(str::to_string),
    ]
    .prop_map(|q| {
        let q: String = q.chars().take(20_000).collect();
        if q.trim().is_empty() {
            // Blank is refused; a "?" makes it a question, within the limit
            // (20,000 blanks and a "?" were 20,001 characters).
            let blank: String = q.chars().take(19_999).collect();
            format!("{blank}?")
        } else {
            q
        }
    })
    .boxed()
}

fn pick<T: Clone + std::fmt::Debug + 'static>(v: Vec<T>) -> BoxedStrategy<Option<T>> {
    prop::option::of(prop::sample::select(v)).boxed()
}

/// A valid AskBody: every field optional but the question, each in range.
fn valid_body() -> BoxedStrategy<Value> {
    let names = (
        pick(vec!["repl", "pipeline", "rag", "auto", " RAG ", "Repl"]),
        pick(vec![
            "iterative",
            "per-chunk",
            "per_chunk",
            "perchunk",
            "hypothesis",
            "repl",
        ]),
        pick(vec!["strict", "best_effort", "best-effort", " Strict "]),
        prop::option::of("[A-Za-z0-9._-]{1,40}"),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    );
    let numbers = (
        prop::option::of(1u64..=100_000),
        prop::option::of(1u64..=1000),
        prop::option::of(0u64..=10),
        prop::option::of(prop_oneof![1e-9f64..=1_000_000.0, Just(1_000_000.0)]),
        prop::option::of(prop_oneof![
            (0.5f64..=604_800.0).prop_map(|f| json!(f)),
            (1u64..=604_800).prop_map(|n| json!(n)),
        ]),
    );
    (
        valid_question(),
        names,
        numbers,
        prop::option::of(text()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(question, names, numbers, briefing, high_recall)| {
            let (flow, inspector, citations, session, use_rlm, coverage) = names;
            let (calls, iterations, depth, cost, wall) = numbers;
            let mut b = json!({"question": question});
            let mut set = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    b[k] = v;
                }
            };
            set("flow", flow.map(|s| json!(s)));
            set("inspector", inspector.map(|s| json!(s)));
            set("citations", citations.map(|s| json!(s)));
            set("session", session.map(|s| json!(s)));
            set("use_rlm", use_rlm.map(|x| json!(x)));
            set("coverage", coverage.map(|x| json!(x)));
            set("max_llm_calls", calls.map(|x| json!(x)));
            set("max_iterations", iterations.map(|x| json!(x)));
            set("max_depth", depth.map(|x| json!(x)));
            set("max_cost_usd", cost.map(|x| json!(x)));
            set("max_wall_secs", wall);
            set("high_recall", high_recall.map(|x| json!(x)));
            // A briefing within its cap (20,000 characters).
            set(
                "briefing",
                briefing.map(|t| json!(t.chars().take(20_000).collect::<String>())),
            );
            b
        })
        .boxed()
}

// ---------------------------------------------------- chat completions

/// A JSON object as text from (key, value) entries.
fn object(entries: Vec<(String, String)>) -> String {
    let items: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    format!("{{{}}}", items.join(","))
}

/// A message's role: the real ones, then anything.
fn role() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(vec!["user", "assistant", "system", "developer", "tool", "function"])
            .prop_map(quoted),
        1 => string_literal(),
        1 => value(),
    ]
    .boxed()
}

/// A message's content: text, a list of parts, or anything.
fn content() -> BoxedStrategy<String> {
    let part = prop_oneof![
        (key(), value()).prop_map(|(k, v)| object(vec![(k, v)])),
        string_literal().prop_map(|t| format!("{{\"type\":\"text\",\"text\":{t}}}")),
        value().prop_map(|t| format!("{{\"type\":\"text\",\"text\":{t}}}")),
        Just("{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,\"}}".to_string()),
        value(),
    ];
    prop_oneof![
        4 => string_literal(),
        2 => prop::collection::vec(part, 0..5).prop_map(|p| format!("[{}]", p.join(","))),
        1 => value(),
    ]
    .boxed()
}

/// A message: an object with a role and a content (either may be missing
/// or odd, and more keys), or anything.
fn message() -> BoxedStrategy<String> {
    prop_oneof![
        6 => (
            prop::option::weighted(0.9, role()),
            prop::option::weighted(0.9, content()),
            prop::collection::vec((key(), value()), 0..2),
        )
            .prop_map(|(role, content, mut more)| {
                if let Some(r) = role {
                    more.insert(0, (quoted("role"), r));
                }
                if let Some(c) = content {
                    more.push((quoted("content"), c));
                }
                object(more)
            }),
        1 => value(),
    ]
    .boxed()
}

/// A hostile chat completion request: mostly its real fields, with a model
/// and messages most of the time so that the rest gets checked.
fn openai_hostile_body() -> BoxedStrategy<String> {
    let model = prop_oneof![
        3 => prop::sample::select(MODELS.to_vec()).prop_map(quoted),
        1 => string_literal(),
        1 => value(),
    ];
    let messages = prop_oneof![
        5 => prop::collection::vec(message(), 0..6).prop_map(|m| format!("[{}]", m.join(","))),
        1 => value(),
    ];
    let other = (
        prop::sample::select(vec![
            "stream",
            "stream_options",
            "temperature",
            "max_tokens",
            "top_p",
            "n",
            "stop",
            "user",
            "tools",
            "response_format",
            "seed",
            "logprobs",
            "model",
            "messages",
        ])
        .prop_map(quoted),
        prop_oneof![
            Just("true".to_string()),
            Just("false".to_string()),
            Just("{\"include_usage\":true}".to_string()),
            value(),
        ],
    );
    prop_oneof![
        8 => (
            prop::option::weighted(0.9, model),
            prop::option::weighted(0.9, messages),
            prop::collection::vec(other, 0..4),
        )
            .prop_map(|(model, messages, mut entries)| {
                if let Some(m) = messages {
                    entries.insert(0, (quoted("messages"), m));
                }
                if let Some(m) = model {
                    entries.insert(0, (quoted("model"), m));
                }
                object(entries)
            }),
        1 => hostile_body(),
        1 => value(),
    ]
    .boxed()
}

/// A valid chat completion request: a listed model, a conversation of
/// system, developer, user and assistant messages, then the question (text
/// or text parts), streamed or not.
fn openai_valid_body() -> BoxedStrategy<Value> {
    let earlier = prop::collection::vec(
        (
            prop::sample::select(vec!["user", "assistant", "system", "developer"]),
            prop::option::of(text()),
        ),
        0..5,
    );
    (
        prop::sample::select(MODELS.to_vec()),
        earlier,
        valid_question(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<bool>()),
        prop::option::of(0.0f64..=2.0),
    )
        .prop_map(
            |(model, earlier, question, parts, stream, usage, temperature)| {
                let mut messages: Vec<Value> = earlier
                    .into_iter()
                    .map(|(role, text)| {
                        // Earlier messages within the body limit.
                        let text = text.map(|t| t.chars().take(50_000).collect::<String>());
                        json!({"role": role, "content": text})
                    })
                    .collect();
                let content = if parts {
                    json!([{"type": "text", "text": question}])
                } else {
                    json!(question)
                };
                messages.push(json!({"role": "user", "content": content}));
                let mut b = json!({"model": model, "messages": messages, "stream": stream});
                if let Some(u) = usage {
                    b["stream_options"] = json!({"include_usage": u});
                }
                if let Some(t) = temperature {
                    b["temperature"] = json!(t);
                }
                b
            },
        )
        .boxed()
}

// ------------------------------------------------------------- raw sockets

/// A response read by hand off a raw socket.
#[derive(Debug)]
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn answer(&self) -> Answer {
        Answer {
            status: self.status,
            content_type: self.header("content-type").unwrap_or_default().to_string(),
            body: self.body.clone(),
        }
    }
}

/// Reads one response (skipping `100 Continue`) from `stream`, `buf`
/// holding what was read beyond the previous one.
fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<RawResponse, String> {
    fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
        let mut chunk = [0u8; 64 * 1024];
        match stream.read(&mut chunk) {
            Ok(0) => Err("the connection was closed".into()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) => Err(format!("reading: {e}")),
        }
    }
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            fill(stream, buf)
                .map_err(|e| format!("{e} before a response head ({} bytes read)", buf.len()))?;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("not a status line: {status_line:?}"))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        if status == 100 {
            continue;
        }
        let mut r = RawResponse {
            status,
            headers,
            body: Vec::new(),
        };
        if let Some(len) = r.header("content-length") {
            let len: usize = len.parse().map_err(|_| format!("content-length {len:?}"))?;
            while buf.len() < len {
                fill(stream, buf).map_err(|e| format!("{e} inside a {status} body"))?;
            }
            r.body = buf.drain(..len).collect();
        } else if r.header("transfer-encoding") == Some("chunked") {
            loop {
                let line_end = loop {
                    if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                        break i;
                    }
                    fill(stream, buf)?;
                };
                let size =
                    usize::from_str_radix(String::from_utf8_lossy(&buf[..line_end]).trim(), 16)
                        .map_err(|e| format!("chunk size: {e}"))?;
                buf.drain(..line_end + 2);
                while buf.len() < size + 2 {
                    fill(stream, buf)?;
                }
                r.body.extend(buf.drain(..size));
                buf.drain(..2);
                if size == 0 {
                    break;
                }
            }
        } else if status != 204 && status != 304 {
            while fill(stream, buf).is_ok() {}
            r.body = std::mem::take(buf);
        }
        return Ok(r);
    }
}

/// How a body is framed on the wire.
#[derive(Debug, Clone)]
enum Framing {
    /// `Content-Length`.
    Length,
    /// `Transfer-Encoding: chunked`, in pieces of this size.
    Chunked(usize),
    /// Chunked, with a chunk-size line that is not one.
    BrokenChunk(&'static str),
}

/// Writes one POST by hand, reads its answer, then (unless the server said
/// it closes the connection) asks `GET /api/info` on the same connection.
fn raw_exchange(
    endpoint: &str,
    headers: &[String],
    body: &[u8],
    framing: &Framing,
) -> Result<(RawResponse, Option<RawResponse>), String> {
    let s = server();
    let mut stream = TcpStream::connect(s.addr).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut req = format!("POST {endpoint} HTTP/1.1\r\nHost: 127.0.0.1\r\n").into_bytes();
    for h in headers {
        req.extend_from_slice(h.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::Length => {
            req.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            req.extend_from_slice(body);
        }
        Framing::Chunked(piece) => {
            req.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for c in body.chunks((*piece).max(1)) {
                req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                req.extend_from_slice(c);
                req.extend_from_slice(b"\r\n");
            }
            req.extend_from_slice(b"0\r\n\r\n");
        }
        Framing::BrokenChunk(line) => {
            req.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            // A first chunk of the body's first half (none when that is
            // empty: a 0-size chunk would end the body), then the bad line.
            let half = body.len() / 2;
            if half > 0 {
                req.extend_from_slice(format!("{half:x}\r\n").as_bytes());
                req.extend_from_slice(&body[..half]);
                req.extend_from_slice(b"\r\n");
            }
            req.extend_from_slice(line.as_bytes());
            req.extend_from_slice(b"\r\n");
        }
    }
    // The server may answer (413) and stop reading before all is written.
    let written = stream.write_all(&req);
    let mut buf = Vec::new();
    let first = read_response(&mut stream, &mut buf)
        .map_err(|e| format!("no answer ({e}); writing the request: {written:?}"))?;
    if first
        .header("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    {
        return Ok((first, None));
    }
    if written.is_err() {
        return Err(format!(
            "the server stopped reading the request ({written:?}) but kept the connection open after {}",
            first.status
        ));
    }
    stream
        .write_all(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| format!("the connection was closed after {}: {e}", first.status))?;
    let second = read_response(&mut stream, &mut buf)
        .map_err(|e| format!("no answer to a second request after {}: {e}", first.status))?;
    Ok((first, Some(second)))
}

// ------------------------------------------------------------- the bodies

/// Content-Type values: JSON ones the server takes, others it refuses.
fn content_type() -> BoxedStrategy<Option<String>> {
    prop_oneof![
        3 => Just(Some("application/json".to_string())),
        3 => prop::option::of(
            prop::sample::select(vec![
                "application/json; charset=utf-8",
                "application/json;charset=latin1",
                "Application/JSON",
                "application/problem+json",
                "application/vnd.api+json",
                "application/json, text/plain",
                "application/jsonx",
                "application/",
                "json",
                "text/json",
                "text/plain",
                "text/plain; charset=utf-8",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/octet-stream",
                "*/*",
                "",
                " ",
                "application/json; charset=\"",
                "application/json; charset=utf-8; charset=latin1",
            ])
            .prop_map(str::to_string)
        ),
        1 => "[ -~]{0,40}".prop_map(Some),
    ]
    .boxed()
}

/// Bytes that are not (all) JSON, or JSON that is too much.
fn raw_body() -> BoxedStrategy<Vec<u8>> {
    let valid = r#"{"question": "What is the secret code?", "flow": "rag", "max_depth": 1}"#;
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..2048),
        2 => (0..valid.len()).prop_map(move |n| valid.as_bytes()[..n].to_vec()),
        2 => prop::collection::vec(any::<u8>(), 1..64).prop_map(|junk| {
            // Not UTF-8 inside a string.
            let mut b = b"{\"question\": \"".to_vec();
            b.extend(junk.iter().map(|x| x | 0x80));
            b.extend_from_slice(b"\"}");
            b
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(move |tail| {
            let mut b = valid.as_bytes().to_vec();
            b.extend(tail);
            b
        }),
        1 => prop::sample::select(vec![
            &b""[..], b" ", b"\n\n", b"\xef\xbb\xbf{\"question\": \"q\"}",
            b"\xff\xfe{\x00\"\x00q\x00", b"{\"question\": \"q\"}\x00", b"\x00",
            b"{\"question\": \"\xc0\xaf\"}", b"{\"question\": \"\xed\xa0\x80\"}",
            b"{\"question\": \"\xf4\x90\x80\x80\"}", b"question=q",
        ])
        .prop_map(<[u8]>::to_vec),
        // Past the 1 MiB limit (by up to 64 KiB, or up to 8 MiB).
        1 => (prop_oneof![0usize..65_536, 0..(8 * BODY_LIMIT)], any::<bool>())
            .prop_map(|(extra, json)| oversize(BODY_LIMIT + 1 + extra, json)),
    ]
    .boxed()
}

/// `n` bytes: a JSON body with a long question, or `{` repeated.
fn oversize(n: usize, json: bool) -> Vec<u8> {
    if json {
        format!("{{\"question\": \"{}\"}}", "x".repeat(n.saturating_sub(16))).into_bytes()
    } else {
        vec![b'{'; n]
    }
}

fn framing() -> BoxedStrategy<Framing> {
    prop_oneof![
        4 => Just(Framing::Length),
        2 => (1usize..5000).prop_map(Framing::Chunked),
        1 => prop::sample::select(vec!["zz", "-1", "fffffffffffffffffffff", "", " ", "0x1"])
            .prop_map(Framing::BrokenChunk),
    ]
    .boxed()
}

/// Whether axum takes this Content-Type as JSON.
fn is_json_type(ct: Option<&str>) -> bool {
    let Some(ct) = ct else { return false };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

// ------------------------------------------------------------- properties

/// Runs one case on the server's runtime, then checks nothing panicked.
fn case(
    f: impl std::future::Future<Output = Result<(), TestCaseError>>,
) -> Result<(), TestCaseError> {
    server().rt.block_on(f)?;
    no_panic()
}

proptest! {
    #![proptest_config(config())]

    /// Hostile JSON from the fields of AskBody: refused with a 4xx naming
    /// the problem, or accepted and answered; never a 5xx or a hang.
    fn fuzz_hostile_json_is_refused_with_a_message_or_answered(
        endpoint in prop::sample::select(ENDPOINTS.to_vec()),
        Cut(body) in hostile_body().prop_map(Cut),
    ) {
        case(hostile_json(endpoint, body))?;
    }

    /// A valid body with one field (or the question) set to anything: a
    /// refusal names that field, or (JSON that does not parse) the line and
    /// column where it stops being JSON.
    fn fuzz_one_bad_field_is_named(
        endpoint in prop::sample::select(ENDPOINTS.to_vec()),
        field in prop::sample::select(FIELDS.to_vec()),
        Cut(v) in value().prop_map(Cut),
        twice in prop::option::weighted(0.1, scalar()),
    ) {
        case(one_bad_field(endpoint, field, v, twice))?;
    }

    /// Bytes that are not JSON, JSON cut short or too long, odd Content-Types,
    /// sent whole or chunked by reqwest (now and then with another method
    /// than POST: 405, as JSON).
    fn fuzz_raw_bytes_and_odd_content_types_are_refused_cleanly(
        endpoint in prop::sample::select(ALL_ENDPOINTS.to_vec()),
        ct in content_type(),
        Bytes(body) in raw_body().prop_map(Bytes),
        chunked in prop::option::weighted(0.3, 1usize..100_000),
        method in prop_oneof![
            9 => Just("POST"),
            1 => prop::sample::select(vec!["PUT", "PATCH", "DELETE", "OPTIONS"]),
        ],
    ) {
        case(raw_bytes(method, endpoint, ct, body, chunked))?;
    }

    /// The same written by hand on a raw socket (Content-Length, chunked,
    /// broken chunks, `Expect: 100-continue`): an answer always comes, and
    /// the connection then serves another request unless the server said
    /// it closes it.
    fn fuzz_raw_socket_bodies_get_an_answer_and_the_connection_survives(
        endpoint in prop::sample::select(ALL_ENDPOINTS.to_vec()),
        ct in content_type(),
        Bytes(body) in raw_body().prop_map(Bytes),
        framing in framing(),
        expect_continue in prop::bool::weighted(0.2),
    ) {
        raw_socket(endpoint, ct, body, framing, expect_continue)?;
        no_panic()?;
    }

    /// Hostile chat completion requests (`model`, `messages` with odd roles
    /// and contents, `stream`, `stream_options`, sampling fields): refused
    /// in OpenAI's error shape naming the problem, or answered.
    fn fuzz_openai_hostile_json_is_refused_with_a_message_or_answered(
        Cut(body) in openai_hostile_body().prop_map(Cut),
    ) {
        case(openai_hostile(body))?;
    }

    /// Valid chat completion requests (every model, a conversation before
    /// the question, content as text or parts, streamed or not) are answered.
    fn fuzz_openai_valid_requests_are_answered(
        Cut(body) in openai_valid_body().prop_map(Cut),
    ) {
        case(openai_valid(body))?;
    }

    /// Valid bodies (every field, odd but valid values; Unicode, control
    /// characters and 20,000-character questions) are accepted and answered.
    fn fuzz_valid_bodies_are_accepted_and_answered(
        endpoint in prop::sample::select(ENDPOINTS.to_vec()),
        Cut(body) in valid_body().prop_map(Cut),
    ) {
        case(valid(endpoint, body))?;
    }
}

async fn openai_hostile(body: String) -> Result<(), TestCaseError> {
    let a = send(
        OPENAI,
        Some("application/json"),
        body.clone().into_bytes(),
        None,
    )
    .await?;
    let sent = shown(body.as_bytes());
    check_answer(OPENAI, &a, &sent).await?;
    let expected: &[u16] = if body.len() > BODY_LIMIT {
        &[413]
    } else {
        &[200, 400, 404]
    };
    if !expected.contains(&a.status) {
        return Err(fail(format!(
            "{OPENAI} answered {}, not {expected:?}, to {sent}: {}",
            a.status,
            a.text()
        )));
    }
    Ok(())
}

async fn openai_valid(body: Value) -> Result<(), TestCaseError> {
    let text = serde_json::to_vec(&body).unwrap();
    let a = send(OPENAI, Some("application/json"), text.clone(), None).await?;
    let sent = shown(&text);
    if a.status != 200 {
        return Err(fail(format!(
            "{OPENAI} refused a valid request with {}: {sent} → {}",
            a.status,
            a.text()
        )));
    }
    check_answer(OPENAI, &a, &sent).await?;
    Ok(())
}

async fn hostile_json(endpoint: &str, body: String) -> Result<(), TestCaseError> {
    let a = send(
        endpoint,
        Some("application/json"),
        body.clone().into_bytes(),
        None,
    )
    .await?;
    let sent = shown(body.as_bytes());
    check_answer(endpoint, &a, &sent).await?;
    if body.len() > BODY_LIMIT && a.status != 413 {
        return Err(fail(format!(
            "{} bytes answered {}, not 413: {}",
            body.len(),
            a.status,
            a.text()
        )));
    }
    if body.len() <= BODY_LIMIT && a.status >= 300 && a.status != 400 {
        return Err(fail(format!(
            "{endpoint} answered {} to {sent}: {}",
            a.status,
            a.text()
        )));
    }
    Ok(())
}

async fn one_bad_field(
    endpoint: &str,
    field: &str,
    v: String,
    twice: Option<String>,
) -> Result<(), TestCaseError> {
    let mut body = if field == "question" {
        format!("{{\"question\": {v}")
    } else {
        format!("{{\"question\": \"What is the secret code?\", \"{field}\": {v}")
    };
    if let Some(again) = &twice {
        body.push_str(&format!(", \"{field}\": {again}"));
    }
    body.push('}');
    let a = send(
        endpoint,
        Some("application/json"),
        body.clone().into_bytes(),
        None,
    )
    .await?;
    let sent = shown(body.as_bytes());
    let Some(message) = check_answer(endpoint, &a, &sent).await? else {
        return Ok(());
    };
    // What the server says was wrong, before its advice on what to send.
    let message = message.split("; send {").next().unwrap_or_default();
    let parses = serde_json::from_str::<Value>(&body).is_ok();
    let named = if a.status == 413 {
        message.contains("larger than")
    } else if parses {
        message.contains(field)
    } else {
        message.contains("line 1 column") || message.contains(field)
    };
    if !named {
        return Err(fail(format!(
            "{endpoint} answered {} to {sent} without naming {field}: {message}",
            a.status
        )));
    }
    Ok(())
}

async fn raw_bytes(
    method: &str,
    endpoint: &str,
    ct: Option<String>,
    body: Vec<u8>,
    chunked: Option<usize>,
) -> Result<(), TestCaseError> {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let a = send_as(m, endpoint, ct.as_deref(), body.clone(), chunked).await?;
    let sent = format!(
        "{method} of {} with Content-Type {ct:?} (chunked {chunked:?})",
        shown(&body)
    );
    check_answer(endpoint, &a, &sent).await?;
    let expected: &[u16] = if method != "POST" {
        &[405]
    } else if !is_json_type(ct.as_deref()) {
        &[415]
    } else if body.len() > BODY_LIMIT {
        // (A Content-Type this check takes for JSON may still be one the
        // server's stricter parser refuses: 415.)
        &[413, 415]
    } else {
        &[400, 415, 200, 202]
    };
    if !expected.contains(&a.status) {
        return Err(fail(format!(
            "{endpoint} answered {}, not {expected:?}, to {sent}: {}",
            a.status,
            a.text()
        )));
    }
    Ok(())
}

fn raw_socket(
    endpoint: &str,
    ct: Option<String>,
    body: Vec<u8>,
    framing: Framing,
    expect_continue: bool,
) -> Result<(), TestCaseError> {
    let mut headers = Vec::new();
    if let Some(ct) = &ct {
        headers.push(format!("Content-Type: {ct}"));
    }
    if expect_continue {
        headers.push("Expect: 100-continue".to_string());
    }
    let sent = format!("{} with Content-Type {ct:?}, {framing:?}", shown(&body));
    let (first, second) = raw_exchange(endpoint, &headers, &body, &framing)
        .map_err(|e| fail(format!("{endpoint}: {e}; sent {sent}")))?;
    server()
        .rt
        .block_on(check_answer(endpoint, &first.answer(), &sent))?;
    if let Some(second) = second {
        let info: Value = serde_json::from_slice(&second.body).unwrap_or(Value::Null);
        if second.status != 200 || info["store"]["documents"] != 3 {
            return Err(fail(format!(
                "GET /api/info after {sent} answered {}: {}",
                second.status,
                String::from_utf8_lossy(&second.body)
            )));
        }
    }
    Ok(())
}

async fn valid(endpoint: &str, body: Value) -> Result<(), TestCaseError> {
    let text = serde_json::to_vec(&body).unwrap();
    let a = send(endpoint, Some("application/json"), text.clone(), None).await?;
    let sent = shown(&text);
    if !(200..300).contains(&a.status) {
        return Err(fail(format!(
            "{endpoint} refused a valid body with {}: {sent} → {}",
            a.status,
            a.text()
        )));
    }
    check_answer(endpoint, &a, &sent).await?;
    let view = if endpoint == "/api/chat" {
        a.json()
    } else {
        let id = a.json()["id"].as_str().unwrap_or_default().to_string();
        wait_finished(&id, &sent).await?
    };
    if view["question"] != body["question"] {
        return Err(fail(format!(
            "the run's question is not the one sent: {sent}"
        )));
    }
    if view["status"] == "failed" {
        return Err(fail(format!(
            "a valid body failed: {sent} → {}",
            view["error"]
        )));
    }
    Ok(())
}

// Each property, then the server still answers (and nothing panicked).

#[test]
fn hostile_json_is_refused_with_a_message_or_answered() {
    fuzz_hostile_json_is_refused_with_a_message_or_answered();
    still_serves();
}

#[test]
fn one_bad_field_is_named() {
    fuzz_one_bad_field_is_named();
    still_serves();
}

#[test]
fn raw_bytes_and_odd_content_types_are_refused_cleanly() {
    fuzz_raw_bytes_and_odd_content_types_are_refused_cleanly();
    still_serves();
}

#[test]
fn raw_socket_bodies_get_an_answer_and_the_connection_survives() {
    fuzz_raw_socket_bodies_get_an_answer_and_the_connection_survives();
    still_serves();
}

#[test]
fn openai_hostile_json_is_refused_with_a_message_or_answered() {
    fuzz_openai_hostile_json_is_refused_with_a_message_or_answered();
    still_serves();
}

#[test]
fn openai_valid_requests_are_answered() {
    fuzz_openai_valid_requests_are_answered();
    still_serves();
}

#[test]
fn valid_bodies_are_accepted_and_answered() {
    fuzz_valid_bodies_are_accepted_and_answered();
    still_serves();
}

/// Hostile bodies 64 at a time, then the server still answers.
#[test]
fn the_server_still_serves_after_a_parallel_burst() {
    let s = server();
    s.rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..64u32 {
            tasks.push(tokio::spawn(async move {
                let body = match i % 4 {
                    0 => b"{\"question\": NaN}".to_vec(),
                    1 => vec![0xff; 1000],
                    2 => format!("{{\"question\": \"{}\"}}", "x".repeat(BODY_LIMIT)).into_bytes(),
                    _ => b"{\"question\": \"q\", \"max_depth\": 1e400}".to_vec(),
                };
                let endpoint = ENDPOINTS[(i as usize / 4) % 2];
                let a = send(endpoint, Some("application/json"), body, None)
                    .await
                    .unwrap();
                assert!((400..500).contains(&a.status), "{}: {}", a.status, a.text());
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    still_serves();
}

/// Regression: a body refused before it was all read (413 past the limit,
/// 415 without a JSON Content-Type) used to close the connection under the
/// client still sending it; the client then got a reset or broken pipe
/// instead of the answer (found by the fuzz: a 1 MiB chunked body without
/// Content-Type; also 4 and 16 MiB bodies with a Content-Length).
#[test]
fn a_body_refused_unread_still_gets_its_answer() {
    let s = server();
    s.rt.block_on(async {
        for mb in [1usize, 2, 4, 8, 16, 32] {
            for ct in [Some("application/json"), None, Some("text/plain")] {
                for chunked in [None, Some(65_536)] {
                    let n = mb * BODY_LIMIT + 10;
                    let body = format!("{{\"question\": \"{}\"}}", "x".repeat(n)).into_bytes();
                    let a = send("/api/runs", ct, body, chunked)
                        .await
                        .unwrap_or_else(|e| panic!("{mb} MiB, {ct:?}, chunked {chunked:?}: {e:?}"));
                    let expected = if ct == Some("application/json") {
                        413
                    } else {
                        415
                    };
                    assert_eq!(a.status, expected, "{mb} MiB, {ct:?}, chunked {chunked:?}");
                }
            }
        }
    });
    still_serves();
}

/// Regression: a question of 20,000 `(` (or thousands of `NOT `) overflowed
/// a runtime worker's stack in the full-text search's query parser, which
/// aborted the whole server process (found by the long run of
/// `valid_bodies_are_accepted_and_answered`; fixed in rlm-corpus's search).
#[test]
fn a_question_nested_thousands_deep_does_not_kill_the_server() {
    let s = server();
    s.rt.block_on(async {
        for flow in ["rag", "pipeline", "auto", "repl"] {
            for question in [
                "(".repeat(20_000),
                format!("{}secret code", "NOT ".repeat(4_990)),
                format!("{}secret{}", "-(".repeat(9_000), ")".repeat(1_000)),
            ] {
                let body = json!({"question": question, "flow": flow});
                valid("/api/chat", body)
                    .await
                    .unwrap_or_else(|e| panic!("{flow}: {e}"));
            }
        }
    });
    still_serves();
}

/// Regression: the OpenAI endpoint's errors quoted a model name or a role
/// as sent, newlines included (found by
/// `openai_hostile_json_is_refused_with_a_message_or_answered`).
#[test]
fn openai_errors_are_one_line() {
    let s = server();
    s.rt.block_on(async {
        for (body, status, expected) in [
            (
                json!({"model": "a\nb", "messages": []}),
                404,
                "the model 'a\\nb' does not exist",
            ),
            (
                json!({"model": "rlm", "messages": [{"role": "us\ner", "content": "q"}]}),
                400,
                "(it is a 'us\\ner' message)",
            ),
            (
                json!({"model": "rlm", "messages": [
                    {"role": "x\r\ny", "content": "q"},
                    {"role": "user", "content": "q"},
                ]}),
                400,
                "unknown message role 'x\\r\\ny'",
            ),
        ] {
            let a = send(
                OPENAI,
                Some("application/json"),
                body.to_string().into_bytes(),
                None,
            )
            .await
            .unwrap();
            assert_eq!(a.status, status, "{body}: {}", a.text());
            let message = a.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(message.contains(expected), "{body}: {message}");
            assert!(!message.contains(['\n', '\r']), "{body}: {message}");
        }
    });
    still_serves();
}
