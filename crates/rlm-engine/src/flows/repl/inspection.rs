//! What an agent's sandbox starts with: its inputs (`context`, `documents`,
//! `question`, `history`, `findings`, `briefing`), the host functions of the
//! table, and the inspection cell the engine runs before the agent's first
//! turn, so that even a weak model starts from a scouted corpus.

use rlm_sandbox::{InputValue, InterpreterSpec};
use serde_json::{Value, json};

use crate::host;
use crate::run::Run;
use crate::session::SessionState;

/// The corpus overview cell: the document index. It depends on the corpus
/// only, so its output goes into the root's system prompt, which then stays
/// the same from one question to the next over the same corpus (a provider's
/// prompt cache or the embedded model's prefix state covers it).
pub(crate) const CORPUS_OVERVIEW: &str = r#"print(f"{len(documents)} documents, {sum([d['chars'] for d in documents])} characters in total")
for d in documents[:60]:
    print(f"[DOCUMENT {d['index']}: {d['name']}] {d['chars']} chars, {d['chunk_count']} chunks")
if len(documents) > 60:
    print(f"... and {len(documents) - 60} more documents (see `documents`)")"#;

/// The part of the root's inspection that depends on the session: earlier
/// questions and findings.
pub(crate) const ROOT_INSPECTION: &str = r#"if history:
    print(f"Earlier questions in this session ({len(history)}):")
    for t in history[-5:]:
        print("Q:", t["question"])
        print("A:", t["answer"][:600])
if findings:
    print(f"Findings recorded so far ({len(findings)}):")
    for f in findings[-30:]:
        print("-", f["text"], "| source:", f["source"])"#;

/// Documents the inspection compares with the question's words by name, at
/// most (a loop over every document's name in the sandbox).
const MAX_NAMED_SCAN: usize = 20_000;

/// Full-text hits the inspection looks through for a named document's best.
const NAMED_SEARCH_K: usize = 100;

/// The root's inspection cell, run after the question is known: earlier
/// questions and findings of the session, then (with `k` > 0) for
/// each of the top `k` full-text hits for the question its short lines that
/// share at least two of its words, or else the window of the hit around its
/// best-matching terms (long lines: PDF text, transcripts, minified pages) —
/// a weak model that never searches well still starts from the passage most
/// likely to hold the answer, never from the head of a long line. A
/// document the question names (every word of its file name, without the
/// extension, is a word of the question: `sort.txt` for "where does sort
/// keep …", `acme_lease.pdf` for "the Acme lease") adds its best hit among
/// the top hundred for the rest of the question (the name picks the
/// document, the other words the passage: searched with its name, a page's
/// best hit was its footer, which names the command again) when the top
/// `k` have none of it: other pages that share the question's common words
/// otherwise crowd it out. Then how
/// many lines of the whole corpus hold each word of the question: a question
/// about every line (a count, a total) starts from exhaustive numbers, not
/// from the few hits. Words are runs of letters and digits in any script; a
/// word no line holds is tried without its last one or two letters (an
/// inflected form: "purchases" finds "purchase", "Fristen" finds "Frist").
pub(crate) fn root_inspection(k: usize) -> String {
    if k == 0 {
        return ROOT_INSPECTION.to_string();
    }
    format!(
        r#"{ROOT_INSPECTION}
import re
_tokens = re.findall(r"[^\W_]+", question.lower())
_words = []
for _w in _tokens:
    if len(_w) > 3 and _w not in _words:
        _words.append(_w)
_hits = search(question, {k}) if _words else []
_named = []
_hit_docs = [_h["doc_index"] for _h in _hits]
if _words and len(documents) <= {max_named_scan}:
    for _d in documents:
        if len(_named) == 2:
            break
        if _d["index"] in _hit_docs:
            continue
        _stem = re.sub(r"\.[^./]*$", "", _d["name"].split("/")[-1]).lower()
        _parts = re.findall(r"[^\W_]+", _stem)
        if _parts and all([_p in _tokens for _p in _parts]):
            _named.append((_d["index"], _parts))
for _i, _parts in _named:
    _rest = " ".join([_t for _t in _tokens if _t not in _parts])
    _hits = _hits + [_h for _h in search(_rest or question, {wide}) if _h["doc_index"] == _i][:1]
if _hits:
    print("{lead}")
    for _h in _hits:
        _lines = [l.strip() for l in _h["text"].splitlines() if len(l) <= 400 and len([w for w in _words if w in l.lower()]) >= 2]
        print(f"[[chunk:{{_h['chunk_id']}}]] in [DOCUMENT {{_h['doc_index']}}: {{_h['path']}}]")
        for _l in (_lines[:3] if _lines else [_h["snippet"]]):
            print("    " + _l)
if _words:
    _counts = []
    for _w in _words[:6]:
        _s = _w
        _n = grep_count(_s)
        while _n == 0 and len(_s) > 5 and len(_w) - len(_s) < 2:
            _s = _s[:-1]
            _n = grep_count(_s)
        _counts.append(_w + ": " + str(_n) if _n == 0 or _s == _w else _s + " (for " + _w + "): " + str(_n))
    print("Lines of the whole corpus holding each word of the question (grep_count):")
    print(", ".join(_counts))"#,
        lead = crate::parse::SEARCH_LEAD,
        max_named_scan = MAX_NAMED_SCAN,
        wide = NAMED_SEARCH_K,
    )
}

