//! One agent of the `repl` flow: a sandbox over the corpus (the root) or
//! over the input it was given (`rlm_query(prompt, context)`), an inspection
//! cell, then the loop: model reply → code cells → truncated output back →
//! ... until it commits with `FINAL`. Small models get nudges, a raised
//! temperature when they repeat themselves, and a last turn that shows them
//! their own earlier prose; budgets and caps end in the synthesis fallback.
//! The loop is a turn machine: a step decides what comes next (a `Next`,
//! over the `LoopState` of `turns.rs`), the agent carries it out.

mod briefing;
pub(crate) use briefing::root_instructions;
mod cells;
mod commit;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rlm_llm::{Message, ModelRole, ReplySchema};
use rlm_sandbox::{CellResult, InputValue, Interpreter, SandboxError, truncate_output};
use serde_json::Value;

use super::extraction::{Ended, extract};
use super::host::{AgentHost, BoxFut, caps};
use super::inspection::{
    CORPUS_OVERVIEW, SUB_INSPECTION, input_sizes, interpreter_spec, root_inspection,
};
use super::sources;
use super::structured::{self, Steps, Turn};
use super::synthesis::{Outcome, material_from_ctx};
use super::turns::{Commit, LastTurn, LoopState, Next, Stop};
use crate::budget::Exhausted;
use crate::corpus::ContextShape;
use crate::grounding::{self, EvidenceKind};
use crate::parse::{self, CodeBlock, FinalDirective, ParsedReply};
use crate::prompts::{self, render};
use crate::run::{CallError, CallOpts, Run};
use crate::text::{is_identifier, value_to_text};
use crate::trace::{CallPurpose, CommitVia, TraceEvent};

/// The stop sequence that ends a reply at the end of its first code block
/// (a closing fence on a line of its own): the cell's real output comes next
/// turn, instead of an invented "Output:" and prose.
const CODE_BLOCK_END: &str = "\n```\n";

/// Longest reply in plain words taken as the answer when it states a fact
/// the agents were shown (longer ones are nudged for FINAL as before).
const PROSE_ANSWER_CHARS: usize = 600;

/// What a cell that printed nothing shows the model: small models search
/// with a condition that never matches and read silence as "try again".
pub(super) const NO_OUTPUT: &str = "(no output: the cell printed nothing. If it searched for something, nothing matched: check upper/lower case, try fewer or other words, or print(search(\"keywords\")))";

/// Why a cell gave no result: the sandbox failed (a fresh one is started
/// for the next cell). The model reads the message.
#[derive(Debug, thiserror::Error)]
enum CellError {
    /// The sandbox failed running the cell (the worker died, timed out...).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// No sandbox: the last restart failed.
    #[error("the sandbox interpreter is closed")]
    Closed,
}

