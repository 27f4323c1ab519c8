//! `rlm`: question answering over document collections far larger than a
//! model's context, by Recursive Language Models.
//!
//! Each subcommand lives in its own module under `commands/`; this file only
//! parses the command line and turns errors into one-line messages and exit
//! codes.

#[cfg(test)]
mod cli_fuzz;
mod commands;
mod settings_names;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Counts allocations so `rlm __sandbox-worker` can enforce the sandbox memory
/// limit; in every other command no limit is armed and it only counts.
#[global_allocator]
static ALLOCATOR: rlm_sandbox::LimitedAllocator = rlm_sandbox::LimitedAllocator;

/// Command-line interface of `rlm`.
#[derive(Debug, Parser)]
#[command(name = "rlm", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Every subcommand. Add one variant per command and one arm in `run`.
#[derive(Debug, Subcommand)]
enum Command {
    /// Ingest files and folders into a store (incremental, atomic).
    Index(commands::corpus::IndexArgs),
    /// Search the chunks of a store (BM25, vector or hybrid).
    Search(commands::corpus::SearchArgs),
    /// Show one chunk or one document by id.
    Show(commands::corpus::ShowArgs),
    /// List the documents of a store.
    Docs(commands::corpus::DocsArgs),
    /// Talk to the configured model: `rlm llm chat "prompt"`, `rlm llm check`.
    Llm(commands::llm::LlmArgs),
    /// The model's Python sandbox over a store, for a person (or `--jsonl` for programs).
    Repl(commands::repl::ReplArgs),
    /// Answer a question over a store with the RLM loop (live progress on stderr).
    Ask(Box<commands::ask::AskArgs>),
    /// Show a run's trace as a tree, or export it (`rlm trace show FILE`).
    Trace(commands::trace::TraceArgs),
    /// Serve the HTTP API (steps streamed over SSE, sessions, OpenAPI) and the web UI.
    Serve(Box<commands::serve::ServeArgs>),
    /// Serve the store to coding agents over the Model Context Protocol (stdio):
    /// tools ask, search, show, list_documents (index with --allow-index), documents as resources.
    Mcp(Box<commands::mcp::McpArgs>),
    /// Reproducible benchmarks (`rlm bench index`).
    Bench(commands::bench::BenchArgs),
    /// The embedded local model: `rlm model pull`, `rlm model list`.
    Model(commands::model::ModelArgs),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Index(args) => commands::corpus::index(args),
        Command::Search(args) => commands::corpus::search(args),
        Command::Show(args) => commands::corpus::show(args),
        Command::Docs(args) => commands::corpus::docs(args),
        Command::Llm(args) => commands::llm::run(args),
        Command::Repl(args) => commands::repl::repl(args),
        Command::Ask(args) => commands::ask::ask(*args),
        Command::Trace(args) => commands::trace::run(args),
        Command::Serve(args) => commands::serve::serve(*args),
        Command::Mcp(args) => commands::mcp::mcp(*args),
        Command::Bench(args) => commands::bench::bench(args),
        Command::Model(args) => commands::model::run(args),
    }
}

fn main() -> ExitCode {
    // The sandbox worker is a hidden subcommand so an installed `rlm` is self-contained.
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some(rlm_sandbox::RLM_WORKER_SUBCOMMAND) {
        return ExitCode::from(rlm_sandbox::worker::run_worker(&raw[2..]).clamp(0, 255) as u8);
    }
    // rlm.toml's `[store] location` stands in for RLM_STORE (flags > env > file).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match commands::store_config::location_from_config(&args, std::env::var_os("RLM_STORE")) {
        Ok(Some(location)) => {
            // SAFETY: no other thread exists yet (nothing is parsed or started).
            unsafe { std::env::set_var("RLM_STORE", location) };
        }
        Ok(None) => {}
        Err(err) => {
            eprintln!("error: {}", commands::display::error_line(&err));
            return ExitCode::FAILURE;
        }
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line: the outermost message plus its causes, never a backtrace.
            eprintln!("error: {}", commands::display::error_line(&err));
            ExitCode::FAILURE
        }
    }
}
