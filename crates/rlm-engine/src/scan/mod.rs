//! Exhaustive reading: `grep()` finds every line of the corpus a pattern
//! matches (not the top k, as `search()` does), with its document, line and
//! chunk, and the true total even when it returns fewer. Counting, summing
//! and "list every" questions need every line; a ranked search of three
//! passages counts three.
//!
//! A scan is also evidence: the answer to a question about a set carries the
//! scans it was computed from ([`CountedSet`]), each re-run when the answer
//! is checked, so "92 refunds" shows what was counted and that counting again
//! gives 92.

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use crate::corpus::{Corpus, DocumentError};

mod tally;

pub use tally::{
    Field, MAX_GROUPS, Tally, TallySpec, fields, number_before, number_pattern_for, read_number,
    tally, units_in,
};

/// Longest pattern, in characters.
pub const MAX_PATTERN_CHARS: usize = 1_000;
/// Most matches one `grep()` returns (the total is counted past it).
pub const MAX_MATCHES: usize = 100_000;
/// Matches returned when the call names no `limit`.
pub const DEFAULT_MATCHES: usize = 10_000;
/// Longest line text returned, in characters (the rest is cut, marked `…`).
pub const MAX_LINE_CHARS: usize = 1_000;
/// Chunk ids a [`CountedSet`] keeps to open (the count covers them all).
const KEPT_CHUNKS: usize = 200;

/// One line a pattern matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineMatch {
    /// The document's position in the corpus (`None` for a text given to
    /// `grep()` that is no document).
    pub doc_index: Option<usize>,
    /// Its corpus-relative path.
    pub path: Option<String>,
    /// 1-based line in the document (or the text).
    pub line: u32,
    /// The chunk holding the line's start.
    pub chunk_id: Option<String>,
    /// The line (without its newline), cut past [`MAX_LINE_CHARS`].
    pub text: String,
}

/// What one scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Every matching line up to the limit, in corpus order.
    pub matches: Vec<LineMatch>,
    /// Matching lines in the whole corpus, past the limit too.
    pub total: u64,
    /// Documents holding at least one match.
    pub documents: usize,
    /// Distinct chunks holding a match (at most [`KEPT_CHUNKS`]), in order.
    pub chunk_ids: Vec<String>,
}

/// Compiles a `grep()` pattern: Python-style regular expressions without
/// look-around and back-references, `^` and `$` at line boundaries.
pub fn compile(pattern: &str, ignore_case: bool) -> Result<Regex, String> {
    let chars = pattern.chars().count();
    if chars == 0 {
        return Err("the pattern is empty: give a word or a regular expression".into());
    }
    if chars > MAX_PATTERN_CHARS {
        return Err(format!(
            "the pattern has {chars} characters; the limit is {MAX_PATTERN_CHARS}"
        ));
    }
    RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .multi_line(true)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| {
            let first = e.to_string();
            let why = first.lines().last().unwrap_or("invalid").trim().to_string();
            format!(
                "the pattern {pattern:?} is not a regular expression grep() can run ({why}); look-ahead, look-behind and back-references are not supported: match a plain word, or grep more widely and filter the lines in Python"
            )
        })
}

/// Every line of the corpus (or of `only` documents) that `re` matches:
/// the first `limit` returned, all of them counted.
pub fn grep(
    corpus: &Corpus,
    re: &Regex,
    limit: usize,
    only: Option<&[usize]>,
) -> Result<Scan, DocumentError> {
    let mut scan = Scan {
        matches: Vec::new(),
        total: 0,
        documents: 0,
        chunk_ids: Vec::new(),
    };
    let all: Vec<usize> = (0..corpus.documents().len()).collect();
    for &index in only.unwrap_or(&all) {
        let text = corpus.document_text(index)?;
        // A document without a match costs one pass of the regex engine.
        if !re.is_match(&text) {
            continue;
        }
        let spans = corpus.chunk_starts(index)?;
        scan.documents += 1;
        let place = Some((index, corpus.documents()[index].path.as_str()));
        grep_document(place, &text, &spans, re, limit, &mut scan);
    }
    Ok(scan)
}

/// Every line of `text` (no document of the corpus) that `re` matches.
pub fn grep_text(text: &str, re: &Regex, limit: usize) -> Scan {
    let mut scan = Scan {
        matches: Vec::new(),
        total: 0,
        documents: 0,
        chunk_ids: Vec::new(),
    };
    grep_document(None, text, &[], re, limit, &mut scan);
    scan
}

