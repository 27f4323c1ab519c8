//! Full-text search in the documents' own languages: German stemming and
//! compounds, detection per document in a mixed store, an English store
//! searched exactly as before languages were detected, and an index of the
//! English-only form upgraded when the store is opened.

use std::fs;
use std::path::{Path, PathBuf};

use rlm_corpus::{IndexOptions, Store};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{
    INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, TantivyDocument, doc};

fn write(dir: &Path, name: &str, text: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), text).unwrap();
}

fn index(store: &Path, docs: &Path) {
    Store::index(
        store,
        &[docs.to_path_buf()],
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
}

fn paths(store: &Store, query: &str) -> Vec<String> {
    store
        .search(query, 10)
        .unwrap()
        .into_iter()
        .map(|h| h.path.rsplit('/').next().unwrap().to_string())
        .collect()
}

const MIETVERTRAG: &str = "Mietvertrag über Wohnraum\n\nDie Kündigungsfristen richten sich nach dem Gesetz. \
Die Kündigung des Mietvertrags durch den Mieter ist mit einer Frist von drei Monaten zum Monatsende möglich. \
Die Kaution beträgt drei Monatsmieten und wird nach dem Auszug zurückgezahlt, sofern keine Schäden vorliegen.";
const ARBEITSVERTRAG: &str = "Arbeitsvertrag\n\nDer Arbeitnehmer erhält ein monatliches Gehalt von 4.200 Euro brutto. \
Der Urlaubsanspruch beträgt dreißig Arbeitstage im Kalenderjahr. Überstunden werden durch Freizeit ausgeglichen, \
soweit nichts anderes schriftlich vereinbart wurde.";
const DATENSCHUTZ: &str = "Datenschutzerklärung\n\nPersonenbezogene Daten werden nur zur Vertragserfüllung verarbeitet. \
Die Speicherfristen betragen zehn Jahre für Buchungsbelege. Auskunftsersuchen werden innerhalb eines Monats beantwortet.";

fn german_store() -> (tempfile::TempDir, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("akten");
    write(&docs, "mietvertrag.txt", MIETVERTRAG);
    write(&docs, "arbeitsvertrag.txt", ARBEITSVERTRAG);
    write(&docs, "datenschutz.txt", DATENSCHUTZ);
    let store = tmp.path().join("store");
    index(&store, &docs);
    let store = Store::open(&store).unwrap();
    (tmp, store)
}

#[test]
fn german_inflections_and_compounds_are_found() {
    let (_tmp, store) = german_store();
    let languages = store.languages().unwrap();
    assert_eq!(languages.len(), 1, "{languages:?}");
    assert_eq!((languages[0].code.as_str(), languages[0].chunks), ("de", 3));
    // Inflection: the singular asked, the plural written ("Kündigungsfristen").
    assert_eq!(paths(&store, "Kündigungsfrist")[0], "mietvertrag.txt");
    // "Arbeitstagen" (dative plural) finds "Arbeitstage".
    assert_eq!(paths(&store, "Arbeitstagen")[0], "arbeitsvertrag.txt");
    // A part of a compound finds the whole word: "Urlaub" is only written
    // inside "Urlaubsanspruch", "Speicher" only inside "Speicherfristen".
    assert_eq!(paths(&store, "Urlaub"), vec!["arbeitsvertrag.txt"]);
    assert_eq!(paths(&store, "Speicher"), vec!["datenschutz.txt"]);
    // A compound asked finds its parts written apart: "Mietvertragskündigung"
    // is nowhere, "Kündigung des Mietvertrags" is.
    assert_eq!(paths(&store, "Mietvertragskündigung")[0], "mietvertrag.txt");
    // German stop words weigh nothing: "die" is in all three documents, but
    // only the one with "Kaution" is found.
    assert_eq!(paths(&store, "die Kaution"), vec!["mietvertrag.txt"]);
    // The snippet marks the word as written.
    let hit = &store.search("Kaution", 1).unwrap()[0];
    assert!(hit.snippet.contains("**Kaution**"), "{}", hit.snippet);
}

#[test]
fn each_document_is_analyzed_in_its_own_language_in_a_mixed_store() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("mixed");
    write(&docs, "mietvertrag.txt", MIETVERTRAG);
    write(&docs, "arbeitsvertrag.txt", ARBEITSVERTRAG);
    write(
        &docs,
        "lease.txt",
        "Residential lease\n\nThe tenant may terminate the lease with three months of notice. \
         The deposit equals three monthly rents and is returned after the tenant moves out.",
    );
    write(
        &docs,
        "bail.txt",
        "Contrat de bail\n\nLe locataire peut résilier le bail avec un préavis de trois mois. \
         Le dépôt de garantie est restitué après la remise des clés, déduction faite des réparations.",
    );
    write(&docs, "numbers.csv", "id,amount\n1,20\n2,30\n");
    let store_dir = tmp.path().join("store");
    index(&store_dir, &docs);
    let store = Store::open(&store_dir).unwrap();
    let mut codes: Vec<(String, u64)> = store
        .languages()
        .unwrap()
        .into_iter()
        .map(|l| (l.code, l.chunks))
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        vec![
            ("de".to_string(), 2),
            ("en".to_string(), 1),
            ("fr".to_string(), 1),
            ("und".to_string(), 1)
        ]
    );
    // Each language's stemmer: "terminating" → "terminate" (English),
    // "résiliation" → "résilier" (French), "Monatsmiete" → "Monatsmieten".
    assert_eq!(paths(&store, "terminating")[0], "lease.txt");
    assert_eq!(paths(&store, "résiliation")[0], "bail.txt");
    assert_eq!(paths(&store, "Monatsmiete")[0], "mietvertrag.txt");
    // Text whose language cannot be told is analyzed as English was.
    assert_eq!(paths(&store, "amounts")[0], "numbers.csv");
}

