//! Running the cells of a turn: their outputs and notes, an answer a cell
//! gave, and the next turn's message.

use super::*;

impl Agent {
    /// Runs one cell; restarts the sandbox if the worker died.
    pub(super) async fn run_cell(
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

    pub(super) async fn get_var(&mut self, name: &str) -> Option<Value> {
        self.interp.as_mut()?.get_var(name).await.ok().flatten()
    }

    pub(super) fn take_final(&self) -> Option<FinalDirective> {
        self.host.take_final()
    }

    /// Runs the reply's cells, then takes an answer a cell, the `answer`
    /// dict or the prose gave: a commit, the stop when too many cells failed
    /// in a row, or the next turn's message with the outputs and notes.
    pub(super) async fn run_code(&mut self, state: &mut LoopState, parsed: ParsedReply) -> Next {
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
    pub(super) async fn run_cells(
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
    pub(super) async fn cell_output(
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
            .chain(partial_read_note(state, code))
            .collect();
        (rendered, notes)
    }

    /// The `answer = {"content": ..., "ready": True}` convention.
    pub(super) async fn answer_dict(&mut self, notes: &mut Vec<String>) -> Option<Commit> {
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
    pub(super) async fn pasted_from_documents(&self, line: Option<&str>) -> bool {
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
    pub(super) async fn prose_final(
        &mut self,
        d: FinalDirective,
        notes: &mut Vec<String>,
    ) -> Option<Commit> {
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
    /// answer not taken, where the matches are after turns that only
    /// printed counts). The turn is recorded: one that repeats an earlier
    /// turn gets the last turn next.
    pub(super) async fn next_turn(
        &self,
        state: &mut LoopState,
        blocks: &[CodeBlock],
        outputs: Vec<String>,
        printed: &str,
        mut notes: Vec<String>,
    ) -> String {
        let mut body = outputs.join("\n\n");
        state.record_turn(blocks, &body);
        // After "every line", counts are what the turns should print.
        if let Some(count) = state.counts_only_streak(printed)
            && !state.every_line
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

    /// Where the words of the agent's task fall in the corpus: the top
    /// full-text hits with their document, character offsets and the text
    /// around the match. `None` when nothing matches.
    pub(super) async fn match_windows(&self) -> Option<String> {
        let corpus = self.ctx.corpus.clone();
        let task = self.task.clone();
        let hits = tokio::task::spawn_blocking(move || corpus.match_windows(&task, 3))
            .await
            .ok()?;
        (!hits.is_empty()).then(|| hits.join("\n"))
    }

    pub(super) fn remember_output(&mut self, rendered: &str) {
        self.last_outputs.push(truncate_output(rendered, 4000));
        if self.last_outputs.len() > 3 {
            self.last_outputs.remove(0);
        }
    }
}

/// A note for code that reads only part of the corpus after the root
/// declared that the answer needs every line: none of the functions that
/// read it all (`tally`, `grep`, `grep_count`, `chunks`) is called.
fn partial_read_note(state: &LoopState, code: &str) -> Option<String> {
    const EXHAUSTIVE: [&str; 4] = ["tally(", "grep(", "grep_count(", "chunks("];
    (state.every_line && !EXHAUSTIVE.iter().any(|f| code.contains(f))).then(|| {
        "Note: you said the answer needs every line, and this code read only part of the corpus: count the lines with tally(pattern) (add number= to add up a number on them, by= for the most frequent), or read them all with grep(pattern).".to_string()
    })
}
