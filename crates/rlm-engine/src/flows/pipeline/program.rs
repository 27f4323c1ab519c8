//! Generated inspection programs (the per-chunk and iterative inspectors): extraction from a model reply,
//! static validation, and running them in the sandbox with tight limits.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use regex::Regex;
use rlm_sandbox::{
    HostCall, HostError, HostHandler, Interpreter, InterpreterSpec, SandboxConfig, SandboxError,
};
use serde_json::Value;

/// Input on which every `evaluate_chunk_relevance` must return False.
pub const GARBAGE_TEXT: &str = "qzxv wplk 88213 jjfo brrt xkcd ztq lorem vbnm";

/// Keys an `inspect_iteration` program may name besides the evidence.
const SCHEMA_WORDS: &[&str] = &[
    "chunk_id",
    "text",
    "selected_chunk_ids",
    "extracted_data",
    "confidence",
    "stop",
];

/// The code of the first fenced block defining `def name(`, or the whole
/// reply when it is bare code defining it.
pub fn extract_program(reply: &str, name: &str) -> Option<String> {
    let def = format!("def {name}(");
    let mut rest = reply;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
        let body = &after[body_start..];
        let end = body.find("```").unwrap_or(body.len());
        let code = &body[..end];
        if code.contains(&def) {
            return Some(code.trim_end().to_string());
        }
        rest = body.get(end + 3..).unwrap_or("");
    }
    let t = reply.trim();
    t.contains(&def).then(|| {
        // Bare code: from the def (imports above it are dropped; none are allowed).
        t[t.find(&def).unwrap_or(0)..].to_string()
    })
}

static STRING_LITERAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?s)[rRbBuUfF]{0,2}("""(?:.*?)"""|'''(?:.*?)'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"#)
        .expect("literal regex")
});
static INVERTED: LazyLock<[Regex; 4]> = LazyLock::new(|| {
    [
        Regex::new(r"return\s+not\b").expect("re"),
        Regex::new(r"(?m)if\s+not\b[^\n]*:\s*(?:\n\s*)?return\s+True").expect("re"),
        Regex::new(r"(?m)not\s+in\b[^\n]*:\s*(?:\n\s*)?return\s+True").expect("re"),
        Regex::new(r"(?m)==\s*False\b[^\n]*:\s*(?:\n\s*)?return\s+True").expect("re"),
    ]
});
static SELECT_ALL: LazyLock<Regex> = LazyLock::new(|| {
    // `[c["chunk_id"] for c in chunks]` with no condition: every chunk selected.
    Regex::new(r#"\[\s*\w+\s*\[\s*["']chunk_id["']\s*\]\s+for\s+\w+\s+in\s+chunks\s*\]"#)
        .expect("re")
});
static IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*(?:import\s+(\w+)|from\s+(\w+)\s+import)").expect("re"));

/// Why a generated program was rejected before it ran (the static checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramRejected {
    /// The function the program must define is missing.
    #[error("no `def {0}(...)` function definition")]
    NoFunction(String),
    /// It imports a module other than `re`.
    #[error("imports `{0}` (only `re` is allowed)")]
    ForbiddenImport(String),
    /// A string literal is neither in the query nor in the text.
    #[error(
        "string literal {0:?} appears in neither the query nor the chunk text (evidence-only rule)"
    )]
    LiteralNotInEvidence(String),
    /// The function has no `return`.
    #[error("the function never returns")]
    NeverReturns,
    /// The last `return` of a chunk program is not `return False`.
    #[error("the default return is `{0}`, it must be `return False`")]
    DefaultReturn(String),
    /// Relevance comes from the absence of something (`not in ...: return True`).
    #[error("inverted logic (`{0}`): relevance must come from evidence present in the text")]
    InvertedLogic(String),
    /// An iteration program's result has no `selected_chunk_ids`.
    #[error("the result has no `selected_chunk_ids`")]
    NoSelectedIds,
    /// An iteration program selects every chunk.
    #[error("it selects every chunk unconditionally (select-all pattern)")]
    SelectsAll,
}

/// Why a program run produced no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The sandbox could not start.
    #[error("the sandbox could not start: {0}")]
    SandboxStart(SandboxError),
    /// There is no sandbox after starting one (should not happen).
    #[error("no sandbox")]
    NoSandbox,
    /// Setting an input or reading the result failed.
    #[error("sandbox: {0}")]
    Sandbox(SandboxError),
    /// The program was stopped (time or memory limit, a dead worker).
    #[error("the program was stopped: {0}")]
    Stopped(SandboxError),
    /// The program raised an exception.
    #[error("the program raised {exc_type}: {message}")]
    Raised {
        /// The exception's type.
        exc_type: String,
        /// Its message.
        message: String,
    },
    /// The program left no result.
    #[error("the program produced no result")]
    NoResult,
    /// `evaluate_chunk_relevance` returned something else than a bool.
    #[error("evaluate_chunk_relevance returned {0} instead of a bool")]
    NotABool(String),
    /// A sanity test failed: True for empty text.
    #[error("sanity test failed: True for empty text")]
    TrueForEmptyText,
    /// A sanity test failed: True for garbage text.
    #[error("sanity test failed: True for garbage text")]
    TrueForGarbageText,
}

/// The string literals of `code` (docstrings excluded), unquoted.
pub fn string_literals(code: &str) -> Vec<String> {
    STRING_LITERAL
        .captures_iter(code)
        .filter_map(|c| {
            let lit = c.get(1)?.as_str();
            if lit.starts_with("\"\"\"") || lit.starts_with("'''") {
                return None;
            }
            Some(
                lit[1..lit.len() - 1]
                    .replace("\\'", "'")
                    .replace("\\\"", "\""),
            )
        })
        .collect()
}

