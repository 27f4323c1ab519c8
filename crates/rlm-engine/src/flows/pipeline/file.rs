//! One file's work in the `pipeline` flow, shared by the inspectors, the
//! summary and the flow: the file's chunks, the frozen intent, its fallbacks,
//! and what an inspector selected.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::answer::Intent;
use crate::config::FlowsConfig;
use crate::retrieval::FileWork;
use crate::run::{CallError, Run};

/// One file's work: its chunks, the frozen intent, and its fallbacks.
pub(crate) struct FileCtx {
    pub(crate) fx: Arc<Run>,
    pub(crate) cfg: FlowsConfig,
    pub(crate) agent: String,
    pub(crate) question: String,
    pub(crate) intent: Intent,
    pub(crate) file: FileWork,
    pub(crate) fallbacks: Mutex<Vec<String>>,
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
}

/// A failed call's reason, and whether a budget (not the model) refused it.
pub(crate) fn call_failure(e: &CallError) -> (bool, String) {
    match e {
        CallError::Budget(b) => (true, b.to_string()),
        CallError::Model(_) => (false, e.to_string()),
    }
}
