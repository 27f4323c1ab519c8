//! Coverage (opt-in): the documents that match the question but back no
//! claim.

use std::collections::HashSet;

use super::report::{ClaimReport, Coverage, Support};
use crate::citations::CitationStatus;
use crate::corpus::Corpus;

/// Full-text hits looked at for coverage.
const COVERAGE_HITS: usize = 100;

/// The documents matching `question` that no claim's passage comes from
/// (entailing or not: what the answer may have missed, not what it got
/// right).
pub fn coverage(question: &str, claims: &[ClaimReport], corpus: &Corpus) -> Coverage {
    let cited: HashSet<usize> = claims
        .iter()
        .filter(|c| c.support != Support::Unsupported)
        .flat_map(|c| c.citations.iter())
        .filter(|c| c.status == CitationStatus::Verified)
        .filter_map(|c| c.doc_index)
        .collect();
    let mut matching: Vec<(usize, String)> = Vec::new();
    for h in corpus
        .store()
        .search(question, COVERAGE_HITS)
        .unwrap_or_default()
    {
        if let Some(i) = corpus.index_of(&h.doc_id)
            && !matching.iter().any(|(j, _)| *j == i)
        {
            matching.push((i, h.path));
        }
    }
    Coverage {
        matching: matching.len(),
        cited: matching.iter().filter(|(i, _)| cited.contains(i)).count(),
        uncited: matching
            .into_iter()
            .filter(|(i, _)| !cited.contains(i))
            .map(|(_, p)| p)
            .collect(),
    }
}
