//! What a session holds (turns, findings, summaries), its caps and the
//! checks of names and titles.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// The session database file name inside a store folder.
pub const SESSIONS_FILE: &str = "sessions.sqlite";

/// Longest accepted session name.
pub const MAX_SESSION_NAME: usize = 64;

/// Longest session title, in characters.
pub const MAX_SESSION_TITLE_CHARS: usize = 200;

/// Characters of the first question a session is titled with by default.
const DEFAULT_TITLE_CHARS: usize = 80;

/// Longest question or answer text a turn stores, in bytes; longer text is
/// cut at a character boundary and ends with a note of what was cut.
pub const MAX_TURN_TEXT_BYTES: usize = 64 * 1024;
/// Largest citation list (as JSON) a turn stores; the citations past it are dropped.
pub const MAX_TURN_CITATIONS_BYTES: usize = 64 * 1024;
/// Longest finding text stored, in bytes (cut like a turn's text).
pub const MAX_FINDING_BYTES: usize = 4 * 1024;
/// Longest finding source stored, in bytes.
pub const MAX_FINDING_SOURCE_BYTES: usize = 1024;
/// Findings one turn adds, at most (its first ones).
pub const MAX_TURN_FINDINGS: usize = 100;
/// Bytes (text and source) of the findings one turn adds, at most.
pub const MAX_TURN_FINDINGS_BYTES: usize = 128 * 1024;
/// Findings a session keeps: the newest; older ones are deleted as new ones come.
pub const MAX_SESSION_FINDINGS: usize = 500;
/// Bytes of the findings a session keeps (the newest).
pub const MAX_SESSION_FINDINGS_BYTES: usize = 512 * 1024;
/// Turns a session keeps: the newest; older ones are deleted as new ones come.
pub const MAX_SESSION_TURNS: usize = 200;
/// Bytes of turns (question, answer, citations) one read returns, at most
/// (always at least the newest turn): [`SessionStore::load`] and one page
/// of [`SessionStore::page`].
pub const MAX_PAGE_TURN_BYTES: usize = 1024 * 1024;

/// Why a session could not be named, titled, read or saved.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The name is not one a session can have.
    #[error(
        "invalid session name {0:?}: use 1-{max} letters, digits, '-', '_' or '.'",
        max = MAX_SESSION_NAME
    )]
    InvalidName(String),
    /// The title is blank.
    #[error("the title is empty; send {{\"title\": \"...\"}}")]
    EmptyTitle,
    /// The title has more than [`MAX_SESSION_TITLE_CHARS`] characters (it has this many).
    #[error("the title has {0} characters; the limit is {max}", max = MAX_SESSION_TITLE_CHARS)]
    TitleTooLong(usize),
    /// The title holds a newline or another control character.
    #[error("the title must be one line of text (no newlines or control characters)")]
    TitleNotOneLine,
    /// A turn's citations could not be encoded for storage.
    #[error(transparent)]
    Citations(serde_json::Error),
    /// Where sessions are kept failed: `what` was being done (`open
    /// /store/sessions.sqlite`, `save session "case-1"`), `reason` is what
    /// the database said.
    #[error("cannot {what}: {reason}")]
    Storage {
        /// The step that failed.
        what: String,
        /// The database's message.
        reason: String,
    },
}

impl SessionError {
    /// A failure of the sessions' database while doing `what`.
    pub fn storage(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        SessionError::Storage {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}

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

/// A bounded slice of a session's turns plus its kept findings
/// ([`SessionStore::page`]; `GET /api/sessions/{name}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPage {
    /// The session name.
    pub name: String,
    /// Turns the session keeps.
    pub turns_total: u64,
    /// Position (0 = the oldest kept turn) of the first turn in `history`;
    /// pass it as `before` to read the turns before it.
    pub first: u64,
    /// Turns `first..first + history.len()`, oldest first.
    pub history: Vec<Turn>,
    /// For each turn of `history`: the run that answered it and when it was
    /// saved.
    pub turn_meta: Vec<TurnMeta>,
    /// Findings the session keeps.
    pub findings_total: u64,
    /// The newest findings within [`MAX_SESSION_FINDINGS`] and
    /// [`MAX_SESSION_FINDINGS_BYTES`], oldest first.
    pub findings: Vec<Finding>,
}

/// Where a turn came from: the server's run that answered it (none for
/// turns saved by `rlm ask --session` or before run ids were kept) and when
/// it was saved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnMeta {
    /// The run id (`GET /api/runs/{id}`).
    pub run_id: Option<String>,
    /// RFC 3339 UTC.
    pub created_at: String,
}

/// `text` cut to at most `max` bytes at a character boundary, ending with a
/// note of how much was cut.
pub fn clip_text(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    // The note takes at most 48 bytes.
    let cut = text.floor_char_boundary(max.saturating_sub(48));
    Cow::Owned(format!(
        "{} [… {} more bytes not kept]",
        &text[..cut],
        text.len() - cut
    ))
}

