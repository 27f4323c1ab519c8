//! The engine (`[engine]`): budgets shared by a question's call tree, the REPL loop, its sandbox and how answers are checked.

use crate::spec::{Group, Kind, OldName, Setting};

use super::{ENGINE, ENV_ONLY};
use Group::{Answering, Budgets};

// ---- Budgets ([engine]) ---------------------------------------------------

/// Deepest agent level.
pub const MAX_DEPTH: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_depth",
    Some("RLM_MAX_DEPTH"),
    Kind::Whole(0, 10),
    "2",
    "Deepest agent level (0 = the root); `rlm_query` there is a plain `llm_query`.",
)
.flag("--max-depth")
.api("max_depth");
/// Model turns of the root agent.
pub const MAX_ITERATIONS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_iterations",
    Some("RLM_MAX_ITERATIONS"),
    Kind::Whole(1, 1_000),
    "25",
    "Model turns (REPL rounds) of the root agent.",
)
.flag("--max-iterations")
.api("max_iterations")
.old(&[OldName::Env("RLM_MAX_CALLS"), OldName::Toml("max_calls")]);
/// Model turns of each sub-agent.
pub const SUB_AGENT_CALLS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "sub_agent_calls",
    Some("RLM_SUB_AGENT_CALLS"),
    Kind::Whole(1, 1_000),
    "8",
    "Model turns of each sub-agent.",
);
/// Model calls across the call tree.
pub const MAX_LLM_CALLS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_llm_calls",
    Some("RLM_MAX_LLM_CALLS"),
    Kind::Whole(1, 100_000),
    "50",
    "Model calls across the whole call tree.",
)
.flag("--max-llm-calls")
.api("max_llm_calls");
/// Reuse of reproducible model replies.
pub const SUBCALL_CACHE: Setting = Setting::new(
    Budgets,
    ENGINE,
    "subcall_cache",
    Some("RLM_SUBCALL_CACHE"),
    Kind::Bool,
    "on",
    "Keep reproducible model replies (temperature 0, or the embedded model's fixed seed) in the store (`replies.sqlite` in a folder store, a table in PostgreSQL) and serve a call whose model, parameters and whole prompt were answered before from there, free of budget. `--no-cache` turns it off for one question.",
)
.flag("--no-cache")
.api("subcall_cache");
/// Size cap of the reply cache.
pub const SUBCALL_CACHE_MB: Setting = Setting::new(
    Budgets,
    ENGINE,
    "subcall_cache_mb",
    Some("RLM_SUBCALL_CACHE_MB"),
    Kind::Whole(1, 1_000_000),
    "256",
    "Size cap of a store's reply cache in MiB; the least recently used replies are dropped past it.",
);
/// Calls kept for the root.
pub const ROOT_RESERVED: Setting = Setting::new(
    Budgets,
    ENGINE,
    "root_reserved",
    Some("RLM_ROOT_RESERVED"),
    Kind::Whole(0, 100_000),
    "5",
    "Calls sub-agents may not use (kept for the root's synthesis); shrinks to half the call limit when only the limit is lowered.",
);
/// Budget concurrency (read as the engine's own setting too).
pub const ENGINE_MAX_CONCURRENT: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_concurrent",
    Some("RLM_MAX_CONCURRENT"),
    Kind::Whole(1, 1_024),
    "12",
    "Model calls and sub-agents in flight at once (the same variable as the model client's limit).",
);
/// Token cap.
pub const MAX_TOKENS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_tokens",
    Some("RLM_MAX_TOKENS"),
    Kind::Whole(1, 100_000_000_000),
    "1500000",
    "Input and output tokens of the call tree; a call is refused when it would pass 95%.",
);
/// Cost cap.
pub const MAX_COST_USD: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_cost_usd",
    Some("RLM_MAX_COST_USD"),
    Kind::Above(0.0, 1_000_000.0),
    "none",
    "Cost cap in USD; a call answered by a model with no known price stops the run.",
)
.flag("--max-cost-usd")
.api("max_cost_usd");
/// Wall-clock cap.
pub const MAX_WALL_SECS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_wall_secs",
    Some("RLM_MAX_WALL_SECS"),
    Kind::Above(0.0, 604_800.0),
    "1800",
    "Wall-clock cap of a question, in seconds.",
)
.flag("--max-wall-secs")
.api("max_wall_secs");
/// Erroring cells in a row.
pub const MAX_ERRORS: Setting = Setting::new(
    Budgets,
    ENGINE,
    "max_errors",
    Some("RLM_MAX_ERRORS"),
    Kind::Whole(1, 1_000),
    "5",
    "Erroring cells in a row before an agent gives up.",
);
/// Cell output fed back.
pub const TRUNCATE_LEN: Setting = Setting::new(
    Budgets,
    ENGINE,
    "truncate_len",
    Some("RLM_TRUNCATE_LEN"),
    Kind::Whole(100, 100_000_000),
    "20000",
    "Characters of each cell's output fed back to the model (head and tail).",
);

// ---- Answering and checking ([engine]) ------------------------------------

