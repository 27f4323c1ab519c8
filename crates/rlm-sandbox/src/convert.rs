//! Conversions between Python values (`MontyObject`) and JSON.
//!
//! Host calls and variables cross to the parent as JSON: it is what the engine
//! and the `--jsonl` mode speak. Tuples and sets become arrays, non-string dict
//! keys become their `repr`, and values JSON cannot hold become their `repr`.

use monty_types::MontyObject;
use serde_json::{Map, Number, Value};

/// Converts a Python value to JSON (lossy for tuples, sets and exotic types).
pub fn to_json(obj: &MontyObject) -> Value {
    match obj {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(*b),
        MontyObject::Int(i) => Value::Number((*i).into()),
        MontyObject::BigInt(b) => Value::String(b.to_string()),
        MontyObject::Float(f) => {
            Number::from_f64(*f).map_or_else(|| Value::String(obj.py_repr()), Value::Number)
        }
        MontyObject::String(s) => Value::String(s.clone()),
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items) => Value::Array(items.iter().map(to_json).collect()),
        MontyObject::NamedTuple { values, .. } => {
            Value::Array(values.iter().map(to_json).collect())
        }
        MontyObject::Dict(pairs) => {
            let mut map = Map::new();
            for (k, v) in pairs {
                let key = match k {
                    MontyObject::String(s) => s.clone(),
                    other => other.to_string(),
                };
                map.insert(key, to_json(v));
            }
            Value::Object(map)
        }
        other => Value::String(other.py_repr()),
    }
}

/// Converts JSON to a Python value: objects become dicts, arrays lists.
pub fn from_json(value: Value) -> MontyObject {
    match value {
        Value::Null => MontyObject::None,
        Value::Bool(b) => MontyObject::Bool(b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                MontyObject::Int(i)
            } else {
                MontyObject::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => MontyObject::String(s),
        Value::Array(items) => MontyObject::List(items.into_iter().map(from_json).collect()),
        Value::Object(map) => MontyObject::dict(
            map.into_iter()
                .map(|(k, v)| (MontyObject::String(k), from_json(v)))
                .collect::<Vec<_>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_shapes() {
        let v = serde_json::json!({"a": [1, 2.5, "x", null, true], "b": {"c": "d"}});
        assert_eq!(to_json(&from_json(v.clone())), v);
    }

    #[test]
    fn tuples_become_arrays_and_odd_keys_reprs() {
        let t = MontyObject::Tuple(vec![MontyObject::Int(1), MontyObject::String("a".into())]);
        assert_eq!(to_json(&t), serde_json::json!([1, "a"]));
        let d = MontyObject::dict(vec![(MontyObject::Int(3), MontyObject::None)]);
        assert_eq!(to_json(&d), serde_json::json!({"3": null}));
    }
}
