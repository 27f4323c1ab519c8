//! Streaming generated text while it is decoded.
//!
//! Tokens are byte pieces: one character may span two tokens, and a stop
//! string may arrive split over several. [`StreamCursor`] passes on only text
//! that is final — whole characters, nothing that could still turn out to be
//! the start of a stop string — so the pieces a [`TextSink`] receives
//! concatenate to exactly the generated text.

// The cursor is used by inference (the `llama` feature) and by its tests.
#![cfg_attr(not(feature = "llama"), allow(dead_code))]

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Receives generated text as it becomes final. Called on the inference
/// thread, once per token at most: keep it short.
#[derive(Clone)]
pub struct TextSink(Arc<dyn Fn(&str) + Send + Sync>);

impl TextSink {
    /// A sink calling `callback`.
    pub fn new(callback: impl Fn(&str) + Send + Sync + 'static) -> Self {
        TextSink(Arc::new(callback))
    }

    pub(crate) fn send(&self, text: &str) {
        if !text.is_empty() {
            (self.0)(text);
        }
    }
}

impl fmt::Debug for TextSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TextSink")
    }
}

/// Equal when both are clones of one sink.
impl PartialEq for TextSink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How much of a growing output has been streamed.
#[derive(Debug, Default)]
pub(crate) struct StreamCursor {
    sent: usize,
}

impl StreamCursor {
    /// The new final text of `output` while generation goes on: everything
    /// not yet sent except an incomplete trailing character and a tail that
    /// could begin one of `stops`.
    pub(crate) fn advance<'a>(
        &mut self,
        output: &'a [u8],
        stops: &[String],
    ) -> Option<Cow<'a, str>> {
        let hold = incomplete_char_tail(output).max(stop_prefix_tail(output, stops));
        self.take(output, output.len().saturating_sub(hold))
    }

    /// The rest of `output` once generation ended (stop string already cut).
    pub(crate) fn finish<'a>(&mut self, output: &'a [u8]) -> Option<Cow<'a, str>> {
        self.take(output, output.len())
    }

    fn take<'a>(&mut self, output: &'a [u8], end: usize) -> Option<Cow<'a, str>> {
        if end <= self.sent {
            return None;
        }
        // Lossy like the final text, and split only between characters, so
        // both decode the same invalid bytes the same way.
        let text = String::from_utf8_lossy(&output[self.sent..end]);
        self.sent = end;
        Some(text)
    }
}

/// Bytes at the end of `bytes` that start a character not yet complete.
fn incomplete_char_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // A continuation byte: the lead is further back.
        }
        let needed = match b {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// The longest tail of `bytes` that is a proper prefix of a stop string.
fn stop_prefix_tail(bytes: &[u8], stops: &[String]) -> usize {
    stops
        .iter()
        .filter_map(|stop| {
            let stop = stop.as_bytes();
            (1..stop.len()).rev().find(|&k| bytes.ends_with(&stop[..k]))
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` one at a time, as tokens arrive, cutting at the first
    /// stop like the worker does; returns (streamed pieces, final text).
    fn stream(pieces: &[&[u8]], stops: &[&str]) -> (Vec<String>, String) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut cursor = StreamCursor::default();
        let mut output = Vec::new();
        let mut sent = Vec::new();
        for piece in pieces {
            output.extend_from_slice(piece);
            let cut = stops
                .iter()
                .filter_map(|s| output.windows(s.len()).position(|w| w == s.as_bytes()))
                .min();
            if let Some(at) = cut {
                output.truncate(at);
                sent.extend(cursor.finish(&output).map(|t| t.into_owned()));
                return (sent, String::from_utf8_lossy(&output).into_owned());
            }
            sent.extend(cursor.advance(&output, &stops).map(|t| t.into_owned()));
        }
        sent.extend(cursor.finish(&output).map(|t| t.into_owned()));
        (sent, String::from_utf8_lossy(&output).into_owned())
    }

    #[test]
    fn plain_tokens_stream_as_they_come() {
        let (sent, text) = stream(&[b"print(", b"len(context", b"))"], &[]);
        assert_eq!(sent, ["print(", "len(context", "))"]);
        assert_eq!(sent.concat(), text);
    }

    #[test]
    fn a_character_split_over_tokens_waits_until_whole() {
        let euro = "€".as_bytes(); // 3 bytes
        let (sent, text) = stream(&[b"cost ", &euro[..1], &euro[1..2], &euro[2..], b"5"], &[]);
        assert_eq!(sent, ["cost ", "€", "5"]);
        assert_eq!(text, "cost €5");
    }

    #[test]
    fn a_stop_string_split_over_tokens_is_never_streamed() {
        let (sent, text) = stream(&[b"answer", b" is 4\n`", b"``", b"output"], &["```output"]);
        assert_eq!(text, "answer is 4\n");
        assert_eq!(sent.concat(), text);
        assert!(sent.iter().all(|s| !s.contains('`')), "{sent:?}");
    }

    #[test]
    fn a_held_back_false_start_is_released_when_it_turns_out_not_to_be_a_stop() {
        let (sent, text) = stream(&[b"a `", b"b` c"], &["```"]);
        assert_eq!(sent, ["a ", "`b` c"]);
        assert_eq!(text, "a `b` c");
    }

    #[test]
    fn invalid_bytes_decode_like_the_final_text() {
        let (sent, text) = stream(&[b"x\xff", b"y", b"\xe2\x82"], &[]);
        assert_eq!(sent.concat(), text);
        assert_eq!(text, "x\u{fffd}y\u{fffd}");
    }
}
