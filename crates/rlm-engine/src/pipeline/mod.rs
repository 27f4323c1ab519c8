//! The flows beside `repl`: `pipeline` (seeds 000, 001, 002), `rag` (RLM
//! off) and `auto` (seed 001's triage routing), and the `RLM_ENABLED` switch.
//!
//! `pipeline`: the intent is extracted once and frozen → high-recall stage-1
//! retrieval → entry chunks expanded to whole files (ordered chunks, capped by
//! `RLM_MAX_FILES` / `RLM_MAX_CHUNKS`) → per file, in parallel within the
//! shared concurrency budget, an inspector selects chunks (`iterative`,
//! `per-chunk`, `hypothesis` or `repl`) → post-selection caps and recency
//! ordering → a per-file summary citing chunks → a cross-file merge → the
//! citation policy (`strict` drops claims without a verified citation,
//! `best_effort` keeps and reports them). Every model call goes through the
//! question's one [`Budget`](crate::Budget) and [`Trace`](crate::Trace); every
//! fallback is a `fallback` trace event with its reason.

mod config;
mod inspector_hypothesis;
mod inspector_iterative;
mod inspector_per_chunk;
mod inspector_repl;
pub mod intent;
mod merge;
pub mod program;
mod rag;
mod retrieve;
pub mod select;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

pub use config::{FlowsConfig, Inspector, RecencyMode};
pub use intent::{Intent, RouteDecision};
pub use retrieve::{ExpansionReport, RetrievalReport};

use crate::citations::CitationPolicy;
use crate::corpus::Corpus;
pub(crate) use crate::engine::RunHandle as FlowCtx;
use crate::engine::{Answer, AskRequest, Engine, EngineError, Flow, FlowCallError};
use crate::trace::TraceEvent;
use retrieve::{FileWork, retrieve_and_expand};

/// Agent id of the question-level steps.
pub(crate) const PIPELINE_AGENT: &str = "0";

/// Per-request settings of the `pipeline` and `rag` flows (the API and CLI fields).
#[derive(Clone, Default)]
pub struct PipelineRequest {
    /// The per-file inspector; `None` → `RLM_INSPECTOR`.
    pub inspector: Option<Inspector>,
    /// The citation policy; `None` → `RLM_CITATION_POLICY`, else `RLM_CITATIONS`.
    pub citation_policy: Option<CitationPolicy>,
    /// The store's query embedder (see `EmbeddingSettings::embedder_for_store`):
    /// with it, stage-1 retrieval is hybrid (BM25 + vectors, RRF); without, BM25.
    pub embedder: Option<Arc<dyn rlm_corpus::Embedder>>,
}

impl std::fmt::Debug for PipelineRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineRequest")
            .field("inspector", &self.inspector)
            .field("citation_policy", &self.citation_policy)
            .field(
                "embedder",
                &self.embedder.as_ref().map(|e| e.model_id().to_string()),
            )
            .finish()
    }
}

/// One inspected file of a `pipeline` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSummary {
    /// Document id.
    pub file_id: String,
    /// Corpus-relative path.
    pub path: String,
    /// The inspector that selected the chunks.
    pub inspector: Inspector,
    /// Retrieved chunks that led to this file.
    pub entry_chunk_ids: Vec<String>,
    /// Chunks of the file that were inspected.
    pub total_chunks: usize,
    /// Chunks the summary was written from, in the order given to it.
    pub selected_chunk_ids: Vec<String>,
    /// The summary, citing its chunks with `[[chunk:ID "quote"]]`.
    pub summary: String,
    /// The inspector's confidence (iterative, hypothesis), if it has one.
    pub confidence: Option<f64>,
    /// Hypothesis inspector: relevance score of every chunk it scored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chunk_confidence: BTreeMap<String, f64>,
    /// Iterative rounds or hypothesis depth reached.
    pub depth: Option<u32>,
    /// Iterative inspector: `extracted_data` accumulated over the rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted_data: Option<Value>,
    /// Whether the selected chunks were ordered most recent first.
    pub recency_ordered: bool,
    /// Every fallback taken for this file, with its reason.
    pub fallbacks: Vec<String>,
    /// Position of the file in retrieval order (answers list files in it).
    #[serde(skip)]
    pub(crate) rank: usize,
}