/// Why an answer given this turn was not committed: the note the model
/// reads on its next turn.
#[derive(Debug, thiserror::Error)]
enum AnswerRefused {
    /// The turn fanned out: the sub-calls' results were not seen yet.
    #[error(
        "Note: your FINAL was not accepted yet. This turn ran {subcalls} sub-call(s) whose results you had not seen when you wrote FINAL. Read their output above and this draft, then give the real answer with FINAL(...) in your next reply (a synthesis in your own words, not a dump of raw results).\nDraft FINAL you wrote:\n{}",
        truncate_output(.draft, 2000)
    )]
    Deferred {
        /// Sub-calls the turn started.
        subcalls: u32,
        /// The answer the agent wrote.
        draft: String,
    },
    /// At the root, the answer is no answer (an internal id, a
    /// placeholder, the question again).
    #[error(
        "Note: your answer was not accepted: {why}. Answer the question itself in words, with the facts you found and the passages they come from, then give the answer again."
    )]
    NotAnAnswer {
        /// What makes it no answer.
        why: String,
    },
    /// At the root, the answer is in another language than the question.
    #[error(
        "Note: your answer was not accepted yet: it is written in {answered}, but the question is in {asked}. Write the same answer in {asked}, with the same sources."
    )]
    OtherLanguage {
        /// The answer's language (its English name).
        answered: String,
        /// The question's.
        asked: String,
    },
    /// The root said the answer needs every line, and none of its code has
    /// counted one (its scans failed or matched nothing).
    #[error(
        "Note: your answer was not accepted yet: you said it needs every line, but no code of yours has counted a line yet (a tally() or grep() that failed or matched no line counts none), so its numbers come from nowhere. Fix the call the output above shows, count the lines, and answer with what it prints."
    )]
    NotCounted,
    /// The root said the answer needs every line, counted, and answered
    /// with a number no output, passage or prompt showed it.
    #[error(
        "Note: your answer was not accepted yet: it states {number}, but no output above printed {number}, so that number comes from nowhere. Answer with the number your count printed (or print the number you computed first)."
    )]
    NumberNotShown {
        /// The number.
        number: u64,
    },
    /// The answer copies the engine's own output (document headers, the
    /// search listing, a function's note): never committed.
    #[error(
        "Note: your answer was not accepted: it copies the system's output (document headers, search listings, the notes its functions print) instead of answering. Read the passages and state the answer in your own words, with the passages it comes from."
    )]
    EngineOutput,
    /// `FINAL_VAR` names a variable holding more than an answer may.
    #[error(
        "Error: FINAL_VAR({name}) holds {chars} characters; an answer may have at most {}, so no answer was committed. Write the answer itself, not the material it comes from.",
        caps::ANSWER_CHARS
    )]
    VariableTooLong {
        /// The variable.
        name: String,
        /// Characters it holds.
        chars: usize,
    },
    /// `FINAL_VAR` names no variable.
    #[error(
        "Error: FINAL_VAR({name}) names a variable that does not exist, so no answer was committed. Create it in a ```repl block first (call SHOW_VARS() to list variables), or write FINAL(your answer)."
    )]
    NoSuchVariable {
        /// The variable.
        name: String,
    },
}

/// What the last request for an answer gave.
enum LastReply {
    /// An answer, given via the way named.
    Answer(String, CommitVia),
    /// The model says the documents do not hold the answer.
    NotFound(String),
    /// No answer (prose, code without FINAL, nothing).
    Nothing,
}

/// Shortest FINAL line checked against the documents (shorter ones match
/// by chance).
const PASTED_LINE_CHARS: usize = 12;

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
    /// The root was told once that its answer is not in the question's
    /// language.
    asked_for_language: bool,
    /// The root's first turn said the answer needs every line.
    every_line: bool,
    /// The root was told once that its answer needs a count none of its
    /// code made.
    asked_to_count: bool,
    /// The root was told once that its answer states a number it was never
    /// shown.
    asked_for_shown_number: bool,
    /// Replies are asked for as structured turns ([`structured`]).
    structured: bool,
    /// A reply outside the structured format was noted in the trace.
    text_reply_noted: bool,
    /// The last reply was a structured turn (a model that answers in text
    /// is asked for its last answer in text).
    last_reply_structured: bool,
}

/// Runs one agent to an outcome. `Err` only when its sandbox cannot start.
pub(crate) fn run_agent(
    ctx: Arc<Run>,
    id: String,
    depth: u32,
    task: String,
    input: Option<InputValue>,
) -> BoxFut<Result<Outcome, SandboxError>> {
    Box::pin(async move {
        // The spec is rebuilt from the corpus when needed instead of kept:
        // holding the corpus-sized inputs for the whole run would double memory.
        let spec = interpreter_spec(&ctx, &task, input.as_ref());
        let interp = ctx
            .pool
            .start_interpreter_on(ctx.config.sandbox, &spec)
            .await?;
        drop(spec);
        let host = Arc::new(AgentHost::new(ctx.clone(), id.clone(), depth, run_agent));
        let max_turns = ctx.config.budget.iterations_at(depth);
        let ctx_structured = ctx.config.turn_format.structured();
        let mut agent = Agent {
            ctx,
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
            asked_for_language: false,
            every_line: false,
            asked_to_count: false,
            asked_for_shown_number: false,
            structured: ctx_structured,
            text_reply_noted: false,
            last_reply_structured: false,
        };
        agent.brief(max_turns).await;
        Ok(agent.run(max_turns).await)
    })
}

