//! OpenAI's strict mode, and property order on the wire.

use serde_json::{Map, Value};

/// Keywords OpenAI's strict mode rejects, dropped from [`strict_copy`]: the
/// sizes are checked after the fact ([`super::parse_reply`]), the
/// annotations carry no constraint.
const STRICT_DROPPED: [&str; 9] = [
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
    "examples",
    "$schema",
    "$comment",
    "deprecated",
];

/// True when `schema` meets what strict structured outputs (OpenAI's
/// `"strict": true`) demand of a schema's shape: an object at the root, and
/// every object lists all its properties in `required` and sets
/// `additionalProperties: false`.
pub fn strict_compatible(schema: &Value) -> bool {
    is_object_schema(schema) && shapes_are_strict(schema)
}

/// A copy of `schema` that OpenAI's own API accepts in strict mode, when
/// one admits only instances of `schema` (and perhaps some that break its
/// sizes): `additionalProperties: false` is added where it was left out,
/// `oneOf` becomes `anyOf`, `const` an `enum` of one, and the keywords
/// strict mode rejects (`minLength`, `maxLength`, `minItems`, `maxItems`,
/// `default`, ...) are dropped. `None` when the root is not an object, an
/// object has optional properties or none declared, an array has no
/// `items`, or a schema admits anything (`{}`, `true`).
pub fn strict_copy(schema: &Value) -> Option<Value> {
    if !is_object_schema(schema) {
        return None;
    }
    tighten(schema)
}

/// A root whose one type is `object` (strict mode wants no `anyOf` there).
fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// Every object below `schema` is closed and requires all its properties.
fn shapes_are_strict(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return true;
    };
    if map.contains_key("properties") || types(map).contains(&"object") {
        let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
        if !closed || !all_required(map) {
            return false;
        }
    }
    children(map).all(shapes_are_strict)
}

/// The names `type` gives.
fn types(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// True when `required` lists every declared property.
fn all_required(map: &Map<String, Value>) -> bool {
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    map.get("properties")
        .and_then(Value::as_object)
        .is_none_or(|p| p.keys().all(|k| required.contains(&k.as_str())))
}

/// The schemas directly under `map`.
fn children(map: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    let named = ["properties", "$defs", "definitions"]
        .into_iter()
        .filter_map(|k| map.get(k).and_then(Value::as_object))
        .flat_map(|m| m.values());
    let listed = ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|k| map.get(k).and_then(Value::as_array))
        .flatten();
    named.chain(listed).chain(map.get("items"))
}

/// The strict copy of one schema (see [`strict_copy`]).
fn tighten(schema: &Value) -> Option<Value> {
    let map = schema.as_object()?;
    let ty = types(map);
    let is_object = map.contains_key("properties") || ty.contains(&"object");
    if is_object && (!map.contains_key("properties") || !all_required(map)) {
        return None;
    }
    if ty.contains(&"array") && !map.contains_key("items") {
        return None;
    }
    let constrained = ["type", "enum", "const", "anyOf", "oneOf", "$ref"]
        .iter()
        .any(|k| map.contains_key(*k));
    if !constrained && !is_object {
        return None;
    }
    let mut out = Map::new();
    for (key, value) in map {
        if STRICT_DROPPED.contains(&key.as_str()) {
            continue;
        }
        let value = match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                let mut children = Map::new();
                for (name, child) in value.as_object()? {
                    children.insert(name.clone(), tighten(child)?);
                }
                Value::Object(children)
            }
            "items" => tighten(value)?,
            "anyOf" | "oneOf" => Value::Array(
                value
                    .as_array()?
                    .iter()
                    .map(tighten)
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => value.clone(),
        };
        match key.as_str() {
            "oneOf" => out.insert("anyOf".into(), value),
            "const" => out.insert("enum".into(), Value::Array(vec![value])),
            _ => out.insert(key.clone(), value),
        };
    }
    if is_object {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Some(Value::Object(out))
}

/// `value` as JSON text (like `Value::to_string`), except that in every
/// schema object (one with `properties` and `required`) the properties come
/// in the order `required` lists them, then the optional ones. JSON objects
/// in this build keep no order of their own (they are sorted by key), and
/// providers generate properties in the order the schema lists them: this
/// is how `thought` comes before `step`.
pub fn ordered_json(value: &Value) -> String {
    let mut out = String::new();
    write_ordered(value, &mut out);
    out
}

fn write_ordered(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ordered(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, child)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                match (key.as_str(), child.as_object()) {
                    ("properties", Some(properties)) if map.contains_key("required") => {
                        write_properties(properties, property_order(map), out);
                    }
                    _ => write_ordered(child, out),
                }
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_properties(properties: &Map<String, Value>, order: Vec<&str>, out: &mut String) {
    out.push('{');
    for (i, name) in order.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(name).to_string());
        out.push(':');
        write_ordered(&properties[name], out);
    }
    out.push('}');
}

/// The order properties are generated in: as `required` lists them, then
/// the optional ones by name. JSON objects in this build keep no order of
/// their own; `required` is a list and does.
pub(super) fn property_order(map: &Map<String, Value>) -> Vec<&str> {
    let Some(properties) = map.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required = map
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let mut order: Vec<&str> = Vec::new();
    for name in required.chain(properties.keys().map(String::as_str)) {
        if properties.contains_key(name) && !order.contains(&name) {
            order.push(name);
        }
    }
    order
}
