//! Tests of the schema subset: `check` errors, each keyword in `validate`,
//! reply parsing, strict mode, and the generated grammars, run by a small
//! GBNF recognizer written here (a parser of the grammar text and a matcher
//! over it) and a generator that samples documents from a grammar.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::*;

/// The engine's turn schema: a thought, then code, an answer with cited
/// sources (ids from a list), or a not-found note.
fn turn_schema() -> Value {
    json!({"type":"object","properties":{
      "thought":{"type":"string","maxLength":300},
      "step":{"anyOf":[
        {"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false},
        {"type":"object","properties":{"answer":{"type":"array","minItems":1,"items":{"type":"object","properties":{
            "text":{"type":"string","maxLength":600},
            "source":{"anyOf":[{"type":"null"},{"type":"object","properties":{"ref":{"type":"string","enum":["chunk:0a1b2c3d4e5f6a7b-0","doc:3"]},"quote":{"type":"string","maxLength":300}},"required":["ref","quote"],"additionalProperties":false}]}},
          "required":["text","source"],"additionalProperties":false}}},"required":["answer"],"additionalProperties":false},
        {"type":"object","properties":{"not_found":{"type":"string"}},"required":["not_found"],"additionalProperties":false}
      ]}},
     "required":["thought","step"],"additionalProperties":false})
}

fn turn_code() -> Value {
    json!({"thought": "Search the documents first.", "step": {"code": "print(search(\"needle\"))\nx = 1"}})
}

fn turn_answer() -> Value {
    json!({"thought": "Found it.", "step": {"answer": [
        {"text": "The code is 7141.", "source": {"ref": "chunk:0a1b2c3d4e5f6a7b-0", "quote": "the code is 7141"}},
        {"text": "Nothing else was asked.", "source": null}
    ]}})
}

fn turn_not_found() -> Value {
    json!({"thought": "", "step": {"not_found": "Die Dokumente nennen keinen Preis."}})
}

fn violations(schema: &Value, instance: &Value) -> Vec<String> {
    match validate(schema, instance) {
        Ok(()) => Vec::new(),
        Err(e) => e.violations.iter().map(ToString::to_string).collect(),
    }
}

// ---------------------------------------------------------------- check

#[test]
fn check_accepts_the_subset() {
    check(&turn_schema()).unwrap();
    check(&json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "T", "description": "d", "$comment": "c",
        "type": ["string", "null"], "minLength": 1, "maxLength": 5,
        "default": "x", "examples": ["y"], "deprecated": false
    }))
    .unwrap();
    check(&json!({
        "$defs": {"node": {"type": "object", "properties": {
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}}}},
        "definitions": {"n": {"const": 3}},
        "oneOf": [{"$ref": "#/$defs/node"}, {"$ref": "#/definitions/n"}, true]
    }))
    .unwrap();
    check(&json!(true)).unwrap();
    check(&json!({})).unwrap();
}

#[test]
fn check_names_the_unsupported_keyword_and_where_it_is() {
    let err = check(&json!({"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$"}}}))
    .unwrap_err();
    assert_eq!(
        err,
        SchemaError::Unsupported {
            keyword: "pattern".into(),
            path: "#/properties/name".into()
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("'pattern' at #/properties/name"),
        "{message}"
    );
    assert!(message.contains("supported are type, enum"), "{message}");

    let err = check(&json!({"anyOf": [{"type": "string"}, {"minimum": 3}]})).unwrap_err();
    assert!(err.to_string().contains("'minimum' at #/anyOf/1"), "{err}");
}