/// Checks shared by both program kinds: the function exists, only `re` is
/// imported, and every string literal is evidence (in the query or the text)
/// or a schema word.
fn validate_common(code: &str, name: &str, evidence: &str) -> Result<(), ProgramRejected> {
    if !code.contains(&format!("def {name}(")) {
        return Err(ProgramRejected::NoFunction(name.to_string()));
    }
    for c in IMPORT.captures_iter(code) {
        let module = c.get(1).or(c.get(2)).map(|m| m.as_str()).unwrap_or("");
        if module != "re" {
            return Err(ProgramRejected::ForbiddenImport(module.to_string()));
        }
    }
    let evidence = evidence.to_lowercase();
    for lit in string_literals(code) {
        let l = lit.trim().to_lowercase();
        if l.is_empty()
            || SCHEMA_WORDS.contains(&l.as_str())
            || l.chars().all(|c| !c.is_alphanumeric())
        {
            continue;
        }
        // Regex literals: check the words inside them.
        let words: Vec<&str> = l
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 3)
            .collect();
        let found = evidence.contains(&l)
            || (!words.is_empty() && words.iter().all(|w| evidence.contains(w)));
        if !found {
            return Err(ProgramRejected::LiteralNotInEvidence(lit));
        }
    }
    Ok(())
}

/// The static checks of a generated `evaluate_chunk_relevance` program.
pub fn validate_chunk_program(
    code: &str,
    query: &str,
    chunk_text: &str,
) -> Result<(), ProgramRejected> {
    validate_common(
        code,
        "evaluate_chunk_relevance",
        &format!("{query}\n{chunk_text}"),
    )?;
    // The default (last) return must be False.
    let last_return = code
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with("return"))
        .ok_or(ProgramRejected::NeverReturns)?;
    if last_return != "return False" {
        return Err(ProgramRejected::DefaultReturn(last_return.to_string()));
    }
    for re in INVERTED.iter() {
        if let Some(m) = re.find(code) {
            return Err(ProgramRejected::InvertedLogic(
                m.as_str().split_whitespace().collect::<Vec<_>>().join(" "),
            ));
        }
    }
    Ok(())
}

/// The static checks of a generated `inspect_iteration` program.
pub fn validate_iteration_program(
    code: &str,
    query: &str,
    chunk_texts: &str,
) -> Result<(), ProgramRejected> {
    validate_common(
        code,
        "inspect_iteration",
        &format!("{query}\n{chunk_texts}"),
    )?;
    if !code.contains("selected_chunk_ids") {
        return Err(ProgramRejected::NoSelectedIds);
    }
    if SELECT_ALL.is_match(code) {
        return Err(ProgramRejected::SelectsAll);
    }
    Ok(())
}

/// A host handler for programs: they may call nothing.
struct NoHost;

impl HostHandler for NoHost {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        Err(HostError::Raise {
            exc_type: "NameError".into(),
            message: format!("name '{}' is not defined", call.name),
        })
    }
}

/// A sandbox interpreter for generated programs, with the limits of its kind
/// (by default 2 s / 256 MB per chunk, 5 s / 512 MB per iteration). A worker
/// that dies (memory, timeout) is replaced on the next run.
pub struct ProgramRunner {
    config: SandboxConfig,
    interp: Option<Interpreter>,
}

