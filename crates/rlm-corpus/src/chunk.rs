//! Splitting a document's text into ordered chunks.
//!
//! Chunks break at paragraph, then line, then word boundaries, never inside a
//! UTF-8 character, and concatenated in order they reproduce the text exactly:
//! citations point at byte spans of the original text, so nothing may be lost
//! or rewritten here.

/// Default target size of a chunk, in characters.
pub const DEFAULT_CHUNK_CHARS: usize = 2000;

/// Smallest accepted target size; smaller chunks make BM25 statistics useless.
pub const MIN_CHUNK_CHARS: usize = 64;

/// One chunk as produced by the chunker, before it gets ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSpan {
    /// Byte offset of the first byte in the document text.
    pub byte_start: usize,
    /// Byte offset one past the last byte.
    pub byte_end: usize,
    /// 1-based line of the first character.
    pub line_start: u32,
    /// 1-based line of the last character.
    pub line_end: u32,
    /// 1-based PDF page the chunk starts on, when the document has pages.
    pub page: Option<u32>,
    /// The nearest Markdown heading at or before the chunk start.
    pub heading: Option<String>,
}

/// Where the text of each page starts (byte offsets, ascending, first is 0).
pub type PageStarts = [usize];

/// Splits `text` into chunks of about `target_chars` characters.
///
/// Page starts are hard boundaries: a chunk never spans two PDF pages, so a
/// citation's page number is exact. `markdown` enables heading tracking.
pub fn chunk_text(
    text: &str,
    target_chars: usize,
    page_starts: Option<&PageStarts>,
    markdown: bool,
) -> Vec<ChunkSpan> {
    let target = target_chars.max(MIN_CHUNK_CHARS);
    let mut spans = Vec::new();
    // Segments are whole pages, or the whole text when there are no pages.
    let mut segments: Vec<(usize, usize, Option<u32>)> = Vec::new();
    match page_starts {
        Some(starts) if !starts.is_empty() => {
            for (i, &start) in starts.iter().enumerate() {
                let end = starts.get(i + 1).copied().unwrap_or(text.len());
                if end > start {
                    segments.push((start, end, Some(i as u32 + 1)));
                }
            }
        }
        _ => segments.push((0, text.len(), None)),
    }

    let headings = if markdown {
        markdown_headings(text)
    } else {
        Vec::new()
    };
    let mut line = 1u32;
    let mut line_pos = 0usize;
    for (seg_start, seg_end, page) in segments {
        let mut pos = seg_start;
        while pos < seg_end {
            let end = next_cut(text, pos, seg_end, target);
            // Lines are counted incrementally so chunking stays linear in the text.
            line += count_newlines(&text.as_bytes()[line_pos..pos]);
            line_pos = pos;
            let inner = &text.as_bytes()[pos..end];
            // A trailing newline ends the chunk's last line; it does not start a new one.
            let trimmed = inner.strip_suffix(b"\n").unwrap_or(inner);
            let line_end = line + count_newlines(trimmed);
            spans.push(ChunkSpan {
                byte_start: pos,
                byte_end: end,
                line_start: line,
                line_end,
                page,
                heading: heading_at(&headings, pos),
            });
            pos = end;
        }
    }
    spans
}

fn count_newlines(bytes: &[u8]) -> u32 {
    memchr::memchr_iter(b'\n', bytes).count() as u32
}

/// The end (exclusive) of the chunk starting at `pos`.
fn next_cut(text: &str, pos: usize, seg_end: usize, target: usize) -> usize {
    let rest = &text[pos..seg_end];
    // Byte index after `target` chars; and after target/2 chars, the earliest cut.
    let mut limit = None;
    let mut min_cut = rest.len();
    for (count, (i, _)) in rest.char_indices().enumerate() {
        if count == target / 2 {
            min_cut = i;
        }
        if count == target {
            limit = Some(i);
            break;
        }
    }
    let Some(limit) = limit else {
        return seg_end;
    };
    let window = &rest[min_cut..limit];
    let cut = if let Some(i) = window.rfind("\n\n") {
        // Keep the blank line (and any further newlines) with the chunk it ends.
        let mut end = min_cut + i + 2;
        while rest.as_bytes().get(end) == Some(&b'\n') && end < limit {
            end += 1;
        }
        end
    } else if let Some(i) = window.rfind('\n') {
        min_cut + i + 1
    } else if let Some((i, c)) = window.char_indices().rev().find(|(_, c)| c.is_whitespace()) {
        min_cut + i + c.len_utf8()
    } else {
        limit
    };
    pos + cut
}

