//! The scripted model and store of the pipeline flow tests (`pipeline.rs`,
//! `cpython_sandbox.rs`): a model that reads each prompt and answers the way a
//! model would for that stage, two résumés and a memo, and the helpers that
//! read an answer's trace.
#![allow(dead_code)]

use std::sync::Arc;

use crate::common::TestStore;
use rlm_corpus::{IndexOptions, Store};
use rlm_engine::{
    Answer, AskRequest, Corpus, EngineConfig, Flow, FlowsConfig, Inspector, TraceEvent, TraceRecord,
};
use rlm_llm::testing::ReceivedRequest;
use rlm_llm::testing::{Reply, Script, ScriptedServer};

/// Two résumés and an unrelated memo, chunked small so each paragraph is a chunk.
pub fn resume_store() -> TestStore {
    let alexis = [
        "Alexis Torres, resume. Contact alexis at example dot com, based in Madrid, Spain, open to relocation.",
        "Skills: Python, Rust, SQL, Kubernetes and distributed systems design; strong written communication.",
        "Experience 2015-2018: Engineer at Acme Corp building billing software for European utilities.",
        "Experience 2019 - Present: Staff engineer at Gamma Labs, currently leading the data platform team.",
        "Education: BSc Computer Science at the University of Madrid, graduated in 2014 with honours.",
        "Hobbies: hiking in the Pyrenees, competitive chess, and cooking paella for friends on weekends.",
        "References are available on request; languages spoken are Spanish, English and some French.",
    ];
    let kevin = [
        "Kevin Li, resume. Frontend developer based in Toronto, Canada, with ten years of experience.",
        "Skills: Java, TypeScript, React and frontend performance work; mentoring junior developers.",
        "Experience 2020 - Present: Senior developer at Northwind, currently owning the checkout pages.",
    ];
    let memo =
        ["The office moves to the fourth floor in March; parking permits must be renewed by then."];
    store_with(
        &[
            ("alexis_resume.txt", alexis.join("\n\n")),
            ("kevin_resume.txt", kevin.join("\n\n")),
            ("office_memo.txt", memo.join("\n\n")),
        ],
        110,
    )
}

pub fn store_with(files: &[(&str, String)], chunk_chars: usize) -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (name, text) in files {
        std::fs::write(docs.join(name), text).unwrap();
    }
    let store_dir = dir.path().join("store");
    let opts = IndexOptions {
        chunk_chars,
        ..IndexOptions::default()
    };
    Store::index(&store_dir, &[docs], &opts, &mut |_| {}).unwrap();
    let store = Arc::new(Store::open(&store_dir).unwrap());
    let corpus = Arc::new(Corpus::load(store).unwrap());
    TestStore { dir, corpus }
}

/// How the scripted model behaves at each stage.
#[derive(Clone)]
pub struct Model {
    /// Chunk programs: "skills" (keyed on the word skills), "own_word" (each
    /// chunk's own first long word: selects everything), "absent" (a query
    /// word no chunk has), "default_true" (invalid), "raises", "garbage_true",
    /// "generator" (the skills program written with `yield`: CPython only).
    pub chunk: &'static str,
    /// Iteration programs: "skills" (conf 0.6), "skills_confident" (0.95),
    /// "same_two" (the first two ids again and again, conf 0.3), "all"
    /// (every chunk by a loop), "prose" (no code), "list" (returns a list),
    /// "keyword" (chunks with `keyword`, `iter_conf`, `iter_stop`).
    pub iteration: &'static str,
    /// The word "skills" programs look for.
    pub keyword: &'static str,
    /// Confidence and stop expression of "keyword" iteration programs.
    pub iter_conf: &'static str,
    pub iter_stop: &'static str,
    /// Extra text the merge appends.
    pub merge_extra: &'static str,
    /// Triage route.
    pub route: &'static str,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            chunk: "skills",
            iteration: "keyword",
            keyword: "skills",
            iter_conf: "0.6",
            iter_stop: "len(sel) > 0",
            merge_extra: "",
            route: "rag",
        }
    }
}

pub fn between<'a>(s: &'a str, start: &str, end: &str) -> &'a str {
    let a = s.find(start).map(|i| i + start.len()).unwrap_or(0);
    let b = s[a..].find(end).map(|i| a + i).unwrap_or(s.len());
    &s[a..b]
}

