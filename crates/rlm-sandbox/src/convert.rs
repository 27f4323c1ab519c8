//! Conversions between Python values (`MontyObject`) and JSON.
//!
//! Host calls and variables cross to the parent as JSON: it is what the engine
//! and the `--jsonl` mode speak. Tuples and sets become arrays, non-string dict
//! keys become their `repr`, and values JSON cannot hold become their `repr`.

use monty_types::MontyObject;
use serde_json::{Map, Number, Value};

use crate::protocol::{MAX_VALUE_BYTES, MAX_VALUE_DEPTH};

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

/// Why a value cannot cross to the other process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsendable {
    /// Lists, tuples and dicts nest more than [`MAX_VALUE_DEPTH`] levels.
    TooDeep,
    /// The JSON would be this many bytes, more than [`MAX_VALUE_BYTES`].
    TooLarge(usize),
}

impl Unsendable {
    /// The message for the model (or the caller): `what` names the value.
    pub fn message(self, what: &str) -> String {
        match self {
            Unsendable::TooDeep => format!(
                "{what} is nested too deep: more than {MAX_VALUE_DEPTH} levels of lists, tuples \
                 and dicts (the limit); flatten it, or pass a string"
            ),
            Unsendable::TooLarge(bytes) => format!(
                "{what} is {bytes} bytes as JSON; the limit is {MAX_VALUE_BYTES} bytes: pass a \
                 slice or a summary, or split the work over several calls"
            ),
        }
    }
}

/// Checks that `values` can cross as JSON ([`to_json`]) without building the
/// JSON: nesting within [`MAX_VALUE_DEPTH`], size within [`MAX_VALUE_BYTES`].
/// The size is a lower bound (strings without their escapes), cheap for a
/// string of hundreds of megabytes; the sender checks the exact size of what
/// it serialized.
pub fn check_sendable<'a>(
    values: impl IntoIterator<Item = &'a MontyObject>,
) -> Result<(), Unsendable> {
    let mut total = 0usize;
    for v in values {
        total = total.saturating_add(json_size(v, 0)?);
    }
    if total > MAX_VALUE_BYTES {
        return Err(Unsendable::TooLarge(total));
    }
    Ok(())
}

/// Bytes of `obj` as JSON (a lower bound), nested `depth` containers deep.
fn json_size(obj: &MontyObject, depth: usize) -> Result<usize, Unsendable> {
    let items = |items: &[MontyObject]| -> Result<usize, Unsendable> {
        if depth >= MAX_VALUE_DEPTH {
            return Err(Unsendable::TooDeep);
        }
        let mut n = 2 + items.len().saturating_sub(1);
        for item in items {
            n = n.saturating_add(json_size(item, depth + 1)?);
        }
        Ok(n)
    };
    Ok(match obj {
        MontyObject::None => 4,
        MontyObject::Bool(b) => 5 - usize::from(*b),
        MontyObject::Int(i) => decimal_digits(i.unsigned_abs()) + usize::from(*i < 0),
        // ryu writes at most 24 characters.
        MontyObject::Float(_) => 24,
        MontyObject::BigInt(b) => b.to_string().len() + 2,
        MontyObject::String(s) => json_string_size(s),
        MontyObject::List(v)
        | MontyObject::Tuple(v)
        | MontyObject::Set(v)
        | MontyObject::FrozenSet(v)
        | MontyObject::NamedTuple { values: v, .. } => items(v)?,
        MontyObject::Dict(pairs) => {
            if depth >= MAX_VALUE_DEPTH {
                return Err(Unsendable::TooDeep);
            }
            // Braces, commas, and per pair its key and a colon.
            let mut n = 2 + pairs.len().saturating_sub(1);
            for (k, v) in pairs {
                let key = match k {
                    MontyObject::String(s) => json_string_size(s),
                    other => json_string_size(&other.to_string()),
                };
                n = n
                    .saturating_add(key + 1)
                    .saturating_add(json_size(v, depth + 1)?);
            }
            n
        }
        // Written as its repr, which is at least as long as the bytes.
        MontyObject::Bytes(b) => b.len() + 2,
        other => json_string_size(&other.py_repr()),
    })
}

fn decimal_digits(mut n: u64) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// Bytes of `s` as a JSON string, not counting escapes.
fn json_string_size(s: &str) -> usize {
    s.len() + 2
}

/// Checks a JSON value like [`check_sendable`] (without recursion: a value
/// built in Rust may be arbitrarily deep).
pub fn check_value(value: &Value) -> Result<(), Unsendable> {
    let mut size = 0usize;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        size = size.saturating_add(match v {
            Value::Null | Value::Bool(_) => 4,
            Value::Number(_) => 1,
            Value::String(s) => json_string_size(s),
            Value::Array(items) => {
                if depth >= MAX_VALUE_DEPTH {
                    return Err(Unsendable::TooDeep);
                }
                stack.extend(items.iter().map(|c| (c, depth + 1)));
                items.len() + 1
            }
            Value::Object(map) => {
                if depth >= MAX_VALUE_DEPTH {
                    return Err(Unsendable::TooDeep);
                }
                stack.extend(map.values().map(|c| (c, depth + 1)));
                map.keys().map(|k| json_string_size(k) + 1).sum::<usize>() + 2
            }
        });
    }
    if size > MAX_VALUE_BYTES {
        return Err(Unsendable::TooLarge(size));
    }
    Ok(())
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

    #[test]
    fn sizes_are_counted_as_serde_json_writes_them_but_escapes() {
        let v = MontyObject::List(vec![
            MontyObject::String("abcé".into()),
            MontyObject::dict(vec![(MontyObject::String("k".into()), MontyObject::None)]),
            MontyObject::Bool(true),
            MontyObject::Bool(false),
            MontyObject::Int(-1234),
            MontyObject::Int(0),
        ]);
        let written = serde_json::to_vec(&to_json(&v)).unwrap().len();
        assert_eq!(json_size(&v, 0), Ok(written));
    }

    #[test]
    fn depth_is_limited_both_ways() {
        let mut obj = MontyObject::None;
        let mut value = Value::Null;
        for _ in 0..MAX_VALUE_DEPTH {
            obj = MontyObject::List(vec![obj]);
            value = Value::Array(vec![value]);
        }
        assert!(check_sendable([&obj]).is_ok());
        assert!(check_value(&value).is_ok());
        assert_eq!(
            check_sendable([&MontyObject::List(vec![obj])]),
            Err(Unsendable::TooDeep)
        );
        assert_eq!(
            check_value(&Value::Array(vec![value])),
            Err(Unsendable::TooDeep)
        );
    }
}
