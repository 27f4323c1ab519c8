//! The API on a real socket: a real store on disk, real sandbox workers, the
//! scripted model server over real HTTP, a real HTTP client reading the
//! server-sent events.

use std::time::Duration;

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Matcher, Reply, Script};
use rlm_server::Limits;
use serde_json::{Value, json};

use crate::common;
use common::{Harness, error_message, needle_script, root, status_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_every_step_then_its_verified_answer_and_survives_a_restart() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let (status, info) = h.get("/api/info").await;
    assert_eq!(status, 200);
    assert_eq!(info["store"]["documents"], 3);
    // Every chunk is in one detected language (or "und").
    let languages = info["store"]["languages"].as_array().unwrap();
    let chunks: u64 = languages
        .iter()
        .map(|l| l["chunks"].as_u64().unwrap())
        .sum();
    assert_eq!(chunks, info["store"]["chunks"].as_u64().unwrap(), "{info}");
    assert!(languages.iter().all(|l| l["name"].is_string()), "{info}");
    assert_eq!(info["models"]["root"], "root-model");
    assert_eq!(info["defaults"]["flow"], "repl");

    let (status, started) = h
        .post("/api/runs", json!({"question": "What is the secret code?"}))
        .await;
    assert_eq!(status, 202, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!(started["events"], format!("/api/runs/{id}/events"));

    let events = h.events(&id, None).await;
    let (last, trace) = events.split_last().unwrap();
    assert_eq!(last.0, "end");
    assert_eq!(last.2["status"], "done");
    let answer = &last.2["answer"];
    assert!(
        answer["answer"].as_str().unwrap().contains("4721"),
        "{answer}"
    );
    assert_eq!(answer["citations"][0]["status"], "verified");
    // Every trace event, in order, numbered from 0, each with its SSE id.
    for (i, (event, id, data)) in trace.iter().enumerate() {
        assert_eq!(event, "trace");
        assert_eq!(*id, Some(i as u64));
        assert_eq!(data["seq"], i as u64);
    }
    let types: Vec<&str> = trace.iter().filter_map(|e| e.2["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"run_started"));
    assert_eq!(types.last(), Some(&"run_finished"));
    for t in [
        "llm_request",
        "llm_response",
        "cell",
        "cell_output",
        "final",
        "verification",
    ] {
        assert!(types.contains(&t), "{t} missing from {types:?}");
    }

    // The same run by id, and in the list.
    let (status, view) = h.get(&format!("/api/runs/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(view["status"], "done");
    assert_eq!(view["answer"]["answer"], answer["answer"]);
    let (_, list) = h.get("/api/runs").await;
    assert_eq!(list["runs"][0]["id"], id.as_str());
    assert_eq!(list["runs"][0]["partial"], false);

    // Resuming after event 3 sends the rest only.
    let resumed = h.events(&id, Some(3)).await;
    assert_eq!(resumed[0].1, Some(4));
    assert_eq!(resumed.len(), events.len() - 4);

    // A citation opens its chunk.
    let doc_id = answer["citations"][0]["doc_id"].as_str().unwrap();
    let chunk_id = answer["citations"][0]["chunk_id"]
        .as_str()
        .map(str::to_string)
        .unwrap_or(format!("{doc_id}-0"));
    let (status, chunk) = h.get(&format!("/api/chunks/{chunk_id}")).await;
    assert_eq!(status, 200, "{chunk}");
    assert!(
        chunk["text"]
            .as_str()
            .unwrap()
            .contains("secret code is 4721")
    );
    assert!(chunk["path"].as_str().unwrap().ends_with("b_notes.txt"));

    // After a restart the run is read back from the store folder.
    h.shutdown().await;
    assert!(
        h.dir
            .path()
            .join("store/runs")
            .join(format!("{id}.json"))
            .is_file()
    );
    h.serve(Limits::default()).await;
    let (status, view) = h.get(&format!("/api/runs/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(view["answer"]["answer"], answer["answer"]);
    let replayed = h.events(&id, None).await;
    assert_eq!(replayed.len(), events.len());
    assert_eq!(replayed.last().unwrap().2["status"], "done");
    let (_, list) = h.get("/api/runs").await;
    assert_eq!(list["runs"][0]["id"], id.as_str());
    let (status, cancel) = h.delete(&format!("/api/runs/{id}")).await;
    assert_eq!(status, 409, "{cancel}");
    h.shutdown().await;
}

/// The answer JSON says, apart, whether each claim's passage entails it and
/// whether its quote is verbatim; a verbatim quote the judge does not find
/// states its claim is a related passage, never a source. The judge's
/// verdicts are cached for the server's runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_shows_entailment_and_the_quote_check_apart() {
    // The claim in other words than its passage, so the judge is asked.
    let script = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::NotEntailed]))
        .on(
            common::root().and(Matcher::any_contains("REPL output")),
            "FINAL(The code is 4721 [[doc:1 \"The secret code is 4721\"]])",
        )
        .on(
            common::root(),
            "```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```",
        );
    let h = Harness::start(script, Limits::default()).await;
    for _ in 0..2 {
        let (status, started) = h
            .post("/api/runs", json!({"question": "What is the secret code?"}))
            .await;
        assert_eq!(status, 202, "{started}");
        let id = started["id"].as_str().unwrap().to_string();
        let events = h.events(&id, None).await;
        let answer = &events.last().unwrap().2["answer"];
        let claim = &answer["claims"][0];
        assert_eq!(claim["support"], "related", "{answer}");
        assert_eq!(claim["verdict"], "not_entailed", "{answer}");
        assert_eq!(claim["quote_check"], "verified", "{answer}");
        assert_eq!(answer["sources"], json!([]), "{answer}");
        assert_eq!(
            answer["related_sources"][0]["quote"],
            "The secret code is 4721"
        );
        assert_eq!(answer["grounded"]["related"], 1, "{answer}");
    }
    let judged = h
        .model
        .requests()
        .iter()
        .filter(|r| {
            r.system()
                .contains(rlm_engine::grounding::JUDGE_PROMPT_START)
        })
        .count();
    assert_eq!(judged, 1, "the second answer's verdict came from the cache");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_keeps_sessions_that_can_be_listed_read_and_deleted() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    for question in ["What is the secret code?", "Repeat the secret code."] {
        let (status, view) = h
            .post(
                "/api/chat",
                json!({"question": question, "session": "case-1"}),
            )
            .await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["status"], "done");
        assert_eq!(view["session"], "case-1");
    }
    // The second question's prompt carried the first turn.
    let last_root = h
        .model
        .requests()
        .into_iter()
        .rfind(|r| {
            r.system()
                .contains("You are answering a question about a collection")
        })
        .unwrap();
    let seen: String = last_root
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert!(seen.contains("What is the secret code?"), "{seen}");

    let (_, list) = h.get("/api/sessions").await;
    assert_eq!(list["sessions"][0]["name"], "case-1");
    assert_eq!(list["sessions"][0]["turns"], 2);
    let (status, session) = h.get("/api/sessions/case-1").await;
    assert_eq!(status, 200);
    assert_eq!(session["history"][1]["question"], "Repeat the secret code.");
    // Each turn keeps its verified citations.
    assert_eq!(session["history"][0]["citations"][0]["status"], "verified");

    let r = h
        .http
        .delete(h.url("/api/sessions/case-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let (status, v) = h.get("/api/sessions/case-1").await;
    assert_eq!(status, 404);
    assert!(error_message(&v).contains("no session"), "{v}");
    let (status, _) = h.delete("/api/sessions/case-1").await;
    assert_eq!(status, 404);
    let (status, v) = h.get("/api/sessions/bad%20name").await;
    assert_eq!(status, 400);
    assert!(error_message(&v).contains("invalid session name"), "{v}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rlm_switch_off_answers_with_rag() {
    let script = Script::new().respond_with(|r| {
        let p = r.last_message();
        let id = p.split("[chunk:").nth(1)?.split_once(']')?.0.to_string();
        Some(Reply::text(format!(
            "The secret code is 4721 [[chunk:{id} \"The secret code is 4721\"]]."
        )))
    });
    let mut h = Harness::start(script, Limits::default()).await;
    let (status, view) = h
        .post(
            "/api/chat",
            json!({"question": "What is the secret code?", "use_rlm": false}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["flow"], "rag");
    assert_eq!(view["answer"]["flow_report"]["flow"], "rag");
    assert!(view["answer"]["answer"].as_str().unwrap().contains("4721"));
    // One answer call; the judge's call on its claim (not answered here:
    // the claim stays unverified) comes after.
    let judged = h
        .model
        .requests()
        .iter()
        .filter(|r| {
            r.system()
                .contains(rlm_engine::grounding::JUDGE_PROMPT_START)
        })
        .count();
    // The claim is its passage word for word: no judge call.
    assert_eq!(
        (h.model.request_count() - judged, judged),
        (1, 0),
        "rag is one model call"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_requests_at_once_start_no_more_runs_than_the_limit() {
    let slow =
        Script::new().otherwise(Reply::text("```repl\nprint(1)\n```").with_latency_ms(2_000));
    let limits = Limits {
        max_concurrent_runs: 2,
        ..Limits::default()
    };
    let mut h = Harness::start(slow, limits).await;
    let requests = (0..50).map(|i| {
        h.http
            .post(h.url("/api/runs"))
            .json(&json!({"question": format!("Question {i}?")}))
            .send()
    });
    let statuses: Vec<u16> = futures_util::future::join_all(requests)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    let started = statuses.iter().filter(|s| **s == 202).count();
    assert_eq!(started, 2, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 48);
    let (_, list) = h.get("/api/runs").await;
    let running = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "running")
        .count();
    assert!(running <= 2, "{list}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_refuses_more_runs_and_a_cancelled_run_is_partial() {
    let slow = Script::new().otherwise(Reply::text("```repl\nprint(1)\n```").with_latency_ms(400));
    let limits = Limits {
        max_concurrent_runs: 1,
        ..Limits::default()
    };
    let mut h = Harness::start(slow, limits).await;
    let (status, started) = h.post("/api/runs", json!({"question": "Anything?"})).await;
    assert_eq!(status, 202);
    let id = started["id"].as_str().unwrap().to_string();

    let r = h
        .http
        .post(h.url("/api/runs"))
        .json(&json!({"question": "And this?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 429);
    assert_eq!(r.headers()["retry-after"], "5");
    let v: Value = r.json().await.unwrap();
    assert!(error_message(&v).contains("limit 1"), "{v}");

    let (status, view) = h.delete(&format!("/api/runs/{id}")).await;
    assert_eq!(status, 202, "{view}");
    let events = h.events(&id, None).await;
    let end = &events.last().unwrap().2;
    assert_eq!(end["status"], "cancelled");
    assert_eq!(end["answer"]["partial"], true);
    let (status, _) = h.delete(&format!("/api/runs/{id}")).await;
    assert_eq!(status, 409, "cancelling twice");

    // The place is free again.
    let (status, _) = h.post("/api/runs", json!({"question": "Now?"})).await;
    assert_eq!(status, 202);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_numeric_field_is_range_checked() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let fields = [
        ("max_llm_calls", true),
        ("max_iterations", true),
        ("max_depth", true),
        ("max_cost_usd", false),
        ("max_wall_secs", false),
    ];
    for (field, whole) in fields {
        let mut bad = vec![json!(-1), json!(1e20), json!(1.5e300), json!(u64::MAX)];
        if whole {
            bad.push(json!(2.5));
        }
        if field != "max_depth" {
            bad.push(json!(0));
        }
        for value in bad {
            let body = json!({"question": "q", field: value});
            let (status, v) = h.post("/api/runs", body.clone()).await;
            assert_eq!(status, 400, "{body} → {v}");
            let message = error_message(&v);
            assert!(message.starts_with(&format!("{field}=")), "{body} → {v}");
        }
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_one_line_errors() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({"question": "  "}), "the question is empty"),
        (
            json!({"question": "x".repeat(20_001)}),
            "the limit is 20000",
        ),
        (json!({"question": "q", "flow": "magic"}), "flow:"),
        (json!({"question": "q", "inspector": "magic"}), "inspector:"),
        (json!({"question": "q", "citations": "loose"}), "citations:"),
        (
            json!({"question": "q", "sandbox": "jail"}),
            "sandbox: unknown sandbox \"jail\": use monty (the default) or cpython",
        ),
        (
            json!({"question": "q", "session": "a/b"}),
            "invalid session name",
        ),
        (
            json!({"question": "q", "max_wall_secs": -1}),
            "max_wall_secs",
        ),
        (
            json!({"question": "q", "max_cost_usd": -2.0}),
            "max_cost_usd",
        ),
        (
            json!({"question": "q", "max_iterations": 0}),
            "max_iterations=\"0\" is not a whole number from 1 to 1000",
        ),
        (
            json!({"question": "q", "colour": "red"}),
            "unknown field `colour`",
        ),
        (json!({"query": "q"}), "unknown field `query`"),
        (json!({}), "missing field `question`"),
        (
            json!({"question": "q", "history_runs": ["r1-ab"]}),
            "history_runs names turns of a session: give session too",
        ),
        (
            json!({"question": "q", "session": "s", "history_runs": ["../x"]}),
            "history_runs: at most 200 run ids",
        ),
    ];
    for (body, expected) in cases {
        let (status, v) = h.post("/api/runs", body.clone()).await;
        assert_eq!(status, 400, "{body} → {v}");
        assert!(error_message(&v).contains(expected), "{body} → {v}");
    }
    // Messages quoting what was sent stay one line of bounded length
    // (a key with a newline came back verbatim, two lines; found by the
    // body fuzz, tests/fuzz_body.rs).
    let huge = "x".repeat(500_000);
    for (body, expected) in [
        (json!({"question": "q", "a\nb": 1}), "unknown field `a\\nb`"),
        (
            json!({"question": "q", "\t\n": -1}),
            "unknown field `\\t\\n`",
        ),
        (
            json!({"question": "q", huge.as_str(): 1}),
            "unknown field `xxx",
        ),
        (
            json!({"question": "q", "session": huge}),
            "invalid session name",
        ),
        (
            json!({"question": "q", "use_rlm": "x\ny".repeat(1000)}),
            "use_rlm: invalid type",
        ),
    ] {
        let (status, v) = h.post("/api/runs", body).await;
        assert_eq!(status, 400, "{v}");
        let message = error_message(&v);
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains('\n'), "{message}");
        assert!(message.chars().count() <= 1000, "{}", message.len());
    }
    let r = h
        .http
        .post(h.url("/api/runs"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = h
        .http
        .post(h.url("/api/runs"))
        .body("question=hi")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let r = h
        .http
        .post(h.url("/api/runs"))
        .header("content-type", "application/json")
        .body(format!("{{\"question\": \"{}\"}}", "x".repeat(2 << 20)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);

    for path in [
        "/api/runs/r0-00000000",
        "/api/runs/r0-00000000/events",
        "/api/runs/..%2F..%2Fetc%2Fpasswd",
        "/api/chunks/nope-0",
        "/api/nothing",
    ] {
        let (status, v) = h.get(path).await;
        assert_eq!(status, 404, "{path} → {v}");
        assert!(!error_message(&v).is_empty(), "{path} → {v}");
    }
    let (status, _) = h.delete("/api/runs/r0-00000000").await;
    assert_eq!(status, 404);
    // Another method on an endpoint that exists: 405 as JSON, with Allow
    // (it was an empty body; found by the body fuzz, tests/fuzz_body.rs).
    for (method, path, allow) in [
        (reqwest::Method::PUT, "/api/runs", "GET,HEAD,POST"),
        (reqwest::Method::PATCH, "/api/chat", "POST"),
        (reqwest::Method::POST, "/api/info", "GET,HEAD"),
    ] {
        let r = h
            .http
            .request(method.clone(), h.url(path))
            .json(&json!({"question": "q"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 405, "{method} {path}");
        assert_eq!(r.headers()["allow"], allow, "{method} {path}");
        let (_, v) = status_json(r).await;
        assert_eq!(v["error"]["status"], 405, "{method} {path}: {v}");
        assert!(
            error_message(&v).contains("does not take that method"),
            "{v}"
        );
    }
    assert_eq!(
        h.model.request_count(),
        0,
        "no bad request reached the model"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_and_the_openapi_document_are_served() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let r = h.http.get(h.url("/")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = r.text().await.unwrap();
    assert_eq!(page, rlm_server::INDEX_HTML);

    let (status, doc) = h.get("/api/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    // Every route of the router (read from its source) is documented with
    // its methods, and nothing else is.
    let routes = router_routes();
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            documented.push((path.clone(), method.clone()));
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(!id.is_empty(), "{method} {path} has no operationId");
            assert!(op["tags"][0].is_string(), "{method} {path} has no tag");
            let statuses = op["responses"].as_object().unwrap();
            if path.starts_with("/api/") && path != "/api/openapi.json" && path != "/api/docs" {
                assert!(statuses.contains_key("401"), "{method} {path}: 401");
            }
            if op.get("requestBody").is_some() {
                assert!(statuses.contains_key("413"), "{method} {path}: 413");
                assert!(statuses.contains_key("400"), "{method} {path}: 400");
            }
        }
    }
    documented.sort();
    assert_eq!(documented, routes, "documented operations = router routes");
    let ids: std::collections::HashSet<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|i| i.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    assert_eq!(ids.len(), routes.len(), "operation ids are unique");
    for status in ["413", "415", "408", "400", "429", "507"] {
        assert!(
            doc["paths"]["/api/chat"]["post"]["responses"]
                .get(status)
                .is_some(),
            "/api/chat {status}"
        );
    }
    // Every documented operation answers (no "no such endpoint", no 405).
    for (path, method) in &documented {
        let concrete = path.replace("{id}", "x-1").replace("{name}", "nobody");
        let method: reqwest::Method = method.to_uppercase().parse().unwrap();
        let r = h
            .http
            .request(method.clone(), h.url(&concrete))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        assert_ne!(status, 405, "{method} {path}");
        assert!(
            !text.contains("no such endpoint"),
            "{method} {path}: {text}"
        );
    }
    // The docs page shows every operation, with no script.
    let r = h.http.get(h.url("/api/docs")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self';"), "{csp}");
    let html = r.text().await.unwrap();
    assert!(!html.contains("<script"));
    for id in &ids {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id} on /api/docs");
    }
    h.shutdown().await;
}

/// (path, method) of every route in the router's source (`api.rs`).
fn router_routes() -> Vec<(String, String)> {
    let src = include_str!("../src/api.rs");
    let mut out = Vec::new();
    for part in src.split(".route(").skip(1) {
        let path = part.split('"').nth(1).unwrap().to_string();
        let handlers = &part[..part.find("\n        .").unwrap_or(part.len())];
        for method in ["get", "post", "patch", "delete", "put"] {
            if handlers.contains(&format!("{method}(")) {
                out.push((path.clone(), method.to_string()));
            }
        }
    }
    out.sort();
    out.dedup();
    assert!(out.len() > 20, "routes read from api.rs: {out:?}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_newest_saved_runs_are_kept_on_disk() {
    let limits = Limits {
        saved_runs: 2,
        ..Limits::default()
    };
    let mut h = Harness::start(needle_script(), limits).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, view) = h
            .post("/api/chat", json!({"question": "What is the secret code?"}))
            .await;
        assert_eq!(status, 200, "{view}");
        ids.push(view["id"].as_str().unwrap().to_string());
        // Distinct modification times order the runs.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let runs = h.dir.path().join("store/runs");
    let (status, _) = h.get(&format!("/api/runs/{}", ids[0])).await;
    assert_eq!(status, 404, "the oldest run is gone");
    assert!(!runs.join(format!("{}.json", ids[0])).exists());
    assert!(!runs.join(format!("{}.jsonl", ids[0])).exists());
    for id in &ids[1..] {
        let (status, _) = h.get(&format!("/api/runs/{id}")).await;
        assert_eq!(status, 200);
        assert!(runs.join(format!("{id}.jsonl")).is_file());
    }
    let (_, list) = h.get("/api/runs").await;
    assert_eq!(list["runs"].as_array().unwrap().len(), 2);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_record_cut_short_reads_as_410_never_500() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let runs = h.dir.path().join("store/runs");
    // What a full disk or a crash left before records were written atomically.
    std::fs::write(runs.join("r1-0000000a.json"), b"").unwrap();
    std::fs::write(
        runs.join("r1-0000000b.json"),
        b"{\"id\": \"r1-0000000b\", \"quest",
    )
    .unwrap();
    std::fs::write(runs.join("r1-0000000c.jsonl"), b"{\"seq\": 0, \"t_").unwrap();
    for (id, expected) in [
        ("r1-0000000a", "is incomplete (0 bytes"),
        ("r1-0000000b", "is incomplete"),
        ("r1-0000000c", "was never saved"),
    ] {
        for path in [format!("/api/runs/{id}"), format!("/api/runs/{id}/events")] {
            let (status, v) = h.get(&path).await;
            assert_eq!(status, 410, "{path} → {v}");
            assert!(error_message(&v).contains(expected), "{path} → {v}");
        }
        let (status, v) = h.delete(&format!("/api/runs/{id}")).await;
        assert_eq!(status, 410, "{v}");
    }
    let (status, list) = h.get("/api/runs").await;
    assert_eq!(status, 200, "the list skips what cannot be read: {list}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_read_back_in_bounded_pages_and_findings_are_capped() {
    use rlm_engine::session::{
        MAX_PAGE_TURN_BYTES, MAX_SESSION_FINDINGS_BYTES, MAX_TURN_FINDINGS, SessionStore,
    };
    // A question whose code records 300 findings of 1 KB.
    let script = Script::new()
        .on(
            root().and(Matcher::any_contains("REPL output")),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
        )
        .on(
            root(),
            "```repl\nfor i in range(300):\n    add_finding(str(i) + ' ' + 'f' * 1000)\nprint('ok')\n```",
        );
    let mut h = Harness::start(script, Limits::default()).await;
    let (status, view) = h
        .post(
            "/api/chat",
            json!({"question": "Note everything.", "session": "big"}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    let kept = view["answer"]["findings"].as_array().unwrap().len();
    assert_eq!(kept, MAX_TURN_FINDINGS, "the run keeps a turn's worth");
    assert_eq!(view["answer"]["findings_omitted"], 300 - MAX_TURN_FINDINGS);

    // Far more than a page: 150 turns of 60 KB answers, many findings.
    {
        let mut s = SessionStore::open(&h.dir.path().join("store")).unwrap();
        let finding = rlm_engine::Finding {
            text: "g".repeat(4000),
            source: None,
        };
        for i in 0..150 {
            let turn = rlm_engine::Turn {
                question: format!("q{i}"),
                answer: "a".repeat(60_000),
                ..Default::default()
            };
            s.append("big", &turn, &vec![finding.clone(); 30]).unwrap();
        }
    }
    let r = h.http.get(h.url("/api/sessions/big")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let bytes = r.bytes().await.unwrap();
    assert!(
        bytes.len() <= MAX_PAGE_TURN_BYTES + MAX_SESSION_FINDINGS_BYTES + 64 * 1024,
        "one page is bounded: {} bytes",
        bytes.len()
    );
    let page: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(page["turns_total"], 151);
    let history = page["history"].as_array().unwrap();
    assert!(
        !history.is_empty() && history.len() <= 20,
        "{}",
        history.len()
    );
    assert_eq!(history.last().unwrap()["question"], "q149", "newest last");
    let first = page["first"].as_u64().unwrap();
    assert_eq!(first + history.len() as u64, 151);
    // The turns before it, a page at a time.
    let (status, older) = h
        .get(&format!("/api/sessions/big?before={first}&limit=3"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(older["history"].as_array().unwrap().len(), 3);
    assert_eq!(older["first"], first - 3);
    let (status, oldest) = h.get("/api/sessions/big?before=1&limit=100").await;
    assert_eq!(status, 200);
    assert_eq!(oldest["history"][0]["question"], "Note everything.");
    h.shutdown().await;
}
