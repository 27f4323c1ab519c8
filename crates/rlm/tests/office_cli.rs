//! Office files, e-books, mail and archives through the real `rlm index`,
//! `rlm show` and `rlm ask`: files of each format built in the test, their
//! text and places (pages, slides, sheet rows, messages) as stored, and
//! answers whose citations carry those places.

use std::path::Path;

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Matcher, Script, ScriptedServer, TEST_API_KEY};
use serde_json::Value;

use crate::common;
use common::office::{
    Cell, docx, docx_page_break, docx_paragraph, docx_table, email, epub, odf, ods, pptx, xlsx,
    zip_of,
};
use common::{stderr, stdout};

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn sales_sheet() -> Vec<u8> {
    let mut rows = vec![vec![Cell::T("Region"), Cell::T("Umsatz")]];
    for (region, amount) in [("Nord", 1200.0), ("Süd", 800.0), ("West", 450.5)] {
        rows.push(vec![Cell::T(region), Cell::N(amount)]);
    }
    xlsx(&[
        ("Q2", vec![vec![Cell::T("Region")], vec![Cell::T("Ost")]]),
        ("Q3", rows),
    ])
}

fn contract() -> Vec<u8> {
    docx(&format!(
        "{}{}{}{}{}",
        docx_paragraph("berschrift1", "Mietvertrag"),
        docx_paragraph("", "Die Kaution beträgt 1.200 Euro."),
        docx_table(&[&["Name", "Betrag"], &["Anna", "300"]]),
        docx_page_break(),
        docx_paragraph("", "Die Kündigungsfrist beträgt drei Monate."),
    ))
}

fn deck() -> Vec<u8> {
    pptx(&[
        ("Agenda", &["Budget review"]),
        ("Risiken", &["Lieferverzug in Hamburg"]),
    ])
}

fn mailbox() -> String {
    format!(
        "From anna@example.org Sat Mar  2 10:15:00 2024\n{}\nFrom ben@example.org Mon Mar  4 09:00:00 2024\n{}",
        email(
            "Anna Berg <anna@example.org>",
            "Sat, 2 Mar 2024 10:15:00 +0100",
            "Schlüssel",
            "Der Schlüssel liegt beim Hausmeister.",
            Some(("liste.txt", "Raum 12: Beamer defekt")),
        ),
        email(
            "Ben Ott <ben@example.org>",
            "Mon, 4 Mar 2024 09:00:00 +0100",
            "Termin",
            "Die Begehung ist am Freitag.",
            None,
        )
    )
}

/// A folder with one file of each format.
fn every_format(docs: &Path) {
    write(docs, "vertrag.docx", &contract());
    write(docs, "umsatz.xlsx", &sales_sheet());
    write(docs, "plan.pptx", &deck());
    write(
        docs,
        "notiz.odt",
        &odf(
            "application/vnd.oasis.opendocument.text",
            r#"<office:text><text:h text:outline-level="1">Protokoll</text:h><text:p>Die Heizung wird im Mai getauscht.</text:p></office:text>"#,
        ),
    );
    write(
        docs,
        "budget.ods",
        &ods("Budget", &[&["Posten", "Betrag"], &["Dach", "9000"]]),
    );
    write(
        docs,
        "folien.odp",
        &odf(
            "application/vnd.oasis.opendocument.presentation",
            r#"<office:presentation><draw:page><draw:frame><draw:text-box><text:p>Erste Folie</text:p></draw:text-box></draw:frame></draw:page><draw:page><draw:frame><draw:text-box><text:p>Zweite Folie: Solaranlage</text:p></draw:text-box></draw:frame></draw:page></office:presentation>"#,
        ),
    );
    write(
        docs,
        "brief.rtf",
        b"{\\rtf1\\ansi\\ansicpg1252{\\fonttbl{\\f0 Arial;}}\\f0 Sehr geehrte Frau M\\'fcller,\\par die Miete steigt um 3 Prozent.\\par}",
    );
    write(
        docs,
        "buch.epub",
        &epub(
            "Handbuch",
            &[
                ("Einleitung", "Willkommen."),
                ("Wartung", "Filter alle sechs Monate wechseln."),
            ],
        ),
    );
    write(
        docs,
        "nachricht.eml",
        email(
            "Carla Diaz <carla@example.org>",
            "Tue, 5 Mar 2024 14:30:00 +0100",
            "Angebot",
            "Anbei das Angebot.",
            Some(("angebot.txt", "Preis: 4.500 Euro netto")),
        )
        .as_bytes(),
    );
    write(docs, "postfach.mbox", mailbox().as_bytes());
    write(
        docs,
        "paket.zip",
        &zip_of(&[
            ("ordner/readme.txt", b"Die Anlage steht im Keller."),
            ("ordner/vertrag.docx", &contract()),
        ]),
    );
}

