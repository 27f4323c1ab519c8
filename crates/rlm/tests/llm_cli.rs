//! `rlm llm chat` and `rlm llm check`, running the real binary against the
//! scripted model server.

use rlm_llm::testing::{Fault, Reply, Script, ScriptedServer, TEST_API_KEY};

use crate::common;
use common::{rlm, rlm_stdin, stderr, stdout};

fn server_env(server: &ScriptedServer) -> Vec<(&'static str, String)> {
    vec![
        ("RLM_PROVIDER", "openai".to_string()),
        ("RLM_BASE_URL", server.base_url()),
        ("RLM_API_KEY", TEST_API_KEY.to_string()),
        ("RLM_PRIMARY_MODEL", "root-model".to_string()),
        ("RLM_SUB_MODEL", "sub-model".to_string()),
    ]
}

fn as_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn chat_prints_the_reply_on_stdout_and_usage_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(
        Script::new()
            .require_api_key(TEST_API_KEY)
            .reply(Reply::text("Paris.").with_cached_usage(20, 2, 8)),
    );
    let env = server_env(&server);
    let out = rlm(
        dir.path(),
        &["llm", "chat", "Capital of France?", "--system", "Be terse."],
        &as_refs(&env),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Paris.\n");
    let err = stderr(&out);
    assert!(
        err.contains("root-model: 20 in (8 cached) + 2 out tokens"),
        "{err}"
    );
    assert!(err.contains("cost unknown"), "{err}");
    let req = &server.requests()[0];
    assert_eq!(req.system(), "Be terse.");
    assert_eq!(req.last_message(), "Capital of France?");
}

#[test]
fn chat_json_has_text_and_usage_and_model_override_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(
        Script::new().reply(Reply::text("four").without_usage().with_latency_ms(20)),
    );
    let env = server_env(&server);
    let out = rlm(
        dir.path(),
        &[
            "llm",
            "chat",
            "2+2?",
            "--json",
            "--model",
            "gpt-4o-mini",
            "--max-output-tokens",
            "7",
        ],
        &as_refs(&env),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["text"], "four");
    assert_eq!(v["finish_reason"], "stop");
    assert_eq!(v["usage"]["model"], "gpt-4o-mini");
    assert_eq!(v["usage"]["estimated"], true);
    assert!(v["usage"]["output_tokens"].as_u64().unwrap() >= 1);
    assert!(v["usage"]["latency_ms"].as_u64().unwrap() >= 20);
    assert!(v["usage"]["cost_usd"].as_f64().unwrap() > 0.0);
    let req = &server.requests()[0];
    assert_eq!(req.model, "gpt-4o-mini");
    assert_eq!(req.body["max_tokens"], 7);
}

#[test]
fn chat_sub_role_and_stdin_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(Script::new().otherwise("ok"));
    let env = server_env(&server);
    let out = rlm_stdin(
        dir.path(),
        &["llm", "chat", "-", "--sub"],
        &as_refs(&env),
        "from stdin\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let req = &server.requests()[0];
    assert_eq!(req.model, "sub-model");
    assert_eq!(req.last_message(), "from stdin\n");
}

#[test]
fn chat_errors_are_one_line_and_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(Script::new().require_api_key("right-key").otherwise("x"));
    let mut env = server_env(&server);

    // No key anywhere.
    let no_key: Vec<_> = env
        .iter()
        .filter(|(k, _)| *k != "RLM_API_KEY")
        .cloned()
        .collect();
    let out = rlm(dir.path(), &["llm", "chat", "hi"], &as_refs(&no_key));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.starts_with("error: no API key"), "{err}");
    assert!(err.contains("RLM_API_KEY"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // Wrong key.
    let out = rlm(dir.path(), &["llm", "chat", "hi"], &as_refs(&env));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("rejected the API key (HTTP 401)"),
        "{}",
        stderr(&out)
    );

    // Bad settings.
    env.push(("RLM_TIMEOUT", "soon".into()));
    let out = rlm(dir.path(), &["llm", "chat", "hi"], &as_refs(&env));
    assert!(
        stderr(&out).contains("RLM_TIMEOUT=\"soon\" is not a number more than 0 and at most 86400"),
        "{}",
        stderr(&out)
    );
    let out = rlm(dir.path(), &["llm", "chat", "  "], &[]);
    assert!(
        stderr(&out).contains("the prompt is empty"),
        "{}",
        stderr(&out)
    );
    let out = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--provider", "gemini"],
        &[],
    );
    assert!(
        stderr(&out).contains("unknown provider 'gemini'"),
        "{}",
        stderr(&out)
    );
    let out = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--temperature", "5"],
        &[],
    );
    assert!(
        stderr(&out).contains("--temperature 5 must be between 0 and 2"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn chat_reports_an_unreachable_endpoint_and_exhausted_retries() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--max-retries", "0"],
        &[("RLM_BASE_URL", &url), ("RLM_API_KEY", "x")],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("cannot reach {url}")), "{err}");

    let server = ScriptedServer::spawn(Script::new().otherwise(Fault::ServiceUnavailable));
    let env = server_env(&server);
    let out = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--max-retries", "1"],
        &as_refs(&env),
    );
    let err = stderr(&out);
    assert!(err.contains("gave up after 2 attempts"), "{err}");
    assert!(err.contains("HTTP 503"), "{err}");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn chat_record_then_replay_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("c.jsonl");
    let cassette_arg = cassette.to_str().unwrap();
    let server = ScriptedServer::spawn(Script::new().reply("recorded answer"));
    let env = server_env(&server);
    let out = rlm(
        dir.path(),
        &["llm", "chat", "question", "--record", cassette_arg],
        &as_refs(&env),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    drop(server);
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains(TEST_API_KEY));

    let replay_env = [("RLM_PRIMARY_MODEL", "root-model")];
    let out = rlm(
        dir.path(),
        &["llm", "chat", "question", "--replay", cassette_arg],
        &replay_env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "recorded answer\n");

    let out = rlm(
        dir.path(),
        &["llm", "chat", "another question", "--replay", cassette_arg],
        &replay_env,
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("replay miss"), "{err}");
    assert!(err.contains("messages[0].content at character 0"), "{err}");
}

