//! The structured turn protocol: each reply is one JSON document, a short
//! thought and then one step: code for the REPL, an answer whose statements
//! name the passages they come from, or "not found". The provider constrains
//! the reply to the turn's schema where it can (a llama.cpp grammar,
//! `response_format`, a forced tool), and the schema only admits sources
//! this run has shown, so reading a reply needs no rule about what prose
//! means, in any language.

use rlm_llm::ReplySchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Longest thought a turn may carry: it is a note to itself, not the work.
const THOUGHT_CHARS: usize = 300;
/// Longest statement of an answer.
const STATEMENT_CHARS: usize = 600;
/// Longest quote of a source.
const QUOTE_CHARS: usize = 300;
/// Longest "not found" explanation.
const NOT_FOUND_CHARS: usize = 1_000;
/// Longest cell.
const CODE_CHARS: usize = 6_000;
/// Sources a schema admits at most: the ones seen last (a grammar over
/// thousands of ids is slow to build and to sample with).
pub(crate) const MAX_REFS: usize = 300;

/// What a structured reply asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn {
    /// Run this code.
    Code(String),
    /// The final answer, statement by statement.
    Answer(Vec<Statement>),
    /// The documents do not hold the answer: what was found, what is missing.
    NotFound(String),
}

/// One statement of an answer and the passage it comes from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Statement {
    /// The statement.
    pub(crate) text: String,
    /// Where it is stated; `None` for a statement no passage states.
    #[serde(default)]
    pub(crate) source: Option<Source>,
}

/// A source: a chunk or document the run showed, and its words.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Source {
    /// `chunk:ID` or `doc:N`.
    #[serde(rename = "ref")]
    pub(crate) reference: String,
    /// The passage's exact words.
    #[serde(default)]
    pub(crate) quote: String,
}

/// Which steps a turn may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Steps {
    /// The root's first turn: what the answer needs ([`Needs`]), then
    /// code, an answer or not found.
    First,
    /// Code, an answer or not found: a turn of the loop.
    Any,
    /// An answer or not found: the last turn, the extraction call.
    AnswerOnly,
}

/// What the root declares, before its first step, that the answer needs:
/// the question's shape, told by the model in a fixed vocabulary (no rule
/// about the question's words, so it holds in any language).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// A fact stated somewhere: search and read.
    OnePassage,
    /// A count, total, extreme or ranking over everything: scan it all.
    EveryLine,
}

impl Needs {
    /// The first turn's key.
    const KEY: &str = "needs";
    const ONE_PASSAGE: &str = "one passage";
    const EVERY_LINE: &str = "every line";

    /// What a first turn declared (`None`: nothing usable).
    pub(crate) fn of_reply(reply: &str) -> Option<Needs> {
        let doc = crate::parse::parse_json_object(reply)?;
        match doc.get(Self::KEY)?.as_str()? {
            Self::ONE_PASSAGE => Some(Needs::OnePassage),
            Self::EVERY_LINE => Some(Needs::EveryLine),
            _ => None,
        }
    }
}

