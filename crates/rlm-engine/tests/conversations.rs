//! Whole RLM conversations against the scripted model server (real HTTP),
//! real sandbox workers and a real store on disk.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use rlm_engine::citations::CitationStatus;
use rlm_engine::{AskRequest, BudgetConfig, CitationPolicy, EngineConfig, TraceEvent};
use rlm_llm::testing::{Fault, Reply, Script, ScriptedServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn needle_found_by_regex_then_final() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl("import re\nm = re.findall(r\"secret code is (\\d+)\", context)\nprint(m)"),
                    "The code is in document 1.\nFINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])".to_string(),
                ],
            )
            .on(judge(), verdicts(&["entailed"])),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(answer.answer.contains("4721"), "{}", answer.answer);
    assert!(!answer.partial);
    let v = answer.verification.as_ref().unwrap();
    assert!(v.all_valid, "{v:?}");
    assert_eq!(answer.citations.len(), 1);
    assert_eq!(answer.citations[0].status, CitationStatus::Verified);
    assert!(answer.citations[0].chunk_id.is_some());
    assert_eq!(
        answer.citations[0]
            .path
            .as_deref()
            .map(|p| p.ends_with("b_notes.txt")),
        Some(true)
    );
    // The root's two turns; the claim is its passage word for word, so the
    // judge is not asked.
    assert_eq!(answer.usage.calls, 2);
    assert_eq!(answer.usage.by_depth.len(), 1);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(judge_calls(&server), 0);
    assert_eq!(
        answer.grounded.as_ref().map(|g| g.supported),
        Some(1),
        "{:?}",
        answer.claims
    );
    // The system prompt carries the document index (it depends on the
    // corpus only, so every question over the corpus shares it as a prefix).
    // The instructions are one system message, the same for every store;
    // the corpus index is a second one.
    let instructions = &reqs[0].messages[0].content;
    assert!(!instructions.contains("3 documents"), "{instructions}");
    let system = &reqs[0].messages[1].content;
    assert!(system.contains("3 documents"), "{system}");
    assert!(
        system.contains("[DOCUMENT 1: docs/b_notes.txt]"),
        "{system}"
    );
    let first_user = reqs[0].first_user();
    assert!(!first_user.contains("3 documents"), "{first_user}");
    // ... and the lines of the best full-text hits for the question.
    assert!(
        first_user.contains("Full-text search for the question found"),
        "{first_user}"
    );
    let lead = first_user
        .lines()
        .position(|l| l.contains("in [DOCUMENT 1: docs/b_notes.txt]"))
        .expect("the needle's document is among the hits");
    assert!(
        first_user.lines().nth(lead + 1).unwrap().trim()
            == "The secret code is 4721. Keep it safe.",
        "{first_user}"
    );
    // The regex output came back to the model.
    assert!(
        reqs[1].last_message().contains("['4721']"),
        "{}",
        reqs[1].last_message()
    );
    // Prompt caching: the shared prefix is byte-identical across turns.
    assert_eq!(reqs[0].messages[..2], reqs[1].messages[..2]);

    let types = event_types(&trace);
    assert_eq!(types.first().map(String::as_str), Some("run_started"));
    assert_eq!(types.last().map(String::as_str), Some("run_finished"));
    for t in [
        "llm_request",
        "llm_response",
        "cell",
        "cell_output",
        "final",
        "verification",
    ] {
        assert!(types.iter().any(|x| x == t), "missing {t} in {types:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batched_fan_out_overlaps_in_time() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl("parts = [d['text'] for d in documents]\nanswers = llm_query_batched([f'Find the code in: {p}' for p in parts])\nprint(answers)"),
                    "FINAL(The code is 4721.)".to_string(),
                ],
            )
            .on(leaf(), Reply::text("leaf answer").with_latency_ms(400)),
    )
    .await;
    let engine = engine(&server, config()).await;
    let t0 = Instant::now();
    let (answer, trace) = ask(&engine, &ts, "What is the code?").await;
    assert_eq!(answer.answer, "The code is 4721.");
    assert!(!answer.partial);
    let leaves: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.system().is_empty())
        .collect();
    assert_eq!(leaves.len(), 3);
    // Overlap: every leaf request arrived before the first one was answered.
    let first_answer = leaves.iter().filter_map(|r| r.answered_at).min().unwrap();
    assert!(
        leaves.iter().all(|r| r.received_at < first_answer),
        "sub-calls ran one after another"
    );
    assert!(server.peak_concurrency() >= 3);
    assert!(t0.elapsed() < Duration::from_secs(30));
    let subcalls = trace
        .iter()
        .filter(|r| matches!(r.event, TraceEvent::SubcallStart { .. }))
        .count();
    assert_eq!(subcalls, 3);
    assert_eq!(answer.usage.by_depth[1].calls, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn asyncio_gather_fan_out_overlaps_in_time() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl("import asyncio\nresults = await asyncio.gather(*[llm_query(f'Summarize: {d[\"text\"]}') for d in documents])\nprint(len(results), results[0])"),
                    "FINAL(gathered)".to_string(),
                ],
            )
            .on(leaf(), Reply::text("summary").with_latency_ms(400)),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _trace) = ask(&engine, &ts, "Summarize.").await;
    assert_eq!(answer.answer, "gathered");
    let reqs = server.requests();
    assert!(
        reqs.last()
            .unwrap()
            .messages
            .iter()
            .any(|m| m.content.contains("3 summary"))
    );
    let leaves: Vec<_> = reqs.into_iter().filter(|r| r.system().is_empty()).collect();
    assert_eq!(leaves.len(), 3);
    let first_answer = leaves.iter().filter_map(|r| r.answered_at).min().unwrap();
    assert!(
        leaves.iter().all(|r| r.received_at < first_answer),
        "gathered calls did not overlap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn final_in_the_fan_out_cell_is_deferred() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl(
                        "rs = llm_query_batched(['a', 'b'])\nFINAL('raw dump: ' + ' | '.join(rs))",
                    ),
                    "Both parts agree.\nFINAL(Synthesized: both say X.)".to_string(),
                ],
            )
            .on(leaf(), "X"),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What do they say?").await;
    assert_eq!(answer.answer, "Synthesized: both say X.");
    assert!(!answer.partial);
    let reqs = server.requests();
    let roots: Vec<_> = reqs.iter().filter(|r| !r.system().is_empty()).collect();
    assert_eq!(roots.len(), 2, "the root got a second turn");
    assert!(
        roots[1].last_message().contains("not accepted yet"),
        "{}",
        roots[1].last_message()
    );
    assert!(
        roots[1].last_message().contains("X | X"),
        "sub-results are shown"
    );
    let finals: Vec<bool> = trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Final {
                deferred, agent, ..
            } if agent == "0" => Some(*deferred),
            _ => None,
        })
        .collect();
    assert_eq!(finals, [true, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn llm_query_model_argument_names_the_model() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(rlm_llm::testing::Matcher::model("special-model"), "special")
            .on_sequence(
                root(),
                [
                    repl("print(llm_query('a', model='special-model'))"),
                    "FINAL(ok)".to_string(),
                ],
            ),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "ok");
    assert!(server.requests().iter().any(|r| r.model == "special-model"));
    assert!(
        server
            .requests()
            .last()
            .unwrap()
            .last_message()
            .contains("special")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deferral_can_be_switched_off() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(root(), [repl("r = llm_query('a')\nFINAL('first: ' + r)")])
            .on(leaf(), "X"),
    )
    .await;
    let engine = engine(
        &server,
        EngineConfig {
            defer_final_after_fanout: false,
            ..config()
        },
    )
    .await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "first: X");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn final_var_of_a_missing_variable_is_an_error_fed_back() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            "FINAL_VAR(result)".to_string(),
            repl("result = 'the code is 4721'\nprint(result)"),
            "FINAL_VAR(result)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "the code is 4721");
    let reqs = server.requests();
    assert!(
        reqs[1].last_message().contains("does not exist"),
        "{}",
        reqs[1].last_message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_fence_runs_and_final_in_code_commits() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        ["Let me look.\n```python\nn = len(documents)\nFINAL(f'There are {n} documents')\n```".to_string()]
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "How many documents?").await;
    assert_eq!(answer.answer, "There are 3 documents");
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::Final { via, .. } if via == "code"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answer_dict_convention_commits() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [repl("answer = {'content': 'dict answer', 'ready': True}")],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "dict answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_raising_cell_is_fed_back_and_the_run_continues() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new().on_sequence(root(), [repl("x = 1 / 0"), "FINAL(recovered)".to_string()]),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "recovered");
    let reqs = server.requests();
    assert!(
        reqs[1].last_message().contains("ZeroDivisionError"),
        "{}",
        reqs[1].last_message()
    );
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::CellOutput { error: Some(_), .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reply_without_code_gets_a_nudge() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            "I think I should look at the documents.".to_string(),
            "FINAL(ok)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "ok");
    assert!(
        server.requests()[1]
            .last_message()
            .contains("no ```repl block and no FINAL(...)")
    );
}