/// What shaped an answer of `pipeline`, `rag` or `auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    /// The flow that produced the answer (`pipeline` or `rag`).
    pub flow: String,
    /// How the flow was chosen (`RLM_ENABLED` or triage).
    pub route: Option<RouteDecision>,
    /// The frozen intent (pipeline).
    pub intent: Option<Intent>,
    /// Stage-1 retrieval.
    pub retrieval: Option<RetrievalReport>,
    /// Chunk → file expansion and what the caps cut (pipeline).
    pub expansion: Option<ExpansionReport>,
    /// The inspector used (pipeline).
    pub inspector: Option<Inspector>,
    /// The citation policy applied.
    pub citation_policy: CitationPolicy,
    /// `strict`: claims removed because no citation of theirs was verified.
    pub dropped_claims: Vec<String>,
    /// `best_effort`: claims kept although no citation of theirs was verified.
    pub unsupported_claims: Vec<String>,
}

/// What [`dispatch`] did with a request.
pub(crate) enum Dispatch {
    /// Answered here.
    Done(Box<Answer>),
    /// A `repl` request for the engine's loop.
    Repl(AskRequest),
}

impl FlowCtx {
    /// Emits a `fallback` event.
    pub(crate) fn fallback(&self, agent: &str, kind: &str, reason: &str) {
        self.trace().emit(TraceEvent::Fallback {
            agent: agent.into(),
            kind: kind.into(),
            reason: reason.into(),
        });
    }

    /// Emits a `flow_step` event.
    pub(crate) fn step(&self, agent: &str, step: &str, message: String, data: Value) {
        self.trace().emit(TraceEvent::FlowStep {
            agent: agent.into(),
            step: step.into(),
            message,
            data,
        });
    }
}

/// Resolves the flow of a request and runs `pipeline` and `rag` here.
/// `Configured`: `RLM_ENABLED` picks `RLM_FLOW` or `rag` (seed 001's switch,
/// logged as "RLM branch selected"). `Auto`: one triage call.
pub(crate) async fn dispatch(
    engine: &Engine,
    corpus: &Arc<Corpus>,
    mut req: AskRequest,
) -> Result<Dispatch, EngineError> {
    let cfg = &engine.config().flows;
    let (flow, route) = match req.flow {
        Flow::Configured => {
            let (flow, why) = if cfg.rlm_enabled {
                (
                    cfg.rlm_flow,
                    "RLM branch selected (RLM_ENABLED=true)".to_string(),
                )
            } else {
                (
                    Flow::Rag,
                    "Default branch selected (RLM not enabled: RLM_ENABLED=false)".to_string(),
                )
            };
            (
                flow,
                Some(RouteDecision {
                    requested: "configured".into(),
                    chosen: flow.as_str().into(),
                    reason: why,
                }),
            )
        }
        Flow::Auto => {
            let fx = engine.run_handle(corpus.clone(), &req);
            let (rag, reason) = intent::triage(&fx, &req.question, cfg.codegen_model.clone()).await;
            let flow = if rag { Flow::Rag } else { cfg.rlm_flow };
            let d = RouteDecision {
                requested: "auto".into(),
                chosen: flow.as_str().into(),
                reason,
            };
            intent::emit_route(&fx, &d);
            if flow == Flow::Repl {
                req.flow = Flow::Repl;
                return Ok(Dispatch::Repl(req));
            }
            // The triage call's usage stays in this run's budget.
            return run_flow(fx, flow, req, Some(d)).await.map(Dispatch::Done);
        }
        other => (other, None),
    };
    if flow == Flow::Repl {
        // No event here: the repl flow's trace starts with its `run_started`
        // (flow "repl"), which already says the RLM branch was taken.
        req.flow = Flow::Repl;
        return Ok(Dispatch::Repl(req));
    }
    let fx = engine.run_handle(corpus.clone(), &req);
    if let Some(d) = &route {
        intent::emit_route(&fx, d);
    }
    // The RLM_ENABLED decision is in the trace only, so that RLM_ENABLED=false
    // gives exactly the answer of an explicit `rag` request.
    run_flow(fx, flow, req, None).await.map(Dispatch::Done)
}