/// The matching lines of one text into `scan`: a document's (its index and
/// path, where its chunks start) or a given text's.
fn grep_document(
    place: Option<(usize, &str)>,
    text: &str,
    spans: &[(u64, String)],
    re: &Regex,
    limit: usize,
    scan: &mut Scan,
) {
    each_line(text, spans, re, |line, chunk_id, found| {
        scan.total += 1;
        keep_chunk(&mut scan.chunk_ids, chunk_id);
        if scan.matches.len() < limit {
            scan.matches.push(LineMatch {
                doc_index: place.map(|(index, _)| index),
                path: place.map(|(_, path)| path.to_string()),
                line,
                chunk_id: (!chunk_id.is_empty()).then(|| chunk_id.to_string()),
                text: cut_line(found),
            });
        }
    });
}

/// Calls `on_line(line number, chunk id, line text)` for every line of
/// `text` that `re` matches, once per line, in order.
fn each_line(
    text: &str,
    spans: &[(u64, String)],
    re: &Regex,
    mut on_line: impl FnMut(u32, &str, &str),
) {
    let (mut pos, mut line, mut counted_to) = (0usize, 1u32, 0usize);
    while pos <= text.len() {
        let Some(m) = re.find_at(text, pos) else {
            break;
        };
        let start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let end = text[m.start()..]
            .find('\n')
            .map_or(text.len(), |i| m.start() + i);
        line += text[counted_to..start].matches('\n').count() as u32;
        counted_to = start;
        on_line(line, chunk_at(spans, start as u64), &text[start..end]);
        // The next match starts on the next line: a line counts once.
        pos = end + 1;
    }
}

/// Keeps a matching line's chunk among the set's chunks to open. Lines come
/// in order, so a chunk's lines are consecutive.
fn keep_chunk(ids: &mut Vec<String>, chunk_id: &str) {
    if ids.len() < KEPT_CHUNKS
        && !chunk_id.is_empty()
        && ids.last().map(String::as_str) != Some(chunk_id)
    {
        ids.push(chunk_id.to_string());
    }
}

/// The id of the chunk whose span holds byte `at` (chunks in order; empty
/// when none does).
fn chunk_at(spans: &[(u64, String)], at: u64) -> &str {
    let i = spans.partition_point(|(start, _)| *start <= at);
    i.checked_sub(1).map_or("", |i| spans[i].1.as_str())
}

fn cut_line(line: &str) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// Lines of a document read for [`typical_line`].
const TYPICAL_LINES_READ: usize = 200;

/// A line that shows how the corpus writes its lines, for a pattern that
/// matched none: among the first lines of the largest document that hold
/// three words or more, the one of median length (a record of a ledger or
/// a log, a sentence of prose, not a title). `None` for an empty corpus.
pub fn typical_line(corpus: &Corpus) -> Result<Option<String>, DocumentError> {
    let Some(largest) = (0..corpus.documents().len()).max_by_key(|&i| corpus.documents()[i].chars)
    else {
        return Ok(None);
    };
    let text = corpus.document_text(largest)?;
    let mut lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.split_whitespace().count() >= 3)
        .take(TYPICAL_LINES_READ)
        .collect();
    lines.sort_by_key(|l| l.chars().count());
    Ok(lines.get(lines.len() / 2).map(|l| cut_line(l)))
}

/// A set an answer was computed from: one `grep()` the run made, with its
/// count re-checked when the answer is verified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedSet {
    /// The agent that scanned.
    pub agent: String,
    /// True for the engine's own scan in its first look at the corpus (the
    /// counts of the question's words): kept only when the answer states
    /// its count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_engine: bool,
    /// The call as the run wrote it, e.g. `grep("refund")` or
    /// `tally("purchase", number="(\\d+) EUR")`: what a person reads.
    #[serde(default)]
    pub call: String,
    /// The pattern, as given.
    pub pattern: String,
    /// More patterns a counted line holds too (a `tally()` of a list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
    /// Whether case was ignored.
    pub ignore_case: bool,
    /// Documents the scan was limited to (`None`: the whole corpus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents_scanned: Option<Vec<usize>>,
    /// The number pattern of a `tally()` (`None`: the lines were counted,
    /// not added up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    /// Matching lines.
    pub lines: u64,
    /// The sum of the lines' numbers (a `tally()` with a number pattern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<f64>,
    /// Documents holding them.
    pub documents: usize,
    /// Chunks holding them (the first 200), to open.
    pub chunk_ids: Vec<String>,
    /// True when the answer's text holds this count as a number.
    pub count_in_answer: bool,
    /// Re-running the scan when the answer was checked gave the same count
    /// (`None`: not re-run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recounted: Option<bool>,
}