/// `rlm show PATH --json` of the store in `dir`.
fn show(dir: &Path, path: &str) -> Value {
    let o = common::rlm(dir, &["show", path, "--store", "store", "--json"], &[]);
    assert!(o.status.success(), "{path}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// The location (or page) of each chunk of `doc`, in order.
fn places(doc: &Value) -> Vec<String> {
    doc["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| match (&c["location"], &c["page"]) {
            (Value::String(l), _) => l.clone(),
            (_, Value::Number(p)) => format!("page {p}"),
            _ => "-".to_string(),
        })
        .collect()
}

#[test]
fn every_format_is_indexed_with_its_text_and_places() {
    let dir = tempfile::tempdir().unwrap();
    every_format(&dir.path().join("docs"));
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    // 11 files: eight of one document each, a message with an attachment
    // (2), a mailbox of two messages, one with an attachment (3), and an
    // archive of two (2) give 15 documents.
    let listed = stdout(&common::rlm(dir.path(), &["docs", "--store", "store"], &[]));
    assert!(
        stdout(&o).contains(": 15 added, 0 updated"),
        "{}{listed}",
        stdout(&o)
    );

    let docx = show(dir.path(), "docs/vertrag.docx");
    let text = docx["text"].as_str().unwrap();
    assert!(
        text.starts_with("# Mietvertrag\n\nDie Kaution beträgt 1.200 Euro.\n"),
        "{text}"
    );
    assert!(
        text.contains("| Name | Betrag |\nName: Anna | Betrag: 300\n"),
        "{text}"
    );
    assert_eq!(docx["document"]["kind"], "docx");
    assert_eq!(places(&docx), ["page 1", "page 2"]);

    let sheet = show(dir.path(), "docs/umsatz.xlsx");
    let text = sheet["text"].as_str().unwrap();
    assert!(text.contains("# Q3\n| Region | Umsatz |\nRegion: Nord | Umsatz: 1200\nRegion: Süd | Umsatz: 800\nRegion: West | Umsatz: 450.5\n"), "{text}");
    assert_eq!(
        places(&sheet),
        ["sheet \"Q2\", rows 1–2", "sheet \"Q3\", rows 1–4"]
    );

    let slides = show(dir.path(), "docs/plan.pptx");
    assert_eq!(places(&slides), ["slide 1", "slide 2"]);
    assert!(slides["chunks"][1]["heading"] == "Risiken", "{slides}");
    assert!(
        slides["text"]
            .as_str()
            .unwrap()
            .contains("# Risiken\nLieferverzug in Hamburg\n")
    );

    let odt = show(dir.path(), "docs/notiz.odt");
    assert_eq!(
        odt["text"],
        "# Protokoll\n\nDie Heizung wird im Mai getauscht.\n\n"
    );
    assert_eq!(
        places(&show(dir.path(), "docs/budget.ods")),
        ["sheet \"Budget\", rows 1–2"]
    );
    let odp = show(dir.path(), "docs/folien.odp");
    assert_eq!(places(&odp), ["slide 1", "slide 2"]);
    assert_eq!(
        show(dir.path(), "docs/brief.rtf")["text"],
        "Sehr geehrte Frau Müller,\n\ndie Miete steigt um 3 Prozent.\n\n"
    );
    let book = show(dir.path(), "docs/buch.epub");
    assert_eq!(book["document"]["title"], "Handbuch");
    assert_eq!(places(&book), ["chapter 1", "chapter 2"]);

    let message = show(dir.path(), "docs/nachricht.eml");
    let text = message["text"].as_str().unwrap();
    assert!(text.starts_with("From: Carla Diaz <carla@example.org>\nTo: Team <team@example.org>\nDate: 2024-03-05 14:30\nSubject: Angebot\nAttachments: angebot.txt\n\nAnbei das Angebot."), "{text}");
    assert_eq!(places(&message), ["message of 2024-03-05 from Carla Diaz"]);
    let attachment = show(dir.path(), "docs/nachricht.eml/angebot.txt");
    assert!(attachment["text"].as_str().unwrap().contains("4.500 Euro"));

    assert_eq!(
        places(&show(dir.path(), "docs/postfach.mbox/message-2")),
        ["message of 2024-03-04 from Ben Ott"]
    );
    assert!(
        show(dir.path(), "docs/postfach.mbox/message-1/liste.txt")["text"]
            .as_str()
            .unwrap()
            .contains("Beamer defekt")
    );
    assert_eq!(
        show(dir.path(), "docs/paket.zip/ordner/readme.txt")["text"],
        "Die Anlage steht im Keller."
    );
    assert_eq!(
        places(&show(dir.path(), "docs/paket.zip/ordner/vertrag.docx")),
        ["page 1", "page 2"]
    );

    // The text listing names each chunk's place.
    let o = common::rlm(
        dir.path(),
        &["show", "docs/plan.pptx", "--store", "store"],
        &[],
    );
    assert!(
        stdout(&o).contains("[slide 2] # Risiken Lieferverzug in Hamburg"),
        "{}",
        stdout(&o)
    );

    // A second run reads nothing again: archives and mailboxes included.
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(": 0 added, 0 updated, 15 unchanged, 0 removed"),
        "{}",
        stdout(&o)
    );

    // A mailbox that loses a message loses that document and its attachment.
    let one = mailbox();
    let first = &one[..one.find("From ben@").unwrap()];
    write(&dir.path().join("docs"), "postfach.mbox", first.as_bytes());
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(": 0 added, 2 updated, 12 unchanged, 1 removed"),
        "{}",
        stdout(&o)
    );
}

fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

/// One answer citing a slide, sheet rows, a page and a message: each
/// source names its place, in the text output and in `--json`.
#[test]
fn citations_carry_the_slide_sheet_rows_page_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    write(&docs, "a_plan.pptx", &deck());
    write(&docs, "b_umsatz.xlsx", &sales_sheet());
    write(&docs, "c_vertrag.docx", &contract());
    write(&docs, "d_postfach.mbox", mailbox().as_bytes());
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Documents in path order: 0 a_plan.pptx, 1 b_umsatz.xlsx,
    // 2 c_vertrag.docx, 3 d_postfach.mbox/message-1, 4 …/message-1/liste.txt.
    let server = ScriptedServer::spawn(
        Script::new()
            .on(
                root(),
                "FINAL(Hamburg is a risk [[doc:0 \"Lieferverzug in Hamburg\"]]. \
                 South sold 800 [[doc:1 \"Region: Süd | Umsatz: 800\"]]. \
                 Notice is three months [[doc:2 \"Kündigungsfrist beträgt drei Monate\"]]. \
                 The key is with the caretaker [[doc:3 \"Der Schlüssel liegt beim Hausmeister\"]].)",
            )
            .on(common::judge(), judge_reply(&[Verdict::Entailed; 4])),
    );
    let env = [
        ("RLM_PROVIDER", "openai".to_string()),
        ("RLM_BASE_URL", server.base_url()),
        ("RLM_API_KEY", TEST_API_KEY.to_string()),
        ("RLM_PRIMARY_MODEL", "root-model".to_string()),
        ("RLM_SUB_MODEL", "sub-model".to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let o = common::rlm(dir.path(), &["ask", "q?", "--store", "store"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "[1] docs/a_plan.pptx, slide 2: \"Lieferverzug in Hamburg\"",
        "[2] docs/b_umsatz.xlsx, sheet \"Q3\", rows 1–4: \"Region: Süd | Umsatz: 800\"",
        "[3] docs/c_vertrag.docx, page 2: \"Kündigungsfrist beträgt drei Monate\"",
        "[4] docs/d_postfach.mbox/message-1, message of 2024-03-02 from Anna Berg: \"Der Schlüssel liegt beim Hausmeister\"",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }

    let o = common::rlm(
        dir.path(),
        &["ask", "q?", "--store", "store", "--json"],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let locations: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["location"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(
        locations,
        [
            "slide 2",
            "sheet \"Q3\", rows 1–4",
            "page 2",
            "message of 2024-03-02 from Anna Berg"
        ]
    );
}
