//! The extraction call: when an agent's loop ends without a committed
//! answer (a budget, a cap, a failure, or a last turn that gave only prose),
//! one structured call answers from the best passages the run saw, each
//! statement naming its passage, or says what was found and what is
//! missing. The engine never commits its own output or the model's last
//! prose as the answer.

use std::sync::Arc;

use rlm_llm::{Message, ModelRole};
use rlm_sandbox::truncate_output;

use super::sources;
use super::structured::{self, Steps, Turn};
use super::synthesis::Outcome;
use crate::citations::{CitationSource, SourceChunk};
use crate::corpus::Corpus;
use crate::notices::{Notice, write};
use crate::parse;
use crate::prompts::{self, render};
use crate::run::{CallOpts, Run};
use crate::text;
use crate::trace::{CallPurpose, CommitVia, TraceEvent};

/// Passages the extraction call is given at most.
const PASSAGES: usize = 8;
/// Characters of one passage at most (the window around its match).
const PASSAGE_CHARS: usize = 1_500;
/// Characters of all the passages together.
const PASSAGES_CHARS: usize = 9_000;
/// Characters of the notes (findings, sub-call results, variables).
const NOTES_CHARS: usize = 6_000;
/// Full-text hits for the question looked at besides the ledger.
const SEARCH_HITS: usize = 5;

/// Why the loop ended without an answer.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// A budget, a cap or a failure stopped it: the answer is partial for
    /// this reason whatever the extraction finds.
    Stopped(String),
    /// The last turn gave no answer in the protocol.
    NoAnswer,
}

/// One passage shown to the extraction call.
struct Passage {
    reference: String,
    path: String,
    text: String,
}

/// The extraction call of agent `agent` for `task`, with `notes` (what the
/// agent gathered besides passages). Always returns an outcome.
pub(crate) async fn extract(
    ctx: &Arc<Run>,
    agent: &str,
    depth: u32,
    task: &str,
    ended: Ended,
    notes: String,
) -> Outcome {
    let passages = {
        let (ctx, task) = (ctx.clone(), task.to_string());
        tokio::task::spawn_blocking(move || best_passages(&ctx, &task))
            .await
            .unwrap_or_default()
    };
    let refs: Vec<String> = passages.iter().map(|p| p.reference.clone()).collect();
    let listing = passages
        .iter()
        .map(|p| format!("[{}] ({})\n{}\n", p.reference, p.path, p.text.trim()))
        .collect::<Vec<_>>()
        .join("\n");
    let situation = match &ended {
        Ended::Stopped(why) => format!("stopped before it finished ({why})"),
        Ended::NoAnswer => "ended without a committed answer".to_string(),
    };
    let notes = if notes.trim().is_empty() {
        String::new()
    } else {
        format!(
            "\nWhat the run noted besides (findings, sub-call results, variables):\n{}\n",
            truncate_output(&notes, NOTES_CHARS)
        )
    };
    let prompt = render(
        prompts::EXTRACT,
        &[
            ("situation", &situation),
            (
                "passages",
                if listing.is_empty() {
                    "(none)"
                } else {
                    &listing
                },
            ),
            ("notes", &notes),
            ("question", task),
        ],
    );
    let role = if depth == 0 {
        ModelRole::Root
    } else {
        ModelRole::Sub
    };
    let reply = ctx
        .call_model(
            agent,
            depth,
            role,
            &[Message::user(prompt)],
            0,
            CallOpts {
                schema: Some(structured::turn_schema(&refs, Steps::AnswerOnly)),
                ..CallOpts::default()
            },
            CallPurpose::Extraction,
            0,
        )
        .await
        .map(|r| r.text)
        .unwrap_or_default();
    let turn = match structured::parse_turn(&reply) {
        Some(Turn::Answer(statements)) => Some(Turn::Answer(
            sources::anchored(ctx, agent, statements, refs.clone()).await,
        )),
        other => other,
    };
    let outcome = outcome_of(turn, &reply, task, &ended, &|text| ctx.copies_a_note(text))
        .unwrap_or_else(|why| gathered(ctx, agent, &ended, &why, &passages));
    ctx.trace.emit(TraceEvent::Final {
        agent: agent.into(),
        depth,
        answer: outcome.answer.clone(),
        via: CommitVia::Extraction,
        deferred: false,
    });
    outcome
}

