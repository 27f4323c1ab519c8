//! [`check`]: is a value a JSON Schema in the subset this crate validates,
//! sends to providers and turns into grammars.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::error::SchemaError;

/// The JSON types a `type` keyword may name.
pub(super) const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "null", "object", "array",
];

/// Keywords that only describe: accepted and ignored.
pub(super) const ANNOTATIONS: [&str; 7] = [
    "description",
    "title",
    "$schema",
    "$comment",
    "default",
    "examples",
    "deprecated",
];

/// Where `$ref` may point: the schema's own definitions.
const REF_PREFIXES: [&str; 2] = ["#/$defs/", "#/definitions/"];

/// Checks that `schema` is a JSON Schema in the supported subset: `type`
/// (one name or a list, e.g. `["string", "null"]`), `enum`, `const`,
/// `properties`, `required`, `additionalProperties` (false or true),
/// `items` (one schema), `minItems`, `maxItems`, `minLength`, `maxLength`,
/// `anyOf`, `oneOf`, `$ref` to `#/$defs/...` or `#/definitions/...`, and
/// the annotations `description`, `title`, `$schema`, `$comment`,
/// `default`, `examples`, `deprecated` (ignored). Any other keyword is an
/// error naming it and where it is.
pub fn check(schema: &Value) -> Result<(), SchemaError> {
    node(schema, schema, "#")?;
    ref_cycles(schema)
}

/// A JSON Pointer step (`~` and `/` escaped).
pub(super) fn pointer_step(path: &str, step: &str) -> String {
    format!("{path}/{}", step.replace('~', "~0").replace('/', "~1"))
}

/// The schema `reference` (a local `$ref`) points to in `root`.
pub(super) fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    if !REF_PREFIXES.iter().any(|p| reference.starts_with(p)) {
        return None;
    }
    root.pointer(&reference[1..])
        .filter(|v| v.is_object() || v.is_boolean())
}

fn invalid(path: &str, detail: impl Into<String>) -> SchemaError {
    SchemaError::Invalid {
        path: path.to_string(),
        detail: detail.into(),
    }
}

/// Checks one schema and everything under it.
fn node(root: &Value, schema: &Value, path: &str) -> Result<(), SchemaError> {
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        other => {
            return Err(invalid(
                path,
                format!("a schema is an object (or true/false), not {other}"),
            ));
        }
    };
    for (keyword, value) in map {
        let here = pointer_step(path, keyword);
        match keyword.as_str() {
            "type" => check_type(value, &here)?,
            "enum" => {
                if value.as_array().is_none_or(|a| a.is_empty()) {
                    return Err(invalid(&here, "enum must be a non-empty array of values"));
                }
            }
            "const" => {}
            "properties" | "$defs" | "definitions" => {
                let Some(children) = value.as_object() else {
                    return Err(invalid(
                        &here,
                        format!("{keyword} must be an object of schemas"),
                    ));
                };
                for (name, child) in children {
                    node(root, child, &pointer_step(&here, name))?;
                }
            }
            "required" => check_required(map, value, &here)?,
            "additionalProperties" => {
                if !value.is_boolean() {
                    return Err(invalid(
                        &here,
                        "additionalProperties must be false (or true): a schema for extra properties is not supported",
                    ));
                }
            }
            "items" => {
                if value.is_array() {
                    return Err(invalid(
                        &here,
                        "items must be one schema for every item (tuples are not supported)",
                    ));
                }
                node(root, value, &here)?;
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" => {
                if value.as_u64().is_none() {
                    return Err(invalid(
                        &here,
                        format!("{keyword} must be a whole number ≥ 0"),
                    ));
                }
            }
            "anyOf" | "oneOf" => {
                let Some(alternatives) = value.as_array().filter(|a| !a.is_empty()) else {
                    return Err(invalid(
                        &here,
                        format!("{keyword} must be a non-empty array of schemas"),
                    ));
                };
                for (i, alternative) in alternatives.iter().enumerate() {
                    node(root, alternative, &pointer_step(&here, &i.to_string()))?;
                }
            }
            "$ref" => check_ref(root, map, value, &here)?,
            k if ANNOTATIONS.contains(&k) => {}
            _ => {
                return Err(SchemaError::Unsupported {
                    keyword: keyword.clone(),
                    path: path.to_string(),
                });
            }
        }
    }
    check_bounds(map, path)
}

