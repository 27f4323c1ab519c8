//! The PostgreSQL server state against a real PostgreSQL server
//! (`rlm_store_pg::testing`; skipped with a message when there is none, a
//! failure under `RLM_REQUIRE_POSTGRES=1`): sessions behave as a store
//! folder's `sessions.sqlite` (the same answers to the same calls, caps
//! included), a run whose node stops renewing its lease is marked failed by
//! another node with a last event saying why and its node can write to it
//! no more, cancel requests reach the node's heartbeat, and the schema is
//! versioned apart from the store's.

use std::time::Duration;

use rlm_cluster::{Cluster, ClusterOptions};
use rlm_engine::session::{Finding, Turn};
use rlm_engine::trace::{Trace, TraceEvent};
use rlm_server::state::{ServerState, SessionBackend};
use rlm_server::{RunInfo, RunStatus, RunView, folder_state};
use rlm_store_pg::testing::test_database;

fn node(url: &str, name: &str, lease_ms: u64) -> Cluster {
    Cluster::connect(
        url,
        ClusterOptions {
            lease: Duration::from_millis(lease_ms),
            node_id: Some(name.into()),
        },
    )
    .unwrap()
}

fn turn(i: usize) -> Turn {
    Turn {
        question: format!("Question {i}: what does clause {i} say?"),
        answer: format!("Answer {i}"),
        partial: i.is_multiple_of(2),
        citations: Vec::new(),
    }
}

/// Everything a session shows, without the times (they differ by store).
fn shown(s: &dyn SessionBackend, name: &str) -> serde_json::Value {
    let page = s.page(name, None, 20).unwrap();
    let summary = s
        .summary(name)
        .unwrap()
        .map(|x| (x.title, x.turns, x.findings));
    let runs: Vec<_> = page.turn_meta.iter().map(|m| m.run_id.clone()).collect();
    serde_json::json!({
        "total": page.turns_total, "first": page.first, "history": page.history,
        "findings_total": page.findings_total, "findings": page.findings,
        "summary": summary, "runs": runs,
    })
}

#[test]
fn sessions_behave_as_in_a_store_folder() {
    let Some(db) = test_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local: ServerState = folder_state(dir.path()).unwrap();
    let cluster = node(db.url(), "n1", 10_000);
    let pg = cluster.state();
    for s in [local.sessions.as_ref(), pg.sessions.as_ref()] {
        assert!(s.create("empty", None).unwrap());
        assert!(!s.create("empty", Some("Again")).unwrap());
        assert!(s.create("titled", Some("  My case  ")).unwrap());
        // 205 turns, each with findings (one large): the session keeps its
        // newest 200 turns and the newest findings within the caps.
        for i in 0..205 {
            let findings = vec![
                Finding {
                    text: format!("fact {i}"),
                    source: Some(format!("doc {i}")),
                },
                Finding {
                    text: "x".repeat(5000),
                    source: None,
                },
            ];
            s.append_run("long", &turn(i), &findings, Some(&format!("r{i}")))
                .unwrap();
        }
        s.append_run("nul", &turn(1), &[], None).unwrap();
        assert!(s.rename("titled", "Renamed case").unwrap());
        assert!(!s.rename("nobody", "x").unwrap());
    }
    for name in ["empty", "titled", "long", "nul", "nobody"] {
        assert_eq!(
            shown(local.sessions.as_ref(), name),
            shown(pg.sessions.as_ref(), name),
            "session {name}"
        );
    }
    let long = pg.sessions.page("long", None, 20).unwrap();
    assert_eq!(long.turns_total, 200);
    assert_eq!(long.history.last().unwrap().question, turn(204).question);
    // Older pages, and the state a question loads.
    assert_eq!(
        local.sessions.page("long", Some(50), 10).unwrap().history,
        pg.sessions.page("long", Some(50), 10).unwrap().history
    );
    assert_eq!(
        local.sessions.load("long").unwrap(),
        pg.sessions.load("long").unwrap()
    );
    let names = |s: &dyn SessionBackend| -> Vec<String> {
        s.list().unwrap().into_iter().map(|x| x.name).collect()
    };
    let mut a = names(local.sessions.as_ref());
    let mut b = names(pg.sessions.as_ref());
    a.sort();
    b.sort();
    assert_eq!(a, b);
    for s in [local.sessions.as_ref(), pg.sessions.as_ref()] {
        assert!(s.delete("long").unwrap());
        assert!(!s.delete("long").unwrap());
        assert_eq!(s.summary("long").unwrap(), None);
    }
    // A NUL in a question is stored (as U+FFFD), not refused.
    let nul = Turn {
        question: "a\0b".into(),
        ..turn(3)
    };
    pg.sessions
        .append_run("nul", &nul, &[], Some("r2"))
        .unwrap();
    assert_eq!(
        pg.sessions.load("nul").unwrap().history[1].question,
        "a\u{FFFD}b"
    );
}

fn running_view(id: &str) -> RunView {
    RunView {
        run: RunInfo {
            id: id.into(),
            question: "q".into(),
            session: None,
            flow: "repl".into(),
            status: RunStatus::Running,
            started_at: rlm_engine::trace::now_rfc3339(),
            finished_at: None,
            history_runs: None,
        },
        answer: None,
        error: None,
    }
}

