//! Reading model replies: fenced code blocks, FINAL directives written in
//! prose, JSON objects inside prose, and detection of replies that repeat
//! themselves.
//!
//! Models trained on the RLM format write ```repl fences; small general models
//! write ```python, ```py or a bare ``` fence instead, so those are accepted as
//! fallbacks (only when no ```repl fence is present, because a reply that has
//! both usually shows Python as an example next to the code it wants run).
//!
//! `code.rs` adapts the model's code for the sandbox and notes code that
//! cannot work; `verdicts.rs` judges what a reply or answer is (the engine's
//! own output, an id given as the answer, another language).

use serde_json::Value;

mod code;
mod verdicts;

pub use code::{adapt_async_calls, code_lints};
pub(crate) use verdicts::SEARCH_LEAD;
pub use verdicts::{
    abstains, announces_steps, copies_a_note, holds_engine_output, language_mismatch,
    not_an_answer, speaks_the_protocol,
};

/// One fenced code block the engine will execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The fence's info string, lowercased (`repl`, `python`, `py`, or empty).
    pub lang: String,
    /// The code between the fences, without the fence lines.
    pub code: String,
}

/// A `FINAL(...)` or `FINAL_VAR(...)` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalDirective {
    /// `FINAL(answer)`: the answer text itself.
    Answer(String),
    /// `FINAL_VAR(name)`: the name of a REPL variable holding the answer.
    Var(String),
}

/// Everything the engine needs from one model reply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedReply {
    /// Code blocks to run, in order.
    pub code_blocks: Vec<CodeBlock>,
    /// A FINAL directive written as a line outside any code fence.
    pub prose_final: Option<FinalDirective>,
    /// The line that holds it, as written.
    pub prose_final_line: Option<String>,
}

/// Fence languages run when no ```repl fence is present, in order of trust.
const FALLBACK_LANGS: &[&str] = &["python", "py", "python3", ""];

/// A fenced region of the reply: byte range of the whole fence and its parts.
struct Fence {
    lang: String,
    code: String,
    start: usize,
    end: usize,
}

/// Splits a reply into fenced regions. An unclosed fence at the end (a reply cut
/// off by the output-token limit) runs to the end of the text.
fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut open: Option<(usize, String, usize)> = None; // (fence start, lang, code start)
    for line in text.split_inclusive('\n') {
        let line_start = pos;
        pos += line.len();
        let trimmed = line.trim();
        match &open {
            None => {
                if let Some(rest) = trimmed.strip_prefix("```") {
                    // A one-line ```repl x = 1``` fence: language then code.
                    if let Some(inner) = rest.strip_suffix("```")
                        && !inner.is_empty()
                    {
                        let (lang, code) = match inner.split_once(char::is_whitespace) {
                            Some((l, c)) => (l.to_ascii_lowercase(), c.trim().to_string()),
                            None => (String::new(), inner.trim().to_string()),
                        };
                        out.push(Fence {
                            lang,
                            code,
                            start: line_start,
                            end: pos,
                        });
                        continue;
                    }
                    let lang = rest.trim().to_ascii_lowercase();
                    open = Some((line_start, lang, pos));
                }
            }
            Some((start, lang, code_start)) => {
                if trimmed.starts_with("```") && trimmed.trim_start_matches('`').trim().is_empty() {
                    let code = text[*code_start..line_start].trim_end_matches(['\n', '\r']);
                    out.push(Fence {
                        lang: lang.clone(),
                        code: code.to_string(),
                        start: *start,
                        end: pos,
                    });
                    open = None;
                }
            }
        }
    }
    if let Some((start, lang, code_start)) = open {
        out.push(Fence {
            lang,
            code: text[code_start.min(text.len())..].trim_end().to_string(),
            start,
            end: text.len(),
        });
    }
    out
}

