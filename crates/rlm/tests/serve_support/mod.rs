//! Running the real `rlm serve` in tests: start it on port 0 against the
//! scripted model, talk HTTP/1.1 to it, stop it.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer, TEST_API_KEY};
use serde_json::Value;

use crate::common;

/// The real `rlm serve` on port 0; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
}

impl Server {
    pub fn start(dir: &Path, store: &Path, model: &ScriptedServer, extra: &[&str]) -> Server {
        let base = model.base_url();
        let env = [
            ("RLM_PROVIDER", "openai"),
            ("RLM_BASE_URL", base.as_str()),
            ("RLM_API_KEY", TEST_API_KEY),
            ("RLM_PRIMARY_MODEL", "root-model"),
            ("RLM_SUB_MODEL", "sub-model"),
        ];
        let store = store.to_str().unwrap();
        let mut args = vec!["serve", "--store", store, "--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = common::command(dir, &args, &env).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let addr = first
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("first line: {first:?}"))
            .to_string();
        Server { child, addr }
    }

    /// SIGTERM, and waits (bounded) for a clean stop.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status:?}");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server did not stop within 30 s of SIGTERM");
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        exchange(&self.addr, "GET", path, None)
    }

    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        exchange(&self.addr, "POST", path, Some(body))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange (60 s at most); returns (status, body text).
pub fn exchange_text(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    (status, body.to_string())
}

/// [`exchange_text`] with the body as JSON (null when it is not JSON).
pub fn exchange(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    let (status, text) = exchange_text(addr, method, path, body);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

/// Answers after one cell; replies to questions containing "slow" take
/// `slow_ms` (time to fill a disk or kill the server mid-run).
pub fn model(slow_ms: u64) -> ScriptedServer {
    ScriptedServer::spawn(
        Script::new()
            .on(crate::common::judge(), judge_reply(&[Verdict::Entailed]))
            .on(
                Matcher::any_contains("REPL output"),
                "FINAL(The secret code is 4721 [[doc:0 \"The secret code is 4721\"]])",
            )
            .on(
                Matcher::last_contains("slow"),
                Reply::text("```repl\nprint(context[:200])\n```").with_latency_ms(slow_ms),
            )
            .otherwise("```repl\nprint(context[:200])\n```"),
    )
}

pub const NOTES: (&str, &str) = (
    "b_notes.txt",
    "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
);

/// Polls `check` every 50 ms for up to `secs`.
pub fn wait_until(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let t = Instant::now();
    while !check() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks the first question of session `s1` and returns its run id.
pub fn first_turn(server: &Server) -> String {
    let (status, v) = server.post(
        "/api/chat",
        r#"{"question": "What is the secret code?", "session": "s1"}"#,
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "done", "{v}");
    v["id"].as_str().unwrap().to_string()
}
