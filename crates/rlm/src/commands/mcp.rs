//! `rlm mcp`: the Model Context Protocol server (the `rlm-mcp` crate) over
//! stdio, on a store folder this command opens, indexes and keeps sessions
//! for as `rlm index` and `rlm ask` do.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rlm_corpus::{CorpusStore, IndexOptions, IndexReport, Store};
use rlm_engine::{Corpus, Engine, EngineSettings, SessionBackend, SettingsFile};
use rlm_llm::LlmConfig;
use rlm_mcp::{StdioOptions, StoreHost, StoreView};
use rlm_sandbox::WorkerPool;

use super::ask::{query_embedder, read_briefing, sandbox_config, store_sessions};
use super::corpus::{StoreArg, index_paths};
use super::llm::LlmFlags;

/// Arguments of `rlm mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// List the `index` tool, which reads files and folders of this machine
    /// into the store (off: the tool is neither listed nor run). With it,
    /// the store may not exist yet.
    #[arg(long)]
    pub allow_index: bool,
    /// Questions answered at once; more `ask` calls wait for a slot.
    #[arg(long, env = "RLM_MCP_MAX_RUNS", default_value_t = 2, value_name = "N")]
    pub max_runs: usize,
    /// Longest accepted question, in characters.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_question_chars: usize,
    /// Domain instructions for every question's system prompt (like a project's PROMPT.md).
    #[arg(long, value_name = "FILE")]
    pub briefing: Option<PathBuf>,
    #[command(flatten)]
    pub llm: LlmFlags,
}

/// The store folder of `rlm mcp`, opened, indexed and with its sessions as
/// the other commands have them.
struct StoreFolder {
    dir: PathBuf,
    /// Model settings (the query embedder of a provider's embeddings uses
    /// its endpoint).
    llm: LlmConfig,
    /// `--config`.
    config_file: Option<PathBuf>,
}

impl StoreHost for StoreFolder {
    fn open(&self) -> anyhow::Result<StoreView> {
        let store: Arc<dyn CorpusStore> = Arc::new(Store::open(&self.dir)?);
        let corpus = Arc::new(Corpus::load(store.clone())?);
        let embedder = query_embedder(store.as_ref(), &self.llm, self.config_file.as_deref());
        Ok(StoreView {
            store,
            corpus,
            embedder,
        })
    }

    fn index(&self, paths: &[PathBuf], options: &IndexOptions) -> anyhow::Result<IndexReport> {
        index_paths(&self.dir, paths, options, false)
    }

    fn sessions(&self) -> anyhow::Result<Box<dyn SessionBackend>> {
        store_sessions(&self.dir)
    }
}

/// `rlm mcp`.
pub fn mcp(args: McpArgs) -> anyhow::Result<()> {
    if args.max_runs == 0 {
        anyhow::bail!("--max-runs 0 would refuse every question; use 1 or more");
    }
    if args.max_question_chars == 0 {
        anyhow::bail!("--max-question-chars must be 1 or more");
    }
    let settings = SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = settings.engine_config().map_err(anyhow::Error::msg)?;
    let briefing = read_briefing(args.briefing.as_deref())?;
    let llm_config = args.llm.load_for_answering()?;
    let dir = &args.store.store;
    if super::corpus::postgres_url(dir).is_some() {
        anyhow::bail!(
            "rlm mcp reads store folders only, not PostgreSQL stores yet: give --store a folder"
        );
    }
    let host = StoreFolder {
        dir: dir.clone(),
        llm: llm_config.clone(),
        config_file: args.llm.config.clone(),
    };
    let view = open_unless_indexing(&host, dir, args.allow_index)?;
    config.set_models(
        &llm_config.root.model,
        &llm_config.sub.model,
        llm_config.provider == rlm_llm::ProviderKind::Local,
    );
    let client = rlm_llm::LlmClient::from_config(llm_config)?;
    // The protocol's stdout is taken before anything else can print.
    let output = rlm_mcp::protocol_output()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let options = StdioOptions {
        store_dir: dir.clone(),
        allow_index: args.allow_index,
        max_runs: args.max_runs,
        max_question_chars: args.max_question_chars,
        briefing,
    };
    let outcome = runtime.block_on(async {
        let pool = WorkerPool::new(sandbox_config(config.sandbox)?, args.max_runs).await?;
        let engine = Engine::new(Arc::new(client), pool, config);
        let transport = (tokio::io::stdin(), output);
        rlm_mcp::serve_stdio(
            engine,
            view,
            Box::new(host),
            options,
            transport,
            super::shutdown_signal(),
        )
        .await?;
        anyhow::Ok(())
    });
    // Runs still going when the client left were cancelled with the session
    // (the SDK first gives running handlers 5 s to answer); blocking reads
    // of stdin cannot be cancelled, so do not wait for them.
    runtime.shutdown_timeout(Duration::from_secs(2));
    outcome
}

/// The store at `dir` as the tools read it; with `--allow-index`, `None`
/// when it is not a store yet (an agent may build it with the `index` tool).
fn open_unless_indexing(
    host: &StoreFolder,
    dir: &Path,
    allow_index: bool,
) -> anyhow::Result<Option<StoreView>> {
    match host.open() {
        Ok(v) => Ok(Some(v)),
        Err(e)
            if allow_index
                && matches!(
                    e.downcast_ref::<rlm_corpus::CorpusError>(),
                    Some(rlm_corpus::CorpusError::NotAStore(_))
                ) =>
        {
            eprintln!(
                "rlm mcp: {} is not a store yet; the `index` tool creates it",
                dir.display()
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
