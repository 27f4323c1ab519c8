//! What every request of one `rlm mcp` server shares: the store (reopened
//! after the `index` tool changed it), the engine, the limits.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rlm_corpus::{Embedder, Store};
use rlm_engine::{Corpus, Engine};
use rlm_llm::LlmConfig;
use tokio::sync::Semaphore;

/// The store as the tools read it: opened once, replaced whole after an
/// `index` call.
#[derive(Clone)]
pub(super) struct StoreView {
    /// Lookups and search.
    pub store: Arc<Store>,
    /// The documents as the engine reads them.
    pub corpus: Arc<Corpus>,
    /// The query embedder of a store with embeddings.
    pub embedder: Option<Arc<dyn Embedder>>,
}

/// The server's shared state.
pub(super) struct McpState {
    /// The `--store` folder.
    pub store_dir: PathBuf,
    view: RwLock<Option<StoreView>>,
    /// Model client, sandbox pool and the engine settings every question
    /// starts from.
    pub engine: Engine,
    /// Model settings (the query embedder of a provider's embeddings uses
    /// its endpoint).
    pub llm: LlmConfig,
    /// `--config`.
    pub config_file: Option<PathBuf>,
    /// `--briefing`.
    pub briefing: Option<String>,
    /// `--allow-index`: the `index` tool is listed and works.
    pub allow_index: bool,
    /// Longest question, in characters.
    pub max_question_chars: usize,
    /// Questions answered at once; more wait for a slot.
    pub runs: Arc<Semaphore>,
    /// One `index` call at a time.
    pub indexing: tokio::sync::Mutex<()>,
}

impl McpState {
    /// The state over `view` (`None`: no store yet, `--allow-index` only).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        store_dir: PathBuf,
        view: Option<StoreView>,
        engine: Engine,
        llm: LlmConfig,
        config_file: Option<PathBuf>,
        briefing: Option<String>,
        allow_index: bool,
        max_question_chars: usize,
        max_runs: usize,
    ) -> Self {
        McpState {
            store_dir,
            view: RwLock::new(view),
            engine,
            llm,
            config_file,
            briefing,
            allow_index,
            max_question_chars,
            runs: Arc::new(Semaphore::new(max_runs)),
            indexing: tokio::sync::Mutex::new(()),
        }
    }

    /// The store as it is now, or why there is none (a message for the caller).
    pub(super) fn view(&self) -> Result<StoreView, String> {
        let guard = self.view.read().unwrap_or_else(|p| p.into_inner());
        guard.clone().ok_or_else(|| {
            format!(
                "the store {} has no documents yet; call the `index` tool with the files or folders to add",
                self.store_dir.display()
            )
        })
    }

    /// Replaces the store after an `index` call.
    pub(super) fn replace(&self, view: StoreView) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = Some(view);
    }
}

/// Opens the store at `dir` and loads what the tools read (blocking: SQLite,
/// tantivy, the documents' text, maybe an embedding model).
pub(super) fn open_view(
    dir: &Path,
    llm: &LlmConfig,
    config_file: Option<&Path>,
) -> anyhow::Result<StoreView> {
    let store = Arc::new(Store::open(dir)?);
    let corpus = Arc::new(Corpus::load(store.clone())?);
    let embedder = crate::commands::ask::query_embedder(store.as_ref(), llm, config_file);
    Ok(StoreView {
        store,
        corpus,
        embedder,
    })
}
