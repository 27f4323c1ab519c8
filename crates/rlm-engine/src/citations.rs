//! Citations in answers and their mechanical verification (ids exist, quotes appear in the cited text).
//!
//! Markers the prompt teaches the model (all machine-parseable):
//!
//! * `[[chunk:ID]]` or `[[chunk:ID "quoted text"]]` — a chunk by its stable id
//!   (as returned by `search()`);
//! * `[[doc:N]]` or `[[doc:N "quoted text"]]` — document N of `documents` /
//!   the `[DOCUMENT N: path]` header; a quote resolves it to the chunk holding it;
//! * `[DOCUMENT N]` / `[DOCUMENT N: path]` — the header form models copy from
//!   the context; checked for existence (and path, if given).
//!
//! Verification: every id exists; every quote of at least [`MIN_QUOTE_CHARS`]
//! characters appears in the cited chunk (or document), compared with
//! whitespace collapsed and case folded. Quotes may elide with `...`; each
//! piece is then checked on its own.

use std::sync::LazyLock;

use crate::text::named_enum;
use crate::values::ConfigError;
use regex::Regex;
use serde::{Deserialize, Serialize};

/// Quotes shorter than this are not checked (too likely to match by chance).
pub const MIN_QUOTE_CHARS: usize = 10;

/// A chunk as verification needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceChunk {
    /// Stable chunk id.
    pub id: String,
    /// Document id.
    pub doc_id: String,
    /// Document index (position in `documents`).
    pub doc_index: usize,
    /// Corpus-relative document path.
    pub path: String,
    /// Byte span of the chunk in the document text.
    pub byte_start: u64,
    /// End of the byte span (exclusive).
    pub byte_end: u64,
    /// The chunk text.
    pub text: String,
    /// Its place as a person cites it (`page 12`, `slide 4`), if it has one.
    pub location: Option<String>,
}

/// Where citations are looked up: the store (or a test double).
pub trait CitationSource {
    /// The chunk with this id.
    fn chunk(&self, id: &str) -> Option<SourceChunk>;
    /// Number of documents in the context.
    fn document_count(&self) -> usize;
    /// Path of document `index`.
    fn document_path(&self, index: usize) -> Option<String>;
    /// Chunks of document `index`, in order.
    fn document_chunks(&self, index: usize) -> Vec<SourceChunk>;
}

/// How verification affects the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationPolicy {
    /// Report only; the answer text is untouched.
    #[default]
    BestEffort,
    /// Flag every unsupported citation inline in the answer.
    Strict,
}

impl std::str::FromStr for CitationPolicy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "best_effort" => Ok(CitationPolicy::BestEffort),
            "strict" => Ok(CitationPolicy::Strict),
            other => {
                Err(format!("unknown citation policy {other:?}; use strict or best_effort").into())
            }
        }
    }
}

/// The form a citation took in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationKind {
    /// `[[chunk:ID ...]]`
    Chunk,
    /// `[[doc:N ...]]`
    Doc,
    /// `[DOCUMENT N: path]`
    DocumentHeader,
}

/// Outcome of checking one citation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationStatus {
    /// The id exists and the quote was found.
    Verified,
    /// The id exists, but there was no quote long enough to check: id
    /// only, not verified, never counted as valid (an invented fact with a
    /// real id would pass otherwise).
    IdOnly,
    /// No chunk or document with this id.
    UnknownId,
    /// The id exists but the quote is not in it.
    QuoteNotFound,
    /// `[DOCUMENT N: path]` whose path is not document N's.
    PathMismatch,
    /// The marker, quote and all, is text of a document the run showed: the
    /// model copied it (an injected citation), it did not cite.
    CopiedFromDocument,
}

impl CitationStatus {
    /// True for the statuses that count as supported: a quote found in
    /// the cited chunk.
    pub fn is_valid(self) -> bool {
        self == CitationStatus::Verified
    }
}

/// Who wrote a citation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationOrigin {
    /// A marker the model wrote in the answer.
    #[default]
    Model,
    /// Attached by the engine to a claim the model left uncited (see
    /// [`crate::grounding`]); its quote is verbatim from the chunk.
    Engine,
}

named_enum! {
    /// Who supplied the citation that backs a claim (a claim report's `origin`).
    pub enum ClaimOrigin {
        /// The model's own citation in the answer.
        Model = "model",
        /// A citation the engine attached (see [`crate::grounding`]).
        Engine = "engine",
        /// No citation backs the claim.
        Unbacked = "none",
    }
}