/// The flow a question takes.
pub const FLOW: Setting = Setting::new(
    Answering,
    ENGINE,
    "flow",
    Some("RLM_FLOW"),
    Kind::Choice(&["repl", "pipeline", "rag", "auto"]),
    "repl",
    "The flow that answers: `repl` (the model programs a REPL over the corpus), `pipeline`, `rag` or `auto` (a triage picks). As a setting of the engine it is the RLM flow of the switch (`repl` or `pipeline`).",
)
.flag("--flow")
.api("flow");
/// The RLM switch.
pub const ENABLED: Setting = Setting::new(
    Answering,
    ENGINE,
    "enabled",
    Some("RLM_ENABLED"),
    Kind::Bool,
    "true",
    "With no flow named: true answers with the RLM flow (`RLM_FLOW`), false with `rag`.",
)
.api("use_rlm");
/// Shape of `context`.
pub const CONTEXT_SHAPE: Setting = Setting::new(
    Answering,
    ENGINE,
    "context_shape",
    Some("RLM_CONTEXT_SHAPE"),
    Kind::Choice(&["string", "list"]),
    "string",
    "Shape of `context` in the REPL: one string with a `[DOCUMENT i: path]` header per document, or a list of documents.",
)
.flag("--context-shape")
.api("context_shape");
/// Python of the REPL.
pub const SANDBOX: Setting = Setting::new(
    Answering,
    ENGINE,
    "sandbox",
    Some("RLM_SANDBOX"),
    Kind::Choice(&["monty", "cpython"]),
    "monty",
    "Which Python runs the REPL and the pipeline's programs: `monty` (built in) or `cpython` (your Python and its packages, isolated by bubblewrap; Linux).",
)
.flag("--sandbox")
.api("sandbox");
/// Citation policy.
pub const CITATIONS: Setting = Setting::new(
    Answering,
    ENGINE,
    "citations",
    Some("RLM_CITATIONS"),
    Kind::Choice(&["best_effort", "strict"]),
    "best_effort",
    "`best_effort` reports claims without a verified citation; `strict` flags them in the answer.",
)
.flag("--citations")
.api("citations");
/// Answer checks.
pub const VERIFY: Setting = Setting::new(
    Answering,
    ENGINE,
    "verify",
    Some("RLM_VERIFY"),
    Kind::Choice(&["on", "quotes", "semantic", "off"]),
    "on",
    "Checks of the answer: `on` (citations' quotes checked verbatim; each claim's passage judged by the sub-model in one batched call per answer: a claim is supported only when its passage entails it), `quotes` (the verbatim check only, no judge call: claims are then unverified, never supported), `semantic` (as `on`, and claims not entailed are also marked in the answer text, dropped under the strict citation policy), or `off`.",
)
.flag("--verify")
.api("verify")
.old(&[
    OldName::Env("RLM_VERIFY_CITATIONS"),
    OldName::Toml("verify_citations"),
]);
/// Coverage report.
pub const COVERAGE: Setting = Setting::new(
    Answering,
    ENGINE,
    "coverage",
    Some("RLM_COVERAGE"),
    Kind::Bool,
    "false",
    "Also report the documents that match the question but back no claim (for \"list every…\" questions).",
)
.flag("--coverage")
.api("coverage");
/// Stop a REPL reply after its code block.
pub const STOP_AFTER_CODE: Setting = Setting::new(
    Answering,
    ENGINE,
    "stop_after_code",
    Some("RLM_STOP_AFTER_CODE"),
    Kind::Choice(&["auto", "on", "off"]),
    "auto",
    "`on`: each REPL reply ends at its first code block (the cell's real output comes next turn); `auto` is on for the embedded model.",
);
/// How the root agent's replies are shaped.
pub const TURN_FORMAT: Setting = Setting::new(
    Answering,
    ENGINE,
    "turn_format",
    Some("RLM_TURN_FORMAT"),
    Kind::Choice(&["auto", "structured", "text"]),
    "auto",
    "How the agents reply each turn: `structured` (a JSON turn, code to run or an answer whose sources name passages the run was shown, constrained by a grammar, `response_format` or a tool where the provider supports it), `text` (```repl blocks and FINAL(...)), or `auto` (structured; an endpoint that refuses the schema gets text replies, noted in the trace).",
)
.flag("--turn-format")
.api("turn_format");
/// Defer FINAL in a fan-out turn.
pub const DEFER_FINAL: Setting = Setting::new(
    Answering,
    ENGINE,
    "defer_final",
    Some("RLM_DEFER_FINAL"),
    Kind::Bool,
    "true",
    "Defer a FINAL written in the same turn as sub-calls (their results were not seen yet).",
);
/// Inspection cell hits.
pub const INSPECT_SEARCH_K: Setting = Setting::new(
    Answering,
    ENGINE,
    "inspect_search_k",
    Some("RLM_INSPECT_SEARCH_K"),
    Kind::Whole(0, 50),
    "3",
    "Full-text hits for the question whose matching lines the root's first cell prints (0 = off).",
);
/// Prose replies before the last turn.
pub const MAX_NO_CODE_REPLIES: Setting = Setting::new(
    Answering,
    ENGINE,
    "max_no_code_replies",
    Some("RLM_MAX_NO_CODE_REPLIES"),
    Kind::Whole(1, 100),
    "3",
    "Replies in a row without code or FINAL before the agent gets its last turn.",
);
/// What a sub-model can take.
pub const SUB_CONTEXT_CHARS: Setting = Setting::new(
    Answering,
    ENGINE,
    "sub_context_chars",
    Some("RLM_SUB_CONTEXT_CHARS"),
    Kind::Whole(1_000, 100_000_000),
    "100000",
    "How much text the prompt says a sub-model takes, in characters.",
);
/// The CPython back-end's Python.
pub const PYTHON: Setting = Setting::new(
    Answering,
    ENV_ONLY,
    "python",
    Some("RLM_PYTHON"),
    Kind::Path,
    "the active VIRTUAL_ENV, else python3 on PATH",
    "The CPython sandbox's Python: an interpreter or a virtual environment's folder.",
);
/// The sandbox worker program.
pub const SANDBOX_WORKER: Setting = Setting::new(
    Answering,
    ENV_ONLY,
    "sandbox_worker",
    Some("RLM_SANDBOX_WORKER"),
    Kind::Path,
    "the rlm binary itself",
    "The program that runs sandbox cells in a child process.",
);
