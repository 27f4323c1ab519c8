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
    /// Where the chunk is, as a person cites it, for documents whose places
    /// are not pages: `slide 4`, `sheet "Q3", rows 10–14`, `message of …`.
    pub location: Option<String>,
    /// The nearest Markdown heading at or before the chunk start.
    pub heading: Option<String>,
}

/// A place of a document that people cite: a page, a slide, a sheet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A 1-based page (PDF).
    Page(u32),
    /// A 1-based slide of a presentation.
    Slide(u32),
    /// A sheet of a workbook; `rows` holds, per data row written, the byte
    /// offset of its line in the document text and its 1-based row number
    /// in the sheet (ascending), so a chunk names the rows it holds.
    Sheet {
        /// The sheet's name.
        name: String,
        /// (byte offset of the row's line, row number).
        rows: Vec<(usize, u32)>,
    },
    /// Any other place, already worded for a citation (`chapter 3`,
    /// `message of 2024-03-02 from …`).
    Named(String),
}

/// Where a place's text starts in the document text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Byte offset of the section's first byte.
    pub start: usize,
    /// The place it is.
    pub place: Place,
}

impl Section {
    /// A section starting at `start`.
    pub fn new(start: usize, place: Place) -> Section {
        Section { start, place }
    }
}

/// Sections of a document that is one page per entry of `starts` (PDF).
pub fn page_sections(starts: &[usize]) -> Vec<Section> {
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| Section::new(start, Place::Page(i as u32 + 1)))
        .collect()
}

/// The page and location of a chunk `[start, end)` inside `place`.
fn place_of(place: Option<&Place>, start: usize, end: usize) -> (Option<u32>, Option<String>) {
    match place {
        None => (None, None),
        Some(Place::Page(n)) => (Some(*n), None),
        Some(Place::Slide(n)) => (None, Some(format!("slide {n}"))),
        Some(Place::Named(label)) => (None, Some(label.clone())),
        Some(Place::Sheet { name, rows }) => {
            let first = rows.partition_point(|(off, _)| *off < start);
            let last = rows.partition_point(|(off, _)| *off < end);
            let label = match &rows[first..last] {
                [] => format!("sheet \"{name}\""),
                [(_, row)] => format!("sheet \"{name}\", row {row}"),
                [(_, a), .., (_, b)] => format!("sheet \"{name}\", rows {a}–{b}"),
            };
            (None, Some(label))
        }
    }
}

/// Splits `text` into chunks of about `target_chars` characters.
///
/// Section starts are hard boundaries: a chunk never spans two PDF pages,
/// slides or sheets, so a citation's place is exact. `markdown` enables
/// heading tracking.
pub fn chunk_text(
    text: &str,
    target_chars: usize,
    sections: Option<&[Section]>,
    markdown: bool,
) -> Vec<ChunkSpan> {
    let target = target_chars.max(MIN_CHUNK_CHARS);
    let mut spans = Vec::new();
    // Segments are whole sections, or the whole text when there are none.
    let mut segments: Vec<(usize, usize, Option<&Place>)> = Vec::new();
    match sections {
        Some(sections) if !sections.is_empty() => {
            if sections[0].start > 0 {
                segments.push((0, sections[0].start.min(text.len()), None));
            }
            for (i, section) in sections.iter().enumerate() {
                let start = section.start.min(text.len());
                let end = sections
                    .get(i + 1)
                    .map_or(text.len(), |s| s.start.min(text.len()));
                if end > start {
                    segments.push((start, end, Some(&section.place)));
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
    for (seg_start, seg_end, place) in segments {
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
            let (page, location) = place_of(place, pos, end);
            spans.push(ChunkSpan {
                byte_start: pos,
                byte_end: end,
                line_start: line,
                line_end,
                page,
                location,
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
        let spans = chunk_text(text, 2000, Some(&page_sections(&[0, 14])), false);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].page, Some(1));
        assert_eq!(spans[1].page, Some(2));
        assert_eq!(spans[1].line_start, 2);
    }

    #[test]
    fn sheet_chunks_name_their_rows_and_slides_their_number() {
        let header = "## Sheet \"Q3\"\nRegion | Sales\n";
        let mut text = String::from(header);
        let mut rows = Vec::new();
        for row in 2..40u32 {
            rows.push((text.len(), row));
            text.push_str(&format!("Region: North {row} | Sales: {}\n", row * 10));
        }
        let slide_at = text.len();
        text.push_str("Quarterly plan\n");
        let sections = [
            Section::new(
                0,
                Place::Sheet {
                    name: "Q3".into(),
                    rows,
                },
            ),
            Section::new(slide_at, Place::Slide(4)),
        ];
        let spans = chunk_text(&text, 200, Some(&sections), false);
        assert!(spans.len() > 3);
        assert_eq!(
            spans[0]
                .location
                .as_deref()
                .map(|l| l.starts_with("sheet \"Q3\", rows 2–")),
            Some(true)
        );
        let last_sheet = &spans[spans.len() - 2];
        assert!(
            last_sheet.location.as_deref().unwrap().ends_with("39"),
            "{last_sheet:?}"
        );
        assert_eq!(spans.last().unwrap().location.as_deref(), Some("slide 4"));
        assert_eq!(spans.last().unwrap().page, None);
        assert_eq!(joined(&text, &spans), text);
    }

    #[test]
    fn text_before_the_first_section_has_no_place() {
        let text = "cover\nslide text\n";
        let spans = chunk_text(text, 2000, Some(&[Section::new(6, Place::Slide(1))]), false);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].location, None);
        assert_eq!(spans[1].location.as_deref(), Some("slide 1"));
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
            let spans = chunk_text(&text, target, Some(&page_sections(&starts)), false);
            prop_assert_eq!(joined(&text, &spans), text.clone());
            for s in &spans {
                let page = s.page.unwrap() as usize;
                prop_assert!(starts[page - 1] <= s.byte_start);
                prop_assert!(s.byte_end <= starts.get(page).copied().unwrap_or(text.len()));
            }
        }
    }
}
