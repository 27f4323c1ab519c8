//! The web UI's thread in a real browser (see `ui_browser.rs` for the
//! setup): the answer streamed while it is written, claims and sources
//! without noise, versions and branches of a conversation, export and
//! search, documents at an address, and states that never leave a dead
//! page.

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Reply, Script};
use serde_json::{Value, json};

use crate::common;
use crate::ui;
use crate::ui_browser::{
    QUESTION, ask, axe, close_drawer, js_bool, needle_script, open, root, serve,
};

use ui::webdriver::Browser;

macro_rules! browser_or_skip {
    ($b:ident) => {
        let Some(guard) = ui::webdriver::browser() else {
            return;
        };
        let $b = guard.as_ref().expect("a browser");
    };
}

const NOTES: &str = "[[doc:1 \"The secret code is 4721\"]]";

/// The root agent's request texts (every message) received so far.
fn root_requests(model: &rlm_llm::testing::ScriptedServer) -> Vec<String> {
    model
        .requests()
        .iter()
        .filter(|r| !common::is_judge(r) && r.system().contains("You are answering a question"))
        .map(|r| {
            r.messages
                .iter()
                .map(|m| m.content.clone())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

fn hash(b: &Browser) -> String {
    b.js("return location.hash;", json!([]))
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Records the files the page hands to the browser to save (exports).
fn capture_downloads(b: &Browser) {
    b.js(
        "window.__saved = []; const make = URL.createObjectURL.bind(URL); URL.createObjectURL = (blob) => { window.__saved.push(blob); return make(blob); };",
        json!([]),
    );
}

fn saved_text(b: &Browser, index: usize) -> String {
    b.wait_for("the exported file", |b| {
        (b.js("return (window.__saved || []).length;", json!([]))
            .as_u64()
            .unwrap_or(0)
            > index as u64)
            .then_some(())
    });
    b.js_async(
        "window.__saved[arguments[0]].text().then(arguments[1]);",
        json!([index]),
    )
    .as_str()
    .unwrap_or_default()
    .to_string()
}

#[test]
fn the_answer_streams_into_the_thread_and_stop_keeps_what_was_written() {
    browser_or_skip!(b);
    let script = Script::new().on_sequence(
        root(),
        [
            Reply::text("Let me look through the notes first.\n```repl\nprint(len(context))\n```")
                .with_latency_ms(100),
            Reply::text("FINAL(too late)").with_latency_ms(30_000),
        ],
    );
    let setup = serve(script, &[]);
    let server = &setup.server;
    b.viewport(390, 844);
    b.color_scheme("light");
    open(b, server, "/#/");
    ask(b, QUESTION);
    // The first reply is in the thread while the run still goes.
    let live = b.wait_text(".msg.live .stream", "Let me look through the notes first.");
    assert!(!live.contains("```"), "code is one line: {live}");
    assert_eq!(b.text(".msg.live .code-line code"), "print(len(context))");
    assert!(b.visible("#stop"), "the run still goes");
    let runs = server.get("/api/runs", None);
    assert_eq!(runs["runs"][0]["status"], "running", "{runs}");
    b.screenshot("streaming-390x844");
    let failures = axe(b, "390x844 streaming");
    assert!(failures.is_empty(), "{failures:#?}");

    // Its code line opens the step that ran it.
    b.click(".msg.live .code-line");
    b.wait_for("the steps drawer", |b| {
        b.visible("#right.open").then_some(())
    });
    b.wait_text("#steps .ev.cell[data-turn=\"1\"]", "print(len(context))");
    close_drawer(b);

    // Stop keeps what was written.
    b.click("#stop");
    let card = b.wait_for("the stopped run", |b| {
        let t = b.text(".msg.error, .msg.answer");
        (!t.is_empty()).then_some(t)
    });
    assert!(
        card.contains("Let me look through the notes first."),
        "{card}"
    );
    assert_eq!(b.count(".msg.live"), 0);
    assert!(!js_bool(
        b,
        "return document.querySelector('#send').disabled;"
    ));
}

#[test]
fn a_list_and_a_table_are_no_claims_and_a_passage_is_one_source() {
    browser_or_skip!(b);
    let answer = format!(
        "FINAL(Found in the notes:\n\n1. The secret code is 4721 {NOTES}.\n2. The office moves in May.\n\n| item | value |\n|---|---|\n| code | 4721 |\n)"
    );
    let script = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 8]))
        .otherwise(Reply::text(answer));
    let setup = serve(script, &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    b.color_scheme("light");
    open(b, server, "/#/");
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "office moves");
    // The list stays one ordered list of two items; the table a table.
    assert_eq!(b.count(".msg.answer .md ol"), 1);
    assert_eq!(b.count(".msg.answer .md ol > li"), 2);
    assert_eq!(b.text(".msg.answer .md th:first-child"), "item");
    // No number, header or rule is a claim: nothing is marked unsupported.
    assert_eq!(
        b.count(".msg.answer .badge-unsupported"),
        0,
        "{}",
        b.text(".msg.answer")
    );
    assert_eq!(b.count(".msg.answer .unsupported-list"), 0);
    let stats = b.text(".msg.answer .stats");
    assert!(stats.contains("3/3 claims entailed"), "{stats}");
    // One passage, one source: the model's citation and the engine's merged.
    let sources = b.text(".msg.answer .sources");
    assert_eq!(sources.matches("b_notes.txt").count(), 1, "{sources}");
    assert!(
        sources.contains("cited by the model and found by the engine"),
        "{sources}"
    );
    b.screenshot("list-table-1440x900");

    // Copy keeps a table row's marker inside the row.
    b.cdp("Browser.grantPermissions", json!({"origin": server.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]}));
    b.click(".msg.answer .copy");
    b.wait_text(".msg.answer .copy", "Copied");
    let copied = b.js_async(
        "navigator.clipboard.readText().then(arguments[0], e => arguments[0]('error: ' + e));",
        json!([]),
    );
    let copied = copied.as_str().unwrap_or_default();
    let row = copied
        .lines()
        .find(|l| l.starts_with("| code"))
        .unwrap_or_default();
    assert!(row.ends_with('|'), "the row ends with its pipe: {copied}");

    // The whole document opens at its address, at the cited passage.
    b.click(".msg.answer .md .cite");
    b.wait_text("#source-text mark", "4721");
    b.click("#source-open-doc");
    b.wait_text("#doc-text mark", "The secret code is 4721");
    let at = hash(b);
    assert!(at.starts_with("#/doc/"), "{at}");
    assert!(
        b.text("#doc-meta").contains("cited: lines 1–2"),
        "{}",
        b.text("#doc-meta")
    );
    b.goto(&format!("{}/{at}", server.url));
    b.wait_text("#doc-text mark", "The secret code is 4721");
    let failures = axe(b, "1440x900 document at a passage");
    assert!(failures.is_empty(), "{failures:#?}");
    b.keys("\u{E00C}");
    b.wait_for("the document to close", |b| {
        (b.count("#doc-dialog[open]") == 0).then_some(())
    });
    assert!(!hash(b).starts_with("#/doc/"), "{}", hash(b));
}

