//! `rlm` over a PostgreSQL store (`--store postgres://…`), against a real
//! PostgreSQL server (`rlm_store_pg::testing`: `RLM_TEST_POSTGRES_URL`, or
//! one started by `scripts/start-postgres`): the same commands print the
//! same documents, chunks and lookups as over a store folder, a killed
//! `rlm index` leaves the previous generation intact, and rlm.toml's
//! `[store] location` selects the store.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{command, rlm};
use rlm_store_pg::testing::test_database;

fn ok(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = rlm(dir, args, &[]);
    assert!(
        out.status.success(),
        "rlm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

fn corpus(dir: &Path) {
    let docs = dir.join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(
        docs.join("lease.md"),
        "# Lease\n\nThe tenant shall give ninety days termination notice.\n\n## Rent\n\nRent is due on the first day of each month.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("sub/nda.txt"),
        "Confidential information must not be disclosed for five years.\n",
    )
    .unwrap();
}

/// Waits until the child prints `needle` on stderr.
fn wait_for(child: &mut Child, needle: &str) {
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        if line.unwrap().contains(needle) {
            return;
        }
    }
    panic!("the child ended without printing {needle:?}");
}

#[test]
fn the_commands_read_a_postgres_store_as_they_read_a_folder() {
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let url = db.url();
    let out = ok(dir.path(), &["index", "docs", "--store", url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 added"), "{text}");
    assert!(text.contains("store: 2 documents"), "{text}");
    // The password never shows, the user and database do.
    assert!(text.contains("into postgres://rlm@"), "{text}");
    ok(dir.path(), &["index", "docs", "--store", "local"]);
    for args in [
        vec!["docs", "--json"],
        vec!["show", "docs/lease.md", "--json"],
        vec!["search", "termination notice", "--json", "-k", "1"],
    ] {
        let on = |store: &str| {
            let mut a = args.clone();
            a.extend(["--store", store]);
            json(&ok(dir.path(), &a))
        };
        let (pg, local) = (on(url), on("local"));
        if args[0] == "search" {
            // Rankings differ in score (ts_rank vs BM25), not in what is found.
            assert_eq!(pg[0]["chunk_id"], local[0]["chunk_id"], "{args:?}");
            assert_eq!(pg[0]["text"], local[0]["text"]);
        } else {
            assert_eq!(pg, local, "{args:?}");
        }
    }
    let chunk = json(&ok(dir.path(), &["docs", "--json", "--store", url]))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = ok(dir.path(), &["show", &format!("{chunk}-0"), "--store", url]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Lease"));
    // Errors are one line with what to do.
    let out = rlm(dir.path(), &["show", "nope", "--store", url], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no chunk or document with id \"nope\""),
        "{err}"
    );
    // rlm serve over a PostgreSQL store does not index through its API.
    let out = rlm(
        dir.path(),
        &[
            "serve",
            "--store",
            url,
            "--addr",
            "127.0.0.1:0",
            "--allow-upload",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("index with rlm index PATH --store URL"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_killed_index_run_leaves_the_previous_generation() {
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let url = db.url();
    ok(dir.path(), &["index", "docs", "--store", url]);
    let before = json(&ok(dir.path(), &["docs", "--json", "--store", url]));
    std::fs::write(
        dir.path().join("docs/lease.md"),
        "# Lease\n\nNow a zebra clause.\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("docs/added.txt"),
        "a brand new giraffe document\n",
    )
    .unwrap();
    // Everything is written (COPY done), the commit not yet: SIGKILL.
    let mut child = command(
        dir.path(),
        &["index", "docs", "--store", url],
        &[("RLM_TEST_PAUSE", "before_db_commit:30000")],
    )
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    wait_for(&mut child, "test pause");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        json(&ok(dir.path(), &["docs", "--json", "--store", url])),
        before
    );
    let hits = json(&ok(
        dir.path(),
        &["search", "zebra giraffe", "--json", "--store", url],
    ));
    assert_eq!(hits.as_array().unwrap().len(), 0);
    assert_eq!(
        db.scalar("SELECT value FROM rlm_meta WHERE key = 'generation'")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    // The dead run's lock went with its connection: the next run completes.
    let out = ok(dir.path(), &["index", "docs", "--store", url]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 added, 1 updated"));
    let hits = json(&ok(
        dir.path(),
        &["search", "zebra giraffe", "--json", "--store", url],
    ));
    assert_eq!(hits.as_array().unwrap().len(), 2);
}

#[test]
fn a_killed_first_run_leaves_an_empty_store_with_its_full_text_index() {
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let url = db.url();
    // A first run builds the full-text index at its end (dropped at its
    // start): killed before the commit, the drop is rolled back too.
    let mut child = command(
        dir.path(),
        &["index", "docs", "--store", url],
        &[("RLM_TEST_PAUSE", "before_db_commit:30000")],
    )
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    wait_for(&mut child, "test pause");
    child.kill().unwrap();
    child.wait().unwrap();
    let docs = json(&ok(dir.path(), &["docs", "--json", "--store", url]));
    assert_eq!(docs.as_array().unwrap().len(), 0, "{docs}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM pg_indexes WHERE indexname = 'rlm_chunks_tsv'")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    ok(dir.path(), &["index", "docs", "--store", url]);
    let hits = json(&ok(
        dir.path(),
        &["search", "termination notice", "--json", "--store", url],
    ));
    assert_eq!(hits[0]["path"], "docs/lease.md", "{hits}");
}

#[test]
fn index_killed_at_any_moment_commits_all_or_nothing() {
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    const FILES: usize = 400;
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    for i in 0..FILES {
        let text: Vec<&str> = (0..400)
            .map(|j| words[(i * 7 + j * 3) % words.len()])
            .collect();
        std::fs::write(docs.join(format!("f{i:04}.txt")), text.join(" ") + "\n").unwrap();
    }
    let url = db.url();
    let index = ["index", "docs", "--store", url];
    ok(dir.path(), &index);
    let documents_with = |word: &str| -> String {
        db.scalar(&format!(
            "SELECT count(DISTINCT doc_id) FROM rlm_chunks WHERE tsv @@ to_tsquery('english', '{word}')"
        ))
        .unwrap()
        .unwrap()
    };
    for (round, delay_ms) in [30u64, 150, 300, 600].into_iter().enumerate() {
        let word = format!("round{round}");
        for i in 0..FILES {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(docs.join(format!("f{i:04}.txt")))
                .unwrap();
            writeln!(f, "{word}").unwrap();
        }
        let mut child = command(dir.path(), &index, &[]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL; it may have finished already.
        child.wait().unwrap();
        let seen = documents_with(&word);
        assert!(
            seen == "0" || seen == FILES.to_string(),
            "round {round} ({delay_ms} ms): {seen} of {FILES}"
        );
        assert_eq!(
            db.scalar("SELECT count(*) FROM rlm_documents").unwrap(),
            Some(FILES.to_string())
        );
        ok(dir.path(), &index);
        assert_eq!(documents_with(&word), FILES.to_string(), "round {round}");
    }
}

#[test]
fn rlm_toml_names_the_store_unless_the_flag_or_environment_does() {
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    std::fs::write(
        dir.path().join("rlm.toml"),
        format!("[store]\nlocation = \"{}\"\n", db.url()),
    )
    .unwrap();
    let out = ok(dir.path(), &["index", "docs"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("into postgres://"));
    assert_eq!(
        db.scalar("SELECT count(*) FROM rlm_documents")
            .unwrap()
            .as_deref(),
        Some("2")
    );
    let listed = json(&ok(dir.path(), &["docs", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2);
    // The flag wins: a folder that is no store yet.
    let out = rlm(dir.path(), &["docs", "--store", "elsewhere"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("elsewhere is not an rlm store"));
    // So does the environment.
    let out = rlm(dir.path(), &["docs"], &[("RLM_STORE", "elsewhere")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("elsewhere is not an rlm store"));
    // A typo in [store] is one line naming it.
    std::fs::write(dir.path().join("rlm.toml"), "[store]\nlocaton = \"x\"\n").unwrap();
    let out = rlm(dir.path(), &["docs"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[store] has no setting \"locaton\"; its keys are: location"),
        "{err}"
    );
}

#[test]
fn rlm_ask_answers_and_verifies_citations_over_a_postgres_store() {
    use rlm_llm::testing::{Matcher, Script, ScriptedServer, TEST_API_KEY};
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("a_intro.txt"),
        "This memo describes the office move.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("b_notes.txt"),
        "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("c_misc.txt"),
        "Lunch options and parking spaces.\n",
    )
    .unwrap();
    ok(dir.path(), &["index", "docs", "--store", db.url()]);
    let cell = "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\nprint(search(\"secret code\", 2))\n```";
    let fin = "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])";
    // Three questions of two turns each.
    let server = ScriptedServer::spawn(Script::new().on_sequence(
        Matcher::system_contains("You are answering a question about a collection"),
        [cell, fin, cell, fin, cell, fin].map(str::to_string),
    ));
    let base = server.base_url();
    let env = [
        ("RLM_PROVIDER", "openai"),
        ("RLM_BASE_URL", base.as_str()),
        ("RLM_API_KEY", TEST_API_KEY),
        ("RLM_PRIMARY_MODEL", "root-model"),
        ("RLM_SUB_MODEL", "sub-model"),
        ("RLM_STORE", db.url()),
    ];
    let out = rlm(
        dir.path(),
        &["ask", "What is the secret code?", "--json"],
        &env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert!(v["answer"].as_str().unwrap().contains("4721"), "{v}");
    assert_eq!(v["citations"][0]["status"], "verified", "{v}");
    assert_eq!(v["verification"]["all_valid"], true);
    // Sessions live in the database too (the tables rlm serve nodes
    // share): the second turn's prompt carries the first.
    for question in ["Which code is secret?", "And again?"] {
        let out = rlm(dir.path(), &["ask", question, "--session", "s1"], &env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let last = server
        .requests()
        .into_iter()
        .rfind(|r| !common::is_judge(r))
        .unwrap()
        .body
        .to_string();
    assert!(last.contains("Which code is secret?"), "{last}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM rlm_turns WHERE session = 's1'")
            .unwrap(),
        Some("2".into())
    );
}
