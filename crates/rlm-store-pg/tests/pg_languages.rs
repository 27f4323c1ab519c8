//! Languages in the PostgreSQL store against a real server: each
//! document's language is detected at index time and its chunks analyzed by
//! that language's text search configuration; a query is analyzed for every
//! language in the store; an English store ranks exactly as it did when
//! every text was analyzed as English.

use std::fmt::Write as _;
use std::path::Path;

use rlm_corpus::eval::LabelledQuestion;
use rlm_corpus::{CorpusStore, IndexOptions};
use rlm_store_pg::PgStore;
use rlm_store_pg::testing::{TestDatabase, test_database};

/// Every labelled question's top 10 over rlm-corpus's English evaluation
/// corpus, as `chunk score` lines (scores to 9 decimals).
fn english_rankings(store: &PgStore) -> String {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rlm-corpus/tests/data");
    let set: Vec<LabelledQuestion> =
        serde_json::from_str(&std::fs::read_to_string(data.join("retrieval_eval.json")).unwrap())
            .unwrap();
    let mut out = String::new();
    for q in &set {
        writeln!(out, "{}", q.question).unwrap();
        for h in store.search(&q.question, 10).unwrap() {
            writeln!(out, "  {} {:.9}", h.chunk_id, h.score).unwrap();
        }
    }
    out
}

fn index_english(url: &str) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rlm-corpus/tests/data");
    let opts = IndexOptions {
        chunk_chars: 200,
        include: vec!["*.md".into()],
        ..IndexOptions::default()
    };
    PgStore::index(url, &[data.join("eval-corpus")], &opts, &mut |_| {}).unwrap();
}

/// The digest of [`english_rankings`] measured with every chunk analyzed as
/// English (schema 4, commit 1ede17c).
const ENGLISH_DIGEST: &str = "7d8b0565d08b8d835dbd18839fa58f355b85f49f7a64ca24cdc6420284abae35";

