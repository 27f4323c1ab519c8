//! A real PostgreSQL server for tests: each test gets a database of its own
//! on a shared throwaway server.
//!
//! The server is the one named by `RLM_TEST_POSTGRES_URL` (CI starts one
//! with `scripts/start-postgres`); without it, the first test starts one
//! itself with that script in `/tmp/rlm-test-postgres` (installing
//! PostgreSQL from the distribution's packages when missing) and later runs
//! reuse it (`scripts/start-postgres --stop /tmp/rlm-test-postgres` stops
//! it). Only when
//! PostgreSQL can be neither found nor installed does [`test_database`]
//! return `None`, after printing why, so the test can skip; with
//! `RLM_REQUIRE_POSTGRES=1` (CI) that is a failure instead.

use std::path::PathBuf;
use std::sync::OnceLock;

use rlm_corpus::CorpusError;

use crate::db::Db;

/// A database of its own for one test, dropped with it.
#[derive(Debug)]
pub struct TestDatabase {
    admin: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Its URL (`postgres://…/rlm_test_…`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs SQL statements in this database (for tests that tamper with a
    /// store: a newer schema, a held lock).
    pub fn sql(&self, statements: &str) -> Result<(), CorpusError> {
        Db::connect(&self.url, "rlm test")?.batch(statements)
    }

    /// Holds the store's writer lock (as a running `rlm index` does) until
    /// the returned guard is dropped.
    pub fn hold_write_lock(&self) -> Result<WriteLockHolder, CorpusError> {
        let db = Db::connect(&self.url, "rlm index (pid 4242, a test's)")?;
        db.execute(
            "SELECT pg_advisory_lock($1)",
            vec![Box::new(crate::write::WRITE_LOCK)],
        )?;
        Ok(WriteLockHolder { _db: db })
    }

    /// The first column of the first row of `query`, as text (`None` for NULL
    /// or no row).
    pub fn scalar(&self, query: &str) -> Result<Option<String>, CorpusError> {
        scalar(&self.url, query)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(db) = Db::connect(&self.admin, "rlm test") {
            let _ = db.batch(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// The first column of the first row of `query` in the database at `url`,
/// as text (`None` for NULL or no row).
pub fn scalar(url: &str, query: &str) -> Result<Option<String>, CorpusError> {
    let db = Db::connect(url, "rlm test")?;
    let row = db.query_opt(format!("SELECT ({query})::text"), vec![])?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
}

/// A connection holding the writer lock; dropping it releases the lock.
#[derive(Debug)]
pub struct WriteLockHolder {
    _db: Db,
}

/// A new empty database on the test server, or `None` (after printing why)
/// when PostgreSQL cannot be had and `RLM_REQUIRE_POSTGRES` is not set.
pub fn test_database() -> Option<TestDatabase> {
    let admin = match server() {
        Ok(url) => url,
        Err(why) => {
            if std::env::var("RLM_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("RLM_REQUIRE_POSTGRES=1 but there is no PostgreSQL: {why}");
            }
            eprintln!("skipped: no PostgreSQL for this test ({why})");
            return None;
        }
    };
    let name = format!("rlm_test_{}_{}", std::process::id(), unique_suffix());
    let db = Db::connect(&admin, "rlm test").unwrap_or_else(|e| panic!("{e}"));
    db.batch(format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    let url = format!("{base}/{name}");
    Some(TestDatabase { admin, name, url })
}

/// The test server's admin URL (started once per test process when needed),
/// or why there is none (a message for the skipped test's output).
fn server() -> Result<String, String> {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    SERVER.get_or_init(find_or_start).clone()
}

fn find_or_start() -> Result<String, String> {
    if let Ok(url) = std::env::var("RLM_TEST_POSTGRES_URL")
        && !url.trim().is_empty()
    {
        return Ok(url.trim().to_string());
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Under the temporary folder: when started by root the server runs as
    // `postgres`, which must reach its folder (a checkout may be private).
    let dir = std::env::temp_dir().join("rlm-test-postgres");
    let url_file = dir.join("url");
    if let Ok(url) = std::fs::read_to_string(&url_file)
        && Db::connect(url.trim(), "rlm test").is_ok()
    {
        return Ok(url.trim().to_string());
    }
    let script = root.join("scripts/start-postgres");
    if dir.exists() {
        // A server from an earlier run that no longer answers.
        let _ = std::process::Command::new(&script)
            .arg("--stop")
            .arg(&dir)
            .status();
    }
    let out = std::process::Command::new(&script)
        .env("RLM_PG_DIR", &dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: PostgreSQL could not be installed or started",
            script.display()
        ));
    }
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let _ = std::fs::write(&url_file, &url);
    Ok(url)
}

/// A number unique in this process, mixed with the clock (a database left
/// by an earlier process with the same pid gets another name).
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}_{nanos:08x}", N.fetch_add(1, Ordering::Relaxed))
}
