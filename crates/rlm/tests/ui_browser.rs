//! The web UI in a real browser: `rlm serve` over a real store with the
//! scripted model server, driven by headless Chromium through chromedriver
//! (W3C WebDriver) at phone (390×844), tablet (768×1024) and desktop
//! (1440×900) sizes. Screenshots go to `target/ui-screenshots/`.
//!
//! Without chromedriver/chromium the tests print a skip line and pass, unless
//! `RLM_REQUIRE_BROWSER=1` (CI), where they fail. `scripts/install-browser`
//! installs both. One browser serves every test (they take turns).

use rlm_engine::grounding::{Verdict, judge_reply};
use rlm_llm::testing::{Fault, Matcher, Reply, Script, ScriptedServer};
use serde_json::{Value, json};

use crate::common;
use crate::ui;

use ui::server::{Gate, Server};
use ui::webdriver::Browser;

pub(crate) const SIZES: [(u32, u32); 3] = [(390, 844), (768, 1024), (1440, 900)];
pub(crate) const QUESTION: &str = "What is the secret code?";

pub(crate) fn root() -> Matcher {
    Matcher::system_contains("You are answering a question about a collection")
}

/// The needle answered `times` times: a code turn, then a Markdown answer
/// citing the notes.
pub(crate) fn needle_script(times: usize) -> Script {
    let mut replies = Vec::new();
    for _ in 0..times {
        replies.push(
            Reply::text("Let me search.\n```repl\nimport re\nprint(re.findall(r\"secret code is (\\d+)\", context))\n```")
                .with_latency_ms(150),
        );
        replies.push(
            Reply::text(
                "FINAL(## Secret code\n\nThe **secret code** is 4721 [[doc:1 \"The secret code is 4721\"]].\n\n- found in the meeting notes\n- `4721` has four digits\n)",
            )
            .with_latency_ms(150),
        );
    }
    Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 4]))
        .on_sequence(root(), replies)
        .otherwise(Reply::text("FINAL(The office moves in May.)"))
}

pub(crate) fn store() -> tempfile::TempDir {
    common::indexed_docs(&[
        (
            "a.txt",
            "This memo describes the office move.\nThe office moves in May.\n",
        ),
        (
            "b_notes.txt",
            "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
        ),
        (
            "c_vault.txt",
            "The old vault had a secret code of its own.\n",
        ),
        (
            "d_hostile.txt",
            "<img src=x onerror=\"window.__pwned='doc'\"> The launch date is 9 May.\n",
        ),
    ])
}

/// Binds `$b` to the shared browser, or returns (the test skips, or fails
/// under `RLM_REQUIRE_BROWSER=1`) when there is none.
macro_rules! browser_or_skip {
    ($b:ident) => {
        let Some(guard) = ui::webdriver::browser() else {
            return;
        };
        let $b = guard.as_ref().expect("a browser");
    };
}

/// A store, the scripted model and `rlm serve` over them (dropped in
/// that order: the server first).
pub(crate) struct Setup {
    pub(crate) server: Server,
    pub(crate) model: ScriptedServer,
    pub(crate) dir: tempfile::TempDir,
}

/// Serves [`store`] with `script` as the model and `extra` flags.
pub(crate) fn serve(script: Script, extra: &[&str]) -> Setup {
    let dir = store();
    let model = ScriptedServer::spawn(script);
    let server = Server::with_model(dir.path(), &model, extra);
    Setup { server, model, dir }
}

/// Loads the page at `path` (`/#/...`) of `server` and waits until it is ready.
pub(crate) fn open(b: &Browser, server: &Server, path: &str) {
    b.goto(&format!("{}{path}", server.url));
    b.wait_for("the page to be ready", |b| {
        (b.js("return document.body.dataset.ready === '1';", json!([])) == true).then_some(())
    });
}

pub(crate) fn ask(b: &Browser, question: &str) {
    b.js(
        "const q = document.querySelector('#question'); q.value = ''; q.focus();",
        json!([]),
    );
    b.type_into("#question", question);
    b.click("#send");
}

pub(crate) fn js_bool(b: &Browser, script: &str) -> bool {
    b.js(script, json!([])) == true
}

/// Elements that stick out of the viewport on the right (at most 5).
fn overflowing(b: &Browser) -> Value {
    b.js(
        "return Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > innerWidth + 1 && getComputedStyle(e).visibility !== 'hidden').slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));",
        json!([]),
    )
}

/// Opens the Steps pane (a drawer below 1200 px).
fn show_steps(b: &Browser) {
    if b.visible("#open-right") {
        b.click("#open-right");
        b.wait_for("the steps drawer", |b| {
            b.visible("#right.open").then_some(())
        });
    }
    b.click("#tab-steps");
}

pub(crate) fn close_drawer(b: &Browser) {
    if b.count("#right.open, #left.open") > 0 {
        b.keys("\u{E00C}");
        b.wait_for("the drawer to close", |b| {
            (b.count("#right.open, #left.open") == 0).then_some(())
        });
    }
}

// ---------------------------------------------------------------------------