#[test]
fn regenerate_makes_versions_and_an_edit_a_branch_the_model_sees_alone() {
    browser_or_skip!(b);
    let replies = [
        format!("FINAL(Attempt one: the code is 4721 {NOTES}.)"),
        format!("FINAL(Attempt two: the code is 4721 {NOTES}.)"),
        "FINAL(Edited: the office moves in May [[doc:0 \"The office moves in May\"]].)".to_string(),
        format!("FINAL(Follow-up: still 4721 {NOTES}.)"),
    ];
    let script = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 4]))
        .on_sequence(root(), replies.map(Reply::text));
    let setup = serve(script, &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    b.color_scheme("light");
    open(b, server, "/#/");
    b.console_errors(); // what earlier tests logged
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "Attempt one");
    assert_eq!(
        b.count(".msg.answer .versions"),
        0,
        "one version: no arrows"
    );

    // Regenerate: a second version in place; the rerun does not see the first.
    b.click(".msg.answer .regenerate");
    b.wait_text(".msg.answer .md", "Attempt two");
    assert_eq!((b.count(".msg.user"), b.count(".msg.answer")), (1, 1));
    assert_eq!(b.text(".msg.answer .versions-text"), "2/2");
    let seen = root_requests(&setup.model);
    assert!(
        !seen.last().expect("a request").contains("Attempt one"),
        "the rerun saw the first attempt: {seen:#?}"
    );
    b.click(".msg.answer .prev-version");
    b.wait_text(".msg.answer .md", "Attempt one");
    assert_eq!(b.text(".msg.answer .versions-text"), "1/2");
    // The steps beside it are that version's.
    b.wait_text("#steps", "Attempt one");
    assert!(!b.text("#steps").contains("Attempt two"));
    b.screenshot("versions-1440x900");
    let failures = axe(b, "1440x900 versions");
    assert!(failures.is_empty(), "{failures:#?}");

    // Edit the question: a third version, asked without the other two.
    b.click(".msg.user .edit");
    b.wait_el(".msg.user textarea");
    let failures = axe(b, "1440x900 editing a question");
    assert!(failures.is_empty(), "{failures:#?}");
    b.js(
        "const t = document.querySelector('.msg.user textarea'); t.value = ''; t.focus();",
        json!([]),
    );
    b.type_into(".msg.user textarea", "When does the office move?\u{E007}");
    b.wait_text(".msg.answer .md", "Edited");
    assert_eq!(b.text(".msg.answer .versions-text"), "3/3");
    assert!(b.text(".msg.user").contains("When does the office move?"));
    let seen = root_requests(&setup.model);
    let edit = seen.last().expect("a request");
    assert!(
        !edit.contains("Attempt"),
        "the edit saw the old answers: {edit}"
    );

    // A follow-up sees its branch only.
    ask(b, "And the code?");
    b.wait_text(".msg.answer:last-of-type .md", "Follow-up");
    let seen = root_requests(&setup.model);
    let follow = seen.last().expect("a request");
    assert!(
        follow.contains("Edited"),
        "the branch is its history: {follow}"
    );
    assert!(!follow.contains("Attempt"), "{follow}");

    // After a reload: the same branch, versions and all.
    let chat = hash(b);
    b.goto("about:blank");
    open(b, server, &format!("/{chat}"));
    b.wait_text(".msg.answer:last-of-type .md", "Follow-up");
    assert_eq!(b.count(".msg.user"), 2);
    assert_eq!(b.text(".msg.answer .versions-text"), "3/3");
    // Back to the second version: its branch has no follow-up.
    b.click(".msg.answer .prev-version");
    b.wait_text(".msg.answer .md", "Attempt two");
    assert_eq!((b.count(".msg.user"), b.count(".msg.answer")), (1, 1));
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn chats_are_searched_and_exported_after_a_reload() {
    browser_or_skip!(b);
    let setup = serve(needle_script(2), &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    b.color_scheme("light");
    open(b, server, "/#/");
    // An empty chat offers questions about documents of the store.
    b.wait_el(".welcome .example");
    b.click(".welcome .example");
    let proposed = b.js(
        "return document.querySelector('#question').value;",
        json!([]),
    );
    let proposed = proposed.as_str().unwrap_or_default();
    assert!(proposed.contains(".txt"), "{proposed}");

    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "4721");
    b.click("#new-chat");
    ask(b, "Where is the vault?");
    b.wait_text(".msg.answer .md", "4721");
    b.wait_for("two chats", |b| {
        (b.count("#sessions li[data-session]") == 2).then_some(())
    });
    // A long title has its whole text as a tooltip.
    assert_eq!(
        b.js(
            "return document.querySelector('#sessions li[data-session] a').title;",
            json!([])
        ),
        "Where is the vault?"
    );

    b.goto("about:blank");
    open(b, server, "/#/");
    b.type_into("#chat-search", "secret");
    b.wait_for("one chat matching", |b| {
        (b.count("#sessions li[data-session]") == 1).then_some(())
    });
    assert!(b.text("#sessions").contains(QUESTION));
    b.click("#sessions li[data-session] a");
    b.wait_text(".msg.answer .md", "4721");
    b.wait_el(".msg.answer .cite[data-status=\"verified\"]");

    capture_downloads(b);
    b.click("#export summary");
    b.click("#export-md");
    let md = saved_text(b, 0);
    assert!(md.contains(&format!("## {QUESTION}")), "{md}");
    assert!(
        md.contains("is 4721 [1]") && md.contains("[1] docs/b_notes.txt"),
        "{md}"
    );
    b.click("#export summary");
    b.click("#export-json");
    let exported: Value = serde_json::from_str(&saved_text(b, 1)).expect("JSON");
    assert_eq!(exported["turns"][0]["question"], QUESTION, "{exported}");
    assert!(exported["turns"][0]["run_id"].is_string(), "{exported}");
}

