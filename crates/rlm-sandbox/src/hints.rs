//! Hints appended to error messages: what to write instead.
//!
//! monty 0.0.23 lacks parts of Python that models reach for. Each known gap gets
//! a one-line suggestion so the model's next cell works instead of retrying the
//! same construct.

/// Module → what to use instead, for modules monty does not have.
const MODULE_HINTS: &[(&str, &str)] = &[
    (
        "os",
        "files, environment and processes are not available; the data is in your variables (e.g. `context`)",
    ),
    (
        "sys",
        "`sys` is not available; print() writes the output, and the data is in your variables",
    ),
    (
        "subprocess",
        "running programs is not available in this sandbox",
    ),
    ("socket", "the network is not available in this sandbox"),
    (
        "shutil",
        "files are not available; the data is in your variables (e.g. `context`)",
    ),
    (
        "textwrap",
        "use slicing: [s[i:i+n] for i in range(0, len(s), n)]",
    ),
    (
        "string",
        "write the characters out, e.g. 'abcdefghijklmnopqrstuvwxyz' or '0123456789'",
    ),
    (
        "statistics",
        "compute it directly: mean = sum(xs) / len(xs); median = sorted(xs)[len(xs) // 2]",
    ),
    (
        "time",
        "timing is not available in this sandbox; remove the timing code",
    ),
    (
        "heapq",
        "use sorted(xs)[:k] or sorted(xs, reverse=True)[:k]",
    ),
    ("bisect", "use a loop or sorted() instead"),
    ("operator", "use a lambda, e.g. key=lambda x: x[1]"),
    (
        "copy",
        "copy explicitly: list(xs), dict(d), [list(r) for r in rows]",
    ),
    ("enum", "use plain constants or a dict"),
    (
        "functools",
        "functools.lru_cache is not available; memoize with a dict",
    ),
    (
        "itertools",
        "itertools is partial here; write nested loops or comprehensions instead",
    ),
    (
        "numpy",
        "numpy is not available; use lists, sum(), min(), max(), sorted()",
    ),
    ("pandas", "pandas is not available; use lists and dicts"),
];

/// Substring of a message → hint.
const MESSAGE_HINTS: &[(&str, &str)] = &[
    (
        "too deeply nested",
        "split the expression into several statements, e.g. build a list and call sum() on it",
    ),
    (
        "'__import__'",
        "`__import__` is not available; use a plain `import` of an available module",
    ),
    (
        "'eval'",
        "`eval` is not available; compute the value directly",
    ),
    (
        "'exec'",
        "`exec` is not available; write the code in the cell directly",
    ),
    (
        "'compile'",
        "`compile` is not available; write the code in the cell directly",
    ),
    (
        "'globals'",
        "`globals()` is not available; call SHOW_VARS() to list your variables",
    ),
    (
        "'locals'",
        "`locals()` is not available; call SHOW_VARS() to list your variables",
    ),
    (
        "'vars'",
        "`vars()` is not available; call SHOW_VARS() to list your variables",
    ),
    (
        "'open'",
        "files are not available; the data is in your variables (e.g. `context`)",
    ),
    (
        "'input'",
        "there is no interactive input; the data is in your variables",
    ),
    (
        "yield",
        "generators are not available; build and return a list instead",
    ),
    (
        "'del'",
        "`del` is not available; rebind the name (x = None) or build a new dict/list without the item",
    ),
    ("match statement", "`match` is not available; use if/elif"),
    (
        "for %: 'str'",
        "% formatting is not available; use an f-string: f\"{x:.2f}\"",
    ),
    (
        "callable replacement",
        "re.sub with a function is not available; loop over re.finditer and build the string",
    ),
    (
        "does not yet support",
        "rewrite it with simpler constructs (loops, lists, dicts)",
    ),
    (
        "unsupported format string",
        "use an f-string instead of % formatting: f\"{x:.2f}\"",
    ),
    (
        "inheritance",
        "class inheritance is not available; use a plain class, dicts or functions",
    ),
    (
        "staticmethod",
        "use a module-level function instead of @staticmethod",
    ),
    ("property", "use a method call instead of @property"),
    (
        "lru_cache",
        "memoize with a dict: cache = {} ... if k in cache: return cache[k]",
    ),
    (
        "time limit exceeded",
        "the cell ran too long; work on a smaller slice, or use str methods / re over the whole text",
    ),
    (
        "memory limit exceeded",
        "the cell used too much memory; work on slices, and avoid copying the whole context",
    ),
];

/// Appends a hint to `message` when the error is a known sandbox gap.
#[allow(clippy::collapsible_if)]
pub fn add_hint(exc_type: &str, message: &str) -> String {
    if exc_type == "ModuleNotFoundError" || exc_type == "ImportError" {
        if let Some(module) = quoted(message) {
            // Kept nested: the fall-through to MESSAGE_HINTS must not depend on `quoted`.
            let root = module.split('.').next().unwrap_or(module);
            if let Some((_, hint)) = MODULE_HINTS.iter().find(|(m, _)| *m == root) {
                return format!("{message} (sandbox: {hint})");
            }
            return format!(
                "{message} (sandbox: available modules are re, json, math, collections, itertools, functools, asyncio, \
                 datetime, typing, dataclasses, base64, unicodedata, csv, io, random; write the logic with built-ins instead)"
            );
        }
    }
    if exc_type.starts_with("re.") || exc_type == "PatternError" {
        // A regular expression's own error: the hints for Python code would mislead.
        if message.contains("too deeply nested") {
            return format!(
                "{message} (sandbox: the pattern nests groups too deeply; write a flatter pattern or match in several steps)"
            );
        }
        return message.to_string();
    }
    if let Some((_, hint)) = MESSAGE_HINTS
        .iter()
        .find(|(needle, _)| message.contains(needle))
    {
        return format!("{message} (sandbox: {hint})");
    }
    message.to_string()
}

/// The first single-quoted word of a message: `No module named 'x'` → `x`.
fn quoted(message: &str) -> Option<&str> {
    let start = message.find('\'')? + 1;
    let len = message[start..].find('\'')?;
    Some(&message[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_hint_is_added() {
        let m = add_hint("ModuleNotFoundError", "No module named 'textwrap'");
        assert!(m.contains("slicing"), "{m}");
        let m = add_hint("ModuleNotFoundError", "No module named 'zzz'");
        assert!(m.contains("available modules"), "{m}");
    }

    #[test]
    fn a_regex_error_gets_a_regex_hint_not_one_for_python_code() {
        let m = add_hint(
            "re.PatternError",
            "Parsing error at position 63: Pattern too deeply nested",
        );
        assert!(m.contains("flatter pattern"), "{m}");
        assert!(!m.contains("split the expression"), "{m}");
        let m = add_hint("SyntaxError", "expression too deeply nested");
        assert!(m.contains("split the expression"), "{m}");
    }

    #[test]
    fn unknown_errors_are_untouched() {
        assert_eq!(add_hint("ValueError", "bad value"), "bad value");
    }
}
