//! Finds the names a cell may bind, for `SHOW_VARS()`.
//!
//! monty has no `globals()`, so `SHOW_VARS` probes candidate names. Over-
//! approximating is harmless (undefined names are skipped at probe time), so a
//! line scan is enough: no parser dependency.

/// Identifiers a cell may bind at any indentation: assignment targets, loop
/// variables, `with ... as`, `def`/`class` names and imports.
pub fn assigned_names(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for raw in code.lines() {
        let line = raw.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(rest) = strip_keyword(line, "def").or_else(|| strip_keyword(line, "class")) {
            names.extend(leading_ident(rest));
            continue;
        }
        if let Some(rest) = strip_keyword(line, "for").or_else(|| strip_keyword(line, "async for"))
        {
            if let Some(idx) = rest.find(" in ") {
                names.extend(idents_in_target(&rest[..idx]));
            }
            continue;
        }
        if let Some(rest) = strip_keyword(line, "import") {
            for part in rest.split(',') {
                let part = part.trim();
                let alias = part.rsplit(" as ").next().unwrap_or(part);
                names.extend(leading_ident(alias.split('.').next().unwrap_or(alias)));
            }
            continue;
        }
        if let Some(rest) = strip_keyword(line, "from") {
            if let Some(idx) = rest.find(" import ") {
                for part in rest[idx + 8..]
                    .trim_matches(|c| c == '(' || c == ')' || c == ' ')
                    .split(',')
                {
                    let part = part.trim();
                    names.extend(leading_ident(part.rsplit(" as ").next().unwrap_or(part)));
                }
            }
            continue;
        }
        if line.starts_with("with ") || line.starts_with("async with ") {
            for piece in line.split(" as ").skip(1) {
                names.extend(leading_ident(piece));
            }
            continue;
        }
        // Assignment: everything left of the first top-level `=` that is not
        // part of a comparison, possibly chained (`a = b = 1`).
        let mut depth = 0i32;
        let bytes = line.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b'"' | b'\'' => break,
                b'=' if depth == 0 => {
                    let prev = if i > 0 { bytes[i - 1] } else { b' ' };
                    let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                    if next == b'=' {
                        i += 2;
                        continue;
                    }
                    if matches!(prev, b'!' | b'<' | b'>' | b'=') {
                        i += 1;
                        continue;
                    }
                    let target = &line[start..i];
                    let target =
                        target.trim_end_matches(['+', '-', '*', '/', '%', '&', '|', '^', '@', ':']);
                    // Annotated assignment `x: int = 1`.
                    let target = target.split(':').next().unwrap_or(target);
                    names.extend(idents_in_target(target));
                    start = i + 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
    names.sort();
    names.dedup();
    names
}

fn strip_keyword<'a>(line: &'a str, kw: &str) -> Option<&'a str> {
    line.strip_prefix(kw)
        .filter(|r| r.starts_with(' '))
        .map(str::trim_start)
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

fn leading_ident(s: &str) -> Option<String> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let id = &s[..end];
    is_ident(id).then(|| id.to_string())
}

/// Plain names in a target list (`a, (b, c)`); subscripts and attributes bind no new name.
fn idents_in_target(target: &str) -> Vec<String> {
    target
        .split([',', '(', ')', '[', ']', '*'])
        .map(str::trim)
        .filter(|t| is_ident(t))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_common_bindings() {
        let code = "x = 1\na, b = 2, 3\nfor i, (j, k) in z:\n    total += i\nif x == 1: pass\n\
                    def f(a):\n    pass\nimport re, json as j2\nfrom collections import Counter, defaultdict\n\
                    with open('x') as fh:\n    pass\nd['k'] = 5\ny: int = 3\nc = e = 0\n";
        let names = assigned_names(code);
        for n in [
            "x",
            "a",
            "b",
            "i",
            "j",
            "k",
            "total",
            "f",
            "re",
            "j2",
            "Counter",
            "defaultdict",
            "fh",
            "y",
            "c",
            "e",
        ] {
            assert!(names.contains(&n.to_string()), "missing {n} in {names:?}");
        }
        assert!(!names.contains(&"d".to_string()));
    }
}
