//! The tools the MCP server lists: names, descriptions, input schemas. Each
//! tool's argument names here are the ones its handler accepts.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// `ask`'s arguments.
pub(super) const ASK_ARGS: &[&str] = &[
    "question",
    "flow",
    "inspector",
    "citations",
    "verify",
    "coverage",
    "turn_format",
    "subcall_cache",
    "response_schema",
    "sandbox",
    "session",
    "max_llm_calls",
    "max_iterations",
    "max_depth",
    "max_cost_usd",
    "max_wall_secs",
];
/// `ask`'s arguments on this server: under `rlm serve` its runs are
/// checked as the server's settings say (no `verify`).
pub(super) fn ask_args(served: bool) -> Vec<&'static str> {
    ASK_ARGS
        .iter()
        .copied()
        .filter(|a| !served || *a != "verify")
        .collect()
}
/// `search`'s arguments.
pub(super) const SEARCH_ARGS: &[&str] = &["query", "k", "mode", "high_recall"];
/// `show`'s arguments.
pub(super) const SHOW_ARGS: &[&str] = &["id", "offset", "max_chars"];
/// `list_documents`' arguments.
pub(super) const LIST_ARGS: &[&str] = &["offset", "limit"];
/// `index`'s arguments.
pub(super) const INDEX_ARGS: &[&str] = &["paths", "include", "exclude"];

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn read_only(title: &str) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(true)
        .open_world(false)
}

/// The tools, `index` only when the server allows it; `served`: the `rlm
/// serve` endpoint (its `ask` takes [`ask_args`]).
pub(super) fn list(allow_index: bool, served: bool) -> Vec<Tool> {
    let mut tools = vec![
        ask_tool(served),
        search_tool(),
        show_tool(),
        list_documents_tool(),
    ];
    if allow_index {
        tools.push(index_tool());
    }
    tools
}

/// `ask`; under `rlm serve` without `verify` (the server checks answers as
/// its own settings say).
fn ask_tool(served: bool) -> Tool {
    let budget = |what: &str| json!({"type": ["integer", "string"], "description": what});
    let mut ask_schema = json!({
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, in plain words."},
            "flow": {"type": "string", "enum": ["repl", "pipeline", "rag", "auto"],
                "description": "repl: the paper's loop over the whole corpus (default); pipeline: retrieval, per-file inspection, merge; rag: top-k retrieval and one call (RLM off); auto: a triage call picks."},
            "inspector": {"type": "string", "enum": ["iterative", "per-chunk", "hypothesis", "repl"],
                "description": "Per-file inspector of the pipeline flow."},
            "citations": {"type": "string", "enum": ["best_effort", "strict"],
                "description": "strict flags (pipeline: drops) claims without a verified citation."},
            "verify": {"type": "string", "enum": ["on", "quotes", "semantic", "off"],
                "description": "Checks of the answer: on (default: quotes checked verbatim, and one sub-model call judges whether each claim's passage entails it), quotes (the verbatim check only: claims stay unverified), semantic (as on, and claims not entailed are marked in the answer), or off."},
            "coverage": {"type": "boolean",
                "description": "Also list the documents that match the question but back no claim (for 'list every...' questions)."},
            "response_schema": {"type": "object",
                "description": "A JSON Schema: the answer is also returned as JSON following it (structured result `data.value`, each value's citations in `data.citations`)."},
            "turn_format": {"type": "string", "enum": ["auto", "structured", "text"],
                "description": "How the agents reply each turn: structured (a JSON turn the provider constrains; sources may name only passages the run was shown), text (code blocks and FINAL) or auto (structured; text where the endpoint refuses the schema)."},
            "subcall_cache": {"type": "boolean",
                "description": "false: make every model call afresh, without the store's reply cache (reproducible replies kept for reuse)."},
            "sandbox": {"type": "string", "enum": ["monty", "cpython"],
                "description": "Which Python runs the model's code: monty (default, built in) or cpython (the server's Python and its packages, e.g. pandas, under OS isolation; Linux with bubblewrap)."},
            "session": {"type": "string",
                "description": "Multi-turn session name: earlier questions, answers and findings of the session carry over."},
            "max_llm_calls": budget("Model calls across the whole call tree."),
            "max_iterations": budget("Model turns of the root agent."),
            "max_depth": budget("Deepest agent level."),
            "max_cost_usd": {"type": ["number", "string"], "description": "Cost cap in USD."},
            "max_wall_secs": {"type": ["number", "string"], "description": "Wall-clock cap in seconds."}
        },
        "required": ["question"],
        "additionalProperties": false
    });
    if served && let Some(props) = ask_schema["properties"].as_object_mut() {
        props.remove("verify");
    }
    Tool::new(
            "ask",
            "Answer a question over the indexed documents with a Recursive Language Model: the model \
             reads the whole collection through code in a sandbox, delegates pieces to sub-calls and \
             commits an answer whose citations are checked against the documents. Returns the answer \
             (Markdown), its sources (chunk id, path, line, verified quote) and whether it is partial \
             (a budget ran out or the call was cancelled). Slow: seconds to minutes; progress is \
             reported when the request carries a progressToken, and notifications/cancelled stops it.",
        schema(ask_schema),
    )
    .with_title("Ask the documents")
    .with_annotations(read_only("Ask the documents").open_world(true))
}

