//! The root's inspection lead on documents without line breaks (PDF text,
//! transcripts, minified pages): it shows the window around the words of the
//! question, never the head of a long line.

use crate::common;

use common::*;
use rlm_llm::testing::{Script, ScriptedServer};

/// Filler prose of about `n` characters, all on one line.
fn filler(n: usize, seed: &str) -> String {
    let words = [
        "quarterly",
        "revenue",
        "shipments",
        "warehouse",
        "regional",
        "staffing",
        "forecast",
        "inventory",
        "logistics",
        "procurement",
    ];
    let mut out = String::new();
    let mut i = 0;
    while out.len() < n {
        out.push_str(words[i % words.len()]);
        out.push(' ');
        if i % 13 == 0 {
            out.push_str(seed);
            out.push(' ');
        }
        i += 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lead_shows_the_matching_window_of_a_long_line() {
    // One document, no line breaks: the needle sits mid-chunk, far past the
    // first 300 characters of its (only) line.
    let text = format!(
        "{} The vault access code for the Lisbon office is 58213. {}",
        filler(1200, "memo"),
        filler(6000, "note")
    );
    assert!(!text.contains('\n'));
    let ts = store(&[("report.txt", &text), ("other.txt", &filler(3000, "misc"))]);
    let server = ScriptedServer::start(Script::new().on(root(), "FINAL(58213)".to_string())).await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(
        &engine,
        &ts,
        "What is the vault access code for the Lisbon office?",
    )
    .await;
    assert_eq!(answer.answer, "58213");
    let reqs = server.requests();
    let first_user = reqs[0].first_user();
    // The root is told what the engine's inspection did, not shown its code
    // (a page of tokens a weak model copied as its own first step).
    assert!(!first_user.contains("_hits = search("), "{first_user}");
    assert!(first_user.contains("The system already looked at the corpus for you"));
    let at = first_user
        .rfind("Full-text search for the question found")
        .unwrap_or_else(|| panic!("no lead: {first_user}"));
    let lead = &first_user[at..];
    assert!(
        lead.contains("vault access code for the Lisbon office is 58213"),
        "{lead}"
    );
    // Quotes copied from the lead are verbatim: no highlight marks.
    assert!(!lead.contains("**"), "{lead}");
}

/// Pages that share the question's common words ("directory", "files",
/// "temporary") crowd the page the question names out of the top hits; the
/// named page (`sort.txt` for "… does sort keep …") still gets its best hit
/// into the lead. A question that names no page gets the top hits alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lead_holds_the_best_passage_of_a_document_the_question_names() {
    let crowd = |topic: &str| {
        format!(
            "{topic} lists the files of a directory.\nThe directory and its temporary files are kept in the directory.\nTemporary files: the directory keeps temporary files.\n"
        )
    };
    let mut sort = String::from("SORT\nsort - sort lines of text files\n");
    for i in 0..40 {
        sort.push_str(&format!(
            "Option {i} changes the order of the lines it reads.\n"
        ));
    }
    sort.push_str("-T use DIR for temporaries, not $TMPDIR or /tmp\n");
    // The page's footer names it again and again: searched with its name,
    // the footer would be the page's best hit.
    for i in 0..40 {
        sort.push_str(&format!("Note {i} on what the lines it reads look like.\n"));
    }
    sort.push_str("SORT(1) sort sort sort sort sort sort sort sort sort sort.\n");
    let ts = store(&[
        ("ls.txt", &crowd("ls")),
        ("du.txt", &crowd("du")),
        ("cp.txt", &crowd("cp")),
        ("mv.txt", &crowd("mv")),
        ("sort.txt", &sort),
    ]);
    let question = "In which directory does sort keep its temporary files when TMPDIR is unset?";
    let top: Vec<String> = ts
        .corpus
        .store()
        .search(question, 3)
        .unwrap()
        .into_iter()
        .map(|h| h.path)
        .collect();
    assert!(
        !top.iter().any(|p| p.ends_with("sort.txt")),
        "the named page must be crowded out of the top 3 for this test: {top:?}"
    );
    let server = ScriptedServer::start(Script::new().on(root(), "FINAL(/tmp)".to_string())).await;
    let engine = engine(&server, config()).await;
    ask(&engine, &ts, question).await;
    ask(
        &engine,
        &ts,
        "In which directory are the temporary files kept?",
    )
    .await;
    let reqs = server.requests();
    let lead = |i: usize| {
        let first = reqs[i].first_user().to_string();
        let at = first
            .rfind("Full-text search for the question found")
            .unwrap_or_else(|| panic!("no lead: {first}"));
        first[at..].to_string()
    };
    let named = lead(0);
    assert!(named.contains("sort.txt]"), "{named}");
    assert!(named.contains("not $TMPDIR or /tmp"), "{named}");
    let unnamed = lead(1);
    assert!(!unnamed.contains("sort.txt]"), "{unnamed}");
    assert_eq!(unnamed.matches("[[chunk:").count(), 3, "{unnamed}");
}
