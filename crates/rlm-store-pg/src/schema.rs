//! The store's tables, as versioned migrations that `rlm` applies itself.
//!
//! `rlm_schema` records each applied migration (version, what it did,
//! when). Opening or indexing a store applies the missing ones in one
//! transaction, under an advisory lock so two processes never migrate at
//! once. A store whose schema is newer than this build knows is refused
//! with a message that says to upgrade `rlm` (nothing is changed).
//!
//! Every table is prefixed `rlm_`, so a store can share a database with
//! other applications.

use rlm_corpus::CorpusError;
use rlm_corpus::language::detect;

use crate::bm25;
use crate::db::{Db, Param};
use crate::languages;

/// A migration's step in Rust.
type Step = fn(&Db) -> Result<(), CorpusError>;

/// One step of the schema.
struct Migration {
    version: i32,
    description: &'static str,
    sql: &'static str,
    /// A step in Rust after the SQL (in the same transaction), for what
    /// SQL cannot do (detecting the stored documents' languages).
    then: Option<Step>,
}

/// Advisory lock key held while migrating (any constant unique to rlm).
const MIGRATION_LOCK: i64 = 0x726c_6d5f_6d69_6772; // "rlm_migr"

/// The migrations in order; the last one's version is what this build writes.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "documents, chunks with their full-text vectors, embeddings, metadata",
        sql: "
CREATE TABLE rlm_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO rlm_meta (key, value) VALUES ('generation', '0');
CREATE TABLE rlm_documents (
    id text PRIMARY KEY,
    path text NOT NULL UNIQUE,
    root text NOT NULL,
    kind text NOT NULL,
    size_bytes bigint NOT NULL,
    mtime_ns bigint NOT NULL,
    chars bigint NOT NULL,
    hash text NOT NULL,
    title text NOT NULL,
    chunk_count integer NOT NULL,
    lossy boolean NOT NULL,
    -- Only when the chunks do not tile the text; otherwise the text is the
    -- chunks' bodies in order (stored once).
    text text
);
CREATE TABLE rlm_chunks (
    id text PRIMARY KEY,
    doc_id text NOT NULL REFERENCES rlm_documents(id) ON DELETE CASCADE,
    ordinal integer NOT NULL,
    byte_start bigint NOT NULL,
    byte_end bigint NOT NULL,
    line_start integer NOT NULL,
    line_end integer NOT NULL,
    page integer,
    heading text,
    body text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
    UNIQUE (doc_id, ordinal)
);
CREATE INDEX rlm_chunks_tsv ON rlm_chunks USING gin (tsv);
-- No foreign key: a vector outlives its chunk's replacement and is reused
-- when the chunk's text is unchanged (as in the local store).
CREATE TABLE rlm_embeddings (
    chunk_id text PRIMARY KEY,
    doc_hash text NOT NULL,
    text_hash text NOT NULL,
    vector bytea NOT NULL
);
",
        then: None,
    },
    Migration {
        version: 2,
        description: "BM25 statistics: chunks per lexeme, chunk count and length; tsv kept in the row",
        // The lexeme vector stays in the chunk's row (it barely compresses;
        // out of line, every search read it from the TOAST table: twice the
        // cost per chunk). Only rows written from now on move. The
        // statistics are counted once here, then kept by each index run.
        sql: "
ALTER TABLE rlm_chunks ALTER COLUMN tsv SET STORAGE MAIN;
CREATE TABLE rlm_lexemes (lexeme text PRIMARY KEY, chunks bigint NOT NULL);
INSERT INTO rlm_lexemes (lexeme, chunks)
    SELECT l, count(*) FROM rlm_chunks, unnest(tsvector_to_array(tsv)) AS l GROUP BY l;
INSERT INTO rlm_meta (key, value)
    SELECT 'chunks', count(*)::text FROM rlm_chunks
    UNION ALL
    SELECT 'chunk_lexemes', coalesce(sum(length(tsv)), 0)::text FROM rlm_chunks;
",
        then: None,
    },
    Migration {
        version: 3,
        description: "the reply cache: model replies kept for reuse, least recently used evicted",
        sql: "
CREATE SEQUENCE rlm_reply_use;
CREATE TABLE rlm_replies (
    key text PRIMARY KEY,
    reply text NOT NULL,
    bytes bigint NOT NULL,
    last_used bigint NOT NULL
);
CREATE INDEX rlm_replies_last_used ON rlm_replies (last_used);
",
        then: None,
    },
    Migration {
        version: 4,
        description: "chunk locations for places other than pages (slides, sheet rows, messages)",
        sql: "ALTER TABLE rlm_chunks ADD COLUMN IF NOT EXISTS location text;",
        then: None,
    },
    Migration {
        version: 5,
        description: "languages: each document's language, its chunks analyzed with that language's text search configuration, term statistics per configuration",
        // The generated column's expression cannot change before
        // PostgreSQL 17: the column is made again (the table is rewritten
        // once). Every chunk starts as English, what it was analyzed as;
        // the Rust step then detects each document's language and
        // re-analyzes the others.
        sql: "
ALTER TABLE rlm_documents ADD COLUMN language text;
ALTER TABLE rlm_chunks ADD COLUMN lang_cfg regconfig NOT NULL DEFAULT 'english';
ALTER TABLE rlm_chunks ALTER COLUMN lang_cfg DROP DEFAULT;
ALTER TABLE rlm_chunks DROP COLUMN tsv;
ALTER TABLE rlm_chunks
    ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector(lang_cfg, body)) STORED,
    ALTER COLUMN tsv SET STORAGE MAIN;
