//! `rlm repl`: the model's sandbox, for a person (or a program with `--jsonl`).
//!
//! The REPL is the one the model gets in the `repl` flow (the engine's
//! [`ReplConsole`]): `context` (the corpus as one string with
//! `[DOCUMENT i: path]` headers, or a list of per-document strings),
//! `documents`, and the host functions of the engine's one table. With a
//! model configured (the same flags, environment and `rlm.toml` as `rlm ask`)
//! `llm_query`, `llm_query_batched` and `rlm_query` call it for real; without
//! one they raise "no model configured" and say how to configure one.

use std::io::{BufRead, IsTerminal, Write};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use rlm_engine::console::ReplConsole;
use rlm_engine::corpus::{ContextShape, Corpus};
use rlm_engine::host::REPL_FUNCTIONS;
use rlm_engine::{Engine, EngineSettings, SettingsFile, Trace};
use rlm_llm::bounded::{self, Line};
use rlm_llm::{LlmClient, LlmConfig, LlmError};
use rlm_sandbox::{CellResult, SandboxConfig, WorkerPool};
use serde_json::{Value, json};

use super::ask::worker_command;
use super::check_flag;
use super::corpus::StoreArg;
use super::display::{for_output, one_line};
use super::llm::LlmFlags;

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
    /// Time allowed per cell, in seconds: the interpreter's and its lookups' (`search()`), not model calls.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub cell_timeout: u64,
    /// Memory limit of the sandbox, in MiB (0 = unlimited).
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub memory_mib: u64,
    /// Characters of output shown per cell in interactive mode (head + tail).
    #[arg(long, default_value_t = rlm_sandbox::DEFAULT_TRUNCATE_CHARS, value_name = "CHARS")]
    pub truncate: usize,
    /// Which Python runs the cells: monty (default; built in) or cpython (your Python and its packages, isolated by bubblewrap; Linux) [env: RLM_SANDBOX].
    #[arg(long, value_name = "monty|cpython")]
    pub sandbox: Option<String>,
    /// The model that `llm_query` and `rlm_query` call (as for `rlm ask`).
    #[command(flatten)]
    pub llm: LlmFlags,
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

/// Interpreter time per cell, in seconds (`--cell-timeout`).
const CELL_TIMEOUT_SECS: RangeInclusive<u64> = 1..=3600;
/// Sandbox memory in MiB (`--memory-mib`; 0 = unlimited), at most 64 GiB
/// like the engine's own sandbox memory settings.
const MEMORY_MIB: RangeInclusive<u64> = 0..=65_536;
/// The longest `--jsonl` input line (one cell's source as JSON).
const MAX_JSONL_LINE_BYTES: usize = 64 << 20;

/// The flags' values in their ranges: one-line errors naming the flag.
fn check_args(args: &ReplArgs) -> anyhow::Result<()> {
    check_flag("--cell-timeout", args.cell_timeout, CELL_TIMEOUT_SECS)?;
    check_flag("--memory-mib", args.memory_mib, MEMORY_MIB)?;
    // Output shown per cell: the range of the engine's RLM_TRUNCATE_LEN.
    let truncate = match rlm_engine::values::table::TRUNCATE_LEN.kind {
        rlm_engine::values::Kind::Whole(min, max) => min..=max,
        _ => 1..=u64::MAX,
    };
    check_flag("--truncate", args.truncate as u64, truncate)?;
    Ok(())
}

/// Runs `rlm repl`.
pub fn repl(args: ReplArgs) -> anyhow::Result<()> {
    check_args(&args)?;
    // Asked for explicitly, the local model is downloaded when missing.
    let config = args.llm.load()?;
    if !config.local_auto_selected {
        super::fetch::ensure_local_model(&config, args.llm.offline)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run(args))
}

/// What to do without a model, said where `llm_query` would need one.
const HOW_TO_CONFIGURE: &str = "Configure one as for `rlm ask`: RLM_PROVIDER, RLM_BASE_URL and RLM_API_KEY (or --provider/--base-url, or [llm] in rlm.toml), or the embedded model with --provider local";

/// The model client, or why there is none. A configuration that is missing
/// only its API key means "no model" (the REPL still works without one);
/// any other configuration error is reported.
///
/// The local model chosen only because nothing was configured is not
/// downloaded for a REPL (that would fetch a gigabyte for a session that may
/// never call a model); asked for explicitly (`--provider local`), it is.
fn model(args: &ReplArgs) -> anyhow::Result<Result<(LlmClient, LlmConfig), String>> {
    let config = args.llm.load()?;
    if config.local_auto_selected && super::fetch::default_model_missing(&config)? {
        return Ok(Err(format!(
            "no model provider or API key is configured and the local model is not downloaded yet (`rlm model pull`). {HOW_TO_CONFIGURE}"
        )));
    }
    match LlmClient::from_config(config.clone()) {
        Ok(client) => Ok(Ok((client, config))),
        Err(missing @ LlmError::MissingApiKey { .. }) => {
            Ok(Err(format!("{missing}. {HOW_TO_CONFIGURE}.")))
        }
        Err(e) => Err(e.into()),
    }
}

