//! Visible text of an HTML page.
//!
//! A small forgiving scanner rather than a full HTML5 parser: the corpus only
//! needs the words a reader would see, in order, with block elements on lines
//! of their own. Script, style and similar elements are dropped; entities are
//! decoded. It never fails: malformed markup degrades to text.

/// The result of extracting an HTML page.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HtmlText {
    /// The visible text.
    pub text: String,
    /// The `<title>`, or the first `<h1>`, when present.
    pub title: Option<String>,
}

/// Elements whose content is never visible.
const HIDDEN: &[&str] = &[
    "script", "style", "noscript", "template", "head", "svg", "iframe", "object",
];

/// Elements that start a new line.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "hr",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "fieldset",
    "address",
    "title",
    "body",
    "html",
];

/// Extracts the visible text and title of `html`.
pub fn html_to_text(html: &str) -> HtmlText {
    let mut out = String::with_capacity(html.len() / 2);
    let mut title: Option<String> = None;
    let mut h1: Option<String> = None;
    let mut capture: Option<(&'static str, String)> = None;
    let bytes = html.as_bytes();
    let mut i = 0;
    let mut in_pre = 0usize;
    while i < bytes.len() {
        if bytes[i] == b'<' {
            if html[i..].starts_with("<!--") {
                i = find_from(html, i + 4, "-->").map_or(bytes.len(), |e| e + 3);
                continue;
            }
            let Some(end) = tag_end(bytes, i + 1) else {
                // A lone '<' with no closing '>': it is text.
                push_text(&mut out, &mut capture, "<", in_pre > 0);
                i += 1;
                continue;
            };
            let inner = &html[i + 1..end];
            i = end + 1;
            let (closing, name) = tag_name(inner);
            if name.is_empty() || name.starts_with('!') || name.starts_with('?') {
                continue;
            }
            if !closing && HIDDEN.contains(&name.as_str()) && !inner.trim_end().ends_with('/') {
                // Title lives in <head>: capture it before skipping the head.
                if name == "head"
                    && let Some(t) = head_title(html, i)
                {
                    title.get_or_insert(t);
                }
                let close = format!("</{name}");
                i = find_ci(html, i, &close)
                    .map(|p| tag_end(bytes, p + 1).map_or(bytes.len(), |e| e + 1))
                    .unwrap_or(bytes.len());
                continue;
            }
            if name == "pre" {
                in_pre = if closing {
                    in_pre.saturating_sub(1)
                } else {
                    in_pre + 1
                };
            }
            match (name.as_str(), closing) {
                ("title", false) => capture = Some(("title", String::new())),
                ("h1", false) if h1.is_none() => capture = Some(("h1", String::new())),
                ("title", true) | ("h1", true) => {
                    if let Some((kind, text)) = capture.take() {
                        let text = collapse_spaces(&text);
                        if !text.is_empty() {
                            match kind {
                                "title" => title = title.or(Some(text)),
                                _ => h1 = h1.or(Some(text)),
                            }
                        }
                    }
                }
                _ => {}
            }
            if BLOCK.contains(&name.as_str()) && !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if name == "td" || name == "th" {
                push_text(&mut out, &mut capture, " ", false);
            }
        } else {
            let next = memchr::memchr(b'<', &bytes[i..]).map_or(bytes.len(), |p| i + p);
            let decoded = decode_entities(&html[i..next]);
            push_text(&mut out, &mut capture, &decoded, in_pre > 0);
            i = next;
        }
    }
    let text = tidy_lines(&out);
    HtmlText {
        text,
        title: title.or(h1),
    }
}

fn push_text(out: &mut String, capture: &mut Option<(&str, String)>, text: &str, pre: bool) {
    if let Some((_, buf)) = capture.as_mut() {
        buf.push_str(text);
    }
    if pre {
        out.push_str(text);
        return;
    }
    // Outside <pre>, runs of whitespace collapse to one space, as a browser renders.
    for c in text.chars() {
        if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with([' ', '\n']) {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
}

/// Trims trailing spaces on each line and collapses runs of blank lines.
fn tidy_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    for line in s.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank > 0 {
                out.push('\n');
            }
        }
        blank = 0;
        out.push_str(line);
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Index of the `>` closing a tag that starts at `from`, skipping quoted attributes.
fn tag_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut quote = None;
    for (off, &b) in bytes[from..].iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => return Some(from + off),
            None => {}
        }
    }
    None
}

