//! The `repl` agent's loop as a turn machine: what the loop carries from one
//! turn to the next ([`LoopState`]), what a step decides ([`Next`]), and the
//! decisions that need neither a model nor a sandbox: a reply without code,
//! the same reply again, a turn that repeats an earlier one, turns that only
//! print counts. The agent (`agent.rs`) asks the model, runs the cells and
//! carries the decisions out.

use std::collections::HashSet;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};

use rlm_sandbox::truncate_output;

use crate::budget::Exhausted;
use crate::parse::{CodeBlock, ParsedReply, RepeatDetector};
use crate::prompts::{self, render};
use crate::run::MODEL_FAILED;
use crate::trace::CommitVia;

/// Turns in a row that only printed counts before the agent is shown where
/// the matches are.
const COUNTS_ONLY_TURNS: u32 = 3;

/// What the agent loop does next: the decision of one step.
pub(super) enum Next {
    /// Run the reply's code cells, then take any answer they or its prose give.
    RunCode(ParsedReply),
    /// Commit an answer: the agent's outcome.
    Commit(Commit),
    /// Tell the model this (the next user message) and ask again.
    Nudge(String),
    /// One last request for the answer.
    LastTurn(LastTurn),
    /// End without an answer: the synthesis fallback writes one.
    Stop(Stop),
}

/// An answer to commit, how it was given, and why it is partial if it is.
#[derive(Debug)]
pub(super) struct Commit {
    pub(super) answer: String,
    pub(super) via: CommitVia,
    pub(super) partial_reason: Option<String>,
}

impl Commit {
    /// `answer`, given via `via`, as it stands.
    pub(super) fn new(answer: &str, via: CommitVia) -> Self {
        Commit {
            answer: answer.to_string(),
            via,
            partial_reason: None,
        }
    }
}

/// One last request for the answer: the prompt says why; an answer is
/// committed via `via`, none ends the agent with `no_answer`.
#[derive(Debug)]
pub(super) struct LastTurn {
    pub(super) prompt: String,
    pub(super) iteration: u32,
    pub(super) via: CommitVia,
    pub(super) no_answer: Stop,
}

/// Why an agent stopped without a committed answer; its text is the reason
/// the synthesis fallback is given and the answer is partial for.
#[derive(Debug, Clone)]
pub(super) enum Stop {
    /// A budget ran out: the run's, the turns, or the errors in a row.
    Budget(Exhausted),
    /// The model call failed after retries (the provider's message).
    ModelFailed(String),
    /// Replies without code, and no answer on the last turn.
    NoCode { replies: u32 },
    /// A turn repeated an earlier one (the same reply again, or the same
    /// code and output), and no answer on the last turn.
    Repeats,
    /// The model said the documents do not hold the answer (what it said).
    NotFound { said: String },
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Budget(e) => write!(f, "{e}"),
            Stop::ModelFailed(m) => write!(f, "{MODEL_FAILED}{m}"),
            Stop::NoCode { replies } => {
                write!(f, "{replies} replies in a row had no code and no answer")
            }
            Stop::Repeats => write!(
                f,
                "a turn repeated an earlier one, and no answer when asked for one"
            ),
            Stop::NotFound { .. } => write!(f, "the agent found no answer in the documents"),
        }
    }
}

/// What the agent loop carries from one turn to the next.
pub(super) struct LoopState {
    /// The turn being played (1-based; 0 before the first).
    pub(super) turn: u32,
    /// The agent's turn cap.
    pub(super) max_turns: u32,
    /// Replies seen, to count the same reply in a row.
    repeats: RepeatDetector,
    /// Temperature of the next request; `None` = the configured one.
    pub(super) temperature: Option<f32>,
    /// Cells in a row that failed.
    pub(super) consecutive_errors: u32,
    /// Replies in a row with neither code nor FINAL.
    no_code_streak: u32,
    /// The first of those replies, shown back on the last turn.
    prose_reply: Option<String>,
    /// Every earlier turn's code and output, hashed: a turn that repeats any
    /// of them is stuck (a small model cycles through four cells as readily
    /// as through two).
    seen_turns: HashSet<u64>,
    /// The last turn repeated an earlier one (see [`LoopState::record_turn`]).
    stuck: bool,
    /// Turns in a row whose cells only printed counts.
    counts_only: u32,
    /// How the notes say to commit (see [`prompts::commit_how`]).
    pub(super) commit: &'static str,
    /// The root's first turn declared that the answer needs every line: its
    /// counts are then the answer's evidence, not a reason to search.
    pub(super) every_line: bool,
}

