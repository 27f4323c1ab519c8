//! `rlm mcp` as an agent starts it: the real binary speaking the Model
//! Context Protocol over its stdin/stdout (JSON-RPC 2.0, one message a
//! line), its sandbox worker subcommand, the scripted model over real HTTP,
//! a store indexed in a temporary folder.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer};
use serde_json::{Value, json};

use crate::common;

const DOCS: &[(&str, &str)] = &[
    ("a_intro.txt", "This memo describes the office move.\n"),
    (
        "b_notes.txt",
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    ),
    ("c_misc.txt", "Lunch options and parking spaces.\n"),
];

/// Two turns (a cell, then FINAL with a quote); a question with the word
/// `STALL` waits `slow_ms` for its first reply.
fn model(slow_ms: u64) -> ScriptedServer {
    ScriptedServer::spawn(
        Script::new()
            .on(common::judge(), judge_reply(&[Verdict::Entailed]))
            .on(
                Matcher::any_contains("REPL output"),
                "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
            )
            .on(
                Matcher::last_contains("STALL"),
                Reply::text("```repl\nprint(context[:200])\n```").with_latency_ms(slow_ms),
            )
            .otherwise("```repl\nprint(context[:200])\n```"),
    )
}

/// A running `rlm mcp` and the messages it sent.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Notifications (and anything else not yet claimed), in arrival order.
    seen: Vec<Value>,
    stderr: Arc<Mutex<String>>,
    next_id: i64,
}

impl Mcp {
    fn start(dir: &std::path::Path, model: &ScriptedServer, extra: &[&str]) -> Mcp {
        let base = model.base_url();
        let env = common::model_env(&base);
        let mut args = vec!["mcp", "--store", "store"];
        args.extend_from_slice(extra);
        let mut cmd = common::command(dir, &args, &env);
        cmd.stdin(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("rlm mcp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Every line on stdout must be one JSON-RPC message.
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| json!({"not_json": line, "error": e.to_string()}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut e = err.lock().unwrap();
                e.push_str(&line);
                e.push('\n');
            }
        });
        Mcp {
            child,
            stdin: Some(stdin),
            lines,
            seen: Vec::new(),
            stderr,
            next_id: 0,
        }
    }

