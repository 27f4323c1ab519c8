//! `rlm ask`: answer a question over a store with the RLM loop.
//!
//! Progress goes to stderr while the run goes on (a spinner on a terminal,
//! plain lines otherwise); the answer goes to stdout, as text or `--json`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use rlm_corpus::IndexOptions;
use rlm_engine::citations::CitationStatus;
use rlm_engine::values::table;
use rlm_engine::{
    Answer, AskedTurn, CancelToken, Conversation, Corpus, Engine, EngineSettings, Flow,
    FolderSessions, Question, QuestionSettings, ResolvedQuestion, SessionBackend, SessionTurn,
    SettingsFile, Source, Surface, Trace, TraceEvent, TraceRecord, ask_in_session,
};
use rlm_sandbox::{SandboxConfig, WORKER_ENV, WorkerCommand, WorkerPool};
use serde_json::json;

use super::corpus::{StoreArg, index_paths};
use super::display;
use super::llm::LlmFlags;

/// Arguments of `rlm ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    /// Files or folders to index into the store first (incrementally), so
    /// one command indexes and asks; without them the store is used as it is.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub store: StoreArg,
    /// Strategy: repl (the paper's loop over the whole corpus), pipeline (retrieval → files → per-file inspectors → merge), rag (RLM off: top-k retrieval, one answer call) or auto (a triage call picks rag or the RLM flow). Default: RLM_ENABLED picks RLM_FLOW (repl) or rag.
    #[arg(long, value_name = "FLOW")]
    pub flow: Option<String>,
    /// Per-file inspector of --flow pipeline: iterative, per-chunk, hypothesis or repl [env: RLM_INSPECTOR].
    #[arg(long, value_name = "INSPECTOR")]
    pub inspector: Option<String>,
    /// Print {answer, partial, citations, verification, usage, trace} as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also return the answer as JSON following this JSON Schema file (printed instead of the prose; with --json under "data", each value with its citations).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Write every step as JSONL to this file (`rlm trace show FILE` renders it).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Multi-turn session: earlier questions, answers and findings carry over.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Domain instructions added to the system prompt (like a project's PROMPT.md).
    #[arg(long, value_name = "FILE")]
    pub briefing: Option<PathBuf>,
    /// Shape of `context` in the REPL: string (one string with [DOCUMENT i: path] headers) or list [env: RLM_CONTEXT_SHAPE].
    #[arg(long, value_name = "SHAPE")]
    pub context_shape: Option<String>,
    /// Citation policy: best_effort (report) or strict (flag unsupported citations inline) [env: RLM_CITATIONS].
    #[arg(long, value_name = "POLICY")]
    pub citations: Option<String>,
    /// Checks of the answer: on (quotes checked verbatim, and one batched sub-model call judges whether each claim's passage entails it), quotes (the verbatim check only: claims stay unverified), semantic (as on, and claims not entailed are marked in the answer), or off [env: RLM_VERIFY].
    #[arg(long, value_name = "on|quotes|semantic|off")]
    pub verify: Option<String>,
    /// How the agents reply each turn: structured (a JSON turn the provider constrains; sources may name only passages the run was shown), text (```repl blocks and FINAL) or auto (structured; text where the endpoint refuses the schema) [env: RLM_TURN_FORMAT].
    #[arg(long, value_name = "auto|structured|text")]
    pub turn_format: Option<String>,
    /// Make every model call afresh: do not serve reproducible replies from the store's reply cache, nor keep new ones there [env: RLM_SUBCALL_CACHE=off].
    #[arg(long)]
    pub no_cache: bool,
    /// Also list the documents that match the question but back no claim (for "list every…" questions) [env: RLM_COVERAGE].
    #[arg(long)]
    pub coverage: bool,
    /// Model calls across the whole call tree [env: RLM_MAX_LLM_CALLS].
    #[arg(long, value_name = "N")]
    pub max_llm_calls: Option<String>,
    /// Deepest agent level; rlm_query there is a plain llm_query [env: RLM_MAX_DEPTH].
    #[arg(long, value_name = "N")]
    pub max_depth: Option<String>,
    /// Model turns of the root agent [env: RLM_MAX_CALLS].
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<String>,
    /// Cost cap in USD [env: RLM_MAX_COST_USD].
    #[arg(long, value_name = "USD")]
    pub max_cost_usd: Option<String>,
    /// Wall-clock cap for the question in seconds [env: RLM_MAX_WALL_SECS].
    #[arg(long, value_name = "SECS")]
    pub max_wall_secs: Option<String>,
    /// Which Python runs the REPL: monty (default; built in) or cpython (your Python and its packages, isolated by bubblewrap; Linux) [env: RLM_SANDBOX].
    #[arg(long, value_name = "monty|cpython")]
    pub sandbox: Option<String>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the root model's replies on stderr while they are generated.
    #[arg(long, conflicts_with = "quiet")]
    pub stream: bool,
    #[command(flatten)]
    pub llm: LlmFlags,
}

