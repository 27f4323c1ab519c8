//! An answer in another language than the question, rewritten in the
//! question's: the last step before an answer is checked, for every flow.
//! The model is asked to rewrite the text with each citation marker masked
//! as a numbered placeholder (quotes are the documents' words and must stay
//! as written); the rewrite is taken only when every placeholder comes back
//! once and the text is now in the question's language.

use crate::citations;
use crate::parse;
use crate::prompts;

/// The prompt that asks for `answer` in the question's language, and the
/// markers its placeholders stand for; `None` when the answer is already
/// in the question's language (or either cannot be told).
pub(crate) fn request(answer: &str, question: &str) -> Option<(String, Vec<String>)> {
    let (_, asked) = parse::language_mismatch(answer, question)?;
    let (masked, markers) = mask(answer);
    let prompt = prompts::render(
        prompts::TRANSLATE,
        &[
            ("language", rlm_corpus::language::language_name(asked)),
            ("question", question),
            ("answer", &masked),
        ],
    );
    Some((prompt, markers))
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
    let asked = rlm_corpus::language::guess(question);
    let now = rlm_corpus::language::guess(&citations::without_markers(&text));
    (now == asked).then_some(text)
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
    fn markers_are_masked_and_come_back_in_the_rewrite() {
        let answer = "The notice period is three months [[doc:0 \"drei Monate\"]] and it is in the lease [[chunk:ab-1 \"Mietvertrag\"]].";
        let (prompt, markers) = request(answer, QUESTION).expect("a rewrite is asked for");
        assert!(prompt.contains("in German"), "{prompt}");
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