/// The analyzer and schema every store had before languages were detected.
fn english_only_index(dir: &Path) -> (Index, tantivy::schema::Field) {
    let mut b = Schema::builder();
    let opts = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("en_stem_stop")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    b.add_text_field("chunk_id", STRING | STORED);
    b.add_text_field("doc_id", STRING | STORED);
    b.add_text_field("path", STORED);
    b.add_u64_field("ordinal", INDEXED | STORED);
    let text = b.add_text_field("text", opts);
    fs::create_dir_all(dir).unwrap();
    let index = Index::create_in_dir(dir, b.build()).unwrap();
    index.tokenizers().register(
        "en_stem_stop",
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(40))
            .filter(LowerCaser)
            .filter(StopWordFilter::new(Language::English).unwrap())
            .filter(Stemmer::new(Language::English))
            .build(),
    );
    (index, text)
}

fn english_corpus(dir: &Path) -> Vec<PathBuf> {
    let texts = [
        "The tenant shall give ninety days termination notice before leaving the premises.",
        "Rent is due on the first day of each month; late rent incurs a fee of five percent.",
        "Confidential information must not be disclosed for five years after termination.",
        "The landlord repairs the heating; the tenant reports defects without delay.",
        "Either party may terminate this agreement for cause with immediate effect.",
    ];
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            write(dir, &format!("d{i}.txt"), t);
            dir.join(format!("d{i}.txt"))
        })
        .collect()
}

#[test]
fn an_english_store_ranks_and_scores_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    english_corpus(&docs);
    let store_dir = tmp.path().join("store");
    index(&store_dir, &docs);
    let store = Store::open(&store_dir).unwrap();
    let (old, text) = english_only_index(&tmp.path().join("old"));
    let mut writer = old.writer_with_num_threads(1, 15_000_000).unwrap();
    for d in store.documents().unwrap() {
        writer
            .add_document(doc!(text => store.document_text(&d.id).unwrap()))
            .unwrap();
    }
    writer.commit().unwrap();
    let searcher = old.reader().unwrap().searcher();
    let parser = QueryParser::for_index(&old, vec![text]);
    for q in [
        "termination notice",
        "rent fee",
        "tenant",
        "disclosing information five",
        "terminate",
    ] {
        let expected: Vec<(f32, String)> = searcher
            .search(&parser.parse_query(q).unwrap(), &TopDocs::with_limit(10))
            .unwrap()
            .into_iter()
            .map(|(score, addr)| {
                let d: TantivyDocument = searcher.doc(addr).unwrap();
                (
                    score,
                    d.get_first(text).unwrap().as_str().unwrap().to_string(),
                )
            })
            .collect();
        let got: Vec<(f32, String)> = store
            .search(q, 10)
            .unwrap()
            .into_iter()
            .map(|h| (h.score, h.text))
            .collect();
        assert_eq!(got.len(), expected.len(), "{q}");
        for ((gs, gt), (es, et)) in got.iter().zip(&expected) {
            assert_eq!(gt, et, "{q}");
            assert!((gs - es).abs() < 1e-5, "{q}: {gs} vs {es}");
        }
    }
}

#[test]
fn an_index_of_the_english_only_form_is_rebuilt_when_the_store_opens() {
    let (tmp, store) = german_store();
    let store_dir = store.dir().to_path_buf();
    let generation_hits = paths(&store, "Urlaub");
    drop(store);
    // What an older rlm left: the English-only schema, holding the chunks.
    let fulltext = store_dir.join("fulltext");
    fs::remove_dir_all(&fulltext).unwrap();
    let (old, text) = english_only_index(&fulltext);
    let mut writer = old.writer_with_num_threads(1, 15_000_000).unwrap();
    writer.add_document(doc!(text => "stale")).unwrap();
    writer.commit().unwrap();
    drop(writer);
    drop(old);
    let store = Store::open(&store_dir).unwrap();
    assert_eq!(paths(&store, "Urlaub"), generation_hits);
    assert_eq!(store.languages().unwrap()[0].code, "de");
    assert_eq!(store.indexed_chunks(), 3);
    drop(tmp);
}