/// How the agent starts: its system prompt and first message.
impl Agent {
    /// The root agent: the question over the whole corpus (a sub-agent has
    /// an input of its own, or is deeper).
    fn is_root(&self) -> bool {
        self.input.is_none() && self.depth == 0
    }
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

    /// The main loop, a turn machine: each step asks the model for a reply
    /// and decides what comes next; the arms carry it out. Always returns an
    /// outcome.
    async fn run(mut self, max_turns: u32) -> Outcome {
        let mut state = LoopState::new(max_turns, self.structured);
        let mut next = self.step(&mut state).await;
        loop {
            next = match next {
                Next::RunCode(parsed) => self.run_code(&mut state, parsed).await,
                Next::Nudge(note) => {
                    self.push_user(note);
                    self.step(&mut state).await
                }
                Next::LastTurn(last) => self.last_turn(last).await,
                Next::Commit(commit) => return self.commit(commit),
                Next::Stop(stop) => return self.give_up(stop).await,
            };
        }
    }

    /// One step: asks the model for the next turn's reply and decides what
    /// it means. Past the turn cap, one last request for the answer.
    async fn step(&mut self, state: &mut LoopState) -> Next {
        state.turn += 1;
        if state.turn > state.max_turns {
            let e = Exhausted::Iterations {
                limit: state.max_turns,
            };
            return Next::LastTurn(LastTurn {
                prompt: render(prompts::FINAL_NOW, &[("question", &self.task)]),
                iteration: state.max_turns + 1,
                via: CommitVia::FinalNow,
                no_answer: self.exhausted(e),
            });
        }
        if let Some(last) = state.last_if_stuck(&self.task) {
            return last;
        }
        let first = state.turn == 1 && self.is_root();
        let steps = if first { Steps::First } else { Steps::Any };
        let reply = match self
            .ask_model(CallPurpose::Iteration, state.turn, state.temperature, steps)
            .await
        {
            Ok(reply) => reply,
            Err(stop) => return Next::Stop(stop),
        };
        if first && self.structured {
            self.note_needs(state, &reply);
        }
        self.host.turn_subcalls.store(0, Ordering::SeqCst);
        let streak = state.observe(&reply);
        if self.structured {
            let turn = structured::parse_turn(&reply);
            self.last_reply_structured = turn.is_some();
            match turn {
                Some(turn) => return self.structured_step(state, streak, turn).await,
                None => self.note_text_reply(),
            }
        }
        let parsed = parse::parse_reply(&reply);
        let max_without_code = self.ctx.config.max_replies_without_code;
        if parsed.code_blocks.is_empty() && parsed.prose_final.is_none() {
            // A plain statement of a fact the agents were shown is the
            // answer (Qwen2.5-Coder-1.5B states it after a search printed
            // it): nudging it for FINAL(...) costs three turns, then the
            // same text is committed anyway.
            if let Some(commit) = self.fact_seen_in_prose(&reply).await {
                return Next::Commit(commit);
            }
            return state.on_prose(&reply, streak, &self.task, max_without_code);
        }
        state
            .on_code(streak, &self.task)
            .unwrap_or(Next::RunCode(parsed))
    }