/// The schema of a turn whose sources may name only `refs` (`chunk:ID`,
/// `doc:N`; the last [`MAX_REFS`] are kept).
pub(crate) fn turn_schema(refs: &[String], steps: Steps) -> ReplySchema {
    let refs = &refs[refs.len().saturating_sub(MAX_REFS)..];
    let source = if refs.is_empty() {
        json!({"type": "null"})
    } else {
        json!({"anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "properties": {
                    "ref": {"type": "string", "enum": refs},
                    "quote": {"type": "string", "maxLength": QUOTE_CHARS},
                },
                "required": ["ref", "quote"],
                "additionalProperties": false,
            },
        ]})
    };
    let answer = json!({
        "type": "object",
        "properties": {"answer": {
            "type": "array",
            "minItems": 1,
            "maxItems": 12,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": STATEMENT_CHARS},
                    "source": source,
                },
                "required": ["text", "source"],
                "additionalProperties": false,
            },
        }},
        "required": ["answer"],
        "additionalProperties": false,
    });
    let not_found = json!({
        "type": "object",
        "properties": {"not_found": {"type": "string", "minLength": 1, "maxLength": NOT_FOUND_CHARS}},
        "required": ["not_found"],
        "additionalProperties": false,
    });
    let mut step = vec![answer, not_found];
    let name = match steps {
        Steps::First | Steps::Any => {
            step.insert(
                0,
                json!({
                    "type": "object",
                    "properties": {"code": {"type": "string", "minLength": 1, "maxLength": CODE_CHARS}},
                    "required": ["code"],
                    "additionalProperties": false,
                }),
            );
            "turn"
        }
        Steps::AnswerOnly => "answer",
    };
    let mut turn = json!({
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": THOUGHT_CHARS},
            "step": {"anyOf": step},
        },
        "required": ["thought", "step"],
        "additionalProperties": false,
    });
    if steps == Steps::First {
        // Declared after the thought: a small model declaring before it
        // has said what the question asks picked "every line" for lookups.
        turn["properties"][Needs::KEY] =
            json!({"type": "string", "enum": [Needs::ONE_PASSAGE, Needs::EVERY_LINE]});
        turn["required"] = json!(["thought", Needs::KEY, "step"]);
    }
    let schema = ReplySchema::new(name, turn.clone());
    match steps {
        // The embedded model's grammar lets the code hold unescaped
        // quotes ([`raw_code`] reads them back).
        Steps::First => schema.with_raw_quotes([CODE_PATH]),
        // After the first turn the embedded model's thought starts with
        // what the output showed: left free, it restated the question turn
        // after turn and searched again with the answer in view.
        Steps::Any => schema
            .with_grammar(turn, [(THOUGHT_PATH.to_string(), AFTER_OUTPUT.to_string())])
            .with_raw_quotes([CODE_PATH]),
        Steps::AnswerOnly => schema,
    }
}

/// Where a code step's code is in the turn schema.
const CODE_PATH: &str = "#/properties/step/anyOf/0/properties/code";

/// Where the thought is in the turn schema.
const THOUGHT_PATH: &str = "#/properties/thought";

/// How the embedded model's thought starts on a turn after the first.
const AFTER_OUTPUT: &str = "The output above shows";