async fn run(args: ReplArgs) -> anyhow::Result<()> {
    let file = SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = file.engine_config().map_err(anyhow::Error::msg)?;
    let store = args.store.open()?;
    let corpus = Arc::new(Corpus::load(store).context("cannot list the store's documents")?);
    let shape = ContextShape::from(args.context);
    let doc_count = corpus.documents().len();
    let context_chars = corpus.context_chars(shape);
    let mut sandbox = SandboxConfig::new(worker_command()?);
    sandbox.cell_time_limit = Duration::from_secs(args.cell_timeout);
    sandbox.memory_limit_bytes = args.memory_mib << 20;
    if let Some(name) = &args.sandbox {
        config.sandbox = name
            .parse()
            .map_err(|e| anyhow::anyhow!("--sandbox: {e}"))?;
    }
    sandbox.backend = config.sandbox;
    let sandbox_line = match config.sandbox {
        rlm_sandbox::SandboxBackend::Monty => "sandbox: monty".to_string(),
        rlm_sandbox::SandboxBackend::CPython => format!(
            "sandbox: {}",
            rlm_sandbox::cpython::launcher(None)
                .map_err(anyhow::Error::msg)?
                .describe()
        ),
    };
    config.context_shape = shape;
    let pool = WorkerPool::new(sandbox, 1).await?;
    let (mut console, model_line) = match model(&args)? {
        Ok((client, llm)) => {
            config.set_models(
                &llm.root.model,
                &llm.sub.model,
                llm.provider == rlm_llm::ProviderKind::Local,
            );
            let line = format!("model: {} (sub-calls: {})", llm.root.model, llm.sub.model);
            let engine = Engine::new(Arc::new(client), pool, config);
            let trace = Arc::new(Trace::new());
            (ReplConsole::with_model(&engine, corpus, trace).await?, line)
        }
        Err(reason) => {
            let line = format!("no model: {reason}");
            (
                ReplConsole::without_model(pool, config, corpus, reason).await?,
                line,
            )
        }
    };
    if args.jsonl {
        return run_jsonl(&mut console).await;
    }
    let shape = match args.context {
        ContextArg::String => "str",
        ContextArg::List => "list[str]",
    };
    eprintln!(
        "rlm repl: {doc_count} documents; context = {shape} ({context_chars} chars), documents = list[dict]\n\
         functions: {}\n\
         {model_line}\n\
         {sandbox_line}\n\
         A line ending in ':' (or an open bracket) starts a block; a blank line runs it. Ctrl-D quits.",
        function_list(console.has_model())
    );
    run_interactive(&mut console, args.truncate).await
}

/// The REPL's functions from the engine's table, marking those that need
/// the model when there is none.
fn function_list(has_model: bool) -> String {
    REPL_FUNCTIONS
        .iter()
        .map(|f| {
            if f.needs_model && !has_model {
                format!("{} [needs a model]", f.signature)
            } else {
                f.signature.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One JSON object per line in, one per line out; state persists across
/// lines. Lines are read as bytes: one that is not UTF-8 (or is longer than
/// [`MAX_JSONL_LINE_BYTES`]) gets an `InputError` reply and the loop goes on
/// with the same interpreter.
async fn run_jsonl(console: &mut ReplConsole) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut bytes = Vec::new();
    loop {
        let read = bounded::read_line(&mut input, &mut bytes, MAX_JSONL_LINE_BYTES)
            .context("cannot read stdin")?;
        let line = match read {
            Line::End => break,
            Line::TooLong => {
                bounded::skip_line(&mut input).context("cannot read stdin")?;
                Err(format!(
                    "the line is longer than the limit of {}",
                    bounded::size(MAX_JSONL_LINE_BYTES as u64)
                ))
            }
            Line::Complete => std::str::from_utf8(&bytes).map_err(|e| {
                format!(
                    "the line is not UTF-8 (invalid byte at offset {}); send JSON text",
                    e.valid_up_to()
                )
            }),
        };
        let line = match line {
            Ok(l) if l.trim().is_empty() => continue,
            Ok(l) => l,
            Err(message) => {
                write_reply(&mut out, &error_json("InputError", &message))?;
                continue;
            }
        };
        let mut reply = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(obj)) => match obj.get("code") {
                Some(Value::String(code)) => match console.run_cell(code).await {
                    Ok(r) => result_json(&r),
                    // The old interpreter is gone: the console continues on a fresh one.
                    Err(e) => error_json("SandboxError", &e.to_string()),
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
        if let Some(committed) = console.take_final().await {
            reply["final"] = match committed.text {
                Ok(text) => json!({"answer": text, "variable": committed.variable}),
                Err(e) => json!({"error": e.to_string(), "variable": committed.variable}),
            };
        }
        write_reply(&mut out, &reply)?;
    }
    Ok(())
}

/// One reply line of `--jsonl`, flushed.
fn write_reply(out: &mut impl Write, reply: &Value) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, reply)?;
    out.write_all(b"\n")?;
    out.flush()?;
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

async fn run_interactive(console: &mut ReplConsole, truncate: usize) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    // Cell output is the sandbox's (and so the corpus's or a model's) text:
    // on a terminal its escape sequences are shown, not obeyed.
    let out_tty = std::io::stdout().is_terminal();
    let show = |s: &str| for_output(s, out_tty).into_owned();
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
        match console.run_cell(&code).await {
            Ok(r) => print!("{}", show(&r.render(truncate))),
            Err(e) => {
                eprintln!("error: {}", one_line(&e.to_string()));
                eprintln!("(started a fresh interpreter; earlier variables are gone)");
            }
        }
        if let Some(committed) = console.take_final().await {
            match (committed.variable, committed.text) {
                (Some(name), Ok(text)) => println!("FINAL_VAR({}): {}", show(&name), show(&text)),
                (None, Ok(text)) => println!("FINAL: {}", show(&text)),
                (_, Err(e)) => println!("{}", show(&e.to_string())),
            }
        }
        std::io::stdout().flush()?;
    }
    Ok(())
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