CREATE INDEX rlm_chunks_tsv ON rlm_chunks USING gin (tsv);
ALTER TABLE rlm_lexemes ADD COLUMN cfg regconfig NOT NULL DEFAULT 'english';
ALTER TABLE rlm_lexemes ALTER COLUMN cfg DROP DEFAULT;
ALTER TABLE rlm_lexemes DROP CONSTRAINT rlm_lexemes_pkey, ADD PRIMARY KEY (cfg, lexeme);
CREATE TABLE rlm_configurations (
    cfg regconfig PRIMARY KEY,
    chunks bigint NOT NULL,
    chunk_lexemes bigint NOT NULL
);
INSERT INTO rlm_configurations (cfg, chunks, chunk_lexemes)
    SELECT 'english', count(*), coalesce(sum(length(tsv)), 0) FROM rlm_chunks HAVING count(*) > 0;
",
        then: Some(detect_stored),
    },
];

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// The schema version of the store at `db`, `None` when it holds no rlm store.
pub(crate) fn current_version(db: &Db) -> Result<Option<i32>, CorpusError> {
    let row = db.query_opt("SELECT to_regclass('rlm_schema') IS NOT NULL", vec![])?;
    let exists: bool = row.map(|r| r.get(0)).unwrap_or(false);
    if !exists {
        return Ok(None);
    }
    let row = db.query_opt("SELECT max(version) FROM rlm_schema", vec![])?;
    Ok(row.and_then(|r| r.get::<_, Option<i32>>(0)))
}

/// Refuses a schema newer than this build's.
fn check_not_newer(db: &Db, found: i32) -> Result<(), CorpusError> {
    if found > SCHEMA_VERSION {
        return Err(CorpusError::Backend(format!(
            "PostgreSQL store {} has schema version {found}, this rlm knows versions up to {SCHEMA_VERSION}: it was written by a newer rlm; upgrade rlm to use it (nothing was changed)",
            db.location()
        )));
    }
    Ok(())
}

