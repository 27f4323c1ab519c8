//! `rlm serve` as a user starts it: the real binary on a real socket, its
//! sandbox worker subcommand, the scripted model over real HTTP; and the
//! mistakes a user can make when starting it.

use crate::common;
use crate::serve_support;
use common::{indexed_docs, rlm, stderr};
use serve_support::{NOTES, Server, exchange_text, model};

#[test]
fn serve_answers_over_http_and_stops_on_sigterm() {
    let dir = indexed_docs(&[NOTES]);
    let model = model(0);
    let server = Server::start(dir.path(), &dir.path().join("store"), &model, &[]);

    let (status, answer) = exchange_text(
        &server.addr,
        "POST",
        "/api/chat",
        Some(r#"{"question": "What is the secret code?"}"#),
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

    let (status, page) = exchange_text(&server.addr, "GET", "/", None);
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "the web UI");

    // SIGTERM stops it cleanly.
    server.stop();
}

#[test]
fn serve_start_errors_are_one_line_and_say_what_to_do() {
    let dir = indexed_docs(&[("a.txt", "text\n")]);
    let env = [("RLM_PROVIDER", "openai"), ("RLM_API_KEY", "k")];

    // (arguments after `serve`, what stderr says)
    let cases: &[(&[&str], &str)] = &[
        (&["--store", "nowhere"], "rlm index"),
        (&["--max-runs", "0"], "--max-runs 0"),
        (&["--keep-runs", "0"], "--keep-runs must be 1 or more"),
        (
            &["--max-connections", "0"],
            "--max-connections must be 1 or more",
        ),
        (
            &["--header-timeout", "0"],
            "--header-timeout 0 is out of range",
        ),
        (
            &["--body-timeout", "nan"],
            "--body-timeout NaN is out of range",
        ),
        (
            &["--write-timeout", "1e9"],
            "--write-timeout 1000000000 is out of range",
        ),
        (
            &["--briefing", "missing.md"],
            "cannot read briefing missing.md",
        ),
        (
            &["--addr", "not-an-address"],
            "cannot listen on not-an-address",
        ),
        (
            &["--addr", "0.0.0.0:0"],
            "refusing to listen on 0.0.0.0:0 without a token",
        ),
        (
            &["--addr", "0.0.0.0:0", "--token", "abc"],
            "the token has 3 characters; on an address other machines can reach (0.0.0.0:0) it must have at least 16",
        ),
        (&["--token", ""], "the token is empty"),
        (&["--token", "has space"], "printable ASCII without spaces"),
        (
            &["--allowed-host", "http://x.example"],
            "--allowed-host \"http://x.example\" is not a host name",
        ),
        (
            &["--source", "missing-dir"],
            "--source missing-dir cannot be used",
        ),
        (
            &["--max-briefing-chars", "0"],
            "--max-briefing-chars must be 1 or more",
        ),
        (
            &["--max-upload-bytes", "0"],
            "--max-upload-bytes must be 1 or more",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["serve"];
        if extra[0] != "--store" {
            args.extend(["--store", "store"]);
        }
        args.extend_from_slice(extra);
        let o = rlm(dir.path(), &args, &env);
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(expected), "{args:?}: {}", stderr(&o));
    }

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