#[test]
fn shortcuts_are_listed_and_work() {
    browser_or_skip!(b);
    let setup = serve(needle_script(0), &[]);
    b.viewport(1440, 900);
    open(b, &setup.server, "/#/");
    b.js("document.activeElement.blur();", json!([]));
    b.keys("?");
    b.wait_for("the shortcuts", |b| {
        (b.count("#help-dialog[open]") > 0).then_some(())
    });
    assert!(b.text("#help-dialog").contains("Search the chats"));
    let failures = axe(b, "1440x900 shortcuts");
    assert!(failures.is_empty(), "{failures:#?}");
    b.keys("\u{E00C}");
    b.wait_for("the shortcuts to close", |b| {
        (b.count("#help-dialog[open]") == 0).then_some(())
    });
    b.js("document.activeElement.blur();", json!([]));
    b.chord('\u{E009}', 'k');
    assert_eq!(b.focused(), "chat-search");
    b.js("document.activeElement.blur();", json!([]));
    b.keys("/");
    assert_eq!(b.focused(), "question");
}

#[test]
fn escape_on_the_token_prompt_leaves_a_working_page() {
    browser_or_skip!(b);
    let token = "token-for-the-escape-test";
    let setup = serve(needle_script(1), &["--token", token]);
    let server = &setup.server;
    b.viewport(390, 844);
    b.goto(&format!("{}/#/", server.url));
    b.wait_for("the token prompt", |b| {
        (b.count("#token-dialog[open]") > 0).then_some(())
    });
    b.keys("\u{E00C}");
    b.keys("\u{E00C}");
    b.wait_for("the prompt to stay (or come back)", |b| {
        (b.count("#token-dialog[open]") > 0 && b.focused() == "token-input").then_some(())
    });
    b.type_into("#token-input", &format!("{token}\u{E007}"));
    b.wait_text("#store-info", "4 documents");
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "4721");
    b.js("sessionStorage.clear(); localStorage.clear();", json!([]));
}