#[test]
fn check_refuses_invalid_values_with_the_path() {
    let cases = [
        (json!({"type": "text"}), "#/type", "unknown type \"text\""),
        (json!({"type": []}), "#/type", "type must be"),
        (json!({"type": ["string", "string"]}), "#/type", "twice"),
        (json!({"enum": []}), "#/enum", "non-empty array"),
        (
            json!({"properties": {"a": {}}, "required": ["b"]}),
            "#/required",
            "\"b\", which properties does not define",
        ),
        (
            json!({"required": "a"}),
            "#/required",
            "array of property names",
        ),
        (
            json!({"additionalProperties": {"type": "string"}}),
            "#/additionalProperties",
            "must be false (or true)",
        ),
        (json!({"items": [{"type": "string"}]}), "#/items", "tuples"),
        (json!({"maxLength": -1}), "#/maxLength", "whole number"),
        (json!({"minItems": 1.5}), "#/minItems", "whole number"),
        (
            json!({"minLength": 5, "maxLength": 2}),
            "#",
            "minLength 5 is more than maxLength 2",
        ),
        (json!({"anyOf": []}), "#/anyOf", "non-empty array"),
        (
            json!({"$ref": "#/$defs/missing"}),
            "#/$ref",
            "does not name a schema",
        ),
        (
            json!({"$ref": "http://x/s.json"}),
            "#/$ref",
            "does not name a schema",
        ),
        (
            json!({"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {}}}),
            "#/$ref",
            "\"type\" next to $ref",
        ),
        (
            json!({"properties": {"a": 3}}),
            "#/properties/a",
            "a schema is an object",
        ),
        (
            json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}),
            "#/$defs/a",
            "$ref loop",
        ),
    ];
    for (schema, path, detail) in cases {
        match check(&schema) {
            Err(SchemaError::Invalid { path: p, detail: d }) => {
                assert_eq!(p, path, "{schema}: {d}");
                assert!(d.contains(detail), "{schema}: {d}");
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
    // A loop through a property is fine: it moves into the instance.
    check(&json!({"$defs": {"a": {"properties": {"next": {"$ref": "#/$defs/a"}}}}, "$ref": "#/$defs/a"}))
        .unwrap();
}

// ---------------------------------------------------------------- validate

#[test]
fn validate_accepts_each_turn_shape() {
    let schema = turn_schema();
    for turn in [turn_code(), turn_answer(), turn_not_found()] {
        assert_eq!(violations(&schema, &turn), Vec::<String>::new(), "{turn}");
    }
}

#[test]
fn validate_reports_each_keyword_with_its_path() {
    let schema = turn_schema();
    let mut wrong_ref = turn_answer();
    wrong_ref["step"]["answer"][0]["source"]["ref"] = json!("chunk:ffff");
    assert_eq!(
        violations(&schema, &wrong_ref),
        vec![
            "$.step.answer[0].source.ref: \"chunk:ffff\" is not one of \"chunk:0a1b2c3d4e5f6a7b-0\", \"doc:3\""
        ]
    );
    let long = "x".repeat(301);
    let v = violations(&schema, &json!({"thought": long, "step": {"code": "1"}}));
    assert_eq!(
        v,
        vec!["$.thought: is 301 characters long, more than maxLength 300"]
    );
    let v = violations(&schema, &json!({"step": {"answer": []}, "extra": 1}));
    assert_eq!(
        v,
        vec![
            "$: missing required property \"thought\"",
            "$: property \"extra\" is not allowed (allowed: step, thought)",
            "$.step.answer: has 0 items, fewer than minItems 1",
        ]
    );
    let v = violations(&schema, &json!({"thought": 5, "step": "print(1)"}));
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(
        v[0],
        "$.step: \"print(1)\" matches none of the alternatives: expected an object with \"code\" or an object with \"answer\" or an object with \"not_found\""
    );
    assert_eq!(v[1], "$.thought: expected string, got integer 5");
    // The closest alternative's own violations, when it fits the shape.
    let v = violations(&schema, &json!({"thought": "", "step": {"code": 3}}));
    assert_eq!(v, vec!["$.step.code: expected string, got integer 3"]);
}

#[test]
fn validate_covers_types_consts_lengths_items_and_one_of() {
    let s = json!({"type": ["integer", "null"]});
    assert!(violations(&s, &json!(3)).is_empty());
    assert!(violations(&s, &json!(3.0)).is_empty(), "3.0 is an integer");
    assert!(violations(&s, &Value::Null).is_empty());
    assert_eq!(
        violations(&s, &json!(2.5)),
        vec!["$: expected integer or null, got number 2.5"]
    );
    assert!(violations(&json!({"type": "number"}), &json!(7)).is_empty());
    assert_eq!(
        violations(&json!({"type": "boolean"}), &json!("true")),
        vec!["$: expected boolean, got string \"true\""]
    );
    assert_eq!(
        violations(&json!({"const": {"a": 1}}), &json!({"a": 2})),
        vec!["$: {\"a\":2} is not {\"a\":1}"]
    );
    assert!(violations(&json!({"enum": [1, "1"]}), &json!(1.0)).is_empty());
    assert_eq!(
        violations(&json!({"minLength": 2}), &json!("é")),
        vec!["$: is 1 characters long, fewer than minLength 2"]
    );
    assert!(
        violations(&json!({"maxLength": 2}), &json!("éé")).is_empty(),
        "characters, not bytes"
    );
    let list = json!({"items": {"type": "string"}, "maxItems": 2});
    assert_eq!(
        violations(&list, &json!(["a", 1, "c"])),
        vec![
            "$: has 3 items, more than maxItems 2",
            "$[1]: expected string, got integer 1"
        ]
    );
    let one = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
    assert!(violations(&one, &json!(1.5)).is_empty());
    assert_eq!(
        violations(&one, &json!(2)),
        vec!["$: matches 2 alternatives of oneOf (0, 1), exactly one is allowed"]
    );
    assert_eq!(
        violations(&json!(false), &json!(1)),
        vec!["$: no value is allowed here"]
    );
    let odd = json!({"properties": {"a b": {"type": "null"}}});
    assert_eq!(
        violations(&odd, &json!({"a b": 1})),
        vec!["$[\"a b\"]: expected null, got integer 1"]
    );
    let tree = json!({"$defs": {"n": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"});
    assert_eq!(
        violations(&tree, &json!({"kids": [{"kids": [{"kids": 1}]}]})),
        vec!["$.kids[0].kids[0].kids: expected array, got integer 1"]
    );
}

#[test]
fn the_violation_message_lists_the_first_few() {
    let s = json!({"items": {"type": "string"}});
    let err = validate(&s, &json!([1, 2, 3, 4, 5])).unwrap_err();
    assert_eq!(err.violations.len(), 5);
    assert_eq!(
        err.to_string(),
        "does not follow the schema: $[0]: expected string, got integer 1; $[1]: expected string, got integer 2; $[2]: expected string, got integer 3 (and 2 more)"
    );
    let long_enum: Vec<Value> = (0..20).map(|i| json!(format!("id{i}"))).collect();
    let err = validate(&json!({"enum": long_enum}), &json!("x")).unwrap_err();
    assert!(err.to_string().ends_with("\"id7\", … (20 in all)"), "{err}");
}

// ---------------------------------------------------------------- replies

#[test]
fn parse_reply_finds_the_document_whole_fenced_or_embedded() {
    let schema = turn_schema();
    let doc = turn_code();
    let compact = doc.to_string();
    let pretty = serde_json::to_string_pretty(&doc).unwrap();
    for text in [
        compact.clone(),
        format!("  {pretty}\n"),
        format!("Sure:\n```json\n{pretty}\n```\nDone."),
        format!("```\n{compact}\n```"),
        format!("```python\nx = {{1: 2}}\n```\n```json\n{compact}\n```"),
        format!("My reply is {compact} as asked."),
        format!("Ignore [this] and {{that}}: {compact}"),
    ] {
        assert_eq!(parse_reply(&schema, &text).unwrap(), doc, "{text}");
    }
    let err = parse_reply(&schema, "I think the answer is 42.").unwrap_err();
    assert_eq!(
        err,
        ReplyError::NoJson {
            excerpt: "I think the answer is 42.".into()
        }
    );
    assert!(err.violations().is_empty());
    let err = parse_reply(&schema, r#"{"thought": "x"}"#).unwrap_err();
    assert_eq!(err.violations().len(), 1);
    assert_eq!(
        err.to_string(),
        "the reply's JSON does not follow the schema: $: missing required property \"step\""
    );
    assert_eq!(
        extract_json("text {\"a\": \"}\"} more"),
        Some(json!({"a": "}"}))
    );
    assert_eq!(extract_json("[1, 2"), None);
}

// ---------------------------------------------------------------- strict

#[test]
fn strict_mode_wants_closed_objects_with_every_property_required() {
    assert!(strict_compatible(&turn_schema()));
    let open =
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert!(!strict_compatible(&open));
    let optional = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a"], "additionalProperties": false});
    assert!(!strict_compatible(&optional));
    assert!(!strict_compatible(
        &json!({"type": "array", "items": {"type": "string"}})
    ));

    let copy = strict_copy(&turn_schema()).unwrap();
    assert_eq!(copy["properties"]["thought"], json!({"type": "string"}));
    assert!(
        copy["properties"]["step"]["anyOf"][1]["properties"]["answer"]
            .get("minItems")
            .is_none()
    );
    assert!(strict_compatible(&copy));
    // The copy admits every instance of the original.
    for turn in [turn_code(), turn_answer(), turn_not_found()] {
        validate(&copy, &turn).unwrap();
    }
    let closed = strict_copy(&open).unwrap();
    assert_eq!(closed["additionalProperties"], json!(false));
    let converted = strict_copy(&json!({"type": "object", "properties": {
        "k": {"oneOf": [{"const": "a"}, {"type": "null"}], "default": null}}, "required": ["k"]}))
    .unwrap();
    assert_eq!(
        converted["properties"]["k"],
        json!({"anyOf": [{"enum": ["a"]}, {"type": "null"}]})
    );
    assert_eq!(strict_copy(&optional), None);
    assert_eq!(strict_copy(&json!({"type": "string"})), None);
    assert_eq!(
        strict_copy(&json!({"type": "object", "properties": {"x": {}}, "required": ["x"]})),
        None,
        "a property that admits anything"
    );
    assert_eq!(
        strict_copy(
            &json!({"type": "object", "properties": {"x": {"type": "array"}}, "required": ["x"]})
        ),
        None,
        "an array without items"
    );
}

#[test]
fn ordered_json_puts_required_properties_first_in_their_order() {
    let schema = turn_schema();
    let text = ordered_json(&schema);
    assert!(
        text.find("\"thought\"").unwrap() < text.find("\"step\"").unwrap(),
        "{text}"
    );
    assert!(
        text.find("\"text\"").unwrap() < text.find("\"source\"").unwrap(),
        "{text}"
    );
    assert!(
        text.find("\"ref\"").unwrap() < text.find("\"quote\"").unwrap(),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), schema);
    let plain = json!({"b": [1, "x\"y", null], "a": {"properties": 3}});
    assert_eq!(ordered_json(&plain), plain.to_string());
}

// ---------------------------------------------------------------- GBNF recognizer

/// A parsed GBNF expression.
#[derive(Debug, Clone)]
enum Expr {
    Literal(Vec<char>),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Rule(String),
    Sequence(Vec<Expr>),
    Choice(Vec<Expr>),
    Repeat(Box<Expr>, u64, Option<u64>),
}

/// A grammar parsed from the text [`to_gbnf`] writes (one rule a line).
struct Gbnf {
    rules: HashMap<String, Expr>,
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn blanks(&mut self) {
        while self.peek() == Some(' ') {
            self.at += 1;
        }
    }

    fn choice(&mut self) -> Expr {
        let mut alternatives = vec![self.sequence()];
        while self.peek() == Some('|') {
            self.at += 1;
            alternatives.push(self.sequence());
        }
        Expr::Choice(alternatives)
    }

    fn sequence(&mut self) -> Expr {
        let mut items = Vec::new();
        loop {
            self.blanks();
            match self.peek() {
                None | Some('|') | Some(')') => break,
                _ => {
                    let atom = self.atom();
                    items.push(self.postfix(atom));
                }
            }
        }
        Expr::Sequence(items)
    }

    fn escaped(&mut self) -> char {
        let c = self.chars[self.at];
        self.at += 1;
        if c != '\\' {
            return c;
        }
        let e = self.chars[self.at];
        self.at += 1;
        let hex = |p: &mut Parser, n: usize| {
            let s: String = p.chars[p.at..p.at + n].iter().collect();
            p.at += n;
            char::from_u32(u32::from_str_radix(&s, 16).unwrap()).unwrap()
        };
        match e {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'x' => hex(self, 2),
            'u' => hex(self, 4),
            other => other,
        }
    }

    fn atom(&mut self) -> Expr {
        match self.peek().unwrap() {
            '"' => {
                self.at += 1;
                let mut text = Vec::new();
                while self.peek() != Some('"') {
                    text.push(self.escaped());
                }
                self.at += 1;
                Expr::Literal(text)
            }
            '[' => {
                self.at += 1;
                let negated = self.peek() == Some('^');
                if negated {
                    self.at += 1;
                }
                let mut ranges = Vec::new();
                while self.peek() != Some(']') {
                    let low = self.escaped();
                    let high = if self.peek() == Some('-') && self.chars[self.at + 1] != ']' {
                        self.at += 1;
                        self.escaped()
                    } else {
                        low
                    };
                    ranges.push((low, high));
                }
                self.at += 1;
                Expr::Class { negated, ranges }
            }
            '(' => {
                self.at += 1;
                let inner = self.choice();
                assert_eq!(self.peek(), Some(')'), "unclosed group");
                self.at += 1;
                inner
            }
            c if c.is_ascii_alphanumeric() || c == '-' => {
                let start = self.at;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                {
                    self.at += 1;
                }
                Expr::Rule(self.chars[start..self.at].iter().collect())
            }
            c => panic!("unexpected {c:?} at {}", self.at),
        }
    }

    fn number(&mut self) -> u64 {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        self.chars[start..self.at]
            .iter()
            .collect::<String>()
            .parse()
            .unwrap()
    }

    fn postfix(&mut self, atom: Expr) -> Expr {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.at += 1;
                let min = self.number();
                let max = match self.peek() {
                    Some('}') => Some(min),
                    _ => {
                        assert_eq!(self.peek(), Some(','));
                        self.at += 1;
                        (self.peek() != Some('}')).then(|| self.number())
                    }
                };
                assert_eq!(self.peek(), Some('}'));
                self.at += 1;
                return Expr::Repeat(Box::new(atom), min, max);
            }
            _ => return atom,
        };
        self.at += 1;
        Expr::Repeat(Box::new(atom), min, max)
    }
}

impl Gbnf {
    fn parse(text: &str) -> Self {
        let mut rules = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (name, body) = line.split_once(" ::= ").expect("name ::= body");
            let mut parser = Parser {
                chars: body.chars().collect(),
                at: 0,
            };
            let expr = parser.choice();
            assert_eq!(parser.at, parser.chars.len(), "trailing text in {line}");
            assert!(
                rules.insert(name.to_string(), expr).is_none(),
                "{name} twice"
            );
        }
        let gbnf = Gbnf { rules };
        for expr in gbnf.rules.values() {
            gbnf.check_refs(expr);
        }
        gbnf
    }

    fn check_refs(&self, expr: &Expr) {
        match expr {
            Expr::Rule(name) => assert!(self.rules.contains_key(name), "undefined rule {name}"),
            Expr::Sequence(items) | Expr::Choice(items) => {
                items.iter().for_each(|e| self.check_refs(e))
            }
            Expr::Repeat(inner, _, max) => {
                assert!(
                    max.is_none_or(|m| m <= 2000),
                    "a repetition above llama.cpp's limit"
                );
                self.check_refs(inner)
            }
            _ => {}
        }
    }

    fn accepts(&self, text: &str) -> bool {
        let input: Vec<char> = text.chars().collect();
        let matcher = Matcher {
            gbnf: self,
            input: &input,
            memo: RefCell::new(HashMap::new()),
        };
        matcher
            .ends(&Expr::Rule("root".into()), 0)
            .contains(&input.len())
    }
}

/// Every end position of each expression from each start position.
struct Matcher<'a> {
    gbnf: &'a Gbnf,
    input: &'a [char],
    memo: RefCell<HashMap<(String, usize), BTreeSet<usize>>>,
}

impl Matcher<'_> {
    fn ends(&self, expr: &Expr, at: usize) -> BTreeSet<usize> {
        match expr {
            Expr::Literal(text) => {
                let fits = self.input.len() >= at + text.len()
                    && self.input[at..at + text.len()] == text[..];
                fits.then_some(at + text.len()).into_iter().collect()
            }
            Expr::Class { negated, ranges } => match self.input.get(at) {
                Some(c) if ranges.iter().any(|(l, h)| l <= c && c <= h) != *negated => {
                    BTreeSet::from([at + 1])
                }
                _ => BTreeSet::new(),
            },
            Expr::Rule(name) => {
                let key = (name.clone(), at);
                if let Some(done) = self.memo.borrow().get(&key) {
                    return done.clone();
                }
                let found = self.ends(&self.gbnf.rules[name], at);
                self.memo.borrow_mut().insert(key, found.clone());
                found
            }
            Expr::Sequence(items) => items.iter().fold(BTreeSet::from([at]), |starts, item| {
                starts.iter().flat_map(|&s| self.ends(item, s)).collect()
            }),
            Expr::Choice(alternatives) => {
                alternatives.iter().flat_map(|a| self.ends(a, at)).collect()
            }
            Expr::Repeat(inner, min, max) => {
                let mut found = BTreeSet::new();
                let mut seen = BTreeSet::new();
                let mut frontier = BTreeSet::from([at]);
                let mut count = 0;
                loop {
                    if count >= *min {
                        found.extend(frontier.iter().copied());
                    }
                    if max.is_some_and(|m| count >= m) || frontier.is_empty() {
                        break;
                    }
                    let next: BTreeSet<usize> =
                        frontier.iter().flat_map(|&s| self.ends(inner, s)).collect();
                    count += 1;
                    // Past the minimum, positions seen before add nothing.
                    frontier = if count > *min {
                        next.difference(&seen).copied().collect()
                    } else {
                        next
                    };
                    if count >= *min {
                        seen.extend(frontier.iter().copied());
                    }
                }
                found
            }
        }
    }
}

/// Samples documents from a grammar: random choices, repetitions a little
/// past their minimum, sample characters for classes.
struct Sampler<'a> {
    gbnf: &'a Gbnf,
    rng: fastrand::Rng,
}