/// The worker: `$RLM_SANDBOX_WORKER` if set, else this `rlm` binary's hidden subcommand.
pub(crate) fn worker_command() -> anyhow::Result<WorkerCommand> {
    if std::env::var_os(WORKER_ENV).is_some_and(|v| !v.is_empty()) {
        return Ok(WorkerCommand::locate()?);
    }
    let exe =
        std::env::current_exe().context("cannot find the rlm executable to start the sandbox")?;
    Ok(WorkerCommand::rlm_subcommand(exe))
}

/// The sandbox workers of a command: this binary's worker subcommand (or
/// `$RLM_SANDBOX_WORKER`) and the configured back-end (`RLM_SANDBOX`,
/// `[engine] sandbox`, `--sandbox`), so the pool keeps that back-end warm.
pub(crate) fn sandbox_config(
    backend: rlm_sandbox::SandboxBackend,
) -> anyhow::Result<SandboxConfig> {
    let mut sandbox = SandboxConfig::new(worker_command()?);
    sandbox.backend = backend;
    Ok(sandbox)
}

/// The question's flags as the engine's per-question settings.
fn question_settings(args: &AskArgs) -> QuestionSettings {
    let mut q = QuestionSettings::new(Surface::Flags)
        .with(&table::INSPECTOR, args.inspector.clone())
        .with(&table::CITATIONS, args.citations.clone())
        .with(&table::VERIFY, args.verify.clone())
        .with(&table::TURN_FORMAT, args.turn_format.clone())
        .with(&table::CONTEXT_SHAPE, args.context_shape.clone())
        .with(&table::COVERAGE, args.coverage.then_some("true"))
        .with(&table::SUBCALL_CACHE, args.no_cache.then_some("off"))
        .with(&table::MAX_LLM_CALLS, args.max_llm_calls.clone())
        .with(&table::MAX_ITERATIONS, args.max_iterations.clone())
        .with(&table::MAX_DEPTH, args.max_depth.clone())
        .with(&table::MAX_COST_USD, args.max_cost_usd.clone())
        .with(&table::MAX_WALL_SECS, args.max_wall_secs.clone())
        .with(&table::SANDBOX, args.sandbox.clone());
    q.flow = args.flow.clone();
    q
}

/// The engine settings and the request's own: the flags over the
/// environment over rlm.toml's `[engine]`, checked by the engine.
/// Everything `rlm ask` checks about its arguments before it touches a
/// store, a file or a model: the question, and every setting from the flags,
/// the environment and `rlm.toml`.
pub(crate) fn check_question(args: &AskArgs) -> anyhow::Result<ResolvedQuestion> {
    if args.question.trim().is_empty() {
        bail!(
            "the question is empty; ask something, e.g. rlm ask \"What is the notice period?\" --store DIR"
        );
    }
    resolve_settings(args)
}

fn resolve_settings(args: &AskArgs) -> anyhow::Result<ResolvedQuestion> {
    let file = SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let base = file.engine_config().map_err(anyhow::Error::msg)?;
    question_settings(args)
        .resolve(&base)
        .map_err(anyhow::Error::msg)
}

