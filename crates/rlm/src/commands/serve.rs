//! `rlm serve`: the HTTP API and the web UI over one store.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use rlm_engine::{Engine, EngineSettings, SettingsFile};
use rlm_sandbox::WorkerPool;
use rlm_server::{App, Limits, ServerOptions};

use super::ShutdownSignal;
use super::ask::{query_embedder, read_briefing, sandbox_config};
use super::corpus::{StoreArg, postgres_url};
use super::llm::LlmFlags;

/// How often, at most, a node over PostgreSQL reads the store's generation
/// (one indexed row) to notice a re-index: from the questions and document
/// requests it answers, so an idle node reads nothing.
const GENERATION_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Arguments of `rlm serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Address to listen on; port 0 picks a free one (the first line on stdout says which).
    #[arg(long, env = "RLM_SERVE_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Questions answered at once; more get 429 Too Many Requests.
    #[arg(
        long,
        env = "RLM_SERVE_MAX_RUNS",
        default_value_t = 2,
        value_name = "N"
    )]
    pub max_runs: usize,
    /// Longest accepted question, in characters.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_question_chars: usize,
    /// Finished runs kept on disk in <store>/runs/ (answer and trace); older ones are deleted.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub keep_runs: usize,
    /// Seconds a client has to send a request's head (and, on a kept-alive connection, to start the next request); the connection is closed beyond.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub header_timeout: f64,
    /// Seconds a client has to send a request's whole body; 408 beyond.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub body_timeout: f64,
    /// Seconds a write to a client may stay blocked (it stopped reading, e.g. an event stream) before the connection is closed.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub write_timeout: f64,
    /// Connections open at once; more are answered 503 and closed.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections: usize,
    /// Connections open at once from one client address; more are answered 503 (behind a proxy, raise it to --max-connections).
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub max_connections_per_client: usize,
    /// Domain instructions for every question's system prompt (like a project's PROMPT.md; `{date}` becomes today's date); a request's own `briefing` replaces it.
    #[arg(long, value_name = "FILE")]
    pub briefing: Option<PathBuf>,
    /// Longest accepted briefing in a request, in characters.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_briefing_chars: usize,
    /// Bearer token every /api, /v1 and /mcp request must carry (Authorization: Bearer T); the page asks for it once.
    #[arg(
        long,
        env = "RLM_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "T"
    )]
    pub token: Option<String>,
    /// Listen on a non-loopback address without a token (only behind a proxy that authenticates).
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Host name the server also answers to (besides localhost and its address), e.g. behind a proxy; repeatable. Other Host headers get 403 (DNS rebinding guard).
    #[arg(
        long = "allowed-host",
        env = "RLM_SERVE_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub allowed_hosts: Vec<String>,
    /// Let the page upload files (POST /api/uploads): they are saved in --upload-dir and indexed.
    #[arg(long)]
    pub allow_upload: bool,
    /// Where uploads are saved (default: <store>-uploads beside the store).
    #[arg(long, value_name = "DIR")]
    pub upload_dir: Option<PathBuf>,
    /// Largest uploaded file, in bytes.
    #[arg(long, default_value_t = 64 << 20, value_name = "N")]
    pub max_upload_bytes: usize,
    /// Let API clients index a path on the server (POST /api/index); needs --token and --index-root.
    #[arg(long)]
    pub allow_index_paths: bool,
    /// A folder POST /api/index may read (with --allow-index-paths); repeatable.
    #[arg(long = "index-root", value_name = "DIR")]
    pub index_roots: Vec<PathBuf>,
    /// A folder or file the store was indexed from, re-read by POST /api/reindex; repeatable.
    #[arg(long = "source", value_name = "PATH")]
    pub sources: Vec<PathBuf>,
    /// Do not serve the Model Context Protocol at /mcp (streamable HTTP; on by default, behind the same token).
    #[arg(long)]
    pub no_mcp: bool,
    /// With a PostgreSQL store: seconds a node's lease on a run lasts without renewal; a run whose node died is marked failed this long after its last renewal.
    #[arg(
        long,
        env = "RLM_CLUSTER_LEASE_SECS",
        default_value_t = 10.0,
        value_name = "SECS"
    )]
    pub lease_secs: f64,
    /// With a PostgreSQL store: model calls at once across every node using the same provider key (default: --max-concurrent, so N nodes make no more calls at once than one); give every node the same value.
    #[arg(long, env = "RLM_CLUSTER_MAX_CONCURRENT", value_name = "N")]
    pub cluster_max_concurrent: Option<usize>,
    /// With a PostgreSQL store: this node's name in the database (default: host:pid:random).
    #[arg(long, env = "RLM_NODE_ID", value_name = "NAME")]
    pub node_id: Option<String>,
    #[command(flatten)]
    pub llm: LlmFlags,
}

/// `rlm serve`.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    check_counts(&args)?;
    refuse_open_without_token(&args)?;
    let sources = args
        .sources
        .iter()
        .map(|p| {
            p.canonicalize()
                .map_err(|e| anyhow::anyhow!("--source {} cannot be used: {e}", p.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let limits = limits(&args)?;
    let settings = SettingsFile::load(args.llm.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = settings.engine_config().map_err(anyhow::Error::msg)?;
    let briefing = read_briefing(args.briefing.as_deref())?;
    let cluster_url = postgres_url(&args.store.store).map(str::to_string);
    let cluster = match &cluster_url {
        Some(url) => Some(connect_cluster(&args, url)?),
        None => None,
    };
    let store = args.store.open()?;
    let llm_config = args.llm.load_for_answering()?;
    let embedder = query_embedder(store.as_ref(), &llm_config, args.llm.config.as_deref());
    let local = llm_config.provider == rlm_llm::ProviderKind::Local;
    config.set_models(&llm_config.root.model, &llm_config.sub.model, local);
    let client = model_client(&args, llm_config, cluster.as_ref())?;
    let options = ServerOptions {
        token: args.token.clone(),
        allowed_hosts: args
            .allowed_hosts
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect(),
        upload_dir: upload_dir(&args, cluster.is_some())?,
        allow_index_paths: args.allow_index_paths,
        index_roots: index_roots(&args.index_roots)?,
        sources,
        model: Some(client.clone()),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let pool = WorkerPool::new(sandbox_config(config.sandbox)?, args.max_runs).await?;
        let engine = Engine::new(Arc::new(client), pool, config);
        if local {
            tokio::spawn(warm_up(engine.clone()));
        }
        let watch = store_watch(&store)?;
        let corpus = Arc::new(rlm_engine::Corpus::load(store)?);
        let state = match (&cluster, corpus.local_store()) {
            (Some(c), _) => c.state(),
            (None, Some(folder)) => {
                rlm_server::folder_state(folder.dir()).map_err(anyhow::Error::msg)?
            }
            (None, None) => {
                anyhow::bail!("rlm serve: the store is neither a folder nor PostgreSQL")
            }
        };
        let app = Arc::new(
            App::with_state(engine, corpus, state, limits, embedder.clone(), briefing)
                .and_then(|a| a.with_options(options))
                .map(|a| match watch {
                    Some(w) => a.with_store_watch(w),
                    None => a,
                })
                .map_err(anyhow::Error::msg)?,
        );
        listen(&args, app, embedder, cluster.as_ref()).await
    })
}

/// Decodes the instructions every question starts with while the server
/// waits for its first: the embedded model keeps them on disk, so the first
/// question starts warm (`rlm model warm` does the same by hand).
async fn warm_up(engine: Engine) {
    match engine.warm_up().await {
        Ok(w) if w.kept_tokens > 0 => {}
        Ok(w) => eprintln!(
            "rlm serve: the embedded model decoded the {} tokens every question starts with in {:.1} s and kept them",
            w.prompt_tokens,
            w.elapsed.as_secs_f64()
        ),
        Err(e) => eprintln!(
            "rlm serve: warning: the embedded model could not decode the instructions ahead of the first question ({e}); that question will"
        ),
    }
}

/// Refuses counts of 0, which would refuse everything.
fn check_counts(args: &ServeArgs) -> anyhow::Result<()> {
    if args.max_runs == 0 {
        anyhow::bail!("--max-runs 0 would refuse every question; use 1 or more");
    }
    if args.keep_runs == 0 {
        anyhow::bail!(
            "--keep-runs must be 1 or more (the last run's answer is read back from disk)"
        );
    }
    if args.max_question_chars == 0 {
        anyhow::bail!("--max-question-chars must be 1 or more");
    }
    if args.max_connections == 0 {
        anyhow::bail!("--max-connections must be 1 or more");
    }
    if args.max_connections_per_client == 0 {
        anyhow::bail!("--max-connections-per-client must be 1 or more");
    }
    if args.max_briefing_chars == 0 {
        anyhow::bail!("--max-briefing-chars must be 1 or more");
    }
    if args.max_upload_bytes == 0 {
        anyhow::bail!("--max-upload-bytes must be 1 or more");
    }
    Ok(())
}

/// The server's limits from the flags; a timeout out of range is refused.
fn limits(args: &ServeArgs) -> anyhow::Result<Limits> {
    let seconds = |flag: &str, value: f64| {
        if value.is_finite() && (0.05..=86_400.0).contains(&value) {
            Ok(std::time::Duration::from_secs_f64(value))
        } else {
            Err(anyhow::anyhow!(
                "{flag} {value} is out of range: use seconds from 0.05 to 86400"
            ))
        }
    };
    Ok(Limits {
        max_concurrent_runs: args.max_runs,
        max_question_chars: args.max_question_chars,
        max_briefing_chars: args.max_briefing_chars,
        max_upload_bytes: args.max_upload_bytes,
        saved_runs: args.keep_runs,
        header_timeout: seconds("--header-timeout", args.header_timeout)?,
        body_timeout: seconds("--body-timeout", args.body_timeout)?,
        write_timeout: seconds("--write-timeout", args.write_timeout)?,
        max_connections: args.max_connections,
        max_connections_per_client: args.max_connections_per_client,
        ..Limits::default()
    })
}

/// The model client; a node of a cluster shares the provider's call slots
/// with the other nodes using the same key.
fn model_client(
    args: &ServeArgs,
    llm_config: rlm_llm::LlmConfig,
    cluster: Option<&rlm_cluster::Cluster>,
) -> anyhow::Result<rlm_llm::LlmClient> {
    let client = rlm_llm::LlmClient::from_config(llm_config.clone())?;
    let Some(cluster) = cluster else {
        return Ok(client);
    };
    let slots = args
        .cluster_max_concurrent
        .unwrap_or(llm_config.max_concurrent);
    let key = rlm_cluster::slot_key(
        client.provider().name(),
        client.provider().endpoint(),
        llm_config.api_key.as_ref().map(|k| k.expose()),
    );
    let limited = cluster
        .limit_model_calls(client.provider().clone(), key, slots)
        .map_err(anyhow::Error::msg)?;
    Ok(rlm_llm::LlmClient::with_provider(llm_config, limited))
}

/// The upload folder (created), when uploads are allowed and the store is
/// a folder.
fn upload_dir(args: &ServeArgs, in_cluster: bool) -> anyhow::Result<Option<PathBuf>> {
    if !args.allow_upload || in_cluster {
        return Ok(None);
    }
    let dir = match &args.upload_dir {
        Some(d) => d.clone(),
        None => uploads_beside(&args.store.store),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the upload folder {}", dir.display()))?;
    Ok(Some(dir.canonicalize()?))
}

/// A node over PostgreSQL notices `rlm index --store URL` run elsewhere:
/// the generation read before listing the documents.
fn store_watch(
    store: &Arc<dyn rlm_corpus::CorpusStore>,
) -> anyhow::Result<Option<rlm_server::StoreWatch>> {
    Ok(
        match store.clone().into_any().downcast::<rlm_store_pg::PgStore>() {
            Ok(pg) => Some(rlm_server::StoreWatch::new(
                GENERATION_CHECK_EVERY,
                pg.generation()?,
                move || pg.generation(),
            )),
            Err(_) => None,
        },
    )
}

/// Listens on `--addr`, says where (the first stdout line, for scripts and
/// tests that pick port 0) and serves `app` (and MCP unless `--no-mcp`)
/// until Ctrl-C.
async fn listen(
    args: &ServeArgs,
    app: Arc<App>,
    embedder: Option<Arc<dyn rlm_corpus::Embedder>>,
    cluster: Option<&rlm_cluster::Cluster>,
) -> anyhow::Result<()> {
    let mcp = (!args.no_mcp).then(|| rlm_mcp::http_service(app.clone(), embedder));
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}: is another server using it? pick another with --addr HOST:PORT",
                args.addr
            )
        })?;
    let addr = listener.local_addr()?;
    let signal = ShutdownSignal::install();
    {
        // The first stdout line is for scripts (and tests) that pick port 0.
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
    }
    if let Some(c) = cluster {
        eprintln!(
            "rlm serve: node {} of the cluster at {} (sessions, runs and their events in PostgreSQL; no uploads or indexing through the API)",
            c.node_id(),
            app.state_location()
        );
    }
    eprintln!(
        "rlm serve: web UI at http://{addr}/, API at http://{addr}/api (docs: /api/docs){}{}; Ctrl-C stops",
        if mcp.is_some() {
            format!(", MCP at http://{addr}/mcp")
        } else {
            String::new()
        },
        if args.token.is_some() {
            ", token required"
        } else {
            ""
        }
    );
    let (mcp, stop_mcp) = match mcp {
        Some(m) => (Some(m.service), Some(m.stop_sessions)),
        None => (None, None),
    };
    let shutdown = async move {
        signal.wait().await;
        if let Some(stop) = stop_mcp {
            stop();
        }
    };
    rlm_server::serve_with_mcp(listener, app, mcp, shutdown).await?;
    eprintln!("rlm serve: stopped");
    Ok(())
}

/// Connects to the cluster's state in the PostgreSQL store at `url`,
/// refusing the flags a node of it does not take.
fn connect_cluster(args: &ServeArgs, url: &str) -> anyhow::Result<rlm_cluster::Cluster> {
    if args.allow_upload || args.allow_index_paths || !args.sources.is_empty() {
        anyhow::bail!(
            "--allow-upload, --allow-index-paths and --source index through the server, which a PostgreSQL store does not do yet: index with rlm index PATH --store URL (running nodes see the new documents at their next question)"
        );
    }
    if args.cluster_max_concurrent == Some(0) {
        anyhow::bail!("--cluster-max-concurrent 0 would refuse every model call; use 1 or more");
    }
    if !args.lease_secs.is_finite() || !(0.2..=3600.0).contains(&args.lease_secs) {
        anyhow::bail!(
            "--lease-secs {} is out of range: use 0.2 to 3600 seconds",
            args.lease_secs
        );
    }
    let options = rlm_cluster::ClusterOptions {
        lease: std::time::Duration::from_secs_f64(args.lease_secs),
        node_id: args.node_id.clone(),
    };
    rlm_cluster::Cluster::connect(url, options).map_err(anyhow::Error::msg)
}

/// Shortest token accepted on an address other machines can reach.
const MIN_PUBLIC_TOKEN_BYTES: usize = 16;

/// Refuses, in one line, to listen on an address other machines can reach
/// without a token (or with a short one), unless `--insecure-no-auth` says a proxy authenticates.
fn refuse_open_without_token(args: &ServeArgs) -> anyhow::Result<()> {
    use std::net::ToSocketAddrs;
    let open = args
        .addr
        .to_socket_addrs()
        .map(|mut addrs| addrs.any(|a| !a.ip().is_loopback()))
        .unwrap_or(false);
    if let Some(token) = &args.token {
        // Guessable tokens guard nothing on an address others reach.
        if open && token.len() < MIN_PUBLIC_TOKEN_BYTES {
            anyhow::bail!(
                "the token has {} characters; on an address other machines can reach ({}) it must have at least {MIN_PUBLIC_TOKEN_BYTES} (e.g. `openssl rand -hex 24`)",
                token.len(),
                args.addr
            );
        }
        return Ok(());
    }
    if args.insecure_no_auth {
        return Ok(());
    }
    if open {
        anyhow::bail!(
            "refusing to listen on {} without a token: anyone who can reach it could ask questions and read the store; set --token (or RLM_SERVE_TOKEN), or pass --insecure-no-auth if a proxy in front authenticates",
            args.addr
        );
    }
    Ok(())
}

/// The default upload folder: `<store>-uploads` beside the store (files
/// inside the store folder are never indexed).
fn uploads_beside(store: &std::path::Path) -> PathBuf {
    let name = store
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    store
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(format!("{name}-uploads"))
}

/// The `--index-root` folders, resolved: each must exist.
fn index_roots(roots: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    roots
        .iter()
        .map(|r| {
            r.canonicalize().with_context(|| {
                format!(
                    "--index-root {}: not a folder that can be read",
                    r.display()
                )
            })
        })
        .collect()
}