    /// What a structured turn asks for: its code run (a repeat is treated as
    /// any repeated reply), its answer committed unless it is none, or, when
    /// the model found nothing, the extraction call (the root) or its
    /// explanation as the answer (a sub-agent, for its caller).
    async fn structured_step(&mut self, state: &mut LoopState, streak: u32, turn: Turn) -> Next {
        match turn {
            Turn::Code(code) => {
                state
                    .on_code(streak, &self.task)
                    .unwrap_or(Next::RunCode(ParsedReply {
                        code_blocks: vec![CodeBlock {
                            lang: "repl".into(),
                            code,
                        }],
                        prose_final: None,
                        prose_final_line: None,
                    }))
            }
            Turn::Answer(statements) => {
                let statements =
                    sources::anchored(&self.ctx, &self.id, statements, Vec::new()).await;
                let answer = structured::answer_text(&statements);
                match self.accept(&answer, CommitVia::Structured) {
                    Ok(commit) => Next::Commit(commit),
                    Err(refused) => {
                        if let Some(last) = state.on_code(streak, &self.task) {
                            return last;
                        }
                        Next::Nudge(refused.to_string())
                    }
                }
            }
            Turn::NotFound(what) => self.not_found(what),
        }
    }

    /// The model says the documents do not hold the answer: the root makes
    /// the extraction call over what the run saw (a weak model misses what
    /// it printed); a sub-agent tells its caller what it found instead.
    fn not_found(&mut self, what: String) -> Next {
        if self.is_root() {
            Next::Stop(Stop::NotFound { said: what })
        } else {
            Next::Commit(Commit::new(&what, CommitVia::Structured))
        }
    }

    /// What the root's first turn declared the answer needs: traced, and
    /// kept so that code reading only part of the corpus for an answer that
    /// needs every line is told so.
    fn note_needs(&mut self, state: &mut LoopState, reply: &str) {
        let Some(needs) = structured::Needs::of_reply(reply) else {
            return;
        };
        state.every_line = needs == structured::Needs::EveryLine;
        self.every_line = state.every_line;
        let said = if state.every_line {
            "every line"
        } else {
            "one passage"
        };
        self.ctx.step(
            &self.id,
            "strategy",
            format!("The root declared that the answer needs {said}"),
            serde_json::json!({"needs": said}),
        );
    }

    /// A reply outside the structured format (an endpoint that ignores the
    /// schema): read by the text protocol's rules, noted once in the trace.
    fn note_text_reply(&mut self) {
        if !self.text_reply_noted {
            self.text_reply_noted = true;
            self.ctx.fallback(
                &self.id,
                "structured_reply",
                "a reply was not a structured turn; it is read as a text-protocol reply",
            );
        }
    }

    /// A budget ran out: traced, and the reason the agent stops.
    fn exhausted(&self, e: Exhausted) -> Stop {
        self.trace(TraceEvent::BudgetExhausted {
            agent: self.id.clone(),
            depth: self.depth,
            reason: e.clone(),
        });
        Stop::Budget(e)
    }

    /// No committed answer: the synthesis fallback writes one from what the
    /// agent gathered, partial for `stop`'s reason.
    async fn give_up(&mut self, stop: Stop) -> Outcome {
        let mut material = self.material().await;
        let ended = match &stop {
            Stop::Budget(_) | Stop::ModelFailed(_) => Ended::Stopped(stop.to_string()),
            Stop::NoCode { .. } | Stop::Repeats => Ended::NoAnswer,
            Stop::NotFound { said } => {
                material.push_str(&format!("\nThe agent concluded: {said}\n"));
                Ended::NoAnswer
            }
        };
        extract(&self.ctx, &self.id, self.depth, &self.task, ended, material).await
    }

    fn push_user(&mut self, text: String) {
        self.messages.push(Message::user(text));
    }

