//! The `pipeline` flow: the intent is extracted once and frozen →
//! high-recall stage-1 retrieval → entry chunks expanded to whole files
//! (ordered chunks, capped by `RLM_MAX_FILES` / `RLM_MAX_CHUNKS`) → per file,
//! in parallel within the shared concurrency budget, an inspector selects
//! chunks (`iterative`, `per-chunk`, `hypothesis` or `repl`, in
//! [`inspectors`]) → post-selection caps and recency ordering → a per-file
//! summary citing chunks → a cross-file merge → the claim-by-claim citation
//! policy (`strict` drops claims without a verified citation, `best_effort`
//! keeps and reports them). Every model call goes through the run's one
//! budget and trace; every fallback is a `fallback` trace event with its
//! reason.

pub(crate) mod file;
pub(crate) mod inspectors;
pub(crate) mod intent;
pub(crate) mod merge;
pub(crate) mod program;
pub(crate) mod select;

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::Semaphore;

use crate::answer::{
    Answer, ExpansionReport, FileSummary, FlowReport, Intent, RetrievalReport, RouteDecision,
};
use crate::citations::CitationPolicy;
use crate::config::{FlowsConfig, Inspector, RecencyMode};
use crate::notices::{Notice, write};
use crate::request::AskRequest;
use crate::retrieval::{FileWork, retrieve_and_expand};
use crate::run::{Finished, ROOT_AGENT, Run};
use file::FileCtx;

/// What the pipeline has gathered (kept outside the run's future so a
/// cancel or the wall clock can still answer from it).
#[derive(Default)]
struct Gathered {
    summaries: Mutex<Vec<FileSummary>>,
}

/// Answers `req` through retrieval, per-file inspection and the merge.
pub(crate) async fn run(
    fx: Arc<Run>,
    req: &AskRequest,
    route: Option<RouteDecision>,
    policy: CitationPolicy,
) -> Answer {
    let cfg = fx.config().flows.clone();
    let inspector = req.pipeline.inspector.unwrap_or(cfg.inspector);
    let gathered = Arc::new(Gathered::default());
    let mut report = FlowReport {
        flow: "pipeline".into(),
        route,
        intent: None,
        retrieval: None,
        expansion: None,
        inspector: Some(inspector),
        citation_policy: policy,
        dropped_claims: Vec::new(),
        unsupported_claims: Vec::new(),
    };
    let work = {
        let fx = fx.clone();
        let gathered = gathered.clone();
        let question = req.question.clone();
        let cfg = cfg.clone();
        let embedder = req.pipeline.embedder.clone();
        async move {
            let intent = intent::extract_intent(&fx, &question, cfg.codegen_model.clone()).await;
            let (files, retrieval, expansion) =
                match retrieve_and_expand(&fx, &question, &intent, &cfg, embedder.as_deref()) {
                    Ok(r) => r,
                    Err(e) => {
                        let reason = e.to_string();
                        fx.fallback(ROOT_AGENT, "retrieval", &reason);
                        (
                            Vec::new(),
                            RetrievalReport::failed(&reason),
                            ExpansionReport::default(),
                        )
                    }
                };
            let partial =
                inspect_files(&fx, &question, &intent, &cfg, inspector, files, &gathered).await;
            (intent, retrieval, expansion, partial)
        }
    };
    let outcome = fx.until_stopped(&req.cancel, work).await;
    let summaries = gathered
        .summaries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let (text, partial_reason) = match outcome {
        Ok((intent, retrieval, expansion, partial)) => {
            report.intent = Some(intent.clone());
            report.retrieval = Some(retrieval);
            report.expansion = Some(expansion);
            if summaries.is_empty() {
                let lang = fx.notice_language;
                (
                    format!(
                        "{} {}",
                        write(Notice::NoPassageMatched, lang, "", ""),
                        write(Notice::TryOtherWords, lang, "", "")
                    ),
                    partial,
                )
            } else {
                match merge::merge(
                    &fx,
                    &req.question,
                    &intent,
                    &summaries,
                    cfg.summary_model.clone(),
                )
                .await
                {
                    Ok(text) => (text, partial),
                    Err(e) => {
                        fx.fallback(
                            ROOT_AGENT,
                            "merge",
                            &format!("{e}; the answer is the file summaries"),
                        );
                        (
                            merge::summaries_as_answer(&summaries),
                            Some(partial.unwrap_or_else(|| e.to_string())),
                        )
                    }
                }
            }
        }
        Err(reason) => {
            let (lang, why) = (fx.notice_language, reason.to_string());
            let text = if summaries.is_empty() {
                write(Notice::NothingSummarized, lang, &why, "")
            } else {
                format!(
                    "{}\n\n{}",
                    write(Notice::NoCompleteAnswer, lang, &why, ""),
                    merge::summaries_as_answer(&summaries)
                )
            };
            (text, Some(reason.to_string()))
        }
    };
    fx.finish(Finished {
        text,
        partial_reason,
        report: Some(report),
        file_summaries: summaries,
    })
    .await
}

