//! One agent of the `repl` flow: a sandbox over the corpus (the root) or
//! over the input it was given (`rlm_query(prompt, context)`), an inspection
//! cell, then the loop: model reply → code cells → truncated output back →
//! ... until it commits with `FINAL`. Small models get nudges, a raised
//! temperature when they repeat themselves, and a last turn that shows them
//! their own earlier prose; budgets and caps end in the synthesis fallback.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rlm_llm::{Message, ModelRole};
use rlm_sandbox::{CellResult, InputValue, Interpreter, truncate_output};
use serde_json::Value;

use super::host::{AgentHost, BoxFut, caps};
use super::inspection::{
    CORPUS_OVERVIEW, SUB_INSPECTION, input_sizes, interpreter_spec, root_inspection,
};
use super::synthesis::{Outcome, material_from_ctx, synthesize};
use crate::budget::Exhausted;
use crate::corpus::ContextShape;
use crate::grounding::{self, EvidenceKind};
use crate::parse::{self, FinalDirective, RepeatDetector};
use crate::prompts::{self, render};
use crate::run::{CallError, CallOpts, MODEL_FAILED, Run};
use crate::text::{is_identifier, value_to_text};
use crate::trace::{CallPurpose, TraceEvent};

/// Why an agent stopped without a committed answer.
#[derive(Debug, Clone)]
enum Stop {
    Budget(Exhausted),
    Failure(String),
}

impl Stop {
    fn reason(&self) -> String {
        match self {
            Stop::Budget(e) => e.to_string(),
            Stop::Failure(m) => m.clone(),
        }
    }
}

/// The stop sequence that ends a reply at the end of its first code block
/// (a closing fence on a line of its own): the cell's real output comes next
/// turn, instead of an invented "Output:" and prose.
const CODE_BLOCK_END: &str = "\n```\n";

/// Turns in a row that only printed counts before the agent is shown where
/// the matches are.
const COUNTS_ONLY_TURNS: u32 = 3;
/// Longest reply in plain words taken as the answer when it states a fact
/// the agents were shown (longer ones are nudged for FINAL as before).
const PROSE_ANSWER_CHARS: usize = 600;
/// Text of the engine's own output (document headers, the inspection lead):
/// a reply holding it copies what it was shown, it does not answer.
const ENGINE_OUTPUT_MARKS: &[&str] = &[
    "[DOCUMENT ",
    "Full-text search",
    "a lead, not proof",
    "REPL output",
];

/// True when a turn's outputs are only counts ("1 of 1 documents mention
/// lease", "42", "matches: 3"): a few short lines, each starting or ending
/// with a number, none with the text of a match.
fn only_counts(body: &str) -> bool {
    let lines: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("REPL output"))
        .collect();
    !lines.is_empty()
        && lines.len() <= 6
        && lines.iter().all(|l| {
            let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit());
            let words: Vec<&str> = l.split_whitespace().collect();
            l.chars().count() <= 100
                && words.len() <= 10
                // "3 of 12 documents mention lease", "42", "matches: 3"
                && (words.first().is_some_and(|w| number(w.trim_matches(['(', '[', ','])))
                    || words.last().is_some_and(|w| number(w)))
        })
}

/// Temperature after the same reply (or a stuck turn) `streak` times in a
/// row: a small model at low temperature repeats itself word for word.
fn raised_temperature(streak: u32) -> f32 {
    (0.4 + 0.3 * streak.saturating_sub(1) as f32).min(1.2)
}

/// What a cell that printed nothing shows the model: small models search
/// with a condition that never matches and read silence as "try again".
const NO_OUTPUT: &str = "(no output: the cell printed nothing. If it searched for something, nothing matched: check upper/lower case, try fewer or other words, or print(search(\"keywords\")))";