/// Creates the store's tables or brings them to [`SCHEMA_VERSION`], in one
/// transaction. With `create` false, a database without an rlm store is
/// [`CorpusError::Backend`] saying how to create one.
pub(crate) fn migrate(db: &Db, create: bool) -> Result<(), CorpusError> {
    let found = current_version(db)?;
    match found {
        Some(v) if v == SCHEMA_VERSION => return Ok(()),
        Some(v) => check_not_newer(db, v)?,
        None if !create => {
            return Err(CorpusError::Backend(format!(
                "PostgreSQL store {0} holds no rlm store yet: run `rlm index <paths> --store {0}` to create one",
                db.location()
            )));
        }
        None => {}
    }
    db.batch("BEGIN")?;
    let applied = apply_pending(db);
    match applied {
        Ok(()) => db.batch("COMMIT"),
        Err(e) => {
            let _ = db.batch("ROLLBACK");
            Err(e)
        }
    }
}

fn apply_pending(db: &Db) -> Result<(), CorpusError> {
    db.execute(
        "SELECT pg_advisory_xact_lock($1)",
        vec![Box::new(MIGRATION_LOCK)],
    )?;
    db.batch(
        "CREATE TABLE IF NOT EXISTS rlm_schema (
            version integer PRIMARY KEY,
            description text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )?;
    // Read again under the lock: another process may have migrated meanwhile.
    let found = current_version(db)?.unwrap_or(0);
    check_not_newer(db, found)?;
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        db.batch(m.sql)?;
        if let Some(step) = m.then {
            step(db)?;
        }
        db.execute(
            "INSERT INTO rlm_schema (version, description) VALUES ($1, $2)",
            vec![Box::new(m.version), Box::new(m.description)],
        )?;
    }
    Ok(())
}

/// Documents read per round trip when detecting the stored ones' languages.
const DETECT_BATCH: i64 = 200;

/// Detects the language of every stored document that has none yet (a
/// store written before languages were detected) and re-analyzes the
/// chunks of those not in English with their language's configuration,
/// keeping the term statistics exact. Runs inside the migration's
/// transaction.
pub(crate) fn detect_stored(db: &Db) -> Result<(), CorpusError> {
    let configurations = languages::Configurations::load(db)?;
    bm25::begin_counting(db)?;
    let mut after = String::new();
    loop {
        let rows = db.query(
            "SELECT d.id, coalesce(d.text,
                    (SELECT string_agg(c.body, '' ORDER BY c.ordinal) FROM rlm_chunks c
                     WHERE c.doc_id = d.id), '')
             FROM rlm_documents d WHERE d.id > $1 ORDER BY d.id LIMIT $2",
            vec![Box::new(after.clone()) as Param, Box::new(DETECT_BATCH)],
        )?;
        let Some(last) = rows.last() else { break };
        after = last.get(0);
        let (mut ids, mut codes) = (Vec::new(), Vec::new());
        let (mut moved, mut cfgs) = (Vec::new(), Vec::new());
        for r in &rows {
            let id: String = r.get(0);
            let code = detect(r.get::<_, &str>(1));
            let cfg = configurations.for_language(code);
            if cfg != languages::FALLBACK {
                moved.push(id.clone());
                cfgs.push(cfg.to_string());
            }
            ids.push(id);
            codes.push(code.to_string());
        }
        db.execute(
            "UPDATE rlm_documents d SET language = t.code
             FROM unnest($1::text[], $2::text[]) AS t(id, code) WHERE d.id = t.id",
            vec![Box::new(ids) as Param, Box::new(codes)],
        )?;
        if !moved.is_empty() {
            bm25::count(db, &moved, -1)?;
            db.execute(
                "UPDATE rlm_chunks c SET lang_cfg = t.cfg::regconfig
                 FROM unnest($1::text[], $2::text[]) AS t(id, cfg) WHERE c.doc_id = t.id",
                vec![Box::new(moved.clone()) as Param, Box::new(cfgs)],
            )?;
            bm25::count(db, &moved, 1)?;
        }
    }
    bm25::finish_counting(db)?;
    db.batch("ALTER TABLE rlm_documents ALTER COLUMN language SET NOT NULL")
}
