//! One question as the engine receives it: [`AskRequest`] (the question, the
//! flow, the session, where events go, how to stop it), the per-question
//! settings of the retrieval flows ([`PipelineRequest`]), and
//! [`QuestionSettings`], the overrides a user gives per question, checked in
//! one place for every surface (`rlm ask`, `rlm serve`).

use std::sync::Arc;
use std::time::Duration;

use crate::cancel::CancelToken;
use crate::citations::CitationPolicy;
use crate::config::{EngineConfig, Flow, Inspector, VerifyMode};
use crate::session::SessionState;
use crate::trace::Trace;
use crate::values::{Found, LAYER_QUESTION, Reader};

/// One question.
#[derive(Debug, Clone)]
pub struct AskRequest {
    /// The question.
    pub question: String,
    /// The strategy.
    pub flow: Flow,
    /// Domain instructions added to the system prompt (a briefing file, like a project's PROMPT.md).
    pub briefing: Option<String>,
    /// Earlier turns and findings of the session, if any.
    pub session: Option<SessionState>,
    /// Where events go.
    pub trace: Arc<Trace>,
    /// Stops the run early; the answer is then partial.
    pub cancel: CancelToken,
    /// Per-request settings of the `pipeline` flow (inspector, citation policy).
    pub pipeline: PipelineRequest,
}

impl AskRequest {
    /// A request with no briefing, no session, a broadcast-only trace.
    pub fn new(question: impl Into<String>) -> Self {
        AskRequest {
            question: question.into(),
            flow: Flow::Configured,
            briefing: None,
            session: None,
            trace: Arc::new(Trace::new()),
            cancel: CancelToken::new(),
            pipeline: PipelineRequest::default(),
        }
    }
}

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

/// Where a question's settings were written: how errors name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Surface {
    /// Command-line flags (`--max-depth`).
    #[default]
    Flags,
    /// Fields of an API request (`max_depth`).
    Api,
}

/// The settings a user may give per question (`rlm ask` flags, the fields of
/// `POST /api/runs`), as written. [`QuestionSettings::resolve`] checks them
/// with the rules every other setting follows ([`crate::values`]) and lays
/// them over the engine's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuestionSettings {
    /// How errors name the settings.
    pub surface: Surface,
    /// `repl`, `pipeline`, `rag` or `auto`.
    pub flow: Option<String>,
    /// The RLM switch: true → the configured RLM flow, false → `rag`
    /// (ignored when `flow` is given).
    pub use_rlm: Option<bool>,
    /// The `pipeline` flow's per-file inspector.
    pub inspector: Option<String>,
    /// `strict` or `best_effort` (for every flow).
    pub citations: Option<String>,
    /// Checks of the answer: `on`, `off` or `semantic`.
    pub verify: Option<String>,
    /// `string` or `list`.
    pub context_shape: Option<String>,
    /// Which Python runs the REPL: `monty` or `cpython`.
    pub sandbox: Option<String>,
    /// Report the documents that match the question but back no claim.
    pub coverage: Option<String>,
    /// Model calls across the call tree.
    pub max_llm_calls: Option<String>,
    /// Model turns of the root agent.
    pub max_iterations: Option<String>,
    /// Deepest agent level.
    pub max_depth: Option<String>,
    /// Cost cap in USD.
    pub max_cost_usd: Option<String>,
    /// Wall-clock cap in seconds.
    pub max_wall_secs: Option<String>,
    /// The `pipeline` flow's stage-1 retrieval: `RLM_HIGH_RECALL_K` entry
    /// chunks when true, `RLM_RAG_K` when false (`RLM_LOW_RECALL_MODE`
    /// inverted).
    pub high_recall: Option<String>,
    /// The `pipeline` flow's expansion of entry chunks to whole files: true
    /// asks for the pipeline, false for `rag` (no expansion).
    pub expand_files: Option<String>,
    /// The `pipeline` flow's per-file inspection and summaries: true asks
    /// for the pipeline, false for `rag` (chunks answered directly).
    pub rlm_summarize: Option<String>,
}

/// A question's settings laid over the engine's.
#[derive(Debug, Clone)]
pub struct ResolvedQuestion {
    /// The engine settings for this question.
    pub config: EngineConfig,
    /// The flow asked for ([`Flow::Configured`] when none was).
    pub flow: Flow,
    /// The inspector and citation policy the question set, if it did.
    pub pipeline: PipelineRequest,
}