fn check_type(value: &Value, path: &str) -> Result<(), SchemaError> {
    let names: Vec<&Value> = match value {
        Value::Array(names) if !names.is_empty() => names.iter().collect(),
        Value::String(_) => vec![value],
        _ => {
            return Err(invalid(
                path,
                "type must be a type name or a non-empty list of them",
            ));
        }
    };
    let mut seen = HashSet::new();
    for name in names {
        match name.as_str() {
            Some(n) if TYPES.contains(&n) => {
                if !seen.insert(n) {
                    return Err(invalid(path, format!("type lists \"{n}\" twice")));
                }
            }
            _ => {
                return Err(invalid(
                    path,
                    format!("unknown type {name}: use one of {}", TYPES.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

fn check_required(map: &Map<String, Value>, value: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(names) = value.as_array() else {
        return Err(invalid(path, "required must be an array of property names"));
    };
    let properties = map.get("properties").and_then(Value::as_object);
    let mut seen = HashSet::new();
    for name in names {
        let Some(name) = name.as_str() else {
            return Err(invalid(
                path,
                format!("required lists {name}, not a property name"),
            ));
        };
        if !seen.insert(name) {
            return Err(invalid(path, format!("required lists \"{name}\" twice")));
        }
        if !properties.is_some_and(|p| p.contains_key(name)) {
            return Err(invalid(
                path,
                format!("required lists \"{name}\", which properties does not define"),
            ));
        }
    }
    Ok(())
}

fn check_ref(
    root: &Value,
    map: &Map<String, Value>,
    value: &Value,
    path: &str,
) -> Result<(), SchemaError> {
    let Some(reference) = value.as_str() else {
        return Err(invalid(path, "$ref must be a string"));
    };
    if resolve(root, reference).is_none() {
        return Err(invalid(
            path,
            format!(
                "$ref \"{reference}\" does not name a schema under #/$defs/ or #/definitions/ of this schema"
            ),
        ));
    }
    let beside = map.keys().find(|k| {
        *k != "$ref" && *k != "$defs" && *k != "definitions" && !ANNOTATIONS.contains(&k.as_str())
    });
    match beside {
        Some(k) => Err(invalid(
            path,
            format!("\"{k}\" next to $ref is not supported: put it in the referenced schema"),
        )),
        None => Ok(()),
    }
}

/// `minX` must not exceed `maxX`.
fn check_bounds(map: &Map<String, Value>, path: &str) -> Result<(), SchemaError> {
    for (low, high) in [("minItems", "maxItems"), ("minLength", "maxLength")] {
        if let (Some(l), Some(h)) = (
            map.get(low).and_then(Value::as_u64),
            map.get(high).and_then(Value::as_u64),
        ) && l > h
        {
            return Err(invalid(path, format!("{low} {l} is more than {high} {h}")));
        }
    }
    Ok(())
}

/// The `$ref`s reachable from `schema` without entering a property or an
/// item: following them does not move into the instance.
fn unguarded_refs<'a>(schema: &'a Value, out: &mut Vec<&'a str>) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        out.push(reference);
    }
    for keyword in ["anyOf", "oneOf"] {
        for alternative in schema
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            unguarded_refs(alternative, out);
        }
    }
}

/// Refuses `$ref` loops that never reach a property or an item (`a` is
/// `anyOf: [a, ...]`): no instance could be checked against them.
fn ref_cycles(root: &Value) -> Result<(), SchemaError> {
    fn visit<'a>(
        root: &'a Value,
        reference: &'a str,
        trail: &mut Vec<&'a str>,
        done: &mut HashSet<&'a str>,
    ) -> Result<(), SchemaError> {
        if done.contains(reference) {
            return Ok(());
        }
        if trail.contains(&reference) {
            trail.push(reference);
            return Err(invalid(
                reference,
                format!(
                    "$ref loop that never reaches a property or an item: {}",
                    trail.join(" → ")
                ),
            ));
        }
        trail.push(reference);
        let mut next = Vec::new();
        if let Some(target) = resolve(root, reference) {
            unguarded_refs(target, &mut next);
        }
        for n in next {
            visit(root, n, trail, done)?;
        }
        trail.pop();
        done.insert(reference);
        Ok(())
    }
    let mut starts = Vec::new();
    unguarded_refs(root, &mut starts);
    for defs in ["$defs", "definitions"] {
        for def in root
            .get(defs)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            unguarded_refs(def.1, &mut starts);
        }
    }
    let mut done = HashSet::new();
    for start in starts {
        visit(root, start, &mut Vec::new(), &mut done)?;
    }
    Ok(())
}