const SAMPLE_CHARS: [char; 12] = [
    'a', 'Z', '7', ' ', '"', '\\', '/', 'é', '😀', '\n', '-', 'e',
];

impl Sampler<'_> {
    fn sample(&mut self, expr: &Expr, depth: usize, out: &mut String) {
        match expr {
            Expr::Literal(text) => out.extend(text),
            Expr::Class { negated, ranges } => {
                let fits = |c: &char| ranges.iter().any(|(l, h)| l <= c && c <= h) != *negated;
                let pool: Vec<char> = SAMPLE_CHARS.iter().copied().filter(fits).collect();
                let c = if pool.is_empty() {
                    ranges[self.rng.usize(..ranges.len())].0
                } else {
                    pool[self.rng.usize(..pool.len())]
                };
                out.push(c);
            }
            Expr::Rule(name) => self.sample(&self.gbnf.rules[name].clone(), depth + 1, out),
            Expr::Sequence(items) => items.iter().for_each(|e| self.sample(e, depth, out)),
            Expr::Choice(alternatives) => {
                // Deep in a recursive grammar, take the first (shortest) way out.
                let pick = if depth > 40 {
                    alternatives.len() - 1
                } else {
                    self.rng.usize(..alternatives.len())
                };
                self.sample(&alternatives[pick], depth, out);
            }
            Expr::Repeat(inner, min, max) => {
                let extra = if depth > 40 { 0 } else { self.rng.u64(0..=3) };
                let n = max.map_or(min + extra, |m| (min + extra).min(m));
                for _ in 0..n {
                    self.sample(inner, depth + 1, out);
                }
            }
        }
    }
}

