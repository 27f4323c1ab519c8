//! Model code as the sandbox runs it: awaitable host calls adapted, and
//! notes on code that cannot do what it obviously means.

use std::sync::OnceLock;

/// Host functions that exist in a sync and an awaitable form (`name_async`).
const ASYNC_TWINS: &[&str] = &["llm_query", "rlm_query"];

/// Adapts model code to the sandbox's split between sync and awaitable host
/// functions (one name cannot be both): `await llm_query(...)` and
/// `llm_query(...)` inside an `asyncio.gather(...)` call become
/// `llm_query_async(...)`, the form models trained on `asyncio.gather` fan-out code write.
pub fn adapt_async_calls(code: &str) -> String {
    let mut out = code.to_string();
    for name in ASYNC_TWINS {
        out = out.replace(&format!("await {name}("), &format!("await {name}_async("));
    }
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(start) = rest.find("asyncio.gather(") {
        let open = start + "asyncio.gather".len();
        result.push_str(&rest[..=open]);
        let body = &rest[open + 1..];
        let mut depth = 1usize;
        let mut end = body.len();
        for (i, ch) in body.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let mut inner = body[..end].to_string();
        for name in ASYNC_TWINS {
            inner = replace_calls(&inner, name, &format!("{name}_async"));
        }
        result.push_str(&inner);
        rest = &body[end..];
    }
    result.push_str(rest);
    result
}

/// Replaces calls `name(` by `new(` where `name` is a whole identifier.
fn replace_calls(text: &str, name: &str, new: &str) -> String {
    let pat = format!("{name}(");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&pat) {
        let before = rest[..i].chars().next_back();
        let whole = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        out.push_str(&rest[..i]);
        out.push_str(if whole { new } else { name });
        out.push('(');
        rest = &rest[i + pat.len()..];
    }
    out.push_str(rest);
    out
}

/// Notes on code that cannot do what it obviously means, added to the cell's
/// output so the model can fix it. Today: a literal with capital letters
/// compared against a lower-cased string (`"Marguerite Okafor" in
/// d["text"].lower()`) can never match — the small local model looped on
/// exactly that for twenty turns.
pub fn code_lints(code: &str) -> Vec<String> {
    static PATTERNS: OnceLock<[regex::Regex; 2]> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            // "Lit" in x.lower()  /  'Lit' not in x.lower()
            regex::Regex::new(
                r#"(?:"([^"\n]*)"|'([^'\n]*)')\s+(?:not\s+)?in\s+[^\n:]*?\.lower\(\)"#,
            )
            .expect("valid regex"),
            // x.lower().find("Lit") / .count / .index / .startswith / .endswith / .split
            regex::Regex::new(
                r#"\.lower\(\)\s*\.\s*(?:find|rfind|count|index|startswith|endswith|split)\(\s*(?:"([^"\n]*)"|'([^'\n]*)')"#,
            )
            .expect("valid regex"),
        ]
    });
    let mut notes = Vec::new();
    for re in patterns.iter() {
        for caps in re.captures_iter(code) {
            let lit = caps
                .get(1)
                .or_else(|| caps.get(2))
                .map_or("", |m| m.as_str());
            if lit.chars().any(char::is_uppercase) {
                let note = format!(
                    "Note: {lit:?} has capital letters but is compared with a .lower() string, so it can never match; write {:?}.",
                    lit.to_lowercase()
                );
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
    }
    if let Some(note) = counts_documents(code)
        && !notes.contains(&note)
    {
        notes.push(note);
    }
    notes
}

/// A note when a cell counts the documents that contain a literal (`for d
/// in documents: if "x" in d["text"]: n += 1`): a question about how many
/// lines or records hold it gets the number of documents instead.
fn counts_documents(code: &str) -> Option<String> {
    static PATTERNS: OnceLock<[regex::Regex; 2]> = OnceLock::new();
    let [looped, tested] = PATTERNS.get_or_init(|| {
        [
            regex::Regex::new(r"for\s+(\w+)\s+in\s+documents\b").expect("valid regex"),
            regex::Regex::new(r#"(?:"([^"\n]+)"|'([^'\n]+)')\s+in\s+(\w+)\[\s*["']text["']\s*\]"#)
                .expect("valid regex"),
        ]
    });
    let counts = ["+= 1", "+ 1\n", "+ 1 ", "sum(1 for", "len(["]
        .iter()
        .any(|c| code.contains(c));
    if !counts {
        return None;
    }
    let loop_vars: Vec<&str> = looped
        .captures_iter(code)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    let lit = tested.captures_iter(code).find_map(|c| {
        let var = c.get(3)?.as_str();
        loop_vars
            .contains(&var)
            .then(|| c.get(1).or_else(|| c.get(2)).map(|m| m.as_str()))?
    })?;
    Some(format!(
        "Note: this cell counts the documents whose text holds {lit:?}, not the lines or records that do; grep_count({lit:?}) counts every line that holds it, and grep({lit:?}) returns them."
    ))
}
