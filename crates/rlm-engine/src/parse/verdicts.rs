//! What a reply or answer is, judged without reading its prose for
//! meaning where that can be avoided: the engine's own output pasted back,
//! the protocol spoken by a document, an id or placeholder given as the
//! answer, an answer in another language than the question. Two rules still
//! read words (`announces_steps`, English; `abstains`, one pattern per
//! language); structured turns do not use them.

use std::sync::OnceLock;

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

/// Words in a row of a note that make a copy of it: more than a phrase two
/// sentences may share by chance, fewer than a note's shortest sentence.
const NOTE_RUN_WORDS: usize = 6;

/// True when `text` copies [`NOTE_RUN_WORDS`] words in a row of one of the
/// engine's `notes` (what its host functions printed: a tally's reading, a
/// search to run instead). What a note quotes (a line of the corpus, the
/// model's own pattern), written between double quotes, is left out: an
/// answer may repeat a document's words, never the engine's. The notes are
/// the engine's strings, so the test holds in any language.
pub fn copies_a_note(text: &str, notes: &[String]) -> bool {
    let said = lowercase_words(text);
    if said.len() < NOTE_RUN_WORDS {
        return false;
    }
    let runs: std::collections::HashSet<&[String]> = said.windows(NOTE_RUN_WORDS).collect();
    notes.iter().any(|note| {
        unquoted(note).iter().any(|part| {
            lowercase_words(part)
                .windows(NOTE_RUN_WORDS)
                .any(|run| runs.contains(run))
        })
    })
}

/// The words of `text`, lowercased: runs of letters and digits.
fn lowercase_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The parts of a note outside its double-quoted strings (as Rust's `{:?}`
/// writes them, `\"` inside kept in the string).
fn unquoted(note: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in note.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' if quoted => {
                quoted = false;
                start = i + 1;
            }
            '"' => {
                parts.push(&note[start..i]);
                quoted = true;
            }
            _ => {}
        }
    }
    if !quoted {
        parts.push(&note[start..]);
    }
    parts
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
    fn a_copy_of_the_engines_notes_is_recognised_and_a_quoted_line_is_not() {
        let notes = vec![
            "Note: no line holds \"EUR Oslo\" as written (its words side by side), so this counted the lines that hold each of its words anywhere: tally([\"EUR\", \"Oslo\"]).".to_string(),
            "A line of the corpus reads: \"2024-03-02 T100231 user mila purchase 63.50 EUR in Oslo\". Count with words written like these.".to_string(),
        ];
        assert!(copies_a_note(
            "No line holds EUR Oslo as written (its words side by side).",
            &notes
        ));
        assert!(copies_a_note(
            "Count with words written like these, then answer.",
            &notes
        ));
        // The quoted line is a document's: repeating it is no copy.
        assert!(!copies_a_note(
            "The ledger says: 2024-03-02 T100231 user mila purchase 63.50 EUR in Oslo.",
            &notes
        ));
        assert!(!copies_a_note("Mila paid 63.50 EUR in Oslo.", &notes));
        assert!(!copies_a_note("anything", &[]));
        assert_eq!(
            unquoted(r#"a "b \" c" d "e"#),
            vec!["a ", " d "],
            "an unclosed quote ends the parts"
        );
    }

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
