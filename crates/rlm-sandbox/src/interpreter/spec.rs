//! What an interpreter starts with and what a cell gives back: inputs,
//! host functions, host calls and their errors, cell results, and the
//! sandbox's errors.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::convert::check_value;

/// A document as the model sees it in `documents` (a Python dict with these keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentRecord {
    /// Position in the corpus (0-based), as in `context`'s `[DOCUMENT i: ...]` headers.
    pub index: u64,
    /// Display name (corpus-relative path).
    pub name: String,
    /// Stable document id.
    pub id: String,
    /// Length of `text` in characters.
    pub chars: u64,
    /// Number of chunks of the document in the store.
    pub chunk_count: u64,
    /// The whole text.
    pub text: String,
}

/// Texts that an interpreter's inputs share, read one at a time while the
/// interpreter starts, so the parent never holds a whole corpus: each text is sent to the
/// worker once, however many inputs use it (e.g. `context` and `documents`).
pub trait TextSource: Send + Sync + std::fmt::Debug {
    /// Number of texts.
    fn count(&self) -> usize;
    /// Text `index` (0-based), read when it is sent. The error says what could
    /// not be read.
    fn text(&self, index: usize) -> Result<String, TextSourceError>;
}

/// Why a [`TextSource`] could not read a text: the source's own error (a
/// `&str` or `String` converts with `.into()`).
pub type TextSourceError = Box<dyn std::error::Error + Send + Sync>;

/// One piece of an [`InputValue::Assembled`] string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Literal text.
    Literal(String),
    /// Text `i` of the spec's [`TextSource`].
    Text(usize),
}

/// A document record whose text is text `text` of the spec's [`TextSource`].
#[derive(Debug, Clone, PartialEq)]
pub struct SourceDocument {
    /// Position in the corpus (0-based).
    pub index: u64,
    /// Display name (corpus-relative path).
    pub name: String,
    /// Stable document id.
    pub id: String,
    /// Length of the text in characters.
    pub chars: u64,
    /// Number of chunks of the document in the store.
    pub chunk_count: u64,
    /// Index of the text in the spec's [`TextSource`].
    pub text: usize,
}

/// A named value placed in the interpreter before the first cell.
#[derive(Debug, Clone, PartialEq)]
pub enum InputValue {
    /// A `str` (sent raw, never JSON-escaped: cheap at 100 MB).
    Text(String),
    /// A `list[str]`.
    TextList(Vec<String>),
    /// A `list[dict]` of documents.
    Documents(Vec<DocumentRecord>),
    /// Any JSON value as dict/list/str/int/float/bool/None.
    Json(Value),
    /// A `str` the worker assembles from literals and source texts (a corpus
    /// joined with headers, without the parent ever holding the joined string).
    Assembled(Vec<Piece>),
    /// A `list[str]` of every text of the spec's [`TextSource`], in order.
    SourceTexts,
    /// A `list[dict]` of documents whose texts come from the spec's [`TextSource`].
    SourceDocuments(Vec<SourceDocument>),
}

/// Whether Python calls a host function directly or awaits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostFunctionKind {
    /// `x = f(...)`: the cell waits for the answer.
    Sync,
    /// `x = await f(...)`, or many at once with `asyncio.gather`; answered concurrently.
    Async,
}

/// What an interpreter looks like to the model: its inputs and host functions.
#[derive(Debug, Clone, Default)]
pub struct InterpreterSpec {
    /// Named inputs, e.g. `context` and `documents`.
    pub inputs: Vec<(String, InputValue)>,
    /// Host functions by name. One name is either sync or async, never both.
    pub functions: Vec<(String, HostFunctionKind)>,
    /// Texts the [`InputValue::Assembled`], [`InputValue::SourceTexts`] and
    /// [`InputValue::SourceDocuments`] inputs refer to.
    pub texts: Option<std::sync::Arc<dyn TextSource>>,
}

impl InterpreterSpec {
    /// An empty spec.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input.
    pub fn input(mut self, name: impl Into<String>, value: InputValue) -> Self {
        self.inputs.push((name.into(), value));
        self
    }

    /// Sets the texts that source-backed inputs refer to.
    pub fn texts(mut self, source: std::sync::Arc<dyn TextSource>) -> Self {
        self.texts = Some(source);
        self
    }

