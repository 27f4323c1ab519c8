//! Reading model replies: fenced code blocks, FINAL directives written in
//! prose, JSON objects inside prose, and detection of replies that repeat
//! themselves.
//!
//! Models trained on the RLM format write ```repl fences; small general models
//! write ```python, ```py or a bare ``` fence instead, so those are accepted as
//! fallbacks (only when no ```repl fence is present, because a reply that has
//! both usually shows Python as an example next to the code it wants run).

use std::sync::OnceLock;

use serde_json::Value;

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

/// Host functions that exist in a sync and an awaitable form (`name_async`).
const ASYNC_TWINS: &[&str] = &["llm_query", "rlm_query"];

/// Adapts model code to the sandbox's split between sync and awaitable host
/// functions (one name cannot be both): `await llm_query(...)` and
/// `llm_query(...)` inside an `asyncio.gather(...)` call become
/// `llm_query_async(...)`, the form models trained on `asyncio.gather` fan-out code write.
pub fn adapt_async_calls(code: &str) -> String {
    let mut out = code.to_string();
    for name in ASYNC_TWINS {
        out = out.replace(&format!("await {name}("), &format!("await {name}_async("));
    }
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(start) = rest.find("asyncio.gather(") {
        let open = start + "asyncio.gather".len();
        result.push_str(&rest[..=open]);
        let body = &rest[open + 1..];
        let mut depth = 1usize;
        let mut end = body.len();
        for (i, ch) in body.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let mut inner = body[..end].to_string();
        for name in ASYNC_TWINS {
            inner = replace_calls(&inner, name, &format!("{name}_async"));
        }
        result.push_str(&inner);
        rest = &body[end..];
    }
    result.push_str(rest);
    result
}

/// Replaces calls `name(` by `new(` where `name` is a whole identifier.
fn replace_calls(text: &str, name: &str, new: &str) -> String {
    let pat = format!("{name}(");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&pat) {
        let before = rest[..i].chars().next_back();
        let whole = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        out.push_str(&rest[..i]);
        out.push_str(if whole { new } else { name });
        out.push('(');
        rest = &rest[i + pat.len()..];
    }
    out.push_str(rest);
    out
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