/// The query embedder of a store with embeddings (the model it was embedded
/// with); `None`, with a one-line warning, when it cannot be loaded.
pub(crate) fn query_embedder(
    store: &dyn rlm_corpus::CorpusStore,
    llm: &rlm_llm::LlmConfig,
    config: Option<&std::path::Path>,
) -> Option<Arc<dyn rlm_corpus::Embedder>> {
    let settings =
        match rlm_corpus::EmbeddingSettings::load(Some(config.unwrap_or("rlm.toml".as_ref()))) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warning: {e}; retrieval uses BM25 only");
                return None;
            }
        };
    let endpoint = (
        llm.base_url.clone(),
        llm.api_key.as_ref().map(|k| k.expose().to_string()),
        llm.timeout,
    );
    // The model the store was embedded with decides the embedder.
    match settings.embedder_for_store(store, || Ok(endpoint)) {
        Ok(e) => e.map(Arc::from),
        Err(e) => {
            eprintln!("warning: {e}; retrieval uses BM25 only");
            None
        }
    }
}

/// The text of a `--briefing` file, if one was named (at most 1 MiB).
pub(crate) fn read_briefing(path: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    use rlm_llm::bounded::{BRIEFING_LIMIT, read_text};
    path.map(|p| read_text(p, "briefing", BRIEFING_LIMIT).map_err(anyhow::Error::msg))
        .transpose()
}

/// The JSON Schema of a `--schema` file, checked: a JSON document of the
/// subset rlm supports (at most 1 MiB).
pub(crate) fn read_schema(
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<serde_json::Value>> {
    use rlm_llm::bounded::{BRIEFING_LIMIT, read_text};
    let Some(path) = path else {
        return Ok(None);
    };
    let text = read_text(path, "schema", BRIEFING_LIMIT).map_err(anyhow::Error::msg)?;
    let schema: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--schema {}: not JSON ({e}); give a JSON Schema file, e.g. {{\"type\": \"object\", \"properties\": {{\"date\": {{\"type\": \"string\"}}}}, \"required\": [\"date\"]}}",
            path.display()
        )
    })?;
    rlm_llm::schema::check(&schema)
        .map_err(|e| anyhow::anyhow!("--schema {}: {e}", path.display()))?;
    Ok(Some(schema))
}

/// `rlm ask`.
pub fn ask(args: AskArgs) -> anyhow::Result<()> {
    let mut settings = check_question(&args)?;
    let answer_schema = read_schema(args.schema.as_deref())?;
    let briefing = read_briefing(args.briefing.as_deref())?;
    // The model first (a first run downloads it), then the folder.
    let llm_config = args.llm.load_for_answering()?;
    index_first(&args)?;
    let store = args.store.open()?;
    let sessions = match &args.session {
        Some(name) => {
            rlm_engine::session::validate_session_name(name)?;
            Some(store_sessions(&args.store.store)?)
        }
        None => None,
    };
    // Hybrid stage-1 retrieval for the flows that retrieve, when the store has embeddings.
    let embedder = (settings.flow != Flow::Repl)
        .then(|| query_embedder(store.as_ref(), &llm_config, args.llm.config.as_deref()))
        .flatten();
    settings.config.set_models(
        &llm_config.root.model,
        &llm_config.sub.model,
        llm_config.provider == rlm_llm::ProviderKind::Local,
    );
    let client = rlm_llm::LlmClient::from_config(llm_config)?;
    let trace = match &args.trace {
        Some(p) => {
            Trace::to_file(p).with_context(|| format!("cannot write trace {}", p.display()))?
        }
        None => Trace::new(),
    };
    let question = Question {
        text: args.question.clone(),
        settings,
        embedder,
        briefing,
        trace: Arc::new(trace),
        cancel: CancelToken::new(),
        conversation: match (&sessions, &args.session) {
            (Some(s), Some(name)) => Conversation::Session(SessionTurn {
                sessions: s.as_ref(),
                name: name.clone(),
                run_id: None,
                keep_cancelled: true,
                history_runs: None,
            }),
            _ => Conversation::None,
        },
        answer_schema,
    };
    let (trace, cancel) = (question.trace.clone(), question.cancel.clone());
    let asked = run_question(&args, client, store, question)?;
    if let Some(e) = asked.not_saved {
        return Err(e.into());
    }
    // The answer was produced, so it is printed; a trace that lost events
    // still fails the command.
    let trace_error = args.trace.as_ref().zip(trace.write_error()).map(|(p, e)| {
        format!(
            "the trace could not be written to {}: {e} (it is incomplete)",
            p.display()
        )
    });
    print_answer(&asked.answer, &args, trace_error.is_none())?;
    if cancel.is_cancelled() {
        if let Some(e) = &trace_error {
            eprintln!("error: {e}");
        }
        std::process::exit(130);
    }
    match trace_error {
        Some(e) => Err(anyhow::Error::msg(e)),
        None => Ok(()),
    }
}

