//! The arguments of a tool call, read with errors that say what was wrong
//! and what to send instead (the caller is often a model, which retries).

use std::ops::RangeInclusive;

use serde_json::{Map, Value};

/// A tool's arguments as sent (`tools/call` `arguments`).
pub(super) struct ToolArgs {
    map: Map<String, Value>,
}

/// Why a tool call's arguments cannot be used: one line for the caller.
#[derive(Debug)]
pub(super) struct BadArgs(pub String);

impl ToolArgs {
    /// The arguments of `tool`, refusing names it does not take (a typo
    /// would otherwise be silently ignored).
    pub(super) fn new(
        tool: &str,
        arguments: Option<Map<String, Value>>,
        known: &[&str],
    ) -> Result<Self, BadArgs> {
        let map = arguments.unwrap_or_default();
        let mut unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let list = if known.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!("it takes: {}", known.join(", "))
            };
            return Err(BadArgs(format!(
                "`{tool}` has no argument {}; {list}",
                unknown
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(ToolArgs { map })
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// A string argument, if given.
    pub(super) fn string(&self, name: &str) -> Result<Option<String>, BadArgs> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(BadArgs(format!(
                "`{name}` must be a string, got {}",
                kind(other)
            ))),
        }
    }

    /// A JSON object argument (e.g. a JSON Schema), if given.
    pub(super) fn object(&self, name: &str) -> Result<Option<Value>, BadArgs> {
        match self.get(name) {
            None => Ok(None),
            Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
            Some(other) => Err(BadArgs(format!(
                "`{name}` must be an object, got {}",
                kind(other)
            ))),
        }
    }

    /// A string argument that must be given and not blank; `example` shows
    /// a call that works.
    pub(super) fn required_string(&self, name: &str, example: &str) -> Result<String, BadArgs> {
        match self.string(name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(BadArgs(format!(
                "`{name}` is empty; send it, e.g. {example}"
            ))),
            None => Err(BadArgs(format!(
                "`{name}` is missing; send it, e.g. {example}"
            ))),
        }
    }

    /// A boolean argument, if given.
    pub(super) fn bool(&self, name: &str) -> Result<Option<bool>, BadArgs> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(other) => Err(BadArgs(format!(
                "`{name}` must be true or false, got {}",
                kind(other)
            ))),
        }
    }

    /// A numeric argument as written (a JSON number, or a string holding
    /// one), for the engine's own checks of ranges and units.
    pub(super) fn number_text(&self, name: &str) -> Result<Option<String>, BadArgs> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(other) => Err(BadArgs(format!(
                "`{name}` must be a number, got {}",
                kind(other)
            ))),
        }
    }

    /// A whole number in `range`, `default` when not given.
    pub(super) fn count(
        &self,
        name: &str,
        range: RangeInclusive<u64>,
        default: u64,
    ) -> Result<u64, BadArgs> {
        let Some(text) = self.number_text(name)? else {
            return Ok(default);
        };
        match text.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(BadArgs(format!(
                "`{name}` must be a whole number from {} to {}, got {text}",
                range.start(),
                range.end()
            ))),
        }
    }

    /// A list of strings (a single string is taken as a list of one).
    pub(super) fn strings(&self, name: &str) -> Result<Option<Vec<String>>, BadArgs> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(BadArgs(format!(
                        "`{name}` must be a list of strings; one item is {}",
                        kind(other)
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(BadArgs(format!(
                "`{name}` must be a list of strings, got {}",
                kind(other)
            ))),
        }
    }
}

/// What a JSON value is, for messages (`a number (3)`, `an object`).
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({s:?})"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn unknown_names_are_refused_with_the_known_ones() {
        let e = ToolArgs::new("search", Some(args(json!({"qurey": "x"}))), &["query", "k"])
            .err()
            .unwrap();
        assert_eq!(e.0, "`search` has no argument `qurey`; it takes: query, k");
    }

    #[test]
    fn types_and_ranges_are_checked() {
        let a = ToolArgs::new(
            "t",
            Some(args(
                json!({"k": "0", "q": 3, "b": "yes", "n": "2", "l": ["a", 1]}),
            )),
            &["k", "q", "b", "n", "l"],
        )
        .unwrap();
        assert!(
            a.count("k", 1..=10, 5)
                .unwrap_err()
                .0
                .contains("from 1 to 10, got 0")
        );
        assert_eq!(
            a.string("q").unwrap_err().0,
            "`q` must be a string, got a number (3)"
        );
        assert!(a.bool("b").is_err());
        assert_eq!(a.count("n", 1..=10, 5).unwrap(), 2);
        assert_eq!(a.count("missing", 1..=10, 5).unwrap(), 5);
        assert!(
            a.strings("l")
                .unwrap_err()
                .0
                .contains("one item is a number (1)")
        );
        assert!(
            a.required_string("missing", "{}")
                .unwrap_err()
                .0
                .contains("missing")
        );
    }
}