impl LoopState {
    /// The state before the first turn of an agent with `max_turns` turns
    /// that replies in structured turns or in text.
    pub(super) fn new(max_turns: u32, structured: bool) -> Self {
        LoopState {
            turn: 0,
            max_turns,
            repeats: RepeatDetector::default(),
            temperature: None,
            consecutive_errors: 0,
            no_code_streak: 0,
            prose_reply: None,
            seen_turns: HashSet::new(),
            stuck: false,
            counts_only: 0,
            commit: prompts::commit_how(structured),
            every_line: false,
        }
    }

    /// Records `reply`: how many times in a row it has been given.
    pub(super) fn observe(&mut self, reply: &str) -> u32 {
        self.repeats.observe(reply)
    }

    /// A reply with neither code nor FINAL (given `streak` times in a row).
    /// Small models answer in prose, then apologize to every nudge until the
    /// turn cap: one nudge; after `max_without_code` such replies, a last
    /// turn that shows them their first prose reply (often the answer,
    /// unmarked).
    pub(super) fn on_prose(
        &mut self,
        reply: &str,
        streak: u32,
        task: &str,
        max_without_code: u32,
    ) -> Next {
        self.no_code_streak += 1;
        if self.no_code_streak == 1 {
            self.prose_reply = Some(reply.trim().to_string());
        }
        if self.no_code_streak >= max_without_code.max(1) {
            let earlier = truncate_output(&self.prose_reply.take().unwrap_or_default(), 4000);
            let prompt = render(
                prompts::FINAL_FROM_PROSE,
                &[
                    ("count", &self.no_code_streak.to_string()),
                    ("earlier", &earlier),
                    ("question", task),
                ],
            );
            return Next::LastTurn(LastTurn {
                prompt,
                iteration: self.turn + 1,
                via: CommitVia::FinalFromProse,
                no_answer: Stop::NoCode {
                    replies: self.no_code_streak,
                },
            });
        }
        if streak >= 2 {
            self.temperature = Some(raised_temperature(streak));
        }
        Next::Nudge(render(prompts::NUDGE_NO_CODE, &[("question", task)]))
    }

    /// A reply with code or FINAL (given `streak` times in a row): `None`
    /// runs it. The same reply again asks for what already ran: the last
    /// turn (see [`LoopState::record_turn`] for why no nudge comes first).
    pub(super) fn on_code(&mut self, streak: u32, task: &str) -> Option<Next> {
        self.no_code_streak = 0;
        self.prose_reply = None;
        self.temperature = None;
        (streak >= 2).then(|| self.last_after_repeat(task))
    }

    /// The last turn, held to an answer, once a turn repeated an earlier one:
    /// asked before the next turn, which would repeat too.
    pub(super) fn last_if_stuck(&self, task: &str) -> Option<Next> {
        self.stuck.then(|| self.last_after_repeat(task))
    }

    /// The last turn after a turn that repeated an earlier one.
    fn last_after_repeat(&self, task: &str) -> Next {
        let prompt = render(
            prompts::FINAL_AFTER_REPEATS,
            &[("commit", self.commit), ("question", task)],
        );
        Next::LastTurn(LastTurn {
            prompt,
            iteration: self.turn + 1,
            via: CommitVia::FinalAfterRepeats,
            no_answer: Stop::Repeats,
        })
    }

    /// Records a cell's result: counts the errors in a row.
    pub(super) fn cell_ran(&mut self, failed: bool) {
        if failed {
            self.consecutive_errors += 1;
        } else {
            self.consecutive_errors = 0;
        }
    }

    /// Records the turn's code and output (`body`): a turn that repeats any
    /// earlier one is stuck (small models re-send a search whose answer they
    /// were shown, or cycle through a few cells, for 20 turns), and the next
    /// step is the last turn. No note comes first: a note after the first
    /// repeat ("do something different, or answer") was followed by the same
    /// code again 134 times of 155 in the embedded model's benchmark traces
    /// (by other code 6 times, by an answer 11), and each such turn cost a
    /// model call with the answer already in view.
    pub(super) fn record_turn(&mut self, blocks: &[CodeBlock], body: &str) {
        let mut signature = DefaultHasher::new();
        for b in blocks {
            b.code.trim().hash(&mut signature);
        }
        body.hash(&mut signature);
        self.stuck = !self.seen_turns.insert(signature.finish());
    }