/// `[chunk:ID]\ntext` (or `[ID]\ntext`) passages of a prompt.
pub fn passages(prompt: &str, open: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for part in prompt.split(open).skip(1) {
        let Some((id, rest)) = part.split_once(']') else {
            continue;
        };
        let text = rest
            .trim_start_matches([' ', '('])
            .lines()
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if !id.contains(char::is_whitespace) {
            out.push((id.to_string(), text));
        }
    }
    out
}

pub fn quote_of(text: &str) -> String {
    text.chars().take(40).collect::<String>().trim().to_string()
}

pub fn fence(code: &str) -> String {
    format!("```python\n{code}\n```")
}

impl Model {
    fn reply(&self, r: &ReceivedRequest) -> Option<Reply> {
        let p = r.last_message();
        if p.contains("Extract the semantic intent") {
            let q = between(p, "Question: ", "\n");
            let attribute = if q.contains("work") {
                "current employer"
            } else {
                "skills"
            };
            return Some(Reply::text(format!(
                "{{\"entity\": \"Alexis\", \"attribute\": \"{attribute}\", \"output_type\": \"list\", \"semantic_intent\": \"{q}\"}}"
            )));
        }
        if p.contains("Decide how to answer a question") {
            return Some(Reply::text(format!(
                "{{\"route\": \"{}\", \"reason\": \"scripted triage\"}}",
                self.route
            )));
        }
        if p.contains("def evaluate_chunk_relevance") {
            let chunk = between(p, "\"\"\"\n", "\n\"\"\"").to_lowercase();
            let code = match self.chunk {
                "skills" => format!("def evaluate_chunk_relevance(chunk_text: str) -> bool:\n    t = chunk_text.lower()\n    if '{}' in t:\n        return True\n    return False", self.keyword),
                "own_word" => {
                    let w = chunk.split(|c: char| !c.is_alphanumeric()).find(|w| w.len() >= 4).unwrap_or("resume");
                    format!("def evaluate_chunk_relevance(chunk_text: str) -> bool:\n    if '{w}' in chunk_text.lower():\n        return True\n    return False")
                }
                "absent" => "def evaluate_chunk_relevance(chunk_text):\n    if 'quokka' in chunk_text.lower():\n        return True\n    return False".to_string(),
                "default_true" => "def evaluate_chunk_relevance(chunk_text):\n    if 'skills' in chunk_text.lower():\n        return True\n    return True".to_string(),
                "raises" => "def evaluate_chunk_relevance(chunk_text):\n    t = chunk_text.lower()\n    if 'skills' in t:\n        return 1 // 0 == 1\n    return False".to_string(),
                // A generator (`yield`): CPython runs it, monty does not.
                "generator" => "def evaluate_chunk_relevance(chunk_text):\n    def lines():\n        for line in chunk_text.lower().splitlines():\n            yield line\n    for line in lines():\n        if 'skills' in line:\n            return True\n    return False".to_string(),
                _ => unreachable!(),
            };
            return Some(Reply::text(fence(&code)));
        }
        if p.contains("def inspect_iteration") {
            let code = match self.iteration {
                "keyword" => format!(
                    "def inspect_iteration(chunks):\n    sel = []\n    for c in chunks:\n        if '{k}' in c['text'].lower():\n            sel.append(c['chunk_id'])\n    return {{'selected_chunk_ids': sel, 'extracted_data': {{'{k}': len(sel)}}, 'confidence': {}, 'stop': {}}}",
                    self.iter_conf,
                    self.iter_stop,
                    k = self.keyword
                ),
                "same_two" => "def inspect_iteration(chunks):\n    sel = [chunks[0]['chunk_id'], chunks[1]['chunk_id']]\n    return {'selected_chunk_ids': sel, 'extracted_data': {}, 'confidence': 0.3, 'stop': False}".to_string(),
                "all" => "def inspect_iteration(chunks):\n    sel = []\n    for c in chunks:\n        sel.append(c['chunk_id'])\n    return {'selected_chunk_ids': sel, 'extracted_data': {}, 'confidence': 0.99, 'stop': False}".to_string(),
                "list" => "def inspect_iteration(chunks):\n    return ['selected_chunk_ids']".to_string(),
                "prose" => return Some(Reply::text("I would look for skills in the chunks.")),
                _ => unreachable!(),
            };
            return Some(Reply::text(fence(&code)));
        }
        if p.contains("Form your best hypothesis") {
            return Some(Reply::text(
                "{\"statement\": \"Alexis has skills in Python and Rust\", \"confidence\": 0.7, \"gaps\": [\"cloud\"]}",
            ));
        }
        if p.contains("Score how much each passage") {
            let scores: Vec<String> = passages(p, "\n[")
                .into_iter()
                .map(|(id, text)| {
                    let s = if text.to_lowercase().contains("skills") {
                        0.9
                    } else {
                        0.1
                    };
                    format!("\"{id}\": {s}")
                })
                .collect();
            return Some(Reply::text(format!(
                "{{\"scores\": {{{}}}}}",
                scores.join(", ")
            )));
        }
        if p.contains("Summarize what these passages") {
            let lines: Vec<String> = passages(p, "[chunk:")
                .into_iter()
                .map(|(id, text)| {
                    let q = quote_of(&text);
                    format!("- {q} [[chunk:{id} \"{q}\"]]")
                })
                .collect();
            return Some(Reply::text(lines.join("\n")));
        }
        if p.contains("Answer the question from the per-file summaries") {
            let mut lines: Vec<&str> = p
                .lines()
                .filter(|l| l.starts_with("- ") && l.contains("[[chunk:"))
                .collect();
            lines.dedup();
            let mut text = lines.join("\n");
            text.push_str(self.merge_extra);
            return Some(Reply::text(text));
        }
        if p.contains("Answer the question using only the passages") {
            let ps = passages(p, "[chunk:");
            let (id, text) = ps.first()?;
            let q = quote_of(text);
            return Some(Reply::text(format!(
                "From the passages: {q} [[chunk:{id} \"{q}\"]]."
            )));
        }
        if r.system().contains("You are a sub-agent") {
            if r.messages.len() <= 2 {
                return Some(Reply::text(
                    "```repl\nids = []\nfor c in context:\n    if 'skills' in c.lower():\n        ids.append(c.split('\\n')[0][7:-1])\nprint(ids)\nFINAL_VAR(\"ids\")\n```",
                ));
            }
            return Some(Reply::text("FINAL(none)"));
        }
        None
    }
}