#[test]
fn ask_sources_and_steps_at_phone_tablet_and_desktop() {
    browser_or_skip!(b);
    let setup = serve(needle_script(5), &[]);
    let server = &setup.server;

    // 360 px: the narrowest phones in use.
    for (w, h) in [(360, 740)].into_iter().chain(SIZES) {
        b.viewport(w, h);
        b.color_scheme(if w == 768 { "dark" } else { "light" });
        open(b, server, "/#/");
        b.wait_text("#store-info", "4 documents");
        // The chat column takes the screen on a phone; the question box is usable.
        let chat_w = b
            .js(
                "return document.querySelector('#chat').getBoundingClientRect().width;",
                json!([]),
            )
            .as_f64()
            .unwrap_or(0.0);
        let min = if w < 800 { f64::from(w) - 1.0 } else { 500.0 };
        assert!(chat_w >= min, "chat column {chat_w} px wide at {w}x{h}");
        assert!(b.visible("#question") && b.visible("#send"));
        assert_eq!(overflowing(b), json!([]), "no sideways scroll at {w}x{h}");

        ask(b, QUESTION);
        let answer = b.wait_text(".msg.answer .md", "4721");
        assert!(
            !answer.contains("[[doc:"),
            "markers become numbers: {answer}"
        );
        // Markdown rendered: heading, bold, list, inline code.
        assert_eq!(b.text(".msg.answer .md h2"), "Secret code");
        assert_eq!(b.text(".msg.answer .md strong"), "secret code");
        assert!(b.count(".msg.answer .md li") >= 2);
        assert_eq!(b.text(".msg.answer .md li code"), "4721");
        // The question stays readable above its answer (no collapsed sliver).
        let user_h = b
            .js(
                "return document.querySelector('.msg.user').getBoundingClientRect().height;",
                json!([]),
            )
            .as_f64()
            .unwrap_or(0.0);
        assert!(user_h >= 30.0, "question bubble {user_h} px high");

        // A numbered marker, verified, and the sources list under the answer.
        let cite = ".msg.answer .cite[data-status=\"verified\"]";
        assert_eq!(b.text(cite), "1");
        // A marker is a touch target of at least 24×24 px.
        let size = b.js(
            "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return [r.width, r.height];",
            json!([cite]),
        );
        assert!(
            size[0].as_f64().unwrap_or(0.0) >= 24.0 && size[1].as_f64().unwrap_or(0.0) >= 24.0,
            "marker {size} at {w}x{h}"
        );
        let sources = b.text(".msg.answer .sources");
        assert!(
            sources.contains("b_notes.txt")
                && sources.contains("verified")
                && sources.contains("The secret code is 4721"),
            "{sources}"
        );
        assert_eq!(
            b.count(".msg.answer .warn-box"),
            0,
            "a verified source is no warning"
        );
        assert_eq!(overflowing(b), json!([]), "the answer fits at {w}x{h}");
        assert_eq!(
            b.js(
                "return [innerWidth, document.documentElement.scrollWidth];",
                json!([])
            ),
            json!([w, w]),
            "the page is as wide as the screen at {w}x{h}"
        );

        // Preview on focus; the passage on click; Escape returns focus.
        b.js(
            "document.querySelector(arguments[0]).focus();",
            json!([cite]),
        );
        b.wait_for("the source preview", |b| {
            b.visible("#cite-tip").then_some(())
        });
        assert!(b.text("#cite-tip").contains("b_notes.txt"));
        b.click(cite);
        b.wait_text("#source-text mark", "secret code is 4721");
        assert_eq!(b.text("#source-text mark"), "The secret code is 4721");
        assert!(b.text("#source-title").contains("b_notes.txt"));
        assert!(
            b.text("#source-meta").contains("lines 1"),
            "{}",
            b.text("#source-meta")
        );
        if w == 1440 {
            b.screenshot("source-1440x900");
        }
        b.keys("\u{E00C}");
        b.wait_for("the source dialog to close", |b| {
            (b.count("#source-dialog[open]") == 0).then_some(())
        });
        assert!(
            b.focused().contains("cite"),
            "focus back on the marker, not {}",
            b.focused()
        );

        // Steps: code highlighted and shown once; inspection output collapsed.
        show_steps(b);
        b.wait_for("the model's cell", |b| {
            (b.count("#steps .ev.cell .tok-kw") > 0).then_some(())
        });
        let steps = b.text("#steps");
        assert_eq!(
            steps.matches("re.findall(r\"secret code is").count(),
            1,
            "the cell's code once: {steps}"
        );
        assert!(steps.contains("['4721']"), "the cell's output: {steps}");
        assert!(
            b.count("#steps .ev.cell[data-initial=\"1\"] details[open]") == 0,
            "the inspection is collapsed"
        );
        assert!(
            b.count("#steps .cell-output details[open]") == 0,
            "outputs are collapsed"
        );
        b.screenshot(&format!("steps-{w}x{h}"));
        close_drawer(b);
        b.js(
            "document.querySelector('.msg.answer').scrollIntoView();",
            json!([]),
        );
        b.screenshot(&format!("answer-{w}x{h}"));
        assert!(
            b.console_errors().is_empty(),
            "console errors at {w}x{h}: {:?}",
            b.console_errors()
        );
    }

    // Copy gives the Markdown with [n] and its sources; Regenerate asks again.
    b.cdp("Browser.grantPermissions", json!({"origin": server.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]}));
    b.click(".msg.answer .copy");
    b.wait_text(".msg.answer .copy", "Copied");
    let copied = b.js_async(
        "navigator.clipboard.readText().then(arguments[0], e => arguments[0]('error: ' + e));",
        json!([]),
    );
    let copied = copied.as_str().unwrap_or_default();
    assert!(
        copied.contains("is 4721 [1]") && copied.contains("[1] docs/b_notes.txt"),
        "{copied}"
    );
    // Regenerate answers again in place: a second version, not a second turn.
    b.click(".msg.answer .regenerate");
    b.wait_text(".msg.answer .versions-text", "2/2");
    assert_eq!(b.count(".msg.answer"), 1);
    assert_eq!(b.count(".msg.user"), 1);
}

