//! Tests of the schema subset: `check` errors, each keyword in `validate`,
//! reply parsing and strict mode; the generated grammars are tested in
//! `tests/gbnf.rs`, run by a small GBNF recognizer written there (a parser
//! of the grammar text and a matcher over it) and a generator that samples
//! documents from a grammar.

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

mod gbnf;