/// Extracts the code blocks to execute from a reply: every ```repl block, or if
/// there is none, every block of the first fallback language present.
pub fn extract_code_blocks(reply: &str) -> Vec<CodeBlock> {
    let all = fences(reply);
    let pick = |lang: &str| -> Vec<CodeBlock> {
        all.iter()
            .filter(|f| f.lang == lang && !f.code.trim().is_empty())
            .map(|f| CodeBlock {
                lang: f.lang.clone(),
                code: f.code.clone(),
            })
            .collect()
    };
    let repl = pick("repl");
    if !repl.is_empty() {
        return repl;
    }
    for lang in FALLBACK_LANGS {
        let blocks = pick(lang);
        if !blocks.is_empty() {
            return blocks;
        }
    }
    Vec::new()
}

/// The reply with every fenced region blanked out (newlines kept), so prose
/// scanning never sees code.
fn prose_only(reply: &str) -> String {
    let mut out = String::with_capacity(reply.len());
    let mut last = 0;
    for f in fences(reply) {
        out.push_str(&reply[last..f.start]);
        out.extend(reply[f.start..f.end].chars().filter(|c| *c == '\n'));
        last = f.end;
    }
    out.push_str(&reply[last..]);
    out
}

/// Finds a FINAL directive written as a line outside code fences, e.g.
/// `FINAL(The answer is 42)` or `FINAL_VAR(result)`. Only the first counts.
pub fn find_prose_final(reply: &str) -> Option<FinalDirective> {
    prose_final_and_line(reply).map(|(d, _)| d)
}

/// [`find_prose_final`] and the line it is on, trimmed.
fn prose_final_and_line(reply: &str) -> Option<(FinalDirective, String)> {
    let prose = prose_only(reply);
    let mut offset = 0;
    for line in prose.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        // Tolerate markdown emphasis and list markers around the directive.
        let lead = line.len()
            - line
                .trim_start_matches([' ', '\t', '*', '>', '-', '`'])
                .len();
        let rest = &prose[line_start + lead..];
        if let Some(arg) = rest.strip_prefix("FINAL_VAR") {
            if let Some(inner) = call_argument(arg) {
                let name = unquote(inner.trim());
                if !name.is_empty() {
                    return Some((FinalDirective::Var(name), line.trim().to_string()));
                }
            }
        } else if let Some(arg) = rest
            .strip_prefix("FINAL")
            // `Final(` written straight on (not "Final (draft)" in prose).
            .or_else(|| rest.strip_prefix("Final").filter(|a| a.starts_with('(')))
            && let Some(inner) = call_argument(arg)
        {
            let answer = unquote(first_argument(inner.trim()));
            return Some((FinalDirective::Answer(answer), line.trim().to_string()));
        } else if let Some(answer) = final_answer_line(&line[lead..]) {
            return Some((FinalDirective::Answer(answer), line.trim().to_string()));
        }
    }
    None
}

/// The answer of a line `Final answer: …` (any case, `**` around the label
/// tolerated), which small models write instead of FINAL(...).
fn final_answer_line(line: &str) -> Option<String> {
    let label = "final answer";
    let head = line.get(..label.len())?;
    if !head.eq_ignore_ascii_case(label) {
        return None;
    }
    let rest = line[label.len()..].trim_start_matches('*');
    let answer = rest.strip_prefix(':')?.trim().trim_matches('*').trim();
    (!answer.is_empty()).then(|| answer.to_string())
}