#[test]
fn hostile_markdown_runs_no_script_and_unsupported_claims_are_marked() {
    browser_or_skip!(b);
    let hostile = concat!(
        "FINAL(The secret code is 4721. The vault opens at midnight. The launch date is 9 May [[doc:3 \"The launch date is 9 May\"]].\n\n",
        "<img src=x onerror=\"window.__pwned='img'\"><script>window.__pwned='script'</script>",
        "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe>\n\n",
        "[click me](javascript:window.__pwned='md-link') <a href=\"javascript:window.__pwned='a'\" onclick=\"window.__pwned='onclick'\">raw link</a> ",
        "<b onmouseover=\"window.__pwned='hover'\">bold</b> <form action=\"https://example.com\"><input name=q></form>\n\n",
        "| item | value |\n|---|---|\n| code | 4721 |\n)"
    );
    // The judge finds every claim with a passage entailed by it.
    let script = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 15]))
        .on_last_contains(
            "zebras",
            Reply::text("FINAL(Zebras migrate north every autumn.)"),
        )
        .otherwise(Reply::text(hostile));
    let setup = serve(script, &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    open(b, server, "/#/");

    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "midnight");
    let md = ".msg.answer .md";
    assert_eq!(
        b.count(&format!(
            "{md} script, {md} iframe, {md} img, {md} form, {md} input"
        )),
        0
    );
    assert!(js_bool(
        b,
        "return Array.from(document.querySelectorAll('.md *')).every(e => Array.from(e.attributes).every(a => !a.name.startsWith('on')));"
    ));
    assert!(js_bool(
        b,
        "return Array.from(document.querySelectorAll('.md a')).every(a => !/^javascript:/i.test(a.getAttribute('href') || ''));"
    ));
    for link in [".md a"] {
        if b.count(link) > 0 {
            b.js(
                "document.querySelectorAll(arguments[0]).forEach(a => a.click());",
                json!([link]),
            );
        }
    }
    b.js("document.querySelectorAll('.md b').forEach(e => e.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})));", json!([]));
    // The table is a table (the engine's marker of its row inside the row).
    assert!(
        b.text(".msg.answer .md td:last-child").starts_with("4721"),
        "{}",
        b.text(".msg.answer .md table")
    );
    assert!(
        b.text(md)
            .contains("<script>window.__pwned='script'</script>"),
        "raw HTML is shown as text"
    );
    // The hostile document's text is shown as text in the source viewer.
    b.js(
        "Array.from(document.querySelectorAll('.msg.answer .source-open')).find(e => e.textContent.includes('d_hostile.txt')).click();",
        json!([]),
    );
    b.wait_text("#source-text", "launch date");
    assert!(
        b.text("#source-text").contains("<img src=x onerror="),
        "the passage as text"
    );
    b.keys("\u{E00C}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        b.js(
            "return window.__pwned === undefined ? null : String(window.__pwned);",
            json!([])
        ),
        Value::Null,
        "no script ran"
    );

    // The claim nothing supports is marked in the text and listed.
    assert!(
        b.text(".msg.answer .claim-unsupported")
            .contains("The vault opens at midnight."),
        "{}",
        b.text(".msg.answer .md")
    );
    assert!(b.count(".msg.answer .badge-unsupported") >= 1);
    assert!(
        b.text(".msg.answer .unsupported-list")
            .contains("The vault opens at midnight.")
    );

    // No source at all is a warning, never a green "all valid".
    ask(b, "Where do zebras go?");
    b.wait_for("the second answer", |b| {
        (b.count(".msg.answer") == 2).then_some(())
    });
    let second = b.text(".msg.answer:last-of-type");
    assert!(second.contains("No verified sources"), "{second}");
    assert!(
        !second.contains("all valid") && second.contains("no verified source"),
        "{second}"
    );
    assert!(b.visible(".msg.answer:last-of-type .warn-box"));
    b.screenshot("no-sources-1440x900");
    // Raw HTML never became elements: no handler was even refused by the CSP.
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:#?}");
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// The quote check and entailment are shown apart: a verbatim quote whose
/// passage the judge does not find states its claim is a related passage,
/// listed apart, never green; its claim is marked in the text.
#[test]
fn a_passage_that_does_not_state_its_claim_is_related_and_not_green() {
    browser_or_skip!(b);
    let script = Script::new()
        .on(
            common::judge(),
            judge_reply(&[Verdict::Entailed, Verdict::NotEntailed]),
        )
        .otherwise(Reply::text(
            "FINAL(The code is 4721 [[doc:1 \"The secret code is 4721\"]]. The office moves in June [[doc:0 \"The office moves in May\"]].)",
        ));
    let setup = serve(script, &[]);
    b.viewport(1440, 900);
    b.color_scheme("light");
    open(b, &setup.server, "/#/");
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "June");
    let sources = b.text(".msg.answer .sources:not(.related)");
    assert!(
        sources.contains("b_notes.txt")
            && sources.contains("quote verified")
            && sources.contains("entails its claim"),
        "{sources}"
    );
    let related = b.text(".msg.answer .sources.related");
    assert!(
        related.contains("a.txt")
            && related.contains("quote verified")
            && related.contains("related: does not state its claim"),
        "{related}"
    );
    assert!(!sources.contains("a.txt"), "{sources}");
    // Green for the source that passes both checks only.
    let color = |selector: &str| {
        b.js(
            "return getComputedStyle(document.querySelector(arguments[0])).color;",
            json!([selector]),
        )
    };
    let green = color(".msg.answer .sources:not(.related) .cit-status");
    assert_ne!(color(".msg.answer .sources.related .cit-status"), green);
    assert_eq!(
        color(".msg.answer .cite[data-support=\"supported\"]"),
        green
    );
    assert_ne!(color(".msg.answer .cite[data-support=\"related\"]"), green);
    // The claim is marked in the text and listed.
    assert_eq!(
        b.text(".msg.answer .badge-unsupported[data-support=\"related\"]"),
        "not entailed"
    );
    assert!(
        b.text(".msg.answer .unsupported-list")
            .contains("The office moves in June"),
        "{}",
        b.text(".msg.answer")
    );
    assert!(
        b.text(".msg.answer .stats")
            .contains("1 verified source · 1 related passage"),
        "{}",
        b.text(".msg.answer .stats")
    );
    b.screenshot("related-passage-1440x900");
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn chats_are_titled_renamed_switched_linked_and_survive_reload() {
    browser_or_skip!(b);
    let setup = serve(needle_script(1), &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    b.color_scheme("light");
    open(b, server, "/#/");

    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "4721");
    b.wait_text("#sessions", QUESTION);
    assert_eq!(
        b.text("#chat-title"),
        QUESTION,
        "named from its first question"
    );
    let hash = b
        .js("return location.hash;", json!([]))
        .as_str()
        .unwrap_or_default()
        .to_string();
    let first = hash
        .strip_prefix("#/c/")
        .unwrap_or_else(|| panic!("a chat URL, not {hash:?}"))
        .to_string();

    b.click("#new-chat");
    assert_eq!(b.count(".msg"), 0);
    ask(b, "When does the office move?");
    b.wait_text(".msg.answer .md", "May");
    b.wait_for("two chats", |b| {
        (b.count("#sessions li[data-session]") == 2).then_some(())
    });

    // Rename the first with the keyboard (a title with spaces).
    let rename = format!("#sessions li[data-session=\"{first}\"] .rename");
    b.js(
        "document.querySelector(arguments[0]).focus();",
        json!([rename]),
    );
    b.keys("\u{E007}");
    b.wait_for("the rename dialog", |b| {
        (b.count("#rename-dialog[open]") > 0).then_some(())
    });
    assert_eq!(b.focused(), "rename-input");
    b.js(
        "document.querySelector('#rename-input').value = '';",
        json!([]),
    );
    b.type_into("#rename-input", "Contract review 2024\u{E007}");
    b.wait_text(
        &format!("#sessions li[data-session=\"{first}\"]"),
        "Contract review 2024",
    );
    assert!(
        b.focused().contains("rename") || b.focused().contains("Rename"),
        "focus returns to the rename button: {}",
        b.focused()
    );
    let s = server.get(&format!("/api/sessions/{first}"), None);
    assert_eq!(s["title"], "Contract review 2024", "{s}");

    // Switch back to it from the list; the URL names it.
    b.click(&format!("#sessions li[data-session=\"{first}\"] a"));
    b.wait_text("#chat-title", "Contract review 2024");
    b.wait_text(".msg.user", QUESTION);
    assert_eq!(
        b.js("return location.hash;", json!([])),
        json!(format!("#/c/{first}"))
    );

    // Settings and the theme persist in this browser.
    b.click("#tab-settings");
    b.js(
        "const i = document.querySelector('#max-llm-calls'); i.value = ''; i.focus();",
        json!([]),
    );
    b.type_into("#max-llm-calls", "7");
    b.click("#theme-toggle"); // system → light
    b.click("#theme-toggle"); // light → dark

    // A reload opens the same chat with its history, sources and settings.
    b.goto(&format!("{}/#/c/{first}", server.url));
    b.wait_text(".msg.answer .md", "4721");
    b.wait_for("the answer's verified marker after reload", |b| {
        (b.count(".msg.answer .cite[data-status=\"verified\"]") > 0).then_some(())
    });
    assert_eq!(b.text("#chat-title"), "Contract review 2024");
    assert_eq!(
        b.js(
            "return document.querySelector('#max-llm-calls').value;",
            json!([])
        ),
        "7"
    );
    assert_eq!(
        b.js("return document.documentElement.dataset.theme;", json!([])),
        "dark"
    );
    b.screenshot("chat-after-reload-dark-1440x900");

    // The answer's steps reopen; so does a past run from the Runs tab.
    b.click(".msg.answer .steps-btn");
    b.wait_text("#steps", "root agent");
    b.click("#tab-runs");
    b.wait_for("two runs", |b| {
        (b.count("#runs li[data-run]") == 2).then_some(())
    });
    b.click("#runs li[data-run]:last-child a");
    b.wait_text("#chat-title", "Run: ");
    b.wait_text("#steps", "re.findall");
    assert!(b.text("#messages").contains(QUESTION));

    // Delete the other chat: a dialog asks first (focus on Cancel).
    b.click("#tab-chats");
    let other = b
        .js("return Array.from(document.querySelectorAll('#sessions li[data-session]')).map(l => l.dataset.session).find(id => id !== arguments[0]);", json!([first]))
        .as_str()
        .expect("the other chat")
        .to_string();
    b.click(&format!("#sessions li[data-session=\"{other}\"] .delete"));
    b.wait_for("the delete dialog", |b| {
        (b.count("#confirm-dialog[open]") > 0).then_some(())
    });
    assert_eq!(b.focused(), "confirm-no");
    b.click("#confirm-yes");
    b.wait_for("one chat left", |b| {
        (b.count("#sessions li[data-session]") == 1).then_some(())
    });
    let sessions = server.get("/api/sessions", None);
    assert_eq!(
        sessions["sessions"].as_array().map(Vec::len),
        Some(1),
        "{sessions}"
    );
}

