//! Multi-turn sessions (`rlm ask --session NAME`): earlier questions, answers
//! and findings, persisted in `<store>/sessions.sqlite` (a file of its own, so
//! the corpus schema is never touched).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

/// The session database file name inside a store folder.
pub const SESSIONS_FILE: &str = "sessions.sqlite";

/// Longest accepted session name.
pub const MAX_SESSION_NAME: usize = 64;

/// One earlier question of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The question.
    pub question: String,
    /// The answer given.
    pub answer: String,
    /// Whether that answer was partial.
    pub partial: bool,
    /// The answer's citations as they were verified then (empty for turns
    /// saved before citations were kept).
    #[serde(default)]
    pub citations: Vec<crate::Citation>,
}

/// A fact recorded with `add_finding`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The fact.
    pub text: String,
    /// Where it came from (free text, e.g. a citation marker).
    pub source: Option<String>,
}

/// What a session brings into a new question.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// The session name.
    pub name: String,
    /// Earlier turns, oldest first.
    pub history: Vec<Turn>,
    /// Findings so far, oldest first.
    pub findings: Vec<Finding>,
}

/// One line of [`SessionStore::list`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session's name.
    pub name: String,
    /// Questions answered in it.
    pub turns: u64,
    /// Findings kept.
    pub findings: u64,
    /// When its last turn was saved (RFC 3339 UTC).
    pub updated_at: String,
}

/// The session database of one store.
#[derive(Debug)]
pub struct SessionStore {
    conn: Connection,
    path: PathBuf,
}

/// Checks a session name: 1-64 characters of letters, digits, `-`, `_`, `.`.
pub fn validate_session_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SESSION_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid session name {name:?}: use 1-{MAX_SESSION_NAME} letters, digits, '-', '_' or '.'"
        ))
    }
}

