//! An answer in another language than the question, rewritten in the
//! question's: the last step before an answer is checked, for every flow.
//! The model is asked to translate the text with each citation marker
//! masked as a numbered placeholder (quotes are the documents' words and
//! must stay as written); the rewrite is taken only when every placeholder
//! comes back once and the text is now in the question's language.
//!
//! The request holds the answer alone, not the question: shown the
//! question, a small model answers it again instead of translating (the
//! embedded model replied "10" to a request to rewrite a two-sentence
//! answer in German).

use crate::citations;
use crate::parse;
use crate::prompts;

/// The prompt that asks for `answer` in the question's language, and the
/// markers its placeholders stand for; `None` when the answer is already
/// in the question's language (or either cannot be told).
pub(crate) fn request(answer: &str, question: &str) -> Option<(String, Vec<String>)> {
    let asked = to_rewrite(answer, question)?;
    let (masked, markers) = mask(answer);
    let prompt = prompts::render(
        prompts::TRANSLATE,
        &[
            ("language", rlm_corpus::language::language_name(asked)),
            ("answer", &masked),
        ],
    );
    Some((prompt, markers))
}

/// Words of three letters or more an answer whose language cannot be told
/// needs before it is rewritten anyway.
const UNDETERMINED_WORDS: usize = 3;

/// The question's language when `answer` is to be rewritten in it: the
/// answer is in another language; or its language cannot be told (a short
/// answer: "tail -f sleeps 1 second") while it has words to rewrite and
/// the question is not in English, the language a model falls back to
/// under English prompts (for an English question such an answer is not
/// worth a call). A rewrite still in no telling language is refused by
/// [`accept`].
fn to_rewrite(answer: &str, question: &str) -> Option<&'static str> {
    use rlm_corpus::language::{UNDETERMINED, guess};
    if let Some((_, asked)) = parse::language_mismatch(answer, question) {
        return Some(asked);
    }
    let asked = guess(question);
    let text = citations::without_markers(answer);
    let words = text
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 3)
        .count();
    (asked != UNDETERMINED
        && asked != "en"
        && guess(&text) == UNDETERMINED
        && words >= UNDETERMINED_WORDS)
        .then_some(asked)
}

/// The rewritten answer with its markers back, when the `reply` keeps every
/// placeholder exactly once and is in the question's language.
pub(crate) fn accept(reply: &str, markers: &[String], question: &str) -> Option<String> {
    let mut text = reply.trim().to_string();
    if text.is_empty() {
        return None;
    }
    for (i, marker) in markers.iter().enumerate() {
        let placeholder = placeholder(i);
        if text.matches(&placeholder).count() != 1 {
            return None;
        }
        text = text.replace(&placeholder, marker);
    }
    // A placeholder the answer did not have is no marker to restore.
    if text.contains('⟦') {
        return None;
    }
    in_language_of(text, question)
}

/// `text` when it (its markers left out) is in the question's language.
fn in_language_of(text: String, question: &str) -> Option<String> {
    let asked = rlm_corpus::language::guess(question);
    let now = rlm_corpus::language::guess(&citations::without_markers(&text));
    (now == asked).then_some(text)
}

/// An answer cut at its citation markers: each statement's text and the
/// marker that follows it (none after trailing text), for a rewrite
/// statement by statement.
pub(crate) struct Statements {
    parts: Vec<(String, Option<String>)>,
}

