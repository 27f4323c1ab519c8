//! Whether an answer is taken: the checks before a commit (engine output,
//! a count not made, no answer, another language, a fan-out not seen yet)
//! and the commit.

use super::*;

impl Agent {
    /// An answer given this turn via `via`: deferred when the turn fanned
    /// out (its results not seen yet), else committed unless it is not an
    /// answer. `Err` is the note for the model's next turn.
    pub(super) fn accept(&mut self, answer: &str, via: CommitVia) -> Result<Commit, AnswerRefused> {
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
    pub(super) fn try_commit(
        &mut self,
        answer: &str,
        via: CommitVia,
        last_turn: bool,
    ) -> Result<Commit, AnswerRefused> {
        // A copy of what the engine printed is no answer, at any depth and
        // on any turn: the loop's end makes the extraction call instead.
        if parse::holds_engine_output(answer) || self.ctx.copies_a_note(answer) {
            return Err(AnswerRefused::EngineOutput);
        }
        // An answer that needs every line, before any line was counted,
        // is a guess: asked once to count first.
        if self.is_root() && !last_turn && self.every_line && !self.asked_to_count {
            let counted = self
                .ctx
                .scans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|s| s.agent == self.id && !s.by_engine && s.lines > 0);
            if !counted {
                self.asked_to_count = true;
                return Err(AnswerRefused::NotCounted);
            }
        }
        // A counted answer's number comes from something the model was
        // shown, never from nowhere. Asked once.
        if self.is_root()
            && !last_turn
            && self.every_line
            && !self.asked_for_shown_number
            && let Some(number) = self.number_never_shown(answer)
        {
            self.asked_for_shown_number = true;
            return Err(AnswerRefused::NumberNotShown { number });
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

    /// The first number `answer` states (its citations' quotes aside) that
    /// nothing the agent was shown holds: not the prompts, the question,
    /// the outputs of its cells or the passages; its own replies do not
    /// count (a number a small model wrote in its thought is still made up).
    fn number_never_shown(&self, answer: &str) -> Option<u64> {
        let stated = crate::scan::numbers_in(&crate::citations::without_markers(answer));
        if stated.is_empty() {
            return None;
        }
        let shown: std::collections::HashSet<u64> = self
            .messages
            .iter()
            .filter(|m| m.role != rlm_llm::Role::Assistant)
            .flat_map(|m| crate::scan::numbers_in(&m.content))
            .collect();
        stated.into_iter().find(|n| !shown.contains(n))
    }

    /// An answer this turn gave (or why it gave none, for the next turn's
    /// notes): taken as [`Self::accept`] says.
    pub(super) fn take_answer(
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
    pub(super) async fn fact_seen_in_prose(&mut self, reply: &str) -> Option<Commit> {
        let text = reply.trim();
        if !self.is_root()
            || text.is_empty()
            || text.chars().count() > PROSE_ANSWER_CHARS
            || parse::abstains(text)
            || parse::announces_steps(text)
            || parse::holds_engine_output(text)
            || self.ctx.copies_a_note(text)
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
    pub(super) fn commit(&self, commit: Commit) -> Outcome {
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

    pub(super) fn defer(&mut self, answer: &str, via: CommitVia, subcalls: u32) -> AnswerRefused {
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
    pub(super) async fn resolve(&mut self, d: FinalDirective) -> Result<String, AnswerRefused> {
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
}
