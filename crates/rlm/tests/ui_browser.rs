//! The web UI in a real browser: `rlm serve` over a real store with the
//! scripted model server, driven by headless chromium through chromedriver
//! (W3C WebDriver, spoken over a plain `TcpStream`).
//!
//! Without chromedriver/chromium the tests print a skip line and pass, unless
//! `RLM_REQUIRE_BROWSER=1` (CI), where they fail. `scripts/install-browser`
//! installs both.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer, TEST_API_KEY};
use serde_json::{Value, json};

mod common;

const SKIP: &str = "skipped: no chromedriver (apt-get install chromium chromium-driver)";
const WAIT: Duration = Duration::from_secs(20);

/// One browser at a time: the machine may be small and busy.
static BROWSER: Mutex<()> = Mutex::new(());

// ---------------------------------------------------------------------------
// Minimal HTTP/1.1 client (one request per connection).

/// `method path` on `127.0.0.1:port` with an optional JSON body: status and
/// the body parsed as JSON (`Null` when empty or not JSON).
fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(90)))?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        request.push_str("Content-Type: application/json; charset=utf-8\r\n");
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes())?;
    read_response(&mut stream)
}

/// Reads one response: up to `Content-Length`, the last chunk, or EOF
/// (servers may keep the connection open despite `Connection: close`).
fn read_response(stream: &mut TcpStream) -> std::io::Result<(u16, Value)> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut head_end = None;
    loop {
        if head_end.is_none() {
            head_end = raw.windows(4).position(|w| w == b"\r\n\r\n");
        }
        if let Some(end) = head_end {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let body = &raw[end + 4..];
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            let chunked = head
                .lines()
                .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
            let complete = match length {
                Some(n) => body.len() >= n,
                None if chunked => body.ends_with(b"0\r\n\r\n"),
                None => false,
            };
            if complete {
                break;
            }
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let split = head_end
        .or_else(|| raw.windows(4).position(|w| w == b"\r\n\r\n"))
        .ok_or_else(|| std::io::Error::other("response without a header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut payload = raw[split + 4..].to_vec();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head}")))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        payload = dechunk(&payload);
    }
    let value = serde_json::from_slice(&payload).unwrap_or(Value::Null);
    Ok((status, value))
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

// ---------------------------------------------------------------------------
// WebDriver client.

const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

/// chromedriver and chromium, if both are installed.
fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let pick = |var: &str, default: &str| {
        let path = std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default));
        path.is_file().then_some(path)
    };
    Some((
        pick("CHROMEDRIVER", "/usr/bin/chromedriver")?,
        pick("CHROME_BIN", "/usr/bin/chromium")?,
    ))
}

/// The browser, or `None` (after printing why) when the tests should skip.
fn browser_or_skip() -> Option<Browser> {
    match browser_binaries() {
        Some((driver, chrome)) => Some(Browser::start(&driver, &chrome)),
        None if std::env::var("RLM_REQUIRE_BROWSER").as_deref() == Ok("1") => panic!("{SKIP}"),
        None => {
            println!("{SKIP}");
            None
        }
    }
}

impl Browser {
    fn start(driver: &Path, chrome: &Path) -> Self {
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let mut browser = Browser {
            driver: child,
            port,
            session: String::new(),
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok((200, v)) = http(port, "GET", "/status", None)
                && v["value"]["ready"] == true
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({
            "capabilities": {"alwaysMatch": {
                "goog:chromeOptions": {
                    "binary": chrome.to_string_lossy(),
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", "--window-size=1280,800"],
                },
            }},
        });
        let (status, v) = http(port, "POST", "/session", Some(&caps)).expect("new session");
        assert_eq!(status, 200, "cannot start chromium: {v}");
        browser.session = v["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        browser
    }

    /// A WebDriver command; panics on a WebDriver error.
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        match self.try_cmd(method, path, body) {
            Ok(v) => v,
            Err(e) => panic!("webdriver {method} {path}: {e}"),
        }
    }

    fn try_cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let full = format!("/session/{}{path}", self.session);
        let (status, v) =
            http(self.port, method, &full, body.as_ref()).map_err(|e| e.to_string())?;
        if status == 200 {
            Ok(v["value"].clone())
        } else {
            Err(format!(
                "{status} {}: {}",
                v["value"]["error"], v["value"]["message"]
            ))
        }
    }

    fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    fn js(&self, script: &str, args: Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// `textContent` of the first element matching `css` (empty if none).
    fn text(&self, css: &str) -> String {
        self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
            json!([css]),
        )
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    fn find(&self, css: &str) -> Option<String> {
        self.try_cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )
        .ok()
        .and_then(|v| v[ELEMENT_KEY].as_str().map(str::to_string))
    }

    fn element(&self, css: &str) -> String {
        self.find(css)
            .unwrap_or_else(|| panic!("no element {css}; page: {}", self.page_text()))
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.cmd("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        );
    }

    fn page_text(&self) -> String {
        let text = self
            .try_cmd(
                "POST",
                "/execute/sync",
                Some(json!({"script": "return document.body.innerText;", "args": []})),
            )
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let tail: String = text.chars().rev().take(4000).collect();
        tail.chars().rev().collect()
    }

    /// Polls `check` until it gives a value; panics with the page text after
    /// [`WAIT`].
    fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; page text:\n{}",
                    self.page_text()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the first element matching `css` has text containing `needle`.
    fn wait_text(&self, css: &str, needle: &str) -> String {
        self.wait_for(&format!("{css} to contain {needle:?}"), |b| {
            let t = b.text(css);
            t.contains(needle).then_some(t)
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

// ---------------------------------------------------------------------------
// `rlm serve`.

struct Server {
    child: Child,
    url: String,
    port: u16,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    fn start(dir: &Path, model: &ScriptedServer) -> Self {
        let base_url = model.base_url();
        let env = [
            ("RLM_PROVIDER", "openai"),
            ("RLM_BASE_URL", base_url.as_str()),
            ("RLM_API_KEY", TEST_API_KEY),
            ("RLM_PRIMARY_MODEL", "root-model"),
            ("RLM_SUB_MODEL", "sub-model"),
        ];
        let mut child = common::command(
            dir,
            &["serve", "--store", "store", "--addr", "127.0.0.1:0"],
            &env,
        )
        .spawn()
        .expect("rlm serve starts");

        // Drain stderr (kept for failure reports) and stdout (so the pipes
        // never fill); the first stdout line is the address.
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            let first = lines.next().and_then(Result::ok);
            let _ = tx.send(first);
            for _ in lines {}
        });
        let first = rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
        let mut server = Server {
            child,
            url: String::new(),
            port: 0,
            stderr,
        };
        let Some(line) = first else {
            panic!(
                "rlm serve printed no address; stderr:\n{}",
                server.stderr.lock().unwrap()
            );
        };
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line of rlm serve: {line:?}"))
            .trim()
            .to_string();
        server.port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .unwrap_or_else(|| panic!("no port in {url:?}"));
        server.url = url;
        server
    }

    fn get(&self, path: &str) -> Value {
        let (status, v) = http(self.port, "GET", path, None).expect("server answers");
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- rlm serve stderr ---\n{}", self.stderr.lock().unwrap());
        }
    }
}

fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

fn needle_script() -> Script {
    Script::new()
        .on_sequence(
            root(),
            [
                Reply::text(
                    "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```",
                )
                .with_latency_ms(300),
                Reply::text(
                    "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
                )
                .with_latency_ms(300),
            ],
        )
        .otherwise(Reply::text("FINAL(the script has no more replies)"))
}

fn store() -> tempfile::TempDir {
    common::indexed_docs(&[
        ("a.txt", "This memo describes the office move.\n"),
        (
            "b_notes.txt",
            "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
        ),
    ])
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------

#[test]
fn ask_with_live_steps_citation_and_session() {
    let _one = lock();
    let Some(b) = browser_or_skip() else { return };
    let dir = store();
    let model = ScriptedServer::spawn(needle_script());
    let server = Server::start(dir.path(), &model);

    b.goto(&server.url);
    b.wait_text("#store-info", "2 documents");

    // A session, named through the inline form (a bad name is refused inline).
    b.click("#new-session");
    b.type_into("#new-session-name", "bad name");
    b.click("#new-session-create");
    b.wait_text("#new-session-error", "letters");
    b.js(
        "document.querySelector('#new-session-name').value = '';",
        json!([]),
    );
    b.type_into("#new-session-name", "case-1");
    b.click("#new-session-create");
    b.wait_text("#current-session", "case-1");

    b.type_into("#question", "What is the secret code?");
    b.click("#send");

    // Steps stream in while the run goes; then the answer arrives.
    // (The engine's own inspection cell runs first; the model's cell is the
    // one with the needle's pattern.)
    b.wait_for("the model's re.findall cell in #steps", |b| {
        b.js(
            "return Array.from(document.querySelectorAll('#steps .cell'))
                 .some(e => e.textContent.includes('re.findall(r\"secret code is'));",
            json!([]),
        )
        .as_bool()
        .filter(|ok| *ok)
    });
    let answer = b.wait_text("#messages .answer", "4721");
    assert!(!answer.contains("[[doc:"), "markers become chips: {answer}");
    let steps = b.text("#steps");
    assert!(steps.contains("agent 0"), "{steps}");
    assert!(steps.contains("['4721']"), "the cell's output: {steps}");
    assert!(steps.contains("FINAL via"), "{steps}");
    let live = b.text("#steps .live-text");
    assert!(live.contains("re.findall"), "live reply text: {live}");
    let foot = b.text("#messages .answer .foot");
    assert!(foot.contains("2 calls"), "usage under the answer: {foot}");
    assert!(b.text("#send").contains("Send"));
    assert_eq!(
        b.js(
            "return document.querySelector('#stop').disabled;",
            json!([])
        ),
        true,
        "Stop is disabled once the run ended"
    );

    // The citation chip is verified and opens its chunk with the quote marked.
    let chip = ".citation[data-status=\"verified\"]";
    assert!(
        b.find(chip).is_some(),
        "no verified chip: {}",
        b.page_text()
    );
    b.click(chip);
    b.wait_text("#chunk-text", "secret code is 4721");
    let marked = b.text("#chunk-text mark");
    assert_eq!(marked.to_lowercase(), "the secret code is 4721");
    assert!(b.text("#chunk-path").contains("b_notes.txt"));
    b.click("#chunk-close");

    // The session now exists on the server, with its turn.
    b.wait_for("case-1 with one turn in #sessions", |b| {
        let t = b.text("#sessions li[data-session=\"case-1\"]");
        t.contains("1 turn").then_some(())
    });
    assert!(b.text("#sessions").contains("case-1"));
    let sessions = server.get("/api/sessions");
    assert_eq!(sessions["sessions"][0]["name"], "case-1", "{sessions}");

    // RLM off: the flow select is disabled and shows rag; on again restores it.
    let flow_before = b.js("return document.querySelector('#flow').value;", json!([]));
    b.click("#rlm-toggle");
    assert_eq!(
        b.js(
            "return document.querySelector('#flow').disabled;",
            json!([])
        ),
        true
    );
    assert_eq!(
        b.js("return document.querySelector('#flow').value;", json!([])),
        "rag"
    );
    b.click("#rlm-toggle");
    assert_eq!(
        b.js("return document.querySelector('#flow').value;", json!([])),
        flow_before
    );

    // A reload shows the session's history when it is clicked.
    b.goto(&server.url);
    b.wait_text("#sessions", "case-1");
    b.click("#sessions li[data-session=\"case-1\"]");
    b.wait_text("#messages .answer", "4721");
    assert!(
        b.text("#messages .user")
            .contains("What is the secret code?")
    );
    // The history keeps the verified citations: the chip still opens its chunk.
    assert!(
        b.find(chip).is_some(),
        "no verified chip in the history: {}",
        b.page_text()
    );
    b.click(chip);
    b.wait_text("#chunk-text", "secret code is 4721");
}

#[test]
fn empty_and_rejected_questions_show_errors() {
    let _one = lock();
    let Some(b) = browser_or_skip() else { return };
    let dir = store();
    let model = ScriptedServer::spawn(needle_script());
    let server = Server::start(dir.path(), &model);
    let info = server.get("/api/info");

    b.goto(&server.url);
    b.wait_text("#store-info", "2 documents");

    // Whitespace only: refused in the page, nothing is sent.
    b.type_into("#question", "   \u{E007}");
    b.wait_text("#composer-msg", "Type a question");
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#messages .msg').length;",
            json!([])
        ),
        0
    );
    let runs = server.get("/api/runs");
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(0), "{runs}");

