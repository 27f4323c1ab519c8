//! The texts the engine writes into an answer itself, when no model wrote
//! one (a run stopped by its budget, nothing retrieved, nothing
//! established), in the question's language: a German question that runs
//! out of time gets a German account of what was gathered. These are the
//! only fixed sentences of the answer path, so they are a table per
//! language, not rules about the model's words. A language without a row
//! gets English. The technical reason (which limit, which error) stays in
//! the answer's `partial_reason`; only the English row repeats it, as it
//! always has.

/// A sentence the engine may write into an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Heads what was gathered before a run stopped (`{reason}`).
    NoCompleteAnswer = 0,
    /// A pipeline run stopped before any file was summarized (`{reason}`).
    NothingSummarized,
    /// Retrieval found nothing.
    NoPassageMatched,
    /// Advice after [`Notice::NoPassageMatched`] in the pipeline flow.
    TryOtherWords,
    /// Retrieval failed (`{reason}`).
    NoAnswer,
    /// Heads the retrieved passages when the rag call failed (`{reason}`).
    NoAnswerWritten,
    /// The extraction gave nothing to keep (`{reason}`).
    NoAnswerEstablished,
    /// ... and no passage was found.
    NoPassageFound,
    /// ... the documents that came closest (`{paths}`).
    ClosestDocuments,
    /// Heads the agents' notes.
    AgentsNoted,
    /// Heads the findings recorded.
    FindingsRecorded,
    /// Heads the sub-call results.
    SubCallResults,
    /// Before a sub-call's prompt.
    Asked,
    /// Before a sub-call's answer.
    Answered,
    /// Heads the scans the agents' code counted over.
    Counted,
}

const NOTICES: usize = 15;

/// Each language's sentences, in the order of [`Notice`].
const TABLE: &[(&str, [&str; NOTICES])] = &[
    (
        "en",
        [
            "No complete answer was reached ({reason}). What was gathered before stopping:",
            "No complete answer was reached ({reason}) and no file was summarized yet.",
            "No passage of the corpus matched the question, so there is nothing to answer from.",
            "Try other words, or --flow repl to let the model read the documents.",
            "No answer: {reason}.",
            "No answer was written ({reason}). The passages retrieved:",
            "No answer was established ({reason}).",
            "No passage of the documents was found for it.",
            "The documents that came closest: {paths}.",
            "What the agents noted:",
            "Findings recorded:",
            "Sub-call results:",
            "Asked:",
            "Answer:",
            "Counted over every line:",
        ],
    ),
    (
        "de",
        [
            "Es wurde keine vollständige Antwort erreicht. Was bis zum Abbruch gesammelt wurde:",
            "Es wurde keine vollständige Antwort erreicht, und noch keine Datei wurde zusammengefasst.",
            "Keine Stelle der Dokumente passt zur Frage, daher gibt es nichts, woraus geantwortet werden kann.",
            "Versuchen Sie andere Wörter, oder --flow repl, damit das Modell die Dokumente liest.",
            "Keine Antwort.",
            "Es wurde keine Antwort geschrieben. Die gefundenen Stellen:",
            "Es wurde keine Antwort ermittelt.",
            "Keine Stelle der Dokumente wurde dazu gefunden.",
            "Am nächsten kamen diese Dokumente: {paths}.",
            "Was die Agenten notiert haben:",
            "Festgehaltene Ergebnisse:",
            "Ergebnisse der Teilabfragen:",
            "Gefragt:",
            "Antwort:",
            "Über alle Zeilen gezählt:",
        ],
    ),
    (
        "fr",
        [
            "Aucune réponse complète n'a été obtenue. Ce qui a été recueilli avant l'arrêt :",
            "Aucune réponse complète n'a été obtenue, et aucun fichier n'a encore été résumé.",
            "Aucun passage des documents ne correspond à la question : il n'y a rien sur quoi répondre.",
            "Essayez d'autres mots, ou --flow repl pour que le modèle lise les documents.",
            "Pas de réponse.",
            "Aucune réponse n'a été rédigée. Les passages trouvés :",
            "Aucune réponse n'a été établie.",
            "Aucun passage des documents n'a été trouvé à ce sujet.",
            "Les documents les plus proches : {paths}.",
            "Ce que les agents ont noté :",
            "Constats enregistrés :",
            "Résultats des sous-requêtes :",
            "Question :",
            "Réponse :",
            "Compté sur toutes les lignes :",
        ],
    ),
    (
        "es",
        [
            "No se llegó a una respuesta completa. Lo reunido antes de detenerse:",
            "No se llegó a una respuesta completa y aún no se resumió ningún archivo.",
            "Ningún pasaje de los documentos coincide con la pregunta, así que no hay de dónde responder.",
            "Pruebe otras palabras, o --flow repl para que el modelo lea los documentos.",
            "Sin respuesta.",
            "No se escribió ninguna respuesta. Los pasajes encontrados:",
            "No se estableció ninguna respuesta.",
            "No se encontró ningún pasaje de los documentos al respecto.",
            "Los documentos más cercanos: {paths}.",
            "Lo que anotaron los agentes:",
            "Hallazgos registrados:",
            "Resultados de las subconsultas:",
            "Pregunta:",
            "Respuesta:",
            "Contado en todas las líneas:",
        ],
    ),
    (
        "it",
        [
            "Non è stata raggiunta una risposta completa. Ciò che è stato raccolto prima dell'interruzione:",
            "Non è stata raggiunta una risposta completa e nessun file è stato ancora riassunto.",
            "Nessun passo dei documenti corrisponde alla domanda, quindi non c'è nulla da cui rispondere.",
            "Provi altre parole, oppure --flow repl perché il modello legga i documenti.",
            "Nessuna risposta.",
            "Non è stata scritta alcuna risposta. I passi trovati:",
            "Non è stata stabilita alcuna risposta.",
            "Non è stato trovato alcun passo dei documenti al riguardo.",
            "I documenti più vicini: {paths}.",
            "Ciò che gli agenti hanno annotato:",
            "Risultati registrati:",
            "Risultati delle sottoquery:",
            "Domanda:",
            "Risposta:",
            "Contato su tutte le righe:",
        ],
    ),
    (
        "pt",
        [
            "Não se chegou a uma resposta completa. O que foi reunido antes da interrupção:",
            "Não se chegou a uma resposta completa e nenhum arquivo foi resumido ainda.",
            "Nenhum trecho dos documentos corresponde à pergunta, então não há de onde responder.",
            "Tente outras palavras, ou --flow repl para que o modelo leia os documentos.",
            "Sem resposta.",
            "Nenhuma resposta foi escrita. Os trechos encontrados:",
            "Nenhuma resposta foi estabelecida.",
            "Nenhum trecho dos documentos foi encontrado sobre isso.",
            "Os documentos mais próximos: {paths}.",
            "O que os agentes anotaram:",
            "Constatações registradas:",
            "Resultados das subconsultas:",
            "Pergunta:",
            "Resposta:",
            "Contado em todas as linhas:",
        ],
    ),
    (
        "nl",
        [
            "Er is geen volledig antwoord bereikt. Wat vóór het stoppen is verzameld:",
            "Er is geen volledig antwoord bereikt en er is nog geen bestand samengevat.",
            "Geen passage van de documenten past bij de vraag, dus er is niets om uit te antwoorden.",
            "Probeer andere woorden, of --flow repl zodat het model de documenten leest.",
            "Geen antwoord.",
            "Er is geen antwoord geschreven. De gevonden passages:",
            "Er is geen antwoord vastgesteld.",
            "Er is geen passage van de documenten over gevonden.",
            "De documenten die het dichtst in de buurt kwamen: {paths}.",
            "Wat de agenten noteerden:",
            "Vastgelegde bevindingen:",
            "Resultaten van deelvragen:",
            "Gevraagd:",
            "Antwoord:",
            "Geteld over alle regels:",
        ],
    ),
];

