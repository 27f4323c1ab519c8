//! The REPL's functions, in one table: what an agent's sandbox registers,
//! what `rlm repl` offers a person, and what the system prompts list. The
//! behaviour of each host function is in the `repl` flow's host
//! (`flows::repl::host`), which answers exactly the names registered here.

use rlm_sandbox::{HostFunctionKind, InterpreterSpec};

/// How a REPL function is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provided {
    /// A host function answered by the engine; the cell waits for it.
    Host(HostFunctionKind),
    /// Defined inside the sandbox itself (`print`, `SHOW_VARS`): listed for
    /// the model, never registered.
    Builtin,
}

/// One function of the REPL.
#[derive(Debug, Clone, Copy)]
pub struct ReplFunction {
    /// Its Python name.
    pub name: &'static str,
    /// How it is called, e.g. `llm_query(prompt)`.
    pub signature: &'static str,
    /// Host function or sandbox builtin.
    pub provided: Provided,
    /// True when it calls a model (`rlm repl` without one refuses it).
    pub needs_model: bool,
    /// The root agent's system prompt entry (after the signature); `None`:
    /// not listed there (described elsewhere or not advertised).
    /// `{{sub_context_chars}}` and `{{truncate_len}}` are filled in.
    pub root_doc: Option<&'static str>,
    /// The sub-agents' system prompt entry (whole); `None`: not listed.
    pub sub_doc: Option<&'static str>,
    /// One line for `rlm repl`'s help.
    pub summary: &'static str,
}

const fn host(kind: HostFunctionKind) -> Provided {
    Provided::Host(kind)
}

/// Every function of the REPL, in the order the prompts list them.
pub const REPL_FUNCTIONS: &[ReplFunction] = &[
    ReplFunction {
        name: "llm_query",
        signature: "llm_query(prompt)",
        provided: host(HostFunctionKind::Sync),
        needs_model: true,
        root_doc: Some(
            "-> str: one call to a sub-model (no REPL). Use it to read, extract from or summarize a piece of text; it can take about {{sub_context_chars}} characters. With `schema={...}` (a JSON Schema dict) it returns a dict or list that follows it (ValueError if the reply does not).",
        ),
        sub_doc: Some(
            "`llm_query(prompt)` -> str (one sub-model call over text you pass it, about {{sub_context_chars}} characters at most)",
        ),
        summary: "one sub-model call; returns its reply",
    },
    ReplFunction {
        name: "llm_query_batched",
        signature: "llm_query_batched(prompts)",
        provided: host(HostFunctionKind::Sync),
        needs_model: true,
        root_doc: Some(
            "-> list[str]: many `llm_query` calls run in parallel; answers come back in the order of the prompts. Far faster than a loop of `llm_query`. With `schema=` each answer is a parsed value.",
        ),
        sub_doc: Some("`llm_query_batched(prompts)` -> list[str] (parallel calls)"),
        summary: "many sub-model calls in parallel; replies in prompt order",
    },
    ReplFunction {
        name: "llm_query_async",
        signature: "llm_query_async(prompt)",
        provided: host(HostFunctionKind::Async),
        needs_model: true,
        root_doc: Some(
            ": the awaitable form, for `results = await asyncio.gather(*[llm_query_async(p) for p in prompts])`.",
        ),
        sub_doc: None,
        summary: "awaitable llm_query, for asyncio.gather",
    },
    ReplFunction {
        name: "rlm_query",
        signature: "rlm_query(prompt, context=None)",
        provided: host(HostFunctionKind::Sync),
        needs_model: true,
        root_doc: Some(
            "-> str: a sub-agent with its own REPL (over `context` if given, else over the same corpus) that iterates like you do. Use it only for a sub-task that needs several steps of its own; for reading text, `llm_query` is cheaper.{{depth_note}}",
        ),
        sub_doc: None,
        summary: "a sub-agent with its own REPL, one level deeper",
    },
    ReplFunction {
        name: "rlm_query_batched",
        signature: "rlm_query_batched(prompts)",
        provided: host(HostFunctionKind::Sync),
        needs_model: true,
        root_doc: None,
        sub_doc: None,
        summary: "many sub-agents in parallel",
    },
    ReplFunction {
        name: "rlm_query_async",
        signature: "rlm_query_async(prompt, context=None)",
        provided: host(HostFunctionKind::Async),
        needs_model: true,
        root_doc: None,
        sub_doc: None,
        summary: "awaitable rlm_query, for asyncio.gather",
    },
    ReplFunction {
        name: "search",
        signature: "search(query, k=10)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: Some(
            "-> list of dicts with `chunk_id`, `doc_index`, `path`, `score`, `snippet` (the words around the match), `text` (the whole chunk): keyword (BM25) search over the chunks of the corpus.",
        ),
        sub_doc: Some(
            "`search(query, k=10)` over the whole corpus (chunks with `chunk_id`, `doc_index`, `path`, `score`, `snippet`, `text`)",
        ),
        summary: "keyword (BM25) search over the corpus's chunks",
    },
    ReplFunction {
        name: "grep",
        signature: "grep(pattern, text=None, limit=10000, ignore_case=True, doc=None)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: Some(
            "-> list of dicts with `doc_index`, `path`, `line`, `chunk_id`, `text` (the whole line): EVERY line of the corpus (or of documents `doc=`, or of `text`) that the regular expression matches, not the best few: to read or list every line of a kind (`len(grep(\"overdue\"))` is how many lines hold the word; to count, add up or rank them, `tally()` does it for you).",
        ),
        sub_doc: Some(
            "`grep(pattern)` every matching line of the corpus (dicts with `doc_index`, `path`, `line`, `chunk_id`, `text`)",
        ),
        summary: "every line matching a regular expression, with its place",
    },
    ReplFunction {
        name: "grep_count",
        signature: "grep_count(pattern, text=None, ignore_case=True, doc=None)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: Some("-> int: how many lines `grep(pattern)` matches, with no limit."),
        sub_doc: None,
        summary: "how many lines a regular expression matches",
    },
    ReplFunction {
        name: "tally",
        signature: "tally(pattern, number=None, by=None, ignore_case=True, doc=None)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: Some(
            "-> dict: counts EVERY line of the corpus that `pattern` matches (a regular expression, or a list of them a line must all match, in any order): `lines`, `documents`. With `number=` (a regular expression whose first group is the number, e.g. `r\"(\\d+) EUR\"`) it also adds up that number over those lines: `sum`, `min`, `max`, `mean`, `min_line`, `max_line` (the whole lines of the extremes). With `by=` (a regular expression whose first group, in parentheses, names the group, e.g. `r\"client (\\w+)\"`; it does not pick lines: a word the lines must also hold goes in the pattern list) it counts per group: `by` is a list of `[group, lines]` (or `[group, lines, sum]` with `number=`), most first (at most 1000), `top` is the first and `groups` how many groups there are. The system checks the answer against it: a count or total you answer with comes from here.",
        ),
        sub_doc: None,
        summary: "count, add up or rank every line a pattern matches",
    },
    ReplFunction {
        name: "chunks",
        signature: "chunks(doc=None)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: Some(
            "-> list of dicts with `chunk_id`, `doc_index`, `path`, `text`: every chunk, in order, to map `llm_query_batched` over what must be read rather than matched.",
        ),
        sub_doc: None,
        summary: "every chunk of the corpus (or of documents doc=), in order",
    },
    ReplFunction {
        name: "add_finding",
        signature: "add_finding(text, source=None)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: Some(
            ": record a fact you established (kept for this session and shown to you in later questions). `findings` is the list of earlier findings, `history` the earlier questions and answers of this session.",
        ),
        sub_doc: Some("`add_finding(text, source=None)`"),
        summary: "record a fact (kept with the session)",
    },
    ReplFunction {
        name: "FINAL",
        signature: "FINAL(answer)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: None,
        sub_doc: None,
        summary: "commit the answer",
    },
    ReplFunction {
        name: "FINAL_VAR",
        signature: "FINAL_VAR(name)",
        provided: host(HostFunctionKind::Sync),
        needs_model: false,
        root_doc: None,
        sub_doc: None,
        summary: "commit the value of a variable as the answer",
    },
    ReplFunction {
        name: "SHOW_VARS",
        signature: "SHOW_VARS()",
        provided: Provided::Builtin,
        needs_model: false,
        root_doc: Some(": the names and types of the variables you created."),
        sub_doc: Some("`SHOW_VARS()`"),
        summary: "the variables defined so far",
    },
    ReplFunction {
        name: "print",
        signature: "print()",
        provided: Provided::Builtin,
        needs_model: false,
        root_doc: Some(
            ": the only way to see results. You see at most {{truncate_len}} characters of each cell's output (head and tail), so print summaries and counts, not whole documents.",
        ),
        sub_doc: Some("`print()`"),
        summary: "show output",
    },
];