/// One citation found in the answer, resolved and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// The marker as written.
    pub marker: String,
    /// Byte offset of the marker in the answer.
    pub answer_offset: usize,
    /// Marker form.
    pub kind: CitationKind,
    /// The id as written (chunk id or document index).
    pub id: String,
    /// The quote, if any.
    pub quote: Option<String>,
    /// Resolved chunk id.
    pub chunk_id: Option<String>,
    /// Resolved document id.
    pub doc_id: Option<String>,
    /// Resolved document index.
    pub doc_index: Option<usize>,
    /// Resolved document path.
    pub path: Option<String>,
    /// Byte span of the resolved chunk in its document.
    pub byte_start: Option<u64>,
    /// End of that span.
    pub byte_end: Option<u64>,
    /// Check outcome.
    pub status: CitationStatus,
    /// Why it failed, in words.
    pub detail: Option<String>,
    /// Who wrote it.
    #[serde(default)]
    pub origin: CitationOrigin,
    /// The line of the document the quote starts on (1-based), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The place of the resolved chunk as a person cites it (`page 12`,
    /// `slide 4`, `sheet "Q3", rows 10–14`, `message of … from …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// Verification of all citations of one answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct VerificationReport {
    /// Per citation, in answer order.
    pub citations: Vec<Citation>,
    /// True when every citation is supported (vacuously true with none).
    pub all_valid: bool,
    /// Number of citations that failed.
    pub failed: usize,
    /// Number of quotes checked.
    pub quotes_checked: usize,
}

static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\[\[\s*(chunk|doc)\s*:\s*([^\s\]"“]+)\s*(?:"((?:[^"\\]|\\.)*)"|“([^”]*)”)?\s*\]\]|\[DOCUMENT\s+(\d+)(?:\s*:\s*([^\]\n]+))?\]"#,
    )
    .expect("citation regex")
});

/// A citation marker before resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCitation {
    /// Marker text.
    pub marker: String,
    /// Byte offset in the answer.
    pub offset: usize,
    /// Marker form.
    pub kind: CitationKind,
    /// Id as written.
    pub id: String,
    /// Quote, if any.
    pub quote: Option<String>,
    /// Path, for `[DOCUMENT N: path]`.
    pub path: Option<String>,
}

/// One checked source of an answer, as every surface lists them (the CLI's
/// numbered "Sources", the OpenAI-compatible endpoint's Markdown, MCP).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Document path.
    pub path: String,
    /// 1-based line of the quote in the document, when known.
    pub line: Option<u32>,
    /// The cited chunk's place as a person cites it (`page 12`, `slide 4`,
    /// `sheet "Q3", rows 10–14`, `message of 2024-03-02 from …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The cited chunk.
    pub chunk_id: Option<String>,
    /// The verified quote.
    pub quote: String,
    /// True when the engine attached it (the model left the claim uncited).
    pub attached_by_engine: bool,
}

/// Where a source is, in words, as every surface lists it: its place
/// (`slide 4`, `page 12`: what a person finds in the original, unlike a
/// line of the extracted text), else its line, else its chunk id, else `?`.
pub fn place_words(location: Option<&str>, line: Option<u32>, chunk_id: Option<&str>) -> String {
    match (location, line, chunk_id) {
        (Some(place), _, _) => place.to_string(),
        (None, Some(line), _) => format!("line {line}"),
        (None, None, Some(id)) => format!("chunk {id}"),
        (None, None, None) => "?".into(),
    }
}

/// `text` with every citation marker replaced by a space.
pub fn without_markers(text: &str) -> String {
    let mut out = text.to_string();
    for m in extract_citations(text).iter().rev() {
        out.replace_range(m.offset..m.offset + m.marker.len(), " ");
    }
    out
}

/// Finds every citation marker in an answer.
pub fn extract_citations(answer: &str) -> Vec<RawCitation> {
    MARKER
        .captures_iter(answer)
        .map(|c| {
            let m = c.get(0).expect("match");
            if let Some(n) = c.get(5) {
                RawCitation {
                    marker: m.as_str().to_string(),
                    offset: m.start(),
                    kind: CitationKind::DocumentHeader,
                    id: n.as_str().to_string(),
                    quote: None,
                    path: c.get(6).map(|p| p.as_str().trim().to_string()),
                }
            } else {
                let kind = if &c[1] == "chunk" {
                    CitationKind::Chunk
                } else {
                    CitationKind::Doc
                };
                let quote = c
                    .get(3)
                    .map(|q| q.as_str().replace("\\\"", "\"").replace("\\\\", "\\"))
                    .or_else(|| c.get(4).map(|q| q.as_str().to_string()));
                RawCitation {
                    marker: m.as_str().to_string(),
                    offset: m.start(),
                    kind,
                    id: c[2].to_string(),
                    quote,
                    path: None,
                }
            }
        })
        .collect()
}

