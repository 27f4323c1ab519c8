//! `rlm trace show FILE` (the steps of a run as a tree) and
//! `rlm trace export FILE --format rlm-logger` (the reference library's log
//! format, so its visualizer can open our runs).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rlm_engine::trace::{export_rlm_logger, read_trace};
use rlm_engine::{TraceEvent, TraceRecord};

use super::display::one_line;

/// `rlm trace ...`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// Render a trace written by `rlm ask --trace FILE` as a tree.
    Show(ShowArgs),
    /// Convert a trace to another format.
    Export(ExportArgs),
}

/// `rlm trace show`.
#[derive(Debug, Args)]
struct ShowArgs {
    /// The JSONL trace file.
    file: PathBuf,
    /// Also print model replies and cell outputs in full.
    #[arg(long)]
    full: bool,
    /// Print the tree as JSON: run-level events, then each agent with its
    /// events (in order) and its child agents.
    #[arg(long)]
    json: bool,
}

/// `rlm trace export`.
#[derive(Debug, Args)]
struct ExportArgs {
    /// The JSONL trace file.
    file: PathBuf,
    /// Output format: rlm-logger (alexzhang13/rlm's RLMLogger JSONL).
    #[arg(long, default_value = "rlm-logger")]
    format: String,
    /// Write here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `rlm trace`.
pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Show(a) => show(a),
        TraceCommand::Export(a) => export(a),
    }
}

fn load(file: &Path) -> anyhow::Result<Vec<TraceRecord>> {
    let records = read_trace(file).map_err(anyhow::Error::msg)?;
    if records.is_empty() {
        bail!(
            "{} holds no events; write one with `rlm ask ... --trace FILE`",
            file.display()
        );
    }
    Ok(records)
}

fn export(args: ExportArgs) -> anyhow::Result<()> {
    if args.format != "rlm-logger" {
        bail!(
            "unknown export format {:?}; the available format is rlm-logger",
            args.format
        );
    }
    let records = load(&args.file)?;
    let mut text = String::new();
    for line in export_rlm_logger(&records) {
        text.push_str(&serde_json::to_string(&line)?);
        text.push('\n');
    }
    match &args.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

/// One line of at most `n` characters (newlines shown as ⏎; other control
/// characters are escaped when the whole line is written).
fn clip(s: &str, n: usize) -> String {
    let flat: String = s
        .trim()
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    match flat.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

fn indent(agent: &str) -> String {
    "  ".repeat(agent.matches('.').count() + 1)
}

/// The trace as a tree of agents (ids are dotted paths: `0`, `0.2`, `0.2.1`).
fn tree_json(records: &[TraceRecord]) -> serde_json::Value {
    use std::collections::BTreeMap;
    let mut run_events = Vec::new();
    // Agents in order of first appearance, with their events.
    let mut order: Vec<String> = Vec::new();
    let mut events: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for r in records {
        let v = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
        match r.event.agent() {
            Some(agent) => {
                if !events.contains_key(agent) {
                    order.push(agent.to_string());
                }
                events.entry(agent.to_string()).or_default().push(v);
            }
            None => run_events.push(v),
        }
    }
    fn node(
        id: &str,
        order: &[String],
        events: &mut BTreeMap<String, Vec<serde_json::Value>>,
    ) -> serde_json::Value {
        let children: Vec<serde_json::Value> = order
            .iter()
            .filter(|c| c.rsplit_once('.').map(|(p, _)| p) == Some(id))
            .map(|c| node(c, order, events))
            .collect();
        serde_json::json!({
            "agent": id,
            "depth": id.matches('.').count(),
            "events": events.remove(id).unwrap_or_default(),
            "children": children,
        })
    }
    // Top-level agents: those whose parent never appears (normally just `root`).
    let tops: Vec<serde_json::Value> = order
        .iter()
        .filter(|a| {
            a.rsplit_once('.')
                .is_none_or(|(p, _)| !order.iter().any(|o| o == p))
        })
        .map(|a| node(a, &order, &mut events))
        .collect();
    serde_json::json!({ "run": run_events, "agents": tops })
}

fn show(args: ShowArgs) -> anyhow::Result<()> {
    let records = load(&args.file)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&tree_json(&records))?
        )?;
        return Ok(());
    }
    let mut lines = TreeLines {
        width: if args.full { usize::MAX } else { 120 },
        sent_at: HashMap::new(),
        first_text: HashMap::new(),
    };
    for r in &records {
        // A trace is a file anyone can hand over: every field it supplies
        // stays on its line, and escape sequences are shown, not obeyed.
        for line in lines.of(r) {
            writeln!(out, "{}", one_line(&line))?;
        }
    }
    Ok(())
}