fn grammar_of(schema: &Value) -> Gbnf {
    let text = to_gbnf(schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    assert!(text.starts_with("root ::= "), "{text}");
    Gbnf::parse(&text)
}

/// The grammar accepts each instance, compact and pretty-printed (keys
/// sorted, as serde_json prints them: the schemas here order their
/// properties so), and each instance is valid; documents sampled from the
/// grammar are valid too.
fn assert_grammar_fits(schema: &Value, instances: &[Value]) -> Gbnf {
    let gbnf = grammar_of(schema);
    for instance in instances {
        validate(schema, instance).unwrap_or_else(|e| panic!("{instance}: {e}"));
        let compact = instance.to_string();
        assert!(
            gbnf.accepts(&compact),
            "rejected {compact}\n{}",
            to_gbnf(schema).unwrap()
        );
        let pretty = serde_json::to_string_pretty(instance).unwrap();
        assert!(gbnf.accepts(&pretty), "rejected {pretty}");
    }
    let mut sampler = Sampler {
        gbnf: &gbnf,
        rng: fastrand::Rng::with_seed(25),
    };
    for _ in 0..200 {
        let mut text = String::new();
        sampler.sample(&Expr::Rule("root".into()), 0, &mut text);
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        validate(schema, &doc).unwrap_or_else(|e| panic!("sampled {text}: {e}"));
        assert!(gbnf.accepts(&text), "{text}");
    }
    gbnf
}

/// Compact JSON text of an object with its keys in the given order.
fn object_text(pairs: &[(&str, String)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::from(*k)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A turn as the grammar orders it: thought first.
fn turn_text(thought: &str, step: &str) -> String {
    object_text(&[
        ("thought", Value::from(thought).to_string()),
        ("step", step.to_string()),
    ])
}

#[test]
fn the_turn_grammar_admits_each_step_shape_and_nothing_else() {
    let schema = turn_schema();
    let gbnf = grammar_of(&schema);
    let code = turn_text(
        "Search first.",
        &json!({"code": "print(search(\"needle\"))\nx = 1"}).to_string(),
    );
    let answer_item = |text: &str, source: &str| {
        object_text(&[
            ("text", Value::from(text).to_string()),
            ("source", source.to_string()),
        ])
    };
    let source = |r: &str, quote: &str| {
        object_text(&[
            ("ref", Value::from(r).to_string()),
            ("quote", Value::from(quote).to_string()),
        ])
    };
    let answer = turn_text(
        "Found it.",
        &format!(
            "{{\"answer\":[{},{}]}}",
            answer_item(
                "The code is 7141.",
                &source("chunk:0a1b2c3d4e5f6a7b-0", "the code is 7141")
            ),
            answer_item("Übrigens: nichts weiter.", "null")
        ),
    );
    let not_found = turn_text(
        "",
        &json!({"not_found": "Die Dokumente nennen keinen Preis."}).to_string(),
    );
    for text in [&code, &answer, &not_found] {
        assert!(gbnf.accepts(text), "rejected {text}");
        let doc: Value = serde_json::from_str(text).unwrap();
        validate(&schema, &doc).unwrap();
    }
    // Bounded whitespace between tokens, as a model might write it.
    let spaced = "{\n  \"thought\": \"ok\",\n  \"step\": {\n    \"code\": \"x\"\n  }\n}";
    assert!(gbnf.accepts(spaced), "{spaced}");
    assert!(
        !gbnf.accepts(&spaced.replace("\n  \"step\"", &format!("\n{}\"step\"", " ".repeat(30))))
    );
    assert!(!gbnf.accepts(&spaced.replace(",\n", ",\n\n")));

    let rejected = [
        "The answer is 7141.".to_string(),
        format!("Here you go: {code}"),
        code.replace("Search first.", &"x".repeat(301)),
        answer.replace("chunk:0a1b2c3d4e5f6a7b-0", "chunk:0a1b2c3d4e5f6a7b-1"),
        answer.replace("chunk:0a1b2c3d4e5f6a7b-0", "doc:4"),
        answer.replace("chunk:0a1b2c3d4e5f6a7b-0", "doc:3 "),
        answer.replace(",\"source\":null", ""),
        turn_text("x", "{\"answer\":[]}"),
        object_text(&[("thought", "\"x\"".into())]),
        object_text(&[("step", "{\"code\":\"x\"}".into())]),
        object_text(&[
            ("step", "{\"code\":\"x\"}".into()),
            ("thought", "\"x\"".into()),
        ]),
        turn_text("x", "{\"code\":\"x\",\"answer\":[]}"),
        turn_text("x", "{\"code\":\"x\"}").replace('}', ",\"extra\":1}"),
        turn_text("line\nbreak", "{\"code\":\"x\"}").replace("\\n", "\n"),
        code.replace("\"code\"", "\"Code\""),
    ];
    for text in &rejected {
        assert!(!gbnf.accepts(text), "accepted {text}");
    }
    // Quotes at their limit pass, one more character does not.
    let at_limit = answer.replace("the code is 7141", &"q".repeat(300));
    assert!(gbnf.accepts(&at_limit));
    assert!(!gbnf.accepts(&answer.replace("the code is 7141", &"q".repeat(301))));
    // Escapes count as one character each.
    assert!(gbnf.accepts(&turn_text(&"\"".repeat(300), "{\"code\":\"\"}")));
}

#[test]
fn turn_grammar_samples_are_valid_turns() {
    // Property order: `thought` before `step` (required order), which is
    // not the sorted order serde_json prints, so instances are checked as
    // compact text above; here every sampled document must validate.
    assert_grammar_fits(&turn_schema(), &[]);
}

#[test]
fn grammars_of_other_schemas_admit_their_instances() {
    let cases: Vec<(Value, Vec<Value>)> = vec![
        (
            json!({"type": "array", "items": {"type": ["integer", "null"]}, "minItems": 1, "maxItems": 3}),
            vec![json!([1]), json!([null, -20, 0]), json!([12345])],
        ),
        (
            json!({"type": "object", "properties": {
                "a": {"type": "boolean"}, "b": {"type": "number"}, "c": {"const": "x\"y"}},
                "additionalProperties": false}),
            vec![
                json!({}),
                json!({"a": true}),
                json!({"b": -1.5e10}),
                json!({"a": false, "b": 0.25, "c": "x\"y"}),
                json!({"c": "x\"y"}),
            ],
        ),
        (
            json!({"enum": [1, "two", null, [3], {"four": 4}]}),
            vec![
                json!(1),
                json!("two"),
                Value::Null,
                json!([3]),
                json!({"four": 4}),
            ],
        ),
        (
            json!({"$defs": {"node": {"type": "object", "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": 8},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                "required": ["id"], "additionalProperties": false}},
                "$ref": "#/$defs/node"}),
            vec![
                json!({"id": "a"}),
                json!({"id": "root", "kids": [{"id": "b"}, {"id": "c", "kids": []}]}),
            ],
        ),
        (
            json!({"type": "object", "properties": {"meta": {}, "any": true, "free": {"type": "object"}},
                "required": ["any", "free", "meta"]}),
            vec![json!({"any": [1, {"x": null}], "free": {"k": "v", "n": [true]}, "meta": "s"})],
        ),
        (
            json!({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "array", "items": {"type": "string"}}]}),
            vec![
                json!("abc"),
                json!(""),
                json!(["a\\b", "\u{1F600}", "tab\there"]),
            ],
        ),
        (
            json!({"type": "string", "minLength": 2}),
            vec![json!("ab"), json!("längerer Text")],
        ),
        (
            json!({"type": "array"}),
            vec![json!([]), json!([1, "a", [null]])],
        ),
        (
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            vec![json!({})],
        ),
    ];
    for (schema, instances) in &cases {
        assert_grammar_fits(schema, instances);
    }
}