    // Too long for the server: its 400 message shows as an error bubble.
    let max = info["limits"]["max_question_chars"]
        .as_u64()
        .expect("limits.max_question_chars") as usize;
    b.js(
        "const q = document.querySelector('#question');
         q.value = 'x'.repeat(arguments[0]);
         q.dispatchEvent(new Event('input'));",
        json!([max + 1]),
    );
    b.click("#send");
    let error = b.wait_text("#messages .error", "HTTP 4");
    assert!(error.len() > "HTTP 400: ".len(), "{error}");
    assert_eq!(
        b.js(
            "return document.querySelector('#send').disabled;",
            json!([])
        ),
        false,
        "Send is usable again after an error"
    );
    let runs = server.get("/api/runs");
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(0), "{runs}");
}

#[test]
fn stop_cancels_a_running_question() {
    let _one = lock();
    let Some(b) = browser_or_skip() else { return };
    let dir = store();
    let slow = Script::new().on(
        root(),
        Reply::text("FINAL(too late)").with_latency_ms(30_000),
    );
    let model = ScriptedServer::spawn(slow);
    let server = Server::start(dir.path(), &model);

    b.goto(&server.url);
    b.wait_text("#store-info", "2 documents");
    b.type_into("#question", "What is the secret code?\u{E007}");
    b.wait_for("the root agent's first request in #steps", |b| {
        b.text("#steps").contains("request #1").then_some(())
    });
    assert_eq!(
        b.js(
            "return document.querySelector('#stop').disabled;",
            json!([])
        ),
        false,
        "Stop is enabled while the run goes"
    );
    b.click("#stop");
    let bubble = b.wait_for("the stopped run's bubble", |b| {
        let t = b.text("#messages .answer, #messages .error");
        (!t.is_empty()).then_some(t)
    });
    assert!(
        bubble.contains("partial") || bubble.contains("cancelled"),
        "{bubble}"
    );
    let runs = server.get("/api/runs");
    assert_eq!(runs["runs"][0]["status"], "cancelled", "{runs}");
    assert_eq!(
        b.js(
            "return document.querySelector('#send').disabled;",
            json!([])
        ),
        false
    );
}