impl SessionStore {
    /// Opens (creating if needed) `<store_dir>/sessions.sqlite`.
    pub fn open(store_dir: &Path) -> Result<Self, String> {
        let path = store_dir.join(SESSIONS_FILE);
        let conn =
            Connection::open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS turns (
                 id INTEGER PRIMARY KEY AUTOINCREMENT,
                 session TEXT NOT NULL,
                 question TEXT NOT NULL,
                 answer TEXT NOT NULL,
                 partial INTEGER NOT NULL,
                 created_at TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS findings (
                 id INTEGER PRIMARY KEY AUTOINCREMENT,
                 session TEXT NOT NULL,
                 text TEXT NOT NULL,
                 source TEXT,
                 created_at TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS turns_session ON turns(session, id);
             CREATE INDEX IF NOT EXISTS findings_session ON findings(session, id);",
        )
        .map_err(|e| format!("cannot initialize {}: {e}", path.display()))?;
        // Files from before citations were kept gain the column; their turns
        // keep working with none.
        let has_citations: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('turns') WHERE name = 'citations'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if has_citations == 0 {
            conn.execute_batch("ALTER TABLE turns ADD COLUMN citations TEXT")
                .map_err(|e| format!("cannot upgrade {}: {e}", path.display()))?;
        }
        Ok(SessionStore { conn, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads a session (empty if it does not exist yet).
    pub fn load(&self, name: &str) -> Result<SessionState, String> {
        validate_session_name(name)?;
        let err = |e: rusqlite::Error| format!("cannot read session {name:?}: {e}");
        let mut st = self
            .conn
            .prepare(
                "SELECT question, answer, partial, citations FROM turns WHERE session = ?1 ORDER BY id",
            )
            .map_err(err)?;
        let history = st
            .query_map(params![name], |r| {
                let citations: Option<String> = r.get(3)?;
                Ok(Turn {
                    question: r.get(0)?,
                    answer: r.get(1)?,
                    partial: r.get::<_, i64>(2)? != 0,
                    citations: citations
                        .and_then(|c| serde_json::from_str(&c).ok())
                        .unwrap_or_default(),
                })
            })
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let mut st = self
            .conn
            .prepare("SELECT text, source FROM findings WHERE session = ?1 ORDER BY id")
            .map_err(err)?;
        let findings = st
            .query_map(params![name], |r| {
                Ok(Finding {
                    text: r.get(0)?,
                    source: r.get(1)?,
                })
            })
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        Ok(SessionState {
            name: name.to_string(),
            history,
            findings,
        })
    }

    /// Every session with at least one turn, most recently used first.
    pub fn list(&self) -> Result<Vec<SessionSummary>, String> {
        let err = |e: rusqlite::Error| format!("cannot list sessions: {e}");
        let mut st = self
            .conn
            .prepare(
                "SELECT t.session, COUNT(*), MAX(t.created_at),
                        (SELECT COUNT(*) FROM findings f WHERE f.session = t.session)
                 FROM turns t GROUP BY t.session ORDER BY MAX(t.id) DESC",
            )
            .map_err(err)?;
        st.query_map([], |r| {
            Ok(SessionSummary {
                name: r.get(0)?,
                turns: r.get::<_, i64>(1)? as u64,
                updated_at: r.get(2)?,
                findings: r.get::<_, i64>(3)? as u64,
            })
        })
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)
    }

    /// Deletes a session's turns and findings; false if it had none.
    pub fn delete(&mut self, name: &str) -> Result<bool, String> {
        validate_session_name(name)?;
        let err = |e: rusqlite::Error| format!("cannot delete session {name:?}: {e}");
        let tx = self.conn.transaction().map_err(err)?;
        let turns = tx
            .execute("DELETE FROM turns WHERE session = ?1", params![name])
            .map_err(err)?;
        let findings = tx
            .execute("DELETE FROM findings WHERE session = ?1", params![name])
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(turns + findings > 0)
    }

    /// Appends a finished question and the findings it added, atomically.
    pub fn append(
        &mut self,
        name: &str,
        turn: &Turn,
        new_findings: &[Finding],
    ) -> Result<(), String> {
        validate_session_name(name)?;
        let now = crate::trace::now_rfc3339();
        let err = |e: rusqlite::Error| format!("cannot save session {name:?}: {e}");
        let tx = self.conn.transaction().map_err(err)?;
        let citations = serde_json::to_string(&turn.citations).map_err(|e| e.to_string())?;
        tx.execute(
            "INSERT INTO turns (session, question, answer, partial, created_at, citations) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![name, turn.question, turn.answer, turn.partial as i64, now, citations],
        )
        .map_err(err)?;
        for f in new_findings {
            tx.execute(
                "INSERT INTO findings (session, text, source, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![name, f.text, f.source, now],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::open(dir.path()).unwrap();
        assert_eq!(
            s.load("case-1").unwrap(),
            SessionState {
                name: "case-1".into(),
                ..Default::default()
            }
        );
        let cited: crate::Citation = serde_json::from_value(serde_json::json!({
            "marker": "[[doc:0 \"a1\"]]", "answer_offset": 3, "kind": "doc", "id": "0",
            "quote": "a1", "chunk_id": "d-0", "doc_id": "d", "doc_index": 0, "path": "docs/a.txt",
            "byte_start": 0, "byte_end": 2, "status": "verified", "detail": null
        }))
        .unwrap();
        let t = Turn {
            question: "q1".into(),
            answer: "a1 [[doc:0 \"a1\"]]".into(),
            partial: false,
            citations: vec![cited],
        };
        s.append(
            "case-1",
            &t,
            &[Finding {
                text: "f1".into(),
                source: Some("[[doc:0]]".into()),
            }],
        )
        .unwrap();
        s.append("other", &t, &[]).unwrap();
        drop(s);
        let s = SessionStore::open(dir.path()).unwrap();
        let st = s.load("case-1").unwrap();
        assert_eq!(st.history, vec![t]);
        assert_eq!(st.findings.len(), 1);
        assert_eq!(st.findings[0].source.as_deref(), Some("[[doc:0]]"));
        assert!(dir.path().join(SESSIONS_FILE).is_file());

        // Listed newest first, with counts; deleting one keeps the other.
        let mut s = s;
        let list = s.list().unwrap();
        let names: Vec<_> = list.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["other", "case-1"]);
        assert_eq!((list[1].turns, list[1].findings), (1, 1));
        assert!(s.delete("case-1").unwrap());
        assert!(!s.delete("case-1").unwrap(), "already gone");
        assert!(s.load("case-1").unwrap().history.is_empty());
        assert_eq!(s.list().unwrap().len(), 1);
        assert!(s.delete("bad name").is_err());
    }

    #[test]
    fn a_file_from_before_citations_were_kept_is_upgraded_in_place() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join(SESSIONS_FILE)).unwrap();
            conn.execute_batch(
                "CREATE TABLE turns (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
                     question TEXT NOT NULL, answer TEXT NOT NULL, partial INTEGER NOT NULL,
                     created_at TEXT NOT NULL);
                 INSERT INTO turns (session, question, answer, partial, created_at)
                     VALUES ('old', 'q', 'a', 0, '2026-01-01T00:00:00.000Z');",
            )
            .unwrap();
        }
        let mut s = SessionStore::open(dir.path()).unwrap();
        let old = s.load("old").unwrap();
        assert_eq!(old.history.len(), 1, "nothing stored is lost");
        assert!(old.history[0].citations.is_empty());
        s.append("old", &Turn::default(), &[]).unwrap();
        assert_eq!(s.load("old").unwrap().history.len(), 2);
    }

    #[test]
    fn bad_names_rejected() {
        assert!(validate_session_name("").is_err());
        assert!(validate_session_name("a b").is_err());
        assert!(
            validate_session_name(&"x".repeat(65))
                .unwrap_err()
                .contains("1-64")
        );
        assert!(validate_session_name("ok_name-1.2").is_ok());
    }

    #[test]
    fn unwritable_location_is_an_error() {
        let e = SessionStore::open(Path::new("/nonexistent/dir/for/sure")).unwrap_err();
        assert!(e.contains("cannot open"), "{e}");
    }
}
