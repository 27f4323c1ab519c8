//! What an agent is told before its first turn: the system prompt, the
//! corpus overview and the first message.

use super::*;
use crate::config::EngineConfig;

impl Agent {
    /// The agent's first messages: the system prompt and the question with
    /// what an inspection cell found.
    pub(super) async fn brief(&mut self, max_turns: u32) {
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
        for system in self.system_prompt(&shape, &context_note, max_turns).await {
            self.messages.push(Message::system(system));
        }
        let first = self.first_message(&context_note).await;
        self.messages.push(Message::user(first));
    }

    /// What `context` is, in words, and the characters of each of its parts.
    pub(super) fn context_shape(&self) -> (String, Vec<u64>) {
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
        (
            corpus_shape(self.ctx.config.context_shape).to_string(),
            sizes,
        )
    }

    /// The system prompt: a sub-agent's, or the root's in two messages.
    /// The first, the instructions, depends on the settings only, so every
    /// question over every store starts with it: a model that keeps prompt
    /// prefixes (the embedded model's prefix state on disk, a provider's
    /// prompt cache) has it ready before the first question on a new store.
    /// The second holds the briefing and the corpus index.
    pub(super) async fn system_prompt(
        &mut self,
        shape: &str,
        context_note: &str,
        max_turns: u32,
    ) -> Vec<String> {
        let cfg = &self.ctx.config;
        let depth_note = depth_note(cfg, self.depth);
        let truncate = cfg.budget.truncate_len.to_string();
        let sub_chars = cfg.sub_context_chars.to_string();
        if self.depth != 0 {
            return vec![render(
                &prompts::system_sub_template(self.structured),
                &[
                    ("context_shape", shape),
                    ("sub_context_chars", &sub_chars),
                    ("truncate_len", &truncate),
                    ("depth_note", depth_note),
                    ("iterations", &max_turns.to_string()),
                ],
            )];
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
        let instructions = instructions(&self.ctx.config, self.structured, shape);
        let this_store = format!("{}\n{}", briefing.trim(), corpus.trim());
        let mut parts = vec![instructions];
        if !this_store.trim().is_empty() {
            parts.push(this_store.trim().to_string());
        }
        parts
    }

    /// The root's document index, from a cell run for it. It goes into the
    /// system prompt, not the first user message: it depends on the corpus
    /// only, so the system prompt is a prefix every question over the corpus
    /// shares.
    pub(super) async fn corpus_overview(&mut self, context_note: &str) -> String {
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
    pub(super) async fn first_message(&mut self, context_note: &str) -> String {
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
                ("inspection", &inspection_shown(is_root, &inspection)),
                ("inspection_output", output),
                (
                    "next_step",
                    if is_root && self.structured {
                        prompts::ROOT_FIRST_STRUCTURED
                    } else {
                        prompts::next_step(self.structured, true)
                    },
                ),
            ],
        )
    }
}

/// The root's first system message, its instructions: they depend on the
/// settings (`cfg`, the turn protocol) and on what `context` is (`shape`),
/// never on the store or the question.
fn instructions(cfg: &EngineConfig, structured: bool, shape: &str) -> String {
    render(
        &prompts::system_root_template(structured),
        &[
            ("context_shape", shape),
            ("sub_context_chars", &cfg.sub_context_chars.to_string()),
            ("depth_note", depth_note(cfg, 0)),
            ("truncate_len", &cfg.budget.truncate_len.to_string()),
        ],
    )
    .trim_end()
    .to_string()
}

/// The root's first system message under the settings `cfg`, as every run
/// over the whole corpus sends it: what [`crate::Engine::warm_up`] decodes
/// ahead of the first question.
pub(crate) fn root_instructions(cfg: &EngineConfig) -> String {
    instructions(
        cfg,
        cfg.turn_format.structured(),
        corpus_shape(cfg.context_shape),
    )
}

/// What `context` is, in words, when it holds the whole corpus.
fn corpus_shape(shape: ContextShape) -> &'static str {
    match shape {
        ContextShape::String => {
            "one string holding every document, each preceded by a `[DOCUMENT i: path]` header line (search it with `re.findall(..., context)`, `context.find(...)`, `context.splitlines()`, slice it freely; `documents[i][\"text\"]` is document i alone)"
        }
        ContextShape::List => {
            "a list of strings, `context[i]` is the text of document i (fast to slice per document)"
        }
    }
}

/// What the prompt says about `rlm_query` at `depth`.
fn depth_note(cfg: &EngineConfig, depth: u32) -> &'static str {
    if depth + 1 >= cfg.budget.max_depth {
        " At your depth, `rlm_query` is a plain `llm_query`."
    } else {
        ""
    }
}

/// How the inspection is introduced. A sub-agent sees its short cell. The
/// root's cell is the engine's own (a page of code, ~400 tokens the model
/// would read before every first turn), and a weak model copied it as its
/// own first step; the root is told what it did instead.
fn inspection_shown(is_root: bool, code: &str) -> String {
    if is_root {
        "The system already looked at the corpus for you: earlier questions and findings of this session, the full-text search for the question, and how many lines of the whole corpus hold each word of the question.".to_string()
    } else {
        format!("The REPL already ran this inspection cell for you:\n```repl\n{code}\n```")
    }
}
