//! What the page builds on, on a real socket over a real store: sessions as
//! conversations (ids, titles, rename, turns with their runs, older files
//! kept), the document list and pages of a document's text, uploads, paths
//! and re-indexes as jobs (with a question asked meanwhile), the health
//! check, and the retrieval toggles of a request.

use std::time::Duration;

use rlm_server::{Limits, ServerOptions};
use serde_json::{Value, json};

use crate::common;
use common::{Harness, error_message, needle_script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_titled_renamed_and_their_turns_reopen_their_runs() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    // An older session file: turns only, no titles, no run ids.
    {
        let mut s = rlm_engine::SessionStore::open(&h.store_dir()).unwrap();
        s.append(
            "old-case",
            &rlm_engine::Turn {
                question: "What did the memo say about the move?".into(),
                answer: "It describes the office move.".into(),
                ..Default::default()
            },
            &[],
        )
        .unwrap();
    }
    // A new conversation from the page: created empty, then asked in.
    let (status, created) = h.post("/api/sessions", json!({})).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["turns"], 0);
    let (status, empty) = h.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(status, 200, "an empty session reads as empty: {empty}");
    assert_eq!(empty["turns_total"], 0);
    for q in ["What is the secret code?", "And again, the secret code?"] {
        let (status, v) = h
            .post("/api/chat", json!({"question": q, "session": id}))
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let (_, list) = h.get("/api/sessions").await;
    let mine = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        mine["title"], "What is the secret code?",
        "titled from its first question"
    );
    assert_eq!(mine["turns"], 2);
    assert_eq!(
        list["sessions"][0]["id"],
        id.as_str(),
        "most recently active first"
    );
    let old = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "old-case")
        .unwrap();
    assert_eq!(
        old["title"], "What did the memo say about the move?",
        "older sessions kept and titled"
    );

    // Renamed with spaces and another script.
    let (status, renamed) = h
        .patch(
            &format!("/api/sessions/{id}"),
            json!({"title": "  Codes & keys — Kündigung "}),
        )
        .await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["title"], "Codes & keys — Kündigung");
    for (body, want) in [
        (json!({"title": ""}), "the title is empty"),
        (json!({"title": "two\nlines"}), "one line"),
        (json!({"name": "x"}), "unknown field"),
    ] {
        let (status, v) = h.patch(&format!("/api/sessions/{id}"), body).await;
        assert_eq!(status, 400, "{v}");
        assert!(error_message(&v).contains(want), "{v}");
    }
    let (status, _) = h.patch("/api/sessions/nobody", json!({"title": "x"})).await;
    assert_eq!(status, 404);
    let (status, v) = h.post("/api/sessions", json!({"id": id})).await;
    assert_eq!(status, 409, "{v}");

    // Each turn names its run, which reopens with its steps.
    let (_, page) = h.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(page["title"], "Codes & keys — Kündigung");
    let turns = page["history"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    let run_id = turns[1]["run_id"].as_str().unwrap();
    assert!(turns[1]["created_at"].is_string());
    let (status, run) = h.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(run["question"], "And again, the secret code?");
    assert_eq!(h.events(run_id, None).await.last().unwrap().0, "end");
    let (_, runs) = h.get(&format!("/api/runs?session={id}")).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2);
    let (_, old_page) = h.get("/api/sessions/old-case").await;
    assert_eq!(old_page["history"][0]["run_id"], Value::Null);

    // Survives a restart; deleting removes it.
    h.shutdown().await;
    h.serve(Limits::default()).await;
    let (_, page) = h.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(page["title"], "Codes & keys — Kündigung");
    let (status, _) = h.delete(&format!("/api/sessions/{id}")).await;
    assert_eq!(status, 204);
    let (status, _) = h.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(status, 404);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_listed_searched_and_read_in_pages() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let (status, all) = h.get("/api/documents").await;
    assert_eq!(status, 200);
    assert_eq!(all["total"], 3);
    let paths: Vec<&str> = all["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["docs/a_intro.txt", "docs/b_notes.txt", "docs/c_misc.txt"]
    );
    let (_, page) = h.get("/api/documents?offset=1&limit=1").await;
    assert_eq!(page["documents"][0]["path"], "docs/b_notes.txt");
    assert_eq!(page["total"], 3);
    // Bad query strings are 400s in JSON that name the parameter; a limit
    // of 0 or past the page size is refused, not silently changed.
    let id = all["documents"][0]["id"].as_str().unwrap().to_string();
    for (path, want) in [
        ("/api/documents?limit=abc".to_string(), "limit"),
        ("/api/documents?offset=-1".to_string(), "offset"),
        ("/api/documents?limit=0".to_string(), "limit=0"),
        ("/api/documents?limit=100000".to_string(), "1 to 500"),
        (format!("/api/documents/{id}?limit=0"), "limit=0"),
        ("/api/runs?limit=0".to_string(), "limit=0"),
    ] {
        let r = h.request(reqwest::Method::GET, &path).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 400, "{path}");
        assert_eq!(r.headers()["content-type"], "application/json", "{path}");
        let v: Value = r.json().await.unwrap();
        assert!(error_message(&v).contains(want), "{path}: {v}");
    }
    // By path, then by text.
    let (_, by_path) = h.get("/api/documents?q=MISC").await;
    assert_eq!(by_path["documents"][0]["path"], "docs/c_misc.txt");
    assert_eq!(by_path["documents"][0]["match"], "path");
    let (_, by_text) = h.get("/api/documents?q=secret").await;
    assert_eq!(by_text["total"], 1);
    assert_eq!(by_text["documents"][0]["path"], "docs/b_notes.txt");
    assert_eq!(by_text["documents"][0]["match"], "text");
    assert!(
        by_text["documents"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("secret")
    );

    // One document, its text in pages that join up.
    let id = by_text["documents"][0]["id"].as_str().unwrap();
    let mut text = String::new();
    let mut offset = Some(0u64);
    let mut pages = 0;
    while let Some(o) = offset {
        let (status, d) = h
            .get(&format!("/api/documents/{id}?offset={o}&limit=10"))
            .await;
        assert_eq!(status, 200, "{d}");
        assert_eq!(d["path"], "docs/b_notes.txt");
        text.push_str(d["text"]["content"].as_str().unwrap());
        offset = d["text"]["next_offset"].as_u64();
        pages += 1;
    }
    assert_eq!(text, common::DOCS[1].1);
    assert!(pages > 3);
    let (status, v) = h.get("/api/documents/nope").await;
    assert_eq!(status, 404);
    assert!(error_message(&v).contains("GET /api/documents"));
    h.shutdown().await;
}

