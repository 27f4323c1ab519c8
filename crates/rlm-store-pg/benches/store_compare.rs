//! The local store (SQLite + tantivy) against the PostgreSQL store on the
//! same generated corpus: indexing throughput, then full-text search latency
//! (p50 / p99 of single queries, k = 10) on each. Numbers for
//! docs/benchmarks.md, not a timed test.
//!
//! `cargo bench -p rlm-store-pg --bench store_compare` (a release build;
//! PostgreSQL from `RLM_TEST_POSTGRES_URL` or started by
//! `scripts/start-postgres`). `RLM_BENCH_FILES` (default 2,000) sets the
//! corpus size: each file holds ~24 KB of words drawn from a Zipf-like
//! 20,000-word vocabulary, ~12 chunks of 2,000 characters.

#[path = "common/mod.rs"]
mod common;

use std::time::Instant;

use rlm_corpus::{CorpusStore, IndexOptions, Store};
use rlm_store_pg::PgStore;
use rlm_store_pg::testing::test_database;

const VOCABULARY: usize = 20_000;
const QUERIES: usize = 300;

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
    let bytes = common::generate(&docs, files, 24_000, VOCABULARY);
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

    let queries = common::questions(QUERIES, VOCABULARY);
    let local = Store::open(&tmp.path().join("store")).unwrap();
    let pg = PgStore::open(db.url()).unwrap();
    println!("\n{chunks} chunks, {QUERIES} queries of 2-5 words, k = 10:");
    println!("| store | p50 | p99 | mean |");
    println!("|---|---|---|---|");
    for (name, store) in [
        ("local (tantivy BM25)", &local as &dyn CorpusStore),
        ("PostgreSQL (BM25, bounded candidates)", &pg),
    ] {
        let (p50, p99, mean) = common::latency(&queries, |q| {
            std::hint::black_box(store.search(q, 10).unwrap());
        });
        println!("| {name} | {p50:.2} ms | {p99:.2} ms | {mean:.2} ms |");
    }
}
