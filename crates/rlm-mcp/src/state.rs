//! What every request of one MCP server shares: where the store comes from
//! (`rlm mcp`'s own, reopened after the `index` tool changed it, or the
//! store of the `rlm serve` it runs in: a folder or PostgreSQL), the limits.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rlm_corpus::{CorpusStore, Embedder, IndexOptions, IndexReport};
use rlm_engine::{Corpus, Engine, SessionBackend};
use tokio::sync::Semaphore;

/// The store as the tools read it: opened once, replaced whole after an
/// `index` call (or a re-index of the server).
#[derive(Clone)]
pub struct StoreView {
    /// Lookups and search (a store folder, or under `rlm serve` a
    /// PostgreSQL store too).
    pub store: Arc<dyn CorpusStore>,
    /// The documents as the engine reads them.
    pub corpus: Arc<Corpus>,
    /// The query embedder of a store with embeddings.
    pub embedder: Option<Arc<dyn Embedder>>,
}

/// What `rlm mcp` asks of the program it runs in about its store (the
/// `rlm` binary opens stores, indexes and finds sessions as its other
/// commands do). Every method may block.
pub trait StoreHost: Send + Sync {
    /// Opens the store and loads what the tools read.
    fn open(&self) -> anyhow::Result<StoreView>;
    /// Indexes `paths` into the store (the `index` tool).
    fn index(&self, paths: &[PathBuf], options: &IndexOptions) -> anyhow::Result<IndexReport>;
    /// The sessions kept with the store, where `ask`'s turns go (as
    /// `rlm ask --session` keeps them).
    fn sessions(&self) -> anyhow::Result<Box<dyn SessionBackend>>;
}

/// The server's shared state.
pub(super) struct McpState {
    /// The store folder (`rlm mcp`'s; sessions and the `index` tool use
    /// it). Under `rlm serve` the server's store location, for messages.
    pub store_dir: PathBuf,
    /// Who answers and holds the store.
    pub backend: Backend,
    /// The `index` tool is listed and works (`rlm mcp --allow-index`).
    pub allow_index: bool,
    /// Longest question, in characters.
    pub max_question_chars: usize,
}

/// Where the store and the engine come from.
pub(super) enum Backend {
    /// `rlm mcp`: the store this process opened, its own engine.
    Own(Box<OwnStore>),
    /// `rlm serve`: the server's store, corpus and runs; a re-index through
    /// the server's API is seen by the next call.
    Served(Served),
}

/// `rlm mcp`'s store and engine.
pub(super) struct OwnStore {
    view: RwLock<Option<StoreView>>,
    /// Model client, sandbox pool and the engine settings every question
    /// starts from.
    pub engine: Engine,
    /// Opens and indexes the store, keeps its sessions.
    pub host: Box<dyn StoreHost>,
    /// `--briefing`.
    pub briefing: Option<String>,
    /// Questions answered at once; more wait for a slot.
    pub runs: Arc<Semaphore>,
    /// One `index` call at a time.
    pub indexing: tokio::sync::Mutex<()>,
}

/// The `rlm serve` the MCP endpoint runs in.
pub(super) struct Served {
    /// The server: its store and corpus as of now, its runs and limits.
    pub app: Arc<rlm_server::App>,
    /// The query embedder the server answers with.
    pub embedder: Option<Arc<dyn Embedder>>,
}

impl OwnStore {
    /// `rlm mcp`'s store over `view` (`None`: no store yet, `--allow-index` only).
    pub(super) fn new(
        view: Option<StoreView>,
        engine: Engine,
        host: Box<dyn StoreHost>,
        briefing: Option<String>,
        max_runs: usize,
    ) -> Self {
        OwnStore {
            view: RwLock::new(view),
            engine,
            host,
            briefing,
            runs: Arc::new(Semaphore::new(max_runs)),
            indexing: tokio::sync::Mutex::new(()),
        }
    }

    /// Replaces the store after an `index` call.
    pub(super) fn replace(&self, view: StoreView) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = Some(view);
    }
}

impl McpState {
    /// The store as it is now, or why there is none (a message for the caller).
    pub(super) fn view(&self) -> Result<StoreView, String> {
        match &self.backend {
            Backend::Own(own) => {
                let guard = own.view.read().unwrap_or_else(|p| p.into_inner());
                guard.clone().ok_or_else(|| {
                    format!(
                        "the store {} has no documents yet; call the `index` tool with the files or folders to add",
                        self.store_dir.display()
                    )
                })
            }
            // The server's store and corpus of the moment (an indexing job,
            // or a re-index of a shared store seen by the server, swaps them).
            Backend::Served(s) => {
                let corpus = s.app.current_corpus();
                Ok(StoreView {
                    store: corpus.store().clone(),
                    corpus,
                    embedder: s.embedder.clone(),
                })
            }
        }
    }
}