/// Runs the inspector and the summary of every file, in parallel (files in
/// flight bounded by `RLM_MAX_CONCURRENT`; model calls by the shared slots).
/// Returns why the run is partial, if a budget cut it.
async fn inspect_files(
    fx: &Arc<Run>,
    question: &str,
    intent: &Intent,
    cfg: &FlowsConfig,
    inspector: Inspector,
    files: Vec<FileWork>,
    gathered: &Arc<Gathered>,
) -> Option<String> {
    let limit = Arc::new(Semaphore::new(fx.config().budget.max_concurrent.max(1)));
    let mut set = tokio::task::JoinSet::new();
    let recency = match cfg.recency {
        RecencyMode::On => true,
        RecencyMode::Off => false,
        RecencyMode::Auto => intent.asks_about_present(question),
    };
    if recency {
        fx.step(
            ROOT_AGENT,
            "recency",
            "Recency prioritization on: selected chunks with present/current markers or the latest dates come first".into(),
            json!({"mode": cfg.recency}),
        );
    }
    for (i, file) in files.into_iter().enumerate() {
        let ctx = Arc::new(FileCtx {
            fx: fx.clone(),
            cfg: cfg.clone(),
            agent: format!("{ROOT_AGENT}.{i}"),
            question: question.to_string(),
            intent: intent.clone(),
            file,
            fallbacks: Mutex::new(Vec::new()),
        });
        let limit = limit.clone();
        let gathered = gathered.clone();
        set.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let (summary, partial) = inspect_file(ctx, inspector, recency).await;
            gathered
                .summaries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(summary);
            partial
        });
    }
    let mut partial = None;
    while let Some(r) = set.join_next().await {
        if let Ok(Some(p)) = r {
            partial.get_or_insert(p);
        }
    }
    // Files finish in any order; answer in retrieval order.
    let mut s = gathered.summaries.lock().unwrap_or_else(|e| e.into_inner());
    s.sort_by_key(|f| f.rank);
    partial
}

/// Runs the inspector of one file, the post-selection caps and the file's
/// summary. Returns the summary and why the run is partial, if it is.
async fn inspect_file(
    file: Arc<FileCtx>,
    inspector: Inspector,
    recency: bool,
) -> (FileSummary, Option<String>) {
    file.fx.step(
        &file.agent,
        "inspector",
        format!(
            "Inspecting {} ({} chunks) with the {} inspector",
            file.file.path,
            file.file.chunks.len(),
            inspector.as_str()
        ),
        json!({"file_id": file.file.doc_id, "path": file.file.path, "chunks": file.file.chunks.len(), "inspector": inspector}),
    );
    let sel = match inspector {
        Inspector::PerChunk => inspectors::per_chunk::run(&file).await,
        Inspector::Iterative => inspectors::iterative::run(&file).await,
        Inspector::Hypothesis => inspectors::hypothesis::run(&file).await,
        Inspector::Repl => inspectors::repl::run(&file).await,
    };
    let chosen = select::post_select(&file.file.chunks, &sel.chunk_ids, &file.cfg, recency);
    file.fx.step(
        &file.agent,
        "selection",
        format!(
            "{}: {} chunk(s) selected by the inspector, {} kept after MAX_SELECTED_CHUNKS_PER_FILE={} and MAX_TOTAL_CHARS_FOR_SUMMARY={}",
            file.file.path,
            sel.chunk_ids.len(),
            chosen.len(),
            file.cfg.max_selected_chunks_per_file,
            file.cfg.max_total_chars_for_summary
        ),
        json!({"inspector_selected": sel.chunk_ids, "kept": chosen.iter().map(|c| &c.id).collect::<Vec<_>>(), "confidence": sel.confidence}),
    );
    let (summary, summary_partial) =
        merge::summarize_file(&file, &chosen, sel.extracted.as_ref()).await;
    let fallbacks = file
        .fallbacks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    (
        FileSummary {
            file_id: file.file.doc_id.clone(),
            path: file.file.path.clone(),
            inspector,
            entry_chunk_ids: file.file.entry_chunk_ids.clone(),
            total_chunks: file.file.chunks.len(),
            selected_chunk_ids: chosen.iter().map(|c| c.id.clone()).collect(),
            summary,
            confidence: sel.confidence,
            chunk_confidence: sel.chunk_confidence,
            depth: sel.depth,
            extracted_data: sel.extracted,
            recency_ordered: recency,
            fallbacks,
            rank: file.file.rank,
        },
        sel.partial.or(summary_partial),
    )
}