/// Indexes the paths given with the question into the store first
/// (incrementally), saying what changed unless `--quiet`.
fn index_first(args: &AskArgs) -> anyhow::Result<()> {
    if args.paths.is_empty() {
        return Ok(());
    }
    let report = index_paths(
        &args.store.store,
        &args.paths,
        &IndexOptions::default(),
        !args.quiet,
    )?;
    if !args.quiet {
        eprintln!(
            "indexed into {}: {} added, {} updated, {} unchanged, {} removed",
            args.store.display(),
            report.added,
            report.updated,
            report.unchanged,
            report.removed
        );
    }
    Ok(())
}

/// The sessions kept with the store `store` names: a store folder's
/// `sessions.sqlite`, or over PostgreSQL the sessions `rlm serve` nodes
/// share (`rlm ask --session` and `rlm mcp` keep theirs there too).
pub(crate) fn store_sessions(store: &Path) -> anyhow::Result<Box<dyn SessionBackend>> {
    Ok(match super::corpus::postgres_url(store) {
        Some(url) => {
            rlm_cluster::Cluster::connect(url, rlm_cluster::ClusterOptions::default())
                .map_err(anyhow::Error::msg)?
                .state()
                .sessions
        }
        None => Box::new(FolderSessions::open(store)?),
    })
}

/// Answers `question` on a runtime of its own: the corpus loaded, one
/// sandbox worker, progress on stderr unless `--quiet`, Ctrl-C cancelling
/// the run (the answer is then partial).
fn run_question(
    args: &AskArgs,
    client: rlm_llm::LlmClient,
    store: Arc<dyn rlm_corpus::CorpusStore>,
    question: Question<'_>,
) -> anyhow::Result<AskedTurn> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let corpus = Arc::new(Corpus::load(store)?);
        let config = question.settings.config.clone();
        let pool = WorkerPool::new(sandbox_config(config.sandbox)?, 1).await?;
        let engine = Engine::new(Arc::new(client), pool, config);
        let progress = (!args.quiet)
            .then(|| tokio::spawn(render_progress(question.trace.subscribe(), args.stream)));
        let cancel = question.cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
        let asked = ask_in_session(&engine, corpus, question).await;
        if let Some(p) = progress {
            // The progress task ends when it has drained the finished run.
            let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
        }
        Ok(asked?)
    })
}