/// What Qwen2.5-Coder-1.5B did: the answer in prose, then an apology to every
/// nudge. The third reply without code ends the loop with a last turn that
/// shows the model its prose answer, instead of burning every turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prose_answer_then_apologies_gets_a_last_turn_showing_it() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            "The night-shift supervisor's parking permit number is 58213.".to_string(),
            "I apologize, but I didn't receive any code blocks.".to_string(),
            "I apologize, but I didn't receive any code blocks.".to_string(),
            "FINAL(The permit number is 58213.)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the permit number?").await;
    assert_eq!(answer.answer, "The permit number is 58213.");
    assert!(!answer.partial);
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        4,
        "three replies without code, then the last turn"
    );
    let last = reqs[3].last_message();
    assert!(last.contains("this is your last turn"), "{last}");
    assert!(
        last.contains("The night-shift supervisor's parking permit number is 58213."),
        "the first prose reply is shown: {last}"
    );
}

/// The answer in plain words right after a search printed it (what
/// Qwen2.5-Coder-1.5B does): a statement backed by a chunk the agent was
/// shown, with a term the question lacks, is committed at once instead of
/// being nudged three times for FINAL(...). A plan that mentions the same
/// fact, or a copy of the search output that printed it, is nudged as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prose_statement_of_a_fact_seen_is_the_answer() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl("print(search('secret code'))"),
                    "The secret code in the meeting notes is 4721.".to_string(),
                ],
            )
            .on(judge(), verdicts(&["entailed"])),
    )
    .await;
    let e = engine(&server, config()).await;
    let (answer, trace) = ask(&e, &ts, "What is the secret code?").await;
    assert_eq!(
        answer.answer,
        "The secret code in the meeting notes is 4721."
    );
    assert!(!answer.partial, "{:?}", answer.partial_reason);
    // Two turns of the root, then the judge.
    assert_eq!(server.requests().len(), 3);
    assert_eq!(judge_calls(&server), 1);
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::Final { via, .. } if via == "prose_fact_seen"))
    );
    assert!(
        answer.grounded.as_ref().is_some_and(|g| g.supported == 1),
        "{:?}",
        answer.claims
    );

    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("print(search('secret code'))"),
            "I will check whether the secret code 4721 is still current.".to_string(),
            "Full-text search for 'secret code' found: [DOCUMENT 1: b_notes.txt] The secret code is 4721."
                .to_string(),
            "FINAL(The secret code is 4721.)".to_string(),
        ],
    ))
    .await;
    let e = engine(&server, config()).await;
    let (answer, trace) = ask(&e, &ts, "What is the secret code?").await;
    assert_eq!(answer.answer, "The secret code is 4721.");
    // The claim is its passage word for word: entailed, no judge call.
    assert_eq!(judge_calls(&server), 0);
    assert_eq!(
        server.requests().len() - judge_calls(&server),
        4,
        "the plan and the copied output were nudged, then the last turn"
    );
    assert!(
        !trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::Final { via, .. } if via == "prose_fact_seen"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn code_between_prose_replies_resets_the_count() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            "Let me think.".to_string(),
            "I will look first.".to_string(),
            repl("print(len(documents))"),
            "Still thinking.".to_string(),
            "Almost there.".to_string(),
            "FINAL(done)".to_string(),
        ],
    ))
    .await;
    let cfg = EngineConfig {
        max_replies_without_code: 3,
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "done");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 6);
    assert!(
        reqs.iter()
            .all(|r| !r.last_message().contains("your last turn")),
        "never more than two replies without code in a row"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plain_text_in_the_last_turn_is_not_committed_the_extraction_call_answers() {
    let ts = needle_store();
    let doc = rlm_corpus::document_id("docs/b_notes.txt");
    let extracted = serde_json::json!({"thought": "", "step": {"answer": [{
        "text": "The secret code is 4721.",
        "source": {"ref": format!("chunk:{}", rlm_corpus::chunk_id(&doc, 0)), "quote": "The secret code is 4721"}
    }]}})
    .to_string();
    let server = ScriptedServer::start(Script::new().on(synthesis(), extracted).on_sequence(
        root(),
        [
            "The code is 4471.".to_string(),
            "Sorry.".to_string(),
            "The secret code is 4471.".to_string(),
        ],
    ))
    .await;
    let cfg = EngineConfig {
        max_replies_without_code: 2,
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _) = ask(&engine, &ts, "What is the code?").await;
    // The last prose reply (a wrong number here) is never the answer: the
    // extraction call over the passages the run saw gives it.
    assert!(
        answer.answer.starts_with("The secret code is 4721."),
        "{}",
        answer.answer
    );
    assert!(!answer.partial);
    assert_eq!(flow_requests(&server), 4);
}

/// What the last turn after a repeat says.
const LAST_AFTER_REPEAT: &str = "Your last turn repeated an earlier one";

/// The local model's other loop: a search that can never match (capitals
/// against a lower-cased text), printing nothing, re-sent after another
/// cell (A, B, A): hints on the silent output, and the repeat, though the
/// turn before it differed, gets the last turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_never_matching_search_gets_hints_then_its_repeat_a_last_turn() {
    let ts = needle_store();
    let cell = repl(
        "for d in documents:\n    if \"Secret Code\" in d[\"text\"].lower():\n        print(d[\"index\"])",
    );
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            format!("Let me search.\n{cell}"),
            repl("print(len(documents))"),
            format!("Searching again.\n{cell}"),
            "FINAL(gave up)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(answer.answer, "gave up");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4, "no turn asked after the repeat");
    let first = reqs[1].last_message();
    assert!(
        first.contains("(no output: the cell printed nothing"),
        "{first}"
    );
    assert!(
        first.contains("\"Secret Code\" has capital letters") && first.contains("\"secret code\""),
        "{first}"
    );
    for r in &reqs[1..3] {
        assert!(!r.last_message().contains(LAST_AFTER_REPEAT));
    }
    let last = reqs[3].last_message();
    assert!(last.contains(LAST_AFTER_REPEAT), "{last}");
}