/// The second try when [`accept`] refused the rewrite: the prompt asking
/// for each statement of `answer` in the question's language as a JSON list
/// (its schema fixes how many), and the statements; `None` when the answer
/// is in the question's language or has no text to rewrite.
pub(crate) fn request_statements(
    answer: &str,
    question: &str,
) -> Option<(String, rlm_llm::ReplySchema, Statements)> {
    let asked = to_rewrite(answer, question)?;
    let mut parts = Vec::new();
    let mut from = 0;
    for m in citations::extract_citations(answer) {
        let end = m.offset + m.marker.len();
        parts.push((answer[from..m.offset].trim().to_string(), Some(m.marker)));
        from = end;
    }
    let tail = answer[from..].trim();
    if !tail.is_empty() && tail.chars().any(char::is_alphanumeric) {
        parts.push((tail.to_string(), None));
    }
    let texts: Vec<&String> = parts
        .iter()
        .map(|(t, _)| t)
        .filter(|t| !t.is_empty())
        .collect();
    if texts.is_empty() {
        return None;
    }
    let numbered: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{}. {t}", i + 1))
        .collect();
    let prompt = prompts::render(
        prompts::TRANSLATE_PARTS,
        &[
            ("language", rlm_corpus::language::language_name(asked)),
            ("sentences", &numbered.join("\n")),
        ],
    );
    let n = texts.len();
    let schema = rlm_llm::ReplySchema::new(
        "statements",
        serde_json::json!({
            "type": "object",
            "properties": {"sentences": {
                "type": "array", "items": {"type": "string"}, "minItems": n, "maxItems": n
            }},
            "required": ["sentences"],
            "additionalProperties": false
        }),
    );
    Some((prompt, schema, Statements { parts }))
}

/// The answer rebuilt from the rewritten statements of `reply`, each
/// followed by its marker, when there is one non-empty statement per text
/// and the result is in the question's language.
pub(crate) fn accept_statements(
    reply: &str,
    statements: &Statements,
    question: &str,
) -> Option<String> {
    let v = parse::parse_json_object(reply)?;
    let said: Vec<&str> = v
        .get("sentences")?
        .as_array()?
        .iter()
        .map(|s| s.as_str().map(str::trim))
        .collect::<Option<_>>()?;
    let wanted = statements
        .parts
        .iter()
        .filter(|(t, _)| !t.is_empty())
        .count();
    if said.len() != wanted || said.iter().any(|s| s.is_empty()) {
        return None;
    }
    let mut said = said.into_iter();
    let mut out: Vec<String> = Vec::new();
    for (text, marker) in &statements.parts {
        if !text.is_empty() {
            out.push(said.next()?.to_string());
        }
        if let Some(m) = marker {
            out.push(m.clone());
        }
    }
    in_language_of(out.join(" "), question)
}

fn placeholder(i: usize) -> String {
    format!("⟦{}⟧", i + 1)
}