/// An answer computed from a scan shows the set it counted, counted again,
/// and opens its passages.
#[test]
fn counted_sets_are_shown_and_their_passages_open() {
    browser_or_skip!(b);
    let count = Script::new()
        .on(common::judge(), judge_reply(&[Verdict::Entailed; 4]))
        .on(
            root(),
            Reply::text(
                "```repl\nn = grep_count('secret code')\nFINAL(f'{n} lines mention a secret code.')\n```",
            ),
        );
    let setup = serve(count, &[]);
    b.viewport(1440, 900);
    open(b, &setup.server, "/#/");
    ask(b, "How many lines mention a secret code?");
    b.wait_text(".msg.answer", "2 lines mention a secret code.");
    let counted = b.wait_for("the counted sets", |b| {
        let t = b.text(".msg.answer .counted");
        (!t.is_empty()).then_some(t)
    });
    assert!(
        counted.contains("grep(\"secret code\"): 2 lines in 2 documents · counted again: same · the answer states this count"),
        "{counted}"
    );
    b.click(".msg.answer .counted-chunks button");
    b.wait_text("#source-text", "secret code");
    assert!(
        b.text("#source-status").contains("counted"),
        "{}",
        b.text("#source-status")
    );
    b.screenshot("counted-1440x900");
}