/// Runs `turns` then a FINAL: asserts the FINAL came on the last turn, the
/// one request after the turns, which says that a turn repeated.
async fn ends_with_a_last_turn(turns: Vec<String>) {
    let ts = needle_store();
    let asked = turns.len();
    let mut replies = turns;
    replies.push("FINAL(asked at last)".to_string());
    let server = ScriptedServer::start(Script::new().on_sequence(root(), replies)).await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "asked at last");
    let reqs = server.requests();
    assert_eq!(reqs.len(), asked + 1, "no turn asked after the repeat");
    for r in &reqs[..asked] {
        assert!(!r.last_message().contains(LAST_AFTER_REPEAT));
    }
    let last = reqs[asked].last_message();
    assert!(last.contains(LAST_AFTER_REPEAT), "{last}");
}

/// The same reply again asks for what already ran: the last turn, the
/// repeat not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_reply_twice_ends_with_a_last_turn() {
    ends_with_a_last_turn(vec![repl("print('same')"); 2]).await;
}

/// Two cells cycled (A, B, A: each reply differs from the one before):
/// the turn that repeats an earlier one ends the loop with a last turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cycling_through_two_cells_ends_with_a_last_turn() {
    let (a, b) = (repl("print('a')"), repl("print('b')"));
    ends_with_a_last_turn(vec![a.clone(), b, a]).await;
}