pub(super) fn finding_bytes(f: &Finding) -> usize {
    f.text.len() + f.source.as_ref().map_or(0, String::len)
}

/// The findings of one turn as a session stores them: each cut to
/// [`MAX_FINDING_BYTES`] (source: [`MAX_FINDING_SOURCE_BYTES`]), the first
/// ones up to [`MAX_TURN_FINDINGS`] and [`MAX_TURN_FINDINGS_BYTES`]; with
/// the number left out.
pub fn cap_findings(findings: &[Finding]) -> (Vec<Finding>, usize) {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for f in findings.iter().take(MAX_TURN_FINDINGS) {
        let f = Finding {
            text: clip_text(&f.text, MAX_FINDING_BYTES).into_owned(),
            source: f
                .source
                .as_deref()
                .map(|s| clip_text(s, MAX_FINDING_SOURCE_BYTES).into_owned()),
        };
        bytes += finding_bytes(&f);
        if bytes > MAX_TURN_FINDINGS_BYTES {
            break;
        }
        kept.push(f);
    }
    let omitted = findings.len() - kept.len();
    (kept, omitted)
}

/// The citations of a turn as stored: the first ones whose JSON fits
/// [`MAX_TURN_CITATIONS_BYTES`].
pub fn cap_citations(citations: &[crate::Citation]) -> Result<String, SessionError> {
    let mut parts = Vec::new();
    let mut bytes = 2;
    for c in citations {
        let json = serde_json::to_string(c).map_err(SessionError::Citations)?;
        bytes += json.len() + 1;
        if bytes > MAX_TURN_CITATIONS_BYTES {
            break;
        }
        parts.push(json);
    }
    Ok(format!("[{}]", parts.join(",")))
}

/// The newest of a page's turns (`rows` oldest first: a turn, where it
/// came from, the bytes it holds as stored) that fit
/// [`MAX_PAGE_TURN_BYTES`], at least one; oldest first. Every session
/// back-end pages turns this way.
pub fn newest_turns_within_page(rows: Vec<(Turn, TurnMeta, usize)>) -> (Vec<Turn>, Vec<TurnMeta>) {
    let mut history = Vec::new();
    let mut turn_meta = Vec::new();
    let mut bytes = 0;
    for (turn, meta, size) in rows.into_iter().rev() {
        bytes += size;
        if bytes > MAX_PAGE_TURN_BYTES && !history.is_empty() {
            break;
        }
        history.push(turn);
        turn_meta.push(meta);
    }
    history.reverse();
    turn_meta.reverse();
    (history, turn_meta)
}

/// The findings a session shows: of `newest_first` (at most
/// [`MAX_SESSION_FINDINGS`]), the newest within
/// [`MAX_SESSION_FINDINGS_BYTES`]; oldest first.
pub fn newest_findings_within_cap(newest_first: Vec<Finding>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut bytes = 0;
    for f in newest_first.into_iter().take(MAX_SESSION_FINDINGS) {
        bytes += finding_bytes(&f);
        if bytes > MAX_SESSION_FINDINGS_BYTES {
            break;
        }
        findings.push(f);
    }
    findings.reverse();
    findings
}

/// One line of [`SessionStore::list`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session's name: its id, usable in a URL.
    pub name: String,
    /// Its free-text title: given, or the start of its first question.
    pub title: String,
    /// When it was created or its first turn saved (RFC 3339 UTC).
    pub created_at: String,
    /// Questions answered in it.
    pub turns: u64,
    /// Findings kept.
    pub findings: u64,
    /// When its last turn was saved, else when it was created (RFC 3339 UTC).
    pub updated_at: String,
}

/// Checks a session title and returns it trimmed: free text (spaces, any
/// script), one line, 1-[`MAX_SESSION_TITLE_CHARS`] characters.
pub fn validate_session_title(title: &str) -> Result<String, SessionError> {
    let t = title.trim();
    let n = t.chars().count();
    if n == 0 {
        return Err(SessionError::EmptyTitle);
    }
    if n > MAX_SESSION_TITLE_CHARS {
        return Err(SessionError::TitleTooLong(n));
    }
    if t.chars().any(char::is_control) {
        return Err(SessionError::TitleNotOneLine);
    }
    Ok(t.to_string())
}

/// The title a session gets from its first question: its words on one line,
/// at most [`DEFAULT_TITLE_CHARS`] characters (cut ones end with `…`).
pub fn title_from_question(question: &str) -> String {
    let words: Vec<&str> = question.split_whitespace().collect();
    let line = words.join(" ");
    if line.chars().count() <= DEFAULT_TITLE_CHARS {
        return line;
    }
    let cut: String = line.chars().take(DEFAULT_TITLE_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// Checks a session name: 1-64 characters of letters, digits, `-`, `_`, `.`.
pub fn validate_session_name(name: &str) -> Result<(), SessionError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SESSION_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(SessionError::InvalidName(name.to_string()))
    }
}
