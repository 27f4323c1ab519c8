//! `rlm index`, `rlm search`, `rlm show`, `rlm docs`: the corpus store from the shell.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use rlm_corpus::{
    CorpusStore, EmbedOptions, Embedder, EmbeddingSettings, EmbeddingsChoice, IndexOptions,
    IndexProgress, IndexReport, RetrievalMode, SearchOptions, Store,
};
use rlm_store_pg::PgStore;

use super::check_flag;
use super::display::{for_output, one_line};

/// The `--store` flag shared by every command that reads or writes a store.
#[derive(Debug, Clone, Args)]
pub struct StoreArg {
    /// Store: a folder, or a PostgreSQL database (postgres://USER:PASSWORD@HOST:PORT/DATABASE).
    #[arg(
        long,
        env = "RLM_STORE",
        default_value = "./.rlm",
        value_name = "DIR|URL"
    )]
    pub store: PathBuf,
}

/// The PostgreSQL URL `store` names, if it names one rather than a folder.
pub(crate) fn postgres_url(store: &Path) -> Option<&str> {
    store.to_str().filter(|s| rlm_store_pg::is_postgres_url(s))
}

/// Opens the store `store` names, whichever back-end it is.
pub(crate) fn open_store(store: &Path) -> anyhow::Result<Arc<dyn CorpusStore>> {
    Ok(match postgres_url(store) {
        Some(url) => Arc::new(PgStore::open(url)?),
        None => Arc::new(Store::open(store)?),
    })
}

impl StoreArg {
    /// Opens the store for reading, whichever back-end `--store` names.
    pub fn open(&self) -> anyhow::Result<Arc<dyn CorpusStore>> {
        open_store(&self.store)
    }

    /// Where the store is, for messages (a URL without its password).
    pub fn display(&self) -> String {
        match postgres_url(&self.store) {
            Some(url) => redact_url(url),
            None => self.store.display().to_string(),
        }
    }
}