    /// `rlm mcp` after the initialize handshake.
    fn initialized(dir: &std::path::Path, model: &ScriptedServer, extra: &[&str]) -> Mcp {
        let mut mcp = Mcp::start(dir, model, extra);
        let init = mcp.call(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mcp_stdio test", "version": "0"}
            }),
        );
        let result = &init["result"];
        assert_eq!(result["protocolVersion"], "2025-06-18", "{init}");
        assert_eq!(result["serverInfo"]["name"], "rlm", "{init}");
        assert!(result["capabilities"]["tools"].is_object(), "{init}");
        assert!(result["capabilities"]["resources"].is_object(), "{init}");
        mcp.notify("notifications/initialized", json!({}));
        mcp
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn write_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("rlm mcp reads stdin");
        stdin.flush().unwrap();
    }

    fn send(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write_line(&msg.to_string());
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.write_line(&msg.to_string());
    }

    /// The response to request `id`, within `secs`; what arrives before it
    /// is kept in `seen`.
    fn response(&mut self, id: i64, secs: u64) -> Value {
        if let Some(i) = self.seen.iter().position(|m| m["id"] == id) {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(m) => {
                    assert!(
                        m.get("not_json").is_none(),
                        "stdout carried a non-JSON line: {m}"
                    );
                    assert_eq!(m["jsonrpc"], "2.0", "{m}");
                    if m["id"] == id && m.get("method").is_none() {
                        return m;
                    }
                    self.seen.push(m);
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no response to request {id} within {secs} s; stderr:\n{}",
                    self.stderr()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "rlm mcp closed stdout before answering request {id}; stderr:\n{}",
                    self.stderr()
                ),
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.response(id, 60)
    }

    /// `tools/call`'s result (a tool error is a result too).
    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let r = self.call("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(r.get("error").is_none(), "{name}: {r}");
        r["result"].clone()
    }

    /// Everything that arrives within `ms`.
    fn drain(&mut self, ms: u64) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        while let Ok(m) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(m);
        }
        std::mem::take(&mut self.seen)
    }

    /// Closes stdin (the client leaves) and waits, bounded, for the exit.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let t = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "rlm mcp did not exit within 20 s of its stdin closing"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn tools_and_resources_over_stdio() {
    let dir = common::indexed_docs(DOCS);
    let model = model(0);
    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);

    assert_eq!(mcp.call("ping", json!({}))["result"], json!({}));

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
        "no index without --allow-index"
    );
    assert_eq!(
        tools["result"]["tools"][0]["inputSchema"]["required"],
        json!(["question"])
    );

    let docs = mcp.tool("list_documents", json!({}));
    assert_eq!(docs["structuredContent"]["total"], 3, "{docs}");
    assert!(text_of(&docs).contains("docs/b_notes.txt"), "{docs}");

    let found = mcp.tool("search", json!({"query": "secret code", "k": 2}));
    let hit = &found["structuredContent"]["hits"][0];
    assert_eq!(hit["path"], "docs/b_notes.txt", "{found}");
    let chunk_id = hit["chunk_id"].as_str().unwrap().to_string();
    let doc_id = hit["doc_id"].as_str().unwrap().to_string();
    assert!(text_of(&found).contains(&chunk_id));

    let chunk = mcp.tool("show", json!({"id": chunk_id}));
    assert!(
        text_of(&chunk).contains("The secret code is 4721"),
        "{chunk}"
    );
    assert_eq!(chunk["structuredContent"]["chunk"]["id"], chunk_id.as_str());
    let doc = mcp.tool("show", json!({"id": "docs/b_notes.txt", "max_chars": 10}));
    assert_eq!(doc["structuredContent"]["document"]["id"], doc_id.as_str());
    assert_eq!(doc["structuredContent"]["text"], "Meeting no");
    assert_eq!(doc["structuredContent"]["next_offset"], 10);

    // Documents as resources.
    let listed = mcp.call("resources/list", json!({}));
    let resources = listed["result"]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 3, "{listed}");
    let notes = resources
        .iter()
        .find(|r| r["name"] == "docs/b_notes.txt")
        .expect("the notes are a resource");
    assert_eq!(notes["uri"], format!("rlm://doc/{doc_id}"));
    let read = mcp.call("resources/read", json!({"uri": notes["uri"]}));
    assert_eq!(
        read["result"]["contents"][0]["text"],
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
        "{read}"
    );
    let read = mcp.call(
        "resources/read",
        json!({"uri": format!("rlm://chunk/{chunk_id}")}),
    );
    assert!(
        read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("4721")
    );
    let missing = mcp.call("resources/read", json!({"uri": "rlm://doc/nope"}));
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    let templates = mcp.call("resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // ask, with progress.
    let id = mcp.send(
        "tools/call",
        json!({
            "name": "ask",
            "arguments": {"question": "What is the secret code?", "max_llm_calls": 10},
            "_meta": {"progressToken": "p1"}
        }),
    );
    let answer = mcp.response(id, 120);
    let result = &answer["result"];
    assert_eq!(result["isError"], json!(false), "{answer}");
    let s = &result["structuredContent"];
    assert!(s["answer"].as_str().unwrap().contains("4721"), "{answer}");
    assert_eq!(s["partial"], false);
    assert_eq!(s["sources"][0]["path"], "docs/b_notes.txt", "{answer}");
    assert_eq!(s["sources"][0]["quote"], "The secret code is 4721");
    assert_eq!(s["sources"][0]["line"], 2);
    assert!(
        s["sources"][0]["chunk_id"]
            .as_str()
            .unwrap()
            .starts_with(&doc_id)
    );
    // The root's two turns; the claim is its passage word for word, so the
    // judge is not asked.
    assert_eq!(s["usage"]["calls"], 2);
    assert_eq!(s["claims"][0]["support"], "supported", "{answer}");
    assert_eq!(s["claims"][0]["quote_check"], "verified", "{answer}");
    let md = text_of(result);
    assert!(md.contains("**Sources**"), "{md}");
    assert!(md.contains("`docs/b_notes.txt`, line 2"), "{md}");
    let progress: Vec<&Value> = mcp
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 4, "one per step: {progress:?}");
    let values: Vec<f64> = progress
        .iter()
        .map(|p| {
            assert_eq!(p["params"]["progressToken"], "p1");
            p["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "increasing: {values:?}"
    );
    let messages: Vec<&str> = progress
        .iter()
        .map(|p| p["params"]["message"].as_str().unwrap())
        .collect();
    assert!(messages[0].contains("started: 3 documents"), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.contains("cell ran")),
        "{messages:?}"
    );
    assert!(
        messages.last().unwrap().contains("finished"),
        "{messages:?}"
    );

    // The same question through `rlm ask --json` gives the same answer.
    let base = model.base_url();
    let o = common::rlm(
        dir.path(),
        &[
            "ask",
            "What is the secret code?",
            "--store",
            "store",
            "--json",
            "--quiet",
        ],
        &common::model_env(&base),
    );
    let cli: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(cli["answer"], s["answer"]);

    let status = mcp.close();
    assert!(status.success(), "{status:?}");
}