fn tag_name(inner: &str) -> (bool, String) {
    let inner = inner.trim_start();
    let (closing, rest) = match inner.strip_prefix('/') {
        Some(r) => (true, r.trim_start()),
        None => (false, inner),
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '!' | '?' | '-'))
        .collect::<String>()
        .to_ascii_lowercase();
    (closing, name)
}

fn find_from(hay: &str, from: usize, needle: &str) -> Option<usize> {
    hay.get(from..)?.find(needle).map(|p| from + p)
}

/// Case-insensitive ASCII search for `needle` (lowercase) in `hay[from..]`.
fn find_ci(hay: &str, from: usize, needle: &str) -> Option<usize> {
    let h = hay.as_bytes();
    let n = needle.as_bytes();
    if n.is_empty() || h.len() < n.len() {
        return None;
    }
    (from..=h.len() - n.len()).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

fn head_title(html: &str, from: usize) -> Option<String> {
    let head_end = find_ci(html, from, "</head").unwrap_or(html.len());
    let start = find_ci(&html[..head_end], from, "<title")?;
    let open_end = tag_end(html.as_bytes(), start + 1)?;
    let close = find_ci(html, open_end, "</title").unwrap_or(head_end);
    if close <= open_end {
        return None;
    }
    let t = collapse_spaces(&decode_entities(&html[open_end + 1..close]));
    (!t.is_empty()).then_some(t)
}

/// Decodes numeric entities and the named ones that occur in practice.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let semi = memchr::memchr(b';', &rest.as_bytes()[..rest.len().min(12)]);
        let decoded = semi.and_then(|semi| decode_entity(&rest[1..semi]).map(|c| (c, semi)));
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn decode_entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "laquo" => '«',
        "raquo" => '»',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "euro" => '€',
        "pound" => '£',
        "sect" => '§',
        "para" => '¶',
        "middot" => '·',
        "bull" => '•',
        "deg" => '°',
        "auml" => 'ä',
        "ouml" => 'ö',
        "uuml" => 'ü',
        "Auml" => 'Ä',
        "Ouml" => 'Ö',
        "Uuml" => 'Ü',
        "szlig" => 'ß',
        "eacute" => 'é',
        "egrave" => 'è',
        "aacute" => 'á',
        "agrave" => 'à',
        "ccedil" => 'ç',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_visible_text_drops_scripts() {
        let html = r#"<html><head><title>Lease &amp; Terms</title><style>p{color:red}</style>
            <script>var x = "<p>hidden</p>";</script></head>
            <body><h1>Main</h1><p>Tenant gives <b>90 days</b> notice.</p><!-- secret -->
            <ul><li>one</li><li>two</li></ul><script>alert(1)</script></body></html>"#;
        let out = html_to_text(html);
        assert_eq!(out.title.as_deref(), Some("Lease & Terms"));
        assert!(out.text.contains("Tenant gives 90 days notice."));
        assert!(out.text.contains("one\ntwo"));
        for hidden in ["hidden", "alert", "secret", "color:red"] {
            assert!(!out.text.contains(hidden), "{hidden} leaked: {}", out.text);
        }
    }

    #[test]
    fn title_falls_back_to_h1_and_entities_decode() {
        let out = html_to_text("<h1>A &lt;b&gt; &#x263A; &#9731; &bogus;</h1>");
        assert_eq!(out.title.as_deref(), Some("A <b> ☺ ☃ &bogus;"));
    }

    #[test]
    fn malformed_markup_degrades_to_text() {
        let out = html_to_text("a < b and <p unterminated");
        assert!(out.text.contains("a < b and"));
        let out = html_to_text("<script>never closed");
        assert_eq!(out.text, "");
    }

    #[test]
    fn pre_keeps_whitespace() {
        let out = html_to_text("<p>x</p><pre>a  b\n  c</pre>");
        assert!(out.text.contains("a  b\n  c"), "{:?}", out.text);
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_input(s in "(<|>|/|!|-|&|;|#|x|[a-z]|\\PC| |\n|\"|'){0,400}") {
            let _ = html_to_text(&s);
        }
    }
}