impl ProgramRunner {
    /// A runner with `base`'s worker and the given limits.
    pub fn new(base: &SandboxConfig, time_ms: u64, memory_mb: u64) -> Self {
        let mut config = base.clone();
        config.cell_time_limit = Duration::from_millis(time_ms);
        config.memory_limit_bytes = memory_mb * 1024 * 1024;
        config.kill_grace = Duration::from_millis(time_ms.clamp(500, 3000));
        ProgramRunner {
            config,
            interp: None,
        }
    }

    async fn interpreter(&mut self) -> Result<&mut Interpreter, RunError> {
        if self.interp.as_mut().is_none_or(|s| !s.is_alive()) {
            let s = Interpreter::start(&self.config, &InterpreterSpec::new())
                .await
                .map_err(RunError::SandboxStart)?;
            self.interp = Some(s);
        }
        self.interp.as_mut().ok_or(RunError::NoSandbox)
    }

    /// Defines `code`, sets `inputs`, runs `expr` and returns its value
    /// (JSON). A raised exception, a timeout or a killed worker is an error.
    pub async fn run(
        &mut self,
        code: &str,
        inputs: &[(&str, Value)],
        expr: &str,
    ) -> Result<Value, RunError> {
        let handler = Arc::new(NoHost);
        let interp = self.interpreter().await?;
        for (name, v) in inputs {
            interp
                .set_var(name, v.clone())
                .await
                .map_err(RunError::Sandbox)?;
        }
        let cell = format!("{code}\n\nrlm_program_result = {expr}\n");
        let result = interp.run_cell(&cell, &handler).await;
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                self.interp = None;
                return Err(RunError::Stopped(e));
            }
        };
        if let Some(err) = r.error {
            return Err(RunError::Raised {
                exc_type: err.exc_type,
                message: err.message,
            });
        }
        let interp = self.interpreter().await?;
        interp
            .get_var("rlm_program_result")
            .await
            .map_err(RunError::Sandbox)?
            .ok_or(RunError::NoResult)
    }

    /// Closes the worker.
    pub async fn close(self) {
        if let Some(s) = self.interp {
            s.close().await;
        }
    }
}

/// The sanity tests (garbage text must not match) and the real evaluation of one chunk program in
/// one cell: `[f(""), f(garbage), f(chunk_text)]`. Sanity failures are errors.
pub async fn evaluate_chunk(
    runner: &mut ProgramRunner,
    code: &str,
    chunk_text: &str,
) -> Result<bool, RunError> {
    let v = runner
        .run(
            code,
            &[
                ("rlm_chunk_text", Value::String(chunk_text.to_string())),
                ("rlm_garbage", Value::String(GARBAGE_TEXT.to_string())),
            ],
            "[evaluate_chunk_relevance(\"\"), evaluate_chunk_relevance(rlm_garbage), evaluate_chunk_relevance(rlm_chunk_text)]",
        )
        .await?;
    let items = v.as_array().cloned().unwrap_or_default();
    let as_bool = |i: usize| match items.get(i) {
        Some(Value::Bool(b)) => Ok(*b),
        other => Err(RunError::NotABool(
            other
                .map(|v| v.to_string())
                .unwrap_or_else(|| "nothing".into()),
        )),
    };
    if as_bool(0)? {
        return Err(RunError::TrueForEmptyText);
    }
    if as_bool(1)? {
        return Err(RunError::TrueForGarbageText);
    }
    as_bool(2)
}

/// Distinct lowercase words of at least 3 letters that are not stop words
/// (English question words, or stop words of the text's own language).
pub fn query_terms(text: &str) -> Vec<String> {
    let language = rlm_corpus::language::guess(text);
    static STOP: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
        "the and for are was were with what which who whom whose when where why how does did
         do can could would should will shall may might must has have had not but all any
         this that these those there their them they you your our its it's from into onto
         about over under than then also just only some such very list give tell find show
         please me my mine of in on at to by as is be been being an or if so out up"
            .split_whitespace()
            .collect()
    });
    let mut out: Vec<String> = Vec::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
    {
        let w = w.trim_end_matches("'s").to_string();
        if w.chars().count() >= 3
            && !STOP.contains(w.as_str())
            && !rlm_corpus::language::is_stop_word(&w, language)
            && !out.contains(&w)
        {
            out.push(w);
        }
    }
    out
}