/// The language whose sentences answer `question` (English when its
/// language has no row or cannot be told).
pub(crate) fn language_of(question: &str) -> &'static str {
    let code = rlm_corpus::language::guess(question);
    TABLE
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("en", |(c, _)| c)
}

/// Sentence `n` in `lang` (a code [`language_of`] gave), with `{reason}`
/// and `{paths}` filled in where the sentence has them.
pub(crate) fn write(n: Notice, lang: &str, reason: &str, paths: &str) -> String {
    let row = TABLE.iter().find(|(c, _)| *c == lang).unwrap_or(&TABLE[0]);
    row.1[n as usize]
        .replace("{reason}", reason)
        .replace("{paths}", paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_writes_every_notice_with_its_placeholders() {
        for (code, row) in TABLE {
            for (i, text) in row.iter().enumerate() {
                assert!(!text.is_empty(), "{code} {i}");
                // Paths are named in every language; the reason only in
                // English (it is in partial_reason for every language).
                assert_eq!(
                    text.contains("{paths}"),
                    TABLE[0].1[i].contains("{paths}"),
                    "{code}: {text}"
                );
                if *code != "en" {
                    assert!(!text.contains("{reason}"), "{code}: {text}");
                }
            }
        }
        assert_eq!(TABLE[0].1[Notice::Answered as usize], "Answer:");
        assert_eq!(NOTICES, Notice::Counted as usize + 1);
    }

    #[test]
    fn the_question_chooses_the_language_and_unknown_ones_get_english() {
        let de = language_of("Wie viele Erstattungen enthält das Kontobuch insgesamt?");
        assert_eq!(de, "de");
        assert_eq!(
            write(Notice::ClosestDocuments, de, "x", "a.txt, b.txt"),
            "Am nächsten kamen diese Dokumente: a.txt, b.txt."
        );
        let en = language_of("How many refunds does the ledger hold in total?");
        assert_eq!(
            write(
                Notice::NoCompleteAnswer,
                en,
                "wall-clock limit of 5 s reached",
                ""
            ),
            "No complete answer was reached (wall-clock limit of 5 s reached). What was gathered before stopping:"
        );
        // A language the table has no row for, and a text too short to tell.
        assert_eq!(language_of("Сколько возвратов в журнале всего?"), "en");
        assert_eq!(language_of("ok?"), "en");
        // The German sentences read as German to the language check.
        for text in TABLE[1].1 {
            if text.chars().filter(|c| c.is_alphabetic()).count() > 30 {
                assert_eq!(rlm_corpus::language::guess(text), "de", "{text}");
            }
        }
    }
}