#[test]
fn sources_and_unsupported_claims_are_listed_under_the_answer() {
    let _one = lock();
    let Some(b) = browser_or_skip() else { return };
    let dir = common::indexed_docs(&[
        ("a.txt", "This memo describes the office move.\n"),
        (
            "b_notes.txt",
            "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
        ),
        (
            "c_vault.txt",
            "The old vault had a secret code of its own.\n",
        ),
    ]);
    let model = ScriptedServer::spawn(Script::new().on(
        root(),
        Reply::text("FINAL(The secret code is 4721. The vault opens at midnight.)"),
    ));
    let server = Server::start(dir.path(), &model);
    b.goto(&server.url);
    b.wait_text("#store-info", "3 documents");
    b.click("#coverage");
    b.type_into("#question", "What is the secret code?");
    b.click("#send");
    b.wait_text("#messages .answer", "4721");
    let sources = b.wait_text("#messages .answer .grounding .sources", "b_notes.txt");
    // Coverage was asked for: the matching document no claim cites is listed.
    let uncited = b.text("#messages .answer .grounding .uncited");
    assert!(uncited.contains("c_vault.txt"), "{uncited}");
    assert!(
        sources.contains("“The secret code is 4721.”")
            && sources.contains("attached by the engine"),
        "{sources}"
    );
    let unsupported = b.text("#messages .answer .grounding .claim-unsupported");
    assert!(
        unsupported.contains("The vault opens at midnight."),
        "{unsupported}"
    );
    assert!(
        b.text("#messages .answer .foot")
            .contains("1/2 claims supported")
    );
    // A source opens its chunk with the quote marked.
    b.click("#messages .answer .grounding .source");
    b.wait_text("#chunk-text", "secret code is 4721");
    assert_eq!(
        b.text("#chunk-text mark").to_lowercase(),
        "the secret code is 4721."
    );
}
