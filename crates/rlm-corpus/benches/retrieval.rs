//! Retrieval latency at scale: `cargo bench -p rlm-corpus --bench retrieval`.
//!
//! Builds a store of 1,000 files / 50,000 chunks (override with
//! RLM_BENCH_CHUNKS), gives every chunk a random normalized 384-dimension
//! vector (MiniLM's size; the values do not matter for the cost of an exact
//! scan), then times vector, BM25 and hybrid search (query embedding excluded)
//! and file expansion. When all-MiniLM-L6-v2 is available (RLM_EMBED_MODEL or
//! the scripts/fetch-minilm.sh folder) it also times embedding on this CPU,
//! and likewise multilingual-e5-small (RLM_EMBED_E5_MODEL or the
//! scripts/fetch-e5.sh folder).

use std::path::PathBuf;
use std::time::Instant;

use rlm_corpus::embed::{MiniLmEmbedder, normalize};
use rlm_corpus::{
    EmbedError, EmbedOptions, Embedder, ExpandOptions, IndexOptions, RetrievalMode, SearchOptions,
    Store,
};

const DIM: usize = 384;
const FILES: usize = 1_000;

/// Vectors from a seeded xorshift: cheap, deterministic, spread over the sphere.
struct RandomEmbedder;

fn random_vector(seed: &str) -> Vec<f32> {
    let mut x = u64::from_le_bytes(
        blake3::hash(seed.as_bytes()).as_bytes()[..8]
            .try_into()
            .unwrap(),
    ) | 1;
    let mut v: Vec<f32> = (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    normalize(&mut v);
    v
}

impl Embedder for RandomEmbedder {
    fn model_id(&self) -> &str {
        "bench:random"
    }
    fn dimension(&self) -> usize {
        DIM
    }
    fn batch_size(&self) -> usize {
        1024
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| random_vector(t)).collect())
    }
}

const WORDS: &[&str] = &[
    "contract",
    "notice",
    "termination",
    "payment",
    "invoice",
    "tenant",
    "landlord",
    "rent",
    "deposit",
    "repair",
    "insurance",
    "liability",
    "warranty",
    "delivery",
    "schedule",
    "penalty",
    "renewal",
    "clause",
    "party",
    "agreement",
    "court",
    "dispute",
    "arbitration",
    "confidential",
    "license",
    "software",
    "service",
    "support",
    "employee",
    "salary",
    "bonus",
    "pension",
];

fn time_ms<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut last = f(); // warm-up (loads vectors into memory)
    let start = Instant::now();
    for _ in 0..runs {
        last = f();
    }
    (start.elapsed().as_secs_f64() * 1000.0 / runs as f64, last)
}