/// The same code in differently worded replies (the embedded model's
/// thought changes, its search does not) is a repeat too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_code_in_other_words_ends_with_a_last_turn() {
    let cell = repl("print('same')");
    ends_with_a_last_turn(vec![format!("Search.\n{cell}"), format!("Again.\n{cell}")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_final_until_the_cap_then_answer_now_turn() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("print(1)"),
            repl("print(2)"),
            "FINAL(answer given when asked)".to_string(),
        ],
    ))
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_iterations: 2,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "answer given when asked");
    assert!(!answer.partial);
    assert!(
        server.requests()[2]
            .last_message()
            .contains("used all your turns")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_final_even_after_answer_now_gives_partial_synthesis() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), "Synthesized from what was found.")
            .on_sequence(
                root(),
                [
                    repl("found = 'code 4721'"),
                    repl("print(2)"),
                    repl("print(3)"),
                ],
            ),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_iterations: 2,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, trace) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "Synthesized from what was found.");
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("iteration cap of 2"),
        "{:?}",
        answer.partial_reason
    );
    // The synthesis saw the REPL variables.
    let synth = server
        .requests()
        .into_iter()
        .find(|r| r.last_message().contains("stopped before"))
        .unwrap();
    assert!(
        synth.last_message().contains("code 4721"),
        "{}",
        synth.last_message()
    );
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::BudgetExhausted { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn call_budget_exhausted_gives_partial_synthesis() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), "Partial answer from findings.")
            .on(leaf(), "leaf says hi")
            .on(root(), repl("add_finding('doc 1 has a code', '[[doc:1]]')\nrs = llm_query_batched(['a', 'b', 'c'])\nprint(rs)")),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_llm_calls: 4,
            root_reserved_calls: 1,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _trace) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "Partial answer from findings.");
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("LLM call budget exhausted"),
        "{:?}",
        answer.partial_reason
    );
    // Root 1 + 2 leaves (the 3rd hit the sub-agent limit of 3) + root 1 (reserve) + synthesis.
    let reqs = server.requests();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.system().is_empty() && !r.last_message().contains("stopped"))
            .count(),
        2
    );
    let second_root = reqs
        .iter()
        .filter(|r| !r.system().is_empty())
        .nth(1)
        .unwrap();
    assert!(
        second_root
            .last_message()
            .contains("[error: LLM call budget exhausted"),
        "{}",
        second_root.last_message()
    );
    let synth = reqs
        .iter()
        .find(|r| r.last_message().contains("stopped before"))
        .unwrap();
    assert!(
        synth.last_message().contains("doc 1 has a code"),
        "findings are in the material"
    );
    assert_eq!(
        answer.findings.len(),
        1,
        "the repeated second reply was not run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn token_budget_exhausted_gives_partial_synthesis() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(
                synthesis(),
                Reply::text("Synthesis under token cap.").with_usage(10, 5),
            )
            .on(
                root(),
                Reply::text(repl("print('x')")).with_usage(9_000, 500),
            ),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_total_tokens: 20_000,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert!(answer.partial);
    assert_eq!(answer.answer, "Synthesis under token cap.");
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("token budget"),
        "{:?}",
        answer.partial_reason
    );
    assert_eq!(answer.usage.input_tokens, 18_010);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consecutive_erroring_cells_stop_the_agent() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), "Could not compute.")
            .on_sequence(
                root(),
                [
                    repl("undefined_a"),
                    repl("undefined_b"),
                    repl("undefined_c"),
                ],
            ),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_consecutive_errors: 2,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("2 consecutive cells"),
        "{:?}",
        answer.partial_reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wall_clock_cap_gives_partial_synthesis() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), "Out of time answer.")
            .on(root(), Reply::text(repl("print(1)")).with_latency_ms(5_000)),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            wall_clock: Duration::from_millis(800),
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let t0 = Instant::now();
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert!(answer.partial);
    assert_eq!(answer.answer, "Out of time answer.");
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("wall-clock"),
        "{:?}",
        answer.partial_reason
    );
}