#[test]
fn bad_arguments_are_errors_that_say_what_to_do() {
    let dir = common::indexed_docs(DOCS);
    let model = model(0);
    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);

    // (tool, arguments, what the tool error says)
    let cases: &[(&str, Value, &str)] = &[
        ("ask", json!({}), "`question` is missing"),
        ("ask", json!({"question": "  "}), "`question` is empty"),
        (
            "ask",
            json!({"question": 42}),
            "`question` must be a string",
        ),
        (
            "ask",
            json!({"question": "q", "max_depth": 99}),
            "max_depth",
        ),
        ("ask", json!({"question": "q", "flow": "magic"}), "magic"),
        (
            "ask",
            json!({"question": "q", "sandbox": "jail"}),
            "sandbox: unknown sandbox \"jail\": use monty (the default) or cpython",
        ),
        (
            "ask",
            json!({"question": "q", "sandbox": 3}),
            "`sandbox` must be a string",
        ),
        (
            "ask",
            json!({"question": "q", "max_wall_secs": {"s": 1}}),
            "must be a number",
        ),
        (
            "ask",
            json!({"question": "q", "session": "../x"}),
            "session",
        ),
        (
            "ask",
            json!({"question": "q", "qestion": "x"}),
            "no argument `qestion`",
        ),
        (
            "ask",
            json!({"question": "q", "turn_format": "yaml"}),
            "use auto, structured or text",
        ),
        (
            "ask",
            json!({"question": "q", "response_schema": "a string"}),
            "`response_schema` must be an object",
        ),
        (
            "ask",
            json!({"question": "q", "response_schema": {"type": "object", "patternProperties": {}}}),
            "patternProperties",
        ),
        (
            "search",
            json!({"query": "x", "k": 0}),
            "`k` must be a whole number from 1 to 10000",
        ),
        (
            "search",
            json!({"query": "x", "mode": "fuzzy"}),
            "bm25, vector or hybrid",
        ),
        (
            "search",
            json!({"query": "x", "mode": "vector"}),
            "embeddings",
        ),
        ("search", json!({"k": 3}), "`query` is missing"),
        ("show", json!({"id": "nope"}), "no chunk or document"),
        (
            "list_documents",
            json!({"limit": -1}),
            "`limit` must be a whole number",
        ),
    ];
    for (tool, args, says) in cases {
        let r = mcp.tool(tool, args.clone());
        assert_eq!(r["isError"], true, "{tool} {args}: {r}");
        let text = text_of(&r);
        assert!(text.contains(says), "{tool} {args}: {text}");
    }
    assert_eq!(model.request_count(), 0, "no bad call reached the model");

    // Unknown tools (and index, off) are JSON-RPC errors.
    for name in ["nope", "index"] {
        let r = mcp.call("tools/call", json!({"name": name, "arguments": {}}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains("tool"),
            "{r}"
        );
    }
    // Arguments that are not an object, a malformed line, an unknown
    // method: errors or ignored, and the server goes on.
    let r = mcp.call("tools/call", json!({"name": "search", "arguments": [1, 2]}));
    assert!(r.get("error").is_some(), "{r}");
    mcp.write_line("{this is not json");
    let r = mcp.call("no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = mcp.call("resources/list", json!({"cursor": "x"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(mcp.call("ping", json!({}))["result"], json!({}));
    let found = mcp.tool("search", json!({"query": "secret"}));
    assert_eq!(found["isError"], json!(false), "{found}");
    let status = mcp.close();
    assert!(status.success(), "{status:?}");
}

#[test]
fn ask_runs_the_models_code_on_the_sandbox_it_names() {
    // The model's cell prints the platform: monty names itself, CPython says linux.
    let dir = common::indexed_docs(DOCS);
    let model = ScriptedServer::spawn(
        Script::new()
            .on(
                Matcher::any_contains("platform=monty"),
                "FINAL(ran on monty [[doc:1 \"The secret code is 4721\"]])",
            )
            .on(
                Matcher::any_contains("platform=linux"),
                "FINAL(ran on cpython [[doc:1 \"The secret code is 4721\"]])",
            )
            .otherwise("```repl\nimport sys\nprint('platform=' + sys.platform)\n```"),
    );
    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);
    let tools = mcp.call("tools/list", json!({}));
    assert_eq!(
        tools["result"]["tools"][0]["inputSchema"]["properties"]["sandbox"]["enum"],
        json!(["monty", "cpython"])
    );
    let r = mcp.tool("ask", json!({"question": "Which Python?"}));
    assert!(text_of(&r).contains("ran on monty"), "{r}");
    let r = mcp.tool(
        "ask",
        json!({"question": "Which Python?", "sandbox": "monty"}),
    );
    assert!(text_of(&r).contains("ran on monty"), "{r}");
    // The CPython back-end where bubblewrap runs (CI requires it).
    if !rlm_sandbox::testing::cpython_available() {
        return;
    }
    let r = mcp.tool(
        "ask",
        json!({"question": "Which Python?", "sandbox": "cpython"}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(text_of(&r).contains("ran on cpython"), "{r}");
}

/// `response_schema`: the answer also as JSON that follows it, in the
/// structured result and the Markdown.
#[test]
fn ask_with_a_response_schema_returns_the_typed_answer() {
    let dir = common::indexed_docs(DOCS);
    let model = ScriptedServer::spawn(
        Script::new()
            .on(
                Matcher::any_contains("Put the answer below into one JSON document"),
                r#"{"code": "4721"}"#,
            )
            .on(common::judge(), judge_reply(&[Verdict::Entailed]))
            .otherwise("FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])"),
    );
    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);
    let schema =
        json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]});
    let r = mcp.tool(
        "ask",
        json!({"question": "What is the secret code?", "response_schema": schema, "turn_format": "text"}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let data = &r["structuredContent"]["data"];
    assert_eq!(data["value"], json!({"code": "4721"}), "{r}");
    assert_eq!(data["citations"][0]["path"], "$.code", "{r}");
    assert!(text_of(&r).contains("**Answer as JSON**"), "{r}");
}

#[test]
fn a_cancelled_ask_stops_and_gets_no_response() {
    let dir = common::indexed_docs(DOCS);
    let model = model(60_000);
    // One run at a time: the next question gets the slot only once the
    // cancelled run has really ended.
    let mut mcp = Mcp::initialized(dir.path(), &model, &["--max-runs", "1"]);
    let id = mcp.send(
        "tools/call",
        json!({
            "name": "ask",
            "arguments": {"question": "STALL: what is the secret code?"},
            "_meta": {"progressToken": 7}
        }),
    );
    // Wait until the run is under way (its first progress), and the model
    // has the (slow) request.
    let t = Instant::now();
    while !(mcp
        .seen
        .iter()
        .any(|m| m["method"] == "notifications/progress")
        && model.request_count() >= 1)
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run never started: {}",
            mcp.stderr()
        );
        if let Ok(m) = mcp.lines.recv_timeout(Duration::from_millis(50)) {
            mcp.seen.push(m);
        }
    }
    let cancelled_at = Instant::now();
    mcp.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "the user pressed Esc"}),
    );
    // The next question waits for the only slot: answered, it shows the
    // cancelled run let go of it long before the model's 60 s reply.
    let answer = mcp.tool("ask", json!({"question": "What is the secret code?"}));
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(30),
        "the cancelled run held its slot for {:?}",
        cancelled_at.elapsed()
    );
    assert!(
        answer["structuredContent"]["answer"]
            .as_str()
            .unwrap()
            .contains("4721"),
        "{answer}"
    );
    // No response (result or error) ever came for the cancelled request.
    let late = mcp.drain(500);
    assert!(
        !late
            .iter()
            .any(|m| m["id"] == id && m.get("method").is_none()),
        "a cancelled request got a response: {late:?}"
    );
    let status = mcp.close();
    assert!(status.success(), "{status:?}");
}