#[test]
fn stop_before_the_server_answers_gives_the_page_back() {
    browser_or_skip!(b);
    let setup = serve(needle_script(1), &[]);
    let server = &setup.server;
    b.viewport(768, 1024);
    open(b, server, "/#/");
    // The request that starts the run never gets an answer.
    b.cdp(
        "Fetch.enable",
        json!({"patterns": [{"urlPattern": "*/api/runs", "requestStage": "Request"}]}),
    );
    ask(b, QUESTION);
    b.wait_text(".msg.live .pending-text", "Sending");
    b.click("#stop");
    b.wait_text(
        ".msg.error .err-head",
        "Stopped before the server started answering",
    );
    assert!(!js_bool(
        b,
        "return document.querySelector('#send').disabled;"
    ));
    b.cdp("Fetch.disable", json!({}));
    b.click(".msg.error .retry");
    b.wait_text(".msg.answer .md", "4721");
    assert_eq!(b.count(".msg.error"), 0);
}

#[test]
fn asking_from_a_run_page_starts_a_clean_chat() {
    browser_or_skip!(b);
    let setup = serve(needle_script(2), &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    open(b, server, "/#/");
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "4721");
    let run = b
        .js(
            "return document.querySelector('.msg.answer').dataset.run;",
            json!([]),
        )
        .as_str()
        .expect("a run id")
        .to_string();
    b.goto(&format!("{}/#/run/{run}", server.url));
    b.wait_text("#chat-title", "Run: ");
    ask(b, "Where is the vault?");
    b.wait_text(".msg.answer .md", "4721");
    assert_eq!(b.count(".msg.user"), 1, "{}", b.text("#messages"));
    assert_eq!(b.count(".run-head"), 0);
    assert!(b.text(".msg.user").contains("Where is the vault?"));
    assert!(hash(b).starts_with("#/c/"), "{}", hash(b));
}

