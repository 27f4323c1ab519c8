//! `rlm serve` under a hostile world: a disk that fills up mid-run, a
//! `kill -9` mid-run, clients that send half a request, hold idle
//! connections or stop reading an event stream. The real binary on a real
//! socket, with the scripted model over real HTTP; every wait is bounded so a
//! regression fails instead of hanging.
//!
//! The full-disk test mounts a 2 MiB tmpfs, which needs root: it skips with
//! the reason elsewhere, and fails instead under `CI=true` or
//! `RLM_REQUIRE_HOSTILE=1`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use crate::serve_support;
use serve_support::{NOTES, Server, exchange, first_turn, message, model, wait_until};

/// Whether a run's trace file shows it waiting on the model.
fn waiting_on_model(store: &Path, id: &str) -> bool {
    std::fs::read_to_string(store.join("runs").join(format!("{id}.jsonl")))
        .is_ok_and(|t| t.contains("llm_request"))
}

/// A tmpfs of `size` mounted at a fresh folder, unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let uid = std::process::Command::new("id")
            .arg("-u")
            .output()
            .map_err(|e| format!("cannot run id -u: {e}"))?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Err("not root: mounting a small tmpfs needs root".into());
        }
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("disk");
        std::fs::create_dir(&dir).unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            dir,
            _parent: parent,
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = std::process::Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.dir)
                .status();
        }
    }
}

/// Skips (printing why), or fails where hostile tests must run.
fn skip(reason: &str) {
    let required = std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("RLM_REQUIRE_HOSTILE").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "the hostile test cannot run here ({reason}), but CI=true or RLM_REQUIRE_HOSTILE=1 requires it"
    );
    eprintln!("skipped: {reason}");
}

/// Writes `dir/filler` until the file system is full, to the last byte.
fn fill_disk(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    for chunk in [64 * 1024, 4096, 1] {
        let buf = vec![0u8; chunk];
        while f.write_all(&buf).is_ok() {}
    }
    let _ = f.sync_all();
    path
}

