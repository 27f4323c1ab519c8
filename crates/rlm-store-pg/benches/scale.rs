//! Both stores at scale (1M chunks by default): indexing throughput into
//! the local store (SQLite + tantivy) and into PostgreSQL, then full-text
//! search latency (p50 / p99 of single questions, k = 10) on each, and how
//! often PostgreSQL's bounded BM25 search returns exactly the top 10 of the
//! exhaustive one. Numbers for docs/benchmarks.md, not a timed test.
//!
//! ```sh
//! export RLM_TEST_POSTGRES_URL="$(scripts/start-postgres)"
//! RLM_BENCH_DIR=/var/tmp/rlm-scale cargo bench -p rlm-store-pg --bench scale
//! ```
//!
//! - `RLM_BENCH_CHUNKS` (default 1,000,000): the corpus size, in files of
//!   12 chunks each.
//! - `RLM_BENCH_CHUNK_CHARS` (default 500): the chunk size. 1M chunks of
//!   500 characters is 0.5 GB of text and ~3 GB with both stores; of the
//!   default 2,000 (`rlm index`'s), 2 GB of text and ~12 GB on disk.
//! - `RLM_BENCH_VOCABULARY` (default 200,000): words in the Zipf-distributed
//!   vocabulary (a corpus of 300M words has a vocabulary of this order).
//! - `RLM_BENCH_DIR`: where the corpus and the local store go (default: a
//!   temporary folder, deleted after). With `RLM_BENCH_PG_URL` (a database
//!   that is kept) and `RLM_BENCH_REUSE=1`, a later run reuses the corpus
//!   and both stores and measures searches only; with `RLM_BENCH_REUSE=local`
//!   it reuses the corpus and the local store and indexes PostgreSQL anew
//!   (into an empty `RLM_BENCH_PG_URL`).
//! - `RLM_BENCH_QUERIES` (300), `RLM_BENCH_EXACT_QUERIES` (50): questions
//!   timed, and questions also run exhaustively to compare rankings.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use rlm_corpus::{CorpusStore, IndexOptions, Store};
use rlm_store_pg::testing::test_database;
use rlm_store_pg::{Budget, PgStore};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace(['_', ','], "").parse().ok())
        .unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn dir_bytes(path: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let m = e.metadata().unwrap();
            total += if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            };
        }
    }
    total
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    let chunks = env_or("RLM_BENCH_CHUNKS", 1_000_000);
    let chunk_chars = env_or("RLM_BENCH_CHUNK_CHARS", 500);
    let vocabulary = env_or("RLM_BENCH_VOCABULARY", 200_000);
    let n_questions = env_or("RLM_BENCH_QUERIES", 300);
    let n_exact = env_or("RLM_BENCH_EXACT_QUERIES", 50);
    let reuse = std::env::var("RLM_BENCH_REUSE").unwrap_or_default();
    let kept_db = std::env::var("RLM_BENCH_PG_URL").ok();
    let test_db = if kept_db.is_none() {
        let Some(db) = test_database() else {
            eprintln!("no PostgreSQL: nothing measured");
            return;
        };
        Some(db)
    } else {
        None
    };
    let url = kept_db.unwrap_or_else(|| test_db.as_ref().unwrap().url().to_string());
    let tmp;
    let work: PathBuf = match std::env::var("RLM_BENCH_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_path_buf()
        }
    };
    let docs = work.join("corpus");
    let store_dir = work.join("store");
    let opts = IndexOptions {
        chunk_chars,
        ..IndexOptions::default()
    };
    println!("load average at start: {}", load());

    let reusing = reuse == "1" && store_dir.exists() && PgStore::open(&url).is_ok();
    let pg_only = reuse == "local" && store_dir.exists();
    if !reusing {
        let mut rows = Vec::new();
        let bytes;
        if pg_only {
            bytes = dir_bytes(&docs);
            println!(
                "corpus and local store of an earlier run: {:.1} MB",
                bytes as f64 / 1e6
            );
        } else {
            let _ = std::fs::remove_dir_all(&docs);
            let _ = std::fs::remove_dir_all(&store_dir);
            let files = chunks.div_ceil(12);
            let t = Instant::now();
            bytes = common::generate(&docs, files, chunk_chars * 12, vocabulary);
            println!(
                "corpus: {files} files, {:.1} MB, chunks of {chunk_chars} characters, vocabulary {vocabulary} words, generated in {:.1} s",
                bytes as f64 / 1e6,
                t.elapsed().as_secs_f64()
            );
            let t = Instant::now();
            let local =
                Store::index(&store_dir, std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
            rows.push((
                "local (SQLite + tantivy)",
                t.elapsed().as_secs_f64(),
                local.chunks_written,
                dir_bytes(&store_dir),
            ));
            println!("load average after the local index: {}", load());
        }
        let t = Instant::now();
        let pg = PgStore::index(&url, std::slice::from_ref(&docs), &opts, &mut |_| {}).unwrap();
        rows.push((
            "PostgreSQL (COPY, one transaction)",
            t.elapsed().as_secs_f64(),
            pg.chunks_written,
            database_size(&url),
        ));
        println!("load average after the PostgreSQL index: {}", load());
        println!("\n| store | index (first run) | MB/s | chunks/s | size on disk |");
        println!("|---|---|---|---|---|");
        for (name, secs, written, size) in rows {
            println!(
                "| {name} | {secs:.1} s | {:.1} | {:.0} | {:.2} GB |",
                bytes as f64 / 1e6 / secs,
                written as f64 / secs,
                size as f64 / 1e9
            );
        }
    }

    let questions = common::questions(n_questions, vocabulary);
    let local = Store::open(&store_dir).unwrap();
    let pg = PgStore::open(&url).unwrap();
    let total = local.stats().unwrap().chunks;
    println!(
        "\n{total} chunks, {n_questions} questions of 2-5 words, k = 10 (load average {}):",
        load()
    );
    println!("| store | p50 | p99 | mean |");
    println!("|---|---|---|---|");
    let (p50, p99, mean) = common::latency(&questions, |q| {
        std::hint::black_box(local.search(q, 10).unwrap());
    });
    println!("| local (tantivy BM25) | {p50:.2} ms | {p99:.2} ms | {mean:.2} ms |");
    let (p50, p99, mean) = common::latency(&questions, |q| {
        std::hint::black_box(pg.search(q, 10).unwrap());
    });
    println!(
        "| PostgreSQL (BM25, bounded candidates) | {p50:.2} ms | {p99:.2} ms | {mean:.2} ms |"
    );

    // The bounded search against the exhaustive one on the first questions.
    let mut exact = 0;
    let mut same_top = 0;
    let mut overlap = 0;
    let mut scored = 0;
    let mut times = Vec::new();
    for q in questions.iter().take(n_exact) {
        let bounded = pg.rank(q, 10, Budget::default()).unwrap();
        let t = Instant::now();
        let full = pg.rank(q, 10, Budget::EXHAUSTIVE).unwrap();
        times.push(t.elapsed());
        exact += usize::from(bounded.exact);
        scored += bounded.scored;
        let ids = |r: &rlm_store_pg::Ranked| r.hits.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
        let (b, f) = (ids(&bounded), ids(&full));
        same_top += usize::from(b == f);
        overlap += b.iter().filter(|id| f.contains(id)).count();
        if bounded.exact {
            assert_eq!(
                b, f,
                "an exact bounded search differs from the exhaustive one: {q}"
            );
        }
    }
    times.sort();
    let n = n_exact.min(questions.len()).max(1);
    println!(
        "\nbounded vs exhaustive BM25 on {n} questions: {exact} exact by the bound, {same_top} with the same top 10, \
         top-10 overlap {:.1}%, {:.0} chunks scored on average; the exhaustive search: p50 {:.1} ms, p99 {:.1} ms",
        overlap as f64 * 10.0 / n as f64,
        scored as f64 / n as f64,
        common::percentile(&times, 0.5),
        common::percentile(&times, 0.99),
    );
    println!("load average at the end: {}", load());
}

/// The PostgreSQL database's size on disk.
fn database_size(url: &str) -> u64 {
    rlm_store_pg::testing::scalar(url, "pg_database_size(current_database())")
        .ok()
        .flatten()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