#[test]
fn a_long_answer_is_shown_from_its_top() {
    browser_or_skip!(b);
    let items: String = (1..=60)
        .map(|i| format!("- Point {i}: the secret code is 4721.\n"))
        .collect();
    let script = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 64]))
        .on_last_contains(
            "long",
            Reply::text(format!("FINAL(Summary first.\n\n{items})")),
        )
        .otherwise(Reply::text("FINAL(short)"));
    let setup = serve(script, &[]);
    b.viewport(390, 844);
    open(b, &setup.server, "/#/");
    ask(b, "A long answer please");
    b.wait_text(".msg.answer .md", "Point 60");
    let top = b.js(
        "const m = document.querySelector('#messages').getBoundingClientRect(); const a = document.querySelector('.msg.answer').getBoundingClientRect(); return [a.top - m.top, m.height];",
        json!([]),
    );
    let (at, height) = (
        top[0].as_f64().unwrap_or(-1.0),
        top[1].as_f64().unwrap_or(0.0),
    );
    assert!(at >= -1.0 && at < height, "the answer's top in view: {top}");
}

#[test]
fn a_model_that_does_not_answer_shows_its_retries() {
    browser_or_skip!(b);
    let dir = crate::ui_browser::store();
    let model = rlm_llm::testing::ScriptedServer::spawn(needle_script(1));
    let gate = ui::server::Gate::closed(&model);
    let server = ui::server::Server::start(dir.path(), &gate.base_url(), &["--max-retries", "2"]);
    b.viewport(1440, 900);
    open(b, &server, "/#/");
    ask(b, QUESTION);
    // While it waits to try again, the thread says so.
    b.wait_text(".msg.live .pending-text", "model retrying 2/3");
    b.wait_text("#steps", "retrying 2/3");
    b.wait_text(".msg.error .err-head", "Model unreachable at");
    assert!(
        b.text("#steps").contains("retrying 3/3"),
        "{}",
        b.text("#steps")
    );
}

#[test]
fn a_document_with_pages_opens_at_the_cited_page() {
    browser_or_skip!(b);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).expect("docs folder");
    std::fs::write(docs.join("a.txt"), "The office moves in May.\n").expect("written");
    std::fs::write(docs.join("lease.pdf"), crate::corpus_cli::two_page_pdf()).expect("written");
    let o = common::rlm(dir.path(), &["index", "docs", "--store", "store"], &[]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let script = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 2]))
        .otherwise(Reply::text(
            "FINAL(Parking has its own rules [[doc:1 \"Parking rules on page two\"]].)",
        ));
    let model = rlm_llm::testing::ScriptedServer::spawn(script);
    let server = ui::server::Server::with_model(dir.path(), &model, &[]);
    b.viewport(768, 1024);
    open(b, &server, "/#/");
    ask(b, "What about parking?");
    b.wait_el(".msg.answer .md .cite[data-status=\"verified\"]");
    b.click(".msg.answer .md .cite");
    b.wait_text("#source-meta", "page 2");
    b.click("#source-open-doc");
    b.wait_text("#doc-text mark", "Parking rules on page two");
    assert!(
        b.text("#doc-meta").contains("cited: page 2"),
        "{}",
        b.text("#doc-meta")
    );
}