async fn run_flow(
    fx: FlowCtx,
    flow: Flow,
    req: AskRequest,
    route: Option<RouteDecision>,
) -> Result<Box<Answer>, EngineError> {
    let run_id = crate::engine::flow_run_id();
    let c = fx.config();
    fx.trace().emit(TraceEvent::RunStarted {
        run_id: run_id.clone(),
        question: req.question.clone(),
        flow: flow.as_str().into(),
        root_model: c.root_model.clone(),
        sub_model: c.sub_model.clone(),
        documents: fx.corpus().documents().len(),
        context_chars: fx.corpus().total_chars(),
        budget: serde_json::to_value(&c.budget).unwrap_or(Value::Null),
    });
    let policy = req
        .pipeline
        .citation_policy
        .or(c.flows.citation_policy)
        .unwrap_or(c.citation_policy);
    let fx = Arc::new(fx);
    let answer = match flow {
        Flow::Rag => rag::run(&fx, &req, run_id, route, policy).await,
        _ => run_pipeline(fx.clone(), &req, run_id, route, policy).await,
    }?;
    Ok(Box::new(answer))
}

/// What the pipeline has gathered (kept outside the run's future so a
/// cancel or the wall clock can still answer from it).
#[derive(Default)]
struct Gathered {
    summaries: Mutex<Vec<FileSummary>>,
}