/// `url` without the password, if it holds one.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// Arguments of `rlm index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Files and folders to index.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub store: StoreArg,
    /// Only index files matching this glob (repeatable), e.g. --include '*.md'.
    #[arg(long = "include", value_name = "GLOB")]
    pub include: Vec<String>,
    /// Skip files matching this glob (repeatable), e.g. --exclude 'target/**'.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Index hidden files and folders too.
    #[arg(long)]
    pub hidden: bool,
    /// Do not honor .gitignore/.ignore files.
    #[arg(long)]
    pub no_ignore: bool,
    /// Target chunk size in characters.
    #[arg(long, env = "RLM_CHUNK_CHARS", default_value_t = rlm_corpus::DEFAULT_CHUNK_CHARS)]
    pub chunk_chars: usize,
    /// Skip files larger than this many MiB.
    #[arg(long, default_value_t = 512)]
    pub max_file_mb: u64,
    /// Re-extract and re-index every file, even unchanged ones.
    #[arg(long)]
    pub rebuild: bool,
    /// List every skipped file with its reason.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Embed chunks for vector/hybrid search: `local` (all-MiniLM-L6-v2 on the
    /// CPU, from RLM_EMBED_MODEL), `provider` (the configured /v1/embeddings),
    /// or `none`. Only chunks without a current vector are embedded.
    #[arg(
        long,
        env = "RLM_EMBEDDINGS",
        default_value = "none",
        value_name = "none|local|provider"
    )]
    pub embeddings: EmbeddingsChoice,
    /// Config file with `[llm]` and `[embeddings]` tables (default ./rlm.toml when present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Arguments of `rlm search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to search for.
    pub query: String,
    #[command(flatten)]
    pub store: StoreArg,
    /// Number of results.
    #[arg(short, long, default_value_t = 10)]
    pub k: usize,
    /// Print results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Ranking: `bm25` (full text), `vector` (embeddings) or `hybrid` (both,
    /// reciprocal rank fusion). vector and hybrid need `rlm index --embeddings`.
    #[arg(
        long,
        env = "RLM_SEARCH_MODE",
        default_value = "bm25",
        value_name = "bm25|vector|hybrid"
    )]
    pub mode: RetrievalMode,
    /// High-recall mode: at least 200 results and no similarity cut-off.
    /// (No environment variable: the engine's `RLM_LOW_RECALL_MODE` means
    /// the opposite, high recall off.)
    #[arg(long)]
    pub high_recall: bool,
    /// Config file with `[llm]` and `[embeddings]` tables (default ./rlm.toml when present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Arguments of `rlm show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A chunk id (`<doc-id>-<ordinal>`), a document id, or a document path.
    pub id: String,
    #[command(flatten)]
    pub store: StoreArg,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rlm docs`.
#[derive(Debug, Args)]
pub struct DocsArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

fn progress_bar(enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    ProgressBar::new_spinner()
}

/// Indexes `paths` into the store at `store` (incrementally, unless
/// `opts.rebuild`), with a progress bar on stderr when `progress`; warns when
/// the full-text index had to be recreated. Used by `rlm index` and by
/// `rlm ask "…" PATH…`.
pub(crate) fn index_paths(
    store: &Path,
    paths: &[PathBuf],
    opts: &IndexOptions,
    progress: bool,
) -> anyhow::Result<IndexReport> {
    let bar = progress_bar(progress);
    let mut on_progress = |p: IndexProgress| match p {
        IndexProgress::Walking { found } => bar.set_message(format!("scanning: {found} files")),
        IndexProgress::Processing {
            done_bytes,
            total_bytes,
        } => {
            if bar.length() != Some(total_bytes) {
                bar.set_length(total_bytes);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_message("indexing");
            }
            bar.set_position(done_bytes);
        }
        IndexProgress::Committing => bar.set_message("committing"),
    };
    let report = match postgres_url(store) {
        Some(url) => PgStore::index(url, paths, opts, &mut on_progress),
        None => Store::index(store, paths, opts, &mut on_progress),
    };
    bar.finish_and_clear();
    let report = report?;
    if let Some(why) = &report.fulltext_recreated {
        eprintln!(
            "warning: the full-text index of {} could not be opened ({}); it was recreated from the store's text",
            store.display(),
            one_line(why)
        );
    }
    Ok(report)
}

/// The local embedder the store's languages call for, after indexing
/// (`auto`); when it cannot be loaded, the error says the documents were
/// indexed and how to embed them with the English model instead.
fn embedder_by_languages(
    settings: &EmbeddingSettings,
    choice: EmbeddingsChoice,
    (store, rebuild): (&Path, bool),
    config: Option<&Path>,
    report: &rlm_corpus::IndexReport,
) -> anyhow::Result<Option<Box<dyn Embedder>>> {
    let store = open_store(store)?;
    settings
        .embedder_for_index(choice, store.as_ref(), rebuild, || {
            provider_endpoint(config)
        })
        .map_err(|e| {
            anyhow::anyhow!(
                "{e}\nThe documents were indexed ({} chunks; languages: {}) but not embedded; RLM_EMBED_LOCAL_MODEL=minilm embeds them with the English-only model instead.",
                report.chunks_written,
                rlm_corpus::language::describe(&report.languages)
            )
        })
}

/// The `rlm index` summary's lines after the run's: the store's totals,
/// its languages, the embedding run.
fn write_store_lines(
    out: &mut impl Write,
    t: &rlm_corpus::StoreStats,
    languages: &[rlm_corpus::language::LanguageShare],
    embedded: Option<&rlm_corpus::EmbedReport>,
) -> std::io::Result<()> {
    writeln!(
        out,
        "store: {} documents, {} chunks, {:.1} MB",
        t.documents,
        t.chunks,
        t.bytes as f64 / 1e6
    )?;
    if !languages.is_empty() {
        writeln!(
            out,
            "languages: {}",
            rlm_corpus::language::describe(languages)
        )?;
    }
    if let Some(e) = embedded {
        writeln!(
            out,
            "embeddings ({}, {} dims): {} embedded, {} reused, {} unchanged, {} removed in {:.2}s",
            e.model,
            e.dimension,
            e.embedded,
            e.reused,
            e.unchanged,
            e.removed,
            e.elapsed_ms as f64 / 1000.0
        )?;
    }
    Ok(())
}

/// Fails when neither local model can be loaded: the model is chosen after
/// indexing, but a missing one still fails before any work.
fn some_local_model(settings: &EmbeddingSettings) -> anyhow::Result<()> {
    use rlm_corpus::embed::LocalModel;
    match settings.local_model(LocalModel::MiniLm) {
        Err(e) if settings.local_model(LocalModel::E5Small).is_err() => Err(e.into()),
        _ => Ok(()),
    }
}

/// `rlm index`.
pub fn index(args: IndexArgs) -> anyhow::Result<()> {
    rlm_corpus::ocr::check_setting().map_err(anyhow::Error::msg)?;
    let opts = IndexOptions {
        chunk_chars: args.chunk_chars,
        include: args.include,
        exclude: args.exclude,
        hidden: args.hidden,
        no_ignore: args.no_ignore,
        max_file_bytes: args.max_file_mb.saturating_mul(1024 * 1024),
        rebuild: args.rebuild,
    };
    // Load the embedder before indexing so a missing model fails before any
    // work, unless it is chosen by the documents' languages.
    let settings = embedding_settings(args.embeddings, args.config.as_deref())?;
    let deferred = settings
        .as_ref()
        .is_some_and(|s| s.chosen_by_documents(args.embeddings));
    if let Some(s) = settings.as_ref().filter(|_| deferred) {
        some_local_model(s)?;
    }
    let early = match &settings {
        Some(s) if !deferred => s.embedder(args.embeddings, || {
            provider_endpoint(args.config.as_deref())
        })?,
        _ => None,
    };
    let report = index_paths(&args.store.store, &args.paths, &opts, !args.json)?;
    let embedder = match (&settings, early) {
        (_, Some(e)) => Some(e),
        (Some(s), None) if deferred => embedder_by_languages(
            s,
            args.embeddings,
            (&args.store.store, args.rebuild),
            args.config.as_deref(),
            &report,
        )?,
        _ => None,
    };
    let embedded = match &embedder {
        Some(e) => Some(embed_store(
            &args.store.store,
            e.as_ref(),
            args.rebuild,
            !args.json,
        )?),
        None => None,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let Some(e) = &embedded {
            value["embeddings"] = serde_json::to_value(e)?;
        }
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        let t = report.totals.unwrap_or(rlm_corpus::StoreStats {
            documents: 0,
            chunks: 0,
            bytes: 0,
            chars: 0,
        });
        writeln!(
            out,
            "indexed {} into {}: {} added, {} updated, {} unchanged, {} removed ({} chunks written, {:.1} MB read in {:.2}s)",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            args.store.display(),
            report.added,
            report.updated,
            report.unchanged,
            report.removed,
            report.chunks_written,
            report.bytes_processed as f64 / 1e6,
            report.elapsed_ms as f64 / 1000.0,
        )?;
        write_store_lines(&mut out, &t, &report.languages, embedded.as_ref())?;
        write_skipped_lines(&mut out, &report)?;
        if !report.lossy_files.is_empty() {
            writeln!(
                out,
                "warnings: {} files had invalid UTF-8, replaced with U+FFFD{}",
                report.lossy_files.len(),
                if args.verbose {
                    ":"
                } else {
                    " (--verbose lists them)"
                }
            )?;
        }
        if args.verbose {
            for (path, reason) in &report.skipped_files {
                writeln!(out, "  skipped {}: {reason}", one_line(path))?;
            }
            for path in &report.lossy_files {
                writeln!(out, "  invalid UTF-8 in {}", one_line(path))?;
            }
        }
    }
    for (path, msg) in &report.errors {
        eprintln!("error: {}: {}", one_line(path), one_line(msg));
    }
    if !report.errors.is_empty() {
        bail!(
            "{} file(s) could not be indexed (listed above); everything else was indexed and committed",
            report.errors.len()
        );
    }
    Ok(())
}

/// The files skipped, counted by reason, then what became of scanned pages.
fn write_skipped_lines(
    out: &mut impl Write,
    report: &rlm_corpus::IndexReport,
) -> std::io::Result<()> {
    if !report.skipped.is_empty() {
        let by_reason: Vec<String> = report
            .skipped
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        writeln!(out, "skipped: {}", by_reason.join(", "))?;
    }
    write_scanned_lines(out, report)
}

/// What indexing did with scanned PDF pages (no text layer): how many OCR
/// read, how many stayed without text and, with no OCR engine, what to
/// install.
fn write_scanned_lines(
    out: &mut impl Write,
    report: &rlm_corpus::IndexReport,
) -> std::io::Result<()> {
    if report.pages_read_by_ocr > 0 {
        writeln!(out, "OCR read {} scanned page(s)", report.pages_read_by_ocr)?;
    }
    let n = report.pages_without_text;
    if n > 0 {
        if rlm_corpus::ocr::available() {
            writeln!(out, "{n} page(s) had no text, not even by OCR")?;
        } else {
            writeln!(
                out,
                "{n} page(s) had no text; install tesseract-ocr (and the language packs of your documents, e.g. tesseract-ocr-deu) to read them"
            )?;
        }
    }
    Ok(())
}

/// Results of `rlm search -k` (the engine's ceiling for high-recall retrieval).
const SEARCH_K: std::ops::RangeInclusive<u64> = 1..=10_000;

/// `rlm search`.
pub fn search(args: SearchArgs) -> anyhow::Result<()> {
    check_flag("-k", args.k as u64, SEARCH_K)?;
    let store = args.store.open()?;
    if args.mode != RetrievalMode::Bm25 || args.high_recall {
        return search_ranked(store.as_ref(), &args);
    }
    let hits = store.search(&args.query, args.k)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &hits)?;
        writeln!(out)?;
        return Ok(());
    }
    if hits.is_empty() {
        writeln!(out, "no chunks match {:?}", args.query)?;
    }
    for (rank, h) in hits.iter().enumerate() {
        writeln!(
            out,
            "{:>2}. {:<22} {:>7.3}  {} (chunk {})",
            rank + 1,
            one_line(&h.chunk_id),
            h.score,
            one_line(&h.path),
            h.ordinal
        )?;
        writeln!(out, "    {}", one_line(&h.snippet))?;
    }
    Ok(())
}

/// The embedding settings for `choice` from the environment and the
/// `[embeddings]` config (`None` for no embeddings).
fn embedding_settings(
    choice: EmbeddingsChoice,
    config: Option<&std::path::Path>,
) -> anyhow::Result<Option<EmbeddingSettings>> {
    if choice == EmbeddingsChoice::None {
        return Ok(None);
    }
    if let Some(c) = config
        && !c.exists()
    {
        bail!("config file {} does not exist", c.display());
    }
    Ok(Some(EmbeddingSettings::load(Some(
        config.unwrap_or("rlm.toml".as_ref()),
    ))?))
}

/// Base URL, key and timeout of the configured provider, for its /embeddings.
fn provider_endpoint(
    config: Option<&std::path::Path>,
) -> Result<(String, Option<String>, std::time::Duration), rlm_corpus::EmbedError> {
    let overrides = rlm_llm::ConfigOverrides {
        config_file: config.map(PathBuf::from),
        ..Default::default()
    };
    let llm = rlm_llm::LlmConfig::load(&overrides)
        .map_err(|e| rlm_corpus::EmbedError::Config(e.to_string()))?;
    match llm.provider {
        rlm_llm::ProviderKind::OpenAi => {}
        other => {
            return Err(rlm_corpus::EmbedError::Config(format!(
                "provider {} has no OpenAI-compatible /embeddings endpoint: use --embeddings local, or set RLM_PROVIDER=openai with RLM_BASE_URL pointing at a compatible server",
                other.as_str()
            )));
        }
    }
    Ok((
        llm.base_url,
        llm.api_key.map(|k| k.expose().to_string()),
        llm.timeout,
    ))
}

/// Embeds the chunks of the store at `dir` (a folder or a PostgreSQL URL)
/// that have no current vector.
fn embed_store(
    dir: &std::path::Path,
    embedder: &dyn Embedder,
    replace: bool,
    show_progress: bool,
) -> anyhow::Result<rlm_corpus::EmbedReport> {
    let store = open_store(dir)?;
    let bar = progress_bar(show_progress);
    let report = store.embed_chunks(embedder, &EmbedOptions { replace }, &mut |p| {
        if bar.length() != Some(p.total) {
            bar.set_length(p.total);
            bar.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} chunks eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_message(format!("embedding ({})", embedder.model_id()));
        }
        bar.set_position(p.done);
    });
    bar.finish_and_clear();
    Ok(report?)
}

/// `rlm search --mode vector|hybrid` or `--high-recall`.
fn search_ranked(store: &dyn CorpusStore, args: &SearchArgs) -> anyhow::Result<()> {
    let embedder: Option<Box<dyn Embedder>> = if args.mode == RetrievalMode::Bm25 {
        None
    } else {
        // The query must be embedded by the model that embedded the store.
        let settings =
            EmbeddingSettings::load(Some(args.config.as_deref().unwrap_or("rlm.toml".as_ref())))?;
        let embedder =
            settings.embedder_for_store(store, || provider_endpoint(args.config.as_deref()))?;
        if embedder.is_none() {
            return Err(rlm_corpus::RetrievalError::NoEmbeddings {
                store: store.location(),
            }
            .into());
        }
        embedder
    };
    let opts = SearchOptions {
        mode: args.mode,
        k: args.k,
        high_recall: args.high_recall,
        ..SearchOptions::default()
    };
    let results = store.search_hybrid(&args.query, &opts, embedder.as_deref())?;
    for line in results.log_lines() {
        eprintln!("rlm: {line}");
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &results.hits)?;
        writeln!(out)?;
        return Ok(());
    }
    if results.hits.is_empty() {
        writeln!(out, "no chunks match {:?}", args.query)?;
    }
    for (rank, h) in results.hits.iter().enumerate() {
        let mut why = Vec::new();
        if let Some(r) = h.bm25_rank {
            why.push(format!("bm25 #{r}"));
        }
        if let (Some(r), Some(s)) = (h.vector_rank, h.vector_score) {
            why.push(format!("vector #{r} {s:.3}"));
        }
        writeln!(
            out,
            "{:>2}. {:<22} {:>7.3}  {} (chunk {}) [{}]",
            rank + 1,
            one_line(&h.chunk_id),
            h.score,
            one_line(&h.path),
            h.ordinal,
            why.join(", ")
        )?;
        writeln!(out, "    {}", one_line(&h.snippet))?;
    }
    Ok(())
}

/// `rlm show`.
pub fn show(args: ShowArgs) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let mut out = std::io::stdout().lock();
    if let Some(chunk) = store.chunk(&args.id)? {
        let doc = store
            .document(&chunk.doc_id)?
            .context("chunk's document is missing: re-index the store")?;
        if args.json {
            serde_json::to_writer_pretty(
                &mut out,
                &serde_json::json!({"chunk": chunk, "document": doc}),
            )?;
            writeln!(out)?;
        } else {
            let mut place = format!(
                "{} chunk {}/{} · bytes {}..{} · lines {}-{}",
                one_line(&doc.path),
                chunk.ordinal,
                doc.chunk_count,
                chunk.byte_start,
                chunk.byte_end,
                chunk.line_start,
                chunk.line_end
            );
            if let Some(p) = chunk.place() {
                place.push_str(&format!(" · {}", one_line(&p)));
            }
            if let Some(h) = &chunk.heading {
                place.push_str(&format!(" · § {}", one_line(h)));
            }
            writeln!(out, "{}  {place}\n", one_line(&chunk.id))?;
            // The text itself keeps its lines; on a terminal its other
            // control characters are shown as escapes.
            let tty = std::io::stdout().is_terminal();
            write!(out, "{}", for_output(&chunk.text, tty))?;
            if !chunk.text.ends_with('\n') {
                writeln!(out)?;
            }
        }
        return Ok(());
    }
    let doc = match store.document(&args.id)? {
        Some(d) => d,
        None => store
            .document_by_path(&args.id)?
            .ok_or_else(|| rlm_corpus::CorpusError::UnknownId(args.id.clone()))?,
    };
    let chunks = store.chunks_of(&doc.id)?;
    if args.json {
        let text = store.document_text(&doc.id)?;
        let chunk_list: Vec<_> = chunks
            .iter()
            .map(|c| {
                serde_json::json!({"id": c.id, "ordinal": c.ordinal, "byte_start": c.byte_start,
                    "byte_end": c.byte_end, "line_start": c.line_start, "line_end": c.line_end,
                    "page": c.page, "location": c.location, "heading": c.heading})
            })
            .collect();
        serde_json::to_writer_pretty(
            &mut out,
            &serde_json::json!({"document": doc, "chunks": chunk_list, "text": text}),
        )?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{}  {} · {} · {} bytes · {} chars · {} chunks · \"{}\"",
            one_line(&doc.id),
            one_line(&doc.path),
            doc.kind.as_str(),
            doc.size_bytes,
            doc.chars,
            doc.chunk_count,
            one_line(&doc.title)
        )?;
        for c in &chunks {
            let first: String = c
                .text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(80)
                .collect();
            let place = c
                .place()
                .map(|p| format!("[{}] ", one_line(&p)))
                .unwrap_or_default();
            writeln!(
                out,
                "  {:<22} lines {:>5}-{:<5} {place}{}",
                one_line(&c.id),
                c.line_start,
                c.line_end,
                one_line(&first)
            )?;
        }
    }
    Ok(())
}

/// `rlm docs`.
pub fn docs(args: DocsArgs) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let docs = store.documents()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &docs)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<16}  {:<8} {:>10} {:>6}  path",
        "id", "kind", "bytes", "chunks"
    )?;
    for d in &docs {
        writeln!(
            out,
            "{:<16}  {:<8} {:>10} {:>6}  {}",
            one_line(&d.id),
            d.kind.as_str(),
            d.size_bytes,
            d.chunk_count,
            one_line(&d.path)
        )?;
    }
    writeln!(out, "{} documents", docs.len())?;
    let languages = store.languages()?;
    if !languages.is_empty() {
        writeln!(
            out,
            "languages: {}",
            rlm_corpus::language::describe(&languages)
        )?;
    }
    Ok(())
}