/// The first argument of a call's argument text when it is a string literal
/// followed by keyword arguments (`"answer", source="…"`, which small models
/// write); otherwise the whole text.
fn first_argument(args: &str) -> &str {
    let body = args.strip_prefix(['f', 'r']).unwrap_or(args);
    let prefix = args.len() - body.len();
    for q in ["\"\"\"", "'''", "\"", "'"] {
        let Some(rest) = body.strip_prefix(q) else {
            continue;
        };
        let bytes = rest.as_bytes();
        let mut i = 0;
        while i < rest.len() {
            if bytes[i] == b'\\' {
                i += 2;
                continue;
            }
            if rest[i..].starts_with(q) {
                let end = prefix + q.len() + i + q.len();
                let keyword = args[end..]
                    .trim_start()
                    .strip_prefix(',')
                    .and_then(|a| a.split_once('='))
                    .is_some_and(|(name, _)| {
                        let name = name.trim();
                        !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    });
                return if keyword { &args[..end] } else { args };
            }
            i += rest[i..].chars().next().map_or(1, char::len_utf8);
        }
        return args;
    }
    args
}

/// Given the text right after `FINAL`/`FINAL_VAR`, returns the text inside the
/// parentheses. Quote-aware so `FINAL("a (b")` works; an unclosed call takes the
/// rest of the text (models sometimes forget the closing parenthesis).
fn call_argument(after_name: &str) -> Option<&str> {
    let s = after_name.trim_start_matches([' ', '\t']);
    let body = s.strip_prefix('(')?;
    let base = after_name.len() - body.len();
    let bytes = body.as_bytes();
    let mut depth = 1usize;
    let mut i = 0;
    let mut quote: Option<&[u8]> = None;
    while i < bytes.len() {
        if let Some(q) = quote {
            if bytes[i] == b'\\' {
                i += 2;
                continue;
            }
            if bytes[i..].starts_with(q) {
                i += q.len();
                quote = None;
                continue;
            }
            i += 1;
            continue;
        }
        match bytes[i] {
            b'"' | b'\'' => {
                let triple = bytes[i..].starts_with(b"\"\"\"") || bytes[i..].starts_with(b"'''");
                let q: &[u8] = match (bytes[i], triple) {
                    (b'"', true) => b"\"\"\"",
                    (b'\'', true) => b"'''",
                    (b'"', false) => b"\"",
                    _ => b"'",
                };
                // An apostrophe inside plain prose (`FINAL(it's 42)`) is not a
                // string opener: only treat quotes as strings at argument start.
                if i == 0 || body[..i].trim().is_empty() {
                    quote = Some(q);
                    i += q.len();
                    continue;
                }
                i += 1;
            }
            b'(' => {
                depth += 1;
                i += 1;
            }
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&after_name[base..base + i]);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    let rest = body.trim_end();
    if rest.is_empty() { None } else { Some(rest) }
}

/// Strips one level of matching Python string quotes (and an f/r prefix).
pub fn unquote(s: &str) -> String {
    let t = s.trim();
    let t = t
        .strip_prefix(['f', 'r'])
        .filter(|r| r.starts_with(['"', '\'']))
        .unwrap_or(t);
    for q in ["\"\"\"", "'''", "\"", "'"] {
        if t.len() >= 2 * q.len()
            && let Some(inner) = t.strip_prefix(q).and_then(|x| x.strip_suffix(q))
        {
            return inner
                .replace("\\n", "\n")
                .replace("\\\"", "\"")
                .replace("\\'", "'");
        }
    }
    t.to_string()
}

/// `reply` with a closing fence added when its last code fence is still
/// open (a reply stopped at the end of its first code block loses the
/// closing fence to the stop sequence).
pub fn close_open_fence(reply: &str) -> String {
    let fences = reply
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    if fences % 2 == 1 {
        let sep = if reply.ends_with('\n') { "" } else { "\n" };
        format!("{reply}{sep}```")
    } else {
        reply.to_string()
    }
}

/// Parses a reply into code blocks and a prose FINAL.
pub fn parse_reply(reply: &str) -> ParsedReply {
    let (prose_final, prose_final_line) = match prose_final_and_line(reply) {
        Some((d, line)) => (Some(d), Some(line)),
        None => (None, None),
    };
    ParsedReply {
        code_blocks: extract_code_blocks(reply),
        prose_final,
        prose_final_line,
    }
}

/// Detects a model repeating the same reply turn after turn (weak models loop).
#[derive(Debug, Default)]
pub struct RepeatDetector {
    last: Option<String>,
    streak: u32,
}

impl RepeatDetector {
    /// Records a reply and returns how many times in a row it has been seen
    /// (1 for a new reply). Whitespace differences do not count as different.
    pub fn observe(&mut self, reply: &str) -> u32 {
        let norm: String = reply.split_whitespace().collect::<Vec<_>>().join(" ");
        if self.last.as_deref() == Some(norm.as_str()) {
            self.streak += 1;
        } else {
            self.last = Some(norm);
            self.streak = 1;
        }
        self.streak
    }
}

/// The first JSON object in a model reply (fences and prose around it are ignored).
pub fn parse_json_object(reply: &str) -> Option<Value> {
    let start = reply.find('{')?;
    let end = reply.rfind('}')?;
    if end < start {
        return None;
    }
    serde_json::from_str::<Value>(&reply[start..=end])
        .ok()
        .filter(Value::is_object)
}

/// A JSON object's field as trimmed text (`""` when absent or null).
pub(crate) fn json_field(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_another_language_than_the_question_is_told_apart() {
        let de = "Wie lang ist die Kündigungsfrist für den Mietvertrag?";
        assert_eq!(
            language_mismatch(
                "The notice period for the lease is three months, as the contract says.",
                de
            ),
            Some(("en", "de"))
        );
        // Quotes in citation markers are the documents' words, not the answer's.
        assert_eq!(
            language_mismatch(
                "Die Kündigungsfrist beträgt drei Monate zum Monatsende. [[doc:0 \"the notice period is three months\"]]",
                de
            ),
            None
        );
        // A bare number or name says nothing of a language.
        assert_eq!(language_mismatch("3 Monate", de), None);
        assert_eq!(language_mismatch("4721", "What is the code?"), None);
    }

    #[test]
    fn abstentions_are_told_from_answers() {
        for a in [
            "The passages do not answer the question.",
            "The passages do not directly answer the question \"What makes X different?\".",
            "There is no information about the treatise in the passages.",
            "The year is not mentioned in the passages provided.",
            "I cannot determine this from the passages.",
            "The passages don't say.",
            "Die Passagen beantworten die Frage nicht.",
            "Die Dokumente enthalten keine Angaben zum Gründungsjahr.",
            "Das Jahr wird in den Passagen nicht erwähnt.",
            "Das lässt sich aus den Passagen nicht bestimmen.",
        ] {
            assert!(abstains(a), "{a}");
        }
        for a in [
            "Luther wrote the treatise in 1543.",
            "The Broncos did not lose: they won their third title in 2016.",
            "Luther schrieb die Abhandlung 1543.",
            "Die Kündigungsfrist beträgt drei Monate; eine kürzere Frist ist nicht vereinbart.",
            &format!(
                "{} The passages do not answer the rest.",
                "A long answer. ".repeat(40)
            ),
        ] {
            assert!(!abstains(a), "{a}");
        }
    }

    #[test]
    fn lints_catch_capitals_compared_with_lowercased_text() {
        let notes = code_lints(
            "for d in documents:\n    if \"Marguerite Okafor\" in d[\"text\"].lower() and \"2019\" in d[\"text\"].lower():\n        print(d)",
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("\"marguerite okafor\""), "{notes:?}");
        assert_eq!(code_lints("i = context.lower().find('Tromso')").len(), 1);
        assert_eq!(code_lints("'x' not in t.lower()").len(), 0);
        assert!(code_lints("if 'okafor' in d['text'].lower(): print(1)").is_empty());
        assert!(code_lints("if 'Okafor' in d['text']: print(1)").is_empty());
    }

    #[test]
    fn lints_catch_counting_documents_for_lines() {
        let notes = code_lints(
            "count = 0\nfor d in documents:\n    if 'transfer' in d['text']:\n        count += 1\nprint(count)",
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("grep_count(\"transfer\")"), "{notes:?}");
        let notes = code_lints(
            "n = 0\nfor doc in documents:\n    if \"Kündigung\" in doc[\"text\"].lower():\n        n = n + 1\n",
        );
        assert!(
            notes.iter().any(|n| n.contains("\"Kündigung\"")),
            "{notes:?}"
        );
        for comprehension in [
            "count = sum(1 for d in documents if 'user mila' in d['text'])",
            "n = len([d for d in documents if 'user mila' in d['text']])",
        ] {
            let notes = code_lints(comprehension);
            assert!(
                notes.iter().any(|n| n.contains("\"user mila\"")),
                "{comprehension}: {notes:?}"
            );
        }
        // Listing documents, or counting lines, is not counting documents.
        assert!(
            code_lints("for d in documents:\n    if 'x' in d['text']:\n        print(d['name'])")
                .is_empty()
        );
        assert!(
            code_lints(
                "n = 0\nfor line in context.splitlines():\n    if 'x' in line:\n        n += 1"
            )
            .is_empty()
        );
    }

    #[test]
    fn repl_fence_is_preferred_over_python() {
        let r = "Example:\n```python\nprint(1)\n```\nNow:\n```repl\nx = 2\nprint(x)\n```\n";
        let b = extract_code_blocks(r);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].code, "x = 2\nprint(x)");
        assert_eq!(b[0].lang, "repl");
    }

    #[test]
    fn multiple_repl_blocks_in_order() {
        let r = "```repl\na = 1\n```\ntext\n```repl\nb = a + 1\n```";
        let b = extract_code_blocks(r);
        assert_eq!(
            b.iter().map(|c| c.code.as_str()).collect::<Vec<_>>(),
            ["a = 1", "b = a + 1"]
        );
    }

    #[test]
    fn python_py_and_bare_fences_are_fallbacks() {
        assert_eq!(
            extract_code_blocks("```python\nprint(1)\n```")[0].code,
            "print(1)"
        );
        assert_eq!(
            extract_code_blocks("```py\nprint(2)\n```")[0].code,
            "print(2)"
        );
        assert_eq!(
            extract_code_blocks("```\nprint(3)\n```")[0].code,
            "print(3)"
        );
        // Other languages are never executed.
        assert!(extract_code_blocks("```json\n{\"a\": 1}\n```").is_empty());
        assert!(extract_code_blocks("```bash\nrm -rf /\n```").is_empty());
    }

    #[test]
    fn unclosed_fence_runs_to_end() {
        let b = extract_code_blocks("```repl\nprint('cut off')\n");
        assert_eq!(b[0].code, "print('cut off')");
    }

    #[test]
    fn one_line_fence() {
        let b = extract_code_blocks("```repl print(len(context))```");
        assert_eq!(b[0].code, "print(len(context))");
    }

    #[test]
    fn indented_fence_and_crlf() {
        let b = extract_code_blocks("  ```repl\r\nx = 1\r\n  ```\r\n");
        assert_eq!(b[0].code.trim_end(), "x = 1");
    }

    #[test]
    fn prose_final_plain_and_quoted() {
        assert_eq!(
            find_prose_final("I found it.\nFINAL(The code is 4721)"),
            Some(FinalDirective::Answer("The code is 4721".into()))
        );
        assert_eq!(
            find_prose_final("FINAL(\"a (tricky) answer\")"),
            Some(FinalDirective::Answer("a (tricky) answer".into()))
        );
        assert_eq!(
            find_prose_final("**FINAL(it's 42 (really))**"),
            Some(FinalDirective::Answer("it's 42 (really)".into()))
        );
    }

    #[test]
    fn prose_final_multiline() {
        let r = "Done.\nFINAL(Line one\nline two)\n";
        assert_eq!(
            find_prose_final(r),
            Some(FinalDirective::Answer("Line one\nline two".into()))
        );
    }

    #[test]
    fn prose_final_var() {
        assert_eq!(
            find_prose_final("FINAL_VAR(answer)"),
            Some(FinalDirective::Var("answer".into()))
        );
        assert_eq!(
            find_prose_final("FINAL_VAR('result')"),
            Some(FinalDirective::Var("result".into()))
        );
    }

    #[test]
    fn final_inside_fences_is_not_prose() {
        assert_eq!(find_prose_final("```repl\nFINAL(x)\n```"), None);
        assert_eq!(find_prose_final("```text\nFINAL(not executed)\n```"), None);
        // Mid-sentence mentions are not directives.
        assert_eq!(find_prose_final("I will call FINAL(x) later"), None);
        assert_eq!(find_prose_final("FINAL answer soon"), None);
    }

    #[test]
    fn parse_reply_combines_both() {
        let p = parse_reply("```repl\nans = 'x'\n```\nFINAL_VAR(ans)");
        assert_eq!(p.code_blocks.len(), 1);
        assert_eq!(p.prose_final, Some(FinalDirective::Var("ans".into())));
    }

    #[test]
    fn no_code_no_final() {
        let p = parse_reply("I think the answer might be in document 3.");
        assert!(p.code_blocks.is_empty());
        assert!(p.prose_final.is_none());
    }

    #[test]
    fn async_calls_are_adapted() {
        assert_eq!(
            adapt_async_calls("r = await llm_query(p)"),
            "r = await llm_query_async(p)"
        );
        assert_eq!(
            adapt_async_calls(
                "rs = await asyncio.gather(*[llm_query(f'x {c}') for c in chunks])\ns = llm_query('sum')"
            ),
            "rs = await asyncio.gather(*[llm_query_async(f'x {c}') for c in chunks])\ns = llm_query('sum')"
        );
        assert_eq!(
            adapt_async_calls("asyncio.gather(rlm_query(a), my_llm_query(b))"),
            "asyncio.gather(rlm_query_async(a), my_llm_query(b))"
        );
        assert_eq!(
            adapt_async_calls("await llm_query_async(p)"),
            "await llm_query_async(p)"
        );
        assert_eq!(adapt_async_calls("x = llm_query(p)"), "x = llm_query(p)");
    }

    #[test]
    fn repeat_detector_counts_streaks() {
        let mut d = RepeatDetector::default();
        assert_eq!(d.observe("a  b"), 1);
        assert_eq!(d.observe("a b"), 2);
        assert_eq!(d.observe("a b\n"), 3);
        assert_eq!(d.observe("c"), 1);
    }

    #[test]
    fn unquote_variants() {
        assert_eq!(unquote("\"hi\""), "hi");
        assert_eq!(unquote("'''multi\nline'''"), "multi\nline");
        assert_eq!(unquote("f\"x\""), "x");
        assert_eq!(unquote("plain"), "plain");
        assert_eq!(unquote("\""), "\"");
    }

    #[test]
    fn json_in_prose_and_fences() {
        let v = parse_json_object("Sure:\n```json\n{\"entity\": \"Kevin\"}\n```").unwrap();
        assert_eq!(v["entity"], "Kevin");
        assert!(parse_json_object("no json").is_none());
        assert!(parse_json_object("} {").is_none());
    }

    #[test]
    fn plans_are_told_from_statements() {
        for plan in [
            "I will search for the vault code.",
            "Let me check the security memo first.",
            "Next, we need to read document 2.",
            "You can use search() to find it.",
        ] {
            assert!(announces_steps(plan), "{plan}");
        }
        for answer in [
            "The vault access code for the Lisbon office is 8316.",
            // A conclusion, not a plan (the embedded model's words).
            "The search shows the move, so we can conclude: Okafor moved to Tromso in 2019.",
            "Willow Creek is the site; the will was signed in 1901.",
        ] {
            assert!(!announces_steps(answer), "{answer}");
        }
    }

    #[test]
    fn answers_that_are_not_answers() {
        let q = "What is the planted number?";
        assert!(not_an_answer("The planted number is 7731.", q).is_none());
        assert!(
            not_an_answer(
                "It is 7731 [[chunk:12495df8814cacdd-1 \"number is 7731\"]].",
                q
            )
            .is_none()
        );
        let why = not_an_answer("The planted number is 12495df8814cacdd-1", q).unwrap();
        assert!(why.contains("chunk id 12495df8814cacdd-1"), "{why}");
        let why = not_an_answer("The value is chunk:12495df8814cacdd-1.", q).unwrap();
        assert!(why.contains("chunk id"), "{why}");
        // An id in prose, naming where a stated fact was read, is an answer.
        assert!(
            not_an_answer(
                "The passage from chunk:12495df8814cacdd-1 states: \"The planted number in the essay is 7731.\"",
                q
            )
            .is_none()
        );
        // A new number is the fact, however few words surround it.
        let guests = "How many guests attended the dinner celebrating the opening of the market?";
        assert!(
            not_an_answer(
                "The passage from [chunk:c155b8a53fa2daba-0] states that 2000 guests attended the dinner celebrating the opening of the market.",
                guests
            )
            .is_none()
        );
        assert!(not_an_answer("It is 7 [chunk:c155b8a53fa2daba-0].", q).is_none());
        assert!(not_an_answer("See chunk:c155b8a53fa2daba-0 for the guests.", guests).is_some());
        assert!(
            not_an_answer("[[chunk:12495df8814cacdd-1]]", q)
                .unwrap()
                .contains("only citation markers")
        );
        for placeholder in [
            "{answer}",
            "<your answer>",
            "[your answer here]",
            "Your answer here.",
        ] {
            let why = not_an_answer(placeholder, q).unwrap();
            assert!(why.contains("placeholder"), "{placeholder}: {why}");
        }
        assert!(
            not_an_answer("what is the planted number", q)
                .unwrap()
                .contains("repeats the question")
        );
    }
    #[test]
    fn final_with_keyword_arguments_and_title_case() {
        let d = find_prose_final(
            "Final(\"The permit number is 58213.\", source=\"[[chunk:ab-0]] in [DOCUMENT 0: a.txt]\")",
        );
        assert_eq!(
            d,
            Some(FinalDirective::Answer("The permit number is 58213.".into()))
        );
        assert_eq!(
            find_prose_final("FINAL(\"a, b\")"),
            Some(FinalDirective::Answer("a, b".into()))
        );
        assert_eq!(find_prose_final("Final (draft) version"), None);
        // "Final answer: …", as small models write it.
        for reply in [
            "The generator is serviced by Halvorsen Electric.\n\nFinal answer: Halvorsen Electric",
            "**Final answer:** Halvorsen Electric",
            "- final answer: Halvorsen Electric\n",
        ] {
            assert_eq!(
                find_prose_final(reply),
                Some(FinalDirective::Answer("Halvorsen Electric".into())),
                "{reply}"
            );
        }
        assert_eq!(find_prose_final("Final answer:"), None);
        assert_eq!(find_prose_final("The final answer depends on it."), None);
        assert_eq!(first_argument("\"x\" + y"), "\"x\" + y");
        assert_eq!(first_argument("'a', 'b'"), "'a', 'b'");
    }

    #[test]
    fn an_open_fence_is_closed() {
        let stopped = "Let me look.\n```repl\nprint(len(context))";
        let closed = close_open_fence(stopped);
        assert_eq!(closed, "Let me look.\n```repl\nprint(len(context))\n```");
        assert_eq!(extract_code_blocks(&closed).len(), 1);
        let whole = "```repl\nx = 1\n```\nDone.";
        assert_eq!(close_open_fence(whole), whole);
        assert_eq!(close_open_fence("no code"), "no code");
    }
}
