//! What can be wrong with a schema, and with a reply checked against one.

use std::fmt;

use thiserror::Error;

/// A schema outside the subset [`super::check`] accepts, or one
/// [`super::to_gbnf`] cannot turn into a grammar. Paths are JSON Pointers
/// into the schema (`#/properties/step/anyOf/1`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemaError {
    /// A keyword of JSON Schema this subset does not support.
    #[error(
        "unsupported JSON Schema keyword '{keyword}' at {path}: supported are type, enum, const, properties, required, additionalProperties (false), items, minItems, maxItems, minLength, maxLength, anyOf, oneOf, $ref to #/$defs/..., description and title"
    )]
    Unsupported {
        /// The keyword.
        keyword: String,
        /// Where it is.
        path: String,
    },

    /// A keyword with a value JSON Schema does not allow, or a schema that
    /// is not one.
    #[error("invalid JSON Schema at {path}: {detail}")]
    Invalid {
        /// Where it is.
        path: String,
        /// What is wrong and how to fix it.
        detail: String,
    },

    /// A schema the grammar of the local model cannot express.
    #[error("cannot constrain the local model to the schema at {path}: {detail}")]
    NoGrammar {
        /// Where it is.
        path: String,
        /// What cannot be expressed.
        detail: String,
    },
}

/// One place where an instance does not follow its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where in the instance: `$` is the whole document, then `.name` and
    /// `[index]` steps (`$.step.answer[0].source.ref`).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Violations listed in [`SchemaViolation`]'s message; the rest are counted.
const SHOWN_VIOLATIONS: usize = 3;

/// An instance that does not follow its schema: every violation found.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct SchemaViolation {
    /// Every violation, in document order; never empty.
    pub violations: Vec<Violation>,
}

impl fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("does not follow the schema: ")?;
        for (i, v) in self.violations.iter().take(SHOWN_VIOLATIONS).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{v}")?;
        }
        let more = self.violations.len().saturating_sub(SHOWN_VIOLATIONS);
        if more > 0 {
            write!(f, " (and {more} more)")?;
        }
        Ok(())
    }
}

/// A reply that does not hold the JSON document its schema asked for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplyError {
    /// No JSON document in the text: not the whole text, not a fenced
    /// block, not a balanced `{...}` / `[...]` span.
    #[error("the reply holds no JSON document: {excerpt}")]
    NoJson {
        /// The start of the reply.
        excerpt: String,
    },

    /// The document does not follow the schema.
    #[error("the reply's JSON {0}")]
    Invalid(#[from] SchemaViolation),
}

impl ReplyError {
    /// The schema violations, when the reply held a document.
    pub fn violations(&self) -> &[Violation] {
        match self {
            ReplyError::NoJson { .. } => &[],
            ReplyError::Invalid(v) => &v.violations,
        }
    }
}
