//! Claims of an answer and the claim-by-claim citation policy: an answer is
//! split into claims (sentences, list items, table rows); `strict` keeps only
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
    let mut out = Vec::new();
    for (ls, end) in lines {
        let le = ls + text[ls..end].trim_end_matches('\r').len();
        let trimmed = text[ls..le].trim();
        if trimmed.is_empty() {
            continue;
        }
        let has_marker = markers.iter().any(|(s, _)| *s >= ls && *s < le);
        if trimmed.starts_with('#')
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
        let mut i = ls;
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
        if !text[pos..le].trim().is_empty() {
            out.push(Claim {
                start: pos,
                end: le,
                structural: false,
            });
        }
    }
    out
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
