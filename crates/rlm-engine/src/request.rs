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
use crate::values::{ConfigError, Found, LAYER_QUESTION, Reader, Setting, table};

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
    /// A JSON Schema the answer is also returned in ([`crate::TypedAnswer`]).
    pub answer_schema: Option<serde_json::Value>,
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
            answer_schema: None,
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
/// `POST /api/runs`, the MCP `ask` tool, the Python package's keyword
/// arguments), as written: each value is kept with its declaration in the
/// settings table. [`QuestionSettings::resolve`] checks them with the rules
/// every other setting follows and lays them over the engine's settings.
///
/// ```
/// use rlm_engine::values::table;
/// use rlm_engine::{QuestionSettings, Surface};
///
/// let q = QuestionSettings::new(Surface::Api)
///     .with(&table::MAX_LLM_CALLS, Some("80"))
///     .with(&table::VERIFY, None::<String>);
/// assert_eq!(q.get(&table::MAX_LLM_CALLS), Some("80"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuestionSettings {
    /// How errors name the settings.
    pub surface: Surface,
    /// `repl`, `pipeline`, `rag` or `auto`.
    pub flow: Option<String>,
    /// The RLM switch: true → the configured RLM flow, false → `rag`
    /// (ignored when `flow` is given).
    pub use_rlm: Option<bool>,
    /// The other settings given, each one of [`QuestionSettings::SETTINGS`].
    values: Vec<(&'static Setting, String)>,
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
    /// The settings a question can set besides its flow and RLM switch.
    /// Errors name each by its flag ([`Surface::Flags`]) or its API field
    /// ([`Surface::Api`]).
    pub const SETTINGS: [&'static Setting; 16] = [
        &table::COVERAGE,
        &table::SUBCALL_CACHE,
        &table::TURN_FORMAT,
        &table::INSPECTOR,
        &table::CITATIONS,
        &table::VERIFY,
        &table::CONTEXT_SHAPE,
        &table::SANDBOX,
        &table::MAX_LLM_CALLS,
        &table::MAX_ITERATIONS,
        &table::MAX_DEPTH,
        &table::MAX_COST_USD,
        &table::MAX_WALL_SECS,
        // The original system's retrieval toggles: per question only.
        &table::HIGH_RECALL,
        &table::EXPAND_FILES,
        &table::RLM_SUMMARIZE,
    ];

    /// No settings, named the way `surface` names them.
    pub fn new(surface: Surface) -> Self {
        QuestionSettings {
            surface,
            ..Default::default()
        }
    }

    /// With `setting` set to `value` (unchanged when `value` is `None`).
    pub fn with(mut self, setting: &'static Setting, value: Option<impl Into<String>>) -> Self {
        if let Some(v) = value {
            self.set(setting, v);
        }
        self
    }

    /// Sets `setting` to `value`, as written. A setting a question cannot
    /// set is refused by [`resolve`](Self::resolve).
    pub fn set(&mut self, setting: &'static Setting, value: impl Into<String>) {
        let value = value.into();
        match self.values.iter_mut().find(|(s, _)| *s == setting) {
            Some(slot) => slot.1 = value,
            None => self.values.push((setting, value)),
        }
    }

    /// The value given for `setting`, as written.
    pub fn get(&self, setting: &Setting) -> Option<&str> {
        self.values
            .iter()
            .find(|(s, _)| *s == setting)
            .map(|(_, v)| v.as_str())
    }

    fn name(&self, field: &'static str, flag: &'static str) -> &'static str {
        match self.surface {
            Surface::Flags => flag,
            Surface::Api => field,
        }
    }

    /// The question's value for `setting`, named as the user wrote it.
    fn found(&self, setting: &Setting) -> Option<Found> {
        let field = setting.api.unwrap_or(setting.key);
        self.get(setting).map(|v| Found {
            value: v.to_string(),
            name: self.name(field, setting.flag.unwrap_or(field)).to_string(),
            layer: LAYER_QUESTION,
        })
    }

    /// Checks every setting and lays them over `base`. An explicit citation
    /// policy applies to every flow (it beats `RLM_CITATION_POLICY` too).
    pub fn resolve(&self, base: &EngineConfig) -> Result<ResolvedQuestion, ConfigError> {
        if let Some((s, _)) = self
            .values
            .iter()
            .find(|(s, _)| !Self::SETTINGS.contains(s))
        {
            return Err(ConfigError::Invalid(format!(
                "{} cannot be set per question; set it for the engine (docs/configuration.md)",
                s.label()
            )));
        }
        let lookup = |s: &Setting| self.found(s);
        let r = Reader::new(&lookup);
        let mut config = base.clone();
        let mut pipeline = PipelineRequest::default();
        if let Some(v) = r.parsed(&table::CONTEXT_SHAPE)? {
            config.context_shape = v;
        }
        if let Some(v) = r.parsed(&table::SANDBOX)? {
            config.sandbox = v;
        }
        // The CPython sandbox refuses where it cannot isolate (no bubblewrap,
        // no user namespaces, not Linux): a question asking for it is refused
        // here, before any work, with the reason.
        if config.sandbox == rlm_sandbox::SandboxBackend::CPython {
            rlm_sandbox::cpython::launcher(None)
                .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        }
        if let Some(v) = r.parsed(&table::CITATIONS)? {
            config.citation_policy = v;
            pipeline.citation_policy = Some(v);
        }
        if let Some(v) = r.parsed::<VerifyMode>(&table::VERIFY)? {
            v.apply(&mut config);
        }
        if let Some(v) = r.boolean(&table::COVERAGE)? {
            config.coverage = v;
        }
        if let Some(v) = r.parsed(&table::TURN_FORMAT)? {
            config.turn_format = v;
        }
        if let Some(v) = r.boolean(&table::SUBCALL_CACHE)? {
            config.reply_cache = v;
        }
        pipeline.inspector = r.parsed(&table::INSPECTOR)?;
        let b = &mut config.budget;
        if let Some(v) = r.whole(&table::MAX_LLM_CALLS)? {
            b.max_llm_calls = v;
            b.fit_reserve();
        }
        if let Some(v) = r.whole(&table::MAX_ITERATIONS)? {
            b.max_iterations = v;
        }
        if let Some(v) = r.whole(&table::MAX_DEPTH)? {
            b.max_depth = v;
        }
        if let Some(v) = r.number(&table::MAX_COST_USD)? {
            b.max_cost_usd = Some(v);
        }
        if let Some(v) = r.number(&table::MAX_WALL_SECS)? {
            b.wall_clock = Duration::from_secs_f64(v);
        }
        b.validate()?;
        if let Some(v) = r.boolean(&table::HIGH_RECALL)? {
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
    fn pipeline_stages(&self, r: &Reader<'_>, flow: Flow) -> Result<Option<Flow>, ConfigError> {
        let mut wanted: Option<(bool, &'static str)> = None;
        for setting in [&table::EXPAND_FILES, &table::RLM_SUMMARIZE] {
            let Some(v) = r.boolean(setting)? else {
                continue;
            };
            let field = setting.api.unwrap_or(setting.key);
            let name = self.name(field, setting.flag.unwrap_or(field));
            match wanted {
                Some((w, other)) if w != v => {
                    return Err(format!(
                        "{other} and {name} disagree: both true asks for the pipeline flow, both false for rag"
                    ).into());
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
            ).into());
        }
        Ok(Some(target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(f: impl FnOnce(&mut QuestionSettings)) -> Result<ResolvedQuestion, ConfigError> {
        let mut q = QuestionSettings::new(Surface::Api);
        f(&mut q);
        q.resolve(&EngineConfig::default())
    }

    #[test]
    fn the_retrieval_toggles_map_onto_the_pipeline_settings() {
        let r = api(|q| q.set(&table::HIGH_RECALL, "false")).unwrap();
        assert!(r.config.flows.low_recall_mode);
        assert_eq!(r.flow, Flow::Configured);
        let r = api(|q| q.set(&table::HIGH_RECALL, "true")).unwrap();
        assert!(!r.config.flows.low_recall_mode);
        let r = api(|q| q.set(&table::EXPAND_FILES, "true")).unwrap();
        assert_eq!(r.flow, Flow::Pipeline);
        let r = api(|q| {
            q.set(&table::RLM_SUMMARIZE, "false");
            q.set(&table::EXPAND_FILES, "false");
        })
        .unwrap();
        assert_eq!(r.flow, Flow::Rag);
        let r = api(|q| {
            q.flow = Some("pipeline".into());
            q.set(&table::RLM_SUMMARIZE, "true");
        })
        .unwrap();
        assert_eq!(r.flow, Flow::Pipeline);

        let e = api(|q| q.set(&table::HIGH_RECALL, "maybe"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "high_recall=\"maybe\" is not a boolean; use true or false"
        );
        let e = api(|q| {
            q.flow = Some("repl".into());
            q.set(&table::EXPAND_FILES, "true");
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("expand_files=true conflicts with flow=repl"),
            "{e}"
        );
        let e = api(|q| {
            q.use_rlm = Some(true);
            q.set(&table::RLM_SUMMARIZE, "false");
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("rlm_summarize=false conflicts with use_rlm=true"),
            "{e}"
        );
        let e = QuestionSettings::new(Surface::Flags)
            .with(&table::EXPAND_FILES, Some("true"))
            .with(&table::RLM_SUMMARIZE, Some("false"))
            .resolve(&EngineConfig::default())
            .unwrap_err()
            .to_string();
        assert!(
            // API-only toggles are named by their field on every surface.
            e.starts_with("expand_files and rlm_summarize disagree"),
            "{e}"
        );
    }

    #[test]
    fn a_setting_of_the_engine_is_not_a_question_setting() {
        let e = api(|q| q.set(&table::MAX_TOKENS, "5"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "RLM_MAX_TOKENS cannot be set per question; set it for the engine (docs/configuration.md)"
        );
        // Setting twice keeps the last value.
        let q = QuestionSettings::new(Surface::Api)
            .with(&table::MAX_DEPTH, Some("1"))
            .with(&table::MAX_DEPTH, Some("3"));
        assert_eq!(q.get(&table::MAX_DEPTH), Some("3"));
        assert_eq!(
            q.resolve(&EngineConfig::default())
                .unwrap()
                .config
                .budget
                .max_depth,
            3
        );
    }
}
