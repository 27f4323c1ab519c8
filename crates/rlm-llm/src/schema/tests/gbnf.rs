//! The GBNF grammars [`to_gbnf`] writes: parsed, matched against
//! documents and sampled here, then checked against their schemas.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::*;

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
