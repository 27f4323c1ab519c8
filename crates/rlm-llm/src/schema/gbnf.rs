//! [`to_gbnf`]: a llama.cpp grammar (GBNF) that admits the JSON documents
//! of a schema, for the embedded model's grammar sampler.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::check::{ANNOTATIONS, check, pointer_step, resolve};
use super::error::SchemaError;
use super::strict::property_order;
use super::validate::violations_in;

/// llama.cpp expands `x{m,n}` into rules and refuses (or, for a larger
/// maximum, drops) a bound above this; longer bounds are built from pieces.
const MAX_REPEAT: u64 = 2000;

/// The rules every grammar may use, each added with what it uses when
/// first needed: (name, body, uses).
const FIXED: [(&str, &str, &[&str]); 12] = [
    // Between tokens: nothing, one blank, or one line break and a short
    // indent. Bounded, so a small model cannot fill its budget with blanks.
    ("ws", r#"( [ \t] | "\n" [ \t]{0,10} )?"#, &[]),
    (
        "char",
        r#"[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )"#,
        &[],
    ),
    ("string", r#""\"" char* "\"""#, &["char"]),
    // A character of a string that may hold unescaped double quotes (a
    // small model's Python code): a quote not followed by `}` goes on; a
    // backslash may also precede what JSON does not escape (a regex's
    // `\d`, `\w`, `\s`, `\.`), which a strict string would force into `\b`.
    (
        "raw-char",
        r#"char | "\"" [^}\x00-\x1F] | "\\" [^"\\/bfnrtu\x00-\x1F]"#,
        &["char"],
    ),
    // Digits are bounded too: 16 before the point, 15 after, 2 in the
    // exponent (every such number is a finite double).
    ("integer", r#""-"? ( "0" | [1-9] [0-9]{0,15} )"#, &[]),
    (
        "number",
        r#""-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?"#,
        &[],
    ),
    ("boolean", r#""true" | "false""#, &[]),
    ("null", r#""null""#, &[]),
    (
        "value",
        "object | array | string | number | boolean | null",
        &["object", "array", "string", "number", "boolean", "null"],
    ),
    (
        "object",
        r#""{" ws ( member ( ws "," ws member )* ws )? "}""#,
        &["ws", "member"],
    ),
    (
        "member",
        r#"string ws ":" ws value"#,
        &["string", "ws", "value"],
    ),
    (
        "array",
        r#""[" ws ( value ( ws "," ws value )* ws )? "]""#,
        &["ws", "value"],
    ),
];

/// A llama.cpp grammar (root rule `root`) admitting the JSON documents
/// `schema` admits ([`check`]ed first), within these bounds: properties in
/// the order `required` lists them, then the optional ones by name (an
/// optional property may be left out; properties a schema does not declare
/// are never generated); at most one line break and ten blanks between
/// tokens; strings with JSON escapes, `maxLength` / `minLength` as bounded
/// repetition (an escape counts as one character); numbers with at most 16
/// digits before the point, 15 after and a 2-digit exponent; `enum` and
/// `const` as literal alternatives (keys of objects sorted); `oneOf` like
/// `anyOf` (validate the reply to tell overlapping alternatives apart).
/// Errors name what cannot be expressed: `anyOf`/`oneOf` next to other
/// keywords, an `enum` none of whose values meets the other keywords, a
/// schema that admits nothing.
pub fn to_gbnf(schema: &Value) -> Result<String, SchemaError> {
    to_gbnf_with_raw_quotes(schema, &[])
}

/// [`to_gbnf`], where the strings at `raw_quotes` (JSON pointers into
/// `schema`, as `#/properties/code`) may also hold unescaped double quotes
/// not followed by `}` ([`crate::ReplySchema::raw_quotes`]): a small model
/// writing Python in a JSON string ends it at the first `"` of `d["key"]`.
pub fn to_gbnf_with_raw_quotes(
    schema: &Value,
    raw_quotes: &[String],
) -> Result<String, SchemaError> {
    to_gbnf_with(schema, raw_quotes, &[])
}

/// [`to_gbnf_with_raw_quotes`], where each string at the path of one of
/// `prefixes` (JSON pointer, text) starts with its text (counted in its
/// `minLength` / `maxLength`): a step of a turn held to the call it
/// declared. A prefix longer than its string's `maxLength` is an error.
pub fn to_gbnf_with(
    schema: &Value,
    raw_quotes: &[String],
    prefixes: &[(String, String)],
) -> Result<String, SchemaError> {
    check(schema)?;
    let mut grammar = Grammar::new(schema);
    grammar.raw_quotes = raw_quotes.iter().cloned().collect();
    grammar.prefixes = prefixes.iter().cloned().collect();
    let root = grammar.body(schema, "#", "root")?;
    grammar.rules.insert(0, ("root".to_string(), root));
    Ok(grammar
        .rules
        .iter()
        .map(|(name, body)| format!("{name} ::= {body}\n"))
        .collect())
}

/// A GBNF string literal of `text`.
pub(super) fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The compact JSON of `value` as a GBNF literal.
fn json_literal(value: &Value) -> String {
    literal(&value.to_string())
}

/// True for a rule name or one string literal: usable wherever a symbol is.
fn is_symbol(body: &str) -> bool {
    if !body.is_empty() && body.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return true;
    }
    let Some(inner) = body.strip_prefix('"').and_then(|b| b.strip_suffix('"')) else {
        return false;
    };
    let mut escaped = false;
    for c in inner.chars() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return false,
            _ => {}
        }
    }
    !escaped
}

fn no_grammar(path: &str, detail: impl Into<String>) -> SchemaError {
    SchemaError::NoGrammar {
        path: path.to_string(),
        detail: detail.into(),
    }
}

/// The rules being built.
struct Grammar<'a> {
    root: &'a Value,
    /// (name, body) in the order they were made; `root` goes first.
    rules: Vec<(String, String)>,
    taken: HashSet<String>,
    by_body: HashMap<String, String>,
    by_ref: HashMap<String, String>,
    /// Paths of the strings that may hold unescaped quotes.
    raw_quotes: HashSet<String>,
    /// Paths of the strings that start with a fixed text, and the text.
    prefixes: HashMap<String, String>,
}

impl<'a> Grammar<'a> {
    fn new(root: &'a Value) -> Self {
        Grammar {
            root,
            rules: Vec::new(),
            taken: HashSet::from(["root".to_string()]),
            by_body: HashMap::new(),
            by_ref: HashMap::new(),
            raw_quotes: HashSet::new(),
            prefixes: HashMap::new(),
        }
    }

    /// A free rule name like `hint` (letters, digits and `-`).
    fn name_for(&mut self, hint: &str) -> String {
        let mut base = String::new();
        for c in hint.chars() {
            let c = if c.is_ascii_alphanumeric() { c } else { '-' };
            if !(c == '-' && (base.is_empty() || base.ends_with('-'))) {
                base.push(c);
            }
        }
        let mut base = base
            .trim_end_matches('-')
            .chars()
            .take(48)
            .collect::<String>();
        if base.is_empty() {
            base.push('r');
        }
        let fixed = |n: &str| FIXED.iter().any(|(f, _, _)| *f == n);
        let mut name = base.clone();
        let mut n = 1;
        while self.taken.contains(&name) || fixed(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        self.taken.insert(name.clone());
        name
    }

    /// A rule with `body` (an existing one if the body is the same).
    fn define(&mut self, hint: &str, body: String) -> String {
        if let Some(name) = self.by_body.get(&body) {
            return name.clone();
        }
        let name = self.name_for(hint);
        self.by_body.insert(body.clone(), name.clone());
        self.rules.push((name.clone(), body));
        name
    }

    /// One of the [`FIXED`] rules, added (with what it uses) if missing.
    fn fixed(&mut self, name: &str) -> String {
        if self.taken.insert(name.to_string()) {
            let (_, body, uses) = FIXED
                .iter()
                .find(|(n, _, _)| *n == name)
                .expect("a fixed rule");
            for used in *uses {
                self.fixed(used);
            }
            self.rules.push((name.to_string(), body.to_string()));
        }
        name.to_string()
    }

    /// A symbol (rule name or literal) for `schema`.
    fn value(&mut self, schema: &Value, path: &str, hint: &str) -> Result<String, SchemaError> {
        let body = self.body(schema, path, hint)?;
        Ok(if is_symbol(&body) {
            body
        } else {
            self.define(hint, body)
        })
    }

    /// The rule of a `$ref` target, made once (and usable recursively).
    fn reference(&mut self, reference: &str) -> Result<String, SchemaError> {
        if let Some(name) = self.by_ref.get(reference) {
            return Ok(name.clone());
        }
        let target = resolve(self.root, reference)
            .ok_or_else(|| no_grammar(reference, "the $ref names no schema"))?;
        let hint = reference.rsplit('/').next().unwrap_or("ref").to_string();
        let name = self.name_for(&hint);
        self.by_ref.insert(reference.to_string(), name.clone());
        let body = self.body(target, reference, &name)?;
        self.rules.push((name.clone(), body));
        Ok(name)
    }

    /// The body of a rule for `schema`: alternatives of sequences.
    fn body(&mut self, schema: &Value, path: &str, hint: &str) -> Result<String, SchemaError> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.fixed("value")),
            Value::Object(map) => map,
            _ => return Err(no_grammar(path, "this schema admits no value")),
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            return self.reference(reference);
        }
        if map.contains_key("enum") || map.contains_key("const") {
            return self.literals(map, path);
        }
        if map.contains_key("anyOf") || map.contains_key("oneOf") {
            return self.alternatives(map, path, hint);
        }
        let mut types: Vec<&str> = match map.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() {
            // No type: the keywords tell which types they constrain.
            let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
            for (ty, keys) in [
                (
                    "object",
                    &["properties", "required", "additionalProperties"][..],
                ),
                ("array", &["items", "minItems", "maxItems"][..]),
                ("string", &["minLength", "maxLength"][..]),
            ] {
                if has(keys) {
                    types.push(ty);
                }
            }
            if types.is_empty() {
                return Ok(self.fixed("value"));
            }
        }
        let mut alternatives = Vec::new();
        for ty in types {
            alternatives.push(match ty {
                "null" => self.fixed("null"),
                "boolean" => self.fixed("boolean"),
                "integer" => self.fixed("integer"),
                "number" => self.fixed("number"),
                "string" => self.string(map, path)?,
                "array" => self.array(map, path, hint)?,
                _ => self.object(map, path, hint)?,
            });
        }
        Ok(alternatives.join(" | "))
    }

    /// `enum` / `const`: the values that also meet the other keywords.
    fn literals(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, SchemaError> {
        let mut values: Vec<&Value> = match map.get("enum").and_then(Value::as_array) {
            Some(values) => values.iter().collect(),
            None => map.get("const").into_iter().collect(),
        };
        if let Some(c) = map.get("const") {
            values.retain(|v| super::validate::json_eq(v, c));
        }
        let mut rest = map.clone();
        rest.remove("enum");
        rest.remove("const");
        let rest = Value::Object(rest);
        let literals: Vec<String> = values
            .into_iter()
            .filter(|v| violations_in(self.root, &rest, v).is_empty())
            .map(|v| self.fixed_value(v))
            .collect();
        if literals.is_empty() {
            return Err(no_grammar(
                path,
                "no value of enum/const also meets the schema's other keywords",
            ));
        }
        Ok(literals.join(" | "))
    }

    /// A sequence admitting exactly `value` (whitespace allowed between
    /// the tokens of an array or object, as elsewhere).
    fn fixed_value(&mut self, value: &Value) -> String {
        let (open, close, parts) = match value {
            Value::Array(items) => (
                "[",
                "]",
                items.iter().map(|v| self.fixed_value(v)).collect(),
            ),
            Value::Object(map) => {
                let ws = self.fixed("ws");
                let members = map
                    .iter()
                    .map(|(k, v)| {
                        let key = json_literal(&Value::from(k.as_str()));
                        format!(r#"{key} {ws} ":" {ws} {}"#, self.fixed_value(v))
                    })
                    .collect();
                ("{", "}", members)
            }
            scalar => return json_literal(scalar),
        };
        let ws = self.fixed("ws");
        let parts: Vec<String> = parts;
        let inner = parts.join(&format!(r#" {ws} "," {ws} "#));
        if inner.is_empty() {
            format!(r#""{open}" {ws} "{close}""#)
        } else {
            format!(r#""{open}" {ws} {inner} {ws} "{close}""#)
        }
    }

    /// `anyOf` / `oneOf`: one alternative per schema.
    fn alternatives(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        hint: &str,
    ) -> Result<String, SchemaError> {
        let quiet = |k: &str| {
            ANNOTATIONS.contains(&k) || ["anyOf", "oneOf", "$defs", "definitions"].contains(&k)
        };
        if let Some(other) = map.keys().find(|k| !quiet(k)) {
            return Err(no_grammar(
                path,
                format!("\"{other}\" next to anyOf/oneOf: move it into each alternative"),
            ));
        }
        if map.contains_key("anyOf") && map.contains_key("oneOf") {
            return Err(no_grammar(
                path,
                "anyOf and oneOf together: use one of them",
            ));
        }
        let keyword = if map.contains_key("anyOf") {
            "anyOf"
        } else {
            "oneOf"
        };
        let here = pointer_step(path, keyword);
        let mut symbols = Vec::new();
        for (i, alternative) in map[keyword].as_array().into_iter().flatten().enumerate() {
            let at = pointer_step(&here, &i.to_string());
            symbols.push(self.value(alternative, &at, &format!("{hint}-{i}"))?);
        }
        Ok(symbols.join(" | "))
    }

    /// A string within `minLength` / `maxLength`, starting with its prefix
    /// if it has one.
    fn string(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, SchemaError> {
        let mut min = map.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        let mut max = map.get("maxLength").and_then(Value::as_u64);
        let raw = self.raw_quotes.contains(path);
        let prefix = self.prefixes.get(path).cloned();
        if min == 0 && max.is_none() && !raw && prefix.is_none() {
            return Ok(self.fixed("string"));
        }
        let mut start = String::new();
        if let Some(prefix) = &prefix {
            let n = prefix.chars().count() as u64;
            if max.is_some_and(|m| m < n) {
                return Err(SchemaError::Invalid {
                    path: path.to_string(),
                    detail: format!("the prefix {prefix:?} is longer than maxLength"),
                });
            }
            // The prefix as the string's JSON text (its escapes included).
            let json = serde_json::to_string(prefix).unwrap_or_default();
            start = format!("{} ", literal(&json[1..json.len() - 1]));
            min = min.saturating_sub(n);
            max = max.map(|m| m - n);
        }
        let char = self.fixed(if raw { "raw-char" } else { "char" });
        let chars = self.repeat(&char, min, max);
        let kind = if raw { "raw-string" } else { "string" };
        let hint = match (&prefix, max) {
            (Some(_), _) => format!("{kind}-prefixed"),
            (None, Some(max)) => format!("{kind}-{min}-{max}"),
            (None, None) => format!("{kind}-{min}"),
        };
        Ok(self.define(&hint, format!(r#""\"" {start}{chars} "\"""#)))
    }

    /// `symbol` (a rule name) repeated `min` to `max` times (`None`: no
    /// limit), in pieces llama.cpp accepts; empty for exactly 0 times.
    fn repeat(&mut self, symbol: &str, min: u64, max: Option<u64>) -> String {
        if min > MAX_REPEAT {
            let rest = self.repeat(symbol, min - MAX_REPEAT, max.map(|m| m - MAX_REPEAT));
            return format!("{symbol}{{{MAX_REPEAT}}} {rest}")
                .trim_end()
                .to_string();
        }
        match max {
            None if min == 0 => format!("{symbol}*"),
            None => format!("{symbol}{{{min},}}"),
            Some(0) => String::new(),
            Some(max) if max == min => format!("{symbol}{{{min}}}"),
            Some(max) if max <= MAX_REPEAT => format!("{symbol}{{{min},{max}}}"),
            Some(max) => {
                // Fewer than MAX_REPEAT, or MAX_REPEAT and then the rest.
                let rest = self.repeat(symbol, 0, Some(max - MAX_REPEAT));
                let high = format!("{symbol}{{{MAX_REPEAT}}} {rest}");
                let body = if min < MAX_REPEAT {
                    format!("{symbol}{{{min},{}}} | {high}", MAX_REPEAT - 1)
                } else {
                    high
                };
                self.define(&format!("{symbol}-{min}-to-{max}"), body)
            }
        }
    }

    /// An object: its declared properties, required ones always, in
    /// [`property_order`].
    fn object(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        hint: &str,
    ) -> Result<String, SchemaError> {
        let order = property_order(map);
        let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
        let ws = self.fixed("ws");
        if order.is_empty() {
            return Ok(if closed {
                format!(r#""{{" {ws} "}}""#)
            } else {
                self.fixed("object")
            });
        }
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let properties_path = pointer_step(path, "properties");
        let mut members = Vec::new();
        for name in &order {
            let at = pointer_step(&properties_path, name);
            let value = self.value(&map["properties"][*name], &at, &format!("{hint}-{name}"))?;
            let key = json_literal(&Value::from(*name));
            members.push(format!("{key} {ws} \":\" {ws} {value}"));
        }
        let next = |m: &String| format!(r#"{ws} "," {ws} {m}"#);
        let optional =
            |ms: &[String]| -> String { ms.iter().map(|m| format!(" ( {} )?", next(m))).collect() };
        // Required properties come first in the order.
        let n_required = order.iter().take_while(|n| required.contains(n)).count();
        if n_required > 0 {
            let mut seq = members[0].clone();
            for m in &members[1..n_required] {
                seq.push(' ');
                seq.push_str(&next(m));
            }
            seq.push_str(&optional(&members[n_required..]));
            return Ok(format!(r#""{{" {ws} {seq} {ws} "}}""#));
        }
        // All optional: the first present property picks the alternative.
        let firsts: Vec<String> = (0..members.len())
            .map(|j| format!("{}{}", members[j], optional(&members[j + 1..])))
            .collect();
        Ok(format!(
            r#""{{" {ws} ( ( {} ) {ws} )? "}}""#,
            firsts.join(" | ")
        ))
    }

    /// An array within `minItems` / `maxItems`.
    fn array(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        hint: &str,
    ) -> Result<String, SchemaError> {
        let ws = self.fixed("ws");
        let item = match map.get("items") {
            Some(items) => {
                self.value(items, &pointer_step(path, "items"), &format!("{hint}-item"))?
            }
            None => self.fixed("value"),
        };
        let min = map.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let max = map.get("maxItems").and_then(Value::as_u64);
        if max == Some(0) {
            return Ok(format!(r#""[" {ws} "]""#));
        }
        let more = self.define(&format!("{hint}-more"), format!(r#"{ws} "," {ws} {item}"#));
        let tail = self.repeat(&more, min.saturating_sub(1), max.map(|m| m - 1));
        let list = format!("{item} {tail}").trim_end().to_string();
        Ok(if min == 0 {
            format!(r#""[" {ws} ( {list} {ws} )? "]""#)
        } else {
            format!(r#""[" {ws} {list} {ws} "]""#)
        })
    }
}
