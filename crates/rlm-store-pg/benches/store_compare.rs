//! The local store (SQLite + tantivy) against the PostgreSQL store on the
//! same generated corpus: indexing throughput, then full-text search latency
//! (p50 / p99 of single queries, k = 10) on each. Numbers for the README,
//! not a timed test.
//!
//! `cargo bench -p rlm-store-pg --bench store_compare` (a release build;
//! PostgreSQL from `RLM_TEST_POSTGRES_URL` or started by
//! `scripts/start-postgres`). `RLM_BENCH_FILES` (default 2,000) sets the
//! corpus size: each file holds ~24 KB of words drawn from a Zipf-like
//! 20,000-word vocabulary, ~12 chunks of 2,000 characters.

use std::path::Path;
use std::time::{Duration, Instant};

use rlm_corpus::{CorpusStore, IndexOptions, Store};
use rlm_store_pg::PgStore;
use rlm_store_pg::testing::test_database;

const VOCABULARY: usize = 20_000;
const QUERIES: usize = 300;

/// A small deterministic generator (xorshift), so every run indexes the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A word index, Zipf-like: small indices are far more frequent.
    fn word(&mut self) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((VOCABULARY as f64).powf(u) as usize).saturating_sub(1)
    }
}

fn word(i: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "bri", "dan", "fel", "gor", "hil", "jun",
        "pex", "qua",
    ];
    let mut w = String::new();
    let mut n = i + 1;
    while n > 0 {
        w.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    w
}

fn generate(dir: &Path, files: usize) -> u64 {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut bytes = 0;
    for f in 0..files {
        let mut text = String::with_capacity(26_000);
        while text.len() < 24_000 {
            for _ in 0..12 {
                text.push_str(&word(rng.word()));
                text.push(' ');
            }
            text.push_str(".\n");
            if rng.next().is_multiple_of(8) {
                text.push('\n');
            }
        }
        let sub = dir.join(format!("d{:02}", f % 50));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{f:05}.txt")), &text).unwrap();
        bytes += text.len() as u64;
    }
    bytes
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn search_latency(store: &dyn CorpusStore, queries: &[String]) -> (f64, f64, f64) {
    // Warm up caches (page cache, tantivy's readers, PostgreSQL's buffers).
    for q in queries.iter().take(20) {
        store.search(q, 10).unwrap();
    }
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            let hits = store.search(q, 10).unwrap();
            std::hint::black_box(hits);
            t.elapsed()
        })
        .collect();
    times.sort();
    let mean = times.iter().map(Duration::as_secs_f64).sum::<f64>() / times.len() as f64;
    (
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        mean * 1000.0,
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    let Some(db) = test_database() else {
        eprintln!("no PostgreSQL: nothing measured");
        return;
    };
    let files: usize = std::env::var("RLM_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("corpus");
    let bytes = generate(&docs, files);
    let opts = IndexOptions::default();
    println!(
        "corpus: {files} files, {:.1} MB, chunks of {} characters",
        bytes as f64 / 1e6,
        opts.chunk_chars
    );

    let t = Instant::now();
    let local = Store::index(
        &tmp.path().join("store"),
        std::slice::from_ref(&docs),
        &opts,
        &mut |_| {},
    )
    .unwrap();
    let local_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let pg = PgStore::index(db.url(), std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
    let pg_secs = t.elapsed().as_secs_f64();
    let chunks = local.chunks_written;
    assert_eq!(pg.chunks_written, chunks);
    println!("| store | index (first run) | MB/s | chunks/s |");
    println!("|---|---|---|---|");
    for (name, secs) in [
        ("local (SQLite + tantivy)", local_secs),
        ("PostgreSQL (COPY, one transaction)", pg_secs),
    ] {
        println!(
            "| {name} | {secs:.1} s | {:.1} | {:.0} |",
            bytes as f64 / 1e6 / secs,
            chunks as f64 / secs
        );
    }
    // A second run with nothing changed: the cost of the incremental check.
    let t = Instant::now();
    Store::index(
        &tmp.path().join("store"),
        std::slice::from_ref(&docs),
        &opts,
        &mut |_| {},
    )
    .unwrap();
    let local_again = t.elapsed().as_secs_f64();
    let t = Instant::now();
    PgStore::index(db.url(), std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
    let pg_again = t.elapsed().as_secs_f64();
    println!("unchanged re-index: local {local_again:.2} s, PostgreSQL {pg_again:.2} s");

    let mut rng = Rng(42);
    let queries: Vec<String> = (0..QUERIES)
        .map(|_| {
            let n = 2 + (rng.next() % 4) as usize;
            (0..n)
                .map(|_| word(rng.word()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let local = Store::open(&tmp.path().join("store")).unwrap();
    let pg = PgStore::open(db.url()).unwrap();
    println!("\n{chunks} chunks, {QUERIES} queries of 2-5 words, k = 10:");
    println!("| store | p50 | p99 | mean |");
    println!("|---|---|---|---|");
    for (name, store) in [
        ("local (tantivy BM25)", &local as &dyn CorpusStore),
        ("PostgreSQL (ts_rank)", &pg),
    ] {
        let (p50, p99, mean) = search_latency(store, &queries);
        println!("| {name} | {p50:.2} ms | {p99:.2} ms | {mean:.2} ms |");
    }
}