#[test]
fn index_tool_only_with_allow_index_and_builds_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, text) in DOCS {
        std::fs::write(docs.join(name), text).unwrap();
    }
    let model = model(0);

    // Without --allow-index a missing store stops the server at once.
    let o = common::rlm(
        dir.path(),
        &["mcp", "--store", "store"],
        &common::model_env(&model.base_url()),
    );
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("rlm index"),
        "{}",
        common::stderr(&o)
    );

    let mut mcp = Mcp::initialized(dir.path(), &model, &["--allow-index"]);
    let tools = mcp.call("tools/list", json!({}));
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "index"),
        "{tools}"
    );
    let r = mcp.tool("search", json!({"query": "secret"}));
    assert_eq!(r["isError"], true);
    assert!(text_of(&r).contains("call the `index` tool"), "{r}");
    let listed = mcp.call("resources/list", json!({}));
    assert_eq!(listed["result"]["resources"], json!([]));

    let r = mcp.tool("index", json!({"paths": []}));
    assert_eq!(r["isError"], true);
    assert!(text_of(&r).contains("`paths` is missing or empty"), "{r}");
    let r = mcp.tool("index", json!({"paths": ["nowhere"]}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("nowhere"), "{r}");

    let r = mcp.tool("index", json!({"paths": ["docs"], "exclude": ["c_*"]}));
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(r["structuredContent"]["added"], 2, "{r}");
    let found = mcp.tool("search", json!({"query": "secret"}));
    assert_eq!(
        found["structuredContent"]["hits"][0]["path"],
        "docs/b_notes.txt"
    );
    let listed = mcp.call("resources/list", json!({}));
    assert_eq!(listed["result"]["resources"].as_array().unwrap().len(), 2);
    let answer = mcp.tool("ask", json!({"question": "What is the secret code?"}));
    assert!(
        answer["structuredContent"]["answer"]
            .as_str()
            .unwrap()
            .contains("4721"),
        "{answer}"
    );
    let status = mcp.close();
    assert!(status.success(), "{status:?}");
}

