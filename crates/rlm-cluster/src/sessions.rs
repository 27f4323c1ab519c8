//! Sessions in PostgreSQL: `rlm_sessions` (name, title, creation time),
//! `rlm_turns` and `rlm_findings`, with the same caps and pages as a store
//! folder's `sessions.sqlite` (`rlm_engine::session`). Each change is one
//! statement, so it is atomic whatever else the node's connection carries.

use crate::p;
use std::sync::Arc;

use crate::conn::Conn;
use rlm_corpus::CorpusError;
use rlm_engine::session::{
    Finding, MAX_FINDING_BYTES, MAX_FINDING_SOURCE_BYTES, MAX_SESSION_FINDINGS,
    MAX_SESSION_FINDINGS_BYTES, MAX_SESSION_TURNS, MAX_TURN_CITATIONS_BYTES, MAX_TURN_TEXT_BYTES,
    SessionBackend, SessionError, SessionPage, SessionState, SessionSummary, Turn, TurnMeta,
    cap_citations, cap_findings, clip_text, newest_findings_within_cap, newest_turns_within_page,
    title_from_question, validate_session_name, validate_session_title,
};
use rlm_engine::trace::now_rfc3339;

/// The sessions of a cluster.
pub(crate) struct PgSessions {
    pub(crate) db: Arc<Conn>,
}

/// PostgreSQL's `text` holds no NUL character: stored as U+FFFD.
pub(crate) fn no_nul(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

impl PgSessions {
    fn summaries(&self, only: Option<&str>) -> Result<Vec<SessionSummary>, SessionError> {
        let rows = self
            .db
            .query(
                "SELECT s.name, s.title, s.created_at,
                        (SELECT count(*) FROM rlm_turns t WHERE t.session = s.name),
                        (SELECT count(*) FROM rlm_findings f WHERE f.session = s.name),
                        (SELECT max(created_at) FROM rlm_turns t WHERE t.session = s.name) AS last_at,
                        (SELECT max(id) FROM rlm_turns t WHERE t.session = s.name) AS last_id,
                        (SELECT left(question, 400) FROM rlm_turns t WHERE t.session = s.name
                         ORDER BY id LIMIT 1)
                 FROM rlm_sessions s WHERE $1::text IS NULL OR s.name = $1
                 ORDER BY COALESCE((SELECT max(created_at) FROM rlm_turns t WHERE t.session = s.name), s.created_at) DESC,
                          (SELECT max(id) FROM rlm_turns t WHERE t.session = s.name) DESC NULLS LAST",
                vec![p(only.map(str::to_string))],
            )
            .map_err(|e| SessionError::storage("list sessions", e))?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let title: Option<String> = r.get(1);
                let first_question: Option<String> = r.get(7);
                let created_at: String = r.get(2);
                let last_at: Option<String> = r.get(5);
                SessionSummary {
                    name: r.get(0),
                    title: title
                        .or_else(|| first_question.map(|q| title_from_question(&q)))
                        .unwrap_or_default(),
                    turns: r.get::<_, i64>(3) as u64,
                    findings: r.get::<_, i64>(4) as u64,
                    updated_at: last_at.unwrap_or_else(|| created_at.clone()),
                    created_at,
                }
            })
            .collect())
    }
}

impl SessionBackend for PgSessions {
    fn load(&self, name: &str) -> Result<SessionState, SessionError> {
        let page = self.page(name, None, MAX_SESSION_TURNS)?;
        Ok(SessionState {
            name: page.name,
            history: page.history,
            findings: page.findings,
        })
    }

