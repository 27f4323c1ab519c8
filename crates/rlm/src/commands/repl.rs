//! `rlm repl`: the model's sandbox, for a person (or a program with `--jsonl`).
//!
//! The session gets the same environment the model gets in the `repl` flow:
//! `context` (the corpus as one string with `[DOCUMENT i: path]` headers, or a
//! list of per-document strings), `documents`, `search(query, k)`, `FINAL`,
//! `FINAL_VAR`, `add_finding` and `SHOW_VARS()`. Functions that need a model
//! (`llm_query`, `rlm_query`, ...) raise "no model configured" here.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use rlm_engine::corpus::{ContextShape, Corpus};
use rlm_sandbox::{
    CellResult, HostCall, HostError, HostFunctionKind, HostHandler, Interpreter, InterpreterSpec,
    SandboxConfig, WORKER_ENV, WorkerCommand,
};
use serde_json::{Value, json};

use super::corpus::StoreArg;

/// Arguments of `rlm repl`.
#[derive(Debug, Args)]
pub struct ReplArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Machine mode: one `{"code": ...}` per stdin line, one result object per stdout line.
    #[arg(long)]
    pub jsonl: bool,
    /// Shape of `context`: one string with document headers, or a list of strings.
    #[arg(long, value_enum, default_value_t = ContextArg::String)]
    pub context: ContextArg,
    /// Interpreter time allowed per cell, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub cell_timeout: u64,
    /// Memory limit of the sandbox, in MiB (0 = unlimited).
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub memory_mib: u64,
    /// Characters of output shown per cell in interactive mode (head + tail).
    #[arg(long, default_value_t = rlm_sandbox::DEFAULT_TRUNCATE_CHARS, value_name = "CHARS")]
    pub truncate: usize,
}

/// `context` as one string or a list of per-document strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContextArg {
    /// `[DOCUMENT i: path]` + text for each document, concatenated.
    String,
    /// One string per document.
    List,
}

impl From<ContextArg> for ContextShape {
    fn from(arg: ContextArg) -> Self {
        match arg {
            ContextArg::String => ContextShape::String,
            ContextArg::List => ContextShape::List,
        }
    }
}

/// Host functions that need a model; `rlm repl` has none.
const MODEL_FUNCTIONS: &[(&str, HostFunctionKind)] = &[
    ("llm_query", HostFunctionKind::Sync),
    ("llm_query_batched", HostFunctionKind::Sync),
    ("llm_query_async", HostFunctionKind::Async),
    ("rlm_query", HostFunctionKind::Sync),
    ("rlm_query_batched", HostFunctionKind::Sync),
    ("rlm_query_async", HostFunctionKind::Async),
];

/// Host functions `rlm repl` answers itself.
const LOCAL_FUNCTIONS: &[&str] = &["FINAL", "FINAL_VAR", "add_finding", "search"];

/// Runs `rlm repl`.
pub fn repl(args: ReplArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run(args))
}

/// What the host remembers across cells.
#[derive(Debug, Default)]
struct HostState {
    final_answer: Option<Value>,
    final_var: Option<String>,
    findings: Vec<String>,
}

/// Answers host calls for `rlm repl`.
struct ReplHost {
    corpus: Arc<Corpus>,
    state: Mutex<HostState>,
}