impl CountedSet {
    /// The record of a scan `agent` made.
    pub fn of(
        agent: &str,
        pattern: &str,
        ignore_case: bool,
        only: Option<&[usize]>,
        scan: &Scan,
    ) -> Self {
        CountedSet {
            agent: agent.to_string(),
            by_engine: false,
            call: format!("grep({pattern:?})"),
            pattern: pattern.to_string(),
            also: Vec::new(),
            ignore_case,
            documents_scanned: only.map(<[usize]>::to_vec),
            number: None,
            lines: scan.total,
            sum: None,
            documents: scan.documents,
            chunk_ids: scan.chunk_ids.clone(),
            count_in_answer: false,
            recounted: None,
        }
    }

    /// The record of a `tally()` `agent` made: its lines, and with a number
    /// pattern their sum. `call` is the call as written.
    #[allow(clippy::too_many_arguments)]
    pub fn of_tally(
        agent: &str,
        call: String,
        patterns: &[String],
        number: Option<&str>,
        ignore_case: bool,
        only: Option<&[usize]>,
        t: &Tally,
    ) -> Self {
        CountedSet {
            agent: agent.to_string(),
            by_engine: false,
            call,
            pattern: patterns.first().cloned().unwrap_or_default(),
            also: patterns.iter().skip(1).cloned().collect(),
            ignore_case,
            documents_scanned: only.map(<[usize]>::to_vec),
            number: number.map(str::to_string),
            lines: t.lines,
            sum: number.map(|_| t.rounded_sum()),
            documents: t.documents,
            chunk_ids: t.chunk_ids.clone(),
            count_in_answer: false,
            recounted: None,
        }
    }

    /// The call as a person reads it (records of older runs kept no call:
    /// their scan was a `grep()`).
    pub fn written(&self) -> String {
        if self.call.is_empty() {
            format!("grep({:?})", self.pattern)
        } else {
            self.call.clone()
        }
    }

    /// "N lines in M documents", with the sum when numbers were added up.
    pub fn extent(&self) -> String {
        let plural = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        let sum = self.sum.map(|s| format!(", sum {s}")).unwrap_or_default();
        format!(
            "{} in {}{sum}",
            plural(self.lines, "line"),
            plural(self.documents as u64, "document")
        )
    }

    /// Same scan, same corpus: the key that keeps one record per scan.
    pub fn same_scan(&self, other: &CountedSet) -> bool {
        self.pattern == other.pattern
            && self.ignore_case == other.ignore_case
            && self.documents_scanned == other.documents_scanned
            && self.number == other.number
            && self.also == other.also
    }

    /// Runs the scan again over `corpus` and records whether it counts (and
    /// adds up) the same; notes whether `answer` states the count or the sum.
    pub fn recheck(&mut self, corpus: &Corpus, answer: &str) {
        let stated = numbers_in(answer);
        self.count_in_answer = stated.contains(&self.lines)
            || self
                .sum
                .is_some_and(|sum| states_number(answer, &stated, sum));
        let Ok(re) = compile(&self.pattern, self.ignore_case) else {
            self.recounted = None;
            return;
        };
        let only = self.documents_scanned.as_deref();
        if self.number.is_none() && self.also.is_empty() {
            self.recounted = grep(corpus, &re, 0, only)
                .ok()
                .map(|again| again.total == self.lines);
            return;
        }
        let compiled = |p: &String| compile(p, self.ignore_case).ok();
        let also: Option<Vec<Regex>> = self.also.iter().map(compiled).collect();
        // `Some(None)`: no number pattern; `None`: it no longer compiles.
        let number = match &self.number {
            None => Some(None),
            Some(p) => compiled(p).map(Some),
        };
        self.recounted = match (also, number) {
            (Some(also), Some(number)) => {
                let spec = TallySpec {
                    lines: &re,
                    also: &also,
                    number: number.as_ref(),
                    by: None,
                };
                tally(corpus, &spec, only).ok().map(|again| {
                    again.lines == self.lines
                        && (self.sum.is_none() || Some(again.rounded_sum()) == self.sum)
                })
            }
            _ => None,
        };
    }
}

/// Whether `answer` states `x`: as a whole number among `stated`, or
/// written with a decimal point or comma.
fn states_number(answer: &str, stated: &[u64], x: f64) -> bool {
    if x.fract() == 0.0 && x >= 0.0 {
        return stated.contains(&(x as u64));
    }
    let written = format!("{x}");
    answer.contains(&written) || answer.contains(&written.replace('.', ","))
}

