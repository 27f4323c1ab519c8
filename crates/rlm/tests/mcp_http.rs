//! The MCP server of `rlm serve` at `/mcp` (streamable HTTP) as an agent
//! reaches it: the real binary on a real socket, JSON-RPC over HTTP POSTs
//! whose answers stream back as server-sent events, a session id, the
//! server's token and Host checks in front, the scripted model over real HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::serve_support;
use common::indexed_docs;
use serve_support::{NOTES, Server, model, wait_until};

const DOCS: &[(&str, &str)] = &[
    ("a_intro.txt", "This memo describes the office move.\n"),
    NOTES,
    ("c_misc.txt", "Lunch options and parking spaces.\n"),
];

/// An HTTP response whose body is read as it arrives.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: BufReader<Box<dyn Read + Send>>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The next JSON-RPC message: the next event of an event stream (the
    /// priming events without data are skipped), or the whole JSON body;
    /// `None` at the end of the body.
    fn next_message(&mut self) -> Option<Value> {
        if !self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            let mut text = String::new();
            self.body.read_to_string(&mut text).ok()?;
            return (!text.trim().is_empty()).then(|| serde_json::from_str(&text).unwrap());
        }
        let mut data = String::new();
        loop {
            let mut line = String::new();
            if self.body.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    return Some(serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            }
        }
    }

    /// The body as text.
    fn text(mut self) -> String {
        let mut text = String::new();
        let _ = self.body.read_to_string(&mut text);
        text
    }
}

/// A `Transfer-Encoding: chunked` body, decoded.
struct Chunked<R> {
    inner: BufReader<R>,
    left: usize,
    done: bool,
}

impl<R: Read> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            // The size line, after the CRLF that ends the previous chunk.
            let mut line = String::new();
            while line.trim().is_empty() {
                line.clear();
                if self.inner.read_line(&mut line)? == 0 {
                    self.done = true;
                    return Ok(0);
                }
            }
            let size = line.trim().split(';').next().unwrap_or("");
            let n = usize::from_str_radix(size, 16)
                .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
            if n == 0 {
                self.done = true;
                return Ok(0);
            }
            self.left = n;
        }
        let want = buf.len().min(self.left);
        let got = self.inner.read(&mut buf[..want])?;
        if got == 0 {
            self.done = true;
        }
        self.left -= got;
        Ok(got)
    }
}

/// One HTTP/1.1 request on a new connection (closed after the response).
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    let body = body.unwrap_or("");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str("Host: localhost\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(s, "{head}\r\n{body}").unwrap();
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line[9..12].parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _): &&(String, String)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let body: Box<dyn Read + Send> = if find("transfer-encoding").is_some_and(|t| t == "chunked") {
        Box::new(Chunked {
            inner: reader,
            left: 0,
            done: false,
        })
    } else if let Some(len) = find("content-length") {
        Box::new(reader.take(len.parse().unwrap()))
    } else {
        Box::new(reader)
    };
    Response {
        status,
        headers,
        body: BufReader::new(body),
    }
}

/// An MCP session with the server.
struct Session {
    addr: String,
    token: Option<String>,
    id: Option<String>,
    next_id: i64,
}

impl Session {
    fn new(addr: &str, token: Option<&str>) -> Session {
        Session {
            addr: addr.to_string(),
            token: token.map(str::to_string),
            id: None,
            next_id: 0,
        }
    }

    /// POST /mcp with `message`.
    fn post(&self, message: &Value) -> Response {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(id) = &self.id {
            headers.push(("Mcp-Session-Id", id));
            headers.push(("MCP-Protocol-Version", "2025-06-18"));
        }
        if let Some(a) = &auth {
            headers.push(("Authorization", a));
        }
        request(
            &self.addr,
            "POST",
            "/mcp",
            &headers,
            Some(&message.to_string()),
        )
    }

    /// Sends request `method`; returns its id and the response stream.
    fn send(&mut self, method: &str, params: Value) -> (i64, Response) {
        self.next_id += 1;
        let id = self.next_id;
        let r = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        if r.status != 200 {
            let status = r.status;
            panic!("{method}: {status} {}", r.text());
        }
        (id, r)
    }

    /// The response to request `method` and the notifications before it.
    fn call_with_notes(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let (id, mut r) = self.send(method, params);
        let mut notes = Vec::new();
        while let Some(m) = r.next_message() {
            if m["id"] == id && m.get("method").is_none() {
                return (m, notes);
            }
            notes.push(m);
        }
        panic!("{method}: the stream ended without a response; {notes:?}");
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_with_notes(method, params).0
    }