impl QuestionSettings {
    /// Each setting: its field, its flag, the `RLM_*` key whose rules it follows.
    const SETTINGS: [(&'static str, &'static str, &'static str); 14] = [
        ("coverage", "--coverage", "RLM_COVERAGE"),
        ("inspector", "--inspector", "RLM_INSPECTOR"),
        ("citations", "--citations", "RLM_CITATIONS"),
        ("verify", "--verify", "RLM_VERIFY"),
        ("context_shape", "--context-shape", "RLM_CONTEXT_SHAPE"),
        ("sandbox", "--sandbox", "RLM_SANDBOX"),
        ("max_llm_calls", "--max-llm-calls", "RLM_MAX_LLM_CALLS"),
        ("max_iterations", "--max-iterations", "RLM_MAX_CALLS"),
        ("max_depth", "--max-depth", "RLM_MAX_DEPTH"),
        ("max_cost_usd", "--max-cost-usd", "RLM_MAX_COST_USD"),
        ("max_wall_secs", "--max-wall-secs", "RLM_MAX_WALL_SECS"),
        // The original system's retrieval toggles: per question only.
        ("high_recall", "--high-recall", "high_recall"),
        ("expand_files", "--expand-files", "expand_files"),
        ("rlm_summarize", "--rlm-summarize", "rlm_summarize"),
    ];

    fn field(&self, name: &str) -> Option<&String> {
        match name {
            "inspector" => self.inspector.as_ref(),
            "citations" => self.citations.as_ref(),
            "verify" => self.verify.as_ref(),
            "coverage" => self.coverage.as_ref(),
            "context_shape" => self.context_shape.as_ref(),
            "sandbox" => self.sandbox.as_ref(),
            "max_llm_calls" => self.max_llm_calls.as_ref(),
            "max_iterations" => self.max_iterations.as_ref(),
            "max_depth" => self.max_depth.as_ref(),
            "max_cost_usd" => self.max_cost_usd.as_ref(),
            "max_wall_secs" => self.max_wall_secs.as_ref(),
            "high_recall" => self.high_recall.as_ref(),
            "expand_files" => self.expand_files.as_ref(),
            "rlm_summarize" => self.rlm_summarize.as_ref(),
            _ => None,
        }
    }

    fn name(&self, field: &'static str, flag: &'static str) -> &'static str {
        match self.surface {
            Surface::Flags => flag,
            Surface::Api => field,
        }
    }

    /// The question's value for `key`, named as the user wrote it.
    fn found(&self, key: &str) -> Option<Found> {
        let (field, flag, _) = Self::SETTINGS.iter().find(|(_, _, k)| *k == key)?;
        self.field(field).map(|v| Found {
            value: v.clone(),
            name: self.name(field, flag).to_string(),
            layer: LAYER_QUESTION,
        })
    }

    /// Checks every setting and lays them over `base`. An explicit citation
    /// policy applies to every flow (it beats `RLM_CITATION_POLICY` too).
    pub fn resolve(&self, base: &EngineConfig) -> Result<ResolvedQuestion, String> {
        let lookup = |k: &str| self.found(k);
        let r = Reader::new(&lookup);
        let mut config = base.clone();
        let mut pipeline = PipelineRequest::default();
        if let Some(v) = r.parsed("RLM_CONTEXT_SHAPE")? {
            config.context_shape = v;
        }
        if let Some(v) = r.parsed("RLM_SANDBOX")? {
            config.sandbox = v;
        }
        // The CPython sandbox refuses where it cannot isolate (no bubblewrap,
        // no user namespaces, not Linux): a question asking for it is refused
        // here, before any work, with the reason.
        if config.sandbox == rlm_sandbox::SandboxBackend::CPython {
            rlm_sandbox::cpython::launcher(None).map_err(|e| e.to_string())?;
        }
        if let Some(v) = r.parsed("RLM_CITATIONS")? {
            config.citation_policy = v;
            pipeline.citation_policy = Some(v);
        }
        if let Some(v) = r.parsed::<VerifyMode>("RLM_VERIFY")? {
            v.apply(&mut config);
        }
        if let Some(v) = r.boolean("RLM_COVERAGE")? {
            config.coverage = v;
        }
        pipeline.inspector = r.parsed("RLM_INSPECTOR")?;
        let b = &mut config.budget;
        if let Some(v) = r.whole("RLM_MAX_LLM_CALLS")? {
            b.max_llm_calls = v;
            b.fit_reserve();
        }
        if let Some(v) = r.whole("RLM_MAX_CALLS")? {
            b.root_iterations = v;
        }
        if let Some(v) = r.whole("RLM_MAX_DEPTH")? {
            b.max_depth = v;
        }
        if let Some(v) = r.number("RLM_MAX_COST_USD")? {
            b.max_cost_usd = Some(v);
        }
        if let Some(v) = r.number("RLM_MAX_WALL_SECS")? {
            b.wall_clock = Duration::from_secs_f64(v);
        }
        b.validate()?;
        if let Some(v) = r.boolean("high_recall")? {
            config.flows.low_recall_mode = !v;
        }
        let mut flow = match (&self.flow, self.use_rlm) {
            (Some(f), _) => f
                .parse::<Flow>()
                .map_err(|e| format!("{}: {e}", self.name("flow", "--flow")))?,
            (None, Some(true)) => config.flows.rlm_flow,
            (None, Some(false)) => Flow::Rag,
            (None, None) => Flow::Configured,
        };
        if let Some(stages) = self.pipeline_stages(&r, flow)? {
            flow = stages;
        }
        Ok(ResolvedQuestion {
            config,
            flow,
            pipeline,
        })
    }