/// The whole numbers written in `text` (ASCII digits, with `,` `.` `'` or a
/// no-break space between groups of three: 1,234 and 1.234 and 1'234 are
/// 1234, as each language writes them).
pub fn numbers_in(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut digits = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i <= chars.len() {
        let c = chars.get(i).copied();
        match c {
            Some(d) if d.is_ascii_digit() => digits.push(d),
            // A group separator followed by exactly three digits.
            Some(sep @ (',' | '.' | '\'' | '\u{202f}' | '\u{a0}'))
                if !digits.is_empty()
                    && chars.get(i + 1..i + 4).is_some_and(|g| {
                        g.iter().all(char::is_ascii_digit)
                            && !chars.get(i + 4).is_some_and(char::is_ascii_digit)
                    }) =>
            {
                let _ = sep;
            }
            _ => {
                if let Ok(n) = digits.parse() {
                    out.push(n);
                }
                digits.clear();
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_corpus::MemoryDocument;

    fn corpus() -> Corpus {
        let ledger = |user: &str, n: usize| {
            (0..n)
                .map(|i| {
                    let kind = if i % 3 == 0 { "refund" } else { "purchase" };
                    format!("2024-01-{:02} {user} {kind} {} EUR\n", i % 28 + 1, 10 + i)
                })
                .collect::<String>()
        };
        Corpus::in_memory(
            &[
                MemoryDocument::new("a.txt", ledger("ada", 300)),
                MemoryDocument::new("b.txt", ledger("bo", 30)),
                MemoryDocument::new("c.txt", "nothing to see\n"),
            ],
            400,
        )
        .unwrap()
    }

    #[test]
    fn every_line_is_found_with_its_place_and_the_total_passes_the_limit() {
        let c = corpus();
        let re = compile("refund", true).unwrap();
        let all = grep(&c, &re, 1_000, None).unwrap();
        assert_eq!(all.total, 100 + 10);
        assert_eq!(all.matches.len(), 110);
        assert_eq!(all.documents, 2);
        let first = &all.matches[0];
        assert_eq!((first.doc_index, first.line), (Some(0), 1));
        assert_eq!(first.text, "2024-01-01 ada refund 10 EUR");
        let fourth = &all.matches[1];
        assert_eq!(fourth.line, 4);
        // Each line's chunk holds the line.
        for m in &all.matches {
            let id = m.chunk_id.as_deref().unwrap();
            let chunk = crate::citations::CitationSource::chunk(&c, id).unwrap();
            assert!(chunk.text.contains(&m.text), "{m:?}");
        }
        let cut = grep(&c, &re, 5, None).unwrap();
        assert_eq!((cut.total, cut.matches.len()), (110, 5));
        let only_b = grep(&c, &re, 1_000, Some(&[1])).unwrap();
        assert_eq!(only_b.total, 10);
        assert_eq!(only_b.matches[0].path.as_deref(), Some("b.txt"));
        let given = grep_text("a refund\nnone\nREFUND\n", &re, 1);
        assert_eq!((given.total, given.matches.len()), (2, 1));
        assert_eq!(
            (given.matches[0].doc_index, given.matches[0].line),
            (None, 1)
        );
    }

    #[test]
    fn patterns_anchor_at_lines_and_bad_ones_say_why() {
        let c = corpus();
        let re = compile("^2024-01-0[12] ", false).unwrap();
        assert_eq!(grep(&c, &re, 10, None).unwrap().total, 11 + 11 + 4);
        let re = compile("EUR$", false).unwrap();
        assert_eq!(grep(&c, &re, 10, None).unwrap().total, 330);
        assert_eq!(
            grep(&c, &compile("REFUND", false).unwrap(), 1, None)
                .unwrap()
                .total,
            0
        );
        let e = compile("(?<=x)y", true).unwrap_err();
        assert!(e.contains("look-ahead"), "{e}");
        assert!(compile("", true).is_err());
        assert!(compile(&"a".repeat(1_001), true).is_err());
    }

    #[test]
    fn a_counted_set_is_recounted_and_found_in_the_answer() {
        let c = corpus();
        let re = compile("refund", true).unwrap();
        let scan = grep(&c, &re, 0, None).unwrap();
        let mut set = CountedSet::of("root", "refund", true, None, &scan);
        set.recheck(&c, "There are 110 refunds.");
        assert_eq!((set.count_in_answer, set.recounted), (true, Some(true)));
        set.lines = 7;
        set.recheck(&c, "Es gibt 110 Erstattungen.");
        assert_eq!((set.count_in_answer, set.recounted), (false, Some(false)));
    }

    #[test]
    fn numbers_are_read_with_group_separators() {
        assert_eq!(numbers_in("92 refunds, 6,636 EUR"), vec![92, 6636]);
        assert_eq!(
            numbers_in("1.234.567 und 12\u{202f}345"),
            vec![1_234_567, 12_345]
        );
        assert_eq!(numbers_in("in 2024 120 refunds"), vec![2024, 120]);
        assert_eq!(numbers_in("3.5 and 2024-01-02"), vec![3, 5, 2024, 1, 2]);
    }
}
