//! The corpus commands run as a user runs them: the real `rlm` binary.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rlm() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlm"));
    cmd.env_remove("RLM_STORE").env_remove("RLM_TEST_PAUSE");
    cmd
}

fn run(args: &[&str]) -> Output {
    rlm().args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(path: &Path, content: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// A two-page PDF with one line of text per page, offsets computed exactly.
pub(crate) fn two_page_pdf() -> Vec<u8> {
    let page_text = [
        "Lease renewal terms on page one",
        "Parking rules on page two",
    ];
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>".into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 7 0 R >> >> >>".into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R /Resources << /Font << /F1 7 0 R >> >> >>".into(),
    ];
    for t in page_text {
        let stream = format!("BT /F1 18 Tf 72 700 Td ({t}) Tj ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    objects.push(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    );
    let objects: Vec<Vec<u8>> = objects.into_iter().map(String::into_bytes).collect();
    crate::common::pdf(&objects)
}

struct Fixture {
    _tmp: tempfile::TempDir,
    docs: PathBuf,
    store: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let docs = tmp.path().join("contracts");
        write(
            &docs.join("lease.md"),
            b"# Lease\n\nThe tenant shall give ninety days termination notice.\n",
        );
        write(
            &docs.join("page.html"),
            b"<html><head><title>Policy</title><script>var leak = 1;</script></head><body><p>Pets are allowed with a deposit.</p></body></html>",
        );
        write(&docs.join("data.csv"), b"name,amount\nalice,10\nbob,20\n");
        write(&docs.join("scan.pdf"), &two_page_pdf());
        write(&docs.join("latin1.txt"), b"caf\xe9 au lait\n");
        write(&docs.join("image.png"), b"\x89PNG\r\n\x1a\n\0\0");
        write(&docs.join("blob.dat"), b"\0\0\0binary");
        write(&docs.join("empty.txt"), b"");
        let store = tmp.path().join(".rlm");
        Fixture {
            _tmp: tmp,
            docs,
            store,
        }
    }

    fn s(&self) -> String {
        self.store.display().to_string()
    }

    fn index(&self, extra: &[&str]) -> Output {
        let store = self.s();
        let mut args = vec!["index", self.docs.to_str().unwrap(), "--store", &store];
        args.extend_from_slice(extra);
        run(&args)
    }
}

#[test]
fn index_search_show_docs_roundtrip() {
    let f = Fixture::new();
    let out = f.index(&["--verbose"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("5 added"), "{text}");
    assert!(
        text.contains("languages: undetermined (5 chunks), English (1 chunk)"),
        "{text}"
    );
    assert!(
        text.contains("skipped: 1 binary, 1 empty, 1 unsupported format (.png)"),
        "{text}"
    );
    assert!(
        text.contains("skipped contracts/blob.dat: binary"),
        "{text}"
    );
    assert!(
        text.contains("invalid UTF-8 in contracts/latin1.txt"),
        "{text}"
    );

    let out = run(&["docs", "--store", &f.s()]);
    assert!(out.status.success());
    let listing = stdout(&out);
    let last = listing.lines().last().unwrap_or_default();
    // Short files are too short to tell (analyzed as English).
    assert_eq!(
        last, "languages: undetermined (5 chunks), English (1 chunk)",
        "{listing}"
    );

    let out = run(&["docs", "--store", &f.s(), "--json"]);
    assert!(out.status.success());
    let docs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<(&str, &str)> = docs
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["path"].as_str().unwrap(), d["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("contracts/data.csv", "csv"),
            ("contracts/latin1.txt", "text"),
            ("contracts/lease.md", "markdown"),
            ("contracts/page.html", "html"),
            ("contracts/scan.pdf", "pdf"),
        ]
    );

    let out = run(&[
        "search",
        "termination notice",
        "--store",
        &f.s(),
        "-k",
        "3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hits[0]["path"], "contracts/lease.md");
    let chunk = hits[0]["chunk_id"].as_str().unwrap().to_string();

    let out = run(&["show", &chunk, "--store", &f.s()]);
    assert!(stdout(&out).contains("ninety days termination notice"));
    let out = run(&["show", "contracts/lease.md", "--store", &f.s(), "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["document"]["title"], "Lease");

    // HTML: visible text only. PDF: text per page, with page numbers on chunks.
    let out = run(&["search", "leak", "--store", &f.s(), "--json"]);
    assert_eq!(stdout(&out).trim(), "[]");
    let out = run(&["search", "parking", "--store", &f.s(), "--json"]);
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hits[0]["path"], "contracts/scan.pdf", "{hits}");
    let out = run(&[
        "show",
        hits[0]["chunk_id"].as_str().unwrap(),
        "--store",
        &f.s(),
        "--json",
    ]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["chunk"]["page"], 2, "{shown}");

    let again = f.index(&[]);
    assert!(stdout(&again).contains("0 added, 0 updated, 5 unchanged, 0 removed"));
}

#[test]
fn user_errors_are_one_line_with_nonzero_exit() {
    let f = Fixture::new();
    let out = run(&["index", "/definitely/not/here", "--store", &f.s()]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        "error: path /definitely/not/here does not exist: check the spelling, or run from the folder that contains it"
    );

    let out = run(&["search", "x", "--store", &f.s()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not an rlm store"),
        "{}",
        stderr(&out)
    );

    assert!(f.index(&[]).status.success());
    let out = run(&["search", "   ", "--store", &f.s()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("the query is empty"));
    let out = run(&["show", "no-such-id", "--store", &f.s()]);
    assert!(stderr(&out).contains("no chunk or document with id"));

    // An empty corpus is refused and the store keeps what it had.
    let empty = f.docs.parent().unwrap().join("empty");
    fs::create_dir_all(&empty).unwrap();
    let out = run(&["index", empty.to_str().unwrap(), "--store", &f.s()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("nothing to index"),
        "{}",
        stderr(&out)
    );
    let out = run(&["docs", "--store", &f.s()]);
    assert!(stdout(&out).contains("5 documents"));

    // Store folder not writable: it sits under a regular file.
    let file = f.docs.join("lease.md");
    let out = run(&[
        "index",
        f.docs.to_str().unwrap(),
        "--store",
        file.join("store").to_str().unwrap(),
    ]);
    assert!(stderr(&out).contains("is not writable"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"));
}

#[test]
fn corrupt_pdf_is_reported_and_the_rest_indexed() {
    let f = Fixture::new();
    write(
        &f.docs.join("broken.pdf"),
        b"%PDF-1.7\n1 0 obj << /Type /Catalog",
    );
    let out = f.index(&[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("contracts/broken.pdf: corrupt PDF"), "{err}");
    assert!(err.contains("1 file(s) could not be indexed"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(stdout(&out).contains("5 added"));
}

#[test]
fn unreadable_file_is_reported() {
    // Root reads anything, so drop to `nobody` with setpriv when running as root.
    let f = Fixture::new();
    let secret = f.docs.join("secret.txt");
    write(&secret, b"top secret\n");
    let as_root = unsafe_is_root();
    let setpriv = Path::new("/usr/bin/setpriv");
    if as_root && !setpriv.exists() {
        eprintln!("skipped: running as root without setpriv");
        return;
    }
    let chmod = |p: &Path, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(&secret, 0o000);
    let mut cmd = if as_root {
        // The test folders must be reachable by nobody.
        for dir in [f.docs.parent().unwrap(), f.docs.as_path()] {
            chmod(dir, 0o777);
        }
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_rlm"));
        c
    } else {
        rlm()
    };
    let out = cmd
        .args(["index", f.docs.to_str().unwrap(), "--store", &f.s()])
        .output()
        .unwrap();
    let err = stderr(&out);
    if as_root && err.contains("Permission denied") && !err.contains("secret.txt") {
        eprintln!("skipped: nobody cannot reach the test folder: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("contracts/secret.txt: cannot read"), "{err}");
    assert!(err.contains("fix its permissions"), "{err}");
}

fn unsafe_is_root() -> bool {
    // The uid is the owner of /proc/self; no libc needed.
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn wait_for(child: &mut std::process::Child, marker: &str) -> String {
    use std::io::Read;
    let mut err = child.stderr.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains(marker) {
        assert!(Instant::now() < deadline, "never saw {marker:?}: {seen}");
        let n = err.read(&mut buf).unwrap();
        assert!(n > 0, "process ended before {marker:?}: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    seen
}

#[test]
fn second_writer_is_refused_with_the_lock_holders_pid() {
    let f = Fixture::new();
    let mut first = rlm()
        .args(["index", f.docs.to_str().unwrap(), "--store", &f.s()])
        .env("RLM_TEST_PAUSE", "before_db_commit:30000")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&mut first, "test pause");
    let out = f.index(&[]);
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(!out.status.success());
    let expected = format!("is locked by pid {}", first.id());
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

/// Kills an indexing run at each stage and checks the previous store is intact.
#[test]
fn readers_keep_the_old_index_while_a_rebuild_runs() {
    let f = Fixture::new();
    assert!(f.index(&[]).status.success());
    let mut child = rlm()
        .args([
            "index",
            f.docs.to_str().unwrap(),
            "--store",
            &f.s(),
            "--rebuild",
        ])
        .env("RLM_TEST_PAUSE", "before_db_commit:30000")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&mut child, "test pause");
    // Mid-rebuild, before anything is committed: searches still find.
    let out = run(&["search", "termination", "--store", &f.s(), "--json"]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
}

#[test]
fn killed_index_runs_leave_a_usable_store() {
    for stage in ["before_db_commit", "between_commits"] {
        let f = Fixture::new();
        assert!(f.index(&[]).status.success());
        write(
            &f.docs.join("lease.md"),
            b"# Lease\n\nNow a zebra clause.\n",
        );
        write(&f.docs.join("added.txt"), b"a brand new giraffe document\n");
        let mut child = rlm()
            .args(["index", f.docs.to_str().unwrap(), "--store", &f.s()])
            .env("RLM_TEST_PAUSE", format!("{stage}:30000"))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&mut child, "test pause");
        child.kill().unwrap(); // SIGKILL: no cleanup runs.
        child.wait().unwrap();

        let out = run(&["search", "zebra", "--store", &f.s(), "--json"]);
        assert!(out.status.success(), "{stage}: {}", stderr(&out));
        let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let old = run(&["search", "termination", "--store", &f.s(), "--json"]);
        let old: serde_json::Value = serde_json::from_slice(&old.stdout).unwrap();
        match stage {
            // Died before anything committed: the old content, exactly.
            "before_db_commit" => {
                assert_eq!(hits.as_array().unwrap().len(), 0, "{stage}");
                assert_eq!(old.as_array().unwrap().len(), 1, "{stage}");
            }
            // Died after the database commit: the search index is repaired from it.
            _ => {
                assert_eq!(hits.as_array().unwrap().len(), 1, "{stage}");
                assert_eq!(old.as_array().unwrap().len(), 0, "{stage}");
            }
        }
        // And the next run completes normally.
        let out = f.index(&[]);
        assert!(out.status.success(), "{stage}: {}", stderr(&out));
        let out = run(&["search", "giraffe", "--store", &f.s(), "--json"]);
        let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(hits.as_array().unwrap().len(), 1, "{stage}");
    }
}