impl HostHandler for ReplHost {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        let arg =
            |i: usize, name: &str| call.args.get(i).or_else(|| call.kwargs.get(name)).cloned();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match call.name.as_str() {
            "FINAL" => {
                state.final_answer = Some(arg(0, "answer").unwrap_or(Value::Null));
                Ok(Value::Null)
            }
            "FINAL_VAR" => match arg(0, "name") {
                Some(Value::String(name)) => {
                    state.final_var = Some(name);
                    Ok(Value::Null)
                }
                _ => Err(type_error(
                    "FINAL_VAR() needs a variable name as a string, e.g. FINAL_VAR(\"answer\")",
                )),
            },
            "add_finding" => match arg(0, "text") {
                Some(Value::String(text)) => {
                    state.findings.push(text);
                    Ok(json!(state.findings.len()))
                }
                Some(other) => {
                    state.findings.push(other.to_string());
                    Ok(json!(state.findings.len()))
                }
                None => Err(type_error("add_finding() needs the finding text")),
            },
            "search" => {
                drop(state);
                let Some(Value::String(query)) = arg(0, "query") else {
                    return Err(type_error(
                        "search() needs a query string, e.g. search(\"refund policy\", 10)",
                    ));
                };
                let k = match arg(1, "k") {
                    None | Some(Value::Null) => 10,
                    Some(v) => v
                        .as_u64()
                        .filter(|k| (1..=1000).contains(k))
                        .ok_or_else(|| {
                            type_error("search() k must be an integer between 1 and 1000")
                        })? as usize,
                };
                self.corpus
                    .search_json(&query, k)
                    .map_err(|e| HostError::Raise {
                        exc_type: "ValueError".into(),
                        message: format!("search failed: {e}"),
                    })
            }
            name => Err(HostError::runtime(format!(
                "no model configured: {name}() needs a model, and `rlm repl` runs without one; \
                 use `rlm ask` for questions that need sub-model calls"
            ))),
        }
    }
}

fn type_error(message: &str) -> HostError {
    HostError::Raise {
        exc_type: "TypeError".into(),
        message: message.into(),
    }
}

/// The session's inputs: the same `context` and `documents` the `repl` flow gives the model.
fn session_spec(corpus: &Arc<Corpus>, shape: ContextShape) -> InterpreterSpec {
    let mut spec = InterpreterSpec::new()
        .texts(corpus.texts())
        .input("context", corpus.context_value(shape))
        .input("documents", corpus.document_records());
    for (name, kind) in MODEL_FUNCTIONS {
        spec = spec.function(*name, *kind);
    }
    for name in LOCAL_FUNCTIONS {
        spec = spec.function(*name, HostFunctionKind::Sync);
    }
    spec
}

/// The worker: `$RLM_SANDBOX_WORKER` if set, else this `rlm` binary's hidden subcommand.
fn worker_command() -> anyhow::Result<WorkerCommand> {
    if std::env::var_os(WORKER_ENV).is_some_and(|v| !v.is_empty()) {
        return Ok(WorkerCommand::locate()?);
    }
    let exe =
        std::env::current_exe().context("cannot find the rlm executable to start the sandbox")?;
    Ok(WorkerCommand::rlm_subcommand(exe))
}

async fn run(args: ReplArgs) -> anyhow::Result<()> {
    let store = Arc::new(args.store.open()?);
    let corpus = Arc::new(Corpus::load(store).context("cannot list the store's documents")?);
    let shape = ContextShape::from(args.context);
    let spec = session_spec(&corpus, shape);
    let doc_count = corpus.documents().len();
    let context_chars = corpus.context_chars(shape);
    let mut config = SandboxConfig::new(worker_command()?);
    config.cell_time_limit = Duration::from_secs(args.cell_timeout.max(1));
    config.memory_limit_bytes = args.memory_mib.saturating_mul(1 << 20);
    let host = Arc::new(ReplHost {
        corpus,
        state: Mutex::new(HostState::default()),
    });
    let mut session = Interpreter::start(&config, &spec).await?;
    if args.jsonl {
        run_jsonl(&mut session, &config, &spec, &host).await
    } else {
        let shape = match args.context {
            ContextArg::String => "str",
            ContextArg::List => "list[str]",
        };
        eprintln!(
            "rlm repl: {doc_count} documents; context = {shape} ({context_chars} chars), documents = list[dict]\n\
             host functions: search(query, k), FINAL(x), FINAL_VAR(name), add_finding(text), SHOW_VARS(); \
             llm_query/rlm_query need a model (not configured here)\n\
             A line ending in ':' (or an open bracket) starts a block; a blank line runs it. Ctrl-D quits."
        );
        run_interactive(&mut session, &config, &spec, &host, args.truncate).await
    }
}