/// The lines `rlm trace show` prints for each record of a trace, in order.
struct TreeLines<'a> {
    /// Characters of a clipped field.
    width: usize,
    /// Per agent: when its pending request was sent, and when its first
    /// streamed text arrived (time to first token, shown on the reply line).
    sent_at: HashMap<&'a str, u64>,
    first_text: HashMap<&'a str, u64>,
}

impl<'a> TreeLines<'a> {
    /// The record's line, then lines after it (the question, usage per
    /// depth); none for a streamed piece (the reply is shown whole).
    fn of(&mut self, r: &'a TraceRecord) -> Vec<String> {
        let t = format!("{:7.2}s", r.t_ms as f64 / 1000.0);
        let width = self.width;
        let mut more: Vec<String> = Vec::new();
        let line = match &r.event {
            TraceEvent::LlmRequest { .. }
            | TraceEvent::LlmDelta { .. }
            | TraceEvent::LlmResponse { .. }
            | TraceEvent::LlmError { .. } => match self.model_line(&t, r) {
                Some(line) => line,
                None => return Vec::new(),
            },
            TraceEvent::RunStarted { .. }
            | TraceEvent::Verification { .. }
            | TraceEvent::RunFinished { .. } => run_line(&t, &r.event, width, &mut more),
            TraceEvent::Cell { .. }
            | TraceEvent::CellOutput { .. }
            | TraceEvent::SubcallStart { .. }
            | TraceEvent::SubcallEnd { .. }
            | TraceEvent::Finding { .. }
            | TraceEvent::Final { .. } => step_line(&t, &r.event, width),
            TraceEvent::BudgetExhausted { .. }
            | TraceEvent::Error { .. }
            | TraceEvent::FlowStep { .. }
            | TraceEvent::LlmRetry { .. }
            | TraceEvent::Fallback { .. } => notice_line(&t, &r.event, width),
        };
        std::iter::once(line).chain(more).collect()
    }

    /// The line of a model request, reply or error; `None` for a streamed
    /// piece, whose time only marks the reply's first text.
    fn model_line(&mut self, t: &str, r: &'a TraceRecord) -> Option<String> {
        let width = self.width;
        Some(match &r.event {
            TraceEvent::LlmRequest {
                agent,
                depth,
                iteration,
                purpose,
                message_count,
                ..
            } => {
                self.sent_at.insert(agent, r.t_ms);
                self.first_text.remove(agent.as_str());
                format!(
                    "{t} {}[{agent}] depth {depth} {} request{} ({message_count} messages)",
                    indent(agent),
                    serde_json::to_value(purpose)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    if *iteration > 0 {
                        format!(" turn {iteration}")
                    } else {
                        String::new()
                    }
                )
            }
            TraceEvent::LlmDelta { agent, .. } => {
                self.first_text.entry(agent).or_insert(r.t_ms);
                return None;
            }
            TraceEvent::LlmResponse {
                agent,
                text,
                input_tokens,
                output_tokens,
                cached_input_tokens,
                latency_ms,
                from_cache,
                draft,
                ..
            } => {
                let mut how = String::new();
                if *from_cache {
                    how.push_str(", from the reply cache");
                }
                if let Some(d) = draft {
                    how.push_str(&format!(
                        ", draft kept {} of {} tokens",
                        d.accepted, d.proposed
                    ));
                }
                let first = match (
                    self.first_text.get(agent.as_str()),
                    self.sent_at.get(agent.as_str()),
                ) {
                    (Some(f), Some(s)) => format!(", first text after {} ms", f.saturating_sub(*s)),
                    _ => String::new(),
                };
                format!(
                    "{t} {}[{agent}] reply {input_tokens} in ({cached_input_tokens} cached) / {output_tokens} out, {latency_ms} ms{first}{how}: {}",
                    indent(agent),
                    clip(text, width)
                )
            }
            TraceEvent::LlmError { agent, message, .. } => format!(
                "{t} {}[{agent}] MODEL ERROR: {}",
                indent(agent),
                clip(message, width)
            ),
            _ => unreachable!("TreeLines::of passes only model events"),
        })
    }
}

