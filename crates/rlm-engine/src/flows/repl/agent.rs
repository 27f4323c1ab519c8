//! One agent of the `repl` flow: a sandbox over the corpus (the root) or
//! over the input it was given (`rlm_query(prompt, context)`), an inspection
//! cell, then the loop: model reply → code cells → truncated output back →
//! ... until it commits with `FINAL`. Small models get nudges, a raised
//! temperature when they repeat themselves, and a last turn that shows them
//! their own earlier prose; budgets and caps end in the synthesis fallback.
//! The loop is a turn machine: a step decides what comes next (a `Next`,
//! over the `LoopState` of `turns.rs`), the agent carries it out.

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
    /// The answer copies the engine's own output (document headers, the
    /// search listing): never committed.
    #[error(
        "Note: your answer was not accepted: it copies the system's output (document headers, search listings) instead of answering. Read the passages and state the answer in your own words, with the passages it comes from."
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

    /// The agent's first messages: the system prompt and the question with
    /// what an inspection cell found.
    async fn brief(&mut self, max_turns: u32) {
        let (shape, sizes) = self.context_shape();
        let total: u64 = sizes.iter().sum();
        let context_note = render(
            prompts::CONTEXT_NOTE,
            &[
                ("context_description", &shape),
                ("total_chars", &total.to_string()),
                ("doc_count", &sizes.len().to_string()),
                ("doc_sizes", &prompts::describe_sizes(&sizes)),
            ],
        )
        .trim_end()
        .to_string();
        let system = self.system_prompt(&shape, &context_note, max_turns).await;
        self.messages.push(Message::system(system));
        let first = self.first_message(&context_note).await;
        self.messages.push(Message::user(first));
    }

    /// What `context` is, in words, and the characters of each of its parts.
    fn context_shape(&self) -> (String, Vec<u64>) {
        if let Some(v) = &self.input {
            return input_sizes(v);
        }
        let sizes = self
            .ctx
            .corpus
            .documents()
            .iter()
            .map(|d| d.chars)
            .collect();
        let desc = match self.ctx.config.context_shape {
            ContextShape::String => {
                "one string holding every document, each preceded by a `[DOCUMENT i: path]` header line (search it with `re.findall(..., context)`, `context.find(...)`, `context.splitlines()`, slice it freely; `documents[i][\"text\"]` is document i alone)"
            }
            ContextShape::List => {
                "a list of strings, `context[i]` is the text of document i (fast to slice per document)"
            }
        };
        (desc.to_string(), sizes)
    }

    /// The system prompt: the root's, with the briefing and the corpus
    /// index, or a sub-agent's.
    async fn system_prompt(&mut self, shape: &str, context_note: &str, max_turns: u32) -> String {
        let cfg = &self.ctx.config;
        let depth_note = if self.depth + 1 >= cfg.budget.max_depth {
            " At your depth, `rlm_query` is a plain `llm_query`."
        } else {
            ""
        };
        let truncate = cfg.budget.truncate_len.to_string();
        let sub_chars = cfg.sub_context_chars.to_string();
        if self.depth != 0 {
            return render(
                &prompts::system_sub_template(self.structured),
                &[
                    ("context_shape", shape),
                    ("sub_context_chars", &sub_chars),
                    ("truncate_len", &truncate),
                    ("depth_note", depth_note),
                    ("iterations", &max_turns.to_string()),
                ],
            );
        }
        let briefing = self
            .ctx
            .briefing
            .as_ref()
            .map(|b| {
                format!(
                    "\n## Briefing (domain instructions from the user)\n\n{}\n",
                    b.trim()
                )
            })
            .unwrap_or_default();
        let corpus = if self.is_root() {
            self.corpus_overview(context_note).await
        } else {
            String::new()
        };
        render(
            &prompts::system_root_template(self.structured),
            &[
                ("context_shape", shape),
                ("sub_context_chars", &sub_chars),
                ("depth_note", depth_note),
                ("truncate_len", &truncate),
                ("briefing", &briefing),
                ("corpus", &corpus),
            ],
        )
    }

    /// The root's document index, from a cell run for it. It goes into the
    /// system prompt, not the first user message: it depends on the corpus
    /// only, so the system prompt is a prefix every question over the corpus
    /// shares.
    async fn corpus_overview(&mut self, context_note: &str) -> String {
        let overview = match self.run_cell(0, 0, CORPUS_OVERVIEW).await {
            Ok(r) => r.render(self.ctx.config.budget.truncate_len),
            Err(e) => format!("(the index cell failed: {e})"),
        };
        render(
            prompts::CORPUS_OVERVIEW,
            &[
                ("context_note", context_note),
                ("overview_code", CORPUS_OVERVIEW),
                ("overview_output", overview.trim_end()),
            ],
        )
    }

    /// The first user message: the question and the output of an inspection
    /// cell (even a weak model starts from a scouted corpus).
    async fn first_message(&mut self, context_note: &str) -> String {
        let is_root = self.is_root();
        let inspection = if is_root {
            root_inspection(self.ctx.config.inspect_search_k)
        } else {
            SUB_INSPECTION.to_string()
        };
        let output = match self.run_cell(0, usize::from(is_root), &inspection).await {
            Ok(r) => r.render(self.ctx.config.budget.truncate_len),
            Err(e) => format!("(inspection failed: {e})"),
        };
        // The engine's own counts: a set the answer was computed from only
        // if the answer states one (its code may also count again).
        for s in self
            .ctx
            .scans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .filter(|s| s.agent == self.id)
        {
            s.by_engine = true;
        }
        let output = match output.trim_end() {
            "" => "(nothing printed)",
            out => out,
        };
        let context_note = if is_root {
            String::new()
        } else {
            format!("{context_note}\n\n")
        };
        render(
            prompts::FIRST_USER,
            &[
                ("question", &self.task),
                ("context_note", &context_note),
                ("inspection_code", &inspection),
                ("inspection_output", output),
                ("next_step", prompts::next_step(self.structured, true)),
            ],
        )
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

    /// Runs one cell; restarts the sandbox if the worker died.
    async fn run_cell(
        &mut self,
        iteration: u32,
        index: usize,
        code: &str,
    ) -> Result<CellResult, CellError> {
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
                .map_err(CellError::Sandbox),
            None => Err(CellError::Closed),
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
                    error: Some(e.to_string()),
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
    fn accept(&mut self, answer: &str, via: CommitVia) -> Result<Commit, AnswerRefused> {
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
    fn try_commit(
        &mut self,
        answer: &str,
        via: CommitVia,
        last_turn: bool,
    ) -> Result<Commit, AnswerRefused> {
        // A copy of what the engine printed is no answer, at any depth and
        // on any turn: the loop's end makes the extraction call instead.
        if parse::holds_engine_output(answer) {
            return Err(AnswerRefused::EngineOutput);
        }
        // Answers are written in the question's language: asked once.
        if self.is_root()
            && !last_turn
            && !self.asked_for_language
            && let Some((answered, asked)) = parse::language_mismatch(answer, &self.task)
        {
            self.asked_for_language = true;
            let name = |code: &str| rlm_corpus::language::language_name(code).to_string();
            return Err(AnswerRefused::OtherLanguage {
                answered: name(answered),
                asked: name(asked),
            });
        }
        // Sub-agents may be asked for ids (the pipeline's repl inspector).
        let Some(why) = self
            .is_root()
            .then(|| parse::not_an_answer(answer, &self.task))
            .flatten()
        else {
            return Ok(Commit::new(answer, via));
        };
        if self.rejected_answer || last_turn {
            return Ok(Commit {
                partial_reason: Some(format!("the committed answer is not an answer: {why}")),
                ..Commit::new(answer, via)
            });
        }
        self.rejected_answer = true;
        Err(AnswerRefused::NotAnAnswer { why })
    }

    /// An answer this turn gave (or why it gave none, for the next turn's
    /// notes): taken as [`Self::accept`] says.
    fn take_answer(
        &mut self,
        answer: Result<String, AnswerRefused>,
        via: CommitVia,
        notes: &mut Vec<String>,
    ) -> Option<Commit> {
        match answer.and_then(|a| self.accept(&a, via)) {
            Ok(commit) => Some(commit),
            Err(refused) => {
                notes.push(refused.to_string());
                None
            }
        }
    }

    /// The root's reply without code or FINAL, committed when it is a short
    /// statement (no plan, no abstention, an answer) of which a claim is
    /// backed by a chunk in the ledger, with a term the question lacks.
    async fn fact_seen_in_prose(&mut self, reply: &str) -> Option<Commit> {
        let text = reply.trim();
        if !self.is_root()
            || text.is_empty()
            || text.chars().count() > PROSE_ANSWER_CHARS
            || parse::abstains(text)
            || parse::announces_steps(text)
            || parse::holds_engine_output(text)
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
        states.then(|| Commit::new(text, CommitVia::ProseFactSeen))
    }

    /// Commits: the agent's outcome.
    fn commit(&self, commit: Commit) -> Outcome {
        self.trace(TraceEvent::Final {
            agent: self.id.clone(),
            depth: self.depth,
            answer: commit.answer.clone(),
            via: commit.via,
            deferred: false,
        });
        Outcome {
            answer: commit.answer.trim().to_string(),
            partial_reason: commit.partial_reason,
        }
    }

    fn defer(&mut self, answer: &str, via: CommitVia, subcalls: u32) -> AnswerRefused {
        self.trace(TraceEvent::Final {
            agent: self.id.clone(),
            depth: self.depth,
            answer: answer.into(),
            via,
            deferred: true,
        });
        self.deferred = Some(answer.to_string());
        AnswerRefused::Deferred {
            subcalls,
            draft: answer.to_string(),
        }
    }

    /// Resolves a directive to answer text (FINAL_VAR reads the variable).
    async fn resolve(&mut self, d: FinalDirective) -> Result<String, AnswerRefused> {
        match d {
            FinalDirective::Answer(a) => Ok(a),
            FinalDirective::Var(name) => match self.get_var(&name).await {
                Some(v) => {
                    let text = value_to_text(&v);
                    let n = text.chars().count();
                    if n > caps::ANSWER_CHARS {
                        return Err(AnswerRefused::VariableTooLong { name, chars: n });
                    }
                    Ok(text)
                }
                None => Err(AnswerRefused::NoSuchVariable { name }),
            },
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
        let reply = match self
            .ask_model(
                CallPurpose::Iteration,
                state.turn,
                state.temperature,
                Steps::Any,
            )
            .await
        {
            Ok(reply) => reply,
            Err(stop) => return Next::Stop(stop),
        };
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
            .on_code(streak, &self.task, max_without_code)
            .unwrap_or(Next::RunCode(parsed))
    }

    /// What a structured turn asks for: its code run (a repeat is treated as
    /// any repeated reply), its answer committed unless it is none, or, when
    /// the model found nothing, the extraction call (the root) or its
    /// explanation as the answer (a sub-agent, for its caller).
    async fn structured_step(&mut self, state: &mut LoopState, streak: u32, turn: Turn) -> Next {
        let max_without_code = self.ctx.config.max_replies_without_code;
        match turn {
            Turn::Code(code) => state
                .on_code(streak, &self.task, max_without_code)
                .unwrap_or(Next::RunCode(ParsedReply {
                    code_blocks: vec![CodeBlock {
                        lang: "repl".into(),
                        code,
                    }],
                    prose_final: None,
                    prose_final_line: None,
                })),
            Turn::Answer(statements) => {
                let statements =
                    sources::anchored(&self.ctx, &self.id, statements, Vec::new()).await;
                let answer = structured::answer_text(&statements);
                match self.accept(&answer, CommitVia::Structured) {
                    Ok(commit) => Next::Commit(commit),
                    Err(refused) => {
                        if let Some(last) = state.on_code(streak, &self.task, max_without_code) {
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

    /// Runs the reply's cells, then takes an answer a cell, the `answer`
    /// dict or the prose gave: a commit, the stop when too many cells failed
    /// in a row, or the next turn's message with the outputs and notes.
    async fn run_code(&mut self, state: &mut LoopState, parsed: ParsedReply) -> Next {
        let (mut outputs, mut notes) = (Vec::new(), Vec::new());
        let mut printed = String::new();
        let blocks = &parsed.code_blocks;
        if let Some(commit) = self
            .run_cells(state, blocks, &mut outputs, &mut printed, &mut notes)
            .await
        {
            return Next::Commit(commit);
        }
        if blocks.iter().any(|b| b.code.contains("ready"))
            && let Some(commit) = self.answer_dict(&mut notes).await
        {
            return Next::Commit(commit);
        }
        if let Some(d) = parsed.prose_final.clone() {
            if self
                .pasted_from_documents(parsed.prose_final_line.as_deref())
                .await
            {
                notes.push(prompts::NOTE_PASTED.trim().to_string());
            } else if let Some(commit) = self.prose_final(d, &mut notes).await {
                return Next::Commit(commit);
            }
        }
        let limit = self.ctx.config.budget.max_consecutive_errors;
        if state.consecutive_errors >= limit {
            return Next::Stop(self.exhausted(Exhausted::Errors { limit }));
        }
        Next::Nudge(
            self.next_turn(state, blocks, outputs, &printed, notes)
                .await,
        )
    }

    /// Runs the cells in order, each one's output kept for the next turn
    /// (and what the cells printed themselves, without the engine's notes,
    /// in `printed`); a FINAL a cell called is taken at once (`Some` when it
    /// commits).
    async fn run_cells(
        &mut self,
        state: &mut LoopState,
        blocks: &[CodeBlock],
        outputs: &mut Vec<String>,
        printed: &mut String,
        notes: &mut Vec<String>,
    ) -> Option<Commit> {
        for (i, block) in blocks.iter().enumerate() {
            let (mut rendered, cell_notes) = self.cell_output(state, i, &block.code).await;
            printed.push_str(&rendered);
            printed.push('\n');
            for note in cell_notes {
                rendered.push('\n');
                rendered.push_str(&note);
            }
            outputs.push(if blocks.len() > 1 {
                format!("REPL output of cell {}:\n{}", i + 1, rendered)
            } else {
                format!("REPL output:\n{rendered}")
            });
            self.remember_output(&rendered);
            if let Some(d) = self.take_final() {
                let answer = self.resolve(d).await;
                if let Some(commit) = self.take_answer(answer, CommitVia::Code, notes) {
                    return Some(commit);
                }
            }
        }
        None
    }

    /// Runs one cell of turn `state.turn`: its output as the model sees it
    /// (errors say what happened, silence says what to try) and the notes
    /// that follow it (a cut scan, code that cannot work).
    async fn cell_output(
        &mut self,
        state: &mut LoopState,
        index: usize,
        code: &str,
    ) -> (String, Vec<String>) {
        let rendered = match self.run_cell(state.turn, index, code).await {
            Ok(r) => {
                state.cell_ran(r.error.is_some());
                r.render(self.ctx.config.budget.truncate_len)
            }
            Err(e) => {
                state.cell_ran(true);
                format!(
                    "SandboxError: {e}\nA fresh REPL was started: variables from earlier cells are gone (context and documents are loaded again)."
                )
            }
        };
        let rendered = if rendered.trim().is_empty() {
            NO_OUTPUT.to_string()
        } else {
            rendered
        };
        let notes = self
            .host
            .take_notes()
            .into_iter()
            .chain(parse::code_lints(code))
            .collect();
        (rendered, notes)
    }

    /// The `answer = {"content": ..., "ready": True}` convention.
    async fn answer_dict(&mut self, notes: &mut Vec<String>) -> Option<Commit> {
        let Some(Value::Object(m)) = self.get_var("answer").await else {
            return None;
        };
        if m.get("ready").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        let content = m.get("content").map(value_to_text).unwrap_or_default();
        self.take_answer(Ok(content), CommitVia::AnswerDict, notes)
    }

    /// True when the line holding a prose FINAL is a line of a document the
    /// run showed (an instruction planted in the data, pasted back): it is
    /// not the model's answer, in any language.
    async fn pasted_from_documents(&self, line: Option<&str>) -> bool {
        let Some(line) = line.map(crate::citations::normalize) else {
            return false;
        };
        if line.chars().count() < PASTED_LINE_CHARS {
            return false;
        }
        let ctx = self.ctx.clone();
        tokio::task::spawn_blocking(move || {
            ctx.ledger
                .chunks(&ctx.corpus)
                .iter()
                .any(|c| crate::citations::normalize(&c.text).contains(&line))
        })
        .await
        .unwrap_or(false)
    }

    /// `FINAL(...)` in the reply's prose; `FINAL(name)` where `name` is a
    /// variable gives its value.
    async fn prose_final(&mut self, d: FinalDirective, notes: &mut Vec<String>) -> Option<Commit> {
        let d = match d {
            FinalDirective::Answer(a) if is_identifier(a.trim()) => {
                match self.get_var(a.trim()).await {
                    Some(v) => FinalDirective::Answer(value_to_text(&v)),
                    None => FinalDirective::Answer(a),
                }
            }
            other => other,
        };
        let answer = self.resolve(d).await;
        self.take_answer(answer, CommitVia::Prose, notes)
    }

    /// The next turn's message: the cells' outputs, then the notes (an
    /// answer not taken, a turn that repeats an earlier one, where the
    /// matches are after turns that only printed counts).
    async fn next_turn(
        &self,
        state: &mut LoopState,
        blocks: &[CodeBlock],
        outputs: Vec<String>,
        printed: &str,
        mut notes: Vec<String>,
    ) -> String {
        let mut body = outputs.join("\n\n");
        notes.extend(state.note_if_stuck(blocks, &body));
        if let Some(count) = state.counts_only_streak(printed)
            && let Some(windows) = self.match_windows().await
        {
            notes.push(render(
                prompts::NOTE_COUNTS,
                &[
                    ("count", &count.to_string()),
                    ("windows", &windows),
                    ("commit", state.commit),
                ],
            ));
        }
        for note in notes {
            body.push_str("\n\n");
            body.push_str(&note);
        }
        render(
            prompts::NEXT_TURN,
            &[
                ("outputs", &body),
                ("question", &self.task),
                ("next_step", prompts::next_step(self.structured, false)),
                ("turn", &(state.turn + 1).to_string()),
                ("max_turns", &state.max_turns.to_string()),
            ],
        )
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
            Stop::NoCode { .. } | Stop::Repeats { .. } => Ended::NoAnswer,
            Stop::NotFound { said } => {
                material.push_str(&format!("\nThe agent concluded: {said}\n"));
                Ended::NoAnswer
            }
        };
        extract(&self.ctx, &self.id, self.depth, &self.task, ended, material).await
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
        let prompt = if self.structured && self.last_reply_structured {
            render(prompts::FINAL_NOW_STRUCTURED, &[("question", &self.task)])
        } else {
            last.prompt
        };
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
