//! One question as the engine receives it: [`AskRequest`] (the question, the
//! flow, the session, where events go, how to stop it) and the per-question
//! settings of the retrieval flows ([`PipelineRequest`]).

use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::citations::CitationPolicy;
use crate::config::{Flow, Inspector};
use crate::session::SessionState;
use crate::trace::Trace;

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