/// The line of the run's start (the question in `more`), its verification
/// or its end (the usage per depth in `more`).
fn run_line(t: &str, event: &TraceEvent, width: usize, more: &mut Vec<String>) -> String {
    match event {
        TraceEvent::RunStarted {
            run_id,
            question,
            flow,
            root_model,
            sub_model,
            documents,
            context_chars,
            ..
        } => {
            more.push(format!("{t} question: {}", clip(question, width)));
            format!(
                "{t} run {run_id} ({flow}) · {documents} documents, {context_chars} chars · models {root_model} / {sub_model}"
            )
        }
        TraceEvent::Verification { report } => format!(
            "{t} verification: {} citations, {} unsupported, all_valid={}",
            report["citations"].as_array().map_or(0, Vec::len),
            report["failed"],
            report["all_valid"]
        ),
        TraceEvent::RunFinished {
            partial,
            reason,
            usage,
        } => {
            let s = format!(
                "{t} finished{} · {} calls, {} in / {} out tokens ({} cached), cost {}",
                if *partial {
                    format!(" (partial: {})", reason.as_deref().unwrap_or("?"))
                } else {
                    String::new()
                },
                usage.calls,
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens,
                usage
                    .cost_usd
                    .map(|c| format!("${c:.4}"))
                    .unwrap_or_else(|| "unknown".into())
            );
            for d in &usage.by_depth {
                more.push(format!(
                    "{t}   depth {}: {} calls, {} in / {} out",
                    d.depth, d.calls, d.input_tokens, d.output_tokens
                ));
            }
            s
        }
        _ => unreachable!("TreeLines::of passes only run events"),
    }
}

/// The line of an agent's step: a cell, its output, a sub-call's start or
/// end, a finding, a final answer.
fn step_line(t: &str, event: &TraceEvent, width: usize) -> String {
    match event {
        TraceEvent::Cell {
            agent, index, code, ..
        } => {
            format!(
                "{t} {}[{agent}] cell {}: {}",
                indent(agent),
                index + 1,
                clip(code, width)
            )
        }
        TraceEvent::CellOutput {
            agent,
            stdout,
            error,
            elapsed_ms,
            host_calls,
            ..
        } => {
            let mut s = format!(
                "{t} {}[{agent}] output ({elapsed_ms} ms, {host_calls} host calls): {}",
                indent(agent),
                clip(stdout, width)
            );
            if let Some(e) = error {
                s.push_str(&format!(" · ERROR {}", clip(e, width)));
            }
            s
        }
        TraceEvent::SubcallStart {
            agent,
            parent,
            depth,
            kind,
            prompt_preview,
        } => format!(
            "{t} {}├─ [{agent}] {kind} from [{parent}] at depth {depth}: {}",
            indent(parent),
            clip(prompt_preview, width)
        ),
        TraceEvent::SubcallEnd {
            agent,
            parent,
            ok,
            result,
            elapsed_ms,
            ..
        } => format!(
            "{t} {}└─ [{agent}] {} in {elapsed_ms} ms: {}",
            indent(parent),
            if *ok { "done" } else { "FAILED" },
            clip(result, width)
        ),
        TraceEvent::Finding {
            agent,
            text,
            source,
        } => format!(
            "{t} {}[{agent}] finding: {}{}",
            indent(agent),
            clip(text, width),
            source
                .as_ref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        ),
        TraceEvent::Final {
            agent,
            answer,
            via,
            deferred,
            ..
        } => format!(
            "{t} {}[{agent}] {} via {via}: {}",
            indent(agent),
            if *deferred { "FINAL deferred" } else { "FINAL" },
            clip(answer, width)
        ),
        _ => unreachable!("TreeLines::of passes only agent steps"),
    }
}

/// The line of what happened to an agent besides its steps: a budget ran
/// out, an error, a flow's step, a fallback.
fn notice_line(t: &str, event: &TraceEvent, width: usize) -> String {
    match event {
        TraceEvent::BudgetExhausted { agent, reason, .. } => {
            format!("{t} {}[{agent}] BUDGET: {reason}", indent(agent))
        }
        TraceEvent::Error { agent, message } => format!(
            "{t} {}[{agent}] ERROR: {}",
            indent(agent),
            clip(message, width)
        ),
        TraceEvent::FlowStep {
            agent,
            step,
            message,
            ..
        } => format!(
            "{t} {}[{agent}] {step}: {}",
            indent(agent),
            clip(message, width)
        ),
        TraceEvent::Fallback {
            agent,
            kind,
            reason,
        } => format!(
            "{t} {}[{agent}] FALLBACK {kind}: {}",
            indent(agent),
            clip(reason, width)
        ),
        TraceEvent::LlmRetry {
            agent,
            attempt,
            of,
            reason,
            ..
        } => format!(
            "{t} {}[{agent}] RETRY {attempt}/{of}: {}",
            indent(agent),
            clip(reason, width)
        ),
        _ => unreachable!("TreeLines::of passes only notices"),
    }
}
