//! The `rlm` binary against hostile input: endless files, bytes that are not
//! UTF-8, a full disk, absurd numbers, file names that carry terminal escapes,
//! a damaged index and a writer killed mid-run. Every run is bounded in time
//! (`common::output_within`), so a regression fails instead of hanging.
//!
//! Also part of this suite, kept with the store's other CLI tests:
//! `corpus_cli::killed_index_runs_leave_a_usable_store` (SIGKILL at the two
//! pauses around the commits) and `corpus_cli::second_writer_is_refused_with_the_lock_holders_pid`.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use rlm_llm::testing::{Matcher, Script, ScriptedServer};

use crate::common;
use common::{stderr, stdout};

/// Generous for a debug build on a loaded 2-core machine; the real runs take
/// well under a second.
const LIMIT: Duration = Duration::from_secs(60);

/// `rlm args…` in `dir`, stdin `input`, bounded by [`LIMIT`].
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)], input: &[u8]) -> Output {
    common::output_within(common::command(dir, args, env), input, LIMIT)
}

/// Exit code 1 and exactly one line on stderr, `error: ` followed by `expected`.
fn assert_one_line_error(o: &Output, expected: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err, format!("error: {expected}\n"));
}

/// `rlm args…` in `dir` (no input) succeeds; its output.
fn succeeds(dir: &Path, args: &[&str]) -> Output {
    let o = run(dir, args, &[], b"");
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

/// `rlm args…` in `dir` fails with the one-line error `expected`.
fn refused(dir: &Path, args: &[&str], expected: &str) {
    assert_one_line_error(&run(dir, args, &[], b""), expected);
}

fn docs() -> tempfile::TempDir {
    common::indexed_docs(&[
        ("a.txt", "The termination notice period is ninety days.\n"),
        ("b.txt", "Parking is free for tenants.\n"),
    ])
}

// 1. Every file a user names is read with a bound.

#[test]
fn briefing_and_config_files_past_their_limit_are_refused() {
    let d = docs();
    let dir = d.path();
    let cases: &[(&[&str], &str)] = &[
        (
            &["ask", "q?", "--store", "store", "--briefing", "/dev/zero"],
            "briefing /dev/zero is larger than the limit of 1 MiB",
        ),
        (
            &[
                "serve",
                "--store",
                "store",
                "--addr",
                "127.0.0.1:0",
                "--briefing",
                "/dev/zero",
            ],
            "briefing /dev/zero is larger than the limit of 1 MiB",
        ),
        // rlm-engine's [engine] reader.
        (
            &["ask", "q?", "--store", "store", "--config", "/dev/zero"],
            "config file /dev/zero is larger than the limit of 1 MiB",
        ),
        // rlm-llm's [llm] reader.
        (
            &["llm", "check", "--config", "/dev/zero"],
            "invalid configuration: config file /dev/zero is larger than the limit of 1 MiB",
        ),
        // rlm-corpus's [embeddings] reader.
        (
            &[
                "index",
                "docs",
                "--store",
                "store",
                "--embeddings",
                "local",
                "--config",
                "/dev/zero",
            ],
            "embeddings configuration: config file /dev/zero is larger than the limit of 1 MiB",
        ),
    ];
    for (args, expected) in cases {
        let started = Instant::now();
        refused(dir, args, expected);
        eprintln!("{args:?}: {:?}", started.elapsed());
    }
    // Under the limit, a briefing that is not text is named too.
    std::fs::write(dir.join("bin.md"), b"rules\xff").unwrap();
    refused(
        dir,
        &["ask", "q?", "--store", "store", "--briefing", "bin.md"],
        "briefing bin.md is not UTF-8 text (invalid byte at offset 5)",
    );
}

#[test]
fn cassettes_and_traces_are_streamed_with_a_cap_per_line() {
    let d = docs();
    let dir = d.path();
    refused(
        dir,
        &["ask", "q?", "--store", "store", "--replay", "/dev/zero"],
        "cassette /dev/zero: line 1 is longer than the limit of 256 MiB",
    );
    refused(
        dir,
        &["trace", "show", "/dev/zero"],
        "trace /dev/zero: line 1 is longer than the limit of 256 MiB",
    );
    // Not UTF-8 on a later line: named by its number.
    std::fs::write(dir.join("t.jsonl"), b"\n\n\xff\n").unwrap();
    refused(
        dir,
        &["trace", "show", "t.jsonl"],
        "trace t.jsonl: line 3 is not UTF-8 text",
    );
}

#[test]
fn a_fifo_fed_forever_ends_at_the_limit() {
    let d = docs();
    let dir = d.path();
    let fifo = dir.join("briefing.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    // The writer ends when rlm closes its end (EPIPE); it is not joined, so
    // a regression that never opens the FIFO cannot hang the test.
    let path = fifo.clone();
    std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        let block = vec![b'a'; 64 * 1024];
        while f.write_all(&block).is_ok() {}
    });
    let args = [
        "ask",
        "q?",
        "--store",
        "store",
        "--briefing",
        "briefing.fifo",
    ];
    refused(
        dir,
        &args,
        "briefing briefing.fifo is larger than the limit of 1 MiB",
    );
}