#[test]
fn an_english_store_ranks_exactly_as_before_languages() {
    let Some(db) = test_database() else { return };
    index_english(db.url());
    let store = PgStore::open(db.url()).unwrap();
    let got = english_rankings(&store);
    // A few of them in full, for reading (measured before languages).
    for (question, top) in [
        (
            "Is there an allowance for the gym?",
            [
                ("16fdc85cd0cdb48d-3", 5.813996792),
                ("8bb6291af7d6abb1-3", 2.327348709),
                ("4fbd4d1eeff6a594-1", 2.125692129),
            ],
        ),
        (
            "How long are backups kept?",
            [
                ("70279c9b5071a25a-1", 4.859757423),
                ("70279c9b5071a25a-2", 4.257524967),
                ("52c0df9f675e67b2-0", 3.430110455),
            ],
        ),
    ] {
        let hits = store.search(question, 3).unwrap();
        let hits: Vec<(&str, String)> = hits
            .iter()
            .map(|h| (h.chunk_id.as_str(), format!("{:.9}", h.score)))
            .collect();
        let want: Vec<(&str, String)> =
            top.iter().map(|(id, s)| (*id, format!("{s:.9}"))).collect();
        assert_eq!(hits, want, "{question}");
    }
    assert_eq!(
        blake3::hash(got.as_bytes()).to_hex().as_str(),
        ENGLISH_DIGEST,
        "{got}"
    );
    // Every document was told English (or too short to tell: analyzed as
    // English all the same).
    assert_eq!(
        db.scalar("SELECT string_agg(DISTINCT lang_cfg::text, ' ') FROM rlm_chunks")
            .unwrap()
            .as_deref(),
        Some("english")
    );
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// German documents, each naming its subject in inflected forms and
/// compounds that the questions of [`GERMAN_QUESTIONS`] ask for in others.
const GERMAN: [(&str, &str); 6] = [
    (
        "mietvertrag.txt",
        "Die Kündigungsfristen für Mietverträge betragen drei Monate zum Monatsende. \
         Der Mieter muss die Kündigung schriftlich bei der Hausverwaltung einreichen; \
         eine Kündigung per E-Mail ist unwirksam. Die Kaution wird nach der Übergabe \
         der Wohnung innerhalb von sechs Monaten zurückgezahlt.",
    ),
    (
        "arbeitszeit.txt",
        "Beschäftigte in Vollzeit haben dreißig Urlaubstage im Jahr. Resturlaub verfällt \
         am einunddreißigsten März des Folgejahres. Die wöchentlichen Arbeitszeiten \
         betragen vierzig Stunden; Überstunden werden mit Freizeit ausgeglichen, \
         wenn die Vorgesetzten zustimmen.",
    ),
    (
        "datenschutz.txt",
        "Personenbezogene Daten der Kunden werden gelöscht, sobald der Zweck ihrer \
         Verarbeitung entfällt, spätestens aber nach zehn Jahren. Auskunftsersuchen \
         beantwortet die Datenschutzbeauftragte innerhalb eines Monats. Sicherungskopien \
         werden verschlüsselt aufbewahrt.",
    ),
    (
        "reisekosten.txt",
        "Übernachtungskosten werden bis zu hundertzwanzig Euro pro Nacht erstattet. \
         Für Dienstreisen unter vierhundert Kilometern ist die Bahn dem Flugzeug \
         vorzuziehen. Belege sind innerhalb von vier Wochen nach der Rückkehr \
         einzureichen, sonst verfallen die Ansprüche.",
    ),
    (
        "sicherheit.txt",
        "Passwörter müssen mindestens zwölf Zeichen lang sein und werden nie \
         weitergegeben. Verlorene Schlüssel und Ausweise meldet man sofort dem \
         Empfang. Besucher tragen ihre Besucherausweise sichtbar und werden \
         von ihren Gastgebern abgeholt.",
    ),
    (
        "fahrzeuge.txt",
        "Dienstwagen dürfen privat genutzt werden, wenn die Fahrten im Fahrtenbuch \
         eingetragen sind. Die Tankkarten gelten an allen Tankstellen des Vertragspartners. \
         Schäden an den Fahrzeugen meldet der Fahrer innerhalb von zwei Tagen der \
         Fuhrparkleitung.",
    ),
];

/// Questions asking in other forms than the documents' words (most are
/// keywords, as typed into a search box), with the document answering each.
const GERMAN_QUESTIONS: [(&str, &str); 12] = [
    ("Kündigungsfrist", "mietvertrag.txt"),
    ("Mietvertrag kündigen", "mietvertrag.txt"),
    ("Kautionen", "mietvertrag.txt"),
    ("Arbeitszeit", "arbeitszeit.txt"),
    ("Überstunde", "arbeitszeit.txt"),
    ("Erstattung der Übernachtungskosten", "reisekosten.txt"),
    ("Passwort", "sicherheit.txt"),
    ("Ausweis verloren", "sicherheit.txt"),
    ("Dienstwagens", "fahrzeuge.txt"),
    ("Tankkarte", "fahrzeuge.txt"),
    ("Wann wird die Kaution zurückgezahlt?", "mietvertrag.txt"),
    ("Wann verfällt der Urlaub?", "arbeitszeit.txt"),
];

/// For each question, the rank (1-based) of the document that answers it
/// among the top 5 hits' documents, or `None`.
fn german_ranks(store: &PgStore) -> Vec<Option<usize>> {
    GERMAN_QUESTIONS
        .iter()
        .map(|(q, gold)| {
            let hits = store.search(q, 5).unwrap();
            hits.iter()
                .position(|h| h.path.ends_with(gold))
                .map(|i| i + 1)
        })
        .collect()
}

fn german_corpus(dir: &Path) -> std::path::PathBuf {
    let docs = dir.join("de");
    for (name, text) in GERMAN {
        write(&docs.join(name), text);
    }
    docs
}

#[test]
fn a_german_store_finds_inflected_forms() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = german_corpus(tmp.path());
    let report = PgStore::index(db.url(), &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(report.languages.len(), 1, "{:?}", report.languages);
    assert_eq!(report.languages[0].code, "de");
    let store = PgStore::open(db.url()).unwrap();
    assert_eq!(store.languages().unwrap(), report.languages);
    let ranks = german_ranks(&store);
    for ((q, _), r) in GERMAN_QUESTIONS.iter().zip(&ranks) {
        println!("{r:?} {q}");
    }
    let at1 = ranks.iter().filter(|r| **r == Some(1)).count();
    let at5 = ranks.iter().filter(|r| r.is_some()).count();
    println!("German recall@1 {at1}/12, recall@5 {at5}/12");
    // Every text analyzed as English found 5 of the 12 (at rank 1).
    assert_eq!(ranks, vec![Some(1); 12]);
    let hits = store.search("Kündigungsfrist", 1).unwrap();
    assert!(
        hits[0].snippet.contains("**Kündigungsfristen**"),
        "{}",
        hits[0].snippet
    );
    assert_eq!(
        crate::pg_ranking::stale_statistics(&db),
        Vec::<String>::new()
    );
}

/// Turns a store of this build back into what schema 4 held: every chunk
/// analyzed as English, term statistics per lexeme, no languages.
pub(crate) fn downgrade_to_schema_4(db: &TestDatabase) {
    db.sql(
        "ALTER TABLE rlm_chunks DROP COLUMN lang_cfg CASCADE;
         ALTER TABLE rlm_chunks
             ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
             ALTER COLUMN tsv SET STORAGE MAIN;
         CREATE INDEX rlm_chunks_tsv ON rlm_chunks USING gin (tsv);
         ALTER TABLE rlm_documents DROP COLUMN language;
         DROP TABLE rlm_lexemes;
         CREATE TABLE rlm_lexemes (lexeme text PRIMARY KEY, chunks bigint NOT NULL);
         INSERT INTO rlm_lexemes (lexeme, chunks)
             SELECT l, count(*) FROM rlm_chunks, unnest(tsvector_to_array(tsv)) AS l GROUP BY l;
         UPDATE rlm_meta SET value = (SELECT coalesce(sum(length(tsv)), 0) FROM rlm_chunks)::text
             WHERE key = 'chunk_lexemes';
         DROP TABLE rlm_configurations;
         DELETE FROM rlm_schema WHERE version >= 5",
    )
    .unwrap();
}

/// German, English, French and Spanish documents and a table of numbers.
fn mixed_corpus(dir: &Path) -> std::path::PathBuf {
    let docs = german_corpus(dir);
    write(
        &docs.join("en/lease.txt"),
        "The tenant shall give ninety days written termination notice to the landlord. \
         Deposits are returned within six weeks after the keys were handed back.",
    );
    write(
        &docs.join("fr/bail.txt"),
        "Le locataire doit donner un préavis de trois mois avant de quitter le logement. \
         Les dépôts de garantie sont restitués dans un délai de deux mois après la remise des clés.",
    );
    write(
        &docs.join("es/contrato.txt"),
        "El inquilino debe avisar con tres meses de antelación antes de dejar la vivienda. \
         Las fianzas se devuelven en un plazo de dos meses tras la entrega de las llaves.",
    );
    write(
        &docs.join("table.csv"),
        "id,amount,date\n1,20,2024-01-02\n2,30,2024-02-03\n",
    );
    docs
}

/// Each document's path with its language and its chunks' configurations.
fn stored_languages(db: &TestDatabase) -> String {
    db.scalar(
        "SELECT string_agg(path || ' ' || language || ' ' || cfgs, '; ' ORDER BY path) FROM (
            SELECT d.path, d.language, string_agg(DISTINCT c.lang_cfg::text, ',') AS cfgs
            FROM rlm_documents d JOIN rlm_chunks c ON c.doc_id = d.id GROUP BY d.path, d.language
         ) x",
    )
    .unwrap()
    .unwrap_or_default()
}