/// Lowercases, maps typographic quotes to ASCII and collapses whitespace runs
/// to one space, trimmed.
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for ch in s.chars() {
        if ch.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        let ch = match ch {
            '‘' | '’' => '\'',
            '“' | '”' => '"',
            c => c,
        };
        out.extend(ch.to_lowercase());
    }
    out
}

/// The checkable pieces of a quote: split at ellipses, normalized, pieces
/// shorter than [`MIN_QUOTE_CHARS`] dropped.
pub(crate) fn quote_pieces(quote: &str) -> Vec<String> {
    quote
        .split("...")
        .flat_map(|p| p.split('…'))
        .map(normalize)
        .map(|p| {
            p.trim_matches(|c: char| c == '"' || c == '\'' || c.is_whitespace())
                .to_string()
        })
        .filter(|p| p.chars().count() >= MIN_QUOTE_CHARS)
        .collect()
}

/// True when every piece is in the (normalized) text.
pub(crate) fn contains_all(haystack_norm: &str, pieces: &[String]) -> bool {
    pieces.iter().all(|p| haystack_norm.contains(p.as_str()))
}

fn resolved(raw: &RawCitation, chunk: &SourceChunk, status: CitationStatus) -> Citation {
    Citation {
        marker: raw.marker.clone(),
        answer_offset: raw.offset,
        kind: raw.kind,
        id: raw.id.clone(),
        quote: raw.quote.clone(),
        chunk_id: Some(chunk.id.clone()),
        doc_id: Some(chunk.doc_id.clone()),
        doc_index: Some(chunk.doc_index),
        path: Some(chunk.path.clone()),
        byte_start: Some(chunk.byte_start),
        byte_end: Some(chunk.byte_end),
        status,
        detail: None,
        origin: CitationOrigin::Model,
        line: None,
        location: chunk.location.clone(),
    }
}

fn unresolved(raw: &RawCitation, status: CitationStatus, detail: String) -> Citation {
    Citation {
        marker: raw.marker.clone(),
        answer_offset: raw.offset,
        kind: raw.kind,
        id: raw.id.clone(),
        quote: raw.quote.clone(),
        chunk_id: None,
        doc_id: None,
        doc_index: None,
        path: None,
        byte_start: None,
        byte_end: None,
        status,
        detail: Some(detail),
        origin: CitationOrigin::Model,
        line: None,
        location: None,
    }
}

