//! Claims of an answer and the claim-by-claim citation policy: an answer is
//! split into claims (sentences, list items, table rows; not headings, list
//! numbers, table headers or code); `strict` keeps only
//! the claims with a verified citation, `best_effort` keeps all and lists the
//! unsupported ones.

use crate::citations::{self, CitationPolicy, VerificationReport};

/// One claim of an answer: a byte span and whether it is structure.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claim {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) structural: bool,
}

impl Claim {
    /// What the claim says: its text in `answer` without the list item's
    /// number that starts it ("2. The office moves" states no "2").
    pub(crate) fn said<'a>(&self, answer: &'a str) -> &'a str {
        let text = &answer[self.start..self.end];
        &text[list_marker_len(text)..]
    }
}

/// Splits an answer into claims: per line, sentences ending in `.`, `!` or
/// `?` followed by space; citation markers (and punctuation) right after a
/// sentence end belong to that sentence; markers are never split.
pub(crate) fn claims(text: &str) -> Vec<Claim> {
    let markers: Vec<(usize, usize)> = citations::extract_citations(text)
        .iter()
        .map(|m| (m.offset, m.offset + m.marker.len()))
        .collect();
    let marker_at = |i: usize| markers.iter().find(|(s, _)| *s == i).map(|(_, e)| *e);
    let inside = |i: usize| {
        markers
            .iter()
            .find(|(s, e)| *s < i && i < *e)
            .map(|(_, e)| *e)
    };
    // Lines end at line breaks outside markers: a quote may span lines.
    let mut lines: Vec<(usize, usize)> = Vec::new();
    let mut line_start = 0;
    for (at, _) in text.match_indices('\n') {
        if inside(at).is_none() {
            lines.push((line_start, at));
            line_start = at + 1;
        }
    }
    lines.push((line_start, text.len()));
    let kinds = line_kinds(text, &lines);
    let mut out = Vec::new();
    for (&(ls, end), structure) in lines.iter().zip(kinds) {
        let le = ls + text[ls..end].trim_end_matches('\r').len();
        let trimmed = text[ls..le].trim();
        if trimmed.is_empty() {
            continue;
        }
        let has_marker = markers.iter().any(|(s, _)| *s >= ls && *s < le);
        if structure
            || trimmed.starts_with('#')
            || (trimmed.ends_with(':') && !has_marker && trimmed.len() < 100)
        {
            out.push(Claim {
                start: ls,
                end: le,
                structural: true,
            });
            continue;
        }
        let mut pos = ls;
        // A list item's number ("1." or "2)") ends no sentence.
        let body = ls + list_marker_len(&text[ls..le]);
        let mut i = body;
        while i < le {
            if let Some(e) = marker_at(i).or_else(|| inside(i)) {
                i = e;
                continue;
            }
            let ch = text[i..].chars().next().unwrap_or(' ');
            let next = i + ch.len_utf8();
            if matches!(ch, '.' | '!' | '?')
                && (next >= le || text[next..].starts_with(char::is_whitespace))
            {
                // Absorb the markers (and closing punctuation) that follow.
                let mut j = next;
                loop {
                    let k = j + (text[j..le].len() - text[j..le].trim_start().len());
                    match marker_at(k) {
                        Some(e) if k < le => {
                            j = e;
                            while j < le && matches!(text.as_bytes()[j], b'.' | b',' | b';') {
                                j += 1;
                            }
                        }
                        _ => break,
                    }
                }
                if !text[pos..j].trim().is_empty() {
                    out.push(Claim {
                        start: pos,
                        end: j,
                        structural: false,
                    });
                }
                pos = j;
                i = j;
                continue;
            }
            i = next;
        }
        if !text[pos.max(body)..le].trim().is_empty() {
            out.push(Claim {
                start: pos,
                end: le,
                structural: false,
            });
        }
    }
    out
}

