//! A whole question answered on the CPython sandbox back-end (the user's
//! Python under bubblewrap): the same host functions as on monty (search,
//! async sub-calls, findings, FINAL_VAR) and the standard library monty lacks;
//! the pipeline flow's inspection programs on the back-end the question
//! chose. Skipped (with the reason) where bubblewrap cannot run, unless
//! RLM_REQUIRE_CPYTHON_SANDBOX is set.

use crate::common;
use crate::pipeline_support;

use common::*;
use rlm_engine::TraceEvent;
use rlm_llm::testing::{Reply, Script, ScriptedServer};
use rlm_sandbox::testing::cpython_available;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_answered_in_cpython() {
    if !cpython_available() {
        return;
    }
    let ts = needle_store();
    let server = ScriptedServer::start(
        Script::new()
            .on_sequence(
                root(),
                [
                    repl(
                        "import asyncio, statistics, sys\n\
                         hits = search('secret code')\n\
                         mean = statistics.mean(len(d['text']) for d in documents)\n\
                         replies = await asyncio.gather(*[llm_query_async('code in: ' + d['text']) for d in documents])\n\
                         add_finding('the code is 4721', hits[0]['chunk_id'])\n\
                         answer_text = f'The secret code is {replies[1]} (Python {sys.version_info[0]})'\n\
                         print(hits[0]['path'], mean > 0, next(r for r in replies if r))",
                    ),
                    "FINAL_VAR(answer_text)".to_string(),
                ],
            )
            .on(leaf(), Reply::text("4721")),
    )
    .await;
    let mut config = config();
    config.sandbox = rlm_sandbox::SandboxBackend::CPython;
    let engine = engine(&server, config).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(answer.answer, "The secret code is 4721 (Python 3)");
    assert!(!answer.partial);
    let outputs: Vec<_> = trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::CellOutput { stdout, error, .. } => Some((stdout.clone(), error.clone())),
            _ => None,
        })
        .collect();
    assert!(
        outputs
            .iter()
            .any(|(out, err)| err.is_none() && out.contains("docs/b_notes.txt True 4721")),
        "{outputs:?}"
    );
    assert_eq!(answer.usage.by_depth[1].calls, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pipeline_programs_run_on_the_sandbox_the_question_chose() {
    use pipeline_support::{Model, fallbacks, has_fallback, pipeline_req, summary_of, texts};
    use rlm_engine::{FlowsConfig, Inspector};
    // Per-chunk programs written with a generator (`yield`), which monty
    // cannot run; the engine's warm pool is monty's in both runs.
    let ts = pipeline_support::resume_store();
    let question = "Which skills does Alexis have?";
    let model = Model {
        chunk: "generator",
        ..Model::default()
    };
    let server = pipeline_support::server(model.clone()).await;
    let monty = pipeline_support::config(FlowsConfig::default());
    let engine = pipeline_support::engine(&server, monty).await;
    let (_, trace) =
        pipeline_support::run(&engine, &ts, pipeline_req(question, Inspector::PerChunk)).await;
    assert!(
        has_fallback(&trace, "chunk_program", "the program raised"),
        "{:?}",
        fallbacks(&trace)
    );
    assert!(has_fallback(&trace, "empty_selection", "first 3"));
    if !cpython_available() {
        return;
    }
    let server = pipeline_support::server(model).await;
    let mut cpython = pipeline_support::config(FlowsConfig::default());
    cpython.sandbox = rlm_sandbox::SandboxBackend::CPython;
    let engine = pipeline_support::engine(&server, cpython).await;
    let (answer, trace) =
        pipeline_support::run(&engine, &ts, pipeline_req(question, Inspector::PerChunk)).await;
    assert!(fallbacks(&trace).is_empty(), "{:?}", fallbacks(&trace));
    let selected = texts(
        &ts,
        &summary_of(&answer, "alexis_resume.txt").selected_chunk_ids,
    );
    assert_eq!(selected.len(), 1, "{selected:?}");
    assert!(selected[0].starts_with("Skills: Python"), "{selected:?}");
}