/// The query-term fallback `inspect_iteration`: keeps the chunks
/// that share the most query terms (at least one), at most half the set.
pub fn fallback_iteration_program(terms: &[String]) -> String {
    let list = terms
        .iter()
        .map(|t| format!("{:?}", t))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"def inspect_iteration(chunks):
    terms = [{list}]
    scores = []
    best = 0
    for c in chunks:
        t = c["text"].lower()
        s = 0
        for term in terms:
            if term in t:
                s = s + 1
        scores.append(s)
        if s > best:
            best = s
    limit = max(2, len(chunks) // 2)
    selected = []
    level = best
    while level > 0 and len(selected) < limit:
        for i in range(len(chunks)):
            if scores[i] == level and len(selected) < limit:
                selected.append(chunks[i]["chunk_id"])
        level = level - 1
    return {{"selected_chunk_ids": selected, "extracted_data": {{}}, "confidence": 0.5, "stop": False}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "def evaluate_chunk_relevance(chunk_text: str) -> bool:\n    t = chunk_text.lower()\n    if 'python' in t:\n        return True\n    return False";

    #[test]
    fn extracts_fenced_and_bare() {
        let r = format!("Here:\n```python\n{GOOD}\n```\nDone");
        assert_eq!(
            extract_program(&r, "evaluate_chunk_relevance").unwrap(),
            GOOD
        );
        assert_eq!(
            extract_program(GOOD, "evaluate_chunk_relevance").unwrap(),
            GOOD
        );
        assert!(extract_program("no code", "evaluate_chunk_relevance").is_none());
    }

    #[test]
    fn chunk_program_rules() {
        let q = "which skills does Alexis have";
        let chunk = "Alexis knows Python and Rust.";
        assert!(validate_chunk_program(GOOD, q, chunk).is_ok());
        let default_true = GOOD.replace("return False", "return True");
        let e = validate_chunk_program(&default_true, q, chunk).unwrap_err();
        assert_eq!(e, ProgramRejected::DefaultReturn("return True".into()));
        assert!(e.to_string().contains("default return"), "{e}");
        let invented = GOOD.replace("'python'", "'kubernetes'");
        let e = validate_chunk_program(&invented, q, chunk).unwrap_err();
        assert_eq!(
            e,
            ProgramRejected::LiteralNotInEvidence("kubernetes".into())
        );
        assert!(e.to_string().contains("evidence"), "{e}");
        let inverted = "def evaluate_chunk_relevance(chunk_text):\n    if 'python' not in chunk_text.lower():\n        return True\n    return False";
        let e = validate_chunk_program(inverted, q, chunk).unwrap_err();
        assert!(matches!(e, ProgramRejected::InvertedLogic(_)), "{e}");
        assert!(e.to_string().contains("inverted"), "{e}");
        let e = validate_chunk_program("x = 1", q, chunk).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no `def evaluate_chunk_relevance(...)` function definition"
        );
        let imports = format!("import os\n{GOOD}");
        assert_eq!(
            validate_chunk_program(&imports, q, chunk).unwrap_err(),
            ProgramRejected::ForbiddenImport("os".into())
        );
        let docstring = GOOD.replace(
            "-> bool:\n",
            "-> bool:\n    \"\"\"Whether it mentions kubernetes.\"\"\"\n",
        );
        assert!(validate_chunk_program(&docstring, q, chunk).is_ok());
    }

    #[test]
    fn iteration_program_rules() {
        let all = "def inspect_iteration(chunks):\n    return {\"selected_chunk_ids\": [c[\"chunk_id\"] for c in chunks], \"confidence\": 1.0, \"stop\": True}";
        let e = validate_iteration_program(all, "q", "").unwrap_err();
        assert_eq!(e, ProgramRejected::SelectsAll);
        assert!(e.to_string().contains("select-all"), "{e}");
        let fb = fallback_iteration_program(&query_terms("Alexis skills Python"));
        assert!(
            validate_iteration_program(&fb, "Alexis skills Python", "").is_ok(),
            "{fb}"
        );
    }

    #[test]
    fn terms_drop_stop_words_of_the_question_language() {
        assert_eq!(
            query_terms("Wie lang ist die Kündigungsfrist für den Mietvertrag?"),
            vec!["lang", "kündigungsfrist", "mietvertrag"]
        );
    }

    #[test]
    fn terms_drop_stop_words() {
        assert_eq!(
            query_terms("Tell me the list of Alexis's skills"),
            ["alexis", "skills"]
        );
    }
}
