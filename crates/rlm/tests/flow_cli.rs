//! `rlm ask --flow pipeline|rag|auto`, `--inspector` and the `RLM_ENABLED`
//! switch, running the real binary against the scripted model server (real
//! HTTP) over a real store.

use std::process::Output;

use rlm_llm::testing::{Reply, Script, ScriptedServer, TEST_API_KEY};

use crate::common;
use common::{stderr, stdout};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = common::indexed_docs(&[
            (
                "alexis.txt",
                "Alexis Torres, resume.\n\nSkills: Python, Rust and SQL.\n\nHobbies: chess.\n",
            ),
            ("memo.txt", "The office moves in March.\n"),
        ]);
        Fixture { dir }
    }

    fn rlm(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        common::rlm(self.dir.path(), args, env)
    }

    fn ask(&self, server: &ScriptedServer, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        let base = server.base_url();
        let mut env = vec![
            ("RLM_PROVIDER", "openai"),
            ("RLM_BASE_URL", base.as_str()),
            ("RLM_API_KEY", TEST_API_KEY),
            ("RLM_PRIMARY_MODEL", "root-model"),
            ("RLM_SUB_MODEL", "sub-model"),
        ];
        env.extend_from_slice(extra_env);
        let mut all = vec!["ask"];
        all.extend_from_slice(args);
        self.rlm(&all, &env)
    }
}

/// A scripted model for every stage: programs keyed on "skills", summaries
/// and answers that cite the first passage they are shown.
fn model() -> Script {
    Script::new().respond_with(|r| {
        // As the judge: every claim entailed by its passage.
        if let Some(verdicts) = common::judge_says(r, rlm_engine::grounding::Verdict::Entailed) {
            return Some(Reply::text(verdicts));
        }
        let p = r.last_message();
        let cite_first = |open: &str| {
            let part = p.split(open).nth(1)?;
            let (id, rest) = part.split_once(']')?;
            let text = rest.lines().nth(1)?.trim();
            let q: String = text.chars().take(25).collect();
            Some(format!("{q} [[chunk:{id} \"{q}\"]]"))
        };
        if p.contains("Extract the semantic intent") {
            return Some(Reply::text(
                "{\"entity\": \"Alexis\", \"attribute\": \"skills\", \"output_type\": \"list\", \"semantic_intent\": \"skills of Alexis\"}",
            ));
        }
        if p.contains("Decide how to answer") {
            return Some(Reply::text("{\"route\": \"rag\", \"reason\": \"a single fact\"}"));
        }
        if p.contains("def evaluate_chunk_relevance") {
            return Some(Reply::text("```python\ndef evaluate_chunk_relevance(chunk_text):\n    if 'skills' in chunk_text.lower():\n        return True\n    return False\n```"));
        }
        if p.contains("Summarize what these passages") {
            return cite_first("[chunk:").map(|s| Reply::text(format!("- {s}")));
        }
        if p.contains("Answer the question from the per-file summaries") {
            let lines: Vec<&str> = p.lines().filter(|l| l.starts_with("- ")).collect();
            return Some(Reply::text(format!("{}\nAlexis also flies planes.", lines.join("\n"))));
        }
        if p.contains("Answer the question using only the passages") {
            return cite_first("[chunk:").map(|s| Reply::text(format!("Answer: {s}.")));
        }
        None
    })
}

#[test]
fn pipeline_flow_prints_files_and_strict_drops() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    let o = f.ask(
        &server,
        &[
            "Which skills does Alexis have?",
            "--store",
            "store",
            "--flow",
            "pipeline",
            "--inspector",
            "per-chunk",
            "--citations",
            "strict",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("[[chunk:"), "{out}");
    assert!(!out.lines().next().unwrap_or("").contains("flies planes"));
    assert!(out.contains("Files: "), "{out}");
    assert!(out.contains("selected by the per-chunk inspector"), "{out}");
    assert!(
        out.contains("Dropped by the strict citation policy"),
        "{out}"
    );
    assert!(out.contains("Alexis also flies planes."), "{out}");
    let err = stderr(&o);
    assert!(err.contains("High recall mode on (k = 200)"), "{err}");
    assert!(err.contains("Files expanded: "), "{err}");
}