/// A run whose first cell is `first` and whose next turn and synthesis
/// both outlast its 1.5 s wall clock: what the engine answers itself.
async fn out_of_time(first: &str, question: &str) -> rlm_engine::Answer {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), Reply::text("too slow").with_latency_ms(30_000))
            .on_sequence(
                root(),
                [
                    Reply::text(repl(first)),
                    Reply::text(repl("print(1)")).with_latency_ms(30_000),
                ],
            ),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            wall_clock: Duration::from_millis(1500),
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    ask(&engine, &ts, question).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_synthesis_after_the_wall_clock_is_cut_short() {
    let t0 = Instant::now();
    let answer = out_of_time("add_finding('the code is 4721')", "q").await;
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t0.elapsed()
    );
    assert!(answer.partial);
    assert!(
        answer.answer.contains("the code is 4721"),
        "{}",
        answer.answer
    );
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("wall-clock")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_out_of_time_gives_its_account_in_the_questions_language() {
    let question = "Wie lautet der geheime Code, der in den Dokumenten genannt wird?";
    let answer = out_of_time(
        "add_finding('der Code lautet 4721')\nprint(tally('secret'))",
        question,
    )
    .await;
    assert!(answer.partial);
    // No model call is left to write it: the engine's own sentences are
    // German, the reason stays in partial_reason.
    assert!(
        answer.answer.starts_with(
            "Es wurde keine vollständige Antwort erreicht. Was bis zum Abbruch gesammelt wurde:"
        ),
        "{}",
        answer.answer
    );
    assert!(
        answer
            .answer
            .contains("Festgehaltene Ergebnisse:\n- der Code lautet 4721"),
        "{}",
        answer.answer
    );
    // What the code counted survives the stop.
    assert!(
        answer
            .answer
            .contains("Über alle Zeilen gezählt:\n- tally(\"secret\"): 2"),
        "{}",
        answer.answer
    );
    assert!(!answer.answer.contains("wall-clock"), "{}", answer.answer);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("wall-clock")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cost_cap_gives_partial_synthesis() {
    let ts = needle_store();
    // A new cell each turn (a repeat would end the loop before the cap).
    let turns =
        (1..=10).map(|i| Reply::text(repl(&format!("print({i})"))).with_usage(1_000_000, 0));
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), "Cheap answer.")
            .on_sequence(root(), turns),
    )
    .await;
    let mut llm_config = server.config(rlm_llm::ProviderKind::OpenAi);
    llm_config.prices = rlm_llm::PriceTable::with_overrides(
        [(
            "root-model".to_string(),
            rlm_llm::Price {
                input_per_mtok: 1.0,
                output_per_mtok: 1.0,
                cached_input_per_mtok: None,
            },
        )]
        .into_iter()
        .collect(),
    );
    let client = rlm_llm::LlmClient::from_config(llm_config).unwrap();
    let pool = rlm_sandbox::WorkerPool::new(rlm_sandbox::SandboxConfig::new(worker()), 1)
        .await
        .unwrap();
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_cost_usd: Some(2.5),
            max_total_tokens: 100_000_000,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = rlm_engine::Engine::new(std::sync::Arc::new(client), pool, cfg);
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("cost cap"),
        "{:?}",
        answer.partial_reason
    );
    let roots = server
        .requests()
        .iter()
        .filter(|r| !r.system().is_empty())
        .count();
    assert_eq!(roots, 3, "$1 per call, cap $2.50: the 4th call is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cost_cap_with_an_unpriced_model_stops_instead_of_spending_blindly() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), "Synthesized.")
            .on(root(), repl("print(1)")),
    )
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_cost_usd: Some(5.0),
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert!(answer.partial);
    let reason = answer.partial_reason.as_deref().unwrap();
    assert!(
        reason.contains("cost cap cannot be enforced") && reason.contains("has no known price"),
        "{reason}"
    );
    // One loop turn, then only the synthesis call every exhausted budget gets.
    assert_eq!(server.requests().len(), 2);
    assert_eq!(answer.answer, "Synthesized.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn depth_two_recursion_with_rlm_query() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                sub_agent(),
                [
                    repl("hit = llm_query('Which number is in: ' + context)\nprint(hit)"),
                    "FINAL(child found 4721)".to_string(),
                ],
            )
            .on(leaf(), "4721")
            .on_sequence(
                root(),
                [
                    repl("r = rlm_query('Find the code', documents[1]['text'])\nprint(r)"),
                    "FINAL(root says: code 4721)".to_string(),
                ],
            ),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the code?").await;
    assert_eq!(answer.answer, "root says: code 4721");
    let starts: Vec<(String, String, u32, String)> = trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::SubcallStart {
                agent,
                parent,
                depth,
                kind,
                ..
            } => Some((agent.clone(), parent.clone(), *depth, kind.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            (
                "0.0".to_string(),
                "0".to_string(),
                1,
                "rlm_query".to_string()
            ),
            ("0.0.0".into(), "0.0".into(), 2, "llm_query".into())
        ]
    );
    let child_first = server
        .requests()
        .into_iter()
        .find(|r| r.system().contains("You are a sub-agent"))
        .unwrap();
    assert!(child_first.messages[1].content.contains("Find the code"));
    assert!(
        child_first.messages[1].content.contains("secret code"),
        "the child's context is the text passed"
    );
    assert_eq!(answer.usage.by_depth.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rlm_query_at_max_depth_is_a_plain_llm_query() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on(leaf(), "plain").on_sequence(
        root(),
        [repl("print(rlm_query('q'))"), "FINAL(done)".to_string()],
    ))
    .await;
    let cfg = EngineConfig {
        budget: BudgetConfig {
            max_depth: 1,
            ..BudgetConfig::default()
        },
        ..config()
    };
    let engine = engine(&server, cfg).await;
    let (answer, trace) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "done");
    assert!(
        trace.iter().any(
            |r| matches!(&r.event, TraceEvent::SubcallStart { kind, .. } if kind == "llm_query")
        )
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.system().contains("You are a sub-agent"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limit_storm_mid_run_is_retried() {
    let ts = needle_store();
    let storm = || {
        Reply::fault(Fault::RateLimited {
            retry_after_secs: Some(0.02),
        })
    };
    let server = ScriptedServer::start(Script::new().replies([
        Reply::text(repl("print('turn one')")),
        storm(),
        storm(),
        storm(),
        Reply::text("FINAL(survived the storm)"),
    ]))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "survived the storm");
    assert!(!answer.partial);
    assert_eq!(server.request_count(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limit_storm_beyond_retries_gives_partial_answer_not_error() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .reply(Reply::text(repl(
                "add_finding('the code is 4721', '[[doc:1]]')",
            )))
            .otherwise(Reply::fault(Fault::RateLimited {
                retry_after_secs: Some(0.01),
            })),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "q").await;
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("model call failed"),
        "{:?}",
        answer.partial_reason
    );
    assert!(
        answer.answer.contains("the code is 4721"),
        "gathered material, not an error string: {}",
        answer.answer
    );
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::LlmError { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_that_never_answers_is_an_error_not_an_answer() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().otherwise(Reply::fault(Fault::RateLimited {
        retry_after_secs: Some(0.01),
    })))
    .await;
    let engine = engine(&server, config()).await;
    let e = engine
        .ask(ts.corpus.clone(), AskRequest::new("q"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, rlm_engine::EngineError::ModelUnavailable(_)),
        "{e:?}"
    );
    assert!(e.to_string().contains("model call failed"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn citation_verification_one_good_one_fabricated() {
    let ts = needle_store();
    let final_text = "FINAL(The code is 4721 [[doc:1 \"The secret code is 4721\"]] and lunch is free [[doc:2 \"lunch is always free on Fridays\"]].)";
    let server = ScriptedServer::start(Script::new().on(root(), final_text)).await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "q").await;
    let v = answer.verification.clone().unwrap();
    assert!(!v.all_valid);
    assert_eq!(v.failed, 1);
    assert_eq!(answer.citations[0].status, CitationStatus::Verified);
    assert_eq!(answer.citations[1].status, CitationStatus::QuoteNotFound);
    assert!(
        !answer.answer.contains("[unverified"),
        "best_effort leaves the answer alone"
    );
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::Verification { .. }))
    );

    let engine = common::engine(
        &server,
        EngineConfig {
            citation_policy: CitationPolicy::Strict,
            ..config()
        },
    )
    .await;
    let (strict, _) = ask(&engine, &ts, "q").await;
    assert!(
        strict
            .answer
            .contains("free on Fridays\"]] [unverified: quote not found in document 2"),
        "{}",
        strict.answer
    );
    assert_eq!(strict.answer.matches("[unverified").count(), 1);

    let engine = common::engine(
        &server,
        EngineConfig {
            verify_citations: false,
            ..config()
        },
    )
    .await;
    let (off, _) = ask(&engine, &ts, "q").await;
    assert!(off.verification.is_none());
    assert!(off.citations.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn search_and_findings_host_functions() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("hits = search('secret code', 3)\nprint(hits[0]['doc_index'], hits[0]['chunk_id'] != '', 'secret' in hits[0]['text'])\nadd_finding('code in doc 1', source='[[doc:1]]')"),
            "FINAL(ok)".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "q").await;
    assert_eq!(answer.answer, "ok");
    assert!(
        server.requests()[1].last_message().contains("1 True True"),
        "{}",
        server.requests()[1].last_message()
    );
    assert_eq!(answer.findings.len(), 1);
    assert_eq!(answer.findings[0].source.as_deref(), Some("[[doc:1]]"));
    assert!(
        trace
            .iter()
            .any(|r| matches!(&r.event, TraceEvent::Finding { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_history_and_briefing_reach_the_model() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on(root(), "FINAL(ok)")).await;
    let engine = engine(&server, config()).await;
    let mut req = AskRequest::new("second question");
    req.briefing = Some("You work for ACME legal.".into());
    req.session = Some(rlm_engine::SessionState {
        name: "s".into(),
        history: vec![rlm_engine::Turn {
            question: "first question?".into(),
            answer: "first answer".into(),
            partial: false,
            citations: vec![],
        }],
        findings: vec![rlm_engine::Finding {
            text: "an old finding".into(),
            source: None,
        }],
    });
    let (answer, _) = ask_with(&engine, &ts, req).await;
    assert_eq!(answer.answer, "ok");
    let r = &server.requests()[0];
    assert!(r.system().contains("You work for ACME legal."));
    assert!(
        r.first_user().contains("first question?"),
        "{}",
        r.first_user()
    );
    assert!(r.first_user().contains("an old finding"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn question_search_lead_can_be_switched_off() {
    let ts = needle_store();
    let server =
        ScriptedServer::start(Script::new().on_sequence(root(), ["FINAL(x)".to_string()])).await;
    let cfg = EngineConfig {
        inspect_search_k: 0,
        ..config()
    };
    let engine = engine(&server, cfg).await;
    ask(&engine, &ts, "What is the secret code?").await;
    let first = &server.requests()[0];
    assert!(first.system().contains("3 documents"));
    let first_user = first.first_user();
    assert!(!first_user.contains("Full-text search"), "{first_user}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_context_shape() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("print(type(context).__name__, len(context), 'secret' in context[1])"),
            "FINAL(ok)".to_string(),
        ],
    ))
    .await;
    let engine = engine(
        &server,
        EngineConfig {
            context_shape: rlm_engine::ContextShape::List,
            ..config()
        },
    )
    .await;
    let (_answer, _) = ask(&engine, &ts, "q").await;
    assert!(
        server.requests()[1].last_message().contains("list 3 True"),
        "{}",
        server.requests()[1].last_message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn empty_question_is_an_error() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new()).await;
    let engine = engine(&server, config()).await;
    let e = engine
        .ask(ts.corpus.clone(), AskRequest::new("  "))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("question is empty"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn questions_over_one_corpus_share_the_system_prompt() {
    // The document index is in the system prompt and the question is not:
    // a provider's prompt cache (or the embedded model's prefix state) then
    // covers the whole system prompt from the second question on.
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new().on_sequence(root(), ["FINAL(a)".to_string(), "FINAL(b)".to_string()]),
    )
    .await;
    let engine = engine(&server, config()).await;
    ask(&engine, &ts, "What is the secret code?").await;
    ask(&engine, &ts, "Which notes mention Lisbon?").await;
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].system(), reqs[1].system());
    assert!(reqs[0].system().contains("## The documents"));
    assert!(!reqs[0].system().contains("secret code?"));
    assert!(
        reqs[1]
            .first_user()
            .starts_with("Question: Which notes mention Lisbon?")
    );
}