/// One JSON object per line in, one per line out; state persists across lines.
async fn run_jsonl(
    session: &mut Interpreter,
    config: &SandboxConfig,
    spec: &InterpreterSpec,
    host: &Arc<ReplHost>,
) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.context("cannot read stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(Value::Object(obj)) => match obj.get("code") {
                Some(Value::String(code)) => match session.run_cell(code, host).await {
                    Ok(r) => result_json(&r),
                    Err(e) => {
                        let reply = error_json("SandboxError", &e.to_string());
                        // The old session is gone: continue on a fresh one.
                        *session = Interpreter::start(config, spec).await?;
                        reply
                    }
                },
                _ => error_json(
                    "InputError",
                    "each line must be {\"code\": \"<python source>\"}",
                ),
            },
            Ok(_) | Err(_) => error_json(
                "InputError",
                "each line must be a JSON object like {\"code\": \"print(1)\"}",
            ),
        };
        serde_json::to_writer(&mut out, &reply)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}

fn result_json(r: &CellResult) -> Value {
    json!({
        "stdout": r.stdout,
        "value": r.value,
        "error": r.error.as_ref().map(|e| json!({"type": e.exc_type, "message": e.message, "line": e.line})),
        "elapsed_ms": (r.elapsed.as_secs_f64() * 1e6).round() / 1e3,
    })
}

fn error_json(kind: &str, message: &str) -> Value {
    json!({
        "stdout": "",
        "value": null,
        "error": {"type": kind, "message": message, "line": null},
        "elapsed_ms": 0.0,
    })
}

/// Whether a first line opens a block that needs more lines.
fn opens_block(line: &str) -> bool {
    let t = line.trim_end();
    if t.ends_with(':') || t.ends_with('\\') {
        return true;
    }
    let mut depth = 0i32;
    for c in t.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    depth > 0 || t.matches("\"\"\"").count() % 2 == 1 || t.matches("'''").count() % 2 == 1
}

async fn run_interactive(
    session: &mut Interpreter,
    config: &SandboxConfig,
    spec: &InterpreterSpec,
    host: &Arc<ReplHost>,
    truncate: usize,
) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    let mut lines = stdin.lock().lines();
    loop {
        if tty {
            eprint!(">>> ");
        }
        let Some(first) = lines.next() else { break };
        let first = first.context("cannot read stdin")?;
        if first.trim().is_empty() {
            continue;
        }
        let mut code = first.clone();
        if opens_block(&first) {
            loop {
                if tty {
                    eprint!("... ");
                }
                match lines.next() {
                    Some(Ok(l)) if !l.trim().is_empty() => {
                        code.push('\n');
                        code.push_str(&l);
                    }
                    _ => break,
                }
            }
        }
        match session.run_cell(&code, host).await {
            Ok(r) => {
                print!("{}", r.render(truncate));
                report_final(session, host).await?;
            }
            Err(e) => {
                eprintln!("error: {e}");
                *session = Interpreter::start(config, spec).await?;
                eprintln!("(started a fresh session; earlier variables are gone)");
            }
        }
        std::io::stdout().flush()?;
    }
    Ok(())
}

/// Shows a committed answer (FINAL or FINAL_VAR) once, after the cell.
async fn report_final(session: &mut Interpreter, host: &Arc<ReplHost>) -> anyhow::Result<()> {
    let (answer, var) = {
        let mut s = host.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.final_answer.take(), s.final_var.take())
    };
    if let Some(a) = answer {
        println!("FINAL: {}", display(&a));
    }
    if let Some(name) = var {
        match session.get_var(&name).await? {
            Some(v) => println!("FINAL_VAR({name}): {}", display(&v)),
            None => println!("FINAL_VAR({name}): no variable named {name:?} is defined"),
        }
    }
    Ok(())
}

fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_openers() {
        assert!(opens_block("for x in y:"));
        assert!(opens_block("xs = ["));
        assert!(!opens_block("print(1)"));
        assert!(!opens_block("x = {'a': 1}"));
    }
}
