//! The entailment judge: one batched model call per answer asking, for each
//! claim and its candidate passage, whether the passage states the claim.
//! Its prompt and reply schema, the tolerant reading of its verdicts, the
//! cache lookups, the claims settled by the verdicts, and (`--verify
//! semantic`) the answer text flagged by them.

use rlm_llm::ReplySchema;
use serde_json::{Value, json};

use super::cache::VerdictCache;
use super::report::{ClaimReport, Grounded, SemanticSummary, Support, Verdict};
use super::support::strip_markers;

/// Claims the judge reads in one call.
pub(crate) const SEMANTIC_BATCH: usize = 15;

/// How the judge's instructions (its system message) start: scripted
/// models in tests and benchmarks know its requests by it.
pub const JUDGE_PROMPT_START: &str = "You check claims against passages";

/// A reply of the judge giving `verdicts[i]` to claim `i + 1`, shaped as its
/// schema asks (what a scripted model answers).
pub fn judge_reply(verdicts: &[Verdict]) -> String {
    let items: Vec<Value> = verdicts
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"claim": i + 1, "verdict": v}))
        .collect();
    json!({ "verdicts": items }).to_string()
}

/// How many claims a judge request's user message lists.
pub fn judged_claims(user_message: &str) -> usize {
    user_message
        .lines()
        .filter(|l| l.starts_with("Claim "))
        .count()
}

/// The calls the judge makes for an answer.
#[derive(Debug, Default)]
pub(crate) struct Judgement {
    /// Each call's claims (indexes into the claims), in answer order.
    pub(crate) batches: Vec<Vec<usize>>,
    /// Verdicts taken from the cache.
    pub(crate) cached: usize,
    /// Claims whose passage holds them word for word: entailed without a
    /// call (a small judge gets even those wrong).
    pub(crate) verbatim: usize,
}

/// Shortest claim (characters, normalized) taken as entailed because its
/// passage holds it word for word: "Yes." in a passage says nothing.
const VERBATIM_CHARS: usize = 20;

/// True when `passage` holds the claim `text` word for word (case, quote
/// marks and whitespace aside; a trailing full stop left out): the passage
/// states it, in any language, so no judge is asked.
fn stated_verbatim(text: &str, passage: &str) -> bool {
    let claim = crate::citations::normalize(text);
    let claim = claim.trim_end_matches(['.', '!', '?', ';', ',', ' ']);
    claim.chars().count() >= VERBATIM_CHARS && crate::citations::normalize(passage).contains(claim)
}

impl Judgement {
    /// What the judge must be asked about `claims`: the cache answers what
    /// it can (its verdicts are set on the claims); the claims with a
    /// passage left go in batches of [`SEMANTIC_BATCH`], and claims without
    /// one fill the room those calls have left (the judge may find that
    /// they are no claims), never making a call of their own.
    pub(crate) fn plan(claims: &mut [ClaimReport], cache: &VerdictCache, model: &str) -> Self {
        let (mut cached, mut verbatim) = (0, 0);
        let (mut with_passage, mut without) = (Vec::new(), Vec::new());
        for (i, c) in claims.iter_mut().enumerate() {
            if let Some(v) = cache.get(model, &judged_text(c), &c.passage) {
                c.verdict = Some(v);
                cached += 1;
            } else if stated_verbatim(&judged_text(c), &c.passage) {
                c.verdict = Some(Verdict::Entailed);
                verbatim += 1;
            } else if c.passage.is_empty() {
                without.push(i);
            } else {
                with_passage.push(i);
            }
        }
        let room = with_passage.len().div_ceil(SEMANTIC_BATCH) * SEMANTIC_BATCH;
        let mut todo = with_passage;
        let fill = room.saturating_sub(todo.len()).min(without.len());
        todo.extend_from_slice(&without[..fill]);
        todo.sort_unstable();
        Judgement {
            batches: todo.chunks(SEMANTIC_BATCH).map(<[usize]>::to_vec).collect(),
            cached,
            verbatim,
        }
    }
}

