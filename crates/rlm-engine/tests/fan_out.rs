//! A model fanning out over every chunk of a large corpus: 2,000
//! `llm_query_async` calls gathered in one cell run to the end (the pipes
//! between the parent and the worker never deadlock) within the run's limits.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use rlm_llm::testing::{Matcher, Script, ScriptedServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_two_thousand_way_gather_completes() {
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl(
                        "import asyncio\nresults = await asyncio.gather(*[llm_query_async(f\"item {i}\") for i in range(2000)])\nprint(len(results), results[0], results[-1])",
                    ),
                    "FINAL(done)".to_string(),
                ],
            )
            .on(Matcher::last_contains("item "), "ok".to_string()),
    )
    .await;
    let mut c = config();
    c.budget.max_llm_calls = 2_100;
    c.budget.max_total_tokens = 10_000_000;
    c.budget.wall_clock = Duration::from_secs(120);
    c.defer_final_after_fanout = false;
    let engine = engine(&server, c).await;
    let started = Instant::now();
    let (answer, _) = ask(&engine, &ts, "Summarize every item.").await;
    assert!(!answer.partial, "{answer:?}");
    assert_eq!(answer.answer, "done");
    assert_eq!(answer.usage.calls, 2_002);
    let reqs = server.requests();
    let second_turn = reqs
        .iter()
        .rfind(|r| r.messages.len() > 2 && r.last_message().contains("REPL output"))
        .expect("the root's second turn");
    assert!(
        second_turn.last_message().contains("2000 ok ok"),
        "{}",
        second_turn.last_message()
    );
    eprintln!("2,000-way gather: {:?}", started.elapsed());
}
