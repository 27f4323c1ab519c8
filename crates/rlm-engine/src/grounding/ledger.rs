//! The evidence ledger: what a run's agents saw (search hits, corpus text
//! cells printed or passed to sub-calls, mapped back to chunks, and
//! sub-answers).

use std::collections::HashSet;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::citations::{CitationSource, SourceChunk, normalize};
use crate::corpus::Corpus;

/// Entries a ledger keeps at most (later ones are counted, not kept).
const LEDGER_ENTRIES: usize = 2_000;
/// Characters of text kept per ledger entry.
const ENTRY_CHARS: usize = 2_000;
/// Printed lines per cell mapped back to chunks.
const LINES_PER_OUTPUT: usize = 12;
/// Shortest printed line worth mapping back to a chunk.
const MIN_LINE_CHARS: usize = 30;
/// What an agent saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A hit of `search()`.
    SearchHit,
    /// Corpus text a cell printed.
    Printed,
    /// Corpus text passed to a sub-model or sub-agent.
    SubPrompt,
    /// What a sub-model or sub-agent answered.
    SubAnswer,
}

/// One entry of the evidence ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// What kind of sighting.
    pub kind: EvidenceKind,
    /// The agent that saw it.
    pub agent: String,
    /// The chunk it maps to, when it is corpus text.
    pub chunk_id: Option<String>,
    /// That chunk's document.
    pub doc_index: Option<usize>,
    /// Byte span of the chunk in its document.
    pub byte_start: Option<u64>,
    /// End of that span.
    pub byte_end: Option<u64>,
    /// The text seen (capped).
    pub text: String,
}

impl Evidence {
    fn new(kind: EvidenceKind, agent: &str, chunk: Option<&SourceChunk>, text: &str) -> Self {
        Evidence {
            kind,
            agent: agent.to_string(),
            chunk_id: chunk.map(|c| c.id.clone()),
            doc_index: chunk.map(|c| c.doc_index),
            byte_start: chunk.map(|c| c.byte_start),
            byte_end: chunk.map(|c| c.byte_end),
            text: capped(text),
        }
    }
}

/// The evidence ledger of one run.
#[derive(Debug, Default)]
pub struct Ledger {
    inner: Mutex<LedgerInner>,
}

#[derive(Debug, Default)]
struct LedgerInner {
    entries: Vec<Evidence>,
    dropped: usize,
}

fn capped(text: &str) -> String {
    match text.char_indices().nth(ENTRY_CHARS) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}

impl Ledger {
    /// Records one entry (past [`LEDGER_ENTRIES`], only counts it).
    pub fn record(&self, e: Evidence) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.entries.len() >= LEDGER_ENTRIES {
            inner.dropped += 1;
        } else {
            inner.entries.push(e);
        }
    }

    /// Records a chunk an agent saw whole (a search hit).
    pub fn saw_chunk(&self, kind: EvidenceKind, agent: &str, chunk: &SourceChunk) {
        self.record(Evidence::new(kind, agent, Some(chunk), &chunk.text));
    }

    /// The entries, in the order they were seen, and how many were dropped.
    pub fn snapshot(&self) -> (Vec<Evidence>, usize) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (inner.entries.clone(), inner.dropped)
    }

    /// Chunk ids the agents saw, first sighting first.
    fn chunk_ids(&self) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = HashSet::new();
        inner
            .entries
            .iter()
            .filter_map(|e| e.chunk_id.clone())
            .filter(|id| seen.insert(id.clone()))
            .collect()
    }

    /// What an answer may cite: `chunk:ID` of every chunk and `doc:N` of
    /// every document the agents saw, first sighting first.
    pub(crate) fn refs(&self) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for e in &inner.entries {
            let chunk = e.chunk_id.as_ref().map(|id| format!("chunk:{id}"));
            let doc = e.doc_index.map(|n| format!("doc:{n}"));
            for r in chunk.into_iter().chain(doc) {
                if seen.insert(r.clone()) {
                    out.push(r);
                }
            }
        }
        out
    }

    /// The chunks the agents saw, read from `corpus`, first sighting first.
    pub(crate) fn chunks(&self, corpus: &Corpus) -> Vec<SourceChunk> {
        self.chunk_ids()
            .iter()
            .filter_map(|id| corpus.chunk(id))
            .collect()
    }
}

/// Ledger entries for text an agent saw or passed on, mapped back to the
/// chunks it was copied from (its longer lines, found verbatim in a chunk);
/// a sub-answer that maps to no chunk is kept as it is.
pub fn evidence_of(kind: EvidenceKind, agent: &str, text: &str, corpus: &Corpus) -> Vec<Evidence> {
    let chunks = locate(corpus, text);
    if chunks.is_empty() {
        return if kind == EvidenceKind::SubAnswer && !text.trim().is_empty() {
            vec![Evidence::new(kind, agent, None, text)]
        } else {
            Vec::new()
        };
    }
    chunks
        .iter()
        .map(|(chunk, line)| Evidence::new(kind, agent, Some(chunk), line))
        .collect()
}

/// The chunks that the longer lines of `text` were copied from.
fn locate(corpus: &Corpus, text: &str) -> Vec<(SourceChunk, String)> {
    let mut out: Vec<(SourceChunk, String)> = Vec::new();
    let lines = text
        .lines()
        .map(str::trim)
        .filter(|l| l.chars().count() >= MIN_LINE_CHARS)
        .take(LINES_PER_OUTPUT);
    for line in lines {
        let query: String = line
            .split_whitespace()
            .take(30)
            .collect::<Vec<_>>()
            .join(" ");
        let Ok(hits) = corpus.store().search(&query, 3) else {
            continue;
        };
        let needle = normalize(line);
        for h in hits {
            if out.iter().any(|(c, _)| c.id == h.chunk_id) {
                continue;
            }
            if normalize(&h.text).contains(&needle)
                && let Some(chunk) = corpus.chunk(&h.chunk_id)
            {
                out.push((chunk, line.to_string()));
                break;
            }
        }
    }
    out
}