async fn job_done(h: &Harness, job: &Value) -> Value {
    let id = job["id"].as_str().unwrap();
    h.poll(&format!("/api/index/jobs/{id}"), |j| {
        matches!(j["status"].as_str(), Some("done" | "failed"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_paths_and_reindexes_are_jobs_the_page_can_follow() {
    // Off by default: 403 naming the flag; nothing to re-index: 409.
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let r = h
        .http
        .post(h.url("/api/uploads?name=a.txt"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(r.text().await.unwrap().contains("--allow-upload"));
    let (status, v) = h.post("/api/index", json!({"path": "/tmp"})).await;
    assert_eq!(status, 403);
    assert!(error_message(&v).contains("--allow-index-paths"));
    let (status, v) = h.post("/api/reindex", json!({})).await;
    assert_eq!(status, 409);
    assert!(error_message(&v).contains("--source"), "{v}");
    h.shutdown().await;

    let uploads = h.dir.path().join("uploads");
    let more = h.dir.path().join("more");
    std::fs::create_dir_all(&more).unwrap();
    std::fs::write(
        more.join("d_budget.txt"),
        "The budget for 2026 is 12,000 euros.\n",
    )
    .unwrap();
    // Indexing server paths needs a token and the folders it may read.
    for (token, roots, want) in [
        (None, vec![more.clone()], "needs --token"),
        (Some("t0ken-1234".to_string()), vec![], "needs --index-root"),
        (
            Some("t0ken-1234".to_string()),
            vec!["rel".into()],
            "absolute",
        ),
    ] {
        let options = ServerOptions {
            allow_index_paths: true,
            token,
            index_roots: roots,
            ..ServerOptions::default()
        };
        let err = options.validate().unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    h.options = ServerOptions {
        upload_dir: Some(uploads.clone()),
        allow_index_paths: true,
        token: Some("t0ken-1234".into()),
        index_roots: vec![more.canonicalize().unwrap()],
        sources: vec![h.dir.path().join("docs").canonicalize().unwrap()],
        ..ServerOptions::default()
    };
    h.token = h.options.token.clone();
    h.serve(Limits {
        max_upload_bytes: 1000,
        ..Limits::default()
    })
    .await;
    let (_, info) = h.get("/api/info").await;
    assert_eq!(
        info["features"],
        json!({"upload": true, "index_paths": true, "reindex": true})
    );

    // An upload: saved, indexed, listed, searchable; its job followed to the end.
    let r = h
        .request(
            reqwest::Method::POST,
            "/api/uploads?name=notes/e%20parking.txt",
        )
        .header("content-type", "text/plain")
        .body("Parking permit number 8812 for the new office.\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let v: Value = r.json().await.unwrap();
    assert!(uploads.join("notes/e parking.txt").is_file());
    let job = job_done(&h, &v["job"]).await;
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(job["kind"], "upload");
    assert_eq!(job["report"]["added"], 1);
    assert_eq!(job["documents"], 4);
    let (_, found) = h.get("/api/documents?q=8812").await;
    assert_eq!(found["documents"][0]["path"], "uploads/notes/e parking.txt");
    // Bad names and sizes, each named.
    for (name, want) in [
        ("../x.txt", "plain name"),
        (".env", "plain name"),
        ("", "name the file"),
    ] {
        let r = h
            .request(reqwest::Method::POST, &format!("/api/uploads?name={name}"))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{name}");
        assert!(r.text().await.unwrap().contains(want), "{name}");
    }
    // A folder link planted in the upload folder is not written through.
    let victim = h.dir.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("victim.txt"), "kept\n").unwrap();
    std::os::unix::fs::symlink(&victim, uploads.join("link")).unwrap();
    let r = h
        .request(reqwest::Method::POST, "/api/uploads?name=link/victim.txt")
        .body("overwritten")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().await.unwrap().contains("symbolic link"));
    assert_eq!(
        std::fs::read_to_string(victim.join("victim.txt")).unwrap(),
        "kept\n"
    );
    std::fs::remove_file(uploads.join("link")).unwrap();
    let r = h
        .request(reqwest::Method::POST, "/api/uploads?name=big.txt")
        .body("x".repeat(1001))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert!(r.text().await.unwrap().contains("--max-upload-bytes"));

    // A path on the server.
    let (status, v) = h.post("/api/index", json!({"path": "relative/dir"})).await;
    assert_eq!(status, 400);
    assert!(error_message(&v).contains("absolute"), "{v}");
    // Outside the roots, directly or through a link inside them: refused.
    let outside = h.dir.path().join("docs");
    std::os::unix::fs::symlink(&outside, more.join("escape")).unwrap();
    for p in [outside.clone(), more.join("escape"), "/etc/shadow".into()] {
        let (status, v) = h
            .post("/api/index", json!({"path": p.display().to_string()}))
            .await;
        assert!(status == 403 || status == 400, "{p:?}: {status} {v}");
        if status == 403 {
            assert!(error_message(&v).contains("--index-root"), "{v}");
        }
    }
    std::fs::remove_file(more.join("escape")).unwrap();
    let (status, v) = h
        .post("/api/index", json!({"path": more.display().to_string()}))
        .await;
    assert_eq!(status, 202, "{v}");
    let job = job_done(&h, &v["job"]).await;
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(job["documents"], 5);

    // A re-index of every source while a question is asked: the question
    // waits for the new store, then answers; the changed file is seen.
    std::fs::write(
        h.dir.path().join("docs/c_misc.txt"),
        "Lunch options, parking spaces and bikes.\n",
    )
    .unwrap();
    let (status, v) = h.post("/api/reindex", json!({})).await;
    assert_eq!(status, 202, "{v}");
    let (status, asked) = h
        .post("/api/chat", json!({"question": "What is the secret code?"}))
        .await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["status"], "done");
    let job = job_done(&h, &v["job"]).await;
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(job["report"]["updated"], 1, "{job}");
    let paths: Vec<String> = job["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        paths.len(),
        3,
        "docs, the upload folder and the indexed path: {paths:?}"
    );
    let (_, jobs) = h.get("/api/index/jobs").await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 3);
    let (status, _) = h.get("/api/index/jobs/nope").await;
    assert_eq!(status, 404);
    // The sources are remembered across restarts.
    assert!(h.store_dir().join(rlm_server::SOURCES_FILE).is_file());
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_the_model_and_the_store_and_is_cached() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let (status, v) = h.get("/api/health").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["model"]["status"], "unknown", "no model client given");
    assert_eq!(v["store"]["status"], "ok");
    assert_eq!(v["store"]["documents"], 3);
    h.shutdown().await;

    h.options.model = Some(h.model.client());
    h.serve(Limits::default()).await;
    let (status, v) = h.get("/api/health").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["model"]["status"], "ok");
    assert_eq!(v["model"]["root"], "root-model");
    let asked = h.model.request_count();
    let (_, again) = h.get("/api/health").await;
    assert_eq!(again["checked_at"], v["checked_at"], "cached");
    assert_eq!(
        h.model.request_count(),
        asked,
        "the provider is not asked again"
    );
    h.shutdown().await;

    // The model down: 503 naming its address.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = listener.local_addr().unwrap();
    drop(listener);
    let mut config = h.model.config(rlm_llm::ProviderKind::OpenAi);
    config.base_url = format!("http://{dead}/v1");
    h.options.model = Some(rlm_llm::LlmClient::from_config(config).unwrap());
    h.serve(Limits::default()).await;
    let (status, v) = h.get("/api/health").await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["status"], "down");
    assert_eq!(v["model"]["status"], "down");
    assert!(
        v["model"]["message"]
            .as_str()
            .unwrap()
            .contains(&dead.to_string()),
        "{v}"
    );
    assert_eq!(v["store"]["status"], "ok");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_toggles_pick_the_flow_and_conflicts_are_named() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    for (body, flow) in [
        (json!({"expand_files": true}), "pipeline"),
        (
            json!({"rlm_summarize": true, "high_recall": false}),
            "pipeline",
        ),
        (json!({"expand_files": false}), "rag"),
        (
            json!({"use_rlm": true, "expand_files": true, "rlm_summarize": true}),
            "pipeline",
        ),
        (json!({"high_recall": true}), "configured"),
    ] {
        let mut body = body;
        body["question"] = json!("What is the secret code?");
        body["max_wall_secs"] = json!(5);
        let (status, v) = h.post("/api/runs", body.clone()).await;
        assert_eq!(status, 202, "{body}: {v}");
        let id = v["id"].as_str().unwrap();
        let (_, run) = h.get(&format!("/api/runs/{id}")).await;
        assert_eq!(run["flow"], flow, "{body}");
        let _ = h.delete(&format!("/api/runs/{id}")).await;
        h.poll(&format!("/api/runs/{id}"), |r| r["status"] != "running")
            .await;
    }
    for (body, want) in [
        (
            json!({"flow": "pipeline", "expand_files": false}),
            "expand_files=false conflicts with flow=pipeline",
        ),
        (
            json!({"flow": "rag", "rlm_summarize": true}),
            "rlm_summarize=true conflicts with flow=rag",
        ),
        (
            json!({"use_rlm": false, "expand_files": true}),
            "expand_files=true conflicts with use_rlm=false",
        ),
        (
            json!({"expand_files": true, "rlm_summarize": false}),
            "expand_files and rlm_summarize disagree",
        ),
        (json!({"high_recall": "yes please"}), "high_recall"),
    ] {
        let mut body = body;
        body["question"] = json!("q");
        let (status, v) = h.post("/api/runs", body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert!(error_message(&v).contains(want), "{body}: {v}");
    }
    let (_, info) = h.get("/api/info").await;
    assert_eq!(info["defaults"]["high_recall"], true);
    tokio::time::sleep(Duration::from_millis(10)).await;
    h.shutdown().await;
}