/// A document's chunks as one text (the quote check of a `doc:N` citation).
pub(crate) fn joined(chunks: &[SourceChunk]) -> String {
    chunks
        .iter()
        .map(|c| c.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Resolves and checks one citation.
fn check(raw: &RawCitation, src: &dyn CitationSource, quotes_checked: &mut usize) -> Citation {
    let pieces = raw.quote.as_deref().map(quote_pieces).unwrap_or_default();
    if !pieces.is_empty() {
        *quotes_checked += 1;
    }
    match raw.kind {
        CitationKind::Chunk => {
            let Some(chunk) = src.chunk(&raw.id) else {
                return unresolved(
                    raw,
                    CitationStatus::UnknownId,
                    format!("no chunk with id {:?}", raw.id),
                );
            };
            if pieces.is_empty() {
                return resolved(raw, &chunk, CitationStatus::IdOnly);
            }
            if contains_all(&normalize(&chunk.text), &pieces) {
                resolved(raw, &chunk, CitationStatus::Verified)
            } else {
                let mut c = resolved(raw, &chunk, CitationStatus::QuoteNotFound);
                c.detail = Some(format!("quote not found in chunk {}", chunk.id));
                c
            }
        }
        CitationKind::Doc | CitationKind::DocumentHeader => {
            let n = src.document_count();
            let index = match raw.id.parse::<usize>() {
                Ok(i) if i < n => i,
                _ => {
                    return unresolved(
                        raw,
                        CitationStatus::UnknownId,
                        format!(
                            "no document {} (the corpus has documents 0..{})",
                            raw.id,
                            n.saturating_sub(1)
                        ),
                    );
                }
            };
            let path = src.document_path(index).unwrap_or_default();
            let chunks = src.document_chunks(index);
            let doc_level = |status: CitationStatus, detail: Option<String>| Citation {
                doc_index: Some(index),
                path: Some(path.clone()),
                doc_id: chunks.first().map(|c| c.doc_id.clone()),
                detail,
                ..unresolved(raw, status, String::new())
            };
            if let Some(p) = &raw.path
                && normalize(p) != normalize(&path)
                && !normalize(&path).ends_with(&normalize(p))
            {
                return doc_level(
                    CitationStatus::PathMismatch,
                    Some(format!("document {index} is {path:?}, not {p:?}")),
                );
            }
            if pieces.is_empty() {
                return doc_level(CitationStatus::IdOnly, None);
            }
            // Resolve to the first chunk holding the whole quote.
            if let Some(ch) = chunks
                .iter()
                .find(|c| contains_all(&normalize(&c.text), &pieces))
            {
                return resolved(raw, ch, CitationStatus::Verified);
            }
            // A quote spanning a chunk boundary: check the document as a whole.
            if contains_all(&normalize(&joined(&chunks)), &pieces) {
                return doc_level(CitationStatus::Verified, None);
            }
            doc_level(
                CitationStatus::QuoteNotFound,
                Some(format!("quote not found in document {index} ({path})")),
            )
        }
    }
}

/// Extracts and verifies every citation of an answer.
pub fn verify(answer: &str, src: &dyn CitationSource) -> VerificationReport {
    let mut quotes_checked = 0;
    let citations: Vec<Citation> = extract_citations(answer)
        .iter()
        .map(|r| check(r, src, &mut quotes_checked))
        .collect();
    let failed = citations.iter().filter(|c| !c.status.is_valid()).count();
    VerificationReport {
        all_valid: failed == 0,
        failed,
        quotes_checked,
        citations,
    }
}

/// Under the strict policy: the answer with a flag right after every
/// unsupported citation marker, e.g. `[[chunk:c9 "..."]] [unverified: quote not found in chunk c9]`.
pub fn flag_unsupported(answer: &str, report: &VerificationReport) -> String {
    let mut out = String::with_capacity(answer.len() + 64 * report.failed);
    let mut last = 0;
    for c in report.citations.iter().filter(|c| !c.status.is_valid()) {
        let end = c.answer_offset + c.marker.len();
        if end > answer.len() || c.answer_offset < last {
            continue;
        }
        out.push_str(&answer[last..end]);
        let why = c
            .detail
            .clone()
            .unwrap_or_else(|| format!("{:?}", c.status));
        out.push_str(&format!(" [unverified: {why}]"));
        last = end;
    }
    out.push_str(&answer[last..]);
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Two documents, three chunks.
    pub(crate) struct Fixture;

    fn chunk(id: &str, doc: usize, start: u64, text: &str) -> SourceChunk {
        SourceChunk {
            id: id.into(),
            doc_id: format!("d{doc}"),
            doc_index: doc,
            path: format!("docs/file{doc}.md"),
            byte_start: start,
            byte_end: start + text.len() as u64,
            text: text.into(),
            location: None,
        }
    }

    impl CitationSource for Fixture {
        fn chunk(&self, id: &str) -> Option<SourceChunk> {
            (0..2)
                .flat_map(|i| self.document_chunks(i))
                .find(|c| c.id == id)
        }
        fn document_count(&self) -> usize {
            2
        }
        fn document_path(&self, index: usize) -> Option<String> {
            (index < 2).then(|| format!("docs/file{index}.md"))
        }
        fn document_chunks(&self, index: usize) -> Vec<SourceChunk> {
            match index {
                0 => vec![
                    chunk(
                        "c0",
                        0,
                        0,
                        "The lease begins on  March 1, 2024\nand runs twelve months.",
                    ),
                    chunk(
                        "c1",
                        0,
                        60,
                        "Rent is due on the first business day of each month.",
                    ),
                ],
                1 => vec![chunk("c2", 1, 0, "The secret code is 4721. Keep it safe.")],
                _ => vec![],
            }
        }
    }

    #[test]
    fn a_source_is_placed_by_its_location_before_its_line() {
        assert_eq!(
            place_words(Some("slide 4"), Some(12), Some("c-1")),
            "slide 4"
        );
        assert_eq!(place_words(None, Some(12), Some("c-1")), "line 12");
        assert_eq!(place_words(None, None, Some("c-1")), "chunk c-1");
        assert_eq!(place_words(None, None, None), "?");
    }

    #[test]
    fn extracts_all_marker_forms() {
        let a = r#"Rent [[chunk:c1 "due on the first business day"]] and [[doc:1]] and [DOCUMENT 0: docs/file0.md] and [[chunk: c2]] and [[doc:0 “lease begins on march”]]."#;
        let c = extract_citations(a);
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].kind, CitationKind::Chunk);
        assert_eq!(c[0].id, "c1");
        assert_eq!(c[0].quote.as_deref(), Some("due on the first business day"));
        assert_eq!(c[1].kind, CitationKind::Doc);
        assert_eq!(c[2].kind, CitationKind::DocumentHeader);
        assert_eq!(c[2].path.as_deref(), Some("docs/file0.md"));
        assert_eq!(c[3].id, "c2");
        assert_eq!(c[4].quote.as_deref(), Some("lease begins on march"));
        assert_eq!(&a[c[0].offset..c[0].offset + 2], "[[");
    }

    #[test]
    fn good_and_fabricated_quotes() {
        let a = r#"Begins [[chunk:c0 "lease BEGINS on March 1, 2024 and runs"]]; code [[chunk:c2 "the secret code is 9999"]]."#;
        let r = verify(a, &Fixture);
        assert_eq!(r.citations.len(), 2);
        assert_eq!(
            r.citations[0].status,
            CitationStatus::Verified,
            "whitespace and case are normalized"
        );
        assert_eq!(r.citations[0].byte_start, Some(0));
        assert_eq!(r.citations[0].path.as_deref(), Some("docs/file0.md"));
        assert_eq!(r.citations[1].status, CitationStatus::QuoteNotFound);
        assert!(!r.all_valid);
        assert_eq!(r.failed, 1);
        assert_eq!(r.quotes_checked, 2);
    }

    #[test]
    fn unknown_ids() {
        let r = verify(
            "[[chunk:nope]] [[doc:7 \"whatever it was\"]] [DOCUMENT 2]",
            &Fixture,
        );
        assert!(
            r.citations
                .iter()
                .all(|c| c.status == CitationStatus::UnknownId)
        );
        assert_eq!(r.failed, 3);
        assert!(r.citations[1].detail.as_ref().unwrap().contains("0..1"));
    }

    #[test]
    fn doc_quote_resolves_to_chunk() {
        let r = verify("[[doc:0 \"first business day of each month\"]]", &Fixture);
        let c = &r.citations[0];
        assert_eq!(c.status, CitationStatus::Verified);
        assert_eq!(c.chunk_id.as_deref(), Some("c1"));
        assert_eq!(c.byte_start, Some(60));
    }

    #[test]
    fn quote_across_chunks_and_ellipsis() {
        let r = verify("[[doc:0 \"runs twelve months. Rent is due on\"]]", &Fixture);
        assert_eq!(r.citations[0].status, CitationStatus::Verified);
        assert_eq!(
            r.citations[0].chunk_id, None,
            "spans two chunks: document-level"
        );
        let r = verify(
            "[[chunk:c0 \"The lease begins ... runs twelve months\"]]",
            &Fixture,
        );
        assert_eq!(r.citations[0].status, CitationStatus::Verified);
    }

    #[test]
    fn short_quotes_are_not_checked() {
        let r = verify("[[chunk:c2 \"4721\"]]", &Fixture);
        assert_eq!(r.citations[0].status, CitationStatus::IdOnly);
        assert_eq!(r.quotes_checked, 0);
    }

    #[test]
    fn document_header_path_mismatch() {
        let r = verify(
            "[DOCUMENT 1: docs/file0.md] [DOCUMENT 1: file1.md]",
            &Fixture,
        );
        assert_eq!(r.citations[0].status, CitationStatus::PathMismatch);
        assert_eq!(
            r.citations[1].status,
            CitationStatus::IdOnly,
            "a path suffix is accepted"
        );
    }

    #[test]
    fn no_citations_is_vacuously_valid() {
        let r = verify("No markers here.", &Fixture);
        assert!(r.all_valid);
        assert!(r.citations.is_empty());
    }

    #[test]
    fn strict_flags_only_failures() {
        let a = r#"A [[chunk:c2 "the secret code is 4721"]] B [[chunk:zz]] C"#;
        let r = verify(a, &Fixture);
        let flagged = flag_unsupported(a, &r);
        assert_eq!(
            flagged,
            r#"A [[chunk:c2 "the secret code is 4721"]] B [[chunk:zz]] [unverified: no chunk with id "zz"] C"#
        );
    }

    #[test]
    fn policy_parse() {
        assert_eq!(
            "strict".parse::<CitationPolicy>().unwrap(),
            CitationPolicy::Strict
        );
        assert_eq!(
            "best-effort".parse::<CitationPolicy>().unwrap(),
            CitationPolicy::BestEffort
        );
        assert!(
            "lenient"
                .parse::<CitationPolicy>()
                .unwrap_err()
                .to_string()
                .contains("strict or best_effort")
        );
    }
}