/// What the extraction reply gives: an answer (partial only when the loop
/// was stopped), "not found" (partial, saying what was found), or a plain
/// reply from an endpoint that ignored the schema, kept when it is an
/// answer and not a copy of the engine's own output. `turn` is the reply
/// read as a structured turn; `copies_a_note` tells a text that copies the
/// notes the run's host functions printed. `Err` says why there is no
/// answer to keep.
fn outcome_of(
    turn: Option<Turn>,
    reply: &str,
    task: &str,
    ended: &Ended,
    copies_a_note: &dyn Fn(&str) -> bool,
) -> Result<Outcome, String> {
    let stopped = match ended {
        Ended::Stopped(why) => Some(why.clone()),
        Ended::NoAnswer => None,
    };
    match turn {
        Some(Turn::Answer(statements)) => {
            let answer = structured::answer_text(&statements);
            if let Some(why) = no_answer(&answer, task, copies_a_note) {
                return Err(why);
            }
            Ok(Outcome {
                answer,
                partial_reason: stopped,
            })
        }
        // What was found, in the engine's words, says nothing the partial
        // outcome's list of documents would not.
        Some(Turn::NotFound(what)) if copies_a_note(&what) => {
            Err("the reply copied the engine's own output".into())
        }
        Some(Turn::NotFound(what)) if !what.is_empty() => Ok(Outcome {
            answer: what,
            partial_reason: Some(match stopped {
                Some(why) => format!("{why}; the passages found do not answer the question"),
                None => "the passages found do not answer the question".to_string(),
            }),
        }),
        Some(_) => Err("the extraction call gave no answer".into()),
        None => {
            let text = reply.trim();
            if text.is_empty() {
                return Err("the extraction call gave no reply".into());
            }
            if text.starts_with('{') {
                // A turn cut off before any whole statement: JSON, not an answer.
                return Err("the extraction reply was cut off before its end".into());
            }
            if let Some(why) = no_answer(text, task, copies_a_note) {
                return Err(why);
            }
            Ok(Outcome {
                answer: text.to_string(),
                partial_reason: Some(
                    stopped.unwrap_or_else(|| {
                        "the answer was not given in the structured format".into()
                    }),
                ),
            })
        }
    }
}

/// Why `answer` cannot be kept: it holds the engine's own output (document
/// headers, search listings, REPL output), or is no answer at all.
fn no_answer(answer: &str, task: &str, copies_a_note: &dyn Fn(&str) -> bool) -> Option<String> {
    if parse::holds_engine_output(answer) || copies_a_note(answer) {
        return Some("the reply copied the engine's own output".into());
    }
    parse::not_an_answer(answer, task)
}

/// The partial outcome when the extraction gave nothing to keep: which
/// documents the run looked at, and the findings and sub-call results the
/// agents wrote. Never the passages' text or the cells' output: a listing
/// of what the engine printed is not an answer.
fn gathered(ctx: &Run, agent: &str, ended: &Ended, why: &str, passages: &[Passage]) -> Outcome {
    let reason = match ended {
        Ended::Stopped(stop) => format!("{stop}; {why}"),
        Ended::NoAnswer => format!("no answer was committed; {why}"),
    };
    let mut paths: Vec<&str> = Vec::new();
    for p in passages {
        if !paths.contains(&p.path.as_str()) {
            paths.push(&p.path);
        }
    }
    let lang = ctx.notice_language;
    let looked_at = if paths.is_empty() {
        write(Notice::NoPassageFound, lang, "", "")
    } else {
        write(Notice::ClosestDocuments, lang, "", &paths.join(", "))
    };
    let mut answer = format!(
        "{} {looked_at}",
        write(Notice::NoAnswerEstablished, lang, &reason, "")
    );
    let written = super::synthesis::agents_notes(ctx, agent);
    if !written.is_empty() {
        answer.push_str("\n\n");
        answer.push_str(&write(Notice::AgentsNoted, lang, "", ""));
        answer.push('\n');
        answer.push_str(&truncate_output(&written, 6_000));
    }
    Outcome {
        answer,
        partial_reason: Some(reason),
    }
}