    /// Adds a host function.
    pub fn function(mut self, name: impl Into<String>, kind: HostFunctionKind) -> Self {
        self.functions.push((name.into(), kind));
        self
    }

    pub(crate) fn validate(&self) -> Result<(), SandboxError> {
        let mut seen = std::collections::HashSet::new();
        for name in self
            .inputs
            .iter()
            .map(|(n, _)| n)
            .chain(self.functions.iter().map(|(n, _)| n))
        {
            if !is_identifier(name) {
                return Err(SandboxError::InvalidSpec(format!(
                    "{name:?} is not a Python identifier; use letters, digits and _"
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(SandboxError::InvalidSpec(format!(
                    "{name:?} is defined twice; give each input and host function its own name"
                )));
            }
        }
        for (name, value) in &self.inputs {
            if let InputValue::Json(v) = value
                && let Err(why) = check_value(v)
            {
                return Err(SandboxError::InvalidSpec(
                    why.message(&format!("input {name:?}")),
                ));
            }
        }
        let available = self.texts.as_ref().map(|t| t.count());
        for (name, value) in &self.inputs {
            let used: Vec<usize> = match value {
                InputValue::Assembled(pieces) => pieces
                    .iter()
                    .filter_map(|p| match p {
                        Piece::Text(i) => Some(*i),
                        Piece::Literal(_) => None,
                    })
                    .collect(),
                InputValue::SourceTexts => Vec::new(),
                InputValue::SourceDocuments(docs) => docs.iter().map(|d| d.text).collect(),
                _ => continue,
            };
            let Some(count) = available else {
                return Err(SandboxError::InvalidSpec(format!(
                    "input {name:?} refers to source texts but the interpreter has none; set them with InterpreterSpec::texts"
                )));
            };
            if let Some(bad) = used.iter().find(|&&i| i >= count) {
                return Err(SandboxError::InvalidSpec(format!(
                    "input {name:?} refers to text {bad} but the source has {count}"
                )));
            }
        }
        Ok(())
    }
}

/// A call from Python to a host function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCall {
    /// Function name.
    pub name: String,
    /// Positional arguments (tuples and sets arrive as arrays).
    pub args: Vec<Value>,
    /// Keyword arguments.
    pub kwargs: serde_json::Map<String, Value>,
    /// True for async functions: other calls may be in flight at the same time.
    pub awaitable: bool,
}

/// How a host function fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// Raise this exception in Python at the call site (catchable).
    Raise {
        /// Exception type name, e.g. `RuntimeError` or `ValueError`.
        exc_type: String,
        /// Message shown to the model.
        message: String,
    },
    /// Stop the cell immediately (uncatchable), e.g. after `FINAL(...)`.
    /// The cell result carries the reason in [`CellResult::ended_by_host`].
    EndCell(String),
}

impl HostError {
    /// A `RuntimeError` with `message`.
    pub fn runtime(message: impl Into<String>) -> Self {
        Self::Raise {
            exc_type: "RuntimeError".into(),
            message: message.into(),
        }
    }
}

/// Answers host calls. The sandbox knows nothing about what the functions do.
pub trait HostHandler: Send + Sync + 'static {
    /// Answers one call with a JSON value (becomes a Python value) or an error.
    fn handle(&self, call: HostCall) -> impl Future<Output = Result<Value, HostError>> + Send;

    /// Whether the call's time counts against the cell's time limit, as the
    /// interpreter's own time does: true for lookups the host answers itself
    /// (a search, a chunk read), which a cell could otherwise repeat without
    /// bound. The default, false, is for calls that wait on something slow by
    /// nature (a model): they count against the host-wait limit.
    fn counts_as_cell_time(&self, call: &HostCall) -> bool {
        let _ = call;
        false
    }
}

/// A Python exception that ended a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellError {
    /// Exception type, e.g. `NameError`.
    #[serde(rename = "type")]
    pub exc_type: String,
    /// Message, with a hint on what to write instead when the sandbox lacks a feature.
    pub message: String,
    /// 1-based line in the cell, when known.
    pub line: Option<u32>,
}