struct Agent {
    ctx: Arc<Run>,
    id: String,
    depth: u32,
    task: String,
    /// The agent's own input (`rlm_query(prompt, context)`); `None` = the corpus.
    input: Option<InputValue>,
    interp: Option<Interpreter>,
    host: Arc<AgentHost>,
    messages: Vec<Message>,
    sent: usize,
    assigned: Vec<String>,
    last_outputs: Vec<String>,
    deferred: Option<String>,
    /// An answer that was not an answer was sent back once already.
    rejected_answer: bool,
}

/// Runs one agent to an outcome. `Err` only when its sandbox cannot start.
pub(crate) fn run_agent(
    ctx: Arc<Run>,
    id: String,
    depth: u32,
    task: String,
    input: Option<InputValue>,
) -> BoxFut<Result<Outcome, String>> {
    Box::pin(async move {
        let is_root = input.is_none() && depth == 0;
        let (shape_desc, sizes) = match &input {
            Some(v) => input_sizes(v),
            None => {
                let sizes = ctx.corpus.documents().iter().map(|d| d.chars).collect();
                let desc = match ctx.config.context_shape {
                    ContextShape::String => {
                        "one string holding every document, each preceded by a `[DOCUMENT i: path]` header line (search it with `re.findall(..., context)`, `context.find(...)`, `context.splitlines()`, slice it freely; `documents[i][\"text\"]` is document i alone)"
                    }
                    ContextShape::List => {
                        "a list of strings, `context[i]` is the text of document i (fast to slice per document)"
                    }
                };
                (desc.to_string(), sizes)
            }
        };
        // The spec is rebuilt from the corpus when needed instead of kept:
        // holding the corpus-sized inputs for the whole run would double memory.
        let spec = interpreter_spec(&ctx, &task, input.as_ref());
        let interp = ctx
            .pool
            .start_interpreter_on(ctx.config.sandbox, &spec)
            .await
            .map_err(|e| e.to_string())?;
        drop(spec);
        let host = Arc::new(AgentHost::new(ctx.clone(), id.clone(), depth, run_agent));
        let cfg = &ctx.config;
        let max_turns = cfg.budget.iterations_at(depth);
        let depth_note = if depth + 1 >= cfg.budget.max_depth {
            " At your depth, `rlm_query` is a plain `llm_query`."
        } else {
            ""
        };
        let truncate = cfg.budget.truncate_len.to_string();
        let sub_chars = cfg.sub_context_chars.to_string();
        let total: u64 = sizes.iter().sum();
        let context_note = render(
            prompts::CONTEXT_NOTE,
            &[
                ("context_description", &shape_desc),
                ("total_chars", &total.to_string()),
                ("doc_count", &sizes.len().to_string()),
                ("doc_sizes", &prompts::describe_sizes(&sizes)),
            ],
        )
        .trim_end()
        .to_string();
        let mut agent = Agent {
            ctx: ctx.clone(),
            id,
            depth,
            task,
            input,
            interp: Some(interp),
            host,
            messages: Vec::new(),
            sent: 0,
            assigned: Vec::new(),
            last_outputs: Vec::new(),
            deferred: None,
            rejected_answer: false,
        };
        // The root's document index goes into its system prompt, not the
        // first user message: it depends on the corpus only, so the system
        // prompt is a prefix every question over the corpus shares.
        let corpus = if is_root {
            let overview = match agent.run_cell(0, 0, CORPUS_OVERVIEW).await {
                Ok(r) => r.render(cfg.budget.truncate_len),
                Err(e) => format!("(the index cell failed: {e})"),
            };
            render(
                prompts::CORPUS_OVERVIEW,
                &[
                    ("context_note", &context_note),
                    ("overview_code", CORPUS_OVERVIEW),
                    ("overview_output", overview.trim_end()),
                ],
            )
        } else {
            String::new()
        };
        let system = if depth == 0 {
            let briefing = ctx
                .briefing
                .as_ref()
                .map(|b| {
                    format!(
                        "\n## Briefing (domain instructions from the user)\n\n{}\n",
                        b.trim()
                    )
                })
                .unwrap_or_default();
            render(
                &prompts::system_root_template(),
                &[
                    ("context_shape", &shape_desc),
                    ("sub_context_chars", &sub_chars),
                    ("depth_note", depth_note),
                    ("truncate_len", &truncate),
                    ("briefing", &briefing),
                    ("corpus", &corpus),
                ],
            )
        } else {
            render(
                &prompts::system_sub_template(),
                &[
                    ("context_shape", &shape_desc),
                    ("sub_context_chars", &sub_chars),
                    ("truncate_len", &truncate),
                    ("depth_note", depth_note),
                    ("iterations", &max_turns.to_string()),
                ],
            )
        };
        agent.messages.push(Message::system(system));
        // The inspection cell: even a weak model starts from a scouted corpus.
        let inspection = if is_root {
            root_inspection(cfg.inspect_search_k)
        } else {
            SUB_INSPECTION.to_string()
        };
        let inspection = inspection.as_str();
        let index = usize::from(is_root);
        let inspection_output = match agent.run_cell(0, index, inspection).await {
            Ok(r) => r.render(cfg.budget.truncate_len),
            Err(e) => format!("(inspection failed: {e})"),
        };
        let inspection_output = match inspection_output.trim_end() {
            "" => "(nothing printed)",
            out => out,
        };
        let context_note = if is_root {
            String::new()
        } else {
            format!("{context_note}\n\n")
        };
        let first = render(
            prompts::FIRST_USER,
            &[
                ("question", &agent.task),
                ("context_note", &context_note),
                ("inspection_code", inspection),
                ("inspection_output", inspection_output),
            ],
        );
        agent.messages.push(Message::user(first));
        Ok(agent.run(max_turns).await)
    })
}

