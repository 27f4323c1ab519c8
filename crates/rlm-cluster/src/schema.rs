//! The cluster's tables, as versioned migrations of their own: recorded
//! in `rlm_cluster_schema`, a sequence separate from the store's
//! `rlm_schema` (`rlm-store-pg`), so the two evolve without colliding. A
//! node applies the missing ones at start, in one transaction under an
//! advisory lock; a database whose cluster schema is newer than this build
//! knows is refused (nothing changed).

use crate::{ClusterError, p};
use rlm_store_pg::db::Db;

/// One step of the schema.
struct Migration {
    version: i32,
    description: &'static str,
    sql: &'static str,
}

/// Advisory lock key held while migrating ("rlm_clus").
const MIGRATION_LOCK: i64 = 0x726c_6d5f_636c_7573;

const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    description: "sessions, turns, findings, runs with leases, run events, model-call slots",
    sql: "
CREATE TABLE rlm_sessions (
    name text PRIMARY KEY,
    title text,
    created_at text NOT NULL
);
CREATE TABLE rlm_turns (
    id bigserial PRIMARY KEY,
    session text NOT NULL,
    question text NOT NULL,
    answer text NOT NULL,
    partial boolean NOT NULL,
    citations text NOT NULL,
    run_id text,
    created_at text NOT NULL
);
CREATE INDEX rlm_turns_session ON rlm_turns (session, id);
CREATE TABLE rlm_findings (
    id bigserial PRIMARY KEY,
    session text NOT NULL,
    text text NOT NULL,
    source text,
    created_at text NOT NULL
);
CREATE INDEX rlm_findings_session ON rlm_findings (session, id);
-- A run: its record as the API shows it (JSON), the node answering it and
-- that node's lease; another node may ask it to cancel.
CREATE TABLE rlm_runs (
    id text PRIMARY KEY,
    session text,
    status text NOT NULL,
    started timestamptz NOT NULL DEFAULT clock_timestamp(),
    node text NOT NULL,
    lease_until timestamptz NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT false,
    view text NOT NULL
);
CREATE INDEX rlm_runs_started ON rlm_runs (started DESC, id DESC);
CREATE INDEX rlm_runs_running ON rlm_runs (lease_until) WHERE status = 'running';
-- A run's trace events (the SSE stream's), one row each, as JSON.
CREATE TABLE rlm_run_events (
    run_id text NOT NULL REFERENCES rlm_runs(id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (run_id, seq)
);
-- The cluster-wide model-call limit: N slots per provider key, each free
-- or held by one call of one node until its lease ends.
CREATE TABLE rlm_model_slots (
    key text NOT NULL,
    slot integer NOT NULL,
    holder text,
    lease_until timestamptz,
    PRIMARY KEY (key, slot)
);
",
}];

/// The cluster schema version this build reads and writes.
pub const CLUSTER_SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

fn current_version(db: &Db) -> Result<i32, ClusterError> {
    let exists: bool = db
        .query_opt(
            "SELECT to_regclass('rlm_cluster_schema') IS NOT NULL",
            vec![],
        )?
        .map(|r| r.get(0))
        .unwrap_or(false);
    if !exists {
        return Ok(0);
    }
    let row = db.query_opt("SELECT max(version) FROM rlm_cluster_schema", vec![])?;
    Ok(row.and_then(|r| r.get::<_, Option<i32>>(0)).unwrap_or(0))
}

fn check_not_newer(db: &Db, found: i32) -> Result<(), ClusterError> {
    if found > CLUSTER_SCHEMA_VERSION {
        return Err(ClusterError::NewerSchema {
            location: db.location().to_string(),
            found,
        });
    }
    Ok(())
}

/// Creates the cluster's tables or brings them to
/// [`CLUSTER_SCHEMA_VERSION`], in one transaction. `db` must not be used by
/// anything else meanwhile (it holds the transaction).
pub(crate) fn migrate(db: &Db) -> Result<(), ClusterError> {
    let found = current_version(db)?;
    if found == CLUSTER_SCHEMA_VERSION {
        return Ok(());
    }
    check_not_newer(db, found)?;
    db.batch("BEGIN")?;
    let applied = (|| {
        db.execute("SELECT pg_advisory_xact_lock($1)", vec![p(MIGRATION_LOCK)])?;
        db.batch(
            "CREATE TABLE IF NOT EXISTS rlm_cluster_schema (
                version integer PRIMARY KEY,
                description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )?;
        // Read again under the lock: another node may have migrated meanwhile.
        let found = current_version(db)?;
        check_not_newer(db, found)?;
        for m in MIGRATIONS.iter().filter(|m| m.version > found) {
            db.batch(m.sql)?;
            db.execute(
                "INSERT INTO rlm_cluster_schema (version, description) VALUES ($1, $2)",
                vec![p(m.version), p(m.description)],
            )?;
        }
        Ok::<(), ClusterError>(())
    })();
    match applied {
        Ok(()) => Ok(db.batch("COMMIT")?),
        Err(e) => {
            let _ = db.batch("ROLLBACK");
            Err(e)
        }
    }
}