#[test]
fn grammars_reject_what_their_schemas_reject() {
    let list = grammar_of(
        &json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
    );
    for bad in ["[]", "[1,2,3,4]", "[1.5]", "[01]", "[\"1\"]", "[1,]", "1"] {
        assert!(!list.accepts(bad), "{bad}");
    }
    let enumerated = grammar_of(&json!({"type": "string", "enum": ["a", "b", 3]}));
    assert!(enumerated.accepts("\"a\""));
    assert!(!enumerated.accepts("3"), "3 is not a string");
    assert!(!enumerated.accepts("\"c\""));
    let optional = grammar_of(
        &json!({"type": "object", "properties": {"x": {"type": "null"}, "y": {"type": "null"}}}),
    );
    assert!(optional.accepts("{\"x\":null,\"y\":null}"));
    assert!(optional.accepts("{ }"));
    assert!(
        !optional.accepts("{\"y\":null,\"x\":null}"),
        "properties in order"
    );
    assert!(!optional.accepts("{\"x\":null,}"));
    assert!(!optional.accepts("{,\"y\":null}"));
    let strings = grammar_of(&json!({"type": "string", "maxLength": 2}));
    assert!(strings.accepts("\"\\u00e9\\n\""));
    assert!(!strings.accepts("\"\\q\""), "not a JSON escape");
    assert!(!strings.accepts("\"\t\""), "a raw tab");
}

