//! The passage the entailment judge reads for a claim: each verified quote
//! with a little of the text around it in its chunk (a quote often names
//! its subject one sentence earlier), bounded so an answer stays one call.

use crate::citations::{self, Citation, CitationSource, SourceChunk};

/// Characters of the chunk kept on each side of a quote.
const CONTEXT_CHARS: usize = 200;

/// Longest passage given to the judge for one claim.
const PASSAGE_CHARS: usize = 1_500;

/// The passage of `citations` (those whose quote verified): each quote with
/// the text around it in its chunk, or the quote alone where its chunk is
/// not known (a quote over a chunk boundary).
pub(super) fn passage_of(citations: &[&Citation], source: &dyn CitationSource) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in citations {
        let Some(quote) = c.quote.as_deref().filter(|q| !q.trim().is_empty()) else {
            continue;
        };
        let chunk = c.chunk_id.as_deref().and_then(|id| source.chunk(id));
        let part = match chunk {
            Some(chunk) => quoted_in(&chunk, c, quote),
            None => quote.trim().to_string(),
        };
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    let joined = parts.join("\n…\n");
    crate::text::head(&joined, PASSAGE_CHARS).to_string()
}

/// The quote of `cite` in `chunk`, with context: at the span the engine
/// recorded, else where the quote's text is found (case and whitespace
/// aside), else the quote alone.
fn quoted_in(chunk: &SourceChunk, cite: &Citation, quote: &str) -> String {
    let engine_span = cite
        .byte_start
        .zip(cite.byte_end)
        .filter(|_| cite.origin == citations::CitationOrigin::Engine)
        .and_then(|(a, b)| {
            let start = a.checked_sub(chunk.byte_start)? as usize;
            let end = b.checked_sub(chunk.byte_start)? as usize;
            (end <= chunk.text.len()
                && chunk.text.is_char_boundary(start)
                && chunk.text.is_char_boundary(end))
            .then_some((start, end))
        });
    match engine_span.or_else(|| locate(&chunk.text, quote)) {
        Some((start, end)) => around(&chunk.text, start, end),
        None => quote.trim().to_string(),
    }
}

/// The byte span of `quote` in `text`, compared as citations are checked
/// (case folded, whitespace collapsed); an elided quote (`a ... b`) spans
/// from its first piece to its last.
pub(super) fn locate(text: &str, quote: &str) -> Option<(usize, usize)> {
    let (folded, map) = folded_with_offsets(text);
    let pieces: Vec<String> = quote
        .split("...")
        .flat_map(|p| p.split('…'))
        .map(citations::normalize)
        .map(|p| {
            p.trim_matches(|c: char| c == '"' || c == '\'')
                .trim()
                .to_string()
        })
        .filter(|p| !p.is_empty())
        .collect();
    let first = pieces.first()?;
    let last = pieces.last()?;
    let at = folded.find(first.as_str())?;
    let end_at = folded[at..].find(last.as_str())? + at + last.len();
    let start = map[at];
    let end = map[end_at - 1];
    let end = end + text[end..].chars().next().map_or(0, char::len_utf8);
    Some((start, end))
}

/// `text` normalized as [`citations::normalize`] does it, with the byte
/// offset in `text` of each byte of the result.
fn folded_with_offsets(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    let mut space: Option<usize> = None;
    for (i, ch) in text.char_indices() {
        if ch.is_whitespace() {
            if !out.is_empty() && space.is_none() {
                space = Some(i);
            }
            continue;
        }
        if let Some(at) = space.take() {
            out.push(' ');
            map.push(at);
        }
        let buf = citations::normalize(&ch.to_string());
        for _ in 0..buf.len() {
            map.push(i);
        }
        out.push_str(&buf);
    }
    (out, map)
}

/// `text[start..end]` with up to [`CONTEXT_CHARS`] characters on each
/// side, cut at whole words; `…` marks a cut.
fn around(text: &str, start: usize, end: usize) -> String {
    let before = &text[..start];
    let after = &text[end..];
    let lead_from = before
        .char_indices()
        .rev()
        .nth(CONTEXT_CHARS)
        .map_or(0, |(i, _)| i);
    // Start at a word: past the partial word the window cut into.
    let lead_from = if lead_from == 0 {
        0
    } else {
        before[lead_from..]
            .find(char::is_whitespace)
            .map_or(start, |k| lead_from + k)
    };
    let tail_to = after
        .char_indices()
        .nth(CONTEXT_CHARS)
        .map_or(after.len(), |(i, _)| i);
    let tail_to = if tail_to == after.len() {
        tail_to
    } else {
        after[..tail_to].rfind(char::is_whitespace).unwrap_or(0)
    };
    let mut out = String::new();
    if lead_from > 0 {
        out.push('…');
    }
    out.push_str(text[lead_from..end + tail_to].trim());
    if end + tail_to < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_found_case_and_whitespace_aside_and_given_context() {
        let text = "Chicago is a monthly magazine published by tronc.\nMetrosource is a  bi-monthly magazine.";
        let (a, b) = locate(text, "metrosource is a bi-monthly").unwrap();
        assert_eq!(&text[a..b], "Metrosource is a  bi-monthly");
        let (a, b) = locate(text, "Chicago is a monthly ... by tronc").unwrap();
        assert_eq!(
            &text[a..b],
            "Chicago is a monthly magazine published by tronc"
        );
        assert!(locate(text, "weekly").is_none());
        // Short texts whole; long ones cut at words, marked.
        assert_eq!(around(text, a, b), text);
        let long = format!(
            "{} The code is 4721. {}",
            "word ".repeat(100),
            "tail ".repeat(100)
        );
        let at = long.find("The code").unwrap();
        let p = around(&long, at, at + "The code is 4721.".len());
        assert!(p.starts_with("…word "), "{p}");
        assert!(p.ends_with(" tail…") || p.ends_with("tail…"), "{p}");
        assert!(p.contains("The code is 4721."));
        assert!(p.chars().count() <= 2 * CONTEXT_CHARS + 20, "{p}");
        // Multi-byte text keeps its boundaries.
        let de = "Die Zeitschrift erscheint monatlich. Öffnungszeiten: täglich.";
        let (a, b) = locate(de, "öffnungszeiten: täglich").unwrap();
        assert_eq!(&de[a..b], "Öffnungszeiten: täglich");
    }
}