#[test]
fn a_run_whose_lease_expires_is_failed_by_another_node_and_its_node_is_shut_out() {
    let Some(db) = test_database() else { return };
    let a = node(db.url(), "node-a", 300).state();
    let b = node(db.url(), "node-b", 300).state();
    let trace = Trace::new().with_history();
    let mut log = a.runs.create(&running_view("r1-dead")).unwrap();
    let _keep = a.runs.create(&running_view("r1-alive")).unwrap();
    trace.emit(TraceEvent::Error {
        agent: "0".into(),
        message: "first".into(),
    });
    log.catch_up(&trace);
    // B sees A's run running, and its events.
    assert_eq!(
        b.runs.read("r1-dead").unwrap().unwrap().run.status,
        RunStatus::Running
    );
    assert_eq!(b.runs.events("r1-dead").next_batch(0, 10).len(), 1);
    // While A beats, nothing expires (it renews all its runs at once).
    for _ in 0..6 {
        let beat = a.runs.heartbeat(&["r1-alive".into()]).unwrap();
        assert!(beat.lost.is_empty() && beat.cancel.is_empty(), "{beat:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A stops beating: past the lease, B's heartbeat marks them failed.
    std::thread::sleep(Duration::from_millis(500));
    b.runs.heartbeat(&[]).unwrap();
    let dead = b.runs.read("r1-dead").unwrap().unwrap();
    assert_eq!(dead.run.status, RunStatus::Failed);
    assert!(dead.error.unwrap().contains("node-a"));
    let events = b.runs.events("r1-dead").next_batch(0, 10);
    assert_eq!(events.len(), 2);
    assert!(
        matches!(&events[1].event, TraceEvent::Error { message, .. } if message.contains("node lost"))
    );
    // A, back, can neither add events nor save an outcome; its heartbeat
    // says it lost the run.
    trace.emit(TraceEvent::Error {
        agent: "0".into(),
        message: "late".into(),
    });
    log.catch_up(&trace);
    assert_eq!(b.runs.events("r1-dead").next_batch(0, 10).len(), 2);
    let mut done = running_view("r1-dead");
    done.run.status = RunStatus::Done;
    let err = a.runs.save(&done).unwrap_err();
    assert_eq!(err, rlm_server::StateError::LeaseLost);
    assert!(err.to_string().contains("lease on it expired"), "{err}");
    let beat = a.runs.heartbeat(&["r1-dead".into()]).unwrap();
    assert_eq!(beat.lost, vec!["r1-dead".to_string()]);
}

#[test]
fn a_cancel_request_reaches_the_nodes_heartbeat() {
    let Some(db) = test_database() else { return };
    let a = node(db.url(), "node-a", 10_000).state();
    let b = node(db.url(), "node-b", 10_000).state();
    a.runs.create(&running_view("r2-run")).unwrap();
    assert!(
        a.runs
            .heartbeat(&["r2-run".into()])
            .unwrap()
            .cancel
            .is_empty()
    );
    let view = b.runs.request_cancel("r2-run").unwrap().unwrap();
    assert_eq!(view.run.status, RunStatus::Running);
    let beat = a.runs.heartbeat(&["r2-run".into()]).unwrap();
    assert_eq!(beat.cancel, vec!["r2-run".to_string()]);
    // Finished, it can be cancelled no more; an unknown run is None.
    let mut done = running_view("r2-run");
    done.run.status = RunStatus::Cancelled;
    a.runs.save(&done).unwrap();
    assert!(b.runs.request_cancel("r2-run").unwrap().is_none());
    assert!(b.runs.request_cancel("r2-none").unwrap().is_none());
}

#[test]
fn the_cluster_schema_is_versioned_apart_and_bad_settings_are_one_line() {
    let Some(db) = test_database() else { return };
    node(db.url(), "n", 10_000);
    assert_eq!(
        db.scalar("SELECT max(version) FROM rlm_cluster_schema")
            .unwrap(),
        Some(rlm_cluster::CLUSTER_SCHEMA_VERSION.to_string())
    );
    // Connecting again changes nothing.
    node(db.url(), "n2", 10_000);
    db.sql("INSERT INTO rlm_cluster_schema (version, description) VALUES (99, 'future')")
        .unwrap();
    let err = Cluster::connect(db.url(), ClusterOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cluster schema version 99"), "{err}");
    assert!(err.contains("upgrade rlm"), "{err}");
    assert!(!err.contains('\n'));
    let err = Cluster::connect(
        db.url(),
        ClusterOptions {
            lease: Duration::from_millis(10),
            node_id: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("out of range"), "{err}");
    let err = Cluster::connect(
        "postgres://rlm:secret@127.0.0.1:1/none",
        ClusterOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn a_node_connects_again_after_its_connection_ended() {
    let Some(db) = test_database() else { return };
    let a = node(db.url(), "node-r", 10_000).state();
    a.runs.create(&running_view("r3-run")).unwrap();
    // An administrator (or a restart of PostgreSQL) ends the node's connection.
    db.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = 'rlm serve node-r'",
    )
    .unwrap();
    // At most the call that meets the ended connection fails; a later one
    // connects anew and finds everything where it was.
    let mut answered = false;
    for _ in 0..100 {
        if a.runs.heartbeat(&["r3-run".into()]).is_ok() {
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(answered, "the node never connected again");
    assert_eq!(
        a.runs.read("r3-run").unwrap().unwrap().run.status,
        RunStatus::Running
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rlm serve node-r'"
        )
        .unwrap(),
        Some("1".into())
    );
}
