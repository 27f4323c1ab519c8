//! Small text helpers shared by the flows: Python values as text, identifiers,
//! previews.

use serde_json::Value;

/// Text of a Python value handed to `FINAL` or returned by a sub-call.
pub(crate) fn value_to_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => n.to_string(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// The first `n` characters of `s`.
pub(crate) fn head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The words of `s`: its runs of letters and digits, lower-cased.
pub(crate) fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// True when `word` (lower-cased) says nothing of a claim's content: an
/// English stop word or model phrase ([`STOP_WORDS`]), or a stop word of
/// `language` (the text's language code, see
/// [`rlm_corpus::language::guess`]) by its full-text analyzer's list.
pub(crate) fn is_stop_word(word: &str, language: &str) -> bool {
    STOP_WORDS.contains(&word)
        || (language != "en" && rlm_corpus::language::is_stop_word(word, language))
}

/// Words that say nothing of a claim's content: function words, and the
/// words models use to refer to their material ("according to the passage").
pub(crate) const STOP_WORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "was",
    "were",
    "with",
    "that",
    "this",
    "from",
    "its",
    "has",
    "have",
    "had",
    "but",
    "not",
    "all",
    "any",
    "can",
    "will",
    "our",
    "their",
    "they",
    "them",
    "his",
    "her",
    "she",
    "him",
    "who",
    "what",
    "which",
    "when",
    "where",
    "there",
    "here",
    "into",
    "than",
    "then",
    "also",
    "been",
    "being",
    "does",
    "did",
    "per",
    "about",
    "answer",
    "document",
    "documents",
    "according",
    "states",
    "says",
    "said",
    // How models refer to their material, not what it says.
    "passage",
    "passages",
    "information",
    "provided",
    "based",
    "mentioned",
    "mentions",
    "each",
    "every",
    "other",
    "some",
    "such",
    "more",
    "most",
    "only",
    "very",
    "would",
    "could",
    "should",
    "question",
    "chunk",
    "therefore",
    "thus",
    "hence",
];

/// True for a Python identifier (ASCII).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// The first `n` characters of `s`, with an ellipsis when cut.
pub(crate) fn preview(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Defines an enum whose values are written as fixed names (in JSON, the
/// trace, messages): from one list of `Variant = "name"` pairs come the
/// serde names, `as_str`, `Display`, and comparison with a string (code and
/// tests that read the JSON compare with the name).
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// The name as written in JSON and the trace.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}
pub(crate) use named_enum;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_to_text() {
        assert_eq!(value_to_text(&json!("x")), "x");
        assert_eq!(value_to_text(&json!(3)), "3");
        assert_eq!(value_to_text(&json!(true)), "True");
        assert_eq!(value_to_text(&Value::Null), "None");
        assert!(value_to_text(&json!({"a": 1})).contains("\"a\": 1"));
    }
}