/// Notes on code that cannot do what it obviously means, added to the cell's
/// output so the model can fix it. Today: a literal with capital letters
/// compared against a lower-cased string (`"Marguerite Okafor" in
/// d["text"].lower()`) can never match — the small local model looped on
/// exactly that for twenty turns.
pub fn code_lints(code: &str) -> Vec<String> {
    static PATTERNS: OnceLock<[regex::Regex; 2]> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            // "Lit" in x.lower()  /  'Lit' not in x.lower()
            regex::Regex::new(
                r#"(?:"([^"\n]*)"|'([^'\n]*)')\s+(?:not\s+)?in\s+[^\n:]*?\.lower\(\)"#,
            )
            .expect("valid regex"),
            // x.lower().find("Lit") / .count / .index / .startswith / .endswith / .split
            regex::Regex::new(
                r#"\.lower\(\)\s*\.\s*(?:find|rfind|count|index|startswith|endswith|split)\(\s*(?:"([^"\n]*)"|'([^'\n]*)')"#,
            )
            .expect("valid regex"),
        ]
    });
    let mut notes = Vec::new();
    for re in patterns.iter() {
        for caps in re.captures_iter(code) {
            let lit = caps
                .get(1)
                .or_else(|| caps.get(2))
                .map_or("", |m| m.as_str());
            if lit.chars().any(char::is_uppercase) {
                let note = format!(
                    "Note: {lit:?} has capital letters but is compared with a .lower() string, so it can never match; write {:?}.",
                    lit.to_lowercase()
                );
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
    }
    if let Some(note) = counts_documents(code)
        && !notes.contains(&note)
    {
        notes.push(note);
    }
    notes
}

/// A note when a cell counts the documents that contain a literal (`for d
/// in documents: if "x" in d["text"]: n += 1`): a question about how many
/// lines or records hold it gets the number of documents instead.
fn counts_documents(code: &str) -> Option<String> {
    static PATTERNS: OnceLock<[regex::Regex; 2]> = OnceLock::new();
    let [looped, tested] = PATTERNS.get_or_init(|| {
        [
            regex::Regex::new(r"for\s+(\w+)\s+in\s+documents\b").expect("valid regex"),
            regex::Regex::new(r#"(?:"([^"\n]+)"|'([^'\n]+)')\s+in\s+(\w+)\[\s*["']text["']\s*\]"#)
                .expect("valid regex"),
        ]
    });
    let counts = ["+= 1", "+ 1\n", "+ 1 ", "sum(1 for", "len(["]
        .iter()
        .any(|c| code.contains(c));
    if !counts {
        return None;
    }
    let loop_vars: Vec<&str> = looped
        .captures_iter(code)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    let lit = tested.captures_iter(code).find_map(|c| {
        let var = c.get(3)?.as_str();
        loop_vars
            .contains(&var)
            .then(|| c.get(1).or_else(|| c.get(2)).map(|m| m.as_str()))?
    })?;
    Some(format!(
        "Note: this cell counts the documents whose text holds {lit:?}, not the lines or records that do; grep_count({lit:?}) counts every line that holds it, and grep({lit:?}) returns them."
    ))
}

/// The answer's language and the question's when they differ (the answer's
/// citation markers, which quote the documents, left out). `None` when they
/// agree or either cannot be told (a number, a name, a few words).
pub fn language_mismatch(answer: &str, question: &str) -> Option<(&'static str, &'static str)> {
    use rlm_corpus::language::{UNDETERMINED, guess};
    let asked = guess(question);
    if asked == UNDETERMINED {
        return None;
    }
    let answered = guess(&crate::citations::without_markers(answer));
    (answered != UNDETERMINED && answered != asked).then_some((answered, asked))
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

/// Why a committed answer is not an answer, if it is not: it holds only
/// citation markers, gives an internal chunk id as a fact, is a template
/// placeholder, or echoes the question. (Small models copy ids from the
/// inspection output, or fill in the prompt's own example.)
pub fn not_an_answer(answer: &str, question: &str) -> Option<String> {
    static PATTERNS: OnceLock<[regex::Regex; 3]> = OnceLock::new();
    let [marker, chunk_id, placeholder] = PATTERNS.get_or_init(|| {
        [
            regex::Regex::new(r"\[\[[^\]]*\]\]").expect("valid regex"),
            regex::Regex::new(r"\b[0-9a-f]{16}-[0-9]+\b").expect("valid regex"),
            regex::Regex::new(
                r"(?i)\{\{?\s*[a-z_ ]+\s*\}?\}|<\s*(your |the )?(final )?answer[^>]*>|\[\s*(your|insert|the) [^\]]*\]|\byour (final )?answer here\b",
            )
            .expect("valid regex"),
        ]
    });
    let text = marker.replace_all(answer, " ");
    let words = |s: &str| -> Vec<String> { crate::text::words(s).collect() };
    let answer_words = words(&text);
    if answer_words.is_empty() {
        return Some("it holds no answer text, only citation markers or punctuation".into());
    }
    // An id named as a source ("the passage chunk:ab12-0 says …") is no
    // fault; one standing in for the fact (nothing else new is said) is.
    // A number the question does not hold is a fact said ("… states that
    // 2000 guests attended").
    let says_little_else = || {
        let rest = chunk_id.replace_all(&text, " ");
        let asked = words(question);
        let language = rlm_corpus::language::guess(question);
        let new: Vec<String> = words(&rest)
            .into_iter()
            .filter(|w| !asked.contains(w) && !crate::text::is_stop_word(w, language))
            .collect();
        let has_digit = |w: &String| w.chars().any(|c| c.is_ascii_digit());
        !new.iter().any(has_digit) && new.iter().filter(|w| w.chars().count() >= 3).count() < 2
    };
    if let Some(id) = chunk_id.find(&text)
        && says_little_else()
    {
        return Some(format!(
            "it gives the internal chunk id {} as if it were a fact; chunk ids belong only inside [[chunk:ID \"quote\"]] markers after the fact they support",
            id.as_str()
        ));
    }
    if let Some(p) = placeholder.find(&text) {
        return Some(format!(
            "it is a template placeholder ({}), not the answer",
            p.as_str()
        ));
    }
    if answer_words == words(question) {
        return Some("it repeats the question instead of answering it".into());
    }
    None
}

/// The line the root's inspection cell prints above the question's
/// full-text hits (kept here so a copy of it is recognised).
pub(crate) const SEARCH_LEAD: &str =
    "Full-text search for the question found these passages (a lead, not proof: check them):";

/// True when `text` holds the engine's own output rather than words of an
/// answer: a `[DOCUMENT N: path]` header, a bare `[[chunk:ID]]` marker as
/// the inspection prints them, the search lead, a "REPL output" heading, or
/// a search hit's record. These are the engine's strings, so the test is
/// the same in every language; a model that pastes what it was shown has
/// not answered.
pub fn holds_engine_output(text: &str) -> bool {
    static PATTERNS: OnceLock<regex::Regex> = OnceLock::new();
    let re = PATTERNS.get_or_init(|| {
        regex::Regex::new(
            r#"\[DOCUMENT \d+:|\[\[chunk:[0-9a-f]{16}-\d+\]\]|REPL output|['"]chunk_id['"]\s*:"#,
        )
        .expect("valid regex")
    });
    re.is_match(text) || text.contains(SEARCH_LEAD) || text.contains("a lead, not proof")
}

/// True when `text` (a document's) speaks the engine's protocol: a
/// `FINAL(` or `FINAL_VAR(` directive, a citation marker, a REPL block.
/// A document has no reason to; one that does is addressing the model (an
/// injection), and is never the source the engine attaches to a claim.
pub fn speaks_the_protocol(text: &str) -> bool {
    static PATTERNS: OnceLock<regex::Regex> = OnceLock::new();
    let re = PATTERNS.get_or_init(|| {
        regex::Regex::new(r#"FINAL(_VAR)?\s*\(|\[\[(chunk|doc):|```repl"#).expect("valid regex")
    });
    re.is_match(text)
}

/// True when a reply announces what its writer will do next ("I will
/// search…", "Let me check…", "Next, we need…"): a plan, not an answer,
/// whatever facts it mentions on the way.
pub fn announces_steps(reply: &str) -> bool {
    static STEPS: OnceLock<regex::Regex> = OnceLock::new();
    let re = STEPS.get_or_init(|| {
        regex::Regex::new(
            r"(?i)\b(i\s+will|i'll|i\s+need\s+to|let\s+me|let's|let\s+us|we\s+need\s+to|we\s+will|we'll|you\s+can\s+use|next,?\s+(i|we))\b",
        )
        .expect("valid regex")
    });
    re.is_match(reply)
}

/// True when a short answer says the material does not answer the question
/// ("The passages do not answer the question.", "No information about it
/// is provided.", "Die Passagen enthalten keine Angaben dazu."): an
/// abstention, not a claim. One pattern per language (English, German).
pub fn abstains(answer: &str) -> bool {
    static ABSTENTION: OnceLock<[regex::Regex; 2]> = OnceLock::new();
    let [english, german] = ABSTENTION.get_or_init(|| {
        [regex::Regex::new(
            r"(?i)\b(do|does|did)(\s+not|n't)\s+(directly\s+|explicitly\s+|specifically\s+|clearly\s+)?(answer|mention|contain|provide|say|state|specify|include|address|give|discuss)\b|\bno\s+(relevant\s+|specific\s+)?information\b|\bnot\s+(explicitly\s+|directly\s+)?(mentioned|stated|found|provided|specified|given)\b|\b(cannot|can't|could\s+not|unable\s+to)\s+(be\s+)?(determined|answered|find|determine|answer)\b",
        )
        .expect("valid regex"),
        regex::Regex::new(
            r"(?i)\b(enthalten|enthält|nennen|nennt|erwähnen|erwähnt|beantworten|beantwortet)\s+(\w+\s+){0,3}(keine|nicht|kein)\b|\bkeine\s+(relevanten\s+|konkreten\s+|genauen\s+)?(Informationen?|Angaben?|Hinweise?)\b|\bnicht\s+(ausdrücklich\s+|explizit\s+|direkt\s+)?(erwähnt|genannt|angegeben|gefunden|beantwortet|bestimmt|bestimmen|beantworten|feststellen)\b|\b(kann|können|konnte|lässt)\s+(sich\s+)?(nicht|keine)\s+(\w+\s+){0,3}?(bestimmen|beantworten|finden|feststellen|bestimmt|beantwortet)\b",
        )
        .expect("valid regex")]
    });
    answer.chars().count() <= 400 && (english.is_match(answer) || german.is_match(answer))
}

#[cfg(test)]
mod engine_output_tests {
    use super::*;

    #[test]
    fn the_engines_own_output_is_recognised_in_any_language() {
        for pasted in [
            "[DOCUMENT 0: notes/vault.txt]\nThe code is 8316.",
            "[[chunk:0a1b2c3d4e5f6a7b-0]] in notes",
            "REPL output:\n8316",
            "{'chunk_id': '0a1b2c3d4e5f6a7b-0', 'text': 'Der Code ist 8316.'}",
            SEARCH_LEAD,
        ] {
            assert!(holds_engine_output(pasted), "{pasted}");
        }
        for answer in [
            "The vault code is 8316. [[chunk:0a1b2c3d4e5f6a7b-0 \"vault code is 8316\"]]",
            "Der Tresorcode lautet 8316 [[doc:0 \"Code 8316\"]].",
            "The document lists three offices.",
        ] {
            assert!(!holds_engine_output(answer), "{answer}");
        }
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