#[test]
fn start_errors_are_one_line_and_say_what_to_do() {
    let dir = common::indexed_docs(DOCS);
    let model = model(0);
    let base = model.base_url();
    // (arguments after `mcp`, what stderr says)
    let cases: &[(&[&str], &str)] = &[
        (&["--store", "nowhere"], "rlm index"),
        (&["--store", "store", "--max-runs", "0"], "--max-runs 0"),
        (
            &["--store", "store", "--max-question-chars", "0"],
            "--max-question-chars must be 1 or more",
        ),
        (
            &["--store", "store", "--briefing", "/dev/zero"],
            "briefing /dev/zero is larger than the limit of 1 MiB",
        ),
    ];
    for (extra, says) in cases {
        let mut args = vec!["mcp"];
        args.extend_from_slice(extra);
        let o = common::rlm(dir.path(), &args, &common::model_env(&base));
        assert!(!o.status.success(), "{extra:?}");
        let err = common::stderr(&o);
        assert!(err.contains(says), "{extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{extra:?}: {err}");
        assert!(
            o.stdout.is_empty(),
            "nothing on the protocol's stdout: {extra:?}"
        );
    }
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What `rlm mcp` adds over `rlm ask`: the same question, the scripted model
/// at zero latency, runs interleaved. Not part of the suite (timing);
/// `RLM_MCP_BENCH_RUNS` (default 30) runs of each:
/// `cargo test --release --no-default-features -p rlm --test integration -- --ignored --nocapture mcp_stdio::overhead`
#[test]
#[ignore]
fn overhead_of_mcp_ask_over_rlm_ask() {
    let runs: usize = std::env::var("RLM_MCP_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = common::indexed_docs(DOCS);
    let model = model(0);
    let base = model.base_url();
    let env = common::model_env(&base);
    let question = "What is the secret code?";
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;

    // Server start: spawn → initialize answered.
    let mut starts = Vec::new();
    for _ in 0..runs.min(10) {
        let t = Instant::now();
        let mcp = Mcp::initialized(dir.path(), &model, &[]);
        starts.push(ms(t.elapsed()));
        assert!(mcp.close().success());
    }

    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);
    // One warm-up each (first sandbox worker, page cache).
    mcp.tool("ask", json!({"question": question}));
    common::rlm(
        dir.path(),
        &["ask", question, "--store", "store", "--quiet"],
        &env,
    );
    let (mut cli, mut cli_engine, mut rt, mut rt_engine) = (vec![], vec![], vec![], vec![]);
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
    }
    let (cli, cli_engine) = (median(&mut cli), median(&mut cli_engine));
    let (rt, rt_engine) = (median(&mut rt), median(&mut rt_engine));
    println!("{runs} runs each, medians (ms):");
    println!(
        "  rlm mcp start → initialize answered: {:.1} ({} runs)",
        median(&mut starts),
        starts.len()
    );
    println!(
        "  rlm ask process (spawn → exit): {cli:.1}; engine's own wall_ms {cli_engine:.1}; outside the engine {:.1}",
        cli - cli_engine
    );
    println!(
        "  rlm mcp tools/call ask round trip: {rt:.1}; engine's own wall_ms {rt_engine:.1}; outside the engine {:.1}",
        rt - rt_engine
    );
    assert!(mcp.close().success());
}

