//! `rlm ask` and `rlm trace`, running the real binary against the scripted
//! model server (real HTTP) over a real store, with the binary's own sandbox
//! worker subcommand.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer, TEST_API_KEY};

use crate::common;
use common::{stderr, stdout};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A store with three documents; the second holds the needle.
    fn new() -> Self {
        let dir = common::indexed_docs(&[
            ("a_intro.txt", "This memo describes the office move.\n"),
            (
                "b_notes.txt",
                "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
            ),
            ("c_misc.txt", "Lunch options and parking spaces.\n"),
        ]);
        Fixture { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        common::command(self.dir.path(), args, env)
    }

    fn rlm(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().expect("rlm runs")
    }
}

fn model_env(server: &ScriptedServer) -> Vec<(&'static str, String)> {
    vec![
        ("RLM_PROVIDER", "openai".to_string()),
        ("RLM_BASE_URL", server.base_url()),
        ("RLM_API_KEY", TEST_API_KEY.to_string()),
        ("RLM_PRIMARY_MODEL", "root-model".to_string()),
        ("RLM_SUB_MODEL", "sub-model".to_string()),
    ]
}

fn ask(f: &Fixture, server: &ScriptedServer, args: &[&str]) -> Output {
    let env = model_env(server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut all = vec!["ask"];
    all.extend_from_slice(args);
    f.rlm(&all, &env)
}

fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

fn needle_script() -> Script {
    Script::new().on_sequence(
        root(),
        [
            "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```"
                .to_string(),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])".to_string(),
        ],
    )
}