/// The passages the extraction call is given: the question's full-text hits
/// the agents saw, then the other chunks they saw (the last first), then the
/// hits they did not see; each the window around its match, within the caps.
fn best_passages(ctx: &Run, task: &str) -> Vec<Passage> {
    let corpus: &Corpus = &ctx.corpus;
    let seen = ctx.ledger.chunks(corpus);
    let query: String = text::words(task).take(40).collect::<Vec<_>>().join(" ");
    let hits: Vec<(SourceChunk, String)> = corpus
        .store()
        .search(&query, SEARCH_HITS)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| Some((corpus.chunk(&h.chunk_id)?, h.snippet.replace("**", ""))))
        .collect();
    let seen_ids: Vec<&str> = seen.iter().map(|c| c.id.as_str()).collect();
    let mut order: Vec<(SourceChunk, Option<String>)> = Vec::new();
    let mut push = |chunk: &SourceChunk, snippet: Option<&String>| {
        if !order.iter().any(|(c, _)| c.id == chunk.id) {
            order.push((chunk.clone(), snippet.cloned()));
        }
    };
    for (c, snippet) in hits
        .iter()
        .filter(|(c, _)| seen_ids.contains(&c.id.as_str()))
    {
        push(c, Some(snippet));
    }
    for c in seen.iter().rev() {
        push(c, None);
    }
    for (c, snippet) in &hits {
        push(c, Some(snippet));
    }
    let mut total = 0;
    let mut out = Vec::new();
    for (chunk, snippet) in order.into_iter().take(PASSAGES) {
        let text = window(&chunk.text, snippet.as_deref(), PASSAGE_CHARS);
        total += text.len();
        if total > PASSAGES_CHARS && !out.is_empty() {
            break;
        }
        out.push(Passage {
            reference: format!("chunk:{}", chunk.id),
            path: chunk.path.clone(),
            text,
        });
    }
    out
}

/// At most `max` bytes of `text` (on character boundaries): all of it when
/// it fits, else the stretch around `snippet` (where the search matched),
/// else its start.
fn window(text: &str, snippet: Option<&str>, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let at = snippet.and_then(|s| find_loosely(text, s)).unwrap_or(0);
    let mut start = at.saturating_sub(max / 3);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + max).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[start..end].to_string()
}