    /// The flow `expand_files` and `rlm_summarize` ask for (the pipeline's
    /// stages after retrieval: true → `pipeline`, false → `rag`), or a
    /// conflict with the flow or RLM switch the question also set.
    fn pipeline_stages(&self, r: &Reader<'_>, flow: Flow) -> Result<Option<Flow>, String> {
        let mut wanted: Option<(bool, &'static str)> = None;
        for (field, flag) in [
            ("expand_files", "--expand-files"),
            ("rlm_summarize", "--rlm-summarize"),
        ] {
            let Some(v) = r.boolean(field)? else {
                continue;
            };
            let name = self.name(field, flag);
            match wanted {
                Some((w, other)) if w != v => {
                    return Err(format!(
                        "{other} and {name} disagree: both true asks for the pipeline flow, both false for rag"
                    ));
                }
                _ => wanted = Some((v, name)),
            }
        }
        let Some((on, name)) = wanted else {
            return Ok(None);
        };
        let target = if on { Flow::Pipeline } else { Flow::Rag };
        let conflict = match (&self.flow, self.use_rlm) {
            (Some(_), _) => flow != target,
            (None, Some(rlm)) => rlm != on,
            (None, None) => false,
        };
        if conflict {
            let (what, by) = match &self.flow {
                Some(f) => (f.as_str(), self.name("flow", "--flow")),
                None if on => ("false", "use_rlm"),
                None => ("true", "use_rlm"),
            };
            return Err(format!(
                "{name}={on} conflicts with {by}={what}: {name}={on} asks for the {} flow; drop one of them",
                target.as_str()
            ));
        }
        Ok(Some(target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(f: impl FnOnce(&mut QuestionSettings)) -> Result<ResolvedQuestion, String> {
        let mut q = QuestionSettings {
            surface: Surface::Api,
            ..QuestionSettings::default()
        };
        f(&mut q);
        q.resolve(&EngineConfig::default())
    }

    #[test]
    fn the_retrieval_toggles_map_onto_the_pipeline_settings() {
        let r = api(|q| q.high_recall = Some("false".into())).unwrap();
        assert!(r.config.flows.low_recall_mode);
        assert_eq!(r.flow, Flow::Configured);
        let r = api(|q| q.high_recall = Some("true".into())).unwrap();
        assert!(!r.config.flows.low_recall_mode);
        let r = api(|q| q.expand_files = Some("true".into())).unwrap();
        assert_eq!(r.flow, Flow::Pipeline);
        let r = api(|q| {
            q.rlm_summarize = Some("false".into());
            q.expand_files = Some("false".into());
        })
        .unwrap();
        assert_eq!(r.flow, Flow::Rag);
        let r = api(|q| {
            q.flow = Some("pipeline".into());
            q.rlm_summarize = Some("true".into());
        })
        .unwrap();
        assert_eq!(r.flow, Flow::Pipeline);

        let e = api(|q| q.high_recall = Some("maybe".into())).unwrap_err();
        assert_eq!(
            e,
            "high_recall=\"maybe\" is not a boolean; use true or false"
        );
        let e = api(|q| {
            q.flow = Some("repl".into());
            q.expand_files = Some("true".into());
        })
        .unwrap_err();
        assert!(
            e.starts_with("expand_files=true conflicts with flow=repl"),
            "{e}"
        );
        let e = api(|q| {
            q.use_rlm = Some(true);
            q.rlm_summarize = Some("false".into());
        })
        .unwrap_err();
        assert!(
            e.starts_with("rlm_summarize=false conflicts with use_rlm=true"),
            "{e}"
        );
        let e = QuestionSettings {
            surface: Surface::Flags,
            expand_files: Some("true".into()),
            rlm_summarize: Some("false".into()),
            ..QuestionSettings::default()
        }
        .resolve(&EngineConfig::default())
        .unwrap_err();
        assert!(
            e.starts_with("--expand-files and --rlm-summarize disagree"),
            "{e}"
        );
    }
}