#[test]
fn a_mixed_store_detects_and_stores_each_documents_language() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = mixed_corpus(tmp.path());
    let report = PgStore::index(db.url(), &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let codes: Vec<(&str, u64)> = report
        .languages
        .iter()
        .map(|l| (l.code.as_str(), l.chunks))
        .collect();
    assert_eq!(
        codes,
        vec![("de", 6), ("en", 1), ("es", 1), ("fr", 1), ("und", 1)]
    );
    assert_eq!(report.languages[0].name, "German");
    let stored = stored_languages(&db);
    for expected in [
        "de/mietvertrag.txt de german",
        "de/en/lease.txt en english",
        "de/fr/bail.txt fr french",
        "de/es/contrato.txt es spanish",
        "de/table.csv und english",
    ] {
        assert!(stored.contains(expected), "{expected} in {stored}");
    }
    // The folder store tells the same languages.
    let local_dir = tmp.path().join("local");
    rlm_corpus::Store::index(
        &local_dir,
        &[tmp.path().join("de")],
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let local = rlm_corpus::Store::open(&local_dir).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    assert_eq!(store.languages().unwrap(), local.languages().unwrap());
    // Each language's inflected forms, each finding its own document.
    for (question, path) in [
        ("Kündigungsfrist", "de/mietvertrag.txt"),
        ("deposit returned", "de/en/lease.txt"),
        ("dépôt restitué", "de/fr/bail.txt"),
        ("fianza devuelta", "de/es/contrato.txt"),
    ] {
        let hits = store.search(question, 3).unwrap();
        assert!(!hits.is_empty(), "{question}");
        assert!(hits[0].path.ends_with(path), "{question}: {hits:?}");
        assert!(hits.iter().all(|h| h.score > 0.0), "{question}: {hits:?}");
    }
    assert_eq!(
        crate::pg_ranking::stale_statistics(&db),
        Vec::<String>::new()
    );
    // A document changing language moves its chunks and their statistics.
    write(
        &tmp.path().join("de/fr/bail.txt"),
        "Der Mieter kündigt den Mietvertrag mit einer Frist von drei Monaten schriftlich \
         bei der Hausverwaltung, die den Eingang bestätigt.",
    );
    PgStore::index(
        db.url(),
        &[tmp.path().join("de")],
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert!(
        stored_languages(&db).contains("de/fr/bail.txt de german"),
        "{}",
        stored_languages(&db)
    );
    assert_eq!(
        crate::pg_ranking::stale_statistics(&db),
        Vec::<String>::new()
    );
}

#[test]
fn a_store_of_schema_4_is_upgraded_with_its_languages() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = mixed_corpus(tmp.path());
    PgStore::index(db.url(), &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    let questions = [
        "Kündigungsfrist",
        "deposit returned",
        "dépôt restitué",
        "Tankkarte",
    ];
    let before: Vec<_> = questions
        .iter()
        .map(|q| store.search(q, 5).unwrap())
        .collect();
    let languages = store.languages().unwrap();
    let stored = stored_languages(&db);
    let rows = "SELECT md5(string_agg(id || body || coalesce(location, ''), '' ORDER BY id)) FROM rlm_chunks";
    let documents = "SELECT md5(string_agg(id || path || hash || chunk_count, '' ORDER BY id)) FROM rlm_documents";
    let (chunk_rows, document_rows) = (db.scalar(rows).unwrap(), db.scalar(documents).unwrap());
    drop(store);
    downgrade_to_schema_4(&db);
    // Schema 4: the German document analyzed as English.
    let tsv = "SELECT c.tsv::text FROM rlm_chunks c JOIN rlm_documents d ON d.id = c.doc_id
               WHERE d.path = 'de/mietvertrag.txt'";
    assert!(
        db.scalar(tsv)
            .unwrap()
            .unwrap()
            .contains("'kündigungsfristen'")
    );
    let store = PgStore::open(db.url()).unwrap();
    assert_eq!(
        db.scalar("SELECT max(version) FROM rlm_schema")
            .unwrap()
            .as_deref(),
        Some("5")
    );
    assert!(
        db.scalar(tsv)
            .unwrap()
            .unwrap()
            .contains("'kundigungsfrist'")
    );
    // The lexemes stay in the chunk's row, as migration 2 set.
    assert_eq!(
        db.scalar(
            "SELECT attstorage FROM pg_attribute
             WHERE attrelid = 'rlm_chunks'::regclass AND attname = 'tsv'"
        )
        .unwrap()
        .as_deref(),
        Some("m")
    );
    assert_eq!(stored_languages(&db), stored);
    assert_eq!(store.languages().unwrap(), languages);
    assert_eq!(
        crate::pg_ranking::stale_statistics(&db),
        Vec::<String>::new()
    );
    // Nothing stored was lost or changed.
    assert_eq!(db.scalar(rows).unwrap(), chunk_rows);
    assert_eq!(db.scalar(documents).unwrap(), document_rows);
    for (q, hits) in questions.iter().zip(&before) {
        assert_eq!(&store.search(q, 5).unwrap(), hits, "{q}");
    }
    assert!(before[0][0].path.ends_with("mietvertrag.txt"));
    // And the store is written on as any other.
    PgStore::index(
        db.url(),
        &[tmp.path().join("de")],
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        crate::pg_ranking::stale_statistics(&db),
        Vec::<String>::new()
    );
}

#[test]
fn an_english_store_of_schema_4_ranks_as_before_once_upgraded() {
    let Some(db) = test_database() else { return };
    index_english(db.url());
    downgrade_to_schema_4(&db);
    let store = PgStore::open(db.url()).unwrap();
    let got = english_rankings(&store);
    assert_eq!(
        blake3::hash(got.as_bytes()).to_hex().as_str(),
        ENGLISH_DIGEST,
        "{got}"
    );
}

#[test]
fn compound_words_are_widened_as_in_the_folder_store() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = german_corpus(tmp.path());
    PgStore::index(
        db.url(),
        std::slice::from_ref(&docs),
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let local_dir = tmp.path().join("local");
    rlm_corpus::Store::index(&local_dir, &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let local = rlm_corpus::Store::open(&local_dir).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    for (question, path) in [
        // A word inside the store's compounds (no document has it alone).
        ("Frist", "mietvertrag.txt"),
        ("Urlaub", "arbeitszeit.txt"),
        ("Karte", "fahrzeuge.txt"),
        // A compound whose parts the store holds apart.
        ("Mietvertragskündigung", "mietvertrag.txt"),
        ("Kundendaten", "datenschutz.txt"),
    ] {
        let hits = store.search(question, 3).unwrap();
        let local_hits = local.search(question, 3).unwrap();
        assert!(!hits.is_empty(), "{question}");
        assert!(hits[0].path.ends_with(path), "{question}: {hits:?}");
        assert_eq!(hits[0].path, local_hits[0].path, "{question}");
        assert!(hits[0].snippet.contains("**"), "{}", hits[0].snippet);
    }
    // A document with the word as asked outranks one holding it only in a
    // compound (which counts a quarter).
    write(
        &tmp.path().join("de/frist.txt"),
        "Die Frist für Einsprüche gegen den Bescheid beträgt einen Monat ab der \
         Zustellung; danach wird der Bescheid bestandskräftig und kann nicht mehr \
         angefochten werden.",
    );
    PgStore::index(
        db.url(),
        &[tmp.path().join("de")],
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let hits = store.search("Frist", 3).unwrap();
    // Pruned by the bounds of compound terms too, the ranking stays exact.
    let tiny = rlm_store_pg::Budget {
        first_pass: 1,
        max_candidates: 1_000,
    };
    for q in [
        "Frist",
        "Mietvertragskündigung Kaution",
        "Kundendaten Frist Karte",
    ] {
        let bounded = store.rank(q, 2, tiny).unwrap();
        assert!(bounded.exact, "{q}");
        let full = store.rank(q, 2, rlm_store_pg::Budget::EXHAUSTIVE).unwrap();
        assert_eq!(bounded.hits, full.hits, "{q}");
    }
    assert!(hits[0].path.ends_with("frist.txt"), "{hits:?}");
    assert!(hits[1].path.ends_with("mietvertrag.txt"), "{hits:?}");
    assert!(hits[0].score > 2.0 * hits[1].score, "{hits:?}");
}

#[test]
fn a_few_chunks_of_another_language_do_not_outweigh_the_stores_own() {
    let Some(db) = test_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let docs = german_corpus(tmp.path());
    // An English page with a German note (as translated manual pages keep
    // their untranslated originals): German function words that English
    // does not drop, rare among the English chunks only by their number.
    write(
        &docs.join("notes.txt"),
        "This page was left in English by the translators, who could not finish \
         it before the release. The program reads its settings from the file \
         named on the command line and writes a summary of what it changed to \
         the standard output. The note below is kept as it was written: wann \
         wird die Seite übersetzt? Die Arbeit wird gemacht.",
    );
    let report = PgStore::index(db.url(), &[docs], &IndexOptions::default(), &mut |_| {}).unwrap();
    let codes: Vec<&str> = report.languages.iter().map(|l| l.code.as_str()).collect();
    assert_eq!(codes, ["de", "en"]);
    let store = PgStore::open(db.url()).unwrap();
    // Each configuration's chunks are a collection of their own for BM25:
    // `die`, `wird` and `wann` among one English chunk are no evidence.
    let hits = store
        .search("Wann wird die Kaution zurückgezahlt?", 2)
        .unwrap();
    assert!(hits[0].path.ends_with("mietvertrag.txt"), "{hits:?}");
    assert_eq!(
        crate::pg_ranking::stale_statistics(&db),
        Vec::<String>::new()
    );
}
