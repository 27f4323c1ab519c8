//! Reading a host call's arguments, and the Python errors a bad one gets:
//! shared by the host functions of every kind.

use rlm_sandbox::{HostCall, HostError};
use serde_json::Value;

/// Argument `index`, or the keyword `name` (a `None` is no argument).
pub(crate) fn arg<'a>(call: &'a HostCall, index: usize, name: &str) -> Option<&'a Value> {
    call.args
        .get(index)
        .or_else(|| call.kwargs.get(name))
        .filter(|v| !v.is_null())
}

/// A `ValueError` with `message`.
pub(crate) fn value_error(message: String) -> HostError {
    HostError::Raise {
        exc_type: "ValueError".into(),
        message,
    }
}

/// A `TypeError` with `message`.
pub(crate) fn type_error(message: String) -> HostError {
    HostError::Raise {
        exc_type: "TypeError".into(),
        message,
    }
}

/// Refuses `text` past `limit` characters, saying what to do instead.
pub(crate) fn within(what: &str, text: &str, limit: usize, instead: &str) -> Result<(), HostError> {
    let n = text.chars().count();
    if n > limit {
        return Err(value_error(format!(
            "{what} has {n} characters; the limit is {limit}: {instead}"
        )));
    }
    Ok(())
}
