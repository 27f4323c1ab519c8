//! The `pipeline`, `rag` and `auto` flows against the scripted model server
//! (real HTTP), real sandbox workers and a real store on disk. The scripted
//! "model" reads each prompt and answers the way a model would for that
//! stage; each test switches one behavior to drive a guardrail or fallback.

use crate::common;
use crate::pipeline_support;

use std::sync::Arc;

use common::event_types;
use pipeline_support::*;
use rlm_engine::citations::CitationStatus;
use rlm_engine::{AskRequest, CitationPolicy, Flow, FlowsConfig, Inspector};
use rlm_llm::testing::{Reply, Script, ScriptedServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_chunk_selects_by_generated_programs() {
    let ts = resume_store();
    let server = server(Model::default()).await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Which skills does Alexis have?", Inspector::PerChunk),
    )
    .await;
    assert!(!answer.partial, "{:?}", answer.partial_reason);
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert!(alexis.total_chunks >= 6, "{alexis:?}");
    let selected = texts(&ts, &alexis.selected_chunk_ids);
    assert_eq!(selected.len(), 1, "{selected:?}");
    assert!(selected[0].starts_with("Skills: Python"));
    assert!(alexis.summary.contains("[[chunk:"), "{}", alexis.summary);
    assert!(
        answer.answer.contains("Skills: Python"),
        "{}",
        answer.answer
    );
    let v = answer.verification.as_ref().unwrap();
    assert!(v.all_valid && !v.citations.is_empty(), "{v:?}");
    assert!(
        answer
            .citations
            .iter()
            .all(|c| c.status == CitationStatus::Verified)
    );
    // Intent extracted once, frozen, in the trace; the pipeline's log lines.
    let intent_calls = server
        .requests()
        .iter()
        .filter(|r| r.last_message().contains("Extract the semantic intent"))
        .count();
    assert_eq!(intent_calls, 1);
    let report = answer.flow_report.as_ref().unwrap();
    assert_eq!(report.intent.as_ref().unwrap().entity, "Alexis");
    assert!(steps(&trace, "intent")[0].contains("Intent frozen"));
    assert!(
        steps(&trace, "retrieval")
            .iter()
            .any(|m| m == "High recall mode on (k = 200)")
    );
    assert!(steps(&trace, "expansion")[0].starts_with("Files expanded: "));
    assert!(report.retrieval.as_ref().unwrap().high_recall);
    // One program per chunk of every expanded file.
    let codegen = server
        .requests()
        .iter()
        .filter(|r| r.last_message().contains("def evaluate_chunk_relevance"))
        .count();
    assert_eq!(codegen, report.expansion.as_ref().unwrap().total_chunks);
    let types = event_types(&trace);
    assert_eq!(types.first().map(String::as_str), Some("run_started"));
    assert_eq!(types.last().map(String::as_str), Some("run_finished"));
    // JSON shape: file_summaries[] with file id, path, selected chunk ids, summary.
    let json = serde_json::to_value(&answer).unwrap();
    let f0 = &json["file_summaries"][0];
    for k in ["file_id", "path", "selected_chunk_ids", "summary"] {
        assert!(!f0[k].is_null(), "{k} missing in {f0}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_chunk_select_all_guard_falls_back_to_top_k() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "own_word",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Which skills does Alexis have?", Inspector::PerChunk),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(alexis.confidence, Some(0.2));
    assert!(alexis.selected_chunk_ids.len() < alexis.total_chunks);
    assert!(
        texts(&ts, &alexis.selected_chunk_ids)
            .iter()
            .any(|t| t.starts_with("Skills:"))
    );
    assert!(
        has_fallback(&trace, "select_all_guard", "more than 90%"),
        "{:?}",
        fallbacks(&trace)
    );
    assert!(
        alexis
            .fallbacks
            .iter()
            .any(|f| f.starts_with("select_all_guard"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_chunk_empty_selection_uses_first_three() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "absent",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req(
            "Which skills or quokka facts does Alexis have?",
            Inspector::PerChunk,
        ),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    let first3: Vec<String> = ts
        .corpus
        .store()
        .chunks_of(&alexis.file_id)
        .unwrap()
        .into_iter()
        .take(3)
        .map(|c| c.id)
        .collect();
    assert_eq!(alexis.selected_chunk_ids, first3);
    assert!(has_fallback(&trace, "empty_selection", "first 3 chunks"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_chunk_invalid_and_raising_programs_count_as_not_relevant() {
    let ts = resume_store();
    for (mode, needle) in [
        ("default_true", "default return is `return True`"),
        ("raises", "ZeroDivisionError"),
    ] {
        let server = server(Model {
            chunk: mode,
            ..Model::default()
        })
        .await;
        let engine = engine(&server, config(FlowsConfig::default())).await;
        let (answer, trace) = run(
            &engine,
            &ts,
            pipeline_req("Which skills does Alexis have?", Inspector::PerChunk),
        )
        .await;
        assert!(
            has_fallback(&trace, "chunk_program", needle),
            "{mode}: {:?}",
            fallbacks(&trace)
        );
        // Nothing approved → the empty-selection fallback.
        assert!(has_fallback(&trace, "empty_selection", "first 3"), "{mode}");
        assert!(!answer.answer.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iterative_normal_path_narrows_and_summarizes() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "absent",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req(
            "Which skills or quokka facts does Alexis have?",
            Inspector::Iterative,
        ),
    )
    .await;
    assert!(!answer.partial, "{:?}", answer.partial_reason);
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(
        texts(&ts, &alexis.selected_chunk_ids).len(),
        1,
        "{:?} {:?}",
        texts(&ts, &alexis.selected_chunk_ids),
        steps(&trace, "iteration")
    );
    assert!(texts(&ts, &alexis.selected_chunk_ids)[0].starts_with("Skills:"));
    assert_eq!(alexis.extracted_data.as_ref().unwrap()["skills"], 1);
    assert!(
        !fallbacks(&trace)
            .iter()
            .any(|(k, _)| k == "iteration_program"),
        "{:?}",
        fallbacks(&trace)
    );
    assert!(
        steps(&trace, "prefilter")
            .iter()
            .any(|m| m.contains("alexis_resume.txt"))
    );
    assert!(
        steps(&trace, "iteration")
            .iter()
            .any(|m| m.contains("alexis_resume.txt iteration 1"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iterative_confidence_boost_crosses_point_nine_and_stops() {
    let ts = resume_store();
    let server = server(Model {
        keyword: "experience",
        iter_stop: "False",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("What experience does Alexis have?", Inspector::Iterative),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(texts(&ts, &alexis.selected_chunk_ids).len(), 2);
    // conf 0.6 from the program, boosted to 0.95 by phase A's approval: one round.
    assert_eq!(alexis.depth, Some(1));
    assert!(
        (alexis.confidence.unwrap() - 0.95).abs() < 1e-9,
        "{:?}",
        alexis.confidence
    );
    assert!(
        steps(&trace, "confidence_boost")
            .iter()
            .any(|m| m.contains("0.600 → 0.950"))
    );
    assert!(
        steps(&trace, "stop")
            .iter()
            .any(|m| m.contains("confidence > 0.9"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iterative_no_narrowing_stops_on_the_streak() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "absent",
        iteration: "same_two",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req(
            "Which skills or quokka facts does Alexis have?",
            Inspector::Iterative,
        ),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(alexis.depth, Some(3), "{:?}", fallbacks(&trace));
    assert_eq!(alexis.selected_chunk_ids.len(), 2);
    assert!(has_fallback(
        &trace,
        "no_narrowing",
        "no narrowing for 2 iterations"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iterative_broad_selection_guard() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "absent",
        iteration: "all",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req(
            "Which skills or quokka facts does Alexis have?",
            Inspector::Iterative,
        ),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(alexis.confidence, Some(0.2));
    assert_eq!(alexis.depth, Some(1));
    assert!(alexis.selected_chunk_ids.len() < alexis.total_chunks);
    assert!(has_fallback(&trace, "broad_selection", "more than 90%"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iterative_generation_failure_runs_the_query_term_program() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "absent",
        iteration: "prose",
        ..Model::default()
    })
    .await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req(
            "Which skills or quokka facts does Alexis have?",
            Inspector::Iterative,
        ),
    )
    .await;
    assert!(
        has_fallback(&trace, "iteration_program", "query-term fallback program"),
        "{:?}",
        fallbacks(&trace)
    );
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert!(
        texts(&ts, &alexis.selected_chunk_ids)
            .iter()
            .any(|t| t.starts_with("Skills:"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iterative_all_iterations_failing_uses_first_three() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "absent",
        iteration: "list",
        ..Model::default()
    })
    .await;
    let flows = FlowsConfig {
        max_rlm_iterations: 2,
        ..FlowsConfig::default()
    };
    let engine = engine(&server, config(flows)).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req(
            "Which skills or quokka facts does Alexis have?",
            Inspector::Iterative,
        ),
    )
    .await;
    assert!(has_fallback(
        &trace,
        "iteration_failed",
        "instead of a dict"
    ));
    assert!(has_fallback(
        &trace,
        "all_iterations_failed",
        "first 3 chunks"
    ));
    let alexis = summary_of(&answer, "alexis_resume.txt");
    let first3: Vec<String> = ts
        .corpus
        .store()
        .chunks_of(&alexis.file_id)
        .unwrap()
        .into_iter()
        .take(3)
        .map(|c| c.id)
        .collect();
    assert_eq!(alexis.selected_chunk_ids, first3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hypothesis_scores_in_batches_and_keeps_the_strong_chunks() {
    let ts = resume_store();
    let server = server(Model::default()).await;
    let flows = FlowsConfig {
        relevance_batch: 4,
        ..FlowsConfig::default()
    };
    let engine = engine(&server, config(flows)).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Which skills does Alexis have?", Inspector::Hypothesis),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(texts(&ts, &alexis.selected_chunk_ids).len(), 1);
    assert_eq!(alexis.chunk_confidence.len(), alexis.total_chunks);
    assert!(alexis.chunk_confidence.values().any(|s| *s == 0.9));
    assert_eq!(alexis.depth, Some(0));
    // Batched: ceil(chunks / 4) relevance calls per file (one round each), not one per chunk.
    let calls = server
        .requests()
        .iter()
        .filter(|r| r.last_message().contains("Score how much each passage"))
        .count();
    let expected: usize = answer
        .file_summaries
        .iter()
        .map(|f| f.total_chunks.div_ceil(4))
        .sum();
    assert_eq!(calls, expected);
    assert!(
        calls
            < answer
                .file_summaries
                .iter()
                .map(|f| f.total_chunks)
                .sum::<usize>()
    );
    assert!(
        steps(&trace, "hypothesis")
            .iter()
            .any(|m| m.contains("Alexis has skills"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn repl_inspector_runs_the_loop_on_one_file() {
    let ts = resume_store();
    let server = server(Model::default()).await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Which skills does Alexis have?", Inspector::Repl),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert_eq!(
        texts(&ts, &alexis.selected_chunk_ids).len(),
        1,
        "{:?}",
        fallbacks(&trace)
    );
    assert!(texts(&ts, &alexis.selected_chunk_ids)[0].starts_with("Skills:"));
    assert!(event_types(&trace).iter().any(|t| t == "cell_output"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn caps_cut_files_and_chunks_and_are_reported() {
    let ts = resume_store();
    let server = server(Model::default()).await;
    let flows = FlowsConfig {
        max_files: 1,
        max_chunks: 3,
        ..FlowsConfig::default()
    };
    let engine = engine(&server, config(flows)).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Which skills does Alexis have?", Inspector::PerChunk),
    )
    .await;
    assert_eq!(answer.file_summaries.len(), 1);
    assert_eq!(answer.file_summaries[0].total_chunks, 3);
    let exp = answer
        .flow_report
        .as_ref()
        .unwrap()
        .expansion
        .clone()
        .unwrap();
    assert!(exp.files_dropped >= 1 && exp.chunks_dropped >= 1, "{exp:?}");
    assert!(steps(&trace, "caps")[0].contains("RLM_MAX_FILES=1, RLM_MAX_CHUNKS=3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn strict_drops_unsupported_claims_best_effort_keeps_them() {
    let ts = resume_store();
    let extra = "\nAlexis also speaks fluent Klingon.\nAlexis won a chess title [[chunk:nope-0 \"grandmaster title\"]].";
    for policy in [CitationPolicy::Strict, CitationPolicy::BestEffort] {
        let server = server(Model {
            merge_extra: extra,
            ..Model::default()
        })
        .await;
        let engine = engine(&server, config(FlowsConfig::default())).await;
        let mut req = pipeline_req("Which skills does Alexis have?", Inspector::PerChunk);
        req.pipeline.citation_policy = Some(policy);
        let (answer, _trace) = run(&engine, &ts, req).await;
        let report = answer.flow_report.as_ref().unwrap();
        assert_eq!(report.citation_policy, policy);
        match policy {
            CitationPolicy::Strict => {
                assert!(!answer.answer.contains("Klingon"), "{}", answer.answer);
                assert!(!answer.answer.contains("grandmaster"));
                assert!(answer.answer.contains("Skills: Python"));
                assert_eq!(report.dropped_claims.len(), 2, "{report:?}");
                assert!(answer.verification.as_ref().unwrap().all_valid);
            }
            CitationPolicy::BestEffort => {
                assert!(answer.answer.contains("Klingon"));
                assert!(answer.answer.contains("grandmaster"));
                assert_eq!(report.unsupported_claims.len(), 2, "{report:?}");
                assert!(report.dropped_claims.is_empty());
                assert!(!answer.verification.as_ref().unwrap().all_valid);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rlm_switch_off_gives_exactly_the_rag_answer() {
    let ts = resume_store();
    let server = server(Model::default()).await;
    let mut req = AskRequest::new("Which skills does Alexis have?");
    req.flow = Flow::Rag;
    let rag_engine = engine(&server, config(FlowsConfig::default())).await;
    let (rag, _) = run(&rag_engine, &ts, req).await;
    let off = FlowsConfig {
        rlm_enabled: false,
        ..FlowsConfig::default()
    };
    let off_engine = engine(&server, config(off)).await;
    let (switched, trace) = run(
        &off_engine,
        &ts,
        AskRequest::new("Which skills does Alexis have?"),
    )
    .await;
    assert_eq!(switched.answer, rag.answer);
    assert_eq!(switched.citations, rag.citations);
    assert_eq!(switched.verification, rag.verification);
    assert_eq!(switched.flow_report, rag.flow_report);
    assert!(switched.file_summaries.is_empty());
    assert_eq!(rag.flow_report.as_ref().unwrap().flow, "rag");
    assert!(rag.answer.contains("[[chunk:"));
    assert_eq!(rag.usage.calls, 1);
    assert!(steps(&trace, "route")[0].contains("RLM not enabled"));
    // One answer call each, nothing else but the judge's call on its
    // claims (not answered here: they stay unverified). Each failed judge
    // request is sent once more without its schema (a 400 may refuse it).
    assert_eq!(common::flow_requests(&server), 2);
    assert_eq!(common::judge_calls(&server), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_routes_by_one_triage_call() {
    let ts = resume_store();
    let server1 = server(Model {
        route: "rag",
        ..Model::default()
    })
    .await;
    let flows = FlowsConfig {
        rlm_flow: Flow::Pipeline,
        inspector: Inspector::PerChunk,
        ..FlowsConfig::default()
    };
    let e = engine(&server1, config(flows.clone())).await;
    let mut req = AskRequest::new("Which skills does Alexis have?");
    req.flow = Flow::Auto;
    let (answer, trace) = run(&e, &ts, req.clone()).await;
    let report = answer.flow_report.as_ref().unwrap();
    assert_eq!(report.flow, "rag");
    let route = report.route.as_ref().unwrap();
    assert_eq!(
        (route.chosen.as_str(), route.reason.as_str()),
        ("rag", "scripted triage")
    );
    assert_eq!(answer.usage.calls, 2); // triage + answer
    assert!(steps(&trace, "route")[0].contains("scripted triage"));

    let server2 = server(Model {
        route: "rlm",
        ..Model::default()
    })
    .await;
    let e = engine(&server2, config(flows.clone())).await;
    let (answer, _) = run(&e, &ts, req.clone()).await;
    assert_eq!(answer.flow_report.as_ref().unwrap().flow, "pipeline");
    assert!(!answer.file_summaries.is_empty());

    // A question about every line goes to the repl flow, whose code can
    // scan everything, whatever RLM flow is configured.
    let server3 = server(Model {
        route: "scan",
        ..Model::default()
    })
    .await;
    let e = engine(&server3, config(flows)).await;
    let (answer, trace) = run(&e, &ts, req).await;
    assert!(answer.file_summaries.is_empty());
    let route = steps(&trace, "route");
    assert_eq!(route, vec!["Flow repl selected (auto): scripted triage"]);
    assert!(
        server3.requests().iter().any(|r| r
            .system()
            .contains("You are answering a question about a collection")),
        "the root agent of the repl flow ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recency_orders_present_chunks_first_for_present_questions() {
    let ts = resume_store();
    let server = server(Model {
        chunk: "own_word",
        ..Model::default()
    })
    .await;
    let flows = FlowsConfig {
        max_selected_chunks_per_file: 8,
        ..FlowsConfig::default()
    };
    let engine = engine(&server, config(flows)).await;
    // own_word selects everything → the guard's top-k; the present-tense
    // intent turns recency on, so the "Present" role comes first.
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Where does Alexis currently work?", Inspector::PerChunk),
    )
    .await;
    let alexis = summary_of(&answer, "alexis_resume.txt");
    assert!(alexis.recency_ordered);
    let first = &texts(&ts, &alexis.selected_chunk_ids)[0];
    assert!(first.contains("Present"), "{first}");
    assert!(!steps(&trace, "recency").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_exhaustion_gives_a_partial_answer_not_an_error() {
    let ts = resume_store();
    let server = server(Model::default()).await;
    let mut c = config(FlowsConfig::default());
    c.budget.max_llm_calls = 8;
    c.budget.root_reserved_calls = 2;
    let engine = engine(&server, c).await;
    let (answer, trace) = run(
        &engine,
        &ts,
        pipeline_req("Which skills does Alexis have?", Inspector::PerChunk),
    )
    .await;
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("LLM call budget"),
        "{:?}",
        answer.partial_reason
    );
    assert!(!answer.answer.trim().is_empty());
    assert!(has_fallback(&trace, "chunk_program", "not generated"));
    assert!(answer.usage.calls <= 8);
}

/// A bag-of-words embedder (hashed words, L2-normalized): enough to give the
/// store real vectors and exercise hybrid retrieval without model files.
struct BagEmbedder;

impl rlm_corpus::Embedder for BagEmbedder {
    fn model_id(&self) -> &str {
        "test:bag-of-words"
    }
    fn dimension(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, rlm_corpus::EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 64];
                for w in t
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 2)
                {
                    let h = w
                        .bytes()
                        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hybrid_retrieval_when_the_store_has_embeddings() {
    let ts = resume_store();
    let embedder: Arc<dyn rlm_corpus::Embedder> = Arc::new(BagEmbedder);
    ts.corpus
        .store()
        .embed_chunks(
            embedder.as_ref(),
            &rlm_corpus::EmbedOptions::default(),
            &mut |_| {},
        )
        .unwrap();
    let server = server(Model::default()).await;
    let engine = engine(&server, config(FlowsConfig::default())).await;
    let mut req = pipeline_req("Which skills does Alexis have?", Inspector::PerChunk);
    req.pipeline.embedder = Some(embedder.clone());
    let (answer, trace) = run(&engine, &ts, req).await;
    let r = answer
        .flow_report
        .as_ref()
        .unwrap()
        .retrieval
        .clone()
        .unwrap();
    assert_eq!(r.mode, "hybrid", "{r:?}");
    assert!(r.high_recall);
    assert!(
        steps(&trace, "retrieval")
            .iter()
            .any(|m| m.starts_with("High recall mode on"))
    );
    assert!(
        texts(
            &ts,
            &summary_of(&answer, "alexis_resume.txt").selected_chunk_ids
        )[0]
        .starts_with("Skills:")
    );

    let mut req = AskRequest::new("Which skills does Alexis have?");
    req.flow = Flow::Rag;
    req.pipeline.embedder = Some(embedder);
    let (answer, _) = run(&engine, &ts, req).await;
    assert_eq!(
        answer
            .flow_report
            .as_ref()
            .unwrap()
            .retrieval
            .as_ref()
            .unwrap()
            .mode,
        "hybrid"
    );
    // Without an embedder the same store is searched by BM25.
    let mut req = AskRequest::new("Which skills does Alexis have?");
    req.flow = Flow::Rag;
    let (answer, _) = run(&engine, &ts, req).await;
    assert_eq!(
        answer
            .flow_report
            .as_ref()
            .unwrap()
            .retrieval
            .as_ref()
            .unwrap()
            .mode,
        "bm25"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rag_reply_that_is_not_an_answer_is_sent_back_once() {
    // Small models answer with a citation marker alone (an invented id):
    // the reply is sent back once with what was wrong.
    let ts = resume_store();
    let marker_only = Reply::text("[[chunk:47_Force \"some words\"]]");
    let server = ScriptedServer::start(Script::new().respond_with(move |r| {
        if r.last_message().contains("That reply was not accepted") {
            let p = &r.messages[0].content;
            let ps = passages(p, "[chunk:");
            let (id, text) = ps.first()?;
            let q = quote_of(text);
            Some(Reply::text(format!(
                "Alexis lists: {q} [[chunk:{id} \"{q}\"]]."
            )))
        } else {
            Some(marker_only.clone())
        }
    }))
    .await;
    let e = engine(&server, config(FlowsConfig::default())).await;
    let mut req = AskRequest::new("Which skills does Alexis have?");
    req.flow = Flow::Rag;
    let (answer, _) = run(&e, &ts, req).await;
    assert_eq!(common::flow_requests(&server), 2);
    let retry = &server.requests()[1];
    assert!(
        retry.last_message().contains("only citation markers"),
        "{}",
        retry.last_message()
    );
    assert!(
        answer.answer.starts_with("Alexis lists:"),
        "{}",
        answer.answer
    );
    assert!(
        answer.partial_reason.is_none(),
        "{:?}",
        answer.partial_reason
    );

    // Twice not an answer: committed as partial, saying why.
    let server = ScriptedServer::start(
        Script::new().respond_with(|_| Some(Reply::text("[[chunk:47_Force \"some words\"]]"))),
    )
    .await;
    let e = engine(&server, config(FlowsConfig::default())).await;
    let mut req = AskRequest::new("Which skills does Alexis have?");
    req.flow = Flow::Rag;
    let (answer, trace) = run(&e, &ts, req).await;
    assert_eq!(server.request_count(), 2);
    assert!(answer.partial);
    assert!(
        answer
            .partial_reason
            .as_deref()
            .is_some_and(|r| r.contains("not an answer")),
        "{:?}",
        answer.partial_reason
    );
    assert!(has_fallback(&trace, "rag_answer", "not an answer"));
}

/// Asks `question` on the `rag` flow of the resume store, the model
/// answering by `script`; the answer, its trace and the model's server.
async fn ask_rag(
    question: &str,
    script: Script,
) -> (
    rlm_engine::Answer,
    Vec<rlm_engine::trace::TraceRecord>,
    ScriptedServer,
) {
    let ts = resume_store();
    let server = ScriptedServer::start(script).await;
    let e = engine(&server, config(FlowsConfig::default())).await;
    let mut req = AskRequest::new(question);
    req.flow = Flow::Rag;
    let (answer, trace) = run(&e, &ts, req).await;
    (answer, trace, server)
}

/// A model that gives `text` to every request.
fn always(text: &'static str) -> Script {
    Script::new().respond_with(move |_| Some(Reply::text(text)))
}

/// A model that says `first`, then, shown the second look, answers with the
/// first excerpt shown (and its marker when `cite`); as the judge, it finds
/// every claim entailed.
fn looks_again(first: &'static str, cite: bool) -> Script {
    Script::new().respond_with(move |r| {
        if let Some(verdicts) = common::judge_says(r, "entailed") {
            return Some(Reply::text(verdicts));
        }
        let last = r.last_message();
        if !last.contains("Read them again") {
            return Some(Reply::text(first));
        }
        let line = last.lines().find(|l| l.starts_with("[chunk:"))?;
        let (id, excerpt) = line.trim_start_matches("[chunk:").split_once("] ")?;
        Some(Reply::text(if cite {
            format!(
                "{excerpt} [[chunk:{id} \"{}\"]]",
                excerpt.trim_end_matches('.')
            )
        } else {
            excerpt.to_string()
        }))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rag_abstention_or_unbacked_answer_gets_one_second_look_at_the_best_sentences() {
    const WHERE: &str = "Where is Alexis Torres based?";
    const ABSTAINS: &str = "The passages do not answer the question.";
    const FROM_MEMORY: &str = "Alexis Torres is based in Lisbon, Portugal.";
    // Small models say "the passages do not answer" while one of them does:
    // the excerpts sharing most of the question's words are shown once.
    let (answer, trace, server) = ask_rag(WHERE, looks_again(ABSTAINS, true)).await;
    assert_eq!(common::flow_requests(&server), 2);
    let look = server.requests()[1].last_message().to_string();
    assert!(
        look.starts_with("Your reply says the passages do not answer"),
        "{look}"
    );
    assert!(look.contains("Alexis"), "{look}");
    assert!(has_fallback(&trace, "rag_answer", "do not answer"));
    assert!(!answer.partial, "{:?}", answer.partial_reason);
    assert!(
        answer.grounded.as_ref().is_some_and(|g| g.supported >= 1),
        "{}\n{:?}",
        answer.answer,
        answer.claims
    );

    // A second abstention is the answer; nothing is partial.
    let (answer, _, server) = ask_rag(WHERE, always(ABSTAINS)).await;
    assert_eq!(common::flow_requests(&server), 2);
    assert!(!answer.partial);
    assert_eq!(answer.answer, ABSTAINS);

    // An answer no passage backs (from memory, or a guess) gets the second
    // look too; it is replaced only by an answer a passage backs.
    let (answer, trace, server) = ask_rag(WHERE, looks_again(FROM_MEMORY, false)).await;
    assert_eq!(common::flow_requests(&server), 2);
    let look = server.requests()[1].last_message().to_string();
    assert!(
        look.starts_with("No sentence of the passages states"),
        "{look}"
    );
    assert!(has_fallback(
        &trace,
        "rag_answer",
        "no passage backs the reply"
    ));
    assert!(answer.answer.contains("Madrid"), "{}", answer.answer);
    let (answer, _, server) = ask_rag(WHERE, always(FROM_MEMORY)).await;
    assert_eq!(common::flow_requests(&server), 2);
    assert_eq!(answer.answer, FROM_MEMORY);
    assert_eq!(answer.grounded.as_ref().map(|g| g.supported), Some(0));

    // An answer a passage backs needs no second look.
    let (_, _, server) = ask_rag(WHERE, always("Alexis Torres is based in Madrid, Spain.")).await;
    assert_eq!(common::flow_requests(&server), 1);

    // No sentence shares the question's words: no second look.
    let (_, _, server) = ask_rag("Which hobbies does Kevin Zyxwvut enjoy?", always(ABSTAINS)).await;
    assert_eq!(common::flow_requests(&server), 1);
}