/// The inspection cell of a sub-agent: what its input looks like.
pub(crate) const SUB_INSPECTION: &str = r#"print(type(context).__name__, "of length", len(context))
if isinstance(context, str):
    print(context[:1500])
else:
    for i, item in enumerate(context[:10]):
        print(i, str(item)[:300])"#;

fn history_json(s: &SessionState) -> Value {
    Value::Array(
        s.history
            .iter()
            .map(|t| json!({"question": t.question, "answer": t.answer, "partial": t.partial}))
            .collect(),
    )
}

fn findings_json(s: &SessionState) -> Value {
    Value::Array(
        s.findings
            .iter()
            .map(|f| json!({"text": f.text, "source": f.source}))
            .collect(),
    )
}

pub(crate) fn input_sizes(v: &InputValue) -> (String, Vec<u64>) {
    match v {
        InputValue::Text(s) => ("a string".into(), vec![s.chars().count() as u64]),
        InputValue::TextList(l) => (
            "a list of strings".into(),
            l.iter().map(|s| s.chars().count() as u64).collect(),
        ),
        InputValue::Documents(d) => (
            "a list of documents".into(),
            d.iter().map(|d| d.chars).collect(),
        ),
        InputValue::Json(j) => ("a JSON value".into(), vec![j.to_string().len() as u64]),
        // Corpus-backed inputs are only built for the corpus itself, never
        // handed to a child agent; described generically all the same.
        InputValue::Assembled(_) => ("a string".into(), Vec::new()),
        InputValue::SourceTexts => ("a list of strings".into(), Vec::new()),
        InputValue::SourceDocuments(d) => (
            "a list of documents".into(),
            d.iter().map(|d| d.chars).collect(),
        ),
    }
}

/// The sandbox inputs and host functions of an agent over `input` (or the corpus).
pub(crate) fn interpreter_spec(
    ctx: &Run,
    task: &str,
    input: Option<&InputValue>,
) -> InterpreterSpec {
    let (context, documents) = match input {
        Some(v) => (v.clone(), InputValue::Json(json!([]))),
        None => (
            ctx.corpus.context_value(ctx.config.context_shape),
            ctx.corpus.document_records(),
        ),
    };
    let mut spec = InterpreterSpec::new();
    if input.is_none() {
        spec = spec.texts(ctx.corpus.texts());
    }
    spec = spec
        .input("context", context)
        .input("documents", documents)
        .input("question", InputValue::Text(task.to_string()))
        .input("history", InputValue::Json(history_json(&ctx.session)))
        .input("findings", InputValue::Json(findings_json(&ctx.session)))
        .input(
            "briefing",
            InputValue::Json(
                ctx.briefing
                    .clone()
                    .map(Value::String)
                    .unwrap_or(Value::Null),
            ),
        );
    host::register(spec)
}