    fn page(
        &self,
        name: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionPage, SessionError> {
        validate_session_name(name)?;
        let err = |e: CorpusError| SessionError::storage(format!("read session {name:?}"), e);
        let counts = self
            .db
            .query_opt(
                "SELECT (SELECT count(*) FROM rlm_turns WHERE session = $1),
                        (SELECT count(*) FROM rlm_findings WHERE session = $1)",
                vec![p(name.to_string())],
            )
            .map_err(err)?;
        let (turns_total, findings_total) = counts
            .map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64))
            .unwrap_or((0, 0));
        let end = before.map_or(turns_total, |b| b.min(turns_total));
        let limit = limit.clamp(1, MAX_SESSION_TURNS) as u64;
        let start = end.saturating_sub(limit);
        let text_chars = MAX_TURN_TEXT_BYTES as i32 + 1;
        let rows = self
            .db
            .query(
                "SELECT left(question, $2), left(answer, $2), partial,
                        CASE WHEN length(citations) <= $3 THEN citations END,
                        left(run_id, 64), created_at
                 FROM rlm_turns WHERE session = $1 ORDER BY id LIMIT $4 OFFSET $5",
                vec![
                    p(name.to_string()),
                    p(text_chars),
                    p(MAX_TURN_CITATIONS_BYTES as i32),
                    p((end - start) as i64),
                    p(start as i64),
                ],
            )
            .map_err(err)?;
        let rows = rows
            .into_iter()
            .map(|r| {
                let question: String = r.get(0);
                let answer: String = r.get(1);
                let citations: Option<String> = r.get(3);
                let bytes =
                    question.len() + answer.len() + citations.as_ref().map_or(0, String::len);
                let turn = Turn {
                    question: clip_text(&question, MAX_TURN_TEXT_BYTES).into_owned(),
                    answer: clip_text(&answer, MAX_TURN_TEXT_BYTES).into_owned(),
                    partial: r.get(2),
                    citations: citations
                        .and_then(|c| serde_json::from_str(&c).ok())
                        .unwrap_or_default(),
                };
                let meta = TurnMeta {
                    run_id: r.get(4),
                    created_at: r.get(5),
                };
                (turn, meta, bytes)
            })
            .collect();
        let (history, turn_meta) = newest_turns_within_page(rows);
        let first = end - history.len() as u64;
        let newest = self
            .db
            .query(
                "SELECT left(text, $2), left(source, $3) FROM rlm_findings
                 WHERE session = $1 ORDER BY id DESC LIMIT $4",
                vec![
                    p(name.to_string()),
                    p(MAX_FINDING_BYTES as i32 + 1),
                    p(MAX_FINDING_SOURCE_BYTES as i32 + 1),
                    p(MAX_SESSION_FINDINGS as i64),
                ],
            )
            .map_err(err)?
            .into_iter()
            .map(|r| {
                let text: String = r.get(0);
                let source: Option<String> = r.get(1);
                Finding {
                    text: clip_text(&text, MAX_FINDING_BYTES).into_owned(),
                    source: source.map(|s| clip_text(&s, MAX_FINDING_SOURCE_BYTES).into_owned()),
                }
            })
            .collect();
        Ok(SessionPage {
            name: name.to_string(),
            turns_total,
            first,
            history,
            turn_meta,
            findings_total,
            findings: newest_findings_within_cap(newest),
        })
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        self.summaries(None)
    }

    fn summary(&self, name: &str) -> Result<Option<SessionSummary>, SessionError> {
        validate_session_name(name)?;
        Ok(self.summaries(Some(name))?.into_iter().next())
    }

    fn create(&self, name: &str, title: Option<&str>) -> Result<bool, SessionError> {
        validate_session_name(name)?;
        let title = title.map(validate_session_title).transpose()?;
        let n = self
            .db
            .execute(
                "INSERT INTO rlm_sessions (name, title, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING",
                vec![p(name.to_string()), p(title), p(now_rfc3339())],
            )
            .map_err(|e| SessionError::storage(format!("save session {name:?}"), e))?;
        Ok(n == 1)
    }

    fn rename(&self, name: &str, title: &str) -> Result<bool, SessionError> {
        validate_session_name(name)?;
        let title = validate_session_title(title)?;
        let n = self
            .db
            .execute(
                "UPDATE rlm_sessions SET title = $2 WHERE name = $1",
                vec![p(name.to_string()), p(title)],
            )
            .map_err(|e| SessionError::storage(format!("rename session {name:?}"), e))?;
        Ok(n == 1)
    }

    fn delete(&self, name: &str) -> Result<bool, SessionError> {
        validate_session_name(name)?;
        let row = self
            .db
            .query_opt(
                "WITH t AS (DELETE FROM rlm_turns WHERE session = $1 RETURNING 1),
                      f AS (DELETE FROM rlm_findings WHERE session = $1 RETURNING 1),
                      s AS (DELETE FROM rlm_sessions WHERE name = $1 RETURNING 1)
                 SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM f) + (SELECT count(*) FROM s)",
                vec![p(name.to_string())],
            )
            .map_err(|e| SessionError::storage(format!("delete session {name:?}"), e))?;
        Ok(row.is_some_and(|r| r.get::<_, i64>(0) > 0))
    }

    fn append_run(
        &self,
        name: &str,
        turn: &Turn,
        findings: &[Finding],
        run_id: Option<&str>,
    ) -> Result<(), SessionError> {
        validate_session_name(name)?;
        let err = |e: CorpusError| SessionError::storage(format!("save session {name:?}"), e);
        let citations = cap_citations(&turn.citations)?;
        let (findings, _) = cap_findings(findings);
        let texts: Vec<String> = findings.iter().map(|f| no_nul(&f.text)).collect();
        let sources: Vec<Option<String>> = findings
            .iter()
            .map(|f| f.source.as_deref().map(no_nul))
            .collect();
        // One statement: the session's record (titled from this question
        // when new), the turn and its findings, all or nothing.
        self.db
            .execute(
                "WITH s AS (INSERT INTO rlm_sessions (name, title, created_at) VALUES ($1, $2, $3)
                            ON CONFLICT (name) DO NOTHING),
                      t AS (INSERT INTO rlm_turns (session, question, answer, partial, citations, run_id, created_at)
                            VALUES ($1, $4, $5, $6, $7, $8, $3))
                 INSERT INTO rlm_findings (session, text, source, created_at)
                 SELECT $1, x.text, x.source, $3
                 FROM unnest($9::text[], $10::text[]) WITH ORDINALITY AS x(text, source, n)
                 ORDER BY x.n",
                vec![
                    p(name.to_string()),
                    p(no_nul(&title_from_question(&turn.question))),
                    p(now_rfc3339()),
                    p(no_nul(&clip_text(&turn.question, MAX_TURN_TEXT_BYTES))),
                    p(no_nul(&clip_text(&turn.answer, MAX_TURN_TEXT_BYTES))),
                    p(turn.partial),
                    p(citations),
                    p(run_id.map(str::to_string)),
                    p(texts),
                    p(sources),
                ],
            )
            .map_err(err)?;
        // The session's oldest turns and findings beyond its caps go; a
        // failure here loses nothing (reads apply the caps too).
        let _ = self.db.execute(
            "WITH t AS (DELETE FROM rlm_turns WHERE session = $1 AND id NOT IN
                          (SELECT id FROM rlm_turns WHERE session = $1 ORDER BY id DESC LIMIT $2))
             DELETE FROM rlm_findings WHERE id IN (
                 SELECT id FROM (
                     SELECT id,
                            SUM(octet_length(text) + COALESCE(octet_length(source), 0))
                                OVER (ORDER BY id DESC) AS bytes,
                            ROW_NUMBER() OVER (ORDER BY id DESC) AS n
                     FROM rlm_findings WHERE session = $1) x
                 WHERE x.bytes > $3 OR x.n > $4)",
            vec![
                p(name.to_string()),
                p(MAX_SESSION_TURNS as i64),
                p(MAX_SESSION_FINDINGS_BYTES as i64),
                p(MAX_SESSION_FINDINGS as i64),
            ],
        );
        Ok(())
    }
}