/// The answer's passages, numbered: the sources of its supported claims
/// (their passage entails them), then the related passages (found, but not
/// judged to state their claim); each claim with its entailment and, apart,
/// its quote check; the claims no passage backs; the counts.
fn print_sources(out: &mut impl Write, answer: &Answer) -> anyhow::Result<()> {
    let Some(g) = &answer.grounded else {
        return Ok(());
    };
    let sources = answer.sources();
    let related = answer.related_sources();
    print_passages(out, "Sources:", &sources, 0)?;
    print_passages(
        out,
        "Related passages (found, but not judged to state their claim; not sources):",
        &related,
        sources.len(),
    )?;
    if !answer.claims.is_empty() {
        writeln!(out, "\nClaims (entailment; quote check, apart):")?;
        for c in answer.claim_summaries() {
            let refs: String = c.passages.iter().map(|n| format!("[{n}]")).collect();
            let refs = if refs.is_empty() {
                refs
            } else {
                format!(" {refs}")
            };
            writeln!(
                out,
                "  - {}{refs}; {}: {}",
                c.support.label(),
                c.quote_check.label(),
                display::one_line(c.text.trim())
            )?;
        }
    }
    let unsupported = answer.unsupported_claims();
    if !unsupported.is_empty() {
        writeln!(out, "\nNot supported by any passage found:")?;
        for c in unsupported {
            writeln!(out, "  - {}", display::one_line(c))?;
        }
    }
    writeln!(
        out,
        "\nGrounded: {} of {} claims supported ({} by a citation the engine attached); {} related, {} contradicted, {} unverified, {} without a passage",
        g.supported,
        g.claims,
        g.engine_attached,
        g.related,
        g.contradicted,
        g.unverified,
        g.unsupported
    )?;
    if let Some(c) = &g.coverage {
        writeln!(
            out,
            "Coverage: {} of {} documents matching the question are cited",
            c.cited, c.matching
        )?;
        for p in c.uncited.iter().take(20) {
            writeln!(out, "  not cited: {}", display::one_line(p))?;
        }
        if c.uncited.len() > 20 {
            writeln!(out, "  … and {} more", c.uncited.len() - 20)?;
        }
    }
    if let Some(s) = &g.semantic {
        writeln!(
            out,
            "Entailment check: {} claims judged ({} entailed, {} not entailed, {} contradicted, {} not claims), {} from the cache; {} calls, {} tokens{}{}",
            s.checked,
            s.entailed,
            s.not_entailed,
            s.contradicted,
            s.not_claims,
            s.cached,
            s.calls,
            s.input_tokens + s.output_tokens,
            s.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default(),
            s.stopped
                .as_deref()
                .map(|r| format!("; stopped: {}", display::one_line(r)))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// A numbered list of passages (path, line or chunk, quote; who attached
/// it), numbered from `after + 1`.
fn print_passages(
    out: &mut impl Write,
    title: &str,
    passages: &[Source],
    after: usize,
) -> anyhow::Result<()> {
    if passages.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title}")?;
    for (i, s) in passages.iter().enumerate() {
        let place = rlm_engine::citations::place_words(
            s.location.as_deref(),
            s.line,
            s.chunk_id.as_deref(),
        );
        let by = if s.attached_by_engine {
            " (attached by the engine)"
        } else {
            ""
        };
        writeln!(
            out,
            "  [{}] {}, {place}: \"{}\"{by}",
            after + i + 1,
            display::one_line(&s.path),
            display::one_line(&s.quote)
        )?;
    }
    Ok(())
}

/// The answer on stdout, usage on stderr; `trace_written` is false when the
/// trace file failed (its path is then not reported as a trace).
/// With `--schema`, the typed answer is the output (stdout stays JSON for
/// scripts) and the prose follows on stderr; `true` when it was printed.
/// No typed answer is an error that says why, with the prose.
/// The sets the run counted over: each scan, its count, whether counting
/// again gave the same, whether the answer states it, and chunks to open.
fn print_counted(out: &mut impl Write, answer: &Answer) -> anyhow::Result<()> {
    if answer.counted.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nCounted over:")?;
    for c in &answer.counted {
        let recount = match c.recounted {
            Some(true) => "counted again: same",
            Some(false) => "COUNTED AGAIN: DIFFERENT (the corpus changed, or the scan was cut)",
            None => "not counted again",
        };
        let stated = if c.count_in_answer {
            "; the answer states this count"
        } else {
            ""
        };
        let case = if c.ignore_case {
            ""
        } else {
            " (case-sensitive)"
        };
        let who = if c.by_engine {
            " (the engine's count of a word of the question)"
        } else {
            ""
        };
        writeln!(
            out,
            "  - {}{case}{who}: {}; {recount}{stated}",
            c.written(),
            c.extent()
        )?;
        if !c.chunk_ids.is_empty() {
            let shown: Vec<&str> = c.chunk_ids.iter().take(5).map(String::as_str).collect();
            let more = c.chunk_ids.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            writeln!(out, "    chunks: {}{more} (rlm show ID)", shown.join(", "))?;
        }
    }
    Ok(())
}

fn print_typed(out: &mut impl Write, answer: &Answer, args: &AskArgs) -> anyhow::Result<bool> {
    let Some(data) = &answer.data else {
        return Ok(false);
    };
    match &data.value {
        Some(value) => {
            writeln!(out, "{}", serde_json::to_string_pretty(value)?)?;
            if !args.quiet {
                eprintln!("{}", answer.answer.trim_end());
            }
            Ok(true)
        }
        None => bail!(
            "no answer in the --schema shape: {}. The answer in words:\n{}",
            data.error.as_deref().unwrap_or("unknown reason"),
            answer.answer.trim_end()
        ),
    }
}

fn print_answer(answer: &Answer, args: &AskArgs, trace_written: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut v = serde_json::to_value(answer)?;
        v["trace"]["path"] = json!(args.trace.as_ref().map(|p| p.display().to_string()));
        // The passages as the text output numbers them: the sources of the
        // supported claims, then the related passages (not sources).
        v["sources"] = json!(answer.sources());
        v["related_sources"] = json!(answer.related_sources());
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    if print_typed(&mut out, answer, args)? {
        return Ok(());
    }
    writeln!(out, "{}", answer.answer.trim_end())?;
    if let Some(v) = &answer.verification
        && !v.citations.is_empty()
    {
        // The quote check of the model's own markers (whether a passage
        // states the claim is the Claims list's business).
        let ok = v.citations.iter().filter(|c| c.status.is_valid()).count();
        writeln!(
            out,
            "\nCitations: {} ({} quote verified, {} not verified)",
            v.citations.len(),
            ok,
            v.failed
        )?;
        for c in &v.citations {
            let mark = match c.status {
                CitationStatus::Verified => "verified",
                CitationStatus::IdOnly => "ID ONLY, not verified",
                CitationStatus::UnknownId => "UNKNOWN ID",
                CitationStatus::QuoteNotFound => "QUOTE NOT FOUND",
                CitationStatus::PathMismatch => "PATH MISMATCH",
                CitationStatus::CopiedFromDocument => "COPIED FROM A DOCUMENT, not a citation",
            };
            let place = c.path.clone().unwrap_or_else(|| "?".into());
            let chunk = c
                .chunk_id
                .as_deref()
                .map(|id| format!(" chunk {id}"))
                .unwrap_or_default();
            writeln!(out, "  [{mark}] {place}{chunk}")?;
        }
    }
    print_sources(&mut out, answer)?;
    print_counted(&mut out, answer)?;
    if !answer.file_summaries.is_empty() {
        writeln!(out, "\nFiles: {}", answer.file_summaries.len())?;
        for f in &answer.file_summaries {
            writeln!(
                out,
                "  {} ({} of {} chunks selected by the {} inspector)",
                f.path,
                f.selected_chunk_ids.len(),
                f.total_chunks,
                f.inspector.as_str()
            )?;
        }
    }
    if let Some(r) = &answer.flow_report {
        if !r.dropped_claims.is_empty() {
            writeln!(
                out,
                "\nDropped by the strict citation policy (no verified citation): {}",
                r.dropped_claims.len()
            )?;
            for c in &r.dropped_claims {
                writeln!(out, "  - {}", first_line(c))?;
            }
        }
        // The same claims as "Not supported by any passage found" above
        // (no verified citation, the answer's or the engine's): counted, not
        // listed twice.
        if !r.unsupported_claims.is_empty() {
            writeln!(
                out,
                "\nKept by the best_effort citation policy: {} claim(s) without a verified citation (listed under \"Not supported by any passage found\")",
                r.unsupported_claims.len()
            )?;
        }
    }
    print_usage(answer, args, trace_written)
}

/// The partial reason and the usage line on stderr.
fn print_usage(answer: &Answer, args: &AskArgs, trace_written: bool) -> anyhow::Result<()> {
    let u = &answer.usage;
    let cost = u
        .cost_usd
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "cost unknown".into());
    let mut err = std::io::stderr().lock();
    if let Some(r) = &answer.partial_reason {
        writeln!(err, "partial answer: {r}")?;
    }
    if !args.quiet {
        writeln!(
            err,
            "{} calls, {} input tokens ({} cached), {} output tokens, {cost}, {:.1} s",
            u.calls,
            u.input_tokens,
            u.cached_input_tokens,
            u.output_tokens,
            u.wall_ms as f64 / 1000.0
        )?;
        if u.cached_calls > 0 {
            writeln!(
                err,
                "{} calls served from the store's reply cache ({} tokens saved)",
                u.cached_calls, u.tokens_saved
            )?;
        }
        if let Some(p) = args.trace.as_ref().filter(|_| trace_written) {
            writeln!(
                err,
                "trace: {} ({} events)",
                p.display(),
                answer.trace.events
            )?;
        }
    }
    Ok(())
}

/// Live counters shown while the run goes on.
#[derive(Default)]
struct Progress {
    turn: u32,
    depth: u32,
    cells: u32,
    in_flight: i64,
    tokens: u64,
    cost: f64,
    /// The end of the root's reply being generated, for the spinner.
    live: String,
    live_attempt: u32,
}

impl Progress {
    fn line(&self) -> String {
        let mut line = format!(
            "turn {} · depth {} · cells {} · sub-calls in flight {} · {} tokens · ${:.4}",
            self.turn, self.depth, self.cells, self.in_flight, self.tokens, self.cost
        );
        if let Some(last) = self.live.lines().rev().find(|l| !l.trim().is_empty()) {
            line.push_str(" ▸ ");
            line.push_str(tail_chars(last.trim(), 60));
        }
        line
    }

    /// Adds streamed text of the root's reply; a new attempt starts over.
    fn stream(&mut self, attempt: u32, text: &str) {
        if attempt != self.live_attempt {
            self.live.clear();
            self.live_attempt = attempt;
        }
        self.live.push_str(text);
        let keep = self.live.len().saturating_sub(400);
        if keep > 0 {
            let cut = (keep..self.live.len())
                .find(|&i| self.live.is_char_boundary(i))
                .unwrap_or(self.live.len());
            self.live.drain(..cut);
        }
    }
}

/// The last `n` characters of `s`.
fn tail_chars(s: &str, n: usize) -> &str {
    match s.char_indices().rev().nth(n.saturating_sub(1)) {
        Some((i, _)) if n > 0 => &s[i..],
        _ if n == 0 => "",
        _ => s,
    }
}

/// Renders trace events on stderr until the run finishes; with `stream`,
/// the root's replies too, as they are generated (instead of a spinner).
async fn render_progress(mut rx: tokio::sync::broadcast::Receiver<TraceRecord>, stream: bool) {
    let tty = std::io::stderr().is_terminal();
    let bar = (tty && !stream).then(|| {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b.enable_steady_tick(Duration::from_millis(120));
        b
    });
    use std::sync::atomic::Ordering::Relaxed;
    // Streamed text ends mid-line; a progress line starts on its own.
    let mid_line = std::sync::atomic::AtomicBool::new(false);
    let say = |line: String| match &bar {
        Some(b) => b.println(line),
        None => {
            let sep = if mid_line.swap(false, Relaxed) {
                "\n"
            } else {
                ""
            };
            eprintln!("{sep}{line}");
        }
    };
    let mut p = Progress::default();
    loop {
        let rec = match rx.recv().await {
            Ok(r) => r,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => break,
        };
        let secs = rec.t_ms as f64 / 1000.0;
        match &rec.event {
            TraceEvent::RunFinished { .. } => break,
            TraceEvent::LlmDelta {
                agent,
                attempt,
                text,
                ..
            } if agent == "0" => {
                if stream {
                    if *attempt != p.live_attempt {
                        say(format!("[{secs:6.1}s] [0] retrying; the reply starts over"));
                    }
                    eprint!("{text}");
                    mid_line.store(!text.ends_with('\n'), Relaxed);
                }
                p.stream(*attempt, text);
            }
            event => {
                if let Some(line) = p.record(event, tty) {
                    say(format!("[{secs:6.1}s] {line}"));
                }
            }
        }
        if let Some(b) = &bar {
            b.set_message(p.line());
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

impl Progress {
    /// Counts `event` in and returns the line it is reported with, if any
    /// (sub-agents' model replies only when stderr is not a terminal).
    fn record(&mut self, event: &TraceEvent, tty: bool) -> Option<String> {
        Some(match event {
            TraceEvent::RunStarted {
                documents,
                context_chars,
                root_model,
                ..
            } => format!("{documents} documents, {context_chars} characters; model {root_model}"),
            TraceEvent::LlmRequest {
                agent,
                depth,
                iteration,
                ..
            } => {
                self.depth = self.depth.max(*depth);
                if agent == "0" {
                    if *iteration > 0 {
                        self.turn = *iteration;
                    }
                    self.live.clear();
                    self.live_attempt = 1;
                }
                return None;
            }
            TraceEvent::LlmResponse {
                agent,
                input_tokens,
                output_tokens,
                cost_usd,
                latency_ms,
                ..
            } => {
                self.tokens += input_tokens + output_tokens;
                self.cost += cost_usd.unwrap_or(0.0);
                if agent == "0" {
                    self.live.clear();
                }
                if agent.contains('.') && tty {
                    return None;
                }
                format!(
                    "[{agent}] model replied: {input_tokens} in / {output_tokens} out, {latency_ms} ms"
                )
            }
            TraceEvent::CellOutput {
                agent,
                error,
                elapsed_ms,
                ..
            } => {
                self.cells += 1;
                let status = error
                    .as_deref()
                    .map(|e| format!("error: {}", first_line(e)))
                    .unwrap_or_else(|| "ok".into());
                format!("[{agent}] cell ran in {elapsed_ms} ms: {status}")
            }
            TraceEvent::SubcallStart { depth, .. } => {
                self.in_flight += 1;
                self.depth = self.depth.max(*depth);
                return None;
            }
            TraceEvent::SubcallEnd { .. } => {
                self.in_flight -= 1;
                return None;
            }
            TraceEvent::Finding { agent, text, .. } => {
                format!("[{agent}] finding: {}", first_line(text))
            }
            TraceEvent::Final {
                agent,
                via,
                deferred,
                ..
            } if agent == "0" => {
                let what = if *deferred {
                    "FINAL deferred (sub-call results not seen yet)"
                } else {
                    "final answer committed"
                };
                format!("[0] {what} ({via})")
            }
            TraceEvent::BudgetExhausted { agent, reason, .. } => {
                format!("[{agent}] stopped: {reason}")
            }
            TraceEvent::LlmError { agent, message, .. } => {
                format!("[{agent}] model error: {}", first_line(message))
            }
            TraceEvent::LlmRetry {
                agent,
                attempt,
                of,
                reason,
                ..
            } => format!("[{agent}] retrying {attempt}/{of}: {}", first_line(reason)),
            TraceEvent::FlowStep { agent, message, .. } => {
                format!("[{agent}] {}", first_line(message))
            }
            TraceEvent::Fallback {
                agent,
                kind,
                reason,
            } => format!("[{agent}] fallback ({kind}): {}", first_line(reason)),
            _ => return None,
        })
    }
}

fn first_line(s: &str) -> &str {
    let l = s.lines().next().unwrap_or("");
    match l.char_indices().nth(160) {
        Some((i, _)) => &l[..i],
        None => l,
    }
}
