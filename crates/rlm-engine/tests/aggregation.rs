//! Aggregation: a question about every line of the corpus. The inspection
//! shows exhaustive counts, `grep()` returns every matching line (the true
//! total past its limit), and an answer computed from a scan carries the
//! counted set, counted again when the answer is checked.

use crate::common;

use common::*;
use rlm_llm::testing::{Reply, Script, ScriptedServer};

/// A ledger of `n` lines per file over `files` files; every third line a
/// refund of 10 EUR, the others purchases of 5 EUR.
fn ledger_store(files: usize, n: usize) -> TestStore {
    let texts: Vec<(String, String)> = (0..files)
        .map(|f| {
            let text: String = (0..n)
                .map(|i| {
                    let (kind, amount) = if i % 3 == 0 {
                        ("refund", 10)
                    } else {
                        ("purchase", 5)
                    };
                    format!("T{f}{i:04} | user u{} | {kind} | {amount} EUR\n", i % 7)
                })
                .collect();
            (format!("ledger-{f}.txt"), text)
        })
        .collect();
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    store(&files)
}

/// What the run's cells printed, in order.
fn printed<T: serde::Serialize>(trace: &[T]) -> String {
    trace
        .iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .filter(|v| v["type"] == "cell_output")
        .map(|v| v["stdout"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn text_config() -> rlm_engine::EngineConfig {
    let mut c = config();
    c.turn_format = rlm_engine::TurnFormat::Text;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_counting_with_grep_gets_the_exact_number_and_cites_the_set() {
    // 8 files of 150 lines: 8 * 50 = 400 refunds, far past what search() shows.
    let ts = ledger_store(8, 150);
    let code = "rows = grep(r\"\\| refund \\|\")\nprint(len(rows))\nFINAL(f\"There are {len(rows)} refund transactions.\")";
    let server = ScriptedServer::start(Script::new().on(root(), repl(code))).await;
    let engine = engine(&server, text_config()).await;
    let (answer, _) = ask(&engine, &ts, "How many refunds are in the ledger?").await;
    assert_eq!(answer.answer, "There are 400 refund transactions.");
    // The engine's inspection counted the question's words for the model,
    // an inflected one by its stem.
    let reqs = server.requests();
    let first_user = reqs[0].first_user();
    assert!(
        first_user.contains("refund (for refunds): 400, ledger: 0"),
        "{first_user}"
    );
    // The model's scan is a set the answer was computed from; so is the
    // engine's count of the word, since the answer states it (marked as
    // the engine's); the counts of the other words are not.
    assert_eq!(answer.counted.len(), 2, "{:?}", answer.counted);
    let engine_set = &answer.counted[0];
    assert_eq!(
        (
            engine_set.pattern.as_str(),
            engine_set.by_engine,
            engine_set.lines
        ),
        ("refund", true, 400)
    );
    let set = &answer.counted[1];
    assert!(!set.by_engine);
    assert_eq!(set.pattern, "\\| refund \\|");
    assert_eq!((set.lines, set.documents), (400, 8));
    assert_eq!(set.recounted, Some(true));
    assert!(set.count_in_answer);
    assert!(!set.chunk_ids.is_empty());
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(json["counted"][1]["lines"], 400);
    assert_eq!(json["counted"][1].get("by_engine"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grep_past_its_limit_says_the_true_total_and_sums_are_exact() {
    let ts = ledger_store(4, 300);
    // Turn 1: a cut grep; turn 2: sum the amounts of every purchase line.
    let script = Script::new()
        .respond_with(|r| {
            let last = r.last_message();
            if !r.system().contains("You are answering a question") {
                return None;
            }
            if last.contains("len() of its result is not the total") {
                let code = "total = 0\nfor r in grep(\"purchase\"):\n    total = total + int(re.search(r\"(\\d+) EUR\", r[\"text\"]).group(1))\nFINAL(f\"{total} EUR\")";
                return Some(Reply::text(repl(&format!("import re\n{code}"))));
            }
            Some(Reply::text(repl("print(len(grep(\"purchase\", limit=5)))")))
        });
    let server = ScriptedServer::start(script).await;
    let engine = engine(&server, text_config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the total of all purchases?").await;
    // 4 files * 200 purchases * 5 EUR.
    assert_eq!(answer.answer, "4000 EUR");
    let reqs = server.requests();
    let turn2 = &reqs[1].messages.last().unwrap().content;
    assert!(
        turn2.contains("grep(\"purchase\") matched 800 lines; it returned the first 5"),
        "{turn2}"
    );
    // One record per distinct scan: the limit does not make another set.
    assert_eq!(answer.counted.len(), 1, "{:?}", answer.counted);
    assert_eq!(answer.counted[0].lines, 800);
    assert!(!answer.counted[0].count_in_answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_patterns_and_documents_are_python_errors_the_model_can_act_on() {
    let ts = ledger_store(2, 10);
    let code = "for p in ['(?<=a)b', '']:\n    try:\n        grep(p)\n    except ValueError as e:\n        print('ValueError', e)\ntry:\n    grep('refund', doc=[7])\nexcept ValueError as e:\n    print('ValueError', e)\ntry:\n    grep(3)\nexcept TypeError as e:\n    print('TypeError', e)\ntry:\n    grep('refund', 5)\nexcept TypeError as e:\n    print('TypeError', e)\nprint(grep_count('refund', doc=1), len(chunks()), chunks(doc=0)[0]['chunk_id'])\nn = 0\nfor d in documents:\n    n = n + len(grep('refund', d['text']))\nprint('per document', n, grep_count('refund', 'a refund\\nREFUND\\nnone'), grep('x', 'ax\\nb')[0]['doc_index'])\nFINAL('done')";
    let server = ScriptedServer::start(Script::new().on(root(), repl(code))).await;
    let engine = engine(&server, text_config()).await;
    let (answer, trace) = ask(&engine, &ts, "Check the tools").await;
    assert_eq!(answer.answer, "done");
    let out = printed(&trace);
    assert!(
        out.contains("look-ahead, look-behind and back-references are not supported"),
        "{out}"
    );
    assert!(out.contains("the pattern is empty"), "{out}");
    assert!(
        out.contains("doc= takes document indexes from 0 to 1"),
        "{out}"
    );
    assert!(
        out.contains("TypeError grep(pattern) needs a pattern string"),
        "{out}"
    );
    assert!(
        out.contains("TypeError grep(pattern, N): grep() has no k"),
        "{out}"
    );
    let docs = ts.corpus.documents();
    let first = ts.corpus.store().chunks_of(&docs[0].id).unwrap()[0]
        .id
        .clone();
    let total_chunks: u32 = docs.iter().map(|d| d.chunk_count).sum();
    assert!(out.contains(&format!("4 {total_chunks} {first}")), "{out}");
    // As in re.findall(pattern, text): a document's text is that document
    // (a scan the answer may be computed from), another text is read alone.
    assert!(out.contains("per document 8 2 None"), "{out}");
    assert!(
        answer
            .counted
            .iter()
            .any(|c| c.documents_scanned == Some(vec![1]) && c.lines == 4),
        "{:?}",
        answer.counted
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tally_counts_adds_up_and_ranks_every_line_and_the_answer_cites_its_sum() {
    // 4 files of 300 lines: 100 refunds of 10 EUR and 200 purchases of 5
    // EUR each; users u0..u6 in turn.
    let ts = ledger_store(4, 300);
    let code = "t = tally(r'purchase', number=r'(\\d+) EUR')\nprint(t['lines'], t['sum'], t['max'])\ng = tally('refund', by=r'user (u\\d)')\nprint(g['top'], g['by'][0], g['groups'])\nb = tally(['u3', 'refund'])\nprint('both', b['lines'], b['documents'])\nFINAL(f\"The purchases add up to {t['sum']} EUR.\")";
    let server = ScriptedServer::start(Script::new().on(root(), repl(code))).await;
    let engine = engine(&server, text_config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the total of all purchases?").await;
    assert_eq!(answer.answer, "The purchases add up to 4000 EUR.");
    let out = printed(&trace);
    assert!(out.contains("800 4000 5"), "{out}");
    // Refunds are lines i = 0, 3, ..., 297 of each file, user i % 7: u0
    // (i = 0, 21, ...) has the most: 15 per file.
    assert!(out.contains("u0 ['u0', 60] 7"), "{out}");
    // u3 refunds: i % 3 == 0 and i % 7 == 3, i.e. i = 3, 24, ..., 297: 15 per file.
    assert!(out.contains("both 60 4"), "{out}");
    // The sum is a set the answer was computed from: counted and added up
    // again when the answer was checked, and stated by the answer.
    let set = answer
        .counted
        .iter()
        .find(|c| c.number.is_some())
        .expect("the tally with numbers is recorded");
    assert_eq!(set.call, "tally(\"purchase\", number=\"(\\\\d+) EUR\")");
    assert_eq!((set.lines, set.sum, set.documents), (800, Some(4000.0), 4));
    assert_eq!(set.recounted, Some(true));
    assert!(set.count_in_answer);
    let listed = answer.counted.iter().find(|c| !c.also.is_empty()).unwrap();
    assert_eq!(
        (listed.pattern.as_str(), listed.also.as_slice()),
        ("u3", &["refund".to_string()][..])
    );
    assert_eq!(listed.recounted, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tally_with_bad_arguments_is_a_python_error_that_says_what_to_write() {
    let ts = ledger_store(2, 10);
    let code = "for args in [[3], [[]], ['x', 5]]:\n    try:\n        tally(*args)\n    except TypeError as e:\n        print('TypeError', e)\ntry:\n    tally('refund', text='a refund')\nexcept TypeError as e:\n    print('TypeError', e)\ntry:\n    tally('a', 'b', 'c', 'd')\nexcept TypeError as e:\n    print('TypeError', e)\nprint('FILTER', tally('refund', by='u3'))\ntry:\n    tally('refund', number='(')\nexcept ValueError as e:\n    print('ValueError', e)\ntry:\n    tally('refund', ignore_case='yes')\nexcept TypeError as e:\n    print('TypeError', e)\nFINAL('done')";
    let server = ScriptedServer::start(Script::new().on(root(), repl(code))).await;
    let engine = engine(&server, text_config()).await;
    let (answer, trace) = ask(&engine, &ts, "Check tally").await;
    assert_eq!(answer.answer, "done");
    let out = printed(&trace);
    assert_eq!(
        out.matches("TypeError tally(pattern) needs the pattern")
            .count(),
        2,
        "{out}"
    );
    assert!(
        out.contains("TypeError tally(): number= must be a regular expression string"),
        "{out}"
    );
    assert!(
        out.contains("ValueError number=: the pattern \"(\" is not a regular expression"),
        "{out}"
    );
    assert!(
        out.contains("TypeError tally(): ignore_case must be True or False"),
        "{out}"
    );
    // A by= without a group that names no field is read as a filter (the
    // refund of u3 in each file), not refused.
    assert!(out.contains("FILTER {'documents': 2, 'lines': 2}"), "{out}");
    assert!(
        out.contains("TypeError tally() got an unexpected keyword argument 'text'"),
        "{out}"
    );
    assert!(
        out.contains(
            "TypeError tally() takes at most 3 positional arguments (pattern, number, by) but 4 were given"
        ),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_number_or_by_without_a_group_reads_the_value_next_to_its_match() {
    // 2 files of 21 lines: 14 refunds of 10 EUR, two for each of u0..u6.
    let ts = ledger_store(2, 21);
    let script = Script::new().on_sequence(
        root(),
        [
            repl("t = tally('refund', number='EUR', by='user')\nprint(t['lines'], t['sum'], t['groups'], t['by'][0])"),
            "FINAL(done)".to_string(),
        ],
    );
    let server = ScriptedServer::start(script).await;
    let engine = engine(&server, text_config()).await;
    let (answer, _) = ask(&engine, &ts, "Who has the most refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    let turn2 = reqs[1].last_message();
    // The amount written before "EUR", grouped by the value after "user".
    assert!(turn2.contains("14 140 7 ['u0', 2, 20]"), "{turn2}");
    assert!(
        turn2.contains("number=\"EUR\" has no group in parentheses, so each line's number is the one it holds or the one written next to it"),
        "{turn2}"
    );
    assert!(
        turn2.contains("by=\"user\" has no group in parentheses that captures a value, so it is read as a field's name"),
        "{turn2}"
    );
    // The set is recorded with its sum and counted again the same way.
    let set = answer.counted.iter().find(|c| c.number.is_some()).unwrap();
    assert_eq!((set.lines, set.sum), (14, Some(140.0)));
    assert_eq!(set.recounted, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_word_of_the_question_that_only_some_counted_lines_hold_is_named() {
    // 2 files of 21 lines: 42 lines say EUR, 14 of them are refunds.
    let ts = ledger_store(2, 21);
    let script = Script::new().on_sequence(
        root(),
        [
            repl("print(tally('EUR', number=r'(\\d+) EUR'))\nprint(tally('refund'))"),
            "FINAL(done)".to_string(),
        ],
    );
    let server = ScriptedServer::start(script).await;
    let engine = engine(&server, text_config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the total amount of all refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    let turn2 = reqs[1].last_message();
    // "refunds" is written "refund" by the lines: 14 of the 42 hold it.
    assert!(
        turn2.contains("Note: the question also says \"refunds\": 14 of these 42 lines hold \"refund\". If only the lines holding such a word count, add it to the patterns, e.g. tally([\"EUR\", \"refund\"], number=\"(\\\\d+) EUR\")."),
        "{turn2}"
    );
    // The question names no unit of the lines: no total of their amounts.
    assert!(!turn2.contains("added up they make"), "{turn2}");
    // Words no line holds ("total", "amount") are not named, and a tally
    // whose lines all hold the question's words gets no such note.
    assert!(!turn2.contains("\"total\""), "{turn2}");
    assert_eq!(
        turn2.matches("the question also says").count(),
        1,
        "{turn2}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_count_of_lines_holding_amounts_the_question_names_gets_their_total() {
    // 2 files of 21 lines: 14 refunds of 10 EUR among 42 lines.
    let ts = ledger_store(2, 21);
    let script = Script::new().on_sequence(
        root(),
        [
            repl("print(tally('refund', by=r'user (\\w+)'))"),
            repl("print(tally('user u1 transaction', by='transaction'))"),
            repl("print(tally('refund', by='u1'))"),
            repl("print(tally('refund'))"),
            repl("print(tally('EUR'))"),
            "FINAL(done)".to_string(),
        ],
    );
    let server = ScriptedServer::start(script).await;
    let engine = engine(&server, text_config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the total in EUR of all refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    // Counted without number=: the amounts before "EUR", which the
    // question names, are added up in a note with the call that does it.
    let turn2 = reqs[1].last_message();
    assert!(
        turn2.contains(r#"Note: each of these 14 lines has a number written before "EUR" (as in "T00000 | user u0 | refund | 10 EUR"); added up they make 140 (smallest 10, largest 10). `lines` counts the lines; to have the total in the result: tally("refund", by="user (\\w+)", number=r"(\d+(?:[.,]\d+)?)\s?EUR")."#),
        "{turn2}"
    );
    // A by= without a group over patterns that match no line is not taken
    // for a filter: the lines are what to fix, and the note counts each
    // word of the patterns.
    let turn3 = reqs[2].last_message();
    assert!(!turn3.contains("ValueError"), "{turn3}");
    assert!(turn3.contains("matched no line of the corpus"), "{turn3}");
    assert!(
        turn3.contains(r#"lines holding each word: "user": 42, "u1": 6, "transaction": 0, all of them but "transaction": 6 (tally(["user", "u1"]))."#),
        "{turn3}"
    );
    assert!(!turn3.contains("read as a field's name"), "{turn3}");
    // A by= without a group that no value follows on the counted lines is
    // a filter, the way people say it: the refunds of u1 (one per file).
    let turn4 = reqs[3].last_message();
    assert!(turn4.contains("{'documents': 2, 'lines': 2}"), "{turn4}");
    assert!(
        turn4.contains(r#"Note: by="u1" has no group in parentheses and no value follows it on these lines, so it was read as a filter: tally(["refund", "u1"]) counted the lines that also hold it."#),
        "{turn4}"
    );
    assert!(turn4.contains("added up they make 20 "), "{turn4}");
    // A plain count of the refunds gets their total too.
    let turn5 = reqs[4].last_message();
    assert!(turn5.contains("'lines': 14"), "{turn5}");
    assert!(turn5.contains("added up they make 140"), "{turn5}");
    // Every line says EUR; the question also says "refunds", which 14 of
    // them hold: the total is theirs.
    let turn6 = reqs[5].last_message();
    assert!(turn6.contains("'lines': 42"), "{turn6}");
    assert!(
        turn6.contains(r#"Note: each of the 14 of these lines that also hold ["refund"] has a number written before "EUR""#),
        "{turn6}"
    );
    assert!(turn6.contains(r#"added up they make 140 (smallest 10, largest 10). `lines` counts the lines; to have the total in the result: tally(["EUR", "refund"], number=r"#), "{turn6}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_field_the_question_names_groups_the_lines_or_is_offered() {
    // 2 files of 21 lines: 14 refunds, two for each of u0..u6.
    let ts = ledger_store(2, 21);
    let script = Script::new().on_sequence(
        root(),
        [
            repl("print(tally('refund', by='transaction'))"),
            "FINAL(done)".to_string(),
            repl("print(tally('refund', by='transaction'))"),
            "FINAL(done)".to_string(),
            repl("print(tally('refund'))"),
            "FINAL(done)".to_string(),
        ],
    );
    let server = ScriptedServer::start(script).await;
    let engine = engine(&server, text_config()).await;
    // The question names the field the lines write a value after: grouped
    // by it, and the note gives the call that does it.
    let (answer, _) = ask(&engine, &ts, "Which user made the most refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    let turn2 = reqs[1].last_message();
    assert!(turn2.contains("'lines': 14"), "{turn2}");
    assert!(turn2.contains("'groups': 7"), "{turn2}");
    assert!(turn2.contains("'top': 'u0'"), "{turn2}");
    assert!(
        turn2.contains(r#"Note: no counted line holds "transaction", so by="transaction" named no group; the lines write a value after "user", which the question names, so they were grouped by it: tally("refund", by="user")."#),
        "{turn2}"
    );
    // A question that names no field: the lines are counted without
    // groups (not filtered down to none), and the note lists the fields.
    let (answer, _) = ask(&engine, &ts, "Who made the most refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    let turn2 = reqs[reqs.len() - 1].last_message();
    assert!(turn2.contains("'lines': 14"), "{turn2}");
    assert!(!turn2.contains("'groups'"), "{turn2}");
    assert!(
        turn2.contains(r#"counted the lines without groups. The lines write a value after "user" (14 lines, 7 values): by= one of them groups by that value."#),
        "{turn2}"
    );
    // Counted without by= for a question that names a field of the lines:
    // the note gives the call that ranks it.
    let (answer, _) = ask(&engine, &ts, "Which user made the most refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    let turn2 = reqs[reqs.len() - 1].last_message();
    assert!(
        turn2.contains(r#"Note: the question names "user", and these lines write a value after it (7 values): tally("refund", by="user") counts the lines per value, most first."#),
        "{turn2}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tally_that_reads_nothing_says_how_to_write_its_patterns() {
    // 2 files of 600 lines: 1,200 transaction ids, past the 1,000 groups
    // `by` lists.
    let ts = ledger_store(2, 600);
    let script = Script::new().on_sequence(
        root(),
        [
            repl("print(tally('refund', number=r'(\\b\\b)', by='(transaction)'))\nprint(tally('nowhere'))\nprint(tally('u3 refund', number=r'(\\d+) EUR'))\nprint(tally('u3 nowhere'))\nt = tally('EUR', by=r'^(T\\d+)')\nprint('ids', t['groups'], len(t['by']))"),
            "FINAL(done)".to_string(),
        ],
    );
    let server = ScriptedServer::start(script).await;
    let engine = engine(&server, text_config()).await;
    let (answer, _) = ask(&engine, &ts, "How many refunds?").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    let turn2 = reqs[1].last_message();
    assert!(turn2.contains("'lines': 400"), "{turn2}");
    assert!(
        turn2
            .contains("matched 400 lines, and `lines` counts them; number= read no number on them"),
        "{turn2}"
    );
    assert!(turn2.contains("by= found no group on them"), "{turn2}");
    assert!(turn2.contains("ids 1200 1000"), "{turn2}");
    // Words side by side that no line holds: the lines holding each word
    // are counted, and the note says so with the call as it was read.
    assert!(
        turn2.contains("no line holds \"u3 refund\" as written (its words side by side), so this counted the lines that hold each of its words anywhere: tally([\"u3\", \"refund\"], number=\"(\\\\d+) EUR\")."),
        "{turn2}"
    );
    assert!(
        turn2.contains("'lines': 58, 'max': 10") && turn2.contains("'sum': 580"),
        "{turn2}"
    );
    assert!(
        turn2.contains("No line holds all of [\"u3\", \"nowhere\"] anywhere either; lines holding each word: \"u3\": 172, \"nowhere\": 0."),
        "{turn2}"
    );
    assert!(
        turn2.contains("found 1200 groups; its `by` lists the first 1000"),
        "{turn2}"
    );
    assert!(
        turn2.contains("Note: tally(\"nowhere\") matched no line of the corpus"),
        "{turn2}"
    );
    // A line of the corpus, to show how lines are written.
    let shown = turn2
        .split("A line of the corpus reads: \"")
        .nth(1)
        .unwrap_or_else(|| panic!("{turn2}"));
    assert!(
        shown.starts_with('T') && shown.split('"').next().unwrap().contains(" EUR"),
        "{turn2}"
    );
    assert!(
        turn2.contains("Count with words written like these."),
        "{turn2}"
    );
    // A lookup forced into a count: the search that would find the fact.
    assert!(
        turn2.contains(r#"rather than a count, search for it instead: for h in search("nowhere", 5): print(h['chunk_id'], h['snippet'])"#),
        "{turn2}"
    );
}