/// `answer` with each citation marker replaced by a numbered placeholder,
/// and the markers in order.
fn mask(answer: &str) -> (String, Vec<String>) {
    let found = citations::extract_citations(answer);
    let mut masked = answer.to_string();
    for (i, m) in found.iter().enumerate().rev() {
        masked.replace_range(m.offset..m.offset + m.marker.len(), &placeholder(i));
    }
    (masked, found.into_iter().map(|m| m.marker).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUESTION: &str = "Wie lang ist die Kündigungsfrist für den Mietvertrag?";

    #[test]
    fn a_second_rewrite_goes_statement_by_statement_with_the_markers_kept() {
        let answer = "The notice period is three months [[doc:0 \"drei Monate\"]] and it is in the lease [[chunk:ab-1 \"Mietvertrag\"]], as signed.";
        let (prompt, schema, statements) = request_statements(answer, QUESTION).expect("asked for");
        assert!(
            prompt.starts_with("Translate each numbered sentence below into German."),
            "{prompt}"
        );
        assert!(prompt.contains(r#"Reply with JSON only: {"sentences": [...]}"#));
        // The question is not shown: a small model would answer it again.
        assert!(!prompt.contains(QUESTION), "{prompt}");
        assert!(
            prompt.contains(
                "1. The notice period is three months\n2. and it is in the lease\n3. , as signed."
            ),
            "{prompt}"
        );
        assert_eq!(schema.schema["properties"]["sentences"]["minItems"], 3);
        let reply = r#"{"sentences": ["Die Kündigungsfrist beträgt drei Monate", "und sie steht im Mietvertrag", "wie er unterschrieben wurde."]}"#;
        assert_eq!(
            accept_statements(reply, &statements, QUESTION).as_deref(),
            Some(
                "Die Kündigungsfrist beträgt drei Monate [[doc:0 \"drei Monate\"]] und sie steht im Mietvertrag [[chunk:ab-1 \"Mietvertrag\"]] wie er unterschrieben wurde."
            )
        );
        // Too few statements, an empty one, or English again: refused.
        for bad in [
            r#"{"sentences": ["Die Kündigungsfrist beträgt drei Monate", "und sie steht im Mietvertrag"]}"#,
            r#"{"sentences": ["Die Kündigungsfrist beträgt drei Monate", "", "wie er unterschrieben wurde."]}"#,
            r#"{"sentences": ["The notice period is three months", "and it is in the lease", "as signed."]}"#,
            "Die Kündigungsfrist beträgt drei Monate.",
        ] {
            assert!(
                accept_statements(bad, &statements, QUESTION).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_answer_in_the_questions_language_needs_no_rewrite() {
        assert!(
            request(
                "Die Frist beträgt drei Monate, wie der Vertrag sagt.",
                QUESTION
            )
            .is_none()
        );
        assert!(request("3 Monate", QUESTION).is_none());
    }

    #[test]
    fn a_short_answer_of_no_telling_language_is_rewritten_for_a_question_in_another_language() {
        // Too short for the language to be told, with words to rewrite.
        let short = "Tail -f sleeps 1 second [[doc:0 \"1 Sekunde\"]]";
        assert_eq!(
            rlm_corpus::language::guess(&citations::without_markers(short)),
            rlm_corpus::language::UNDETERMINED
        );
        let (prompt, markers) = request(short, QUESTION).expect("asked for");
        assert!(prompt.contains("Tail -f sleeps 1 second ⟦1⟧"), "{prompt}");
        assert_eq!(markers.len(), 1);
        // Not for an English question, nor an answer with fewer words.
        assert!(request(short, "How long does tail -f sleep by default?").is_none());
        assert!(request("T100352 [[doc:0 \"T100352\"]]", QUESTION).is_none());
    }

    #[test]
    fn markers_are_masked_and_come_back_in_the_rewrite() {
        let answer = "The notice period is three months [[doc:0 \"drei Monate\"]] and it is in the lease [[chunk:ab-1 \"Mietvertrag\"]].";
        let (prompt, markers) = request(answer, QUESTION).expect("a rewrite is asked for");
        assert!(prompt.contains("into German"), "{prompt}");
        assert!(!prompt.contains(QUESTION), "{prompt}");
        assert!(
            prompt.contains("three months ⟦1⟧ and it is in the lease ⟦2⟧."),
            "{prompt}"
        );
        assert_eq!(markers.len(), 2);
        let reply = "Die Kündigungsfrist beträgt drei Monate ⟦1⟧ und steht im Mietvertrag ⟦2⟧.";
        assert_eq!(
            accept(reply, &markers, QUESTION).as_deref(),
            Some(
                "Die Kündigungsfrist beträgt drei Monate [[doc:0 \"drei Monate\"]] und steht im Mietvertrag [[chunk:ab-1 \"Mietvertrag\"]]."
            )
        );
        // A lost or doubled placeholder, or a reply still in English, is refused.
        assert!(
            accept(
                "Die Kündigungsfrist beträgt drei Monate ⟦1⟧ und so weiter.",
                &markers,
                QUESTION
            )
            .is_none()
        );
        assert!(
            accept(
                "Die Frist ⟦1⟧ ⟦1⟧ ist im Vertrag ⟦2⟧ und nicht kürzer.",
                &markers,
                QUESTION
            )
            .is_none()
        );
        assert!(
            accept(
                "The notice period is three months ⟦1⟧ as in the lease ⟦2⟧.",
                &markers,
                QUESTION
            )
            .is_none()
        );
        assert!(accept("", &markers, QUESTION).is_none());
        assert!(
            accept(
                "Die Frist ist drei Monate ⟦1⟧ lang, im Vertrag ⟦2⟧ ⟦3⟧ so.",
                &markers,
                QUESTION
            )
            .is_none()
        );
    }
}