pub async fn server(model: Model) -> ScriptedServer {
    ScriptedServer::start(Script::new().respond_with(move |r| model.reply(r))).await
}

pub fn config(flows: FlowsConfig) -> EngineConfig {
    EngineConfig {
        root_model: "root-model".into(),
        sub_model: "sub-model".into(),
        flows,
        ..EngineConfig::default()
    }
}

/// Runs a question with a JSONL trace (the shared harness's `ask_with`).
pub use crate::common::ask_with as run;
/// The engine of these tests: the shared harness's (a monty pool).
pub use crate::common::engine;

pub fn pipeline_req(question: &str, inspector: Inspector) -> AskRequest {
    let mut req = AskRequest::new(question);
    req.flow = Flow::Pipeline;
    req.pipeline.inspector = Some(inspector);
    req
}

pub fn fallbacks(trace: &[TraceRecord]) -> Vec<(String, String)> {
    trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Fallback { kind, reason, .. } => Some((kind.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

pub fn steps(trace: &[TraceRecord], step: &str) -> Vec<String> {
    trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::FlowStep {
                step: s, message, ..
            } if s == step => Some(message.clone()),
            _ => None,
        })
        .collect()
}

pub fn has_fallback(trace: &[TraceRecord], kind: &str, needle: &str) -> bool {
    fallbacks(trace)
        .iter()
        .any(|(k, r)| k == kind && r.contains(needle))
}

pub fn summary_of<'a>(answer: &'a Answer, file: &str) -> &'a rlm_engine::FileSummary {
    answer
        .file_summaries
        .iter()
        .find(|f| f.path.ends_with(file))
        .unwrap_or_else(|| panic!("no summary of {file}: {:?}", answer.file_summaries))
}

/// Texts of the chunks with these ids.
pub fn texts(ts: &TestStore, ids: &[String]) -> Vec<String> {
    ids.iter()
        .map(|id| ts.corpus.store().chunk(id).unwrap().unwrap().text)
        .collect()
}
