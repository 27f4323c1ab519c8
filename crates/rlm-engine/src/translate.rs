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
    let (_, asked) = parse::language_mismatch(answer, question)?;
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
            ("instruction", &instruction(asked)),
            ("question", question),
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

/// What a statement-by-statement rewrite asks, written in the language it
/// asks for where the table has it (a small model asked in English answers
/// in English, whatever language the request names), else in English.
fn instruction(language: &str) -> String {
    const JSON: &str = r#"{"sentences": [...]}"#;
    let asked = match language {
        "de" => {
            "Schreibe jeden nummerierten Satz unten auf Deutsch, in der Sprache der Frage. Behalte Bedeutung, Namen, Zahlen, Befehle, Optionen und Code genau bei. Antworte nur mit JSON: {json}, ein String pro nummeriertem Satz, in derselben Reihenfolge."
        }
        "fr" => {
            "Écris chaque phrase numérotée ci-dessous en français, la langue de la question. Garde exactement le sens, les noms, les nombres, les commandes, les options et le code. Réponds uniquement en JSON : {json}, une chaîne par phrase numérotée, dans le même ordre."
        }
        "es" => {
            "Escribe cada frase numerada de abajo en español, el idioma de la pregunta. Conserva exactamente el significado, los nombres, los números, los comandos, las opciones y el código. Responde solo con JSON: {json}, una cadena por frase numerada, en el mismo orden."
        }
        "it" => {
            "Scrivi ogni frase numerata qui sotto in italiano, la lingua della domanda. Mantieni esattamente il significato, i nomi, i numeri, i comandi, le opzioni e il codice. Rispondi solo con JSON: {json}, una stringa per ogni frase numerata, nello stesso ordine."
        }
        "pt" => {
            "Escreva cada frase numerada abaixo em português, a língua da pergunta. Mantenha exatamente o significado, os nomes, os números, os comandos, as opções e o código. Responda apenas com JSON: {json}, uma string por frase numerada, na mesma ordem."
        }
        "nl" => {
            "Schrijf elke genummerde zin hieronder in het Nederlands, de taal van de vraag. Behoud de betekenis, namen, getallen, commando's, opties en code precies. Antwoord alleen met JSON: {json}, één string per genummerde zin, in dezelfde volgorde."
        }
        other => {
            return format!(
                "Write each numbered sentence below in {}, the language of the question. Keep its meaning, names, numbers, commands, options and code exactly. Reply with JSON only: {JSON}, one string per numbered sentence, in the same order.",
                rlm_corpus::language::language_name(other)
            );
        }
    };
    asked.replace("{json}", JSON)
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
            prompt.starts_with("Schreibe jeden nummerierten Satz unten auf Deutsch"),
            "{prompt}"
        );
        assert!(prompt.contains(r#"Antworte nur mit JSON: {"sentences": [...]}"#));
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
