//! `rlm serve` as a user starts it: the real binary on a real socket, its
//! sandbox worker subcommand, the scripted model over real HTTP; and the
//! mistakes a user can make when starting it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

use rlm_llm::testing::{Matcher, Script, ScriptedServer, TEST_API_KEY};

mod common;
use common::{indexed_docs, rlm, stderr};

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 exchange; returns (status, body).
fn http(addr: &str, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    (status, body.to_string())
}

#[test]
fn serve_answers_over_http_and_stops_on_sigterm() {
    let dir = indexed_docs(&[(
        "b_notes.txt",
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    )]);
    let model = ScriptedServer::spawn(
        Script::new()
            .on(
                Matcher::any_contains("REPL output"),
                "FINAL(The secret code is 4721 [[doc:0 \"The secret code is 4721\"]])",
            )
            .otherwise("```repl\nprint(context[:200])\n```"),
    );
    let base = model.base_url();
    let env = [
        ("RLM_PROVIDER", "openai"),
        ("RLM_BASE_URL", base.as_str()),
        ("RLM_API_KEY", TEST_API_KEY),
        ("RLM_PRIMARY_MODEL", "root-model"),
        ("RLM_SUB_MODEL", "sub-model"),
    ];
    let mut child = common::command(
        dir.path(),
        &["serve", "--store", "store", "--addr", "127.0.0.1:0"],
        &env,
    )
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let server = Server(child);
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_string();

    let body = r#"{"question": "What is the secret code?"}"#;
    let (status, answer) = http(
        &addr,
        &format!(
            "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert_eq!(status, 200, "{answer}");
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["status"], "done");
    assert!(v["answer"]["answer"].as_str().unwrap().contains("4721"));
    let run_id = v["id"].as_str().unwrap();
    assert!(
        dir.path()
            .join("store/runs")
            .join(format!("{run_id}.jsonl"))
            .is_file()
    );

    let (status, page) = http(
        &addr,
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "the web UI");

    // SIGTERM stops it cleanly.
    let mut server = server;
    let pid = server.0.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn serve_start_errors_are_one_line_and_say_what_to_do() {
    let dir = indexed_docs(&[("a.txt", "text\n")]);
    let env = [("RLM_PROVIDER", "openai"), ("RLM_API_KEY", "k")];

    let o = rlm(dir.path(), &["serve", "--store", "nowhere"], &env);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("rlm index"), "{}", stderr(&o));

    let o = rlm(
        dir.path(),
        &["serve", "--store", "store", "--max-runs", "0"],
        &env,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--max-runs 0"), "{}", stderr(&o));

    let o = rlm(
        dir.path(),
        &["serve", "--store", "store", "--keep-runs", "0"],
        &env,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--keep-runs must be 1 or more"),
        "{}",
        stderr(&o)
    );

    let o = rlm(
        dir.path(),
        &["serve", "--store", "store", "--briefing", "missing.md"],
        &env,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot read briefing missing.md"),
        "{}",
        stderr(&o)
    );

    let o = rlm(
        dir.path(),
        &["serve", "--store", "store", "--addr", "not-an-address"],
        &env,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot listen on not-an-address"),
        "{}",
        stderr(&o)
    );

    // The port is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = rlm(
        dir.path(),
        &["serve", "--store", "store", "--addr", &addr],
        &env,
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(err.contains("--addr"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    drop(taken);
}