/// What a cell did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Printed output (head and tail kept when it exceeded the capture budget).
    pub stdout: String,
    /// Characters printed in total.
    pub stdout_chars: u64,
    /// `repr()` of the last expression's value, unless it was `None`.
    pub value: Option<String>,
    /// The exception that ended the cell, if any.
    pub error: Option<CellError>,
    /// Wall time of the cell including host calls.
    pub elapsed: Duration,
    /// Host calls the cell made.
    pub host_calls: u64,
    /// Set when a host function ended the cell on purpose ([`HostError::EndCell`]).
    pub ended_by_host: Option<String>,
}

impl CellResult {
    /// The text a model sees: stdout, the value, the error, cut to `max_chars`.
    pub fn render(&self, max_chars: usize) -> String {
        let mut text = self.stdout.clone();
        if let Some(v) = &self.value {
            text.push_str(v);
            text.push('\n');
        }
        if let Some(e) = &self.error {
            match e.line {
                Some(line) => {
                    text.push_str(&format!("{}: {} (line {line})\n", e.exc_type, e.message))
                }
                None => text.push_str(&format!("{}: {}\n", e.exc_type, e.message)),
            }
        }
        truncate_output(&text, max_chars)
    }
}

/// Default output budget for what goes back to the model: the REPL output of a
/// cell is cut to this many characters (first half + last half).
pub const DEFAULT_TRUNCATE_CHARS: usize = 20_000;

/// Keeps the first and last `max_chars / 2` characters of `text` with a marker
/// saying how many were cut in between. Text within budget is returned as is.
pub fn truncate_output(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_chars = max_chars / 2;
    let tail_chars = max_chars - head_chars;
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail_chars)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n... [{} characters truncated] ...\n{}",
        &text[..head_end],
        total - head_chars - tail_chars,
        &text[tail_start..]
    )
}

/// Everything that can go wrong outside Python.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The worker could not be started.
    #[error("cannot start the sandbox worker: {0}")]
    Spawn(String),
    /// The interpreter spec was invalid.
    #[error("invalid sandbox interpreter: {0}")]
    InvalidSpec(String),
    /// The worker process died; the interpreter's variables are gone.
    #[error("the sandbox worker died: {0}; start a new interpreter")]
    WorkerDied(String),
    /// The cell did not stop within its time limit, so the worker was killed.
    #[error(
        "the cell ran longer than {0:?} and did not stop, so the sandbox was killed; variables are lost, start a new interpreter"
    )]
    CellTimeout(Duration),
    /// The worker sent something unexpected.
    #[error("sandbox protocol error: {0}")]
    Protocol(String),
    /// The interpreter was closed (or died earlier).
    #[error("the sandbox interpreter is closed; start a new interpreter")]
    Closed,
    /// A value could not cross between the parent and the worker (nested too
    /// deep, or too large); the interpreter lives on.
    #[error("{0}")]
    Value(String),
    /// The CPython back-end cannot run here (no bubblewrap, no user
    /// namespaces, not Linux, no usable Python).
    #[error("cannot start the sandbox worker: {0}")]
    CPython(crate::cpython::CPythonError),
    /// A sandbox name other than monty or cpython (as given).
    #[error("unknown sandbox {0:?}: use monty (the default) or cpython")]
    UnknownBackend(String),
}

/// True for a valid Python identifier (ASCII letters, digits, `_`; no leading digit).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_head_and_tail() {
        let text: String = (0..1000).map(|i| format!("{i:04}")).collect();
        let t = truncate_output(&text, 100);
        assert!(t.starts_with("00000001"));
        assert!(t.ends_with("0999"));
        assert!(t.contains("[3900 characters truncated]"), "{t}");
        assert_eq!(truncate_output("short", 100), "short");
    }

    #[test]
    fn spec_rejects_bad_names() {
        let spec = InterpreterSpec::new().input("not valid", InputValue::Text(String::new()));
        assert!(matches!(spec.validate(), Err(SandboxError::InvalidSpec(_))));
        let spec = InterpreterSpec::new()
            .function("f", HostFunctionKind::Sync)
            .function("f", HostFunctionKind::Async);
        assert!(matches!(spec.validate(), Err(SandboxError::InvalidSpec(_))));
    }
}