fn search_tool() -> Tool {
    Tool::new(
            "search",
            "Search the chunks of the indexed documents (BM25 full text by default). Returns the best \
             chunks with their chunk id, document path, lines and a snippet; `show` gives a chunk's \
             whole text. Fast; use it to find where something is before asking.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to search for."},
                    "k": {"type": ["integer", "string"], "minimum": 1, "maximum": 10000, "description": "Number of results (default 10)."},
                    "mode": {"type": "string", "enum": ["bm25", "vector", "hybrid"],
                        "description": "Ranking; vector and hybrid need a store indexed with embeddings (default bm25)."},
                    "high_recall": {"type": "boolean", "description": "At least 200 results and no similarity cut-off."}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only("Search the documents"))
}

fn show_tool() -> Tool {
    Tool::new(
            "show",
            "Show one chunk (id `<doc-id>-<n>`, as `search` and `ask` sources give) or one document \
             (its id or its path as `list_documents` gives) with its text. A long document's text is \
             given in pieces: `offset` and `max_chars` pick one.",
            schema(json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "A chunk id, a document id or a document path."},
                    "offset": {"type": ["integer", "string"], "minimum": 0, "description": "Documents: first character of the text to return (default 0)."},
                    "max_chars": {"type": ["integer", "string"], "minimum": 1, "maximum": 1000000, "description": "Documents: characters of text to return (default 50000)."}
                },
                "required": ["id"],
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only("Show a chunk or document"))
}

fn list_documents_tool() -> Tool {
    Tool::new(
            "list_documents",
            "List the documents of the store: id, path, kind, size, chunks, title. Paged: `offset` \
             and `limit` (default 500); the result says how many there are in all.",
            schema(json!({
                "type": "object",
                "properties": {
                    "offset": {"type": ["integer", "string"], "minimum": 0, "description": "First document to return (default 0)."},
                    "limit": {"type": ["integer", "string"], "minimum": 1, "maximum": 10000, "description": "Documents to return (default 500)."}
                },
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only("List the documents"))
}

/// `index` (`rlm mcp --allow-index` only).
fn index_tool() -> Tool {
    Tool::new(
                "index",
                "Index files or folders into the store (incrementally: unchanged files are not \
                 re-read; files gone from an indexed folder are removed). Paths are read on the \
                 server's machine, relative to its working directory. Later calls see the new \
                 documents.",
                schema(json!({
                    "type": "object",
                    "properties": {
                        "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                            "description": "Files and folders to index."},
                        "include": {"type": "array", "items": {"type": "string"}, "description": "Only files matching these globs, e.g. [\"*.md\"]."},
                        "exclude": {"type": "array", "items": {"type": "string"}, "description": "Skip files matching these globs, e.g. [\"target/**\"]."}
                    },
                    "required": ["paths"],
                    "additionalProperties": false
                })),
            )
            .with_annotations(
                ToolAnnotations::with_title("Index files")
                    .read_only(false)
                    .destructive(false)
                    .idempotent(true)
                    .open_world(false),
            )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_property_is_an_accepted_argument() {
        let accepted = [ASK_ARGS, SEARCH_ARGS, SHOW_ARGS, LIST_ARGS, INDEX_ARGS];
        let tools = list(true, false);
        assert_eq!(tools.len(), accepted.len());
        for (tool, args) in tools.iter().zip(accepted) {
            let props = tool.input_schema["properties"].as_object().unwrap();
            let mut names: Vec<&str> = props.keys().map(String::as_str).collect();
            let mut want = args.to_vec();
            names.sort_unstable();
            want.sort_unstable();
            assert_eq!(names, want, "{}", tool.name);
        }
        assert!(!list(false, false).iter().any(|t| t.name == "index"));
        let served = list(false, true);
        let props = served[0].input_schema["properties"].as_object().unwrap();
        let mut names: Vec<&str> = props.keys().map(String::as_str).collect();
        let mut want = ask_args(true);
        names.sort_unstable();
        want.sort_unstable();
        assert_eq!(names, want);
    }
}