async fn run_pipeline(
    fx: Arc<FlowCtx>,
    req: &AskRequest,
    run_id: String,
    route: Option<RouteDecision>,
    policy: CitationPolicy,
) -> Result<Answer, EngineError> {
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
                        fx.fallback(PIPELINE_AGENT, "retrieval", &e);
                        (
                            Vec::new(),
                            RetrievalReport::failed(&e),
                            ExpansionReport::default(),
                        )
                    }
                };
            let partial =
                inspect_files(&fx, &question, &intent, &cfg, inspector, files, &gathered).await;
            (intent, retrieval, expansion, partial)
        }
    };
    let wall = tokio::time::sleep(fx.budget().remaining_time());
    let outcome = tokio::select! {
        r = work => Some(r),
        _ = req.cancel.cancelled() => { fx.budget().cancel(); None }
        _ = wall => None,
    };
    let summaries = gathered
        .summaries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let (text, partial_reason) = match outcome {
        Some((intent, retrieval, expansion, partial)) => {
            report.intent = Some(intent.clone());
            report.retrieval = Some(retrieval);
            report.expansion = Some(expansion);
            if summaries.is_empty() {
                (
                    "No passage of the corpus matched the question, so there is nothing to answer from. Try other words, or --flow repl to let the model read the documents.".to_string(),
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
                            PIPELINE_AGENT,
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
        None => {
            let reason = if req.cancel.is_cancelled() {
                crate::budget::Exhausted::Cancelled
            } else {
                crate::budget::Exhausted::WallClock {
                    limit_secs: fx.config().budget.wall_clock.as_secs(),
                }
            };
            fx.trace().emit(TraceEvent::BudgetExhausted {
                agent: PIPELINE_AGENT.into(),
                depth: 0,
                reason: reason.clone(),
            });
            let text = if summaries.is_empty() {
                format!("No complete answer was reached ({reason}) and no file was summarized yet.")
            } else {
                format!(
                    "No complete answer was reached ({reason}). What was gathered before stopping:\n\n{}",
                    merge::summaries_as_answer(&summaries)
                )
            };
            (text, Some(reason.to_string()))
        }
    };
    Ok(merge::finish(
        &fx,
        run_id,
        text,
        partial_reason,
        report,
        summaries,
    ))
}

/// Runs the inspector and the summary of every file, in parallel (files in
/// flight bounded by `RLM_MAX_CONCURRENT`; model calls by the shared slots).
/// Returns why the run is partial, if a budget cut it.
async fn inspect_files(
    fx: &Arc<FlowCtx>,
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
            PIPELINE_AGENT,
            "recency",
            "Recency prioritization on: selected chunks with present/current markers or the latest dates come first".into(),
            json!({"mode": cfg.recency}),
        );
    }
    for (i, file) in files.into_iter().enumerate() {
        let ctx = Arc::new(FileCtx {
            fx: fx.clone(),
            cfg: cfg.clone(),
            agent: format!("{PIPELINE_AGENT}.{i}"),
            question: question.to_string(),
            intent: intent.clone(),
            file,
            fallbacks: Mutex::new(Vec::new()),
        });
        let limit = limit.clone();
        let gathered = gathered.clone();
        set.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let (summary, partial) = ctx.run(inspector, recency).await;
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

/// One file's work: its chunks, the frozen intent, and its fallbacks.
pub(crate) struct FileCtx {
    pub(crate) fx: Arc<FlowCtx>,
    pub(crate) cfg: FlowsConfig,
    pub(crate) agent: String,
    pub(crate) question: String,
    pub(crate) intent: Intent,
    pub(crate) file: FileWork,
    fallbacks: Mutex<Vec<String>>,
}

/// What an inspector selected.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// Selected chunk ids (any order; duplicates and unknown ids are removed later).
    pub(crate) chunk_ids: Vec<String>,
    pub(crate) confidence: Option<f64>,
    pub(crate) chunk_confidence: BTreeMap<String, f64>,
    pub(crate) depth: Option<u32>,
    pub(crate) extracted: Option<Value>,
    /// Why the run is partial, when a budget stopped the inspector.
    pub(crate) partial: Option<String>,
}

impl FileCtx {
    /// Records and emits a fallback of this file.
    pub(crate) fn fallback(&self, kind: &str, reason: &str) {
        self.fx.fallback(&self.agent, kind, reason);
        self.fallbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{kind}: {reason}"));
    }

    /// The first `n` chunk ids of the file in document order.
    pub(crate) fn first_ids(&self, n: usize) -> Vec<String> {
        self.file
            .chunks
            .iter()
            .take(n)
            .map(|c| c.id.clone())
            .collect()
    }

    async fn run(
        self: Arc<Self>,
        inspector: Inspector,
        recency: bool,
    ) -> (FileSummary, Option<String>) {
        self.fx.step(
            &self.agent,
            "inspector",
            format!(
                "Inspecting {} ({} chunks) with the {} inspector",
                self.file.path,
                self.file.chunks.len(),
                inspector.as_str()
            ),
            json!({"file_id": self.file.doc_id, "path": self.file.path, "chunks": self.file.chunks.len(), "inspector": inspector}),
        );
        let sel = match inspector {
            Inspector::PerChunk => inspector_per_chunk::run(&self).await,
            Inspector::Iterative => inspector_iterative::run(&self).await,
            Inspector::Hypothesis => inspector_hypothesis::run(&self).await,
            Inspector::Repl => inspector_repl::run(&self).await,
        };
        let chosen = select::post_select(&self.file.chunks, &sel.chunk_ids, &self.cfg, recency);
        self.fx.step(
            &self.agent,
            "selection",
            format!(
                "{}: {} chunk(s) selected by the inspector, {} kept after MAX_SELECTED_CHUNKS_PER_FILE={} and MAX_TOTAL_CHARS_FOR_SUMMARY={}",
                self.file.path,
                sel.chunk_ids.len(),
                chosen.len(),
                self.cfg.max_selected_chunks_per_file,
                self.cfg.max_total_chars_for_summary
            ),
            json!({"inspector_selected": sel.chunk_ids, "kept": chosen.iter().map(|c| &c.id).collect::<Vec<_>>(), "confidence": sel.confidence}),
        );
        let (summary, summary_partial) =
            merge::summarize_file(&self, &chosen, sel.extracted.as_ref()).await;
        let fallbacks = self
            .fallbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        (
            FileSummary {
                file_id: self.file.doc_id.clone(),
                path: self.file.path.clone(),
                inspector,
                entry_chunk_ids: self.file.entry_chunk_ids.clone(),
                total_chunks: self.file.chunks.len(),
                selected_chunk_ids: chosen.iter().map(|c| c.id.clone()).collect(),
                summary,
                confidence: sel.confidence,
                chunk_confidence: sel.chunk_confidence,
                depth: sel.depth,
                extracted_data: sel.extracted,
                recency_ordered: recency,
                fallbacks,
                rank: self.file.rank,
            },
            sel.partial.or(summary_partial),
        )
    }
}

/// A failed call's reason, and whether a budget (not the model) refused it.
pub(crate) fn call_failure(e: &FlowCallError) -> (bool, String) {
    match e {
        FlowCallError::Budget(b) => (true, b.to_string()),
        FlowCallError::Model(_) => (false, e.to_string()),
    }
}