#[test]
fn ask_json_trace_show_and_export() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(needle_script());
    let o = ask(
        &f,
        &server,
        &[
            "What is the secret code?",
            "--store",
            "store",
            "--json",
            "--trace",
            "run.jsonl",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["answer"].as_str().unwrap().contains("4721"));
    assert_eq!(v["partial"], false);
    assert_eq!(v["citations"][0]["status"], "verified");
    assert_eq!(v["verification"]["all_valid"], true);
    assert_eq!(v["usage"]["calls"], 2);
    assert!(v["usage"]["by_depth"].is_array());
    assert!(v["usage"]["wall_ms"].is_u64());
    assert_eq!(v["trace"]["path"], "run.jsonl");
    // Progress went to stderr, not stdout.
    assert!(stderr(&o).contains("cell ran"), "{}", stderr(&o));

    let show = f.rlm(&["trace", "show", "run.jsonl"], &[]);
    assert!(show.status.success(), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(
        text.contains("question: What is the secret code?"),
        "{text}"
    );
    assert!(text.contains("FINAL via prose"), "{text}");
    assert!(text.contains("verification: 1 citations"), "{text}");

    let show = f.rlm(&["trace", "show", "run.jsonl", "--json"], &[]);
    assert!(show.status.success(), "{}", stderr(&show));
    let tree: serde_json::Value = serde_json::from_str(&stdout(&show)).unwrap();
    assert_eq!(tree["run"][0]["type"], "run_started");
    assert_eq!(
        tree["run"].as_array().unwrap().last().unwrap()["type"],
        "run_finished"
    );
    let root = &tree["agents"][0];
    assert_eq!(root["agent"], "0");
    assert_eq!(root["depth"], 0);
    let types: Vec<&str> = root["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(
        types.iter().filter(|t| **t == "llm_response").count(),
        2,
        "{types:?}"
    );
    assert!(
        types.contains(&"cell_output") && types.contains(&"final"),
        "{types:?}"
    );

    let exp = f.rlm(
        &[
            "trace",
            "export",
            "run.jsonl",
            "--format",
            "rlm-logger",
            "-o",
            "rlm.jsonl",
        ],
        &[],
    );
    assert!(exp.status.success(), "{}", stderr(&exp));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(f.path("rlm.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "metadata");
    assert_eq!(lines[0]["root_model"], "root-model");
    assert_eq!(lines[1]["type"], "iteration");
    assert!(
        lines[1]["code_blocks"][0]["result"]["stdout"]
            .as_str()
            .unwrap()
            .contains("4721")
    );
    assert_eq!(
        lines.last().unwrap()["final_answer"]
            .as_str()
            .map(|s| s.contains("4721")),
        Some(true)
    );

    // The API key never reaches the trace.
    let trace = std::fs::read_to_string(f.path("run.jsonl")).unwrap();
    assert!(!trace.contains(TEST_API_KEY));
}

#[test]
fn plain_text_output_lists_citations() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(Script::new().on(
        root(),
        "FINAL(Code 4721 [[doc:1 \"The secret code is 4721\"]] and [[doc:2 \"parking is free for everyone\"]])",
    ));
    let o = ask(
        &f,
        &server,
        &["q?", "--store", "store", "--citations", "strict"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("[unverified: quote not found in document 2"),
        "{out}"
    );
    assert!(
        out.contains("Citations: 2 (1 quote verified, 1 not verified)"),
        "{out}"
    );
    assert!(out.contains("[QUOTE NOT FOUND]"), "{out}");
}

#[test]
fn session_carries_history_between_questions() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(Script::new().on(
        root(),
        "```repl\nadd_finding('code is 4721', '[[doc:1]]')\nFINAL('first done')\n```",
    ));
    let o = ask(
        &f,
        &server,
        &["first question?", "--store", "store", "--session", "case-1"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ask(
        &f,
        &server,
        &[
            "second question?",
            "--store",
            "store",
            "--session",
            "case-1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(f.path("store/sessions.sqlite").is_file());
    let reqs = server.requests();
    let second = reqs.last().unwrap();
    let first_user = second.first_user();
    assert!(first_user.contains("first question?"), "{first_user}");
    assert!(first_user.contains("first done"), "{first_user}");
    assert!(first_user.contains("code is 4721"), "{first_user}");
    // A different session starts empty.
    let o = ask(
        &f,
        &server,
        &["third?", "--store", "store", "--session", "other"],
    );
    assert!(o.status.success());
    assert!(
        !server
            .requests()
            .last()
            .unwrap()
            .first_user()
            .contains("first question?")
    );
}

#[test]
fn briefing_goes_into_the_system_prompt() {
    let f = Fixture::new();
    std::fs::write(
        f.path("PROMPT.md"),
        "Answer in German. You assist ACME's legal team.",
    )
    .unwrap();
    let server = ScriptedServer::spawn(Script::new().on(root(), "FINAL(ok)"));
    let o = ask(
        &f,
        &server,
        &["q?", "--store", "store", "--briefing", "PROMPT.md"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        server.requests()[0]
            .system()
            .contains("You assist ACME's legal team.")
    );
}

#[test]
fn budget_exhaustion_is_a_partial_answer_not_an_error() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(
        Script::new()
            .on(
                Matcher::last_contains("stopped before it finished"),
                "Best effort: code 4721.",
            )
            .on(root(), "```repl\nprint('looking')\n```"),
    );
    let o = ask(
        &f,
        &server,
        &["q?", "--store", "store", "--max-llm-calls", "2", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["partial"], true);
    assert_eq!(v["answer"], "Best effort: code 4721.");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap()
            .contains("LLM call budget"),
        "{v}"
    );
}

#[test]
fn ctrl_c_keeps_a_partial_trace() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(Script::new().on_sequence(
        root(),
        [
            Reply::text("```repl\nadd_finding('seen doc 1')\n```"),
            Reply::text("FINAL(too late)").with_latency_ms(20_000),
        ],
    ));
    let env = model_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let child = f
        .command(
            &["ask", "q?", "--store", "store", "--trace", "cancel.jsonl"],
            &env,
        )
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    // Wait until the second (slow) model request is in flight.
    while server.request_count() < 2 && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stdout(&o).contains("seen doc 1"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("partial answer: cancelled"),
        "{}",
        stderr(&o)
    );
    let trace = std::fs::read_to_string(f.path("cancel.jsonl")).unwrap();
    assert!(trace.lines().last().unwrap().contains("\"run_finished\""));
    assert!(trace.contains("\"cancelled\""));
}

#[test]
fn bad_input_gives_one_line_errors() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(Script::new().on(root(), "FINAL(ok)"));
    let cases: &[(&[&str], &str)] = &[
        (&["q?", "--store", "nowhere"], "nowhere"),
        (&["  ", "--store", "store"], "question is empty"),
        (
            &["q?", "--store", "store", "--context-shape", "tree"],
            "string or list",
        ),
        (
            &["q?", "--store", "store", "--citations", "lenient"],
            "strict or best_effort",
        ),
        (
            &["q?", "--store", "store", "--verify", "maybe"],
            "--verify: \"maybe\" is not a verification mode",
        ),
        (
            &["q?", "--store", "store", "--flow", "magic"],
            "use repl, pipeline, rag or auto",
        ),
        (
            &["q?", "--store", "store", "--session", "bad name"],
            "invalid session name",
        ),
        (
            &["q?", "--store", "store", "--briefing", "missing.md"],
            "cannot read briefing",
        ),
        (
            &["q?", "--store", "store", "--max-cost-usd", "0"],
            "--max-cost-usd=\"0\" is not a number more than 0",
        ),
        (
            &["q?", "--store", "store", "--turn-format", "yaml"],
            "use auto, structured or text",
        ),
        (
            &["q?", "--store", "store", "--schema", "missing.json"],
            "cannot read schema",
        ),
        (
            &["q?", "--store", "store", "--schema", "not_json.json"],
            "not JSON",
        ),
        (
            &["q?", "--store", "store", "--schema", "unsupported.json"],
            "unsupported JSON Schema keyword 'patternProperties'",
        ),
    ];
    std::fs::write(f.path("not_json.json"), "{type: object").unwrap();
    std::fs::write(
        f.path("unsupported.json"),
        r#"{"type": "object", "patternProperties": {}}"#,
    )
    .unwrap();
    for (args, needle) in cases {
        let o = ask(&f, &server, args);
        assert!(!o.status.success(), "{args:?} should fail");
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: not one line: {err}"
        );
        assert!(!err.contains("panicked"));
    }
    // A bad budget variable names itself.
    let env = model_env(&server);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("RLM_MAX_LLM_CALLS", "lots"));
    let o = f.rlm(&["ask", "q?", "--store", "store"], &env);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("RLM_MAX_LLM_CALLS"), "{}", stderr(&o));
    // No model configured at all.
    let o = f.rlm(&["ask", "q?", "--store", "store"], &[]);
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

/// `--schema FILE`: the answer as JSON that follows the schema on stdout
/// (the prose on stderr), and under `--json` as `data` with each value's
/// citations.
#[test]
fn ask_with_a_schema_prints_the_typed_answer() {
    let f = Fixture::new();
    std::fs::write(
        f.path("code.json"),
        r#"{"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"], "additionalProperties": false}"#,
    )
    .unwrap();
    let typed = || Matcher::any_contains("Put the answer below into one JSON document");
    let script = |s: Script| {
        s.on(typed(), r#"{"code": "4721"}"#)
            .on(common::judge(), judge_reply(&[Verdict::Entailed]))
            .on(
                root(),
                "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
            )
    };
    let server = ScriptedServer::spawn(script(Script::new()));
    let o = ask(
        &f,
        &server,
        &[
            "What is the code?",
            "--store",
            "store",
            "--schema",
            "code.json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let value: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(value, serde_json::json!({"code": "4721"}));
    assert!(
        stderr(&o).contains("The secret code is 4721"),
        "{}",
        stderr(&o)
    );
    let server = ScriptedServer::spawn(script(Script::new()));
    let o = ask(
        &f,
        &server,
        &[
            "What is the code?",
            "--store",
            "store",
            "--schema",
            "code.json",
            "--json",
        ],
    );
    let answer: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(answer["data"]["value"]["code"], "4721");
    assert_eq!(answer["data"]["citations"][0]["path"], "$.code");
    // No reply in the schema's shape: an error that says why, with the prose.
    let server = ScriptedServer::spawn(
        Script::new()
            .on_sequence(typed(), ["4721", "still not JSON"])
            .on(root(), "FINAL(The secret code is 4721.)"),
    );
    let o = ask(
        &f,
        &server,
        &[
            "What is the code?",
            "--store",
            "store",
            "--schema",
            "code.json",
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("no answer in the --schema shape") && err.contains("The secret code is 4721."),
        "{err}"
    );
}

#[test]
fn trace_commands_reject_bad_files() {
    let f = Fixture::new();
    std::fs::write(f.path("not-a-trace.jsonl"), "{\"x\": 1}\n").unwrap();
    let o = f.rlm(&["trace", "show", "not-a-trace.jsonl"], &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not an rlm trace event"),
        "{}",
        stderr(&o)
    );
    let o = f.rlm(&["trace", "show", "missing.jsonl"], &[]);
    assert!(stderr(&o).contains("cannot open trace"), "{}", stderr(&o));
    std::fs::write(f.path("empty.jsonl"), "").unwrap();
    let o = f.rlm(&["trace", "show", "empty.jsonl"], &[]);
    assert!(stderr(&o).contains("holds no events"), "{}", stderr(&o));
    let o = f.rlm(&["trace", "export", "empty.jsonl", "--format", "html"], &[]);
    assert!(
        stderr(&o).contains("available format is rlm-logger"),
        "{}",
        stderr(&o)
    );
}

/// A streamed run is recorded and replays offline; the replayed replies
/// stream into the trace (one piece per reply), `--stream` prints the root's
/// text as it comes, and `trace show` folds the pieces into the reply line.
#[test]
fn ask_replays_a_recording_and_streams_the_replies() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(needle_script());
    let o = ask(
        &f,
        &server,
        &[
            "What is the secret code?",
            "--store",
            "store",
            "--record",
            "run.cassette",
            "--trace",
            "live.jsonl",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The scripted OpenAI-compatible server streams: pieces in the trace.
    let live = std::fs::read_to_string(f.path("live.jsonl")).unwrap();
    assert!(live.contains("\"llm_delta\""), "{live}");
    drop(server);

    let o = f.rlm(
        &[
            "ask",
            "What is the secret code?",
            "--store",
            "store",
            "--replay",
            "run.cassette",
            "--trace",
            "replay.jsonl",
            "--stream",
            "--json",
        ],
        &[
            ("RLM_PRIMARY_MODEL", "root-model"),
            ("RLM_SUB_MODEL", "sub-model"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["answer"].as_str().unwrap().contains("4721"), "{v}");
    // --stream: the root's code reached stderr before the reply was done.
    let err = stderr(&o);
    let code_at = err.find("re.findall").expect(&err);
    assert!(code_at < err.find("model replied").expect(&err), "{err}");

    let records = rlm_engine::trace::read_trace(&f.path("replay.jsonl")).unwrap();
    let mut streamed = String::new();
    let mut replies = String::new();
    for r in &records {
        match &r.event {
            rlm_engine::TraceEvent::LlmDelta {
                agent,
                attempt,
                text,
                ..
            } => {
                assert_eq!((agent.as_str(), *attempt), ("0", 1));
                streamed.push_str(text);
            }
            rlm_engine::TraceEvent::LlmResponse { text, .. } => {
                // Every piece of a reply comes before the reply itself.
                assert_eq!(streamed.len(), replies.len() + text.len());
                replies.push_str(text);
            }
            _ => {}
        }
    }
    assert!(
        replies.contains("FINAL(The secret code is 4721"),
        "{replies}"
    );
    assert_eq!(streamed, replies);

    let show = f.rlm(&["trace", "show", "replay.jsonl"], &[]);
    assert!(show.status.success(), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(text.contains("first text after"), "{text}");
    assert!(!text.contains("llm_delta"), "{text}");
}

#[test]
fn plain_text_output_numbers_the_sources_and_names_unsupported_claims() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(
        Script::new()
            .on(
                root(),
                "FINAL(The code is 4721. The office move happened in 1999 [[doc:0 \"This memo describes the office move\"]]. The vault opens at midnight on Sundays.)",
            )
            .on(common::judge(), judge_reply(&[Verdict::Entailed, Verdict::NotEntailed])),
    );
    let o = ask(&f, &server, &["q?", "--store", "store"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(
            "Sources:\n  [1] docs/b_notes.txt, line 2: \"The secret code is 4721.\" (attached by the engine)"
        ),
        "{out}"
    );
    // A verbatim quote that does not state its claim: related, not a source.
    assert!(
        out.contains("Related passages (found, but not judged to state their claim; not sources):\n  [2] docs/a_intro.txt, chunk "),
        "{out}"
    );
    // Each claim: entailment, and the quote check apart.
    for line in [
        "  - entailed by its passage [1]; quote verified (attached by the engine): The code is 4721.",
        "  - related: its passage does not state it [2]; quote verified: The office move happened in 1999",
        "  - no passage found; no quote: The vault opens at midnight on Sundays.",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
    assert!(
        out.contains(
            "Not supported by any passage found:\n  - The vault opens at midnight on Sundays."
        ),
        "{out}"
    );
    assert!(
        out.contains("Grounded: 1 of 3 claims supported (1 by a citation the engine attached); 1 related, 0 contradicted, 0 unverified, 1 without a passage"),
        "{out}"
    );
    // The claim without a passage got no verdict (the judge said nothing of it).
    assert!(
        out.contains("Entailment check: 2 claims judged (1 entailed, 1 not entailed, 0 contradicted, 0 not claims), 0 from the cache; 1 calls"),
        "{out}"
    );

    // --json: the same, each claim's support and quote check apart.
    let o = ask(&f, &server, &["q?", "--store", "store", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let claims = v["claims"].as_array().unwrap();
    let pairs: Vec<(&str, &str)> = claims
        .iter()
        .map(|c| {
            (
                c["support"].as_str().unwrap(),
                c["quote_check"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("supported", "engine"),
            ("related", "verified"),
            ("unsupported", "none")
        ]
    );
    assert_eq!(v["sources"].as_array().unwrap().len(), 1);
    assert_eq!(
        v["related_sources"][0]["quote"],
        "This memo describes the office move"
    );
    // Each `rlm ask` is a process of its own: the judge was asked again.
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|r| common::is_judge(r))
            .count(),
        2
    );
}

/// A judge that gives no usable verdict leaves claims unverified: the text
/// output lists no source.
#[test]
fn without_a_verdict_the_text_output_lists_no_source() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(
        Script::new()
            .on(root(), "FINAL(The code is 4721.)")
            .on(common::judge(), "It all looks right to me."),
    );
    let o = ask(&f, &server, &["q?", "--store", "store"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("Sources:"), "{out}");
    assert!(out.contains("Related passages"), "{out}");
    assert!(
        out.contains("  - unverified: no verdict on its passage [1]; quote verified (attached by the engine): The code is 4721."),
        "{out}"
    );
}

#[test]
fn ask_with_paths_indexes_them_first_then_answers() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("folder");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("notes.txt"), "The secret code is 4721.\n").unwrap();
    let server = ScriptedServer::spawn(Script::new().on(root(), "FINAL(The secret code is 4721.)"));
    let env = model_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = [
        "ask",
        "What is the code?",
        "folder",
        "--store",
        "fresh-store",
    ];
    let o = common::rlm(dir.path(), &args, &env);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("The secret code is 4721."),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("indexed into fresh-store: 1 added, 0 updated, 0 unchanged"),
        "{}",
        stderr(&o)
    );
    // Again: nothing changed, nothing re-indexed.
    let o = common::rlm(dir.path(), &args, &env);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("0 added, 0 updated, 1 unchanged"),
        "{}",
        stderr(&o)
    );
    // A path that does not exist is a one-line error.
    let o = common::rlm(
        dir.path(),
        &["ask", "q?", "nowhere", "--store", "fresh-store"],
        &env,
    );
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

/// Asks the needle question over `store` three times with reproducible
/// calls (temperature 0): the second run is served from the store's reply
/// cache, the third (`--no-cache`) makes its calls again.
fn asked_again_from_the_cache(f: &Fixture, store: &str) {
    let server = ScriptedServer::spawn(
        Script::new()
            .on_sequence(
                root(),
                [
                    "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```"
                        .to_string(),
                    "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])"
                        .to_string(),
                ]
                .iter()
                .cycle()
                .take(4)
                .cloned(),
            )
            .on(common::judge(), judge_reply(&[Verdict::Entailed])),
    );
    let mut env = model_env(&server);
    env.push(("RLM_ROOT_TEMPERATURE", "0".into()));
    env.push(("RLM_SUB_TEMPERATURE", "0".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let question = [
        "ask",
        "What is the secret code?",
        "--store",
        store,
        "--json",
    ];
    let first = f.rlm(&question, &env);
    assert!(first.status.success(), "{}", stderr(&first));
    let made = server.request_count();
    assert!(made >= 2, "{made}");

    let second = f.rlm(&question, &env);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(server.request_count(), made, "no model call repeated");
    let json: serde_json::Value = serde_json::from_str(&stdout(&second)).unwrap();
    let first_json: serde_json::Value = serde_json::from_str(&stdout(&first)).unwrap();
    assert_eq!(json["answer"], first_json["answer"]);
    assert_eq!(json["usage"]["calls"], 0);
    assert_eq!(json["usage"]["cached_calls"], made);

    let plain = f.rlm(&question[..4], &env);
    assert!(
        stderr(&plain).contains(&format!("{made} calls served from the store's reply cache")),
        "{}",
        stderr(&plain)
    );
    assert_eq!(server.request_count(), made);

    let mut fresh = question.to_vec();
    fresh.push("--no-cache");
    let third = f.rlm(&fresh, &env);
    assert!(third.status.success(), "{}", stderr(&third));
    assert_eq!(
        server.request_count(),
        2 * made,
        "--no-cache asks the model"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&third)).unwrap();
    assert_eq!(json["usage"]["cached_calls"], 0);
}

#[test]
fn a_question_asked_again_is_answered_from_the_reply_cache() {
    let f = Fixture::new();
    asked_again_from_the_cache(&f, "store");
    assert!(f.path("store/replies.sqlite").exists());
}

#[test]
fn processes_on_one_postgres_store_share_its_reply_cache() {
    let Some(db) = rlm_store_pg::testing::test_database() else {
        return;
    };
    let f = Fixture::new();
    let out = f.rlm(&["index", "docs", "--store", db.url()], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    asked_again_from_the_cache(&f, db.url());
}