/// A claim as the judge reads it (and the cache remembers it): its text
/// without citation markers, whitespace collapsed.
fn judged_text(c: &ClaimReport) -> String {
    let text = strip_markers(&c.text);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The judge's request for `batch` (indexes into `claims`): the
/// instructions (a system message) and the claims with their passages.
pub(crate) fn judge_prompt(claims: &[ClaimReport], batch: &[usize]) -> (String, String) {
    let mut listing = String::new();
    for (n, &i) in batch.iter().enumerate() {
        let c = &claims[i];
        let passage = if c.passage.is_empty() {
            "(none)".to_string()
        } else {
            format!("\"{}\"", c.passage.trim())
        };
        listing.push_str(&format!(
            "Claim {k}: {}\nPassage {k}: {passage}\n\n",
            judged_text(c),
            k = n + 1
        ));
    }
    (
        crate::prompts::SEMANTIC_CHECK.trim().to_string(),
        listing.trim_end().to_string(),
    )
}

/// The JSON Schema of the judge's reply: one verdict per claim number.
pub(crate) fn judge_schema() -> ReplySchema {
    ReplySchema::new(
        "claim_verdicts",
        json!({
            "type": "object",
            "properties": {
                "verdicts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "claim": {"type": "integer"},
                            "verdict": {
                                "type": "string",
                                "enum": ["entailed", "not_entailed", "contradicted", "not_a_claim"]
                            }
                        },
                        "required": ["claim", "verdict"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["verdicts"],
            "additionalProperties": false
        }),
    )
}

/// The verdicts of a reply, one per claim of a batch of `n` (`None` where
/// the reply gave none usable). Read tolerantly: the object of the schema
/// anywhere in the reply, or a bare array; an entry without a claim number
/// counts by its position; the labels of the older semantic check are read
/// too.
pub(crate) fn parse_verdicts(reply: &str, n: usize) -> Vec<Option<Verdict>> {
    let mut out = vec![None; n];
    let array_first = match (reply.find('['), reply.find('{')) {
        (Some(a), Some(o)) => a < o,
        (a, _) => a.is_some(),
    };
    let object =
        || crate::parse::parse_json_object(reply).and_then(|v| v["verdicts"].as_array().cloned());
    let items: Vec<Value> = if array_first {
        json_array(reply).or_else(object)
    } else {
        object().or_else(|| json_array(reply))
    }
    .unwrap_or_default();
    for (pos, item) in items.iter().enumerate() {
        let k = match &item["claim"] {
            Value::Number(k) => k.as_u64().map(|k| k as usize),
            Value::String(k) => k.trim().parse().ok(),
            _ => Some(pos + 1),
        };
        let label = item["verdict"].as_str().or(item.as_str());
        let (Some(k), Some(verdict)) = (k, label.and_then(verdict_of)) else {
            continue;
        };
        if (1..=n).contains(&k) {
            out[k - 1] = Some(verdict);
        }
    }
    out
}

fn json_array(reply: &str) -> Option<Vec<Value>> {
    let start = reply.find('[')?;
    let end = reply.rfind(']')?;
    serde_json::from_str(reply.get(start..=end)?).ok()
}

/// A verdict label: the schema's, in any case, with spaces or hyphens for
/// underscores; the older check's `supported` / `partly` / `unsupported`.
fn verdict_of(label: &str) -> Option<Verdict> {
    let label = label.trim().to_lowercase().replace([' ', '-'], "_");
    match label.as_str() {
        "entailed" | "supported" => Some(Verdict::Entailed),
        "not_entailed" | "partly" | "partial" | "partly_supported" | "unsupported" => {
            Some(Verdict::NotEntailed)
        }
        "contradicted" => Some(Verdict::Contradicted),
        "not_a_claim" => Some(Verdict::NotAClaim),
        _ => None,
    }
}

/// Records the judge's verdict on claim `i` (and remembers it). A verdict
/// on a claim without a passage only counts when it says it is no claim.
pub(crate) fn record(
    claims: &mut [ClaimReport],
    i: usize,
    verdict: Verdict,
    cache: &VerdictCache,
    model: &str,
) {
    let c = &mut claims[i];
    if c.passage.is_empty() && verdict != Verdict::NotAClaim {
        return;
    }
    cache.put(model, &judged_text(c), &c.passage, verdict);
    c.verdict = Some(verdict);
}

/// Counts the verdicts of `claims` into `summary`.
pub(crate) fn tally(claims: &[ClaimReport], summary: &mut SemanticSummary) {
    for c in claims {
        match c.verdict {
            Some(Verdict::Entailed) => summary.entailed += 1,
            Some(Verdict::NotEntailed) => summary.not_entailed += 1,
            Some(Verdict::Contradicted) => summary.contradicted += 1,
            Some(Verdict::NotAClaim) => summary.not_claims += 1,
            None if !c.passage.is_empty() => summary.no_verdict += 1,
            None => {}
        }
    }
    summary.checked =
        summary.entailed + summary.not_entailed + summary.contradicted + summary.not_claims;
}

/// Each claim's support from its verdict (a claim with a passage and no
/// verdict stays unverified: fail closed), the sentences judged no claims
/// dropped, and the counts of `grounded` redone.
pub(crate) fn settle(claims: &mut Vec<ClaimReport>, grounded: &mut Grounded) {
    claims.retain(|c| c.verdict != Some(Verdict::NotAClaim));
    for c in claims.iter_mut() {
        if c.passage.is_empty() {
            c.support = Support::Unsupported;
            continue;
        }
        c.support = match c.verdict {
            Some(Verdict::Entailed) => Support::Supported,
            Some(Verdict::NotEntailed) => Support::Related,
            Some(Verdict::Contradicted) => Support::Contradicted,
            Some(Verdict::NotAClaim) | None => Support::Unverified,
        };
    }
    grounded.recount(claims);
}

/// `--verify semantic`: flags the claims the judge found not entailed or
/// contradicted by their passage in `text` (or, when `drop`, removes them),
/// keeping every claim's span in step.
pub(crate) fn flag_by_verdict(text: &mut String, claims: &mut [ClaimReport], drop: bool) {
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(claims[i].start));
    for i in order {
        let flag = match claims[i].support {
            Support::Related => "[not supported by its source]",
            Support::Contradicted => "[contradicted by its source]",
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

    fn claim(text: &str, passage: &str, verdict: Option<Verdict>) -> ClaimReport {
        ClaimReport {
            text: text.into(),
            start: 0,
            end: 0,
            citations: Vec::new(),
            support: if passage.is_empty() {
                Support::Unsupported
            } else {
                Support::Unverified
            },
            quote_check: crate::grounding::QuoteCheck::None,
            origin: crate::citations::ClaimOrigin::Engine,
            verdict,
            passage: passage.into(),
        }
    }

    #[test]
    fn a_claim_its_passage_holds_word_for_word_needs_no_judge() {
        let passage = "Security notes.\nThe vault access code for the Lisbon office is 8316. Do not share it.";
        let mut claims = vec![
            claim(
                "The vault access code for the  Lisbon office is 8316. [[doc:1 \"code\"]]",
                passage,
                None,
            ),
            claim(
                "Der Zugangscode für das Büro lautet 8316.",
                "Der Zugangscode für das Büro lautet 8316!",
                None,
            ),
            claim("The code is 8316.", passage, None),
            claim("Do not share it.", passage, None),
            claim("The vault access code is 8317 for Lisbon.", passage, None),
        ];
        let plan = Judgement::plan(&mut claims, &VerdictCache::default(), "judge");
        assert_eq!(plan.verbatim, 2);
        assert_eq!(claims[0].verdict, Some(Verdict::Entailed));
        assert_eq!(
            claims[1].verdict,
            Some(Verdict::Entailed),
            "in any language"
        );
        // Not held word for word, or too short to say anything: judged.
        assert_eq!(plan.batches, vec![vec![2, 3, 4]]);
    }

    #[test]
    fn scripted_judges_read_and_answer_as_the_engine_does() {
        assert!(crate::prompts::SEMANTIC_CHECK.starts_with(JUDGE_PROMPT_START));
        let claims = vec![claim("A.", "pa", None), claim("B.", "", None)];
        let (_, user) = judge_prompt(&claims, &[0, 1]);
        assert_eq!(judged_claims(&user), 2);
        let reply = judge_reply(&[Verdict::Entailed, Verdict::NotAClaim]);
        assert_eq!(
            parse_verdicts(&reply, 2),
            [Some(Verdict::Entailed), Some(Verdict::NotAClaim)]
        );
    }

    #[test]
    fn verdicts_are_read_tolerantly() {
        let v = parse_verdicts(
            r#"Here: {"verdicts": [{"claim": 2, "verdict": "contradicted"}, {"claim": 1, "verdict": "Entailed"}, {"claim": 9, "verdict": "entailed"}, {"claim": 3, "verdict": "maybe"}]}"#,
            3,
        );
        assert_eq!(
            v,
            vec![Some(Verdict::Entailed), Some(Verdict::Contradicted), None]
        );
        // A bare array, by position; labels with spaces; claim numbers as text.
        let v = parse_verdicts(r#"["not entailed", {"verdict": "not a claim"}]"#, 2);
        assert_eq!(
            v,
            vec![Some(Verdict::NotEntailed), Some(Verdict::NotAClaim)]
        );
        let v = parse_verdicts(r#"{"verdicts": [{"claim": "2", "verdict": "partly"}]}"#, 2);
        assert_eq!(v, vec![None, Some(Verdict::NotEntailed)]);
        // Answers saved before read back.
        let old: Verdict = serde_json::from_str("\"partly\"").unwrap();
        assert_eq!(old, Verdict::NotEntailed);
        // Malformed: no verdict at all.
        assert_eq!(parse_verdicts("entailed", 2), vec![None, None]);
        assert_eq!(parse_verdicts("{\"verdicts\": 3}", 1), vec![None]);
    }

    #[test]
    fn the_cache_answers_first_and_claims_without_a_passage_only_fill_a_call() {
        let cache = VerdictCache::default();
        cache.put("m", "A is 1.", "A is 1 here.", Verdict::Entailed);
        let mut claims = vec![
            claim("A is 1.", "A is 1 here.", None),
            claim("B is 2.", "", None),
            claim("C is 3.", "C is 3 there.", None),
        ];
        let plan = Judgement::plan(&mut claims, &cache, "m");
        assert_eq!(plan.cached, 1);
        assert_eq!(plan.batches, vec![vec![1, 2]]);
        assert_eq!(claims[0].verdict, Some(Verdict::Entailed));
        // Nothing with a passage left to ask: no call.
        let mut claims = vec![
            claim("A is 1.", "A is 1 here.", None),
            claim("B.", "", None),
        ];
        assert!(Judgement::plan(&mut claims, &cache, "m").batches.is_empty());
        // Many: batches of SEMANTIC_BATCH.
        let mut claims: Vec<ClaimReport> = (0..SEMANTIC_BATCH + 2)
            .map(|i| claim(&format!("X is {i}."), "p", None))
            .collect();
        let plan = Judgement::plan(&mut claims, &cache, "m");
        assert_eq!(plan.batches.len(), 2);
        let (system, user) = judge_prompt(&claims, &plan.batches[1]);
        assert!(system.contains("not_a_claim"), "{system}");
        assert!(
            user.starts_with("Claim 1: X is 15.\nPassage 1: \"p\""),
            "{user}"
        );
        assert!(judge_schema().schema["properties"]["verdicts"].is_object());
    }

    #[test]
    fn verdicts_settle_support_fail_closed_and_drop_what_is_no_claim() {
        let cache = VerdictCache::default();
        let mut claims = vec![
            claim("A.", "pa", None),
            claim("B.", "pb", None),
            claim("C.", "pc", None),
            claim("D.", "pd", None),
            claim("E.", "", None),
            claim("F.", "", None),
        ];
        record(&mut claims, 0, Verdict::Entailed, &cache, "m");
        record(&mut claims, 1, Verdict::NotEntailed, &cache, "m");
        record(&mut claims, 2, Verdict::NotAClaim, &cache, "m");
        // 3 gets no verdict; 4 one that means nothing without a passage.
        record(&mut claims, 4, Verdict::Entailed, &cache, "m");
        record(&mut claims, 5, Verdict::NotAClaim, &cache, "m");
        let mut summary = SemanticSummary::default();
        tally(&claims, &mut summary);
        assert_eq!(
            (
                summary.checked,
                summary.entailed,
                summary.not_claims,
                summary.no_verdict
            ),
            (4, 1, 2, 1)
        );
        let mut grounded = Grounded::default();
        settle(&mut claims, &mut grounded);
        let supports: Vec<_> = claims
            .iter()
            .map(|c| (c.text.as_str(), c.support))
            .collect();
        assert_eq!(
            supports,
            [
                ("A.", Support::Supported),
                ("B.", Support::Related),
                ("D.", Support::Unverified),
                ("E.", Support::Unsupported),
            ]
        );
        assert_eq!(
            (
                grounded.claims,
                grounded.supported,
                grounded.related,
                grounded.unverified,
                grounded.unsupported
            ),
            (4, 1, 1, 1, 1)
        );
        assert_eq!(cache.len(), 4);
    }

    #[test]
    fn semantic_mode_flags_or_drops_what_is_not_entailed() {
        let mut text = "A is 1. B is 2. C is 3.".to_string();
        let at = |start: usize, end: usize, support| ClaimReport {
            start,
            end,
            support,
            ..claim("", "p", None)
        };
        let mut claims = vec![
            at(0, 7, Support::Supported),
            at(8, 15, Support::Contradicted),
            at(16, 23, Support::Related),
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
        let mut claims = vec![
            at(0, 7, Support::Unverified),
            at(8, 15, Support::Contradicted),
        ];
        flag_by_verdict(&mut text, &mut claims, true);
        assert_eq!(text, "A is 1.  C is 3.");
    }
}
