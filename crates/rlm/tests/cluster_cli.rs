//! Several real `rlm serve` processes over one PostgreSQL store (a real
//! PostgreSQL server: `rlm_store_pg::testing`; skipped with a message when
//! there is none, a failure under `RLM_REQUIRE_POSTGRES=1`): they share
//! sessions and runs, a run started on one node streams from another
//! (resumed with `Last-Event-ID`), a cancel sent to one node stops the run
//! on the other, a run whose node was SIGKILLed ends failed once its lease
//! expires (its events up to the kill kept, nothing else lost), the
//! cluster-wide model-call limit holds across nodes, a re-index made by
//! `rlm index` is what every node answers from without a restart, and a
//! node whose store connection ended connects again.

use crate::common;
use crate::serve_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use rlm_llm::testing::{Matcher, Reply, Script, ScriptedServer};
use rlm_store_pg::testing::{TestDatabase, test_database};
use serde_json::Value;
use serve_support::{NOTES, Server, exchange, model, wait_until};

/// A store in a fresh database with the notes document indexed.
fn indexed_store(dir: &Path) -> Option<TestDatabase> {
    let db = test_database()?;
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join(NOTES.0), NOTES.1).unwrap();
    let out = common::rlm(dir, &["index", "docs", "--store", db.url()], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(db)
}

fn node(dir: &Path, db: &TestDatabase, model: &ScriptedServer, extra: &[&str]) -> Server {
    Server::start(dir, Path::new(db.url()), model, extra)
}

/// A store in a fresh database and two nodes over it (`extra` flags on
/// both); `None` when there is no PostgreSQL. Dropping it drops the
/// database: keep it for the whole test.
struct Cluster {
    a: Server,
    b: Server,
    db: TestDatabase,
    // Last: the nodes stop before their folder goes.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// SIGTERM to both nodes; each must stop cleanly.
    fn stop(self) {
        self.a.stop();
        self.b.stop();
    }
}

fn two_nodes(model: &ScriptedServer, extra: &[&str]) -> Option<Cluster> {
    let dir = tempfile::tempdir().unwrap();
    let db = indexed_store(dir.path())?;
    let a = node(dir.path(), &db, model, extra);
    let b = node(dir.path(), &db, model, extra);
    Some(Cluster { a, b, db, dir })
}

/// One server-sent event.
#[derive(Debug)]
struct SseEvent {
    id: Option<u64>,
    event: String,
    data: Value,
}