    /// `tools/call`'s result (a tool error is a result too).
    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let r = self.call("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(r.get("error").is_none(), "{name}: {r}");
        r["result"].clone()
    }

    fn notify(&self, method: &str, params: Value) {
        let r = self.post(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
        if r.status != 202 {
            let status = r.status;
            panic!("{method}: {status} {}", r.text());
        }
    }

    /// The initialize handshake; the session id is kept for what follows.
    fn initialize(&mut self) {
        let (id, mut r) = self.send(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mcp_http test", "version": "0"}
            }),
        );
        self.id = Some(
            r.header("mcp-session-id")
                .expect("a stateful session: Mcp-Session-Id")
                .to_string(),
        );
        let init = r.next_message().expect("the initialize result");
        assert_eq!(init["id"], id, "{init}");
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        assert_eq!(init["result"]["serverInfo"]["name"], "rlm", "{init}");
        self.notify("notifications/initialized", json!({}));
    }

    /// Ends the session (DELETE /mcp).
    fn close(self) -> u16 {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let id = self.id.clone().unwrap();
        let mut headers = vec![("Mcp-Session-Id", id.as_str())];
        if let Some(a) = &auth {
            headers.push(("Authorization", a));
        }
        request(&self.addr, "DELETE", "/mcp", &headers, None).status
    }
}