fn main() {
    let chunks: usize = std::env::var("RLM_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let per_file = chunks.div_ceil(FILES);
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for f in 0..FILES {
        let mut text = String::new();
        for c in 0..per_file {
            text.push_str(&format!("Section {c} of file {f}.\n"));
            for _ in 0..14 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                text.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
                text.push(' ');
            }
            text.push_str("\n\n");
        }
        std::fs::write(docs.join(format!("file-{f:04}.txt")), text).unwrap();
    }
    let dir = tmp.path().join("store");
    let opts = IndexOptions {
        chunk_chars: 180,
        ..IndexOptions::default()
    };
    let t = Instant::now();
    Store::index(&dir, &[docs], &opts, &mut |_| {}).unwrap();
    let store = Store::open(&dir).unwrap();
    let n = store.stats().unwrap().chunks;
    println!(
        "store: {FILES} files, {n} chunks (indexed in {:.1}s)",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let r = store
        .embed_chunks(&RandomEmbedder, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    println!(
        "embedding bookkeeping (random vectors, {} chunks): {:.1}s",
        r.embedded,
        t.elapsed().as_secs_f64()
    );

    let q = random_vector("query");
    let t = Instant::now();
    store.search_vector(&q, 10, -1.0).unwrap();
    println!(
        "first vector search (loads {n} vectors from SQLite): {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    for k in [10, 200] {
        let (ms, hits) = time_ms(50, || store.search_vector(&q, k, -1.0).unwrap());
        println!(
            "vector search, exact, k={k}: {ms:.2} ms ({} hits)",
            hits.len()
        );
    }
    for (mode, high) in [
        (RetrievalMode::Bm25, false),
        (RetrievalMode::Hybrid, false),
        (RetrievalMode::Hybrid, true),
    ] {
        let opts = SearchOptions {
            high_recall: high,
            ..SearchOptions::new(mode)
        };
        let (ms, res) = time_ms(20, || {
            store
                .search_hybrid("termination notice penalty", &opts, Some(&RandomEmbedder))
                .unwrap()
        });
        println!(
            "{} search{}: {ms:.2} ms ({} hits)",
            mode.as_str(),
            if high { " (high recall, k=200)" } else { "" },
            res.hits.len()
        );
    }
    let opts = SearchOptions {
        high_recall: true,
        ..SearchOptions::default()
    };
    let hits = store
        .search_hybrid("termination notice penalty", &opts, Some(&RandomEmbedder))
        .unwrap()
        .hits;
    let (ms, files) = time_ms(5, || {
        store
            .expand_files(
                hits.iter().map(|h| h.chunk_id.as_str()),
                &ExpandOptions::default(),
            )
            .unwrap()
    });
    println!(
        "expand_files of 200 hits: {ms:.1} ms ({})",
        files.log_line()
    );

    let model_dir = std::env::var_os("RLM_EMBED_MODEL")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/rlm/all-MiniLM-L6-v2"))
        });
    match model_dir.filter(|d| d.join("model.safetensors").is_file()) {
        Some(d) => {
            let t = Instant::now();
            let model = MiniLmEmbedder::load(&d).unwrap();
            println!("MiniLM load: {:.2}s", t.elapsed().as_secs_f64());
            let (ms, _) = time_ms(5, || {
                model
                    .embed_queries(&["what is the notice period for termination?"])
                    .unwrap()
            });
            println!("MiniLM query embedding: {ms:.1} ms");
            let chunk: String = (0..300)
                .map(|i| WORDS[i % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ");
            let texts: Vec<&str> = (0..64).map(|_| chunk.as_str()).collect();
            let t = Instant::now();
            model.embed(&texts).unwrap();
            let per_s = 64.0 / t.elapsed().as_secs_f64();
            println!("MiniLM chunk embedding (256 tokens each, all cores): {per_s:.1} chunks/s");
        }
        None => println!("MiniLM: skipped (no model; scripts/fetch-minilm.sh)"),
    }
    bench_e5();
}

/// A German passage of about 1,000 characters (repeated to fill), the size of
/// a typical chunk.
fn german_chunk() -> String {
    let text = "Der Mieter kann das Mietverhältnis mit einer Frist von drei Monaten schriftlich kündigen. \
        Die Kündigung muss spätestens am dritten Werktag eines Kalendermonats zugehen. \
        Über die Vorauszahlungen für Heizung, Warmwasser und Müllabfuhr wird jährlich abgerechnet; \
        Nachzahlungen sind innerhalb von dreißig Tagen nach Zugang der Abrechnung fällig. ";
    text.chars().cycle().take(1000).collect()
}

/// multilingual-e5-small on this CPU, when its folder is there
/// (RLM_EMBED_E5_MODEL or the scripts/fetch-e5.sh folder).
fn bench_e5() {
    use rlm_corpus::embed::{E5_MODEL_FILE, E5Embedder};
    let dir = std::env::var_os("RLM_EMBED_E5_MODEL")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/rlm/multilingual-e5-small"))
        });
    let Some(dir) = dir.filter(|d| d.join(E5_MODEL_FILE).is_file()) else {
        println!("multilingual-e5-small: skipped (no model; scripts/fetch-e5.sh)");
        return;
    };
    let t = Instant::now();
    let model = E5Embedder::load(&dir).unwrap();
    println!(
        "multilingual-e5-small load: {:.2}s",
        t.elapsed().as_secs_f64()
    );
    let (ms, _) = time_ms(5, || {
        model
            .embed_queries(&["Wie lange ist die Kündigungsfrist?"])
            .unwrap()
    });
    println!("multilingual-e5-small query embedding: {ms:.1} ms");
    let chunk = german_chunk();
    let tokens = model.token_ids(&format!("passage: {chunk}")).len();
    let texts: Vec<&str> = (0..32).map(|_| chunk.as_str()).collect();
    let t = Instant::now();
    model.embed(&texts).unwrap();
    let per_s = texts.len() as f64 / t.elapsed().as_secs_f64();
    println!(
        "multilingual-e5-small chunk embedding (1,000 characters, {tokens} tokens each, all cores): {per_s:.1} chunks/s"
    );
}