/// Reads the event stream of run `id` from `addr` (after `last_id` when
/// given) until `end`, or until `stop_after` trace events (then hangs up).
fn stream(addr: &str, id: &str, last_id: Option<u64>, stop_after: Option<usize>) -> Vec<SseEvent> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let resume = last_id.map_or(String::new(), |n| format!("Last-Event-ID: {n}\r\n"));
    write!(
        s,
        "GET /api/runs/{id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n{resume}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut lines = BufReader::new(s).lines();
    let mut events = Vec::new();
    let (mut ev_id, mut ev_name, mut data) = (None, String::new(), String::new());
    let mut in_head = true;
    while let Some(Ok(line)) = lines.next() {
        if in_head {
            if line.is_empty() {
                in_head = false;
            } else if line.starts_with("HTTP/1.1") {
                assert!(line.contains(" 200 "), "{line}");
            }
            continue;
        }
        // Chunked framing: size lines are hex digits only; events are
        // `field: value` lines.
        if let Some(v) = line.strip_prefix("id:") {
            ev_id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("event:") {
            ev_name = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        } else if line.is_empty() && !ev_name.is_empty() {
            let event = SseEvent {
                id: ev_id.take(),
                event: std::mem::take(&mut ev_name),
                data: serde_json::from_str(&std::mem::take(&mut data)).unwrap_or(Value::Null),
            };
            let end = event.event == "end";
            events.push(event);
            let traces = events.iter().filter(|e| e.event == "trace").count();
            if end || stop_after.is_some_and(|n| traces >= n) {
                return events;
            }
        }
    }
    events
}

fn start_run(server: &Server, body: &str) -> String {
    let (status, v) = server.post("/api/runs", body);
    assert_eq!(status, 202, "{v}");
    v["id"].as_str().unwrap().to_string()
}

fn status_of(server: &Server, id: &str) -> String {
    let (code, v) = server.get(&format!("/api/runs/{id}"));
    assert_eq!(code, 200, "{v}");
    v["status"].as_str().unwrap_or_default().to_string()
}

#[test]
fn two_nodes_share_sessions_and_runs() {
    let model = model(0);
    let Some(cluster) = two_nodes(&model, &[]) else {
        return;
    };
    let (a, b) = (&cluster.a, &cluster.b);
    let first = serve_support::first_turn(a);
    // B sees A's session, its turn with the run that answered it, and the run.
    let (status, v) = b.get("/api/sessions/s1");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["turns_total"], 1, "{v}");
    assert_eq!(v["history"][0]["run_id"], first.as_str(), "{v}");
    assert_eq!(v["title"], "What is the secret code?", "{v}");
    let (status, v) = b.get(&format!("/api/runs/{first}"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "done");
    assert!(
        v["answer"]["answer"].as_str().unwrap().contains("4721"),
        "{v}"
    );
    // The next turn, asked on B, carries A's turn in its history.
    let (status, v) = b.post(
        "/api/chat",
        r#"{"question": "And again, the code?", "session": "s1"}"#,
    );
    assert_eq!(status, 200, "{v}");
    let last = model
        .requests()
        .into_iter()
        .rfind(|r| !common::is_judge(r))
        .unwrap();
    assert!(
        last.body.to_string().contains("What is the secret code?"),
        "the second turn's prompt lacks the first turn"
    );
    // Renamed on B, seen on A; listed on both; deleted on A, gone on B.
    let (status, v) = exchange(
        &b.addr,
        "PATCH",
        "/api/sessions/s1",
        Some(r#"{"title": "Codes and keys"}"#),
    );
    assert_eq!(status, 200, "{v}");
    let (_, v) = a.get("/api/sessions");
    assert_eq!(v["sessions"][0]["title"], "Codes and keys", "{v}");
    assert_eq!(v["sessions"][0]["turns"], 2, "{v}");
    let (_, v) = a.get("/api/runs?session=s1");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2, "{v}");
    let (status, _) = exchange(&a.addr, "DELETE", "/api/sessions/s1", None);
    assert_eq!(status, 204);
    let (status, v) = b.get("/api/sessions/s1");
    assert_eq!(status, 404, "{v}");
    // A session created on A with a title of its own; a second create is 409.
    let (status, v) = a.post("/api/sessions", r#"{"id": "case-9", "title": "Case nine"}"#);
    assert_eq!(status, 201, "{v}");
    let (status, v) = b.post("/api/sessions", r#"{"id": "case-9"}"#);
    assert_eq!(status, 409, "{v}");
    cluster.stop();
}

#[test]
fn a_run_started_on_one_node_streams_from_another_and_resumes() {
    let model = model(1500);
    let Some(cluster) = two_nodes(&model, &[]) else {
        return;
    };
    let (a, b) = (&cluster.a, &cluster.b);
    let id = start_run(a, r#"{"question": "What is the slow secret code?"}"#);
    // From B while A waits on the model: the first events, then hang up.
    let head = stream(&b.addr, &id, None, Some(2));
    let seen: Vec<u64> = head.iter().filter_map(|e| e.id).collect();
    assert_eq!(seen, vec![0, 1], "{head:?}");
    assert_eq!(head[0].data["type"], "run_started", "{head:?}");
    // Resumed after event 1: the rest, in order, then the end with the answer.
    let rest = stream(&b.addr, &id, Some(1), None);
    let end = rest.last().unwrap();
    assert_eq!(end.event, "end", "{rest:?}");
    assert_eq!(end.data["status"], "done", "{end:?}");
    assert!(
        end.data["answer"]["answer"]
            .as_str()
            .unwrap()
            .contains("4721")
    );
    let ids: Vec<u64> = rest.iter().filter_map(|e| e.id).collect();
    assert_eq!(ids.first(), Some(&2), "{rest:?}");
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    // The same events as the node that ran it sends.
    let whole_on_a = stream(&a.addr, &id, None, None);
    let on_a: Vec<String> = whole_on_a
        .iter()
        .filter(|e| e.event == "trace")
        .map(|e| e.data.to_string())
        .collect();
    let on_b: Vec<String> = head
        .iter()
        .chain(&rest)
        .filter(|e| e.event == "trace")
        .map(|e| e.data.to_string())
        .collect();
    assert_eq!(on_a, on_b);
    // An unknown run is 404 on any node.
    let (status, _) = b.get("/api/runs/r0-nope/events");
    assert_eq!(status, 404);
    cluster.stop();
}

#[test]
fn a_cancel_sent_to_one_node_stops_the_run_on_another() {
    let model = model(20_000);
    let Some(cluster) = two_nodes(&model, &[]) else {
        return;
    };
    let (a, b) = (&cluster.a, &cluster.b);
    let id = start_run(a, r#"{"question": "The slow secret code?"}"#);
    wait_until(20, "the run's model call", || model.request_count() >= 1);
    let (status, v) = exchange(&b.addr, "DELETE", &format!("/api/runs/{id}"), None);
    assert_eq!(status, 202, "{v}");
    wait_until(15, "the run cancelled on A", || {
        status_of(a, &id) == "cancelled"
    });
    assert_eq!(status_of(b, &id), "cancelled");
    let (status, v) = exchange(&b.addr, "DELETE", &format!("/api/runs/{id}"), None);
    assert_eq!(status, 409, "{v}");
    let (status, _) = exchange(&b.addr, "DELETE", "/api/runs/r0-nope", None);
    assert_eq!(status, 404);
    cluster.stop();
}

#[test]
fn a_run_whose_node_was_killed_ends_failed_on_the_other_node() {
    let model = model(60_000);
    let Some(mut cluster) = two_nodes(&model, &["--lease-secs", "1"]) else {
        return;
    };
    let (a, b) = (&mut cluster.a, &cluster.b);
    let done = serve_support::first_turn(a);
    let before = model.request_count();
    let id = start_run(
        a,
        r#"{"question": "The slow secret code?", "session": "s1"}"#,
    );
    wait_until(20, "the run's model call", || {
        model.request_count() > before
    });
    let head = stream(&b.addr, &id, None, Some(2));
    assert_eq!(head.len(), 2, "{head:?}");
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // Still running right after the kill, failed once the lease expired.
    wait_until(30, "the run marked failed", || {
        status_of(b, &id) == "failed"
    });
    let (_, v) = b.get(&format!("/api/runs/{id}"));
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("stopped renewing its lease"), "{error}");
    assert!(v["finished_at"].is_string(), "{v}");
    // Its events up to the kill, then the one saying why; the stream ends.
    let events = stream(&b.addr, &id, None, None);
    let traces: Vec<&SseEvent> = events.iter().filter(|e| e.event == "trace").collect();
    assert!(traces.len() >= 3, "{events:?}");
    assert_eq!(traces[0].data["type"], "run_started");
    let last = traces.last().unwrap();
    assert_eq!(last.data["type"], "error", "{last:?}");
    assert!(
        last.data["message"].as_str().unwrap().contains("node lost"),
        "{last:?}"
    );
    assert_eq!(events.last().unwrap().event, "end");
    assert_eq!(events.last().unwrap().data["status"], "failed");
    // Nothing else lost: the earlier run and its session turn, and B answers.
    assert_eq!(status_of(b, &done), "done");
    let (_, v) = b.get("/api/sessions/s1");
    assert_eq!(v["turns_total"], 1, "{v}");
    let (status, v) = b.post("/api/chat", r#"{"question": "What is the code?"}"#);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "done", "{v}");
    cluster.b.stop();
}

#[test]
fn the_model_call_limit_holds_across_nodes() {
    let model = ScriptedServer::spawn(
        Script::new()
            .on(
                Matcher::any_contains("REPL output"),
                Reply::text("FINAL(The secret code is 4721 [[doc:0 \"The secret code is 4721\"]])")
                    .with_latency_ms(250),
            )
            .otherwise(Reply::text("```repl\nprint(context[:200])\n```").with_latency_ms(250)),
    );
    let flags = ["--max-runs", "4", "--cluster-max-concurrent", "2"];
    let Some(cluster) = two_nodes(&model, &flags) else {
        return;
    };
    let (a, b, db, dir) = (&cluster.a, &cluster.b, &cluster.db, &cluster.dir);
    let mut ids = Vec::new();
    for i in 0..4 {
        for server in [a, b] {
            ids.push((
                server,
                start_run(server, &format!(r#"{{"question": "Code number {i}?"}}"#)),
            ));
        }
    }
    for (server, id) in &ids {
        wait_until(120, "the runs finished", || {
            status_of(server, id) != "running"
        });
        assert_eq!(status_of(server, id), "done");
    }
    // Eight runs of two calls each on two nodes (the answer's claim is its
    // passage word for word: no judge call): never more than two calls at
    // once at the provider, and the two slots were both used.
    let judged = model
        .requests()
        .iter()
        .filter(|r| common::is_judge(r))
        .count();
    assert_eq!((model.request_count() - judged, judged), (16, 0));
    assert_eq!(model.peak_concurrency(), 2);
    // Out of range: one line saying so.
    let out = common::rlm(
        dir.path(),
        &[
            "serve",
            "--store",
            db.url(),
            "--cluster-max-concurrent",
            "0",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--cluster-max-concurrent 0"), "{err}");
    let out = common::rlm(
        dir.path(),
        &["serve", "--store", db.url(), "--lease-secs", "0"],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--lease-secs 0 is out of range"), "{err}");
    cluster.stop();
}

/// A model that prints the whole `context` and then answers, so its last
/// prompt holds every document a run saw.
fn context_model() -> ScriptedServer {
    ScriptedServer::spawn(
        Script::new()
            .on(Matcher::any_contains("REPL output"), "FINAL(Read them.)")
            .otherwise("```repl\nprint(context)\n```"),
    )
}

/// Asks a question on `server` and returns the text of the model's last
/// prompt (the REPL output of `print(context)`: the documents the run saw).
fn context_seen(server: &Server, model: &ScriptedServer) -> String {
    let (status, v) = server.post("/api/chat", r#"{"question": "What do the documents say?"}"#);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "done", "{v}");
    model.requests().last().unwrap().body.to_string()
}

/// The paths `GET /api/documents` lists on `server`, without the `docs/`
/// they were indexed under.
fn listed_paths(server: &Server) -> Vec<String> {
    let (status, v) = server.get("/api/documents");
    assert_eq!(status, 200, "{v}");
    let mut paths: Vec<String> = v["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            d["path"]
                .as_str()
                .unwrap()
                .trim_start_matches("docs/")
                .to_string()
        })
        .collect();
    paths.sort();
    paths
}

/// Re-indexes the cluster's `docs` folder through the CLI, then waits past
/// the interval at which a node looks for a new generation (250 ms).
fn reindex(cluster: &Cluster) {
    let out = common::rlm(
        cluster.dir.path(),
        &["index", "docs", "--store", cluster.db.url()],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(400));
}

#[test]
fn nodes_answer_from_a_reindex_made_elsewhere_without_restarting() {
    let model = context_model();
    let Some(cluster) = two_nodes(&model, &[]) else {
        return;
    };
    let docs = cluster.dir.path().join("docs");
    // Both nodes answer from the first generation (and have looked at it).
    for node in [&cluster.a, &cluster.b] {
        let seen = context_seen(node, &model);
        assert!(seen.contains("The secret code is 4721"), "{seen}");
        assert_eq!(listed_paths(node), ["b_notes.txt"]);
    }
    // rlm index, not through any node: a changed document and two new ones.
    std::fs::write(
        docs.join(NOTES.0),
        "Meeting notes.\nThe secret code is now 5832.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("a_memo.txt"),
        "Memo: the audit starts on 3 May.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("c_terms.txt"),
        "Clause 12: either party may end the contract with 90 days notice.\n",
    )
    .unwrap();
    reindex(&cluster);
    for node in [&cluster.a, &cluster.b] {
        let seen = context_seen(node, &model);
        assert!(seen.contains("The secret code is now 5832"), "{seen}");
        assert!(seen.contains("Clause 12: either party"), "{seen}");
        assert!(seen.contains("the audit starts on 3 May"), "{seen}");
        assert!(
            !seen.contains("4721"),
            "the old text is still served: {seen}"
        );
        assert_eq!(
            listed_paths(node),
            ["a_memo.txt", "b_notes.txt", "c_terms.txt"]
        );
    }
    // A removed document leaves both nodes' documents at the next generation.
    std::fs::remove_file(docs.join("a_memo.txt")).unwrap();
    reindex(&cluster);
    for node in [&cluster.a, &cluster.b] {
        assert_eq!(listed_paths(node), ["b_notes.txt", "c_terms.txt"]);
        let seen = context_seen(node, &model);
        assert!(
            !seen.contains("audit"),
            "a removed document is served: {seen}"
        );
        assert!(seen.contains("c_terms.txt]"), "{seen}");
    }
    cluster.stop();
}

#[test]
fn a_node_reads_the_store_again_after_its_connection_ended() {
    let model = context_model();
    let Some(cluster) = two_nodes(&model, &[]) else {
        return;
    };
    assert_eq!(listed_paths(&cluster.a), ["b_notes.txt"]);
    // PostgreSQL restarted, or an administrator ended the nodes' store
    // connections (`rlm (pid N)`; their state connections are apart).
    cluster
        .db
        .sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name LIKE 'rlm (pid %'",
        )
        .unwrap();
    // At most the request that meets the ended connection fails; the next
    // connects again.
    let (status, v) = cluster.a.get("/api/documents");
    if status != 200 {
        assert_eq!(status, 500, "{v}");
        assert!(v.to_string().contains("connection"), "{v}");
    }
    assert_eq!(listed_paths(&cluster.a), ["b_notes.txt"]);
    let seen = context_seen(&cluster.a, &model);
    assert!(seen.contains("The secret code is 4721"), "{seen}");
    // The re-index watch reads through the new connection too.
    std::fs::write(
        cluster.dir.path().join("docs/d_new.txt"),
        "A new rule: badges are returned on Fridays.\n",
    )
    .unwrap();
    reindex(&cluster);
    for node in [&cluster.a, &cluster.b] {
        // B meets its ended connection here, if it had not noticed yet.
        let _ = node.get("/api/documents");
        assert_eq!(listed_paths(node), ["b_notes.txt", "d_new.txt"]);
        let seen = context_seen(node, &model);
        assert!(seen.contains("badges are returned on Fridays"), "{seen}");
    }
    cluster.stop();
}