    /// Sends the conversation; appends the reply.
    async fn ask_model(
        &mut self,
        purpose: CallPurpose,
        iteration: u32,
        temperature: Option<f32>,
        steps: Steps,
    ) -> Result<String, Stop> {
        let schema = self.turn_schema(steps);
        let stop_after_code = schema.is_none() && self.ctx.config.stop_after_code == Some(true);
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
                    stop: if stop_after_code {
                        vec![CODE_BLOCK_END.to_string()]
                    } else {
                        Vec::new()
                    },
                    schema,
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
                let text = if stop_after_code {
                    parse::close_open_fence(&resp.text)
                } else {
                    resp.text
                };
                self.messages.push(Message::assistant(text.clone()));
                self.sent = self.messages.len();
                Ok(text)
            }
            Err(CallError::Budget(e)) => Err(Stop::Budget(e)),
            Err(CallError::Model(m)) => Err(Stop::ModelFailed(m)),
        }
    }

    /// One last request for the answer: the answer is committed (as partial
    /// if it is not one); none stops the agent.
    async fn last_turn(&mut self, last: LastTurn) -> Next {
        let mut prompt = if self.structured && self.last_reply_structured {
            render(prompts::FINAL_NOW_STRUCTURED, &[("question", &self.task)])
        } else {
            last.prompt
        };
        // After "every line", the count to answer with is restated: a small
        // model otherwise answers with an earlier, wider count.
        let last_count = self
            .host
            .state
            .lock()
            .ok()
            .and_then(|s| s.last_count.clone());
        if let Some(count) = last_count.filter(|_| self.every_line) {
            prompt.push_str(&format!("\nYour last count: {count}."));
        }
        self.push_user(prompt);
        match self.last_answer_turn(last.iteration, last.via).await {
            // An answer that is none (a copy of the engine's output) is not
            // committed: the extraction call answers instead.
            Ok(LastReply::Answer(answer, via)) => match self.try_commit(&answer, via, true) {
                Ok(commit) => Next::Commit(commit),
                Err(_) => Next::Stop(last.no_answer),
            },
            Ok(LastReply::NotFound(what)) => self.not_found(what),
            Ok(LastReply::Nothing) => Next::Stop(last.no_answer),
            Err(stop) => Next::Stop(stop),
        }
    }

    /// Asks for the answer one last time: a structured answer, or FINAL in
    /// prose or code. A reply in plain prose is not an answer: the engine
    /// never commits the last prose reply (it may be a paste of what the
    /// model was shown); the extraction call answers instead.
    async fn last_answer_turn(
        &mut self,
        iteration: u32,
        via: CommitVia,
    ) -> Result<LastReply, Stop> {
        let reply = self
            .ask_model(CallPurpose::FinalNow, iteration, None, Steps::AnswerOnly)
            .await?;
        if self.structured {
            match structured::parse_turn(&reply) {
                Some(Turn::Answer(statements)) => {
                    let statements =
                        sources::anchored(&self.ctx, &self.id, statements, Vec::new()).await;
                    let answer = structured::answer_text(&statements);
                    return Ok(LastReply::Answer(answer, CommitVia::Structured));
                }
                Some(Turn::NotFound(what)) => return Ok(LastReply::NotFound(what)),
                Some(Turn::Code(_)) => return Ok(LastReply::Nothing),
                None => self.note_text_reply(),
            }
        }
        let parsed = parse::parse_reply(&reply);
        if self
            .pasted_from_documents(parsed.prose_final_line.as_deref())
            .await
        {
            return Ok(LastReply::Nothing);
        }
        if let Some(d) = parsed.prose_final {
            return Ok(self
                .resolve(d)
                .await
                .ok()
                .map_or(LastReply::Nothing, |a| LastReply::Answer(a, via)));
        }
        if parsed.code_blocks.is_empty() {
            return Ok(LastReply::Nothing);
        }
        for (i, b) in parsed.code_blocks.iter().enumerate() {
            if b.code.contains("FINAL") {
                let _ = self.run_cell(iteration, i, &b.code).await;
                if let Some(d) = self.take_final() {
                    return Ok(self
                        .resolve(d)
                        .await
                        .ok()
                        .map_or(LastReply::Nothing, |a| LastReply::Answer(a, via)));
                }
            }
        }
        Ok(LastReply::Nothing)
    }

    /// The schema of this agent's next reply, when it replies in structured
    /// turns: its sources may name only what the run has shown.
    fn turn_schema(&self, steps: Steps) -> Option<ReplySchema> {
        self.structured
            .then(|| structured::turn_schema(&self.ctx.ledger.refs(), steps))
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