#[test]
fn a_full_disk_is_reported_and_loses_nothing_already_stored() {
    let t0 = Instant::now();
    let disk = match Tmpfs::mount("2m") {
        Ok(d) => d,
        Err(reason) => return skip(&reason),
    };
    let work = tempfile::tempdir().unwrap();
    let docs = work.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join(NOTES.0), NOTES.1).unwrap();
    let store = disk.dir.join("store");
    let o = common::rlm(
        work.path(),
        &["index", "docs", "--store", store.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let model = model(1500);
    let server = Server::start(work.path(), &store, &model, &[]);

    // Stored while there is room.
    let first_id = first_turn(&server);

    // The disk fills while the next question waits on the model.
    let addr = server.addr.clone();
    let asking = std::thread::spawn(move || {
        exchange(
            &addr,
            "POST",
            "/api/chat",
            Some(r#"{"question": "A slow question: the code?", "session": "s1"}"#),
        )
    });
    wait_until(20, "the second run starts", || {
        let (_, list) = server.get("/api/runs");
        list["runs"][0]["status"] == "running"
            && waiting_on_model(&store, list["runs"][0]["id"].as_str().unwrap_or(""))
    });
    let filler = fill_disk(&disk.dir);
    let (status, v) = asking.join().unwrap();
    assert_eq!(status, 507, "a turn that was not saved is no 200: {v}");
    let m = message(&v);
    assert!(m.contains("answered, but not saved"), "{m}");
    assert!(m.contains("the session turn"), "{m}");
    assert!(m.contains("disk is full"), "{m}");
    assert!(m.contains("the run record"), "{m}");
    assert!(m.contains("No space left on device"), "{m}");
    assert_eq!(v["run"]["status"], "done", "{v}");
    assert!(
        v["run"]["answer"]["answer"]
            .as_str()
            .unwrap()
            .contains("4721"),
        "the client still gets the answer: {v}"
    );
    let second_id = v["run"]["id"].as_str().unwrap().to_string();

    // A new question on the full disk is refused before any model call.
    let calls = model.request_count();
    let (status, v) = server.post("/api/chat", r#"{"question": "And now?"}"#);
    assert_eq!(status, 507, "{v}");
    assert!(message(&v).contains("cannot start the run"), "{v}");
    assert!(message(&v).contains("No space left on device"), "{v}");
    assert_eq!(model.request_count(), calls, "no model budget spent");

    // Nothing stored before is lost.
    let (status, v) = server.get(&format!("/api/runs/{first_id}"));
    assert_eq!((status, &v["status"]), (200, &Value::from("done")), "{v}");
    let (status, s) = server.get("/api/sessions/s1");
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["turns_total"], 1, "{s}");
    assert_eq!(s["history"][0]["question"], "What is the secret code?");

    // After a restart (the disk still full): the run that could not be
    // saved reads as failed, never 500; the first is intact.
    server.stop();
    let server = Server::start(work.path(), &store, &model, &[]);
    let (status, v) = server.get(&format!("/api/runs/{second_id}"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "failed", "{v}");
    assert!(v["error"].as_str().unwrap().contains("interrupted"), "{v}");
    let (status, v) = server.get(&format!("/api/runs/{first_id}"));
    assert_eq!(status, 200, "{v}");
    assert!(v["answer"]["answer"].as_str().unwrap().contains("4721"));
    let (status, list) = server.get("/api/runs");
    assert_eq!(status, 200);
    assert_eq!(list["runs"].as_array().unwrap().len(), 2, "{list}");
    for entry in std::fs::read_dir(store.join("runs")).unwrap() {
        let path = entry.unwrap().path();
        let len = std::fs::metadata(&path).unwrap().len();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(!name.ends_with(".tmp"), "temporary file left: {name}");
        if name.ends_with(".json") {
            assert!(len > 0, "a 0-byte run record: {name}");
        }
    }

    // With room again, questions are answered and saved.
    std::fs::remove_file(filler).unwrap();
    let (status, v) = server.post(
        "/api/chat",
        r#"{"question": "What is the secret code?", "session": "s1"}"#,
    );
    assert_eq!(status, 200, "{v}");
    let (_, s) = server.get("/api/sessions/s1");
    assert_eq!(s["turns_total"], 2, "{s}");
    server.stop();
    eprintln!("full-disk test: {:?}", t0.elapsed());
}

#[test]
fn a_run_in_flight_at_kill_9_is_listed_as_interrupted_after_a_restart() {
    let t0 = Instant::now();
    let dir = common::indexed_docs(&[NOTES]);
    let store = dir.path().join("store");
    let model = model(5_000);
    let server = Server::start(dir.path(), &store, &model, &[]);
    let done_id = first_turn(&server);
    let (status, started) = server.post(
        "/api/runs",
        r#"{"question": "A slow question: the code?", "session": "s1"}"#,
    );
    assert_eq!(status, 202, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    wait_until(20, "the run waits on the model", || {
        waiting_on_model(&store, &id)
    });

    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    drop(server);

    let server = Server::start(dir.path(), &store, &model, &[]);
    let (status, list) = server.get("/api/runs");
    assert_eq!(status, 200, "{list}");
    let runs = list["runs"].as_array().unwrap();
    let listed = runs.iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(listed["status"], "failed", "{list}");
    let (status, v) = server.get(&format!("/api/runs/{id}"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "failed");
    assert!(v["finished_at"].is_string(), "{v}");
    assert!(v["error"].as_str().unwrap().contains("interrupted"), "{v}");
    // Its steps up to the kill replay, then the end.
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /api/runs/{id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut events = String::new();
    s.read_to_string(&mut events).unwrap();
    assert!(events.contains("\"type\":\"llm_request\""), "{events}");
    assert!(events.contains("event: end"), "{events}");
    // The finished run and the session are intact.
    let (status, v) = server.get(&format!("/api/runs/{done_id}"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "done");
    assert!(v["answer"]["answer"].as_str().unwrap().contains("4721"));
    let (status, s) = server.get("/api/sessions/s1");
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["turns_total"], 1, "{s}");
    server.stop();
    eprintln!("kill -9 test: {:?}", t0.elapsed());
}

/// Reads until the server closes the connection; (bytes, seconds taken).
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, f64) {
    let t = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "the server kept the connection open for {:?}: {e}",
                t.elapsed()
            ),
        }
    }
    (out, t.elapsed().as_secs_f64())
}

/// VmHWM (peak resident memory) of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn slow_and_half_open_clients_are_cut_off_and_others_are_served() {
    let t0 = Instant::now();
    let dir = common::indexed_docs(&[NOTES]);
    let store = dir.path().join("store");
    // A finished run with a 24 MB trace, to be replayed to clients that do
    // not read it.
    let id = "r1-00000001";
    let runs = store.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    {
        let mut trace = std::io::BufWriter::new(
            std::fs::File::create(runs.join(format!("{id}.jsonl"))).unwrap(),
        );
        let text = "x".repeat(8000);
        for seq in 0..3000 {
            writeln!(
                trace,
                r#"{{"seq":{seq},"t_ms":{seq},"ts":"2026-01-01T00:00:00.000Z","type":"flow_step","agent":"0","step":"s","message":"{text}","data":null}}"#
            )
            .unwrap();
        }
    }
    std::fs::write(
        runs.join(format!("{id}.json")),
        format!(
            r#"{{"id":"{id}","question":"q","session":null,"flow":"repl","status":"done","started_at":"2026-01-01T00:00:00.000Z","finished_at":"2026-01-01T00:00:01.000Z","answer":null,"error":null}}"#
        ),
    )
    .unwrap();
    let model = model(0);
    let server = Server::start(
        dir.path(),
        &store,
        &model,
        &[
            "--header-timeout",
            "1",
            "--body-timeout",
            "1",
            "--write-timeout",
            "1",
            "--max-connections",
            "12",
        ],
    );
    let addr = server.addr.as_str();

    // Half a request head, then nothing: closed after the header timeout,
    // while other requests are served.
    let mut half_head = TcpStream::connect(addr).unwrap();
    half_head
        .write_all(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // A whole head and half a body: 408, then closed.
    let mut half_body = TcpStream::connect(addr).unwrap();
    half_body
        .write_all(
            b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"question\"",
        )
        .unwrap();
    let (status, info) = server.get("/api/info");
    assert_eq!(status, 200, "served meanwhile: {info}");
    assert_eq!(info["limits"]["max_connections"], 12);
    let (_, waited) = read_until_closed(&mut half_head, Duration::from_secs(10));
    assert!(waited < 5.0, "half a head held {waited} s");
    let (answer, waited) = read_until_closed(&mut half_body, Duration::from_secs(10));
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive in time"), "{answer}");
    assert!(waited < 5.0, "half a body held {waited} s");

    // Event streams nobody reads: the server writes until the client's
    // buffers are full, then drops them after the write timeout; it holds a
    // batch of events per stream, not the 24 MB trace.
    let before = peak_rss_kib(server.child.id());
    let mut stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(
                s,
                "GET /api/runs/{id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    let (status, _) = server.get("/api/info");
    assert_eq!(status, 200, "served while streams stall");
    for s in &mut stalled {
        let (bytes, waited) = read_until_closed(s, Duration::from_secs(10));
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with("HTTP/1.1 200"),
            "{}",
            &text[..100.min(text.len())]
        );
        assert!(
            !text.contains("event: end"),
            "a stalled stream was cut off, not finished ({} bytes)",
            bytes.len()
        );
        assert!(waited < 5.0, "{waited}");
    }
    let grown_mib = (peak_rss_kib(server.child.id()) - before) / 1024;
    eprintln!("4 stalled streams: the server's peak memory grew {grown_mib} MiB");
    assert!(
        grown_mib < 64,
        "the server grew {grown_mib} MiB for 4 stalled streams"
    );

    // Idle connections up to the cap: one more is refused at once with
    // 503; the idle ones are closed after the header timeout, then new
    // requests are served again.
    let mut idle: Vec<TcpStream> = (0..12).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut refused = TcpStream::connect(addr).unwrap();
    let (answer, waited) = read_until_closed(&mut refused, Duration::from_secs(10));
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("connections open"), "{answer}");
    assert!(waited < 1.0, "refused at once, not after {waited} s");
    for s in &mut idle {
        let (_, waited) = read_until_closed(s, Duration::from_secs(10));
        assert!(waited < 5.0, "an idle connection held {waited} s");
    }
    let (status, _) = server.get("/api/info");
    assert_eq!(status, 200);
    server.stop();
    eprintln!("slow clients test: {:?}", t0.elapsed());
}