#[test]
fn long_bounds_are_split_below_llama_cpp_s_repetition_limit() {
    let schema = json!({"type": "string", "minLength": 2100, "maxLength": 4500});
    let gbnf = grammar_of(&schema);
    for (n, ok) in [
        (2099, false),
        (2100, true),
        (3999, true),
        (4000, true),
        (4500, true),
        (4501, false),
    ] {
        let text = format!("\"{}\"", "a".repeat(n));
        assert_eq!(gbnf.accepts(&text), ok, "{n} characters");
    }
    let gbnf = grammar_of(&json!({"type": "string", "maxLength": 2500}));
    for (n, ok) in [
        (0, true),
        (1999, true),
        (2000, true),
        (2500, true),
        (2501, false),
    ] {
        assert_eq!(
            gbnf.accepts(&format!("\"{}\"", "b".repeat(n))),
            ok,
            "{n} characters"
        );
    }
}

#[test]
fn to_gbnf_says_what_it_cannot_express() {
    let err = to_gbnf(&json!({"type": "object", "anyOf": [{"required": []}]})).unwrap_err();
    assert_eq!(
        err,
        SchemaError::NoGrammar {
            path: "#".into(),
            detail: "\"type\" next to anyOf/oneOf: move it into each alternative".into()
        }
    );
    let err = to_gbnf(&json!({"type": "string", "enum": [1, 2]})).unwrap_err();
    assert!(err.to_string().contains("no value of enum/const"), "{err}");
    let err = to_gbnf(&json!({"properties": {"never": false}, "required": ["never"]})).unwrap_err();
    assert!(
        err.to_string()
            .contains("#/properties/never: this schema admits no value"),
        "{err}"
    );
    let err = to_gbnf(&json!({"type": "string", "format": "date"})).unwrap_err();
    assert!(
        matches!(err, SchemaError::Unsupported { ref keyword, .. } if keyword == "format"),
        "{err}"
    );
}