impl Agent {
    fn trace(&self, e: TraceEvent) {
        self.ctx.trace.emit(e);
    }

    fn role(&self) -> ModelRole {
        if self.depth == 0 {
            ModelRole::Root
        } else {
            ModelRole::Sub
        }
    }

    /// Runs one cell; restarts the sandbox if the worker died.
    async fn run_cell(
        &mut self,
        iteration: u32,
        index: usize,
        code: &str,
    ) -> Result<CellResult, String> {
        let adapted = parse::adapt_async_calls(code);
        let code = adapted.as_str();
        self.trace(TraceEvent::Cell {
            agent: self.id.clone(),
            depth: self.depth,
            iteration,
            index,
            code: code.into(),
        });
        for line in code.lines() {
            // Names bound at top level: candidates for the synthesis material.
            if let Some((lhs, _)) = line.split_once('=')
                && !line.starts_with([' ', '\t'])
                && !lhs.ends_with(['=', '!', '<', '>'])
                && is_identifier(lhs.trim())
                && !self.assigned.iter().any(|a| a == lhs.trim())
            {
                self.assigned.push(lhs.trim().to_string());
            }
        }
        let result = match self.interp.as_mut() {
            Some(s) => s
                .run_cell(code, &self.host)
                .await
                .map_err(|e| e.to_string()),
            None => Err("the sandbox interpreter is closed".into()),
        };
        if let Ok(r) = &result {
            self.ctx
                .saw(EvidenceKind::Printed, &self.id, &r.stdout)
                .await;
        }
        match &result {
            Ok(r) => self.trace(TraceEvent::CellOutput {
                agent: self.id.clone(),
                depth: self.depth,
                iteration,
                index,
                stdout: r.stdout.clone(),
                error: r
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.exc_type, e.message)),
                elapsed_ms: r.elapsed.as_millis() as u64,
                host_calls: r.host_calls,
            }),
            Err(e) => {
                self.trace(TraceEvent::CellOutput {
                    agent: self.id.clone(),
                    depth: self.depth,
                    iteration,
                    index,
                    stdout: String::new(),
                    error: Some(e.clone()),
                    elapsed_ms: 0,
                    host_calls: 0,
                });
                // A fresh REPL so the loop can go on (variables are lost).
                let spec = interpreter_spec(&self.ctx, &self.task, self.input.as_ref());
                self.interp = self
                    .ctx
                    .pool
                    .start_interpreter_on(self.ctx.config.sandbox, &spec)
                    .await
                    .ok();
            }
        }
        result
    }

    async fn get_var(&mut self, name: &str) -> Option<Value> {
        self.interp.as_mut()?.get_var(name).await.ok().flatten()
    }

    fn take_final(&self) -> Option<FinalDirective> {
        self.host.take_final()
    }

    /// An answer given this turn via `via`: deferred when the turn fanned
    /// out (its results not seen yet), else committed unless it is not an
    /// answer. `Err` is the note for the model's next turn.
    fn accept(&mut self, answer: &str, via: &str) -> Result<Outcome, String> {
        let subcalls = self.host.turn_subcalls.load(Ordering::SeqCst);
        if subcalls > 0 && self.ctx.config.defer_final_after_fanout {
            return Err(self.defer(answer, via, subcalls));
        }
        self.try_commit(answer, via, false)
    }

    /// Commits `answer` unless, at the root, it is not an answer (an
    /// internal id, a placeholder, the question again): the first time the
    /// agent is told what was wrong (`Err` with the note) and goes on; after
    /// that, or on a last turn, it is committed as partial.
    fn try_commit(&mut self, answer: &str, via: &str, last_turn: bool) -> Result<Outcome, String> {
        // Sub-agents may be asked for ids (the pipeline's repl inspector).
        let checked = self.depth == 0 && self.input.is_none();
        let Some(why) = checked
            .then(|| parse::not_an_answer(answer, &self.task))
            .flatten()
        else {
            return Ok(self.commit(answer, via));
        };
        if self.rejected_answer || last_turn {
            let mut outcome = self.commit(answer, via);
            outcome.partial_reason = Some(format!("the committed answer is not an answer: {why}"));
            return Ok(outcome);
        }
        self.rejected_answer = true;
        Err(format!(
            "Note: your FINAL was not accepted: {why}. Answer the question itself in words, with the facts you found (cite them with [[doc:N \"exact quote\"]]), then FINAL(...) again."
        ))
    }

    /// The root's reply without code or FINAL, committed when it is a short
    /// statement (no plan, no abstention, an answer) of which a claim is
    /// backed by a chunk in the ledger, with a term the question lacks.
    async fn fact_seen_in_prose(&mut self, reply: &str) -> Option<Outcome> {
        let text = reply.trim();
        if self.depth != 0
            || self.input.is_some()
            || text.is_empty()
            || text.chars().count() > PROSE_ANSWER_CHARS
            || parse::abstains(text)
            || parse::announces_steps(text)
            || ENGINE_OUTPUT_MARKS.iter().any(|m| text.contains(m))
            || parse::not_an_answer(text, &self.task).is_some()
        {
            return None;
        }
        let ctx = self.ctx.clone();
        let (answer, question) = (text.to_string(), self.task.clone());
        let states = tokio::task::spawn_blocking(move || {
            let seen = ctx.ledger.chunks(&ctx.corpus);
            grounding::states_a_fact_of(&answer, &question, &seen)
        })
        .await
        .unwrap_or(false);
        states.then(|| self.commit(text, "prose_fact_seen"))
    }

    fn commit(&self, answer: &str, via: &str) -> Outcome {
        self.trace(TraceEvent::Final {
            agent: self.id.clone(),
            depth: self.depth,
            answer: answer.into(),
            via: via.into(),
            deferred: false,
        });
        Outcome {
            answer: answer.trim().to_string(),
            partial_reason: None,
        }
    }

    fn defer(&mut self, answer: &str, via: &str, subcalls: u32) -> String {
        self.trace(TraceEvent::Final {
            agent: self.id.clone(),
            depth: self.depth,
            answer: answer.into(),
            via: via.into(),
            deferred: true,
        });
        self.deferred = Some(answer.to_string());
        format!(
            "Note: your FINAL was not accepted yet. This turn ran {subcalls} sub-call(s) whose results you had not seen when you wrote FINAL. Read their output above and this draft, then give the real answer with FINAL(...) in your next reply (a synthesis in your own words, not a dump of raw results).\nDraft FINAL you wrote:\n{}",
            truncate_output(answer, 2000)
        )
    }

    /// Resolves a directive to answer text (FINAL_VAR reads the variable).
    async fn resolve(&mut self, d: FinalDirective) -> Result<String, String> {
        match d {
            FinalDirective::Answer(a) => Ok(a),
            FinalDirective::Var(name) => match self.get_var(&name).await {
                Some(v) => {
                    let text = value_to_text(&v);
                    let n = text.chars().count();
                    if n > caps::ANSWER_CHARS {
                        return Err(format!(
                            "Error: FINAL_VAR({name}) holds {n} characters; an answer may have at most {}, so no answer was committed. Write the answer itself, not the material it comes from.",
                            caps::ANSWER_CHARS
                        ));
                    }
                    Ok(text)
                }
                None => Err(format!(
                    "Error: FINAL_VAR({name}) names a variable that does not exist, so no answer was committed. Create it in a ```repl block first (call SHOW_VARS() to list variables), or write FINAL(your answer)."
                )),
            },
        }
    }

    /// The main loop. Always returns an outcome.
    async fn run(mut self, max_turns: u32) -> Outcome {
        let cfg = self.ctx.config.clone();
        let mut repeats = RepeatDetector::default();
        let mut temperature: Option<f32> = None;
        let mut consecutive_errors = 0u32;
        let mut no_code_streak = 0u32;
        // Every earlier turn's code and output, hashed: a turn that repeats
        // any of them is stuck (a small model cycles through four cells as
        // readily as through two).
        let mut seen_turns: HashSet<u64> = HashSet::new();
        let mut stuck = 0u32;
        let mut counts_only = 0u32;
        let mut prose_reply: Option<String> = None;
        let mut stop: Option<Stop> = None;
        for turn in 1..=max_turns {
            let reply = match self
                .ask_model(CallPurpose::Iteration, turn, temperature)
                .await
            {
                Ok(t) => t,
                Err(s) => {
                    stop = Some(s);
                    break;
                }
            };
            self.host.turn_subcalls.store(0, Ordering::SeqCst);
            let streak = repeats.observe(&reply);
            let parsed = parse::parse_reply(&reply);
            if parsed.code_blocks.is_empty() && parsed.prose_final.is_none() {
                // A plain statement of a fact the agents were shown is the
                // answer (Qwen2.5-Coder-1.5B states it after a search printed
                // it): nudging it for FINAL(...) costs three turns, then the
                // same text is committed anyway.
                if let Some(outcome) = self.fact_seen_in_prose(&reply).await {
                    return outcome;
                }
                // Small models answer in prose, then apologize to every nudge
                // until the turn cap. One nudge; after a second such reply, a
                // last turn that shows them their first prose reply.
                no_code_streak += 1;
                if no_code_streak == 1 {
                    prose_reply = Some(reply.trim().to_string());
                }
                if no_code_streak >= cfg.max_replies_without_code.max(1) {
                    // Shows the model its first prose reply (often the answer, unmarked).
                    let earlier = truncate_output(&prose_reply.take().unwrap_or_default(), 4000);
                    let prompt = render(
                        prompts::FINAL_FROM_PROSE,
                        &[
                            ("count", &no_code_streak.to_string()),
                            ("earlier", &earlier),
                            ("question", &self.task),
                        ],
                    );
                    let no_answer =
                        format!("{no_code_streak} replies in a row had no code and no answer");
                    match self
                        .last_turn(prompt, turn + 1, "final_from_prose", no_answer)
                        .await
                    {
                        Ok(outcome) => return outcome,
                        Err(s) => stop = Some(s),
                    }
                    break;
                }
                if streak >= 2 {
                    temperature = Some(raised_temperature(streak));
                }
                let q = self.task.clone();
                self.push_user(render(prompts::NUDGE_NO_CODE, &[("question", &q)]));
                continue;
            }
            no_code_streak = 0;
            prose_reply = None;
            if streak >= cfg.max_replies_without_code.max(2) {
                // Nudges and a higher temperature did not change the reply:
                // more turns will not either.
                let prompt = render(
                    prompts::FINAL_AFTER_REPEATS,
                    &[("count", &streak.to_string()), ("question", &self.task)],
                );
                let no_answer = format!(
                    "the same reply {streak} times in a row, and no answer when asked for one"
                );
                match self
                    .last_turn(prompt, turn + 1, "final_after_repeats", no_answer)
                    .await
                {
                    Ok(outcome) => return outcome,
                    Err(s) => stop = Some(s),
                }
                break;
            }
            if streak >= 2 {
                temperature = Some(raised_temperature(streak));
                let q = self.task.clone();
                self.push_user(render(
                    prompts::NUDGE_REPEAT,
                    &[("count", &streak.to_string()), ("question", &q)],
                ));
                continue;
            }
            if stuck == 0 {
                temperature = None;
            }
            let mut outputs = Vec::new();
            let mut notes = Vec::new();
            let n = parsed.code_blocks.len();
            let mut wants_answer_dict = false;
            for (i, block) in parsed.code_blocks.iter().enumerate() {
                wants_answer_dict |= block.code.contains("ready");
                let rendered = match self.run_cell(turn, i, &block.code).await {
                    Ok(r) => {
                        if r.error.is_some() {
                            consecutive_errors += 1;
                        } else {
                            consecutive_errors = 0;
                        }
                        r.render(cfg.budget.truncate_len)
                    }
                    Err(e) => {
                        consecutive_errors += 1;
                        format!(
                            "SandboxError: {e}\nA fresh REPL was started: variables from earlier cells are gone (context and documents are loaded again)."
                        )
                    }
                };
                let mut rendered = if rendered.trim().is_empty() {
                    NO_OUTPUT.to_string()
                } else {
                    rendered
                };
                for note in parse::code_lints(&block.code) {
                    rendered.push('\n');
                    rendered.push_str(&note);
                }
                outputs.push(if n > 1 {
                    format!("REPL output of cell {}:\n{}", i + 1, rendered)
                } else {
                    format!("REPL output:\n{rendered}")
                });
                self.remember_output(&rendered);
                if let Some(d) = self.take_final() {
                    match self.resolve(d).await {
                        Ok(answer) => match self.accept(&answer, "code") {
                            Ok(outcome) => return outcome,
                            Err(note) => notes.push(note),
                        },
                        Err(msg) => notes.push(msg),
                    }
                }
            }
            if wants_answer_dict
                && let Some(Value::Object(m)) = self.get_var("answer").await
                && m.get("ready").and_then(Value::as_bool) == Some(true)
            {
                let content = m.get("content").map(value_to_text).unwrap_or_default();
                match self.accept(&content, "answer_dict") {
                    Ok(outcome) => return outcome,
                    Err(note) => notes.push(note),
                }
            }
            if let Some(d) = parsed.prose_final {
                // `FINAL(name)` in prose where `name` is a variable: use its value.
                let d = match d {
                    FinalDirective::Answer(a) if is_identifier(a.trim()) => {
                        match self.get_var(a.trim()).await {
                            Some(v) => FinalDirective::Answer(value_to_text(&v)),
                            None => FinalDirective::Answer(a),
                        }
                    }
                    other => other,
                };
                match self.resolve(d).await {
                    Ok(answer) => match self.accept(&answer, "prose") {
                        Ok(outcome) => return outcome,
                        Err(note) => notes.push(note),
                    },
                    Err(msg) => notes.push(msg),
                }
            }
            if consecutive_errors >= cfg.budget.max_consecutive_errors {
                let e = Exhausted::Errors {
                    limit: cfg.budget.max_consecutive_errors,
                };
                self.trace(TraceEvent::BudgetExhausted {
                    agent: self.id.clone(),
                    depth: self.depth,
                    reason: e.clone(),
                });
                stop = Some(Stop::Budget(e));
                break;
            }
            let mut body = outputs.join("\n\n");
            // The same code with the same output as any earlier turn: the
            // model is stuck (small models re-send a failing search, or cycle
            // through a few cells, for 20 turns).
            let mut signature = DefaultHasher::new();
            for b in &parsed.code_blocks {
                b.code.trim().hash(&mut signature);
            }
            body.hash(&mut signature);
            if !seen_turns.insert(signature.finish()) {
                stuck += 1;
                temperature = Some(raised_temperature(stuck + 1));
                notes.push(prompts::NOTE_STUCK.trim().to_string());
            } else {
                stuck = 0;
            }
            // Cells that keep printing only counts: show where the matches are.
            if only_counts(&body) {
                counts_only += 1;
            } else {
                counts_only = 0;
            }
            if counts_only >= COUNTS_ONLY_TURNS {
                if let Some(windows) = self.match_windows().await {
                    notes.push(render(
                        prompts::NOTE_COUNTS,
                        &[("count", &counts_only.to_string()), ("windows", &windows)],
                    ));
                }
                counts_only = 0;
            }
            for note in notes {
                body.push_str("\n\n");
                body.push_str(&note);
            }
            let q = self.task.clone();
            self.push_user(render(
                prompts::NEXT_TURN,
                &[
                    ("outputs", &body),
                    ("question", &q),
                    ("turn", &(turn + 1).to_string()),
                    ("max_turns", &max_turns.to_string()),
                ],
            ));
        }
        let reason = match stop {
            Some(s) => s.reason(),
            None => {
                // Iteration cap: one last request for the answer.
                let e = Exhausted::Iterations { limit: max_turns };
                self.trace(TraceEvent::BudgetExhausted {
                    agent: self.id.clone(),
                    depth: self.depth,
                    reason: e.clone(),
                });
                let prompt = render(prompts::FINAL_NOW, &[("question", &self.task)]);
                match self
                    .last_turn(prompt, max_turns + 1, "final_now", e.to_string())
                    .await
                {
                    Ok(outcome) => return outcome,
                    Err(s) => s.reason(),
                }
            }
        };
        let material = self.material().await;
        let task = self.task.clone();
        synthesize(&self.ctx, &self.id, self.depth, &task, &reason, material).await
    }

    /// Where the words of the agent's task fall in the corpus: the top
    /// full-text hits with their document, character offsets and the text
    /// around the match. `None` when nothing matches.
    async fn match_windows(&self) -> Option<String> {
        let corpus = self.ctx.corpus.clone();
        let task = self.task.clone();
        let hits = tokio::task::spawn_blocking(move || corpus.match_windows(&task, 3))
            .await
            .ok()?;
        (!hits.is_empty()).then(|| hits.join("\n"))
    }

    fn push_user(&mut self, text: String) {
        self.messages.push(Message::user(text));
    }

    fn remember_output(&mut self, rendered: &str) {
        self.last_outputs.push(truncate_output(rendered, 4000));
        if self.last_outputs.len() > 3 {
            self.last_outputs.remove(0);
        }
    }

    /// Sends the conversation; appends the reply.
    async fn ask_model(
        &mut self,
        purpose: CallPurpose,
        iteration: u32,
        temperature: Option<f32>,
    ) -> Result<String, Stop> {
        let r = self
            .ctx
            .call_model(
                &self.id,
                self.depth,
                self.role(),
                &self.messages,
                self.sent,
                CallOpts {
                    temperature,
                    model: None,
                    stop: if self.ctx.config.stop_after_code == Some(true) {
                        vec![CODE_BLOCK_END.to_string()]
                    } else {
                        Vec::new()
                    },
                },
                purpose,
                iteration,
            )
            .await;
        self.sent = self.messages.len();
        match r {
            Ok(resp) => {
                // Stopped at the end of its first code block: the fence the
                // stop sequence swallowed is put back.
                let text = if self.ctx.config.stop_after_code == Some(true) {
                    parse::close_open_fence(&resp.text)
                } else {
                    resp.text
                };
                self.messages.push(Message::assistant(text.clone()));
                self.sent = self.messages.len();
                Ok(text)
            }
            Err(CallError::Budget(e)) => Err(Stop::Budget(e)),
            Err(CallError::Model(m)) => Err(Stop::Failure(format!("{MODEL_FAILED}{m}"))),
        }
    }

    /// One last request for the answer (`prompt` says why): the answer is
    /// committed via `via`; no answer ends the agent with `no_answer`.
    async fn last_turn(
        &mut self,
        prompt: String,
        iteration: u32,
        via: &str,
        no_answer: String,
    ) -> Result<Outcome, Stop> {
        self.push_user(prompt);
        match self.last_answer_turn(iteration).await? {
            Some(answer) => Ok(self
                .try_commit(&answer, via, true)
                .unwrap_or_else(|_| self.commit(&answer, via))),
            None => Err(Stop::Failure(no_answer)),
        }
    }

    /// Asks for the answer one last time: FINAL in prose or code, or plain text.
    async fn last_answer_turn(&mut self, iteration: u32) -> Result<Option<String>, Stop> {
        let reply = self
            .ask_model(CallPurpose::FinalNow, iteration, None)
            .await?;
        let parsed = parse::parse_reply(&reply);
        if let Some(d) = parsed.prose_final {
            return Ok(self.resolve(d).await.ok());
        }
        if parsed.code_blocks.is_empty() {
            let text = reply.trim();
            return Ok((!text.is_empty()).then(|| text.to_string()));
        }
        for (i, b) in parsed.code_blocks.iter().enumerate() {
            if b.code.contains("FINAL") {
                let _ = self.run_cell(iteration, i, &b.code).await;
                if let Some(d) = self.take_final() {
                    return Ok(self.resolve(d).await.ok());
                }
            }
        }
        Ok(None)
    }

    /// What the agent gathered, for the synthesis call.
    async fn material(&mut self) -> String {
        let mut vars = String::new();
        let names: Vec<String> = self.assigned.iter().rev().take(12).cloned().collect();
        for name in names {
            if let Some(v) = self.get_var(&name).await {
                let text = value_to_text(&v);
                if !text.trim().is_empty() && text != "None" {
                    vars.push_str(&format!("- `{name}` = {}\n", truncate_output(&text, 3000)));
                }
            }
        }
        let mut extra = String::new();
        if let Some(d) = &self.deferred {
            extra.push_str(&format!(
                "A draft answer it wrote before seeing all results:\n{}\n\n",
                truncate_output(d, 6000)
            ));
        }
        if !vars.is_empty() {
            extra.push_str(&format!("Variables in its REPL:\n{vars}\n"));
        }
        if !self.last_outputs.is_empty() {
            extra.push_str("Its last REPL outputs:\n");
            for o in &self.last_outputs {
                extra.push_str(o);
                extra.push_str("\n---\n");
            }
        }
        material_from_ctx(&self.ctx, &self.id, &extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_only_outputs() {
        assert!(only_counts("REPL output:\n1 of 1 documents mention lease"));
        assert!(only_counts("REPL output:\n42\n"));
        assert!(!only_counts(
            "REPL output:\nThe lease starts on March 1, 2024."
        ));
        assert!(!only_counts(
            "REPL output:\n3 documents mention the lease: it starts on March 1 and runs for twelve months"
        ));
        assert!(!only_counts(NO_OUTPUT));
        assert!(!only_counts(""));
    }
}