    /// Records whether the turn's outputs (`body`) were only counts: after
    /// `COUNTS_ONLY_TURNS` such turns in a row, their number (the agent is
    /// then shown where the matches are, and the count starts again).
    pub(super) fn counts_only_streak(&mut self, body: &str) -> Option<u32> {
        if only_counts(body) {
            self.counts_only += 1;
        } else {
            self.counts_only = 0;
        }
        (self.counts_only >= COUNTS_ONLY_TURNS).then(|| std::mem::take(&mut self.counts_only))
    }
}

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

/// Temperature after the same reply without code `streak` times in a
/// row: a small model at low temperature repeats itself word for word.
fn raised_temperature(streak: u32) -> f32 {
    (0.4 + 0.3 * streak.saturating_sub(1) as f32).min(1.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = "When does the lease start?";

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
        assert!(!only_counts(crate::flows::repl::agent::NO_OUTPUT));
        assert!(!only_counts(""));
    }

    #[test]
    fn replies_without_code_get_a_nudge_then_a_last_turn_showing_the_first() {
        let mut state = LoopState::new(10, false);
        state.turn = 1;
        let nudge = render(prompts::NUDGE_NO_CODE, &[("question", TASK)]);
        assert!(matches!(
            state.on_prose(" It starts on March 1. ", 1, TASK, 2),
            Next::Nudge(n) if n == nudge
        ));
        state.turn = 2;
        let Next::LastTurn(last) = state.on_prose("Sorry.", 1, TASK, 2) else {
            panic!("the second reply without code gets the last turn");
        };
        assert_eq!(last.via, CommitVia::FinalFromProse);
        assert_eq!(last.iteration, 3);
        assert!(
            last.prompt.contains("\nIt starts on March 1.\n"),
            "{}",
            last.prompt
        );
        assert_eq!(
            last.no_answer.to_string(),
            "2 replies in a row had no code and no answer"
        );
        // A reply with code starts the count again.
        assert!(state.on_code(1, TASK).is_none());
        assert!(matches!(state.on_prose("x", 1, TASK, 2), Next::Nudge(_)));
    }

    #[test]
    fn the_same_reply_again_gets_the_last_turn() {
        let mut state = LoopState::new(10, false);
        state.turn = 4;
        assert!(state.on_code(1, TASK).is_none());
        assert_eq!(state.temperature, None);
        let Some(Next::LastTurn(last)) = state.on_code(2, TASK) else {
            panic!("the same reply again gets the last turn");
        };
        assert_eq!(last.via, CommitVia::FinalAfterRepeats);
        assert_eq!(last.iteration, 5);
        assert!(
            last.prompt
                .contains("Your last turn repeated an earlier one"),
            "{}",
            last.prompt
        );
        assert_eq!(
            last.no_answer.to_string(),
            "a turn repeated an earlier one, and no answer when asked for one"
        );
    }

    #[test]
    fn a_turn_that_repeats_any_earlier_one_is_stuck_and_counts_only_turns_are_noticed() {
        let mut state = LoopState::new(10, false);
        let cell = |code: &str| {
            [CodeBlock {
                lang: "repl".into(),
                code: code.into(),
            }]
        };
        state.record_turn(&cell("print(1)"), "REPL output:\n1");
        assert!(state.last_if_stuck(TASK).is_none(), "a new turn");
        state.record_turn(&cell("print(2)"), "REPL output:\n2");
        assert!(state.last_if_stuck(TASK).is_none(), "a new turn");
        // The same code with another output (the REPL's state changed) is new.
        state.record_turn(&cell("print(1)"), "REPL output:\n3");
        assert!(state.last_if_stuck(TASK).is_none());
        // The first turn again, two turns back (A, B, A): the last turn.
        state.record_turn(&cell(" print(1)\n"), "REPL output:\n1");
        let Some(Next::LastTurn(last)) = state.last_if_stuck(TASK) else {
            panic!("a turn that repeats an earlier one gets the last turn");
        };
        assert_eq!(last.via, CommitVia::FinalAfterRepeats);
        // A new turn after it is no longer stuck.
        state.record_turn(&cell("print(4)"), "REPL output:\n4");
        assert!(state.last_if_stuck(TASK).is_none());
        let counts: Vec<Option<u32>> = (0..4)
            .map(|_| state.counts_only_streak("REPL output:\n42"))
            .collect();
        assert_eq!(counts, [None, None, Some(3), None]);
    }
}
