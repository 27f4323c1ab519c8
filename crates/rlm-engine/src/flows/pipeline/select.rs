//! Deterministic selection helpers shared by the inspectors: the cheap score,
//! the top-k fallback, the post-selection budget
//! (`RLM_MAX_SELECTED_CHUNKS_PER_FILE`, `RLM_MAX_TOTAL_CHARS_FOR_SUMMARY`) and recency
//! prioritization.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::program::query_terms;
use crate::config::FlowsConfig;
use crate::retrieval::FileChunk;

/// Cheap relevance: distinct query terms in the chunk, plus one for a chunk
/// stage-1 retrieval returned.
pub fn cheap_score(terms: &[String], text: &str, entry: bool) -> usize {
    let t = text.to_lowercase();
    terms.iter().filter(|w| t.contains(w.as_str())).count() + usize::from(entry)
}

/// The top-k fallback: the `k` best chunks by cheap score
/// (ties by document order), returned in document order.
pub(crate) fn top_k(chunks: &[&FileChunk], query: &str, k: usize) -> Vec<String> {
    let terms = query_terms(query);
    let mut scored: Vec<(usize, usize)> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (cheap_score(&terms, &c.text, c.entry), i))
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut keep: Vec<usize> = scored.into_iter().take(k).map(|(_, i)| i).collect();
    keep.sort_unstable();
    keep.into_iter().map(|i| chunks[i].id.clone()).collect()
}

/// `k` for the deterministic fallbacks: half the set, at least `min_keep`,
/// at most `RLM_MAX_SELECTED_CHUNKS_PER_FILE`.
pub(crate) fn fallback_k(n: usize, cfg: &FlowsConfig) -> usize {
    (n / 2)
        .max(cfg.min_keep)
        .min(cfg.max_selected_chunks_per_file)
        .min(n)
        .max(1)
}

static YEAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(19[5-9]\d|20\d\d)\b").expect("year regex"));
static PRESENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(present|current|currently|now|to date|ongoing|today)\b")
        .expect("present regex")
});

/// How recent a chunk looks: (mentions the present, latest year mentioned).
pub fn recency_key(text: &str) -> (bool, u32) {
    let latest = YEAR
        .find_iter(text)
        .filter_map(|m| m.as_str().parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    (PRESENT.is_match(text), latest)
}

/// The chunks the summary is written from: the inspector's selection
/// (unknown ids and duplicates removed), most recent first when `recency`,
/// else in document order, then cut to `RLM_MAX_SELECTED_CHUNKS_PER_FILE` chunks
/// and `RLM_MAX_TOTAL_CHARS_FOR_SUMMARY` characters (the first chunk is kept
/// even when alone it is longer; the summary prompt truncates it).
pub(crate) fn post_select(
    chunks: &[FileChunk],
    selected: &[String],
    cfg: &FlowsConfig,
    recency: bool,
) -> Vec<FileChunk> {
    let wanted: HashSet<&str> = selected.iter().map(String::as_str).collect();
    let mut picked: Vec<&FileChunk> = chunks
        .iter()
        .filter(|c| wanted.contains(c.id.as_str()))
        .collect();
    if recency {
        // Stable: equally recent chunks keep document order.
        picked.sort_by_key(|c| std::cmp::Reverse(recency_key(&c.text)));
    }
    let mut out: Vec<FileChunk> = Vec::new();
    let mut chars = 0usize;
    for c in picked {
        if out.len() == cfg.max_selected_chunks_per_file {
            break;
        }
        let n = c.text.chars().count();
        if !out.is_empty() && chars + n > cfg.max_total_chars_for_summary {
            continue;
        }
        chars += n;
        out.push(c.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &str, text: &str) -> FileChunk {
        FileChunk {
            id: id.into(),
            ordinal: id.trim_start_matches('c').parse().unwrap_or(0),
            text: text.into(),
            entry: false,
        }
    }

    #[test]
    fn top_k_is_deterministic_and_ordered() {
        let cs = [
            chunk("c0", "nothing"),
            chunk("c1", "python skills"),
            chunk("c2", "skills"),
            chunk("c3", "python rust skills"),
        ];
        let refs: Vec<&FileChunk> = cs.iter().collect();
        assert_eq!(top_k(&refs, "python skills", 2), ["c1", "c3"]);
    }

    #[test]
    fn budget_caps_count_and_chars() {
        let cfg = FlowsConfig {
            max_selected_chunks_per_file: 2,
            max_total_chars_for_summary: 10,
            ..FlowsConfig::default()
        };
        let cs = [
            chunk("c0", "aaaaaa"),
            chunk("c1", "bbbbbb"),
            chunk("c2", "cc"),
            chunk("c3", "d"),
        ];
        let all: Vec<String> = cs.iter().map(|c| c.id.clone()).collect();
        let kept: Vec<String> = post_select(&cs, &all, &cfg, false)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(kept, ["c0", "c2"]);
    }

    #[test]
    fn recency_puts_present_and_latest_first() {
        let cfg = FlowsConfig::default();
        let cs = [
            chunk("c0", "2015-2018 Engineer at Acme"),
            chunk("c1", "2019-2021 Lead at Beta"),
            chunk("c2", "2022 - Present: Director at Gamma"),
        ];
        let all: Vec<String> = cs.iter().map(|c| c.id.clone()).collect();
        let kept: Vec<String> = post_select(&cs, &all, &cfg, true)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(kept, ["c2", "c1", "c0"]);
        let kept: Vec<String> = post_select(&cs, &all, &cfg, false)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(kept, ["c0", "c1", "c2"]);
    }
}
