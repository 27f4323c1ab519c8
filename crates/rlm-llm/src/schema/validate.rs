//! [`validate`]: does an instance follow its schema, and where not.
//! [`parse_reply`]: the JSON document in a model's reply, validated.

use serde_json::{Map, Value};

use super::check::resolve;
use super::error::{ReplyError, SchemaViolation, Violation};

/// Nesting of schemas (through `$ref`, `anyOf`, properties, items) beyond
/// which an instance is not followed further.
const MAX_DEPTH: usize = 128;

/// Enum values listed in a violation; the rest are counted.
const SHOWN_VALUES: usize = 8;

/// Checks `instance` against `schema` (the subset [`super::check`]
/// accepts; other keywords are ignored here) and lists every violation
/// with its path (`$.step.answer[0].source.ref: "x" is not one of ...`).
pub fn validate(schema: &Value, instance: &Value) -> Result<(), SchemaViolation> {
    let violations = violations_in(schema, schema, instance);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(SchemaViolation { violations })
    }
}

/// The violations of `instance` against `schema`, a part of `root` (whose
/// `$ref`s it may use).
pub(super) fn violations_in(root: &Value, schema: &Value, instance: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    Validator { root }.node(schema, instance, "$", 0, &mut out);
    out
}

/// The JSON document in a model's reply, checked against `schema`: the
/// whole text if it is JSON, else the first fenced block that is (```json
/// blocks first), else the first balanced `{...}` / `[...]` span that is.
pub fn parse_reply(schema: &Value, text: &str) -> Result<Value, ReplyError> {
    let Some(document) = extract_json(text) else {
        return Err(ReplyError::NoJson {
            excerpt: super::excerpt(text.trim(), 120),
        });
    };
    validate(schema, &document)?;
    Ok(document)
}

/// The JSON document in `text` (see [`parse_reply`]), unchecked.
pub fn extract_json(text: &str) -> Option<Value> {
    let parse = |s: &str| serde_json::from_str::<Value>(s.trim()).ok();
    if let Some(whole) = parse(text) {
        return Some(whole);
    }
    let fenced = fenced_blocks(text);
    let (json, other): (Vec<_>, Vec<_>) = fenced
        .iter()
        .partition(|(lang, _)| lang.eq_ignore_ascii_case("json"));
    if let Some(v) = json.iter().chain(&other).find_map(|(_, body)| parse(body)) {
        return Some(v);
    }
    text.char_indices()
        .filter(|(_, c)| *c == '{' || *c == '[')
        .take(64)
        .find_map(|(start, _)| {
            balanced_end(&text[start..]).and_then(|end| parse(&text[start..start + end]))
        })
}

/// The (language tag, body) of each ``` fenced block.
fn fenced_blocks(text: &str) -> Vec<(&str, &str)> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let (lang, body_start) = match after.find('\n') {
            Some(nl) => (after[..nl].trim(), nl + 1),
            None => break,
        };
        let body = &after[body_start..];
        let Some(close) = body.find("```") else { break };
        blocks.push((lang, &body[..close]));
        rest = &body[close + 3..];
    }
    blocks
}

/// The length of the balanced bracket span `text` starts with (strings and
/// their escapes skipped).
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The path of a property: `.name`, or `["odd name"]`.
fn property_path(path: &str, name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{path}.{name}")
    } else {
        format!("{path}[{}]", Value::from(name))
    }
}

/// The JSON type of `value` (`integer` for whole numbers).
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON equality, numbers compared by value (`1` equals `1.0`).
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A value for a message: its JSON, cut short.
fn show(value: &Value) -> String {
    super::excerpt(&value.to_string(), 60)
}

/// Values for a message: the first few, then a count.
fn show_list(values: &[Value]) -> String {
    let mut shown: Vec<String> = values.iter().take(SHOWN_VALUES).map(show).collect();
    if values.len() > SHOWN_VALUES {
        shown.push(format!("… ({} in all)", values.len()));
    }
    shown.join(", ")
}

struct Validator<'a> {
    root: &'a Value,
}

