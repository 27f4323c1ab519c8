//! Showing user-controlled text (file names, titles, snippets, trace fields,
//! cell output) on a terminal without letting it act on the terminal: a file
//! named with an escape sequence or a newline must not recolor the screen or
//! forge a row of a table.

use std::borrow::Cow;

/// Characters that change what a terminal shows beyond printing a glyph:
/// C0 and C1 controls, DEL, and the bidirectional overrides and isolates
/// (which reorder the rest of a line).
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_where(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !escape(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            _ => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// `s` for one cell of a table or one line: every control character
/// (newlines and tabs too) written as an escape, e.g. `\u{1b}`, `\n`.
pub fn one_line(s: &str) -> Cow<'_, str> {
    escape_where(s, is_unsafe)
}

/// Multi-line text (cell output, a chunk's text) for a terminal: newlines and
/// tabs kept, every other control character written as an escape.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c != '\n' && c != '\t' && is_unsafe(c))
}

/// [`for_terminal`] when `tty` (output goes to a terminal), else `s` as is
/// (a pipe or file gets the exact text).
pub fn for_output(s: &str, tty: bool) -> Cow<'_, str> {
    if tty {
        for_terminal(s)
    } else {
        Cow::Borrowed(s)
    }
}

/// An error as the one line `rlm` prints: the message and its causes joined
/// by `: `, every control character escaped (a file name holding a newline
/// or an escape sequence cannot forge a second line or recolor the screen).
pub fn error_line(err: &anyhow::Error) -> String {
    let mut msg = err.to_string();
    for cause in err.chain().skip(1) {
        msg.push_str(": ");
        msg.push_str(&cause.to_string());
    }
    one_line(&msg).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped() {
        assert_eq!(one_line("a\u{1b}[31mb\nc\td"), "a\\u{1b}[31mb\\nc\\td");
        assert_eq!(one_line("plain é"), "plain é");
        assert_eq!(one_line("x\u{202e}y\u{9b}"), "x\\u{202e}y\\u{9b}");
        assert_eq!(
            for_terminal("a\u{1b}]0;t\u{7}\nb\tc\r"),
            "a\\u{1b}]0;t\\u{7}\nb\tc\\r"
        );
        assert_eq!(for_output("a\u{1b}", false), "a\u{1b}");
    }
}