// 2. `rlm repl --jsonl` survives a line that is not UTF-8.

#[test]
fn repl_jsonl_answers_a_non_utf8_line_and_goes_on() {
    let d = docs();
    let mut input = b"{\"code\": \"x = 41\"}\n".to_vec();
    input.extend_from_slice(b"{\"code\": \"print('\xff')\"}\n");
    input.extend_from_slice(b"{\"code\": \"print(x + 1)\"}\n");
    let o = run(
        d.path(),
        &["repl", "--store", "store", "--jsonl"],
        &[],
        &input,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let replies: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!(replies[0]["error"], serde_json::Value::Null, "{replies:?}");
    assert_eq!(replies[1]["error"]["type"], "InputError");
    let message = replies[1]["error"]["message"].as_str().unwrap();
    assert!(message.contains("not UTF-8"), "{message}");
    // The same interpreter: x is still defined.
    assert_eq!(replies[2]["error"], serde_json::Value::Null, "{replies:?}");
    assert_eq!(replies[2]["stdout"], "42\n");
}

#[test]
fn repl_jsonl_final_var_with_a_huge_name_is_one_short_error() {
    let d = docs();
    let input = b"{\"code\": \"FINAL_VAR('x' * 5000000)\"}\n{\"code\": \"print(1)\"}\n";
    let o = run(
        d.path(),
        &["repl", "--store", "store", "--jsonl"],
        &[],
        input,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{}", &out[..out.len().min(500)]);
    // Before, the name came back three times: a 15 MB line.
    assert!(lines[0].len() < 20_000, "a {}-byte reply", lines[0].len());
    let reply: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(reply["error"]["type"], "ValueError", "{reply}");
    assert!(reply.get("final").is_none(), "{reply}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(lines[1]).unwrap()["stdout"],
        "1\n"
    );
}

// 3. A trace that cannot be written fails the command.

#[test]
fn ask_with_an_unwritable_trace_prints_the_answer_and_fails() {
    let d = docs();
    let server = ScriptedServer::spawn(Script::new().on(
        Matcher::system_contains("You are answering a question about a collection"),
        "FINAL(Ninety days.)",
    ));
    let url = server.base_url();
    let env = common::model_env(&url);
    let args = [
        "ask",
        "Notice period?",
        "--store",
        "store",
        "--trace",
        "/dev/full",
        "-q",
    ];
    let o = run(d.path(), &args, &env, b"");
    // The answer is printed (its sources follow it).
    assert!(stdout(&o).starts_with("Ninety days.\n"), "{}", stdout(&o));
    assert_one_line_error(
        &o,
        "the trace could not be written to /dev/full: No space left on device (os error 28) (it is incomplete)",
    );
}

// 4. Absurd numbers are one-line errors, not panics.

#[test]
fn out_of_range_numbers_are_one_line_errors() {
    let d = docs();
    let max = u64::MAX.to_string();
    let cases: &[(&[&str], String)] = &[
        (
            &["repl", "--store", "store", "--cell-timeout", &max],
            format!("--cell-timeout=\"{max}\" is not a whole number from 1 to 3600"),
        ),
        (
            &["repl", "--store", "store", "--cell-timeout", "0"],
            "--cell-timeout=\"0\" is not a whole number from 1 to 3600".into(),
        ),
        (
            &["repl", "--store", "store", "--memory-mib", &max],
            format!("--memory-mib=\"{max}\" is not a whole number from 0 to 65536"),
        ),
        (
            &["repl", "--store", "store", "--truncate", &max],
            format!("--truncate=\"{max}\" is not a whole number from 100 to 100000000"),
        ),
        (
            &["search", "notice", "--store", "store", "-k", &max],
            format!("-k=\"{max}\" is not a whole number from 1 to 10000"),
        ),
        (
            &["search", "notice", "--store", "store", "-k", "0"],
            "-k=\"0\" is not a whole number from 1 to 10000".into(),
        ),
    ];
    for (args, expected) in cases {
        refused(d.path(), args, expected);
    }
    // The ceilings themselves work.
    let o = succeeds(
        d.path(),
        &["search", "notice", "--store", "store", "-k", "10000"],
    );
    assert!(stdout(&o).contains("docs/a.txt"), "{}", stdout(&o));
}

// 5. Names and text that carry escapes cannot act on the terminal.

#[test]
fn file_names_with_escapes_and_newlines_stay_in_their_row() {
    let evil = "evil\u{1b}[31m\nforged.txt";
    let d = common::indexed_docs(&[(evil, "A termination clause.\n")]);
    let dir = d.path();
    let escaped = "docs/evil\\u{1b}[31m\\nforged.txt";
    let checks: &[&[&str]] = &[
        &["docs", "--store", "store"],
        &["search", "termination", "--store", "store"],
        &["show", &format!("docs/{evil}"), "--store", "store"],
    ];
    for args in checks {
        let out = stdout(&succeeds(dir, args));
        assert!(!out.contains('\u{1b}'), "{args:?}: raw escape in {out:?}");
        assert!(out.contains(escaped), "{args:?}: {out}");
        assert!(
            !out.lines().any(|l| l.starts_with("forged")),
            "{args:?}: forged row in {out:?}"
        );
    }
    let o = succeeds(dir, &["docs", "--store", "store"]);
    // Header, one row, the count, the languages.
    assert_eq!(stdout(&o).lines().count(), 4, "{}", stdout(&o));
    // --json keeps the name exactly (JSON escapes it).
    let o = succeeds(dir, &["docs", "--store", "store", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["path"], format!("docs/{evil}"));
}

#[test]
fn trace_show_escapes_what_the_trace_file_says() {
    use rlm_engine::{Trace, TraceEvent};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil.jsonl");
    let t = Trace::to_file(&path).unwrap();
    t.emit(TraceEvent::RunStarted {
        run_id: "r\u{1b}]0;owned\u{7}".into(),
        question: "why?\u{1b}[2J".into(),
        flow: "repl\n00.00s forged".into(),
        root_model: "m".into(),
        sub_model: "m".into(),
        documents: 1,
        context_chars: 1,
        budget: serde_json::json!({}),
    });
    t.emit(TraceEvent::Finding {
        agent: "0".into(),
        text: "fact\u{9b}31m".into(),
        source: Some("src\r".into()),
    });
    drop(t);
    let out = stdout(&succeeds(dir.path(), &["trace", "show", "evil.jsonl"]));
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    assert_eq!(out.lines().count(), 3, "{out}");
    for part in [
        "r\\u{1b}]0;owned\\u{7}",
        "why?\\u{1b}[2J",
        "repl\\n00.00s forged",
        "fact\\u{9b}31m",
        "(src\\r)",
    ] {
        assert!(out.contains(part), "{part} in {out}");
    }
}

#[test]
fn interactive_repl_output_on_a_terminal_shows_escapes() {
    // `script` gives rlm a pseudo-terminal as stdout.
    let d = docs();
    let rlm = env!("CARGO_BIN_EXE_rlm");
    let shell = format!(
        "printf 'print(\"a\" + chr(27) + \"[31mb\" + chr(7))\\n' | {rlm} repl --store store 2>/dev/null"
    );
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &shell, "/dev/null"])
        .current_dir(d.path());
    for var in common::CLEARED {
        cmd.env_remove(var);
    }
    let o = common::output_within(cmd, b"", LIMIT);
    if !o.status.success() && stdout(&o).is_empty() {
        eprintln!(
            "skipped: `script` cannot allocate a terminal here: {}",
            stderr(&o)
        );
        return;
    }
    let out = stdout(&o);
    assert!(out.contains("a\\u{1b}[31mb\\u{7}"), "{out:?}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
    // Without a terminal the exact text passes (pipes and files).
    let o = run(
        d.path(),
        &["repl", "--store", "store"],
        &[],
        b"print(\"a\" + chr(27))\n",
    );
    assert_eq!(stdout(&o), "a\u{1b}\n");
}

// 6. A damaged full-text index is recreated from the store's text.

#[test]
fn a_corrupted_fulltext_index_is_recovered_by_index_rebuild() {
    let d = docs();
    let dir = d.path();
    for entry in std::fs::read_dir(dir.join("store/fulltext")).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        match name.as_str() {
            "meta.json" => std::fs::write(&p, b"{\"segments\": [tru").unwrap(),
            n if !n.starts_with('.') => std::fs::write(&p, b"\0\0\0\0").unwrap(),
            _ => {}
        }
    }
    let o = run(
        dir,
        &["search", "termination", "--store", "store"],
        &[],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("rlm index --rebuild"), "{}", stderr(&o));
    succeeds(dir, &["index", "docs", "--store", "store", "--rebuild"]);
    let o = succeeds(
        dir,
        &["search", "termination", "--store", "store", "--json"],
    );
    let hits: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(hits[0]["path"], "docs/a.txt");
    assert!(hits[0]["text"].as_str().unwrap().contains("ninety days"));
}

// 7. kill -9 in the middle of an indexing run (no test pause: wherever it lands).

#[test]
fn index_killed_mid_write_loses_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    const FILES: usize = 600;
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    for i in 0..FILES {
        let text: Vec<&str> = (0..400)
            .map(|j| words[(i * 7 + j * 3) % words.len()])
            .collect();
        std::fs::write(docs.join(format!("f{i:04}.txt")), text.join(" ") + "\n").unwrap();
    }
    let index = ["index", "docs", "--store", "store"];
    succeeds(dir.path(), &index);
    // Documents whose text holds `word`.
    let count_hits = |word: &str| -> usize {
        let k = (FILES * 4).to_string();
        let search = ["search", word, "--store", "store", "-k", &k, "--json"];
        let o = succeeds(dir.path(), &search);
        let hits: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut docs: Vec<&str> = hits
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].as_str().unwrap())
            .collect();
        docs.sort();
        docs.dedup();
        docs.len()
    };
    for (round, delay_ms) in [30u64, 150, 300, 500, 800].into_iter().enumerate() {
        let word = format!("round{round}");
        for i in 0..FILES {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(docs.join(format!("f{i:04}.txt")))
                .unwrap();
            writeln!(f, "{word}").unwrap();
        }
        let mut child = common::command(dir.path(), &index, &[]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL; it may have finished already.
        child.wait().unwrap();
        // One run is one commit: every changed document, or none.
        let seen = count_hits(&word);
        assert!(
            seen == 0 || seen == FILES,
            "round {round} ({delay_ms} ms): {seen} of {FILES}"
        );
        let o = succeeds(dir.path(), &["docs", "--store", "store", "--json"]);
        let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), FILES, "round {round}");
        // The next run works and brings the store up to date.
        succeeds(dir.path(), &index);
        assert_eq!(count_hits(&word), FILES, "round {round}");
    }
}
