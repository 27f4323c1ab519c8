//! The semantic check (`--verify semantic`): the prompt asking a sub model
//! whether each claim's quotes state it, its verdicts, and the answer
//! flagged by them.

use super::report::{ClaimReport, Verdict};
use super::support::strip_markers;
use crate::citations::CitationStatus;

/// Claims the semantic check can judge in one call.
pub(crate) const SEMANTIC_BATCH: usize = 15;

/// The quotes a claim is checked against.
fn quotes_of(claim: &ClaimReport) -> Vec<&str> {
    claim
        .citations
        .iter()
        .filter(|c| c.status == CitationStatus::Verified)
        .filter_map(|c| c.quote.as_deref())
        .collect()
}

/// Indexes of the claims the semantic check can judge (those with a
/// verified quote).
pub(crate) fn checkable(claims: &[ClaimReport]) -> Vec<usize> {
    (0..claims.len())
        .filter(|&i| !quotes_of(&claims[i]).is_empty())
        .collect()
}

/// The semantic check's prompt for `batch` (indexes into `claims`).
pub(crate) fn semantic_prompt(claims: &[ClaimReport], batch: &[usize]) -> String {
    let mut listing = String::new();
    for (n, &i) in batch.iter().enumerate() {
        listing.push_str(&format!(
            "Claim {}: {}\n",
            n + 1,
            strip_markers(&claims[i].text).trim()
        ));
        for q in quotes_of(&claims[i]) {
            listing.push_str(&format!("  Quote: \"{q}\"\n"));
        }
    }
    crate::prompts::render(crate::prompts::SEMANTIC_CHECK, &[("claims", &listing)])
}

/// The verdicts of a reply, one per claim of a batch of `n` (`None` where
/// the reply gave none).
pub(crate) fn parse_verdicts(reply: &str, n: usize) -> Vec<Option<Verdict>> {
    let mut out = vec![None; n];
    let Some(v) = crate::parse::parse_json_object(reply) else {
        return out;
    };
    for item in v["verdicts"].as_array().into_iter().flatten() {
        let Some(k) = item["claim"].as_u64().map(|k| k as usize) else {
            continue;
        };
        let verdict = match item["verdict"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("supported") => Verdict::Supported,
            Some("partly") | Some("partly supported") | Some("partial") => Verdict::Partly,
            Some("unsupported") => Verdict::Unsupported,
            Some("contradicted") => Verdict::Contradicted,
            _ => continue,
        };
        if (1..=n).contains(&k) {
            out[k - 1] = Some(verdict);
        }
    }
    out
}

/// Flags claims the check found unsupported or contradicted in `text` (or,
/// when `drop`, removes them), keeping every claim's span in step.
pub(crate) fn flag_by_verdict(text: &mut String, claims: &mut [ClaimReport], drop: bool) {
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(claims[i].start));
    for i in order {
        let flag = match claims[i].verdict {
            Some(Verdict::Unsupported) => "[not supported by its source]",
            Some(Verdict::Contradicted) => "[contradicted by its source]",
            _ => continue,
        };
        let (start, end) = (claims[i].start, claims[i].end);
        if end > text.len() || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
            continue;
        }
        let replacement = if drop {
            String::new()
        } else {
            format!("{} {flag}", text[start..end].trim_end())
        };
        let delta = replacement.len() as isize - (end - start) as isize;
        text.replace_range(start..end, &replacement);
        claims[i].end = start + replacement.len();
        for c in claims.iter_mut().filter(|c| c.start > start) {
            c.start = (c.start as isize + delta) as usize;
            c.end = (c.end as isize + delta) as usize;
            for cite in &mut c.citations {
                cite.answer_offset = (cite.answer_offset as isize + delta).max(0) as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grounding::report::Support;

    #[test]
    fn verdicts_parse_and_flag() {
        let v = parse_verdicts(
            r#"{"verdicts": [{"claim": 2, "verdict": "contradicted"}, {"claim": 1, "verdict": "supported"}, {"claim": 9, "verdict": "supported"}]}"#,
            3,
        );
        assert_eq!(
            v,
            vec![Some(Verdict::Supported), Some(Verdict::Contradicted), None]
        );
        let mut text = "A is 1. B is 2. C is 3.".to_string();
        let claim = |start: usize, end: usize, verdict| ClaimReport {
            text: String::new(),
            start,
            end,
            citations: Vec::new(),
            support: Support::Supported,
            origin: crate::citations::ClaimOrigin::Model,
            verdict,
        };
        let mut claims = vec![
            claim(0, 7, Some(Verdict::Supported)),
            claim(8, 15, Some(Verdict::Contradicted)),
            claim(16, 23, Some(Verdict::Unsupported)),
        ];
        flag_by_verdict(&mut text, &mut claims, false);
        assert_eq!(
            text,
            "A is 1. B is 2. [contradicted by its source] C is 3. [not supported by its source]"
        );
        assert_eq!(
            &text[claims[2].start..claims[2].end],
            "C is 3. [not supported by its source]"
        );
        let mut text = "A is 1. B is 2. C is 3.".to_string();
        let mut claims = vec![claim(0, 7, None), claim(8, 15, Some(Verdict::Contradicted))];
        flag_by_verdict(&mut text, &mut claims, true);
        assert_eq!(text, "A is 1.  C is 3.");
    }
}