#[test]
fn a_client_that_leaves_mid_question_ends_the_server_and_its_run() {
    let dir = common::indexed_docs(DOCS);
    let model = model(60_000);
    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);
    mcp.send(
        "tools/call",
        json!({"name": "ask", "arguments": {"question": "STALL: what is the secret code?"}}),
    );
    let t = Instant::now();
    while model.request_count() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // stdin closes with the model's reply 60 s away: the SDK gives the
    // running handler 5 s to answer, then the run is cancelled and the
    // process exits.
    let left = Instant::now();
    let status = mcp.close();
    assert!(status.success(), "{status:?}");
    assert!(
        left.elapsed() < Duration::from_secs(10),
        "{:?}",
        left.elapsed()
    );
}

#[test]
fn a_session_carries_earlier_questions_over() {
    let dir = common::indexed_docs(DOCS);
    let model = model(0);
    let mut mcp = Mcp::initialized(dir.path(), &model, &[]);
    for _ in 0..2 {
        let r = mcp.tool(
            "ask",
            json!({"question": "What is the secret code?", "session": "case-1"}),
        );
        assert_eq!(r["isError"], json!(false), "{r}");
        assert_eq!(r["structuredContent"]["session_not_saved"], Value::Null);
    }
    let saw = |n: usize| {
        let mark = format!("Earlier questions in this session ({n})");
        model
            .requests()
            .iter()
            .any(|r| r.last_message().contains(&mark))
    };
    assert!(saw(1), "the second question saw the first");
    // The same session from the command line sees both turns.
    let base = model.base_url();
    let o = common::rlm(
        dir.path(),
        &[
            "ask",
            "And again?",
            "--store",
            "store",
            "--session",
            "case-1",
            "--quiet",
        ],
        &common::model_env(&base),
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(saw(2), "rlm ask --session saw both MCP turns");
    assert!(mcp.close().success());
}