#[test]
fn pipeline_json_has_file_summaries_and_report() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    let o = f.ask(
        &server,
        &[
            "Which skills does Alexis have?",
            "--store",
            "store",
            "--json",
            "-q",
        ],
        &[("RLM_FLOW", "pipeline"), ("RLM_INSPECTOR", "per-chunk")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let files = v["file_summaries"].as_array().unwrap();
    assert!(!files.is_empty());
    assert!(files[0]["path"].as_str().unwrap().ends_with("alexis.txt"));
    assert_eq!(v["flow_report"]["flow"], "pipeline");
    assert_eq!(v["flow_report"]["intent"]["entity"], "Alexis");
    assert_eq!(v["flow_report"]["citation_policy"], "best_effort");
    assert_eq!(
        v["flow_report"]["unsupported_claims"][0],
        "Alexis also flies planes."
    );
}

/// Under best effort the claim no passage backs is named once, and the
/// policy's count agrees with the Grounded line.
#[test]
fn best_effort_lists_what_the_answer_left_uncited() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    let o = f.ask(
        &server,
        &[
            "Which skills does Alexis have?",
            "--store",
            "store",
            "--flow",
            "pipeline",
        ],
        &[("RLM_INSPECTOR", "per-chunk")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(
            "Kept by the best_effort citation policy: 1 claim(s) without a verified citation"
        ),
        "{out}"
    );
    assert_eq!(
        out.matches("  - Alexis also flies planes.").count(),
        1,
        "{out}"
    );
    assert!(out.contains(", 1 without a passage\n"), "{out}");
}

/// `--flow rag`, an answer the model left uncited: the claim the engine
/// backs with a passage (judged entailed) is supported and not called
/// uncited; the one no passage backs is the one claim without a verified
/// citation, in the text and in `--json` alike. The two once read "1 of 1
/// claims supported" beside "claims without a verified citation: 1".
#[test]
fn rag_counts_a_claim_the_engine_backed_as_cited() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(Script::new().respond_with(|r| {
        if let Some(verdicts) = common::judge_says(r, rlm_engine::grounding::Verdict::Entailed) {
            return Some(Reply::text(verdicts));
        }
        r.last_message()
            .contains("Answer the question using only the passages")
            .then(|| Reply::text("Hobbies: chess.\nAlexis also flies planes."))
    }));
    let args = [
        "Which hobbies does Alexis have?",
        "--store",
        "store",
        "--flow",
        "rag",
    ];
    let o = f.ask(&server, &args, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("Grounded: 1 of 2 claims supported (1 by a citation the engine attached); 0 related, 0 contradicted, 0 unverified, 1 without a passage"),
        "{out}"
    );
    assert!(
        out.contains(
            "Kept by the best_effort citation policy: 1 claim(s) without a verified citation"
        ),
        "{out}"
    );
    assert!(
        out.contains("Not supported by any passage found:\n  - Alexis also flies planes.\n\n"),
        "{out}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let o = f.ask(&server, &json_args, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["grounded"]["supported"], 1, "{v:#}");
    assert_eq!(v["grounded"]["unsupported"], 1, "{v:#}");
    assert_eq!(
        v["flow_report"]["unsupported_claims"],
        serde_json::json!(["Alexis also flies planes."]),
        "{v:#}"
    );
    assert_eq!(v["claims"][0]["support"], "supported", "{v:#}");
}

/// An answer computed from a scan lists the set it counted, counted again.
#[test]
fn counted_sets_are_printed_under_the_answer() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(Script::new().respond_with(|r| {
        if let Some(verdicts) = common::judge_says(r, rlm_engine::grounding::Verdict::Entailed) {
            return Some(Reply::text(verdicts));
        }
        r.system().contains("You are answering a question").then(|| {
            Reply::text("```repl\nn = grep_count(r'python|chess', doc=0)\nFINAL(f'{n} lines name Python or chess.')\n```")
        })
    }));
    let o = f.ask(
        &server,
        &[
            "How many lines name Python or chess?",
            "--store",
            "store",
            "--flow",
            "repl",
        ],
        &[("RLM_TURN_FORMAT", "text")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("2 lines name Python or chess."), "{out}");
    assert!(out.contains("\nCounted over:\n"), "{out}");
    assert!(
        out.contains("  - grep(\"python|chess\"): 2 lines in 1 document; counted again: same; the answer states this count"),
        "{out}"
    );
    assert!(out.contains("(rlm show ID)"), "{out}");
}

#[test]
fn switch_off_answers_exactly_like_rag() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    let rag = f.ask(
        &server,
        &[
            "Which skills does Alexis have?",
            "--store",
            "store",
            "--flow",
            "rag",
            "-q",
        ],
        &[],
    );
    let off = f.ask(
        &server,
        &["Which skills does Alexis have?", "--store", "store", "-q"],
        &[("RLM_ENABLED", "false")],
    );
    assert!(
        rag.status.success() && off.status.success(),
        "{}",
        stderr(&off)
    );
    assert_eq!(stdout(&rag), stdout(&off));
    assert!(stdout(&rag).contains("[[chunk:"), "{}", stdout(&rag));
}

#[test]
fn auto_routes_with_a_reason() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    let o = f.ask(
        &server,
        &[
            "Which skills does Alexis have?",
            "--store",
            "store",
            "--flow",
            "auto",
            "--json",
            "-q",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["flow_report"]["flow"], "rag");
    assert_eq!(v["flow_report"]["route"]["reason"], "a single fact");
}

#[test]
fn bad_flow_inputs_are_one_line_errors() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    for (args, env, needle) in [
        (
            vec!["--inspector", "magic"],
            vec![],
            "use iterative, per-chunk, hypothesis or repl",
        ),
        (
            vec!["--flow", "pipelin"],
            vec![],
            "use repl, pipeline, rag or auto",
        ),
        (vec![], vec![("RLM_ENABLED", "maybe")], "RLM_ENABLED"),
        (
            vec![],
            vec![("RLM_MAX_FILES", "0")],
            "environment variable RLM_MAX_FILES=\"0\" is not a whole number from 1",
        ),
        (vec![], vec![("RLM_FLOW", "rag")], "RLM_FLOW"),
    ] {
        let mut all = vec!["q?", "--store", "store"];
        all.extend(args.iter().copied());
        let o = f.ask(&server, &all, &env);
        assert!(!o.status.success(), "{all:?} {env:?} should fail");
        let err = stderr(&o);
        assert!(err.contains(needle), "{all:?} {env:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    }
}

#[test]
fn rlm_toml_engine_table_sets_the_flow_and_the_environment_beats_it() {
    let f = Fixture::new();
    let server = ScriptedServer::spawn(model());
    let toml = f.dir.path().join("rlm.toml");
    std::fs::write(
        &toml,
        "[engine]\nflow = \"pipeline\"\ninspector = \"per-chunk\"\n",
    )
    .unwrap();
    let ask = |env: &[(&str, &str)]| {
        let o = f.ask(
            &server,
            &[
                "Which skills does Alexis have?",
                "--store",
                "store",
                "--json",
                "-q",
            ],
            env,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["flow_report"]["flow"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(ask(&[]), "pipeline", "./rlm.toml [engine] flow is read");
    assert_eq!(
        ask(&[("RLM_ENABLED", "false")]),
        "rag",
        "the environment beats the file"
    );

    std::fs::write(&toml, "[engine]\nmax_llm_cals = 5\n").unwrap();
    let o = f.ask(&server, &["q?", "--store", "store"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("[engine] has no setting \"max_llm_cals\""),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
}