#[test]
fn a_prefixed_string_starts_with_its_prefix_within_its_length() {
    let schema = json!({"type": "object", "properties": {"code": {
        "type": "string", "minLength": 1, "maxLength": 20}}, "required": ["code"],
        "additionalProperties": false});
    let path = "#/properties/code".to_string();
    let text = to_gbnf_with(&schema, &[], &[(path.clone(), "print(tally(".into())]).unwrap();
    let gbnf = Gbnf::parse(&text);
    for (reply, ok) in [
        (r#"{"code": "print(tally('x'))"}"#, true),
        (r#"{"code": "print(tally("}"#, true),
        // Another start, or past maxLength with the prefix counted.
        (r#"{"code": "for h in search('x')"}"#, false),
        (r#"{"code": "print(search('x'))"}"#, false),
        (r#"{"code": "print(tally('abcdefghi'))"}"#, false),
    ] {
        assert_eq!(gbnf.accepts(reply), ok, "{reply}");
    }
    // With unescaped quotes allowed too, and a prefix that needs escaping.
    let text = to_gbnf_with(
        &schema,
        std::slice::from_ref(&path),
        &[(path.clone(), "a\"b".into())],
    )
    .unwrap();
    let gbnf = Gbnf::parse(&text);
    assert!(gbnf.accepts(r#"{"code": "a\"b d["k"]"}"#), "{text}");
    assert!(!gbnf.accepts(r#"{"code": "ab"}"#), "{text}");
    // A prefix the string cannot hold is an error naming where.
    let err = to_gbnf_with(&schema, &[], &[(path, "x".repeat(21))]).unwrap_err();
    assert!(
        err.to_string().contains("#/properties/code") && err.to_string().contains("maxLength"),
        "{err}"
    );
}
