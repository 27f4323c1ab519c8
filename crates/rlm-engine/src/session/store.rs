//! The session database of a store folder: `<store>/sessions.sqlite`.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

use super::types::*;

/// The session database of one store.
#[derive(Debug)]
pub struct SessionStore {
    conn: Connection,
    path: PathBuf,
}

impl SessionStore {
    /// Opens (creating if needed) `<store_dir>/sessions.sqlite`.
    pub fn open(store_dir: &Path) -> Result<Self, SessionError> {
        let path = store_dir.join(SESSIONS_FILE);
        let failed = |what: &str| {
            let what = format!("{what} {}", path.display());
            move |e: rusqlite::Error| SessionError::storage(what, e)
        };
        let conn = Connection::open(&path).map_err(failed("open"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(failed("open"))?;
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
             CREATE TABLE IF NOT EXISTS sessions (
                 name TEXT PRIMARY KEY,
                 title TEXT,
                 created_at TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS turns_session ON turns(session, id);
             CREATE INDEX IF NOT EXISTS findings_session ON findings(session, id);",
        )
        .map_err(failed("initialize"))?;
        // Files from before citations were kept gain the column; their turns
        // keep working with none.
        let has_citations: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('turns') WHERE name = 'citations'",
                [],
                |r| r.get(0),
            )
            .map_err(failed("read"))?;
        if has_citations == 0 {
            conn.execute_batch("ALTER TABLE turns ADD COLUMN citations TEXT")
                .map_err(failed("upgrade"))?;
        }
        // Likewise the run that answered each turn (none for older turns).
        let has_run_id: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('turns') WHERE name = 'run_id'",
                [],
                |r| r.get(0),
            )
            .map_err(failed("read"))?;
        if has_run_id == 0 {
            conn.execute_batch("ALTER TABLE turns ADD COLUMN run_id TEXT")
                .map_err(failed("upgrade"))?;
        }
        Ok(SessionStore { conn, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads a session for a new question (empty if it does not exist yet):
    /// its newest turns within [`MAX_PAGE_TURN_BYTES`] and its kept findings,
    /// each text within the `MAX_*` caps, whatever the file holds.
    pub fn load(&self, name: &str) -> Result<SessionState, SessionError> {
        let page = self.page(name, None, MAX_SESSION_TURNS)?;
        Ok(SessionState {
            name: page.name,
            history: page.history,
            findings: page.findings,
        })
    }

    /// A bounded page of a session: the newest of its turns before position
    /// `before` (all when `None`), at most `limit` and [`MAX_PAGE_TURN_BYTES`]
    /// of them (at least one), plus its findings as [`SessionPage::findings`]
    /// says. Texts longer than the caps (in files written before them) are
    /// cut as they are read.
    pub fn page(
        &self,
        name: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionPage, SessionError> {
        validate_session_name(name)?;
        let err = |e: rusqlite::Error| SessionError::storage(format!("read session {name:?}"), e);
        let count = |table: &str| -> Result<u64, SessionError> {
            self.conn
                .query_row(
                    &format!("SELECT COUNT(*) FROM {table} WHERE session = ?1"),
                    params![name],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n as u64)
                .map_err(err)
        };
        let turns_total = count("turns")?;
        let findings_total = count("findings")?;
        let end = before.map_or(turns_total, |b| b.min(turns_total));
        let limit = limit.clamp(1, MAX_SESSION_TURNS) as u64;
        let start = end.saturating_sub(limit);
        // substr counts characters: a character is at most 4 bytes, so this
        // reads at most 4x the cap of a longer text, never the whole of it.
        let text_chars = MAX_TURN_TEXT_BYTES as i64 + 1;
        let mut st = self
            .conn
            .prepare(
                "SELECT substr(question, 1, ?2), substr(answer, 1, ?2), partial,
                        CASE WHEN length(citations) <= ?3 THEN citations END,
                        substr(run_id, 1, 64), created_at
                 FROM turns WHERE session = ?1 ORDER BY id LIMIT ?4 OFFSET ?5",
            )
            .map_err(err)?;
        let rows = st
            .query_map(
                params![
                    name,
                    text_chars,
                    MAX_TURN_CITATIONS_BYTES as i64,
                    (end - start) as i64,
                    start as i64
                ],
                |r| {
                    let question: String = r.get(0)?;
                    let answer: String = r.get(1)?;
                    let citations: Option<String> = r.get(3)?;
                    let bytes =
                        question.len() + answer.len() + citations.as_ref().map_or(0, String::len);
                    let turn = Turn {
                        question: clip_text(&question, MAX_TURN_TEXT_BYTES).into_owned(),
                        answer: clip_text(&answer, MAX_TURN_TEXT_BYTES).into_owned(),
                        partial: r.get::<_, i64>(2)? != 0,
                        citations: citations
                            .and_then(|c| serde_json::from_str(&c).ok())
                            .unwrap_or_default(),
                    };
                    let meta = TurnMeta {
                        run_id: r.get(4)?,
                        created_at: r.get(5)?,
                    };
                    Ok((turn, meta, bytes))
                },
            )
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let (history, turn_meta) = newest_turns_within_page(rows);
        let first = end - history.len() as u64;

        let mut st = self
            .conn
            .prepare(
                "SELECT substr(text, 1, ?2), substr(source, 1, ?3) FROM findings
                 WHERE session = ?1 ORDER BY id DESC LIMIT ?4",
            )
            .map_err(err)?;
        let newest = st
            .query_map(
                params![
                    name,
                    MAX_FINDING_BYTES as i64 + 1,
                    MAX_FINDING_SOURCE_BYTES as i64 + 1,
                    MAX_SESSION_FINDINGS as i64
                ],
                |r| {
                    let text: String = r.get(0)?;
                    let source: Option<String> = r.get(1)?;
                    Ok(Finding {
                        text: clip_text(&text, MAX_FINDING_BYTES).into_owned(),
                        source: source
                            .map(|s| clip_text(&s, MAX_FINDING_SOURCE_BYTES).into_owned()),
                    })
                },
            )
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let findings = newest_findings_within_cap(newest);
        Ok(SessionPage {
            name: name.to_string(),
            turns_total,
            first,
            history,
            turn_meta,
            findings_total,
            findings,
        })
    }

    /// Every session (with turns, or created empty), most recently active
    /// first.
    pub fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        self.summaries(None)
    }

    /// One session's summary; `None` if it has neither turns nor a record.
    pub fn summary(&self, name: &str) -> Result<Option<SessionSummary>, SessionError> {
        validate_session_name(name)?;
        Ok(self.summaries(Some(name))?.into_iter().next())
    }

    /// Summaries of every session, or of the one named. Sessions from before
    /// titles were kept have no record: titled from their oldest kept
    /// question, created when that turn was.
    fn summaries(&self, only: Option<&str>) -> Result<Vec<SessionSummary>, SessionError> {
        let err = |e: rusqlite::Error| SessionError::storage("list sessions", e);
        let mut st = self
            .conn
            .prepare(
                "WITH names AS (
                     SELECT name FROM sessions WHERE ?1 IS NULL OR name = ?1
                     UNION SELECT DISTINCT session FROM turns WHERE ?1 IS NULL OR session = ?1),
                 stats AS (
                     SELECT n.name AS name,
                            (SELECT COUNT(*) FROM turns t WHERE t.session = n.name) AS turns,
                            (SELECT COUNT(*) FROM findings f WHERE f.session = n.name) AS findings,
                            (SELECT MIN(created_at) FROM turns t WHERE t.session = n.name) AS first_at,
                            (SELECT MAX(created_at) FROM turns t WHERE t.session = n.name) AS last_at,
                            (SELECT MAX(id) FROM turns t WHERE t.session = n.name) AS last_id,
                            (SELECT substr(question, 1, 400) FROM turns t WHERE t.session = n.name
                             ORDER BY id LIMIT 1) AS first_question
                     FROM names n)
                 SELECT st.name, st.turns, st.findings, s.title, st.first_question,
                        COALESCE(s.created_at, st.first_at, ''),
                        COALESCE(st.last_at, s.created_at, '')
                 FROM stats st LEFT JOIN sessions s ON s.name = st.name
                 ORDER BY COALESCE(st.last_at, s.created_at) DESC, st.last_id DESC",
            )
            .map_err(err)?;
        st.query_map(params![only], |r| {
            let title: Option<String> = r.get(3)?;
            let first_question: Option<String> = r.get(4)?;
            Ok(SessionSummary {
                name: r.get(0)?,
                turns: r.get::<_, i64>(1)? as u64,
                findings: r.get::<_, i64>(2)? as u64,
                title: title
                    .or_else(|| first_question.map(|q| title_from_question(&q)))
                    .unwrap_or_default(),
                created_at: r.get(5)?,
                updated_at: r.get(6)?,
            })
        })
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)
    }

    /// Creates an empty session titled `title` (the start of its first
    /// question when `None`); false if one by that name exists.
    pub fn create(&mut self, name: &str, title: Option<&str>) -> Result<bool, SessionError> {
        validate_session_name(name)?;
        let title = title.map(validate_session_title).transpose()?;
        if self.summary(name)?.is_some() {
            return Ok(false);
        }
        self.conn
            .execute(
                "INSERT INTO sessions (name, title, created_at) VALUES (?1, ?2, ?3)",
                params![name, title, crate::trace::now_rfc3339()],
            )
            .map_err(|e| SessionError::storage(format!("save session {name:?}"), e))?;
        Ok(true)
    }

    /// Gives a session a new title; false if there is no such session.
    pub fn rename(&mut self, name: &str, title: &str) -> Result<bool, SessionError> {
        validate_session_name(name)?;
        let title = validate_session_title(title)?;
        let Some(current) = self.summary(name)? else {
            return Ok(false);
        };
        self.conn
            .execute(
                "INSERT INTO sessions (name, title, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET title = excluded.title",
                params![name, title, current.created_at],
            )
            .map_err(|e| SessionError::storage(format!("rename session {name:?}"), e))?;
        Ok(true)
    }

    /// Deletes a session's turns and findings; false if it had none.
    pub fn delete(&mut self, name: &str) -> Result<bool, SessionError> {
        validate_session_name(name)?;
        let err = |e: rusqlite::Error| SessionError::storage(format!("delete session {name:?}"), e);
        let tx = self.conn.transaction().map_err(err)?;
        let turns = tx
            .execute("DELETE FROM turns WHERE session = ?1", params![name])
            .map_err(err)?;
        let findings = tx
            .execute("DELETE FROM findings WHERE session = ?1", params![name])
            .map_err(err)?;
        let record = tx
            .execute("DELETE FROM sessions WHERE name = ?1", params![name])
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(turns + findings + record > 0)
    }

    /// Appends a finished question and the findings it added, atomically,
    /// within the caps: the turn's texts and citations are cut
    /// ([`MAX_TURN_TEXT_BYTES`], [`MAX_TURN_CITATIONS_BYTES`]), its findings
    /// too ([`cap_findings`]), and the session's oldest turns and findings
    /// beyond [`MAX_SESSION_TURNS`], [`MAX_SESSION_FINDINGS`] and
    /// [`MAX_SESSION_FINDINGS_BYTES`] are deleted. A failure (a full disk)
    /// changes nothing stored.
    pub fn append(
        &mut self,
        name: &str,
        turn: &Turn,
        new_findings: &[Finding],
    ) -> Result<(), SessionError> {
        self.append_run(name, turn, new_findings, None)
    }

    /// [`SessionStore::append`], keeping the id of the run that answered the
    /// turn. A session's first turn also records it, titled from its
    /// question unless it was given a title.
    pub fn append_run(
        &mut self,
        name: &str,
        turn: &Turn,
        new_findings: &[Finding],
        run_id: Option<&str>,
    ) -> Result<(), SessionError> {
        validate_session_name(name)?;
        let now = crate::trace::now_rfc3339();
        let err = |e: rusqlite::Error| SessionError::storage(format!("save session {name:?}"), e);
        let citations = cap_citations(&turn.citations)?;
        let (findings, _) = cap_findings(new_findings);
        let tx = self.conn.transaction().map_err(err)?;
        // A session whose turns predate titles keeps the title of its oldest
        // kept question; a new one is titled from this one.
        tx.execute(
            "INSERT OR IGNORE INTO sessions (name, title, created_at)
             SELECT ?1, CASE WHEN EXISTS (SELECT 1 FROM turns WHERE session = ?1) THEN NULL ELSE ?2 END,
                    COALESCE((SELECT MIN(created_at) FROM turns WHERE session = ?1), ?3)",
            params![name, title_from_question(&turn.question), now],
        )
        .map_err(err)?;
        tx.execute(
            "INSERT INTO turns (session, question, answer, partial, created_at, citations, run_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                name,
                clip_text(&turn.question, MAX_TURN_TEXT_BYTES),
                clip_text(&turn.answer, MAX_TURN_TEXT_BYTES),
                turn.partial as i64,
                now,
                citations,
                run_id
            ],
        )
        .map_err(err)?;
        for f in &findings {
            tx.execute(
                "INSERT INTO findings (session, text, source, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![name, f.text, f.source, now],
            )
            .map_err(err)?;
        }
        tx.execute(
            "DELETE FROM turns WHERE session = ?1 AND id NOT IN
                 (SELECT id FROM turns WHERE session = ?1 ORDER BY id DESC LIMIT ?2)",
            params![name, MAX_SESSION_TURNS as i64],
        )
        .map_err(err)?;
        // The newest findings within both caps stay: a running total of
        // bytes from the newest back, and a count.
        tx.execute(
            "DELETE FROM findings WHERE id IN (
                 SELECT id FROM (
                     SELECT id,
                            SUM(length(CAST(text AS BLOB)) + COALESCE(length(CAST(source AS BLOB)), 0))
                                OVER (ORDER BY id DESC) AS bytes,
                            ROW_NUMBER() OVER (ORDER BY id DESC) AS n
                     FROM findings WHERE session = ?1)
                 WHERE bytes > ?2 OR n > ?3)",
            params![
                name,
                MAX_SESSION_FINDINGS_BYTES as i64,
                MAX_SESSION_FINDINGS as i64
            ],
        )
        .map_err(err)?;
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
    fn sessions_have_titles_run_ids_and_old_files_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A file from before titles and run ids: a session with turns only.
            let conn = Connection::open(dir.path().join(SESSIONS_FILE)).unwrap();
            conn.execute_batch(
                "CREATE TABLE turns (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
                     question TEXT NOT NULL, answer TEXT NOT NULL, partial INTEGER NOT NULL,
                     created_at TEXT NOT NULL, citations TEXT);
                 INSERT INTO turns (session, question, answer, partial, created_at)
                     VALUES ('legacy', '  What is the\n notice period?  ', 'a', 0, '2026-01-01T00:00:00.000Z');",
            )
            .unwrap();
        }
        let mut s = SessionStore::open(dir.path()).unwrap();
        let legacy = s.summary("legacy").unwrap().unwrap();
        assert_eq!(legacy.title, "What is the notice period?");
        assert_eq!(legacy.created_at, "2026-01-01T00:00:00.000Z");
        let page = s.page("legacy", None, 20).unwrap();
        assert_eq!(page.turn_meta[0].run_id, None, "older turns have no run");

        // A new session is titled from its first question; its turns keep run ids.
        let long = "word ".repeat(40);
        s.append_run(
            "fresh",
            &Turn {
                question: long.clone(),
                ..Turn::default()
            },
            &[],
            Some("r1"),
        )
        .unwrap();
        s.append_run(
            "fresh",
            &Turn {
                question: "second".into(),
                ..Turn::default()
            },
            &[],
            Some("r2"),
        )
        .unwrap();
        let fresh = s.summary("fresh").unwrap().unwrap();
        assert!(
            fresh.title.ends_with('…') && fresh.title.chars().count() <= 80,
            "{}",
            fresh.title
        );
        assert_eq!(fresh.turns, 2);
        let page = s.page("fresh", None, 20).unwrap();
        let runs: Vec<_> = page.turn_meta.iter().map(|m| m.run_id.as_deref()).collect();
        assert_eq!(runs, [Some("r1"), Some("r2")]);

        // Renamed with spaces and another script; empty sessions are listed too.
        assert!(s.rename("fresh", "  Kündigung & notice — 2026 ").unwrap());
        assert_eq!(
            s.summary("fresh").unwrap().unwrap().title,
            "Kündigung & notice — 2026"
        );
        assert!(s.rename("legacy", "Old one").unwrap());
        assert_eq!(
            s.summary("legacy").unwrap().unwrap().created_at,
            "2026-01-01T00:00:00.000Z"
        );
        assert!(!s.rename("nobody", "x").unwrap());
        assert!(
            s.rename("fresh", "")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            s.rename("fresh", &"t".repeat(201))
                .unwrap_err()
                .to_string()
                .contains("201 characters")
        );
        assert!(
            s.rename("fresh", "two\nlines")
                .unwrap_err()
                .to_string()
                .contains("one line")
        );
        assert!(s.create("empty", Some("Planned")).unwrap());
        assert!(!s.create("empty", None).unwrap(), "exists");
        assert!(!s.create("fresh", None).unwrap(), "exists with turns");
        let names: Vec<_> = s.list().unwrap().into_iter().map(|x| x.name).collect();
        assert_eq!(names.len(), 3);
        assert!(names.contains(&"empty".to_string()));
        assert_eq!(s.page("empty", None, 20).unwrap().turns_total, 0);
        assert!(s.delete("empty").unwrap());
        assert!(s.summary("empty").unwrap().is_none());
        // Nothing stored was lost by the upgrade.
        assert_eq!(s.load("legacy").unwrap().history.len(), 1);
    }

    #[test]
    fn what_a_session_stores_and_returns_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::open(dir.path()).unwrap();
        // One turn with far too much: a 10 MB answer, 1,000 findings of 100 KB.
        let huge = Finding {
            text: "é".repeat(50_000),
            source: Some("s".repeat(10_000)),
        };
        let turn = Turn {
            question: "q".into(),
            answer: "a".repeat(10 << 20),
            partial: false,
            citations: Vec::new(),
        };
        let t0 = std::time::Instant::now();
        s.append("big", &turn, &vec![huge.clone(); 1000]).unwrap();
        let st = s.load("big").unwrap();
        let answer = &st.history[0].answer;
        assert!(answer.len() <= MAX_TURN_TEXT_BYTES, "{}", answer.len());
        assert!(
            answer.ends_with("more bytes not kept]"),
            "the cut is marked"
        );
        let (per_turn, _) = cap_findings(&vec![huge.clone(); 1000]);
        assert_eq!(st.findings.len(), per_turn.len());
        assert!(st.findings.len() <= MAX_TURN_FINDINGS);
        let bytes: usize = st.findings.iter().map(finding_bytes).sum();
        assert!(bytes <= MAX_TURN_FINDINGS_BYTES, "{bytes}");
        for f in &st.findings {
            assert!(f.text.len() <= MAX_FINDING_BYTES);
            assert!(f.source.as_ref().unwrap().len() <= MAX_FINDING_SOURCE_BYTES);
        }

        // Many turns: the session keeps the newest turns and findings only.
        let small = |i: usize| Finding {
            text: format!("finding {i} {}", "x".repeat(900)),
            source: None,
        };
        for i in 0..(MAX_SESSION_TURNS + 20) {
            let t = Turn {
                question: format!("q{i}"),
                answer: "b".repeat(20_000),
                ..Turn::default()
            };
            let fs: Vec<Finding> = (0..10).map(|k| small(i * 10 + k)).collect();
            s.append("long", &t, &fs).unwrap();
        }
        let page = s.page("long", None, 1000).unwrap();
        assert_eq!(page.turns_total, MAX_SESSION_TURNS as u64);
        assert!(page.findings_total <= MAX_SESSION_FINDINGS as u64);
        let kept: usize = page.findings.iter().map(finding_bytes).sum();
        assert!(kept <= MAX_SESSION_FINDINGS_BYTES, "{kept}");
        let newest = MAX_SESSION_TURNS + 19;
        assert_eq!(
            page.history.last().unwrap().question,
            format!("q{newest}"),
            "the newest turns stay"
        );
        assert!(
            page.findings
                .last()
                .unwrap()
                .text
                .starts_with(&format!("finding {}", newest * 10 + 9))
        );
        // One page is bounded in bytes; earlier turns are read with `before`.
        let page_bytes = serde_json::to_vec(&page).unwrap().len();
        assert!(
            page_bytes <= MAX_PAGE_TURN_BYTES + MAX_SESSION_FINDINGS_BYTES + 64 * 1024,
            "{page_bytes}"
        );
        assert!(page.first > 0 && page.first + page.history.len() as u64 == page.turns_total);
        let older = s.page("long", Some(page.first), 5).unwrap();
        assert_eq!(older.history.len(), 5);
        assert_eq!(older.first, page.first - 5);
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn an_oversized_row_from_an_older_file_is_read_back_cut() {
        let dir = tempfile::tempdir().unwrap();
        let s = SessionStore::open(dir.path()).unwrap();
        let big = "z".repeat(8 << 20);
        s.conn
            .execute(
                "INSERT INTO findings (session, text, source, created_at) VALUES ('old', ?1, NULL, 'now')",
                params![big],
            )
            .unwrap();
        s.conn
            .execute(
                "INSERT INTO turns (session, question, answer, partial, created_at, citations) VALUES ('old', 'q', ?1, 0, 'now', NULL)",
                params![big],
            )
            .unwrap();
        let st = s.load("old").unwrap();
        assert!(st.history[0].answer.len() <= MAX_TURN_TEXT_BYTES);
        assert!(st.findings[0].text.len() <= MAX_FINDING_BYTES);
        assert_eq!(clip_text("short", 10), "short");
        let long = "é".repeat(100);
        let cut = clip_text(&long, 64);
        assert!(cut.len() <= 64, "{cut}");
    }

    #[test]
    fn bad_names_rejected() {
        assert!(validate_session_name("").is_err());
        assert!(validate_session_name("a b").is_err());
        assert!(
            validate_session_name(&"x".repeat(65))
                .unwrap_err()
                .to_string()
                .contains("1-64")
        );
        assert!(validate_session_name("ok_name-1.2").is_ok());
    }

    #[test]
    fn unwritable_location_is_an_error() {
        let e = SessionStore::open(Path::new("/nonexistent/dir/for/sure"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot open"), "{e}");
    }
}