/// The code of a code turn whose JSON is broken only by unescaped double
/// quotes in its code (the embedded model's grammar allows them, since a
/// small model writing `d["key"]` inside a JSON string ends the string
/// there): the text from `"code": "` to the quote before the reply's two
/// closing braces, JSON escapes read, raw quotes kept.
fn raw_code(reply: &str) -> Option<String> {
    let step = reply.find("\"step\"")?;
    let key = reply[step..].find("\"code\"")? + step + "\"code\"".len();
    let body = reply[key..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let body = body
        .trim_end()
        .strip_suffix('}')?
        .trim_end()
        .strip_suffix('}')?
        .trim_end()
        .strip_suffix('"')?;
    let code = unescape_json(body);
    (!code.trim().is_empty()).then_some(code)
}

/// The text of a JSON string's body: escapes read, anything else (a raw
/// quote) kept as it is.
fn unescape_json(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let ch = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                out.push(ch.unwrap_or('\u{fffd}'));
            }
            Some(c @ ('"' | '\\' | '/')) => out.push(c),
            // `\b`, `\f` and escapes JSON lacks (`\d`, `\s`) are the
            // regular expression's: kept as written.
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The turn a reply holds, when it is a structured turn: the JSON document
/// (the whole reply, a fenced block, or the first object in it) with a
/// `step` of one known shape. `None` for anything else (a provider that
/// ignored the schema, prose): the text protocol reads it then.
pub(crate) fn parse_turn(reply: &str) -> Option<Turn> {
    // A text-protocol reply may hold a dict in a code block: that is code.
    let before = &reply[..reply.find('{')?];
    if before.contains("```") && !before.trim_end().ends_with("```json") {
        return None;
    }
    let Some(doc) = crate::parse::parse_json_object(reply) else {
        return raw_code(reply)
            .map(Turn::Code)
            .or_else(|| cut_answer(reply).map(Turn::Answer));
    };
    // A reply that is the step itself (the thought left out) is read too.
    let step = match doc.get("step") {
        Some(step) => step,
        None => &doc,
    };
    let Value::Object(fields) = step else {
        return None;
    };
    if let Some(code) = fields.get("code").and_then(Value::as_str) {
        // A backspace or form feed in code is a regex's `\b` or `\f`
        // written with one backslash inside the JSON string.
        let code = code.replace('\u{8}', "\\b").replace('\u{c}', "\\f");
        return (!code.trim().is_empty()).then_some(Turn::Code(code));
    }
    if let Some(items) = fields.get("answer") {
        let statements: Vec<Statement> = serde_json::from_value(items.clone()).ok()?;
        let statements: Vec<Statement> = statements
            .into_iter()
            .filter(|s| !s.text.trim().is_empty())
            .collect();
        return (!statements.is_empty()).then_some(Turn::Answer(statements));
    }
    if let Some(why) = fields.get("not_found").and_then(Value::as_str) {
        return Some(Turn::NotFound(why.trim().to_string()));
    }
    None
}

/// The whole statements of an answer turn whose reply was cut off (the
/// model ran out of tokens mid-statement): the ones before the cut, each
/// complete JSON. `None` when the reply is not an answer turn or has no
/// whole statement.
fn cut_answer(reply: &str) -> Option<Vec<Statement>> {
    let start = reply.find('{')?;
    let after_key = reply[start..].find("\"answer\"")? + start + "\"answer\"".len();
    let rest = reply[after_key..].trim_start().strip_prefix(':')?;
    let mut rest = rest.trim_start().strip_prefix('[')?;
    let mut statements = Vec::new();
    loop {
        let mut items = serde_json::Deserializer::from_str(rest).into_iter::<Statement>();
        match items.next() {
            Some(Ok(s)) => {
                if !s.text.trim().is_empty() {
                    statements.push(s);
                }
                rest = rest[items.byte_offset()..].trim_start();
                match rest.strip_prefix(',') {
                    Some(next) => rest = next,
                    None => break,
                }
            }
            _ => break,
        }
    }
    (!statements.is_empty()).then_some(statements)
}

/// An answer's text: its statements in order, each followed by its source
/// as a citation marker (`[[chunk:ID "quote"]]`), which the citation check
/// and the claims report read like any other.
pub(crate) fn answer_text(statements: &[Statement]) -> String {
    let mut out = String::new();
    for s in statements {
        let text = s.text.trim();
        if !out.is_empty() {
            // A list item or a table row stays on its own line.
            out.push(if text.starts_with(['-', '*', '|']) || out.ends_with('|') {
                '\n'
            } else {
                ' '
            });
        }
        out.push_str(text);
        // A source without a quote is nothing to check: left out.
        if let Some(src) = s.source.as_ref().filter(|s| !s.quote.trim().is_empty()) {
            // One line: the marker is the claim's, and whitespace is
            // matched loosely by the quote check anyway.
            let quote = src.quote.split_whitespace().collect::<Vec<_>>().join(" ");
            let escaped = quote.replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!(" [[{} \"{escaped}\"]]", src.reference.trim()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_admits_only_the_refs_shown_and_the_steps_asked_for() {
        let refs: Vec<String> = vec!["chunk:ab-0".into(), "doc:3".into()];
        let s = turn_schema(&refs, Steps::Any);
        assert_eq!(s.name, "turn");
        let steps = s.schema["properties"]["step"]["anyOf"].as_array().unwrap();
        assert_eq!(steps.len(), 3);
        let source = &steps[1]["properties"]["answer"]["items"]["properties"]["source"];
        assert_eq!(
            source["anyOf"][1]["properties"]["ref"]["enum"],
            json!(["chunk:ab-0", "doc:3"])
        );
        let last = turn_schema(&refs, Steps::AnswerOnly);
        let steps = last.schema["properties"]["step"]["anyOf"]
            .as_array()
            .unwrap();
        assert_eq!(steps.len(), 2, "no code on the last turn");
        assert!(steps[0]["properties"].get("answer").is_some());
        // Nothing shown yet: statements carry no source.
        let none = turn_schema(&[], Steps::Any);
        let source = &none.schema["properties"]["step"]["anyOf"][1]["properties"]["answer"]["items"]
            ["properties"]["source"];
        assert_eq!(source, &json!({"type": "null"}));
        // Many refs: the last ones seen are kept.
        let many: Vec<String> = (0..MAX_REFS + 5).map(|i| format!("doc:{i}")).collect();
        let s = turn_schema(&many, Steps::Any);
        let listed = s.schema["properties"]["step"]["anyOf"][1]["properties"]["answer"]["items"]
            ["properties"]["source"]["anyOf"][1]["properties"]["ref"]["enum"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(listed.len(), MAX_REFS);
        assert_eq!(listed[0], json!("doc:5"));
    }

    #[test]
    fn turns_parse_by_their_step() {
        assert_eq!(
            parse_turn(r#"{"thought": "look", "step": {"code": "print(1)\nprint(2)"}}"#),
            Some(Turn::Code("print(1)\nprint(2)".into()))
        );
        let answer = parse_turn(
            r#"```json
{"thought": "found", "step": {"answer": [
  {"text": "Der Code lautet 8316.", "source": {"ref": "chunk:ab-0", "quote": "Zugangscode \"8316\""}},
  {"text": "Er gilt seit Mai.", "source": null}]}}
```"#,
        );
        let Some(Turn::Answer(statements)) = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(statements.len(), 2);
        assert_eq!(
            answer_text(&statements),
            r#"Der Code lautet 8316. [[chunk:ab-0 "Zugangscode \"8316\""]] Er gilt seit Mai."#
        );
        assert_eq!(
            parse_turn(r#"{"thought": "", "step": {"not_found": "Nur die Adresse."}}"#),
            Some(Turn::NotFound("Nur die Adresse.".into()))
        );
        // The step alone is read too; prose, code fences and empty steps are not turns.
        assert_eq!(
            parse_turn(r#"{"code": "x = 1"}"#),
            Some(Turn::Code("x = 1".into()))
        );
        assert_eq!(parse_turn("The code is 8316."), None);
        assert_eq!(parse_turn("```repl\nprint(1)\n```"), None);
        assert_eq!(
            parse_turn("```repl\nx = {\"code\": \"y\"}\n```"),
            None,
            "a dict in a code block is code"
        );
        assert_eq!(
            parse_turn(r#"{"thought": "x", "step": {"code": " "}}"#),
            None
        );
        assert_eq!(
            parse_turn(r#"{"thought": "x", "step": {"answer": []}}"#),
            None
        );
        assert_eq!(
            parse_turn(r#"{"thought": "x", "step": {"other": 1}}"#),
            None
        );
    }

    #[test]
    fn an_answer_cut_off_keeps_its_whole_statements() {
        let reply = r#"{"thought": "x", "step": {"answer": [{"text": "Der Code ist 8316.", "source": {"ref": "chunk:ab-0", "quote": "Code 8316"}}, {"text": "Er gilt ab Mai.", "source": null}, {"text": "Und dann", "source": {"ref": "chunk:ab-0", "quote": "die Tür"#;
        let Some(Turn::Answer(statements)) = parse_turn(reply) else {
            panic!("{reply}");
        };
        let texts: Vec<&str> = statements.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["Der Code ist 8316.", "Er gilt ab Mai."]);
        // A cut reply with no whole statement, or a cut code turn: no turn.
        assert_eq!(
            parse_turn(r#"{"thought": "x", "step": {"answer": [{"text": "Der Co"#),
            None
        );
        assert_eq!(
            parse_turn(r#"{"thought": "x", "step": {"code": "print(1"#),
            None
        );
    }

    /// The embedded model's grammar lets code hold unescaped quotes (its
    /// `d["key"]` ended the JSON string and cut the code): they are read
    /// back, with the escapes.
    #[test]
    fn code_with_unescaped_quotes_is_read_whole() {
        let reply = r#"{"thought": "list them", "step": {"code": "for d in documents:\n    print(f'{d["index"]}: {d["name"]}', \"\u00e9\")"}}"#;
        assert_eq!(
            parse_turn(reply),
            Some(Turn::Code(
                "for d in documents:\n    print(f'{d[\"index\"]}: {d[\"name\"]}', \"é\")".into()
            ))
        );
        // A regex's `\b` and `\d` written with one backslash stay a regex's.
        let reply =
            r#"{"thought": "sum", "step": {"code": "m = re.search(r'\b(\d+) EUR', t[\"x\"])"}}"#;
        assert_eq!(
            parse_turn(reply),
            Some(Turn::Code(
                r#"m = re.search(r'\b(\d+) EUR', t["x"])"#.into()
            ))
        );
        // A regex's `\w` and `\s`, which JSON does not escape (the
        // grammar of a code string lets the model write them).
        let reply = r#"{"thought": "group", "step": {"code": "print(tally('cancel', by=r'user (\w+)\s'))"}}"#;
        assert_eq!(
            parse_turn(reply),
            Some(Turn::Code(
                r"print(tally('cancel', by=r'user (\w+)\s'))".into()
            ))
        );
        let valid = r#"{"thought": "sum", "step": {"code": "m = re.search(r'\bEUR\f', t)"}}"#;
        assert_eq!(
            parse_turn(valid),
            Some(Turn::Code(r"m = re.search(r'\bEUR\f', t)".into()))
        );
        let schema = turn_schema(&[], Steps::Any);
        assert_eq!(schema.raw_quotes, [CODE_PATH]);
        let grammar =
            rlm_llm::schema::to_gbnf_with_raw_quotes(&schema.schema, &schema.raw_quotes).unwrap();
        assert!(grammar.contains("raw-char ::="), "{grammar}");
        assert!(grammar.contains("raw-string-1-"), "{grammar}");
        let raw_char = grammar
            .lines()
            .find(|l| l.starts_with("raw-char ::="))
            .unwrap();
        assert!(raw_char.contains(r#""\\" [^"\\/bfnrtu"#), "{raw_char}");
        // A later turn's thought starts with what the output showed, in
        // the grammar only: servers get the plain schema.
        let later = turn_schema(&[], Steps::Any);
        let grammar = later.to_gbnf().unwrap();
        assert!(grammar.contains("The output above shows"), "{grammar}");
        assert!(!later.schema.to_string().contains("The output above shows"));
        assert!(
            !turn_schema(&[], Steps::First)
                .to_gbnf()
                .unwrap()
                .contains("The output above shows")
        );
        assert!(turn_schema(&[], Steps::AnswerOnly).raw_quotes.is_empty());
        // The root's first turn: what the answer needs follows the
        // thought, one of two values; the code still holds raw quotes.
        let first = turn_schema(&[], Steps::First);
        let grammar =
            rlm_llm::schema::to_gbnf_with_raw_quotes(&first.schema, &first.raw_quotes).unwrap();
        let root = grammar.lines().find(|l| l.starts_with("root ::=")).unwrap();
        let (thought, needs) = (root.find("thought").unwrap(), root.find("needs").unwrap());
        assert!(thought < needs, "{root}");
        assert!(grammar.contains(r#"\"every line\""#), "{grammar}");
        assert!(grammar.contains("raw-string-1-"), "{grammar}");
        let reply =
            r#"{"thought": "count", "needs": "every line", "step": {"code": "print(tally('x'))"}}"#;
        assert_eq!(Needs::of_reply(reply), Some(Needs::EveryLine));
        assert_eq!(
            parse_turn(reply),
            Some(Turn::Code("print(tally('x'))".into()))
        );
        assert_eq!(Needs::of_reply(r#"{"needs": "all", "step": {}}"#), None);
        assert_eq!(Needs::of_reply("prose"), None);
    }

    #[test]
    fn list_statements_keep_their_lines() {
        let items = vec![
            Statement {
                text: "Three offices:".into(),
                source: None,
            },
            Statement {
                text: "- Lisbon".into(),
                source: Some(Source {
                    reference: "doc:1".into(),
                    quote: "the Lisbon office".into(),
                }),
            },
            Statement {
                text: "- Porto".into(),
                source: None,
            },
        ];
        assert_eq!(
            answer_text(&items),
            "Three offices:\n- Lisbon [[doc:1 \"the Lisbon office\"]]\n- Porto"
        );
    }
}