/// A request to the server's JSON API: (status, body as JSON).
fn api(server: &Server, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    let r = request(
        &server.addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        body,
    );
    let status = r.status;
    (
        status,
        serde_json::from_str(&r.text()).unwrap_or(Value::Null),
    )
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn tools_answers_with_progress_and_a_reindexed_corpus_over_http() {
    let dir = indexed_docs(DOCS);
    let model = model(0);
    let docs = dir.path().join("docs");
    let server = Server::start(
        dir.path(),
        &dir.path().join("store"),
        &model,
        &["--source", docs.to_str().unwrap()],
    );
    let mut mcp = Session::new(&server.addr, None);
    mcp.initialize();

    let tools = mcp.call("tools/list", json!({}));
    let list = tools["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["ask", "search", "show", "list_documents"],
        "{tools}"
    );
    assert!(
        list[0]["inputSchema"]["properties"].get("verify").is_none(),
        "the server checks answers as it is configured: {tools}"
    );

    let found = mcp.tool("search", json!({"query": "secret code", "k": 2}));
    let hit = found["structuredContent"]["hits"][0].clone();
    assert_eq!(hit["path"], "docs/b_notes.txt", "{found}");

    // An answer, its steps streamed as progress on the same POST.
    let (answer, notes) = mcp.call_with_notes(
        "tools/call",
        json!({"name": "ask", "arguments": {"question": "What is the secret code?"},
               "_meta": {"progressToken": "p1"}}),
    );
    let result = &answer["result"];
    assert_eq!(result["isError"], false, "{answer}");
    let s = &result["structuredContent"];
    assert!(s["answer"].as_str().unwrap().contains("4721"), "{answer}");
    assert_eq!(s["partial"], false, "{answer}");
    assert_eq!(s["sources"][0]["chunk_id"], hit["chunk_id"], "{answer}");
    assert_eq!(s["sources"][0]["line"], 2, "{answer}");
    assert!(text_of(result).contains("**Sources**"), "{answer}");
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 4, "{notes:?}");
    assert!(
        progress
            .iter()
            .all(|n| n["params"]["progressToken"] == "p1")
    );
    let first = progress[0]["params"]["message"].as_str().unwrap();
    let last = progress[progress.len() - 1]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        first.contains("started") && last.contains("finished"),
        "{notes:?}"
    );
    // It is one of the server's runs, recorded like the API's.
    let run_id = s["run_id"].as_str().unwrap();
    let (status, run) = api(&server, "GET", &format!("/api/runs/{run_id}"), None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "done", "{run}");

    // Bad arguments are tool errors; the session goes on.
    let bad = mcp.tool("search", json!({"query": "secret", "k": 0}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        text_of(&bad).contains("`k` must be a whole number from 1 to 10000, got 0"),
        "{bad}"
    );
    let bad = mcp.tool("ask", json!({"question": "q", "verify": "off"}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(text_of(&bad).contains("no argument `verify`"), "{bad}");
    let bad = mcp.tool("ask", json!({"question": "q", "max_depth": "deep"}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(text_of(&bad).contains("max_depth"), "{bad}");
    // The sandbox is checked by the server as for its API.
    let bad = mcp.tool("ask", json!({"question": "q", "sandbox": "jail"}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        text_of(&bad).contains("unknown sandbox \"jail\": use monty (the default) or cpython"),
        "{bad}"
    );
    let unknown = mcp.call("tools/call", json!({"name": "index", "arguments": {}}));
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /api/reindex"),
        "{unknown}"
    );

    // A re-index through the server's API is what the next call sees.
    std::fs::write(docs.join("d_new.txt"), "The spare key is under the mat.\n").unwrap();
    let (status, job) = api(&server, "POST", "/api/reindex", Some("{}"));
    assert_eq!(status, 202, "{job}");
    let job_id = job["job"]["id"].as_str().unwrap().to_string();
    wait_until(60, "the re-index job finishes", || {
        api(&server, "GET", &format!("/api/index/jobs/{job_id}"), None).1["status"] == "done"
    });
    let listed = mcp.tool("list_documents", json!({}));
    assert_eq!(listed["structuredContent"]["total"], 4, "{listed}");
    let found = mcp.tool("search", json!({"query": "spare key"}));
    assert_eq!(
        found["structuredContent"]["hits"][0]["path"], "docs/d_new.txt",
        "{found}"
    );

    assert_eq!(mcp.close(), 202);
    server.stop();
}

#[test]
fn a_cancelled_ask_over_http_frees_its_run() {
    let dir = indexed_docs(DOCS);
    // Questions with "slow" wait 60 s for the model's first reply.
    let model = model(60_000);
    let server = Server::start(
        dir.path(),
        &dir.path().join("store"),
        &model,
        &["--max-runs", "1"],
    );
    let mut mcp = Session::new(&server.addr, None);
    mcp.initialize();

    let (id, mut stream) = mcp.send(
        "tools/call",
        json!({"name": "ask", "arguments": {"question": "slow: what is the secret code?"},
               "_meta": {"progressToken": 7}}),
    );
    // The first step (the run started) arrives, then the model stalls.
    let first = stream.next_message().expect("a progress notification");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let (_, runs) = api(&server, "GET", "/api/runs", None);
    let run_id = runs["runs"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(runs["runs"][0]["status"], "running", "{runs}");

    // A second question waits for the only run slot (--max-runs 1).
    let mut other = Session {
        addr: mcp.addr.clone(),
        token: None,
        id: mcp.id.clone(),
        next_id: 100,
    };
    let (tx, second) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(other.tool("ask", json!({"question": "What is the secret code?"})));
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(second.try_recv().is_err(), "it waits for the slot");

    let t = Instant::now();
    mcp.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "the user changed their mind"}),
    );
    // The cancelled run's slot frees: the waiting question is answered.
    let answer = second
        .recv_timeout(Duration::from_secs(20))
        .expect("the second question is answered once the first is cancelled");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(answer["isError"], false, "{answer}");
    assert!(
        answer["structuredContent"]["answer"]
            .as_str()
            .unwrap()
            .contains("4721"),
        "{answer}"
    );
    let (_, run) = api(&server, "GET", &format!("/api/runs/{run_id}"), None);
    assert_eq!(run["status"], "cancelled", "{run}");
    // No response comes for the cancelled request.
    while let Some(m) = stream.next_message() {
        assert!(m.get("result").is_none(), "a cancelled call answered: {m}");
    }
    server.stop();
}

#[test]
fn the_token_and_host_checks_cover_mcp() {
    let dir = indexed_docs(DOCS);
    let model = model(0);
    let server = Server::start(
        dir.path(),
        &dir.path().join("store"),
        &model,
        &["--token", "s3cret", "--allowed-host", "rlm.example.org"],
    );
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});

    let no_token = Session::new(&server.addr, None).post(&init);
    assert_eq!(no_token.status, 401);
    assert!(
        no_token
            .header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer")),
        "{:?}",
        no_token.headers
    );
    assert!(no_token.text().contains("requires a token"));
    let wrong = Session::new(&server.addr, Some("guess")).post(&init);
    assert_eq!(wrong.status, 401);
    assert!(wrong.text().contains("does not match"));

    let mut mcp = Session::new(&server.addr, Some("s3cret"));
    mcp.initialize();
    let docs = mcp.tool("list_documents", json!({}));
    assert_eq!(docs["structuredContent"]["total"], 3, "{docs}");
    // A request of the session without the token is refused too.
    let stolen = Session {
        addr: mcp.addr.clone(),
        token: None,
        id: mcp.id.clone(),
        next_id: 0,
    };
    let r = stolen.post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}));
    assert_eq!(r.status, 401);

    // One Host list, the server's: a name it allows reaches MCP (rmcp's
    // loopback-only default would refuse it), another is refused.
    let body = init.to_string();
    let ok = request(
        &server.addr,
        "POST",
        "/mcp",
        &[
            ("Host", "rlm.example.org:8080"),
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        Some(&body),
    );
    assert_eq!(ok.status, 200);
    let evil = request(
        &server.addr,
        "POST",
        "/mcp",
        &[
            ("Host", "evil.example.com"),
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        Some(&body),
    );
    assert_eq!(evil.status, 403);
    assert!(evil.text().contains("DNS rebinding"));
    // A body that is not JSON, or sent as another type: a JSON-RPC error,
    // not the SDK's plain text.
    for (content_type, body, status, code) in [
        (
            "application/json",
            "{\"jsonrpc\": \"2.0\", \"id\": 1, \"meth",
            400,
            -32700,
        ),
        ("text/plain", "{}", 415, -32600),
    ] {
        let r = request(
            &server.addr,
            "POST",
            "/mcp",
            &[
                ("Authorization", "Bearer s3cret"),
                ("Content-Type", content_type),
                ("Accept", "application/json, text/event-stream"),
            ],
            Some(body),
        );
        assert_eq!(r.status, status, "{body}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v: Value = serde_json::from_str(&r.text()).unwrap();
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert_eq!(v["error"]["code"], code, "{v}");
    }
    assert_eq!(mcp.close(), 202);
    server.stop();
}

#[test]
fn no_mcp_turns_the_endpoint_off() {
    let dir = indexed_docs(DOCS);
    let model = model(0);
    let server = Server::start(dir.path(), &dir.path().join("store"), &model, &["--no-mcp"]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let r = Session::new(&server.addr, None).post(&init);
    assert_eq!(r.status, 404);
    server.stop();
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What each surface of `rlm serve` adds over `rlm ask` on the same
/// question with the scripted model at zero latency (medians of
/// interleaved runs; a new connection per request, as the stdio numbers'
/// process per `rlm ask`). Not a check: it prints the numbers
/// docs/benchmarks.md gives. `cargo test --release --no-default-features -p
/// rlm --test integration -- --ignored --nocapture mcp_http::overhead`
#[test]
#[ignore]
fn overhead_of_mcp_http_and_openai_over_rlm_ask() {
    let runs: usize = std::env::var("RLM_MCP_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = indexed_docs(DOCS);
    let model = model(0);
    let base = model.base_url();
    let env = common::model_env(&base);
    let server = Server::start(dir.path(), &dir.path().join("store"), &model, &[]);
    let question = "What is the secret code?";
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut mcp = Session::new(&server.addr, None);
    mcp.initialize();
    let openai =
        json!({"model": "rlm", "messages": [{"role": "user", "content": question}]}).to_string();

    // One warm-up each (sandbox workers, page cache).
    mcp.tool("ask", json!({"question": question}));
    api(&server, "POST", "/v1/chat/completions", Some(&openai));
    common::rlm(
        dir.path(),
        &["ask", question, "--store", "store", "--quiet"],
        &env,
    );
    let (mut cli, mut cli_engine) = (vec![], vec![]);
    let (mut rt, mut rt_engine, mut oai, mut chat) = (vec![], vec![], vec![], vec![]);
    let api_chat = json!({"question": question}).to_string();
    for _ in 0..runs {
        let t = Instant::now();
        let o = common::rlm(
            dir.path(),
            &["ask", question, "--store", "store", "--json", "--quiet"],
            &env,
        );
        cli.push(ms(t.elapsed()));
        assert!(o.status.success(), "{}", common::stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        cli_engine.push(v["usage"]["wall_ms"].as_f64().unwrap());

        let t = Instant::now();
        let r = mcp.tool("ask", json!({"question": question}));
        rt.push(ms(t.elapsed()));
        assert_eq!(r["isError"], json!(false), "{r}");
        rt_engine.push(r["structuredContent"]["usage"]["wall_ms"].as_f64().unwrap());

        let t = Instant::now();
        let (status, v) = api(&server, "POST", "/api/chat", Some(&api_chat));
        chat.push(ms(t.elapsed()));
        assert_eq!(v["status"], "done", "{status} {v}");

        let t = Instant::now();
        let (status, v) = api(&server, "POST", "/v1/chat/completions", Some(&openai));
        oai.push(ms(t.elapsed()));
        assert_eq!(status, 200, "{v}");
        assert!(
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .contains("4721")
        );
    }
    let (cli, cli_engine) = (median(&mut cli), median(&mut cli_engine));
    let (rt, rt_engine) = (median(&mut rt), median(&mut rt_engine));
    println!("{runs} runs each, medians (ms):");
    println!(
        "  rlm ask process (spawn → exit): {cli:.1}; engine's own wall_ms {cli_engine:.1}; outside the engine {:.1}",
        cli - cli_engine
    );
    println!(
        "  rlm serve /mcp tools/call ask round trip: {rt:.1}; engine's own wall_ms {rt_engine:.1}; outside the engine {:.1}",
        rt - rt_engine
    );
    println!(
        "  rlm serve POST /v1/chat/completions (not streamed): {:.1}",
        median(&mut oai)
    );
    println!(
        "  rlm serve POST /api/chat (the same run, the JSON API): {:.1}",
        median(&mut chat)
    );
    assert_eq!(mcp.close(), 202);
    server.stop();
}

#[test]
fn a_stop_closes_open_mcp_streams_at_once() {
    let dir = indexed_docs(DOCS);
    let model = model(0);
    let server = Server::start(dir.path(), &dir.path().join("store"), &model, &[]);
    let mut mcp = Session::new(&server.addr, None);
    mcp.initialize();
    // The session's own event stream (GET), open until the server ends it.
    let id = mcp.id.clone().unwrap();
    let mut stream = request(
        &server.addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &id)],
        None,
    );
    assert_eq!(stream.status, 200);
    let (tx, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while stream.next_message().is_some() {}
        let _ = tx.send(());
    });
    // Without the sessions closed at shutdown, the stream would hold the
    // server's graceful stop for its whole grace period (20 s): a stop
    // ending before that is one the stream did not hold (the margin is for
    // a loaded machine, where stopping the process itself takes seconds).
    let t = Instant::now();
    server.stop();
    assert!(
        t.elapsed() < Duration::from_secs(18),
        "the stop waited {:?}",
        t.elapsed()
    );
    ended
        .recv_timeout(Duration::from_secs(5))
        .expect("the event stream ended");
}

#[test]
fn mcp_on_a_node_over_postgresql_answers_as_one_of_the_clusters_runs() {
    let Some(db) = rlm_store_pg::testing::test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join(NOTES.0), NOTES.1).unwrap();
    let out = common::rlm(dir.path(), &["index", "docs", "--store", db.url()], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model = model(0);
    let store = std::path::Path::new(db.url());
    let a = Server::start(dir.path(), store, &model, &[]);
    let b = Server::start(dir.path(), store, &model, &[]);
    let mut mcp = Session::new(&a.addr, None);
    mcp.initialize();
    let tools = mcp.call("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ask", "search", "show", "list_documents"],
        "{tools}"
    );
    // Search and lookups read the PostgreSQL store.
    let found = mcp.tool("search", json!({"query": "secret code", "k": 2}));
    let hit = found["structuredContent"]["hits"][0].clone();
    assert_eq!(hit["path"], "docs/b_notes.txt", "{found}");
    let shown = mcp.tool("show", json!({"id": hit["chunk_id"]}));
    assert!(
        text_of(&shown).contains("The secret code is 4721"),
        "{shown}"
    );
    // `ask` in a session: a run of the cluster, its source's line looked up
    // in PostgreSQL.
    let answer = mcp.tool(
        "ask",
        json!({"question": "What is the secret code?", "session": "m1"}),
    );
    assert_eq!(answer["isError"], false, "{answer}");
    let s = &answer["structuredContent"];
    assert!(s["answer"].as_str().unwrap().contains("4721"), "{answer}");
    assert_eq!(s["sources"][0]["chunk_id"], hit["chunk_id"], "{answer}");
    assert_eq!(s["sources"][0]["line"], 2, "{answer}");
    // The other node shows the run and the session's turn.
    let run_id = s["run_id"].as_str().unwrap();
    let (status, run) = api(&b, "GET", &format!("/api/runs/{run_id}"), None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "done", "{run}");
    let (status, session) = api(&b, "GET", "/api/sessions/m1", None);
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["turns_total"], 1, "{session}");
    assert_eq!(session["history"][0]["run_id"], run_id, "{session}");
    // Indexing stays the CLI's: the tool is not there.
    let unknown = mcp.call("tools/call", json!({"name": "index", "arguments": {}}));
    assert!(unknown.get("error").is_some(), "{unknown}");
    assert_eq!(mcp.close(), 202);
    a.stop();
    b.stop();
    drop(db);
}