#[test]
fn chat_reads_models_from_a_named_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(Script::new().otherwise("ok"));
    let config = dir.path().join("my.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nbase_url = \"{}\"\nprimary_model = \"from-file\"\n[llm.root]\ntemperature = 0.3\n",
            server.base_url()
        ),
    )
    .unwrap();
    let out = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--config", config.to_str().unwrap()],
        &[("RLM_API_KEY", "x")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let req = &server.requests()[0];
    assert_eq!(req.model, "from-file");
    assert_eq!(req.body["temperature"], serde_json::json!(0.3f32));

    // ./rlm.toml is read by default.
    std::fs::write(
        dir.path().join("rlm.toml"),
        format!(
            "[llm]\nbase_url = \"{}\"\nprimary_model = \"default-file\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let out = rlm(dir.path(), &["llm", "chat", "hi"], &[("RLM_API_KEY", "x")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server.requests()[1].model, "default-file");

    let out = rlm(
        dir.path(),
        &["llm", "chat", "hi", "--config", "missing.toml"],
        &[],
    );
    assert!(
        stderr(&out).contains("cannot read config file missing.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_passes_when_key_endpoint_and_models_are_right() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(Script::new().require_api_key(TEST_API_KEY).models([
        "root-model",
        "sub-model",
        "other",
    ]));
    let env = server_env(&server);
    let out = rlm(dir.path(), &["llm", "check"], &as_refs(&env));
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("ok   api key    from RLM_API_KEY"), "{text}");
    assert!(text.contains("serves 3 model(s)"), "{text}");
    assert!(
        text.contains("ok   root model root-model is listed"),
        "{text}"
    );
    assert!(
        text.contains("ok   sub model  sub-model is listed"),
        "{text}"
    );

    let out = rlm(dir.path(), &["llm", "check", "--json"], &as_refs(&env));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["checks"].as_array().unwrap().len(), 5);
}

#[test]
fn check_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(
        Script::new()
            .require_api_key(TEST_API_KEY)
            .models(["qwen2.5-coder", "llama"]),
    );
    let env = server_env(&server);

    // Model not served.
    let out = rlm(dir.path(), &["llm", "check"], &as_refs(&env));
    assert!(!out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("FAIL root model root-model is not among the models the endpoint serves (qwen2.5-coder, llama)"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("check failed (2 problem(s) above)"),
        "{}",
        stderr(&out)
    );

    // Missing key: reported, and the endpoint is still probed (it answers 401).
    let no_key: Vec<_> = env
        .iter()
        .filter(|(k, _)| *k != "RLM_API_KEY")
        .cloned()
        .collect();
    let out = rlm(dir.path(), &["llm", "check"], &as_refs(&no_key));
    let text = stdout(&out);
    assert!(
        text.contains("FAIL api key    missing: set RLM_API_KEY or OPENAI_API_KEY"),
        "{text}"
    );
    assert!(text.contains("FAIL endpoint"), "{text}");
    assert!(text.contains("rejected the API key"), "{text}");

    // Unreachable endpoint.
    let out = rlm(
        dir.path(),
        &["llm", "check", "--base-url", "http://127.0.0.1:9/v1"],
        &[("RLM_API_KEY", "x")],
    );
    assert!(!out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("FAIL endpoint   cannot reach http://127.0.0.1:9/v1/models"),
        "{text}"
    );
}

#[test]
fn check_probes_azure_deployments_with_a_one_token_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::spawn(Script::new().models(["root-model"]).otherwise("p"));
    let out = rlm(
        dir.path(),
        &[
            "llm",
            "check",
            "--provider",
            "azure",
            "--base-url",
            &server.url(),
        ],
        &[
            ("AZURE_OPENAI_API_KEY", "k"),
            ("RLM_PRIMARY_MODEL", "root-model"),
            ("RLM_SUB_MODEL", "missing-deployment"),
        ],
    );
    assert!(!out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("ok   root model deployment root-model answers"),
        "{text}"
    );
    assert!(
        text.contains("FAIL sub model  azure does not know model 'missing-deployment'"),
        "{text}"
    );
    let probe = &server.requests()[0];
    assert_eq!(probe.body["max_completion_tokens"], 1);
}
