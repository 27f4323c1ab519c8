//! JSON Schemas for structured replies: the subset this crate supports
//! ([`check`]), validation with paths ([`validate`], [`parse_reply`]),
//! OpenAI's strict mode ([`strict_compatible`], [`strict_copy`]), the
//! property order sent on the wire ([`ordered_json`]) and the llama.cpp
//! grammar of the embedded model ([`to_gbnf`]).
//!
//! ```
//! use rlm_llm::schema;
//! use serde_json::json;
//!
//! let answer = json!({
//!     "type": "object",
//!     "properties": {"city": {"type": "string", "maxLength": 40}},
//!     "required": ["city"],
//!     "additionalProperties": false
//! });
//! schema::check(&answer).unwrap();
//! let value = schema::parse_reply(&answer, "Here: {\"city\": \"Bern\"}").unwrap();
//! assert_eq!(value["city"], "Bern");
//! let err = schema::validate(&answer, &json!({"town": "Bern"})).unwrap_err();
//! assert!(err.to_string().contains("$: missing required property \"city\""));
//! assert!(schema::to_gbnf(&answer).unwrap().starts_with("root ::= "));
//! ```

mod check;
mod error;
mod gbnf;
mod strict;
mod validate;

pub use check::check;
pub use error::{ReplyError, SchemaError, SchemaViolation, Violation};
pub use gbnf::{to_gbnf, to_gbnf_with, to_gbnf_with_raw_quotes};
pub use strict::{ordered_json, strict_compatible, strict_copy};
pub use validate::{extract_json, parse_reply, validate};

/// At most `max` characters of `text` on one line, `…` where it was cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() > max {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests;