/// The entry named `name`, if the REPL has one.
pub fn repl_function(name: &str) -> Option<&'static ReplFunction> {
    REPL_FUNCTIONS.iter().find(|f| f.name == name)
}

/// Registers every host function of the table on `spec`.
pub fn register(mut spec: InterpreterSpec) -> InterpreterSpec {
    for f in REPL_FUNCTIONS {
        if let Provided::Host(kind) = f.provided {
            spec = spec.function(f.name, kind);
        }
    }
    spec
}

/// The root prompt's numbered list of functions, starting at `first`.
pub(crate) fn root_prompt_list(first: usize) -> String {
    REPL_FUNCTIONS
        .iter()
        .filter_map(|f| f.root_doc.map(|doc| (f.signature, doc)))
        .enumerate()
        .map(|(i, (signature, doc))| {
            let sep = if doc.starts_with(':') { "" } else { " " };
            format!("{}. `{signature}`{sep}{doc}", first + i)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sub prompt's inline list: "`a`, `b` and `c`".
pub(crate) fn sub_prompt_list() -> String {
    let items: Vec<&str> = REPL_FUNCTIONS.iter().filter_map(|f| f.sub_doc).collect();
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lists_render() {
        for (i, f) in REPL_FUNCTIONS.iter().enumerate() {
            assert!(
                REPL_FUNCTIONS[i + 1..].iter().all(|g| g.name != f.name),
                "{} twice",
                f.name
            );
            assert!(f.signature.starts_with(f.name), "{}", f.signature);
        }
        let root = root_prompt_list(3);
        assert!(root.starts_with("3. `llm_query(prompt)` -> str: one call"));
        assert!(root.contains("\n13. `SHOW_VARS()`: the names"), "{root}");
        assert!(root.ends_with("not whole documents."), "{root}");
        let sub = sub_prompt_list();
        assert!(sub.ends_with("`SHOW_VARS()` and `print()`"), "{sub}");
    }
}