/// Where `snippet` starts in `text`, any run of whitespace matching any
/// other: a search hit's snippet makes each run of whitespace one space
/// (found with `str::find`, a snippet across a line break was never found,
/// and the window showed the chunk's start, cut before the match).
fn find_loosely(text: &str, snippet: &str) -> Option<usize> {
    let words: Vec<String> = snippet.split_whitespace().map(regex::escape).collect();
    if words.is_empty() {
        return None;
    }
    let pattern = regex::Regex::new(&words.join(r"\s+")).ok()?;
    pattern.find(text).map(|m| m.start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_keeps_the_match() {
        let text = format!("{}NEEDLE 8316{}", "a".repeat(5_000), "b".repeat(5_000));
        let w = window(&text, Some("NEEDLE 8316"), 1_500);
        assert!(w.contains("NEEDLE 8316"));
        assert!(w.len() <= 1_500);
        assert_eq!(window("short", None, 1_500), "short");
        // A snippet makes each run of whitespace one space.
        let lines = format!(
            "{}yank and\nIn 2019 the archivist\tmoved{}",
            "a ".repeat(2_000),
            " b".repeat(2_000)
        );
        let w = window(&lines, Some("yank and In 2019 the archivist moved"), 1_500);
        assert!(w.contains("In 2019 the archivist\tmoved"), "{w}");
        assert_eq!(find_loosely("x", "  "), None);
        let umlauts = "ä".repeat(2_000);
        assert!(window(&umlauts, None, 1_501).len() <= 1_501);
    }

    /// A tally's note, as a run printed it.
    const NOTE: &str = "Note: tally(\"stellt beim\") matched no line. No line holds all of [\"stellt\", \"beim\"] anywhere either; lines holding each word: \"stellt\" 4, \"beim\" 9. Leave out the words the lines do not use.";

    fn read(reply: &str, task: &str, ended: &Ended) -> Result<Outcome, String> {
        let copies = |text: &str| parse::copies_a_note(text, &[NOTE.to_string()]);
        outcome_of(structured::parse_turn(reply), reply, task, ended, &copies)
    }

    #[test]
    fn a_copy_of_a_note_is_no_outcome() {
        let task = "Wie stellt man beim Zählen die Anzahl voran?";
        let not_found = r#"{"thought": "", "step": {"not_found": "No line holds all of the words anywhere either; lines holding each word: stellt 4, beim 9."}}"#;
        let why = read(not_found, task, &Ended::NoAnswer).unwrap_err();
        assert!(why.contains("engine's own output"), "{why}");
        let answer = r#"{"thought": "", "step": {"answer": [{"text": "Leave out the words the lines do not use.", "source": null}]}}"#;
        assert!(read(answer, task, &Ended::NoAnswer).is_err());
        // What the model found, in its own words, is kept.
        let own = r#"{"thought": "", "step": {"not_found": "Die Handbuchseite von uniq nennt nur -c für die Anzahl."}}"#;
        assert!(read(own, task, &Ended::NoAnswer).is_ok());
    }

    #[test]
    fn the_reply_decides_the_outcome() {
        let task = "What is the vault code?";
        let answer = r#"{"thought": "", "step": {"answer": [{"text": "The vault code is 8316.", "source": {"ref": "chunk:ab-0", "quote": "vault code is 8316"}}]}}"#;
        let o = read(answer, task, &Ended::NoAnswer).unwrap();
        assert_eq!(
            o.answer,
            r#"The vault code is 8316. [[chunk:ab-0 "vault code is 8316"]]"#
        );
        assert_eq!(o.partial_reason, None);
        let o = read(
            answer,
            task,
            &Ended::Stopped("the call budget ran out".into()),
        )
        .unwrap();
        assert_eq!(o.partial_reason.as_deref(), Some("the call budget ran out"));
        let o = read(
            r#"{"thought": "", "step": {"not_found": "Nur die Adresse des Büros."}}"#,
            task,
            &Ended::NoAnswer,
        )
        .unwrap();
        assert_eq!(o.answer, "Nur die Adresse des Büros.");
        assert!(o.partial_reason.is_some());
        // A paste of the engine's search listing is never kept.
        let paste = "Full-text search for the question found these passages (a lead, not proof: check them):\n[[chunk:0a1b2c3d4e5f6a7b-0]] in [DOCUMENT 0: notes.txt]\n    The vault code is 8316.";
        assert!(read(paste, task, &Ended::NoAnswer).is_err());
        let pasted_answer = format!(
            r#"{{"thought": "", "step": {{"answer": [{{"text": {}, "source": null}}]}}}}"#,
            serde_json::to_string(paste).unwrap()
        );
        assert!(read(&pasted_answer, task, &Ended::NoAnswer).is_err());
        assert!(read("", task, &Ended::NoAnswer).is_err());
        let cut = r#"{"thought": "The question asks", "step": {"answer": [{"text": "Historic buildings", "source": {"ref": "chunk:ab-0", "quote": "The historic"#;
        assert!(read(cut, task, &Ended::NoAnswer).is_err());
    }
}
