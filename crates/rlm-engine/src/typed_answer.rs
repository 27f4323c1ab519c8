//! Typed answers (`rlm ask --schema FILE`, the API's `response_schema`,
//! the OpenAI endpoint's `response_format`, the Python package's
//! `output_schema=`): once the answer is written and its claims checked, one
//! call puts it into JSON that follows the user's schema (constrained where
//! the provider can, validated, asked once more when it does not follow),
//! and each value of it keeps the citations of the claims that state it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::citations::Citation;
use crate::grounding::{ClaimReport, Support};
use crate::prompts::{self, render};

/// The answer as JSON that follows the user's schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedAnswer {
    /// The value, validated against the schema; `None` when no reply
    /// followed it (see `error`).
    pub value: Option<Value>,
    /// For each value of `value` that a claim of the answer states, the
    /// claim's citations, by JSON path (`$.parties[0]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<FieldCitations>,
    /// Why there is no value: the replies did not follow the schema, the
    /// model failed, the budget was out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The citations of one value of a typed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldCitations {
    /// Where the value is: `$` then `.name` and `[index]` steps.
    pub path: String,
    /// The citations of the supported claims that state it.
    pub citations: Vec<Citation>,
}

/// Shortest value text looked for in the claims (a "1" or "a" matches
/// everything).
const MIN_VALUE_CHARS: usize = 2;

/// The prompt that puts `answer` (markers left out) into the schema.
pub(crate) fn prompt(question: &str, answer: &str) -> String {
    render(
        prompts::TYPED_ANSWER,
        &[("question", question), ("answer", answer)],
    )
}

/// The citations of each value of `value`: a string or number leaf gets
/// the valid citations of the supported claims whose text holds it.
pub(crate) fn field_citations(value: &Value, claims: &[ClaimReport]) -> Vec<FieldCitations> {
    let mut out = Vec::new();
    leaves(value, "$".to_string(), &mut |path, text| {
        let wanted = crate::citations::normalize(text);
        if wanted.chars().count() < MIN_VALUE_CHARS {
            return;
        }
        let mut citations: Vec<Citation> = Vec::new();
        for claim in claims.iter().filter(|c| c.support == Support::Supported) {
            if !crate::citations::normalize(&claim.text).contains(&wanted) {
                continue;
            }
            for c in claim.citations.iter().filter(|c| c.status.is_valid()) {
                if !citations.contains(c) {
                    citations.push(c.clone());
                }
            }
        }
        if !citations.is_empty() {
            out.push(FieldCitations { path, citations });
        }
    });
    out
}

/// Calls `f` with the path and text of every string and number in `value`.
fn leaves(value: &Value, path: String, f: &mut impl FnMut(String, &str)) {
    match value {
        Value::String(s) => f(path, s),
        Value::Number(n) => f(path, &n.to_string()),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, format!("{path}[{i}]"), f);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                leaves(v, format!("{path}.{k}"), f);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::citations::{CitationKind, CitationOrigin, CitationStatus, ClaimOrigin};
    use crate::grounding::QuoteCheck;
    use serde_json::json;

    fn cite(quote: &str) -> Citation {
        Citation {
            marker: String::new(),
            answer_offset: 0,
            kind: CitationKind::Chunk,
            id: "ab-0".into(),
            quote: Some(quote.into()),
            chunk_id: Some("ab-0".into()),
            doc_id: None,
            doc_index: Some(0),
            path: Some("contract.txt".into()),
            byte_start: None,
            byte_end: None,
            status: CitationStatus::Verified,
            detail: None,
            origin: CitationOrigin::Model,
            line: None,
            location: None,
        }
    }

    fn claim(text: &str, support: Support, quote: &str) -> ClaimReport {
        ClaimReport {
            text: text.into(),
            start: 0,
            end: text.len(),
            citations: vec![cite(quote)],
            support,
            quote_check: QuoteCheck::Verified,
            origin: ClaimOrigin::Model,
            verdict: None,
            passage: String::new(),
        }
    }

    #[test]
    fn each_value_keeps_the_citations_of_the_supported_claims_that_state_it() {
        let claims = [
            claim(
                "The tenant is Müller GmbH.",
                Support::Supported,
                "Mieterin: Müller GmbH",
            ),
            claim("The rent is 1,200 EUR.", Support::Supported, "1,200 EUR"),
            claim("The landlord is Beta AG.", Support::Unsupported, "Beta"),
        ];
        let value =
            json!({"tenant": "Müller GmbH", "rent": "1,200 EUR", "landlord": "Beta AG", "term": 2});
        let found = field_citations(&value, &claims);
        let paths: Vec<&str> = found.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["$.rent", "$.tenant"], "{found:?}");
        assert_eq!(
            found[1].citations[0].quote.as_deref(),
            Some("Mieterin: Müller GmbH")
        );
        let list = json!({"parties": ["Müller GmbH"]});
        assert_eq!(field_citations(&list, &claims)[0].path, "$.parties[0]");
    }
}
