//! `rlm bench`: reproducible performance measurements with their numbers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use rlm_corpus::{IndexOptions, Store};

/// Arguments of `rlm bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Index a generated corpus, re-index it unchanged, and time searches.
    Index(BenchIndexArgs),
}

/// Arguments of `rlm bench index`.
#[derive(Debug, Args)]
pub struct BenchIndexArgs {
    /// Size of the generated corpus in MB.
    #[arg(long, default_value_t = 100)]
    pub size_mb: u64,
    /// Work folder (corpus and store go here); a temporary folder when absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Number of search queries to time.
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// Print the numbers as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `rlm bench`.
pub fn bench(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        BenchCommand::Index(a) => bench_index(a),
    }
}

/// A small deterministic PRNG (xorshift64*), so every run indexes the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Vocabulary with a Zipf-like skew: word i is picked with weight ~ 1/(i+1).
struct Vocab {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocab {
    fn new(rng: &mut Rng, size: usize) -> Vocab {
        const SYLLABLES: &[&str] = &[
            "ta", "ren", "lo", "mi", "sa", "ter", "con", "pro", "vi", "de", "ment", "al", "or",
            "ing", "tion", "ex", "re", "ca", "po", "nu", "li", "ra", "se", "to", "ve",
        ];
        let words = (0..size)
            .map(|_| {
                let n = 1 + rng.below(3) as usize;
                (0..=n)
                    .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
                    .collect::<String>()
            })
            .collect();
        let mut total = 0.0;
        let cumulative = (0..size)
            .map(|i| {
                total += 1.0 / (i as f64 + 1.0);
                total
            })
            .collect();
        Vocab { words, cumulative }
    }
    fn pick(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().unwrap_or(&1.0);
        let x = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let i = self.cumulative.partition_point(|c| *c < x);
        &self.words[i.min(self.words.len() - 1)]
    }
}

fn sentence(rng: &mut Rng, vocab: &Vocab, out: &mut String) {
    let n = 6 + rng.below(14);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(vocab.pick(rng));
    }
    out.push_str(". ");
}

/// Writes about `bytes` of mixed documents (Markdown, text, HTML, code, CSV, JSON).
fn generate_corpus(dir: &Path, bytes: u64) -> anyhow::Result<u64> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let vocab = Vocab::new(&mut rng, 20_000);
    let mut written = 0;
    let mut n = 0u64;
    while written < bytes {
        let target = 2_000 + rng.below(200_000) as usize;
        let kind = n % 6;
        let mut body = String::with_capacity(target + 512);
        while body.len() < target {
            match kind {
                0 => {
                    body.push_str("## ");
                    sentence(&mut rng, &vocab, &mut body);
                    body.push_str("\n\n");
                    for _ in 0..4 {
                        sentence(&mut rng, &vocab, &mut body);
                    }
                    body.push_str("\n\n");
                }
                2 => {
                    body.push_str("<p>");
                    sentence(&mut rng, &vocab, &mut body);
                    body.push_str("</p>\n");
                }
                3 => {
                    body.push_str("fn ");
                    body.push_str(vocab.pick(&mut rng));
                    body.push_str("() {\n    // ");
                    sentence(&mut rng, &vocab, &mut body);
                    body.push_str("\n}\n");
                }
                4 => {
                    for _ in 0..5 {
                        body.push_str(vocab.pick(&mut rng));
                        body.push(',');
                    }
                    body.push_str(&rng.below(10_000).to_string());
                    body.push('\n');
                }
                5 => {
                    body.push_str("{\"text\": \"");
                    sentence(&mut rng, &vocab, &mut body);
                    body.push_str("\"}\n");
                }
                _ => {
                    sentence(&mut rng, &vocab, &mut body);
                    if rng.below(5) == 0 {
                        body.push_str("\n\n");
                    }
                }
            }
        }
        let ext = ["md", "txt", "html", "rs", "csv", "json"][kind as usize];
        let path = dir.join(format!("d{:03}/f{n:06}.{ext}", n / 500));
        std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
        std::fs::write(&path, &body).with_context(|| format!("writing {}", path.display()))?;
        written += body.len() as u64;
        n += 1;
    }
    Ok(written)
}

/// Peak resident memory of this process so far, from /proc (Linux).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1000.0
}

fn bench_index(args: BenchIndexArgs) -> anyhow::Result<()> {
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let corpus = dir.join("corpus");
    let store_dir = dir.join("store");
    let _ = std::fs::remove_dir_all(&store_dir);
    let _ = std::fs::remove_dir_all(&corpus);
    eprintln!(
        "generating {} MB corpus in {}",
        args.size_mb,
        corpus.display()
    );
    let bytes = generate_corpus(&corpus, args.size_mb * 1_000_000)?;

    let opts = IndexOptions::default();
    let t = Instant::now();
    let first = Store::index(
        &store_dir,
        std::slice::from_ref(&corpus),
        &opts,
        &mut |_| {},
    )?;
    let first_s = t.elapsed().as_secs_f64();
    let peak_mb = peak_rss_mb();
    let t = Instant::now();
    let second = Store::index(
        &store_dir,
        std::slice::from_ref(&corpus),
        &opts,
        &mut |_| {},
    )?;
    let reindex_s = t.elapsed().as_secs_f64();
    anyhow::ensure!(second.unchanged == first.added, "re-index saw changes");

    let store = Store::open(&store_dir)?;
    // Queries of 1-3 words drawn from the same skewed vocabulary as the corpus.
    let mut rng = Rng(42);
    let vocab = Vocab::new(&mut Rng(0x9E37_79B9_7F4A_7C15), 20_000);
    let mut latencies = Vec::with_capacity(args.queries);
    for _ in 0..args.queries {
        let q: Vec<&str> = (0..1 + rng.below(3))
            .map(|_| vocab.pick(&mut rng))
            .collect();
        let q = q.join(" ");
        let t = Instant::now();
        let hits = store.search(&q, 10)?;
        latencies.push(t.elapsed());
        std::hint::black_box(hits);
    }
    latencies.sort();
    let stats = store.stats()?;
    let result = serde_json::json!({
        "corpus_mb": bytes as f64 / 1e6,
        "documents": stats.documents,
        "chunks": stats.chunks,
        "index_seconds": first_s,
        "index_mb_per_s": bytes as f64 / 1e6 / first_s,
        "peak_rss_mb": peak_mb,
        "reindex_unchanged_seconds": reindex_s,
        "reindex_fraction_of_first": reindex_s / first_s,
        "search_queries": latencies.len(),
        "search_p50_ms": percentile(&latencies, 0.5),
        "search_p99_ms": percentile(&latencies, 0.99),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    });
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &result)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "corpus: {:.1} MB, {} documents, {} chunks",
            bytes as f64 / 1e6,
            stats.documents,
            stats.chunks
        )?;
        writeln!(
            out,
            "index: {first_s:.2}s = {:.1} MB/s, peak RSS {}",
            bytes as f64 / 1e6 / first_s,
            peak_mb.map_or("unknown".into(), |m| format!("{m:.0} MB"))
        )?;
        writeln!(
            out,
            "re-index unchanged: {reindex_s:.3}s = {:.1}% of first",
            100.0 * reindex_s / first_s
        )?;
        writeln!(
            out,
            "search ({} queries, k=10): p50 {:.2} ms, p99 {:.2} ms",
            latencies.len(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99)
        )?;
    }
    Ok(())
}