impl Validator<'_> {
    fn node(
        &self,
        schema: &Value,
        instance: &Value,
        path: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        let mut say = |message: String| {
            out.push(Violation {
                path: path.to_string(),
                message,
            })
        };
        if depth > MAX_DEPTH {
            return say(format!(
                "the schema nests deeper than {MAX_DEPTH} levels here"
            ));
        }
        let map = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => return say("no value is allowed here".into()),
            Value::Object(map) => map,
            _ => return,
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            match resolve(self.root, reference) {
                Some(target) => self.node(target, instance, path, depth + 1, out),
                None => say(format!("the schema's $ref \"{reference}\" names no schema")),
            }
            return;
        }
        if let Some(message) = type_mismatch(map, instance) {
            return say(message);
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array)
            && !values.iter().any(|v| json_eq(v, instance))
        {
            say(format!(
                "{} is not one of {}",
                show(instance),
                show_list(values)
            ));
        }
        if let Some(value) = map.get("const")
            && !json_eq(value, instance)
        {
            say(format!("{} is not {}", show(instance), show(value)));
        }
        match instance {
            Value::String(s) => string_bounds(map, s, &mut say),
            Value::Array(items) => self.array(map, items, path, depth, out),
            Value::Object(fields) => self.object(map, fields, path, depth, out),
            _ => {}
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(alternatives) = map.get(keyword).and_then(Value::as_array) {
                self.alternatives(keyword, alternatives, instance, path, depth, out);
            }
        }
    }

    fn array(
        &self,
        map: &Map<String, Value>,
        items: &[Value],
        path: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        let n = items.len() as u64;
        let mut say = |message: String| {
            out.push(Violation {
                path: path.to_string(),
                message,
            })
        };
        if let Some(min) = map.get("minItems").and_then(Value::as_u64)
            && n < min
        {
            say(format!("has {n} items, fewer than minItems {min}"));
        }
        if let Some(max) = map.get("maxItems").and_then(Value::as_u64)
            && n > max
        {
            say(format!("has {n} items, more than maxItems {max}"));
        }
        if let Some(item_schema) = map.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.node(item_schema, item, &format!("{path}[{i}]"), depth + 1, out);
            }
        }
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        fields: &Map<String, Value>,
        path: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        let properties = map.get("properties").and_then(Value::as_object);
        for name in map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = name.as_str()
                && !fields.contains_key(name)
            {
                out.push(Violation {
                    path: path.to_string(),
                    message: format!("missing required property \"{name}\""),
                });
            }
        }
        let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
        for (name, value) in fields {
            match properties.and_then(|p| p.get(name)) {
                Some(schema) => {
                    self.node(schema, value, &property_path(path, name), depth + 1, out)
                }
                None if closed => {
                    let allowed: Vec<&str> = properties
                        .into_iter()
                        .flat_map(|p| p.keys())
                        .map(String::as_str)
                        .collect();
                    out.push(Violation {
                        path: path.to_string(),
                        message: format!(
                            "property \"{name}\" is not allowed (allowed: {})",
                            if allowed.is_empty() {
                                "none".to_string()
                            } else {
                                allowed.join(", ")
                            }
                        ),
                    });
                }
                None => {}
            }
        }
    }

    /// `anyOf` / `oneOf`. When no alternative matches, the violations of
    /// the closest one are reported if it fits the instance's shape here
    /// (all its violations are further in); else what was expected.
    fn alternatives(
        &self,
        keyword: &str,
        alternatives: &[Value],
        instance: &Value,
        path: &str,
        depth: usize,
        out: &mut Vec<Violation>,
    ) {
        let results: Vec<Vec<Violation>> = alternatives
            .iter()
            .map(|a| {
                let mut v = Vec::new();
                self.node(a, instance, path, depth + 1, &mut v);
                v
            })
            .collect();
        let matching: Vec<usize> = (0..results.len())
            .filter(|&i| results[i].is_empty())
            .collect();
        if keyword == "oneOf" && matching.len() > 1 {
            let which: Vec<String> = matching.iter().map(|i| i.to_string()).collect();
            out.push(Violation {
                path: path.to_string(),
                message: format!(
                    "matches {} alternatives of oneOf ({}), exactly one is allowed",
                    matching.len(),
                    which.join(", ")
                ),
            });
            return;
        }
        if !matching.is_empty() {
            return;
        }
        let closest = results
            .into_iter()
            .filter(|v| v.iter().all(|x| x.path != path))
            .min_by_key(Vec::len);
        match closest {
            Some(violations) => out.extend(violations),
            None => {
                let expected: Vec<String> =
                    alternatives.iter().map(|a| self.describe(a, 0)).collect();
                out.push(Violation {
                    path: path.to_string(),
                    message: format!(
                        "{} matches none of the alternatives: expected {}",
                        show(instance),
                        expected.join(" or ")
                    ),
                });
            }
        }
    }

    /// A few words on what `schema` admits, for messages.
    fn describe(&self, schema: &Value, depth: usize) -> String {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str)
            && depth < 4
            && let Some(target) = resolve(self.root, reference)
        {
            return self.describe(target, depth + 1);
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return format!("one of {}", show_list(values));
        }
        if let Some(value) = schema.get("const") {
            return show(value);
        }
        let keys: Vec<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|k| format!("\"{k}\""))
            .collect();
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if !keys.is_empty() => vec!["object"],
            _ => vec!["any value"],
        };
        let named: Vec<String> = types
            .iter()
            .map(|t| match *t {
                "object" if !keys.is_empty() => format!("an object with {}", keys.join(", ")),
                "object" | "array" | "integer" => format!("an {t}"),
                "null" | "any value" => t.to_string(),
                other => format!("a {other}"),
            })
            .collect();
        named.join(" or ")
    }
}

/// The complaint when `instance` is not of the schema's `type`.
fn type_mismatch(map: &Map<String, Value>, instance: &Value) -> Option<String> {
    let wanted: Vec<&str> = match map.get("type")? {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let actual = kind(instance);
    let fits = wanted
        .iter()
        .any(|w| *w == actual || (*w == "number" && actual == "integer"));
    (!fits).then(|| {
        format!(
            "expected {}, got {actual} {}",
            wanted.join(" or "),
            show(instance)
        )
    })
}

fn string_bounds(map: &Map<String, Value>, s: &str, say: &mut impl FnMut(String)) {
    let n = s.chars().count() as u64;
    if let Some(min) = map.get("minLength").and_then(Value::as_u64)
        && n < min
    {
        say(format!(
            "is {n} characters long, fewer than minLength {min}"
        ));
    }
    if let Some(max) = map.get("maxLength").and_then(Value::as_u64)
        && n > max
    {
        say(format!("is {n} characters long, more than maxLength {max}"));
    }
}