/// (byte offset, heading text) of every ATX Markdown heading, outside code fences.
fn markdown_headings(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence && let Some(h) = parse_atx_heading(trimmed) {
            out.push((offset, h));
        }
        offset += line.len();
    }
    out
}

/// The text of an ATX heading line (`## Title`), if `line` is one.
pub fn parse_atx_heading(line: &str) -> Option<String> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    (!title.is_empty()).then(|| title.to_string())
}

fn heading_at(headings: &[(usize, String)], pos: usize) -> Option<String> {
    let idx = headings.partition_point(|(off, _)| *off <= pos);
    idx.checked_sub(1).map(|i| headings[i].1.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn joined(text: &str, spans: &[ChunkSpan]) -> String {
        spans
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect()
    }

    #[test]
    fn short_text_is_one_chunk() {
        let spans = chunk_text("hello world", 2000, None, false);
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].line_start, spans[0].line_end), (1, 1));
    }

    #[test]
    fn empty_text_has_no_chunks() {
        assert!(chunk_text("", 2000, None, false).is_empty());
    }

    #[test]
    fn prefers_paragraph_breaks() {
        let para = "word ".repeat(30); // 150 chars
        let text = format!("{para}\n\n{para}\n\n{para}");
        let spans = chunk_text(&text, 200, None, false);
        assert!(spans.len() >= 2);
        assert!(text[..spans[0].byte_end].ends_with("\n\n"));
        assert_eq!(joined(&text, &spans), text);
        assert_eq!(spans[1].line_start, 3);
    }

    #[test]
    fn falls_back_to_word_then_hard_cut() {
        let text = "abcdefghij ".repeat(100);
        let spans = chunk_text(&text, 100, None, false);
        assert!(spans[0].byte_end <= 101 && text[..spans[0].byte_end].ends_with(' '));
        let solid = "x".repeat(1000);
        let spans = chunk_text(&solid, 100, None, false);
        assert_eq!(spans.len(), 10);
    }

    #[test]
    fn never_splits_multibyte_characters() {
        let text = "é".repeat(5000);
        let spans = chunk_text(&text, 100, None, false);
        for s in &spans {
            assert!(text.is_char_boundary(s.byte_start) && text.is_char_boundary(s.byte_end));
        }
        assert_eq!(joined(&text, &spans), text);
    }

    #[test]
    fn pages_are_hard_boundaries() {
        let text = "page one text\npage two text\n";
        let spans = chunk_text(text, 2000, Some(&[0, 14]), false);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].page, Some(1));
        assert_eq!(spans[1].page, Some(2));
        assert_eq!(spans[1].line_start, 2);
    }

    #[test]
    fn tracks_markdown_headings_outside_fences() {
        let body = "text ".repeat(40);
        let text = format!("# Intro\n{body}\n\n```\n# not a heading\n```\n\n## Terms\n{body}\n");
        let spans = chunk_text(&text, 120, None, true);
        assert_eq!(spans[0].heading.as_deref(), Some("Intro"));
        assert_eq!(spans.last().unwrap().heading.as_deref(), Some("Terms"));
        assert!(
            !spans
                .iter()
                .any(|s| s.heading.as_deref() == Some("not a heading"))
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn chunks_reproduce_text_exactly(
            text in "(\\PC|\n|\n\n| ){0,3000}",
            target in 64usize..400,
        ) {
            let spans = chunk_text(&text, target, None, true);
            prop_assert_eq!(joined(&text, &spans), text.clone());
            let mut expected_start = 0;
            for s in &spans {
                prop_assert_eq!(s.byte_start, expected_start);
                prop_assert!(s.byte_end > s.byte_start);
                prop_assert!(text.is_char_boundary(s.byte_end));
                prop_assert!(text[s.byte_start..s.byte_end].chars().count() <= target);
                prop_assert!(s.line_end >= s.line_start);
                let line = text[..s.byte_start].matches('\n').count() as u32 + 1;
                prop_assert_eq!(s.line_start, line);
                expected_start = s.byte_end;
            }
        }

        #[test]
        fn paged_chunks_reproduce_text(
            pages in proptest::collection::vec("(\\PC|\n){0,500}", 1..6),
            target in 64usize..300,
        ) {
            let mut text = String::new();
            let mut starts = Vec::new();
            for p in &pages { starts.push(text.len()); text.push_str(p); }
            let spans = chunk_text(&text, target, Some(&starts), false);
            prop_assert_eq!(joined(&text, &spans), text.clone());
            for s in &spans {
                let page = s.page.unwrap() as usize;
                prop_assert!(starts[page - 1] <= s.byte_start);
                prop_assert!(s.byte_end <= starts.get(page).copied().unwrap_or(text.len()));
            }
        }
    }
}