/// For each line, whether it is Markdown structure that states nothing: a
/// line of a fenced code block (or its fence), a table's header row and the
/// row of dashes under it.
fn line_kinds(text: &str, lines: &[(usize, usize)]) -> Vec<bool> {
    let line = |k: usize| text[lines[k].0..lines[k].1].trim();
    let mut out = vec![false; lines.len()];
    let mut fence: Option<&str> = None;
    for k in 0..lines.len() {
        let t = line(k);
        if let Some(f) = fence {
            out[k] = true;
            if t.starts_with(f)
                && t.trim_start_matches(f.chars().next().unwrap_or('`'))
                    .trim()
                    .is_empty()
            {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            out[k] = true;
            continue;
        }
        if is_table_rule(t) {
            out[k] = true;
            // The row above the rule is the table's header.
            if k > 0 && line(k - 1).contains('|') {
                out[k - 1] = true;
            }
        }
    }
    out
}

/// True for a table's header rule: `|---|:--:|`, `--- | ---`.
fn is_table_rule(line: &str) -> bool {
    line.contains('-')
        && line.contains('|')
        && line
            .chars()
            .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// Bytes of the list marker that starts `line` ("  3. ", "10) "), if any.
fn list_marker_len(line: &str) -> usize {
    let indent = line.len() - line.trim_start().len();
    let rest = &line[indent..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return 0;
    }
    let after = &rest[digits..];
    if (after.starts_with(". ") || after.starts_with(") ") || after.starts_with(".\t"))
        || after == "."
        || after == ")"
    {
        indent + digits + 1
    } else {
        0
    }
}

/// Applies the policy: returns the text to keep (strict) and the claims
/// without a verified citation.
pub(crate) fn apply_policy(
    text: &str,
    report: &VerificationReport,
    policy: CitationPolicy,
) -> (String, Vec<String>) {
    let cs = claims(text);
    let supported = |c: &Claim| {
        report
            .citations
            .iter()
            .any(|x| x.answer_offset >= c.start && x.answer_offset < c.end && x.status.is_valid())
    };
    let unsupported: Vec<String> = cs
        .iter()
        .filter(|c| !c.structural && !supported(c))
        .map(|c| text[c.start..c.end].trim().to_string())
        .collect();
    if policy == CitationPolicy::BestEffort || unsupported.is_empty() {
        return (text.to_string(), unsupported);
    }
    // Strict: rebuild line by line from the kept claims.
    let mut out = String::new();
    let mut kept_any_claim = false;
    let line_of = |c: &Claim| text[..c.start].matches('\n').count();
    let mut current_line = usize::MAX;
    let mut line_buf = String::new();
    let mut lines: Vec<String> = Vec::new();
    for c in &cs {
        let l = line_of(c);
        if l != current_line {
            if !line_buf.trim().is_empty() {
                lines.push(std::mem::take(&mut line_buf));
            }
            line_buf.clear();
            current_line = l;
        }
        if c.structural || supported(c) {
            kept_any_claim |= !c.structural;
            if !line_buf.is_empty() {
                line_buf.push(' ');
            }
            line_buf.push_str(text[c.start..c.end].trim());
        }
    }
    if !line_buf.trim().is_empty() {
        lines.push(line_buf);
    }
    if kept_any_claim {
        out.push_str(&lines.join("\n"));
    } else {
        out.push_str(
            "No claim of the answer had a verified citation, so the strict citation policy removed all of them (they are listed in dropped_claims).",
        );
    }
    (out, unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quote_that_spans_lines_stays_in_its_claim() {
        let text = "The code is 8316. [[chunk:ab-0 \"Security notes.\n    The code is 8316.\"]]\nNext line.";
        let cs = claims(text);
        assert_eq!(cs.len(), 2, "{cs:?}");
        assert!(text[cs[0].start..cs[0].end].ends_with("8316.\"]]"));
        assert_eq!(&text[cs[1].start..cs[1].end], "Next line.");
    }
    use crate::citations::{Citation, CitationKind, CitationStatus};

    fn cite(text: &str, marker: &str, ok: bool) -> Citation {
        Citation {
            marker: marker.into(),
            answer_offset: text.find(marker).unwrap(),
            kind: CitationKind::Chunk,
            id: "x".into(),
            quote: None,
            chunk_id: None,
            doc_id: None,
            doc_index: None,
            path: None,
            byte_start: None,
            byte_end: None,
            status: if ok {
                CitationStatus::Verified
            } else {
                CitationStatus::QuoteNotFound
            },
            detail: None,
            origin: Default::default(),
            line: None,
            location: None,
        }
    }

    #[test]
    fn claims_keep_markers_with_their_sentence() {
        let t = "Skills:\nAlexis knows Rust. [[chunk:a-1 \"Rust. Go.\"]] She likes tea. Bob is tall [[chunk:b-2]].\n- Python [[chunk:a-2]]\n## Notes";
        let cs = claims(t);
        let texts: Vec<&str> = cs.iter().map(|c| t[c.start..c.end].trim()).collect();
        assert_eq!(
            texts,
            [
                "Skills:",
                "Alexis knows Rust. [[chunk:a-1 \"Rust. Go.\"]]",
                "She likes tea.",
                "Bob is tall [[chunk:b-2]].",
                "- Python [[chunk:a-2]]",
                "## Notes"
            ]
        );
        assert!(cs[0].structural && cs[5].structural && !cs[1].structural);
    }

    #[test]
    fn list_numbers_table_headers_and_code_are_no_claims() {
        let t = "Die Codes:\n\n1. Der Code ist 4721 [[doc:1 \"4721\"]].\n2) Das Büro zieht im Mai um.\n\n| Punkt | Wert |\n|---|:---:|\n| Code | 4721 |\n\n```python\nprint(1. )\n```\n";
        let cs = claims(t);
        let said: Vec<&str> = cs
            .iter()
            .filter(|c| !c.structural)
            .map(|c| t[c.start..c.end].trim())
            .collect();
        assert_eq!(
            said,
            [
                "1. Der Code ist 4721 [[doc:1 \"4721\"]].",
                "2) Das Büro zieht im Mai um.",
                "| Code | 4721 |"
            ]
        );
        assert_eq!(list_marker_len("  12. x"), 5);
        assert_eq!(cs[2].said(t).trim(), "Das Büro zieht im Mai um.");
        assert_eq!(list_marker_len("3.5 m"), 0);
    }

    #[test]
    fn strict_drops_and_best_effort_keeps() {
        let t = "Alexis knows Rust [[chunk:a-1]]. She likes tea. Bob is tall [[chunk:b-2]].";
        let report = VerificationReport {
            citations: vec![
                cite(t, "[[chunk:a-1]]", true),
                cite(t, "[[chunk:b-2]]", false),
            ],
            all_valid: false,
            failed: 1,
            quotes_checked: 0,
        };
        let (kept, dropped) = apply_policy(t, &report, CitationPolicy::Strict);
        assert_eq!(kept, "Alexis knows Rust [[chunk:a-1]].");
        assert_eq!(dropped, ["She likes tea.", "Bob is tall [[chunk:b-2]]."]);
        let (kept, unsupported) = apply_policy(t, &report, CitationPolicy::BestEffort);
        assert_eq!(kept, t);
        assert_eq!(unsupported.len(), 2);
        let (kept, _) = apply_policy(
            "Nothing cited here.",
            &VerificationReport::default(),
            CitationPolicy::Strict,
        );
        assert!(kept.contains("removed all"));
    }
}