#[test]
fn budget_exhausted_is_named() {
    browser_or_skip!(b);
    // The first model call fails once (500) and is retried.
    let endless = Script::new()
        .on_sequence(root(), [Reply::fault(Fault::ServerError)])
        .on(
            root(),
            Reply::text("Still looking.\n```repl\nprint('looking')\n```"),
        );
    let setup = serve(endless, &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    open(b, server, "/#/");
    b.click("#tab-settings");
    b.js(
        "const i = document.querySelector('#max-llm-calls'); i.value = ''; i.focus();",
        json!([]),
    );
    b.type_into("#max-llm-calls", "2");
    ask(b, QUESTION);
    let head = b.wait_for("the budget headline", |b| {
        let t = b.text(".msg.answer .partial-head, .msg.error .err-head");
        (!t.is_empty()).then_some(t)
    });
    assert!(head.starts_with("Budget exhausted"), "{head}");
    // The retry shows in the steps.
    b.wait_text("#steps", "reply after 2 attempts");
    b.screenshot("budget-1440x900");
}

#[test]
fn the_sandbox_setting_picks_the_python_that_runs_the_code() {
    browser_or_skip!(b);
    // The model's cell prints the platform: monty names itself, CPython says linux.
    let script = Script::new()
        .on(
            root().and(Matcher::any_contains("platform=monty")),
            "FINAL(ran on monty [[doc:1 \"The secret code is 4721\"]])",
        )
        .on(
            root().and(Matcher::any_contains("platform=linux")),
            "FINAL(ran on cpython [[doc:1 \"The secret code is 4721\"]])",
        )
        .on(
            root(),
            "```repl\nimport sys\nprint('platform=' + sys.platform)\n```",
        );
    let setup = serve(script, &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    open(b, server, "/#/");
    b.click("#tab-settings");
    assert_eq!(
        b.js(
            "return document.querySelector('#sandbox').value;",
            json!([])
        ),
        "monty"
    );
    ask(b, "Which Python?");
    b.wait_text(".msg.answer .md", "ran on monty");
    // CPython is listed; where its isolation cannot be set up it is disabled
    // with the reason (CI requires it to run).
    let available = rlm_sandbox::testing::cpython_available();
    let disabled = js_bool(
        b,
        "return document.querySelector('#sandbox option[value=cpython]').disabled;",
    );
    assert_eq!(disabled, !available);
    if !available {
        return;
    }
    b.js(
        "const s = document.querySelector('#sandbox'); s.value = 'cpython'; s.dispatchEvent(new Event('change'));",
        json!([]),
    );
    assert!(js_bool(
        b,
        "return document.querySelector('#sandbox').classList.contains('changed');"
    ));
    ask(b, "Which Python now?");
    b.wait_for("the answer from CPython", |b| {
        b.text(".msg.answer:last-of-type .md")
            .contains("ran on cpython")
            .then_some(())
    });
}

#[test]
fn model_down_names_it_keeps_the_question_and_retry_answers() {
    browser_or_skip!(b);
    let dir = store();
    let model = ScriptedServer::spawn(needle_script(1));
    let gate = Gate::closed(&model);
    let mut server = Server::start(dir.path(), &gate.base_url(), &["--max-retries", "0"]);
    b.viewport(768, 1024);
    b.color_scheme("light");
    open(b, &server, "/#/");
    b.wait_for("the health indicator to say the model is down", |b| {
        (b.count("#health[data-state=\"down\"]") > 0).then_some(())
    });

    ask(b, QUESTION);
    let head = b.wait_text(".msg.error .err-head", "Model unreachable at");
    assert!(head.contains(&format!("127.0.0.1:{}", gate.port)), "{head}");
    assert!(
        b.count(".msg.error details[open]") == 0,
        "details on demand"
    );
    assert!(b.text(".msg.error details pre").contains("cannot reach"));
    // The failed run's steps do not end in a green final answer.
    let steps = b.text("#steps");
    assert!(
        b.count("#steps .ev.final") > 0 && b.count("#steps .ev.final.ok") == 0,
        "{steps}"
    );
    assert_eq!(
        b.js(
            "return document.querySelector('#question').value;",
            json!([])
        ),
        QUESTION,
        "the question stays in the box"
    );
    b.screenshot("model-down-768x1024");

    // The model comes up: Retry answers, in place of the error.
    gate.open();
    b.click(".msg.error .retry");
    b.wait_text(".msg.answer .md", "4721");
    assert_eq!(b.count(".msg.error"), 0);
    assert_eq!(b.count(".msg.user"), 1);

    // The server goes away: the headline says so.
    server.kill();
    ask(b, "Is anyone there?");
    b.wait_text(".msg.error .err-head", "Server unreachable");
    assert!(b.visible(".msg.error .retry"));
    // The indicator says what the page saw, at once (its next check is 30 s away).
    assert_eq!(
        b.js("return document.querySelector('#health').dataset.state + ' ' + document.querySelector('#health-text').textContent;", json!([])),
        "down server gone"
    );
}

#[test]
fn stop_cancels_a_running_question_on_a_phone() {
    browser_or_skip!(b);
    let slow = Script::new().on(
        root(),
        Reply::text("FINAL(too late)").with_latency_ms(30_000),
    );
    let setup = serve(slow, &["--max-runs", "1"]);
    let server = &setup.server;
    b.viewport(390, 844);
    open(b, server, "/#/");

    // Another client holds the only run slot: the page says the server is busy.
    let (status, held) = ui::server::api(
        server.port,
        "POST",
        "/api/runs",
        Some(&json!({"question": "hold the slot"})),
    );
    assert_eq!(status, 202, "{held}");
    ask(b, QUESTION);
    b.wait_text(".msg.error .err-head", "Server busy");
    let held = held["id"].as_str().expect("a run id");
    let (status, _) = ui::server::api(server.port, "DELETE", &format!("/api/runs/{held}"), None);
    assert_eq!(status, 202);
    b.wait_for("the slot to be free", |_| {
        let runs = server.get("/api/runs", None);
        (runs["runs"][0]["status"] == "cancelled").then_some(())
    });

    // Retry starts it; Stop cancels it.
    b.click(".msg.error .retry");
    b.wait_for("the root agent's first request", |b| {
        b.text("#steps").contains("asks the model").then_some(())
    });
    assert!(b.visible("#stop"), "Stop is shown while the run goes");
    assert!(
        js_bool(b, "return document.querySelector('#send').disabled;"),
        "Ask waits for the run"
    );
    b.screenshot("running-390x844");
    b.click("#stop");
    let card = b.wait_for("the stopped run", |b| {
        let t = b.text(".msg.answer, .msg.error");
        (!t.is_empty()).then_some(t)
    });
    assert!(
        card.contains("Stopped") || card.contains("Partial") || card.contains("cancel"),
        "{card}"
    );
    let runs = server.get("/api/runs", None);
    assert_eq!(runs["runs"][0]["status"], "cancelled", "{runs}");
    assert!(!js_bool(
        b,
        "return document.querySelector('#send').disabled;"
    ));
}

#[test]
fn token_prompt_asks_once_and_sends_the_bearer_token() {
    browser_or_skip!(b);
    let token = "s3cret-token-for-the-browser-test";
    let setup = serve(needle_script(1), &["--token", token]);
    let server = &setup.server;
    b.viewport(390, 844);
    b.goto(&format!("{}/#/", server.url));
    b.wait_for("the token prompt", |b| {
        (b.count("#token-dialog[open]") > 0).then_some(())
    });
    assert_eq!(b.focused(), "token-input");
    b.screenshot("token-prompt-390x844");

    b.type_into("#token-input", "wrong\u{E007}");
    b.wait_text("#token-error", "refused");
    b.js(
        "document.querySelector('#token-input').value = '';",
        json!([]),
    );
    b.type_into("#token-input", &format!("{token}\u{E007}"));
    b.wait_text("#store-info", "4 documents");
    assert_eq!(b.count("#token-dialog[open]"), 0);

    // Questions and their event streams carry the header.
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "4721");

    // Kept for this tab: a reload does not ask again.
    open(b, server, "/#/");
    b.wait_text("#store-info", "4 documents");
    assert_eq!(b.count("#token-dialog[open]"), 0, "asked once");
    b.js("sessionStorage.clear(); localStorage.clear();", json!([]));
}

#[test]
fn documents_are_searched_opened_and_uploaded_with_progress() {
    browser_or_skip!(b);
    let setup = serve(needle_script(0), &["--allow-upload"]);
    let server = &setup.server;
    b.viewport(1440, 900);
    open(b, server, "/#/");
    b.click("#tab-docs");
    b.wait_for("the four documents", |b| {
        (b.count("#documents li[data-doc]") == 4).then_some(())
    });
    assert!(b.text("#documents").contains("b_notes.txt"));

    b.type_into("#doc-search", "vault");
    b.wait_for("the search result", |b| {
        b.text("#documents-count").contains("match").then_some(())
    });
    assert!(
        b.text("#documents li[data-doc]").contains("c_vault.txt"),
        "{}",
        b.text("#documents")
    );
    b.click("#documents li[data-doc] .doc-open");
    b.wait_text("#doc-text", "The old vault had a secret code");
    assert!(
        b.text("#doc-meta").contains("passage"),
        "{}",
        b.text("#doc-meta")
    );
    b.keys("\u{E00C}");
    b.wait_for("the document dialog to close", |b| {
        (b.count("#doc-dialog[open]") == 0).then_some(())
    });

    // Upload a file: it is indexed with visible progress and listed.
    let file = setup.dir.path().join("e_harbor.txt");
    std::fs::write(&file, "The harbor opens at dawn.\n").expect("file written");
    b.click("#add-docs summary");
    b.type_into("#upload-files", &file.to_string_lossy());
    b.click("#upload-form button[type=submit]");
    let done = b.wait_text("#index-phase", "Indexed");
    assert!(done.contains("1 added"), "{done}");
    b.wait_text("#store-info", "5 documents");
    b.js("const s = document.querySelector('#doc-search'); s.value = 'harbor'; s.form.requestSubmit();", json!([]));
    b.wait_text("#documents li[data-doc]", "e_harbor.txt");
    b.screenshot("documents-1440x900");
}

#[test]
fn axe_finds_no_serious_or_critical_violation_and_focus_is_kept() {
    browser_or_skip!(b);
    let setup = serve(needle_script(1), &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    open(b, server, "/#/");
    ask(b, QUESTION);
    b.wait_text(".msg.answer .md", "4721");
    let chat = b
        .js("return location.hash;", json!([]))
        .as_str()
        .unwrap_or_default()
        .to_string();

    let mut failures = Vec::new();
    for (w, h) in SIZES {
        for scheme in ["light", "dark"] {
            b.viewport(w, h);
            b.color_scheme(scheme);
            open(b, server, &format!("/{chat}"));
            b.wait_el(".msg.answer .cite");
            failures.extend(axe(b, &format!("{w}x{h} {scheme}")));
        }
        // A drawer open, then a dialog open.
        if w < 800 {
            b.click("#open-left");
            b.wait_for("the sidebar drawer", |b| {
                b.visible("#left.open").then_some(())
            });
            b.wait_for("focus in the opened drawer", |b| {
                js_bool(b, "return !!document.activeElement.closest('#left');").then_some(())
            });
            failures.extend(axe(b, &format!("{w}x{h} sidebar drawer")));
            // Focus stays in the drawer; Escape returns it to its button.
            b.keys(&"\u{E004}".repeat(12));
            assert!(
                js_bool(b, "return !!document.activeElement.closest('#left');"),
                "focus left the drawer: {}",
                b.focused()
            );
            b.keys("\u{E00C}");
            assert_eq!(b.focused(), "open-left");
        }
        b.click(".msg.answer .cite");
        b.wait_el("#source-dialog[open] mark");
        failures.extend(axe(b, &format!("{w}x{h} source dialog")));
        b.keys(&"\u{E004}".repeat(8));
        assert!(
            js_bool(
                b,
                "return !!document.activeElement.closest('dialog[open]');"
            ),
            "focus left the dialog: {}",
            b.focused()
        );
        b.keys("\u{E00C}");
        assert!(
            b.focused().contains("cite"),
            "focus back on the marker: {}",
            b.focused()
        );
    }
    assert!(
        failures.is_empty(),
        "axe-core found serious or critical violations:\n{}",
        failures.join("\n")
    );
}

/// Runs axe-core on the page; the serious and critical violations, one line each.
pub(crate) fn axe(b: &Browser, label: &str) -> Vec<String> {
    if b.js("return typeof window.axe;", json!([])) != "object" {
        b.js(&format!("{}\nreturn true;", ui::AXE), json!([]));
    }
    let result = b.js_async(
        "axe.run(document, {resultTypes: ['violations']}).then(r => arguments[0](r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))).catch(e => arguments[0]([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));",
        json!([]),
    );
    let all = result.as_array().cloned().unwrap_or_default();
    let minor: Vec<String> = all
        .iter()
        .filter(|v| v["impact"] != "serious" && v["impact"] != "critical")
        .map(|v| v["id"].to_string())
        .collect();
    println!(
        "axe {label}: {} violations ({} minor/moderate: {})",
        all.len(),
        minor.len(),
        minor.join(", ")
    );
    all.iter()
        .filter(|v| v["impact"] == "serious" || v["impact"] == "critical")
        .map(|v| {
            format!(
                "{label}: {} ({}) {}: {}",
                v["id"], v["impact"], v["help"], v["nodes"]
            )
        })
        .collect()
}

#[test]
fn page_weight_and_first_paint_are_measured() {
    browser_or_skip!(b);
    let setup = serve(needle_script(0), &[]);
    let server = &setup.server;
    b.viewport(1440, 900);
    b.console_errors(); // what earlier tests logged
    let mut paints = Vec::new();
    let mut weight = Value::Null;
    for _ in 0..5 {
        b.cdp("Network.enable", json!({}));
        b.cdp("Network.clearBrowserCache", json!({}));
        b.cdp("Network.setCacheDisabled", json!({"cacheDisabled": true}));
        b.goto("about:blank"); // a new load each time, not a jump to the same URL
        open(b, server, "/#/");
        let m = b.js(
            "const nav = performance.getEntriesByType('navigation')[0];
             const res = performance.getEntriesByType('resource').filter(r => !r.name.includes('/api/'));
             const fcp = performance.getEntriesByName('first-contentful-paint')[0];
             const files = [nav, ...res].map(r => ({name: r.name.replace(location.origin, ''), transfer: r.transferSize, encoded: r.encodedBodySize, decoded: r.decodedBodySize}));
             return {fcp_ms: fcp ? fcp.startTime : null, dom_content_loaded_ms: nav.domContentLoadedEventEnd, files,
                     transfer: files.reduce((s, f) => s + f.transfer, 0), encoded: files.reduce((s, f) => s + f.encoded, 0), decoded: files.reduce((s, f) => s + f.decoded, 0)};",
            json!([]),
        );
        paints.push(m["fcp_ms"].as_f64().expect("a first contentful paint"));
        weight = m;
    }
    b.cdp("Network.setCacheDisabled", json!({"cacheDisabled": false}));
    paints.sort_by(f64::total_cmp);
    let report = json!({"first_contentful_paint_ms_median_of_5": paints[2], "first_contentful_paint_ms": paints, "last_load": weight});
    let path = ui::webdriver::screenshot_dir().join("page-weight.json");
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json")).expect("written");
    println!("ui-perf {report}");
    // Every file of the page arrived whole (the numbers are in the report).
    let files = weight["files"].as_array().cloned().unwrap_or_default();
    assert!(
        files.len() >= 6,
        "the page and its scripts and styles: {weight}"
    );
    assert!(
        files.iter().all(|f| f["decoded"].as_u64().unwrap_or(0) > 0),
        "{weight}"
    );
    // No console error in five loads (a script or style the CSP refused would
    // be one); the log is read for real: a probe shows up in it.
    assert_eq!(b.console_errors(), Vec::<String>::new());
    b.js("console.error('probe from the test');", json!([]));
    let probe = b.console_errors();
    assert!(
        probe.iter().any(|m| m.contains("probe from the test")),
        "{probe:?}"
    );
}
