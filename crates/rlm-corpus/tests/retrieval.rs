//! Embeddings in the store, vector and hybrid search, file expansion, and the
//! provider embedder over a real HTTP socket.
//!
//! The embedder here is a bag-of-words hashing model (deterministic, no files
//! needed) so these tests run anywhere; `retrieval_model.rs` tests the real
//! all-MiniLM-L6-v2 against its reference.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlm_corpus::embed::{ProviderEmbedder, ProviderEmbedderConfig, normalize};
use rlm_corpus::{
    EmbedError, EmbedOptions, Embedder, EmbeddingSettings, EmbeddingsChoice, ExpandOptions,
    IndexOptions, RetrievalError, RetrievalMode, SearchOptions, Store,
};

/// Feature-hashed bag of lowercase words: similar word sets, similar vectors.
struct HashingEmbedder {
    id: String,
    dim: usize,
    calls: AtomicUsize,
    texts: AtomicUsize,
}

impl HashingEmbedder {
    fn new(id: &str, dim: usize) -> HashingEmbedder {
        HashingEmbedder {
            id: id.to_string(),
            dim,
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        }
    }
}

fn hash_embed(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dim];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let h = blake3::hash(w.to_lowercase().as_bytes());
        let b = h.as_bytes();
        let i = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize % dim;
        v[i] += 1.0;
    }
    normalize(&mut v);
    v
}

impl Embedder for HashingEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dimension(&self) -> usize {
        self.dim
    }
    fn batch_size(&self) -> usize {
        4
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| hash_embed(t, self.dim)).collect())
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn paragraph(topic: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("Paragraph {i} about {topic}: the {topic} details number {i} are described here in full.\n\n"))
        .collect()
}

/// A corpus of three documents with several chunks each.
fn corpus() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    write(&docs, "apples.md", &paragraph("apples orchard harvest", 8));
    write(&docs, "rockets.md", &paragraph("rockets engine launch", 8));
    write(&docs, "tax.md", &paragraph("taxes invoice accounting", 8));
    let store = tmp.path().join("store");
    index(&store, &docs);
    (tmp, docs, store)
}

fn index(store: &Path, docs: &Path) {
    let opts = IndexOptions {
        chunk_chars: 200,
        ..IndexOptions::default()
    };
    Store::index(store, &[docs.to_path_buf()], &opts, &mut |_| {}).unwrap();
}

fn embed(store: &Store, e: &dyn Embedder) -> rlm_corpus::EmbedReport {
    store
        .embed_chunks(e, &EmbedOptions::default(), &mut |_| {})
        .unwrap()
}

#[test]
fn embedding_is_incremental_and_follows_document_changes() {
    let (_tmp, docs, dir) = corpus();
    let e = HashingEmbedder::new("test:hash", 64);
    let store = Store::open(&dir).unwrap();
    let total = store.stats().unwrap().chunks;
    assert!(total >= 12, "{total} chunks");
    let r = embed(&store, &e);
    assert_eq!((r.embedded, r.unchanged, r.reused), (total, 0, 0));
    assert_eq!(e.texts.load(Ordering::SeqCst) as u64, total);
    assert!(
        e.calls.load(Ordering::SeqCst) as u64 >= total / 4,
        "batched by 4"
    );
    let status = store.vector_status().unwrap();
    assert!(status.complete());
    assert_eq!(status.model.as_deref(), Some("test:hash"));

    // Nothing changed: nothing embedded.
    let r = embed(&store, &e);
    assert_eq!((r.embedded, r.unchanged), (0, total));
    drop(store);

    // Append to one document: its earlier chunks keep their vectors.
    let mut text = std::fs::read_to_string(docs.join("apples.md")).unwrap();
    text.push_str(&paragraph("pears", 2));
    write(&docs, "apples.md", &text);
    std::fs::remove_file(docs.join("tax.md")).unwrap();
    index(&dir, &docs);
    let store = Store::open(&dir).unwrap();
    let status = store.vector_status().unwrap();
    assert!(
        !status.complete(),
        "new chunks have no vector yet: {status:?}"
    );
    let before = e.texts.load(Ordering::SeqCst);
    let r = embed(&store, &e);
    assert!(
        r.reused >= 5,
        "unchanged chunks of the changed file are reused: {r:?}"
    );
    assert!(
        r.embedded >= 1 && r.embedded <= 3,
        "only the new tail is embedded: {r:?}"
    );
    assert!(
        r.removed >= 4,
        "vectors of the deleted file are removed: {r:?}"
    );
    assert_eq!(e.texts.load(Ordering::SeqCst) - before, r.embedded as usize);
    assert!(store.vector_status().unwrap().complete());
}

#[test]
fn vectors_of_changed_text_are_never_searched() {
    let (_tmp, docs, dir) = corpus();
    let e = HashingEmbedder::new("test:hash", 64);
    embed(&Store::open(&dir).unwrap(), &e);
    // Rewrite a document without embedding again: its old vectors are stale.
    write(
        &docs,
        "rockets.md",
        &paragraph("violins orchestra concert", 8),
    );
    index(&dir, &docs);
    let store = Store::open(&dir).unwrap();
    let status = store.vector_status().unwrap();
    assert!(status.embedded < status.chunks, "{status:?}");
    let q = hash_embed("rockets engine launch", 64);
    for (id, _) in store.search_vector(&q, 50, -1.0).unwrap() {
        let chunk = store.chunk(&id).unwrap().unwrap();
        assert!(
            !chunk.text.contains("violins"),
            "stale vector returned {id}"
        );
    }
    let res = store
        .search_hybrid("violins", &SearchOptions::default(), Some(&e))
        .unwrap();
    assert!(res.hits.iter().all(|h| h.vector_rank.is_none()));
    assert!(res.hits[0].text.contains("violins"), "BM25 still finds it");
    assert!(
        res.log_lines().iter().any(|l| l.contains("no embedding")),
        "{:?}",
        res.log_lines()
    );
}

#[test]
fn another_model_is_refused_unless_replacing() {
    let (_tmp, _docs, dir) = corpus();
    let store = Store::open(&dir).unwrap();
    embed(&store, &HashingEmbedder::new("test:hash", 64));
    let other = HashingEmbedder::new("test:other", 32);
    let err = store
        .embed_chunks(&other, &EmbedOptions::default(), &mut |_| {})
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RetrievalError::ModelMismatch { .. }), "{msg}");
    assert!(
        msg.contains("test:hash (64 dimensions)") && msg.contains("test:other (32"),
        "{msg}"
    );
    assert!(msg.contains("--rebuild"), "{msg}");
    // Searching with the other model is refused the same way.
    let err = store
        .search_hybrid(
            "apples",
            &SearchOptions::new(RetrievalMode::Vector),
            Some(&other),
        )
        .unwrap_err();
    assert!(matches!(err, RetrievalError::ModelMismatch { .. }), "{err}");
    // Replacing switches the store to the new model.
    let r = store
        .embed_chunks(&other, &EmbedOptions { replace: true }, &mut |_| {})
        .unwrap();
    assert_eq!(r.embedded, store.stats().unwrap().chunks);
    assert_eq!(
        store.embedding_model().unwrap(),
        Some(("test:other".to_string(), 32))
    );
    store
        .search_hybrid(
            "apples",
            &SearchOptions::new(RetrievalMode::Vector),
            Some(&other),
        )
        .unwrap();
}

#[test]
fn search_errors_say_what_to_do() {
    let (_tmp, _docs, dir) = corpus();
    let store = Store::open(&dir).unwrap();
    let e = HashingEmbedder::new("test:hash", 64);
    for mode in [RetrievalMode::Vector, RetrievalMode::Hybrid] {
        let err = store
            .search_hybrid("apples", &SearchOptions::new(mode), Some(&e))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has no embeddings") && err.contains("--embeddings local"),
            "{err}"
        );
    }
    // BM25 works without embeddings or embedder.
    let res = store
        .search_hybrid("apples", &SearchOptions::new(RetrievalMode::Bm25), None)
        .unwrap();
    assert!(!res.hits.is_empty() && res.hits[0].bm25_rank == Some(1));
    embed(&store, &e);
    let err = store
        .search_hybrid("apples", &SearchOptions::new(RetrievalMode::Vector), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("needs the embedding model") && err.contains("test:hash"),
        "{err}"
    );
    let err = store
        .search_hybrid("  ", &SearchOptions::default(), Some(&e))
        .unwrap_err()
        .to_string();
    assert!(err.contains("query is empty"), "{err}");
    let opts = SearchOptions {
        k: 0,
        ..SearchOptions::default()
    };
    let err = store.search_hybrid("apples", &opts, Some(&e)).unwrap_err();
    assert!(err.to_string().contains("k must be at least 1"), "{err}");
    let err = store.search_vector(&[1.0, 0.0], 5, 0.0).unwrap_err();
    assert!(err.to_string().contains("2 dimensions"), "{err}");
}

#[test]
fn hybrid_fuses_by_reciprocal_rank_and_drops_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    // "launch" is rare (BM25 favors it); the vector favors overall word overlap.
    write(&docs, "a.md", "rocket engine launch window countdown");
    write(&docs, "b.md", "rocket engine fuel tank engine rocket");
    write(
        &docs,
        "copy-of-b.md",
        "rocket engine fuel tank engine rocket",
    );
    write(&docs, "c.md", "apples pears orchard harvest");
    let dir = tmp.path().join("store");
    index(&dir, &docs);
    let store = Store::open(&dir).unwrap();
    let e = HashingEmbedder::new("test:hash", 256);
    embed(&store, &e);
    let q = "rocket engine fuel";
    let res = store
        .search_hybrid(q, &SearchOptions::default(), Some(&e))
        .unwrap();
    assert_eq!(res.duplicates_dropped, 1, "{res:#?}");
    let paths: Vec<&str> = res.hits.iter().map(|h| h.path.as_str()).collect();
    assert!(!paths.contains(&"docs/copy-of-b.md") || !paths.contains(&"docs/b.md"));
    for h in &res.hits {
        let want: f32 = [h.bm25_rank, h.vector_rank]
            .iter()
            .flatten()
            .map(|r| 1.0 / (60.0 + *r as f32))
            .sum();
        assert!((h.score - want).abs() < 1e-6, "{h:?}");
        assert!(!h.text.is_empty() && !h.path.is_empty());
    }
    // The unrelated document falls under the similarity cut and has no BM25 match.
    assert!(!paths.contains(&"docs/c.md"), "{paths:?}");
    let scores: Vec<f32> = res.hits.iter().map(|h| h.score).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");

    // Vector mode ranks by cosine and fills in path and text for vector-only hits.
    let res = store
        .search_hybrid(q, &SearchOptions::new(RetrievalMode::Vector), Some(&e))
        .unwrap();
    assert!(
        res.hits
            .iter()
            .all(|h| h.bm25_rank.is_none() && h.vector_score == Some(h.score))
    );
    assert!(res.hits[0].path.starts_with("docs/"));

    // High recall: k becomes 200 and the similarity cut goes, so c.md appears.
    let opts = SearchOptions {
        high_recall: true,
        ..SearchOptions::new(RetrievalMode::Vector)
    };
    let res = store.search_hybrid(q, &opts, Some(&e)).unwrap();
    assert_eq!(res.k, 200);
    assert!(res.hits.iter().any(|h| h.path == "docs/c.md"), "{res:#?}");
    assert!(res.log_lines()[0].starts_with("High recall mode on"));
}

#[test]
fn high_recall_returns_more_than_the_default_k() {
    let (_tmp, _docs, dir) = corpus();
    let store = Store::open(&dir).unwrap();
    let e = HashingEmbedder::new("test:hash", 64);
    embed(&store, &e);
    let q = "details described";
    let normal = store
        .search_hybrid(q, &SearchOptions::default(), Some(&e))
        .unwrap();
    assert_eq!(normal.hits.len(), 10);
    let high = SearchOptions {
        high_recall: true,
        ..SearchOptions::default()
    };
    let wide = store.search_hybrid(q, &high, Some(&e)).unwrap();
    assert!(wide.hits.len() > 10, "{}", wide.hits.len());
    let ids: HashSet<&str> = wide.hits.iter().map(|h| h.chunk_id.as_str()).collect();
    assert!(
        normal
            .hits
            .iter()
            .all(|h| ids.contains(h.chunk_id.as_str()))
    );
}

#[test]
fn expand_files_orders_chunks_and_reports_what_caps_cut() {
    let (_tmp, _docs, dir) = corpus();
    let store = Store::open(&dir).unwrap();
    let hits = store.search("rockets", 3).unwrap();
    let mut entries: Vec<&str> = hits.iter().map(|h| h.chunk_id.as_str()).collect();
    let apple = store.search("apples", 1).unwrap();
    entries.push(&apple[0].chunk_id);
    let all = store
        .expand_files(entries.iter().copied(), &ExpandOptions::default())
        .unwrap();
    assert_eq!(all.files.len(), 2);
    assert_eq!(all.files[0].document.path, "docs/rockets.md");
    assert_eq!(all.files[0].entry_chunk_ids.len(), 3);
    for f in &all.files {
        assert_eq!(f.chunks.len(), f.document.chunk_count as usize);
        assert!(
            f.chunks
                .iter()
                .enumerate()
                .all(|(i, c)| c.ordinal == i as u32)
        );
        assert!(!f.truncated);
    }
    assert_eq!(
        all.log_line(),
        format!("Files expanded: 2, total chunks: {}", all.total_chunks)
    );
    assert_eq!(all.cut_message(), None);

    // One file allowed: the apples file is cut and counted.
    let one = store
        .expand_files(
            entries.iter().copied(),
            &ExpandOptions {
                max_files: 1,
                max_chunks: 500,
            },
        )
        .unwrap();
    assert_eq!((one.files.len(), one.files_dropped), (1, 1));
    assert_eq!(one.chunks_dropped, all.files[1].chunks.len());
    assert!(one.cut_message().unwrap().contains("RLM_MAX_FILES=1"));

    // Three chunks allowed: the first file keeps the chunks nearest its entry chunk.
    let entry = &store.search("rockets", 1).unwrap()[0];
    let three = store
        .expand_files(
            [entry.chunk_id.as_str()],
            &ExpandOptions {
                max_files: 20,
                max_chunks: 3,
            },
        )
        .unwrap();
    let f = &three.files[0];
    assert!(f.truncated);
    assert_eq!(f.chunks.len(), 3);
    assert!(f.chunks.iter().any(|c| c.id == entry.chunk_id));
    assert!(
        f.chunks
            .windows(2)
            .all(|w| w[0].ordinal + 1 == w[1].ordinal),
        "a contiguous window"
    );
    assert_eq!(three.chunks_dropped, f.document.chunk_count as usize - 3);

    let err = store
        .expand_files(["nope-1"], &ExpandOptions::default())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no chunk or document with id \"nope-1\""),
        "{err}"
    );
    let err = store
        .expand_files(
            entries.iter().copied(),
            &ExpandOptions {
                max_files: 0,
                max_chunks: 1,
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
}

#[test]
fn caps_come_from_the_environment_and_bad_values_are_named() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let o = ExpandOptions::from_env_with(env(&[("RLM_MAX_FILES", "3"), ("RLM_MAX_CHUNKS", "40")]))
        .unwrap();
    assert_eq!(
        o,
        ExpandOptions {
            max_files: 3,
            max_chunks: 40
        }
    );
    assert_eq!(
        ExpandOptions::from_env_with(env(&[])).unwrap(),
        ExpandOptions::default()
    );
    let err = ExpandOptions::from_env_with(env(&[("RLM_MAX_CHUNKS", "lots")])).unwrap_err();
    assert!(err.to_string().contains("RLM_MAX_CHUNKS=\"lots\""), "{err}");
    let err = ExpandOptions::from_env_with(env(&[("RLM_MAX_FILES", "0")])).unwrap_err();
    assert!(err.to_string().contains("RLM_MAX_FILES"), "{err}");
}

#[test]
fn settings_come_from_rlm_toml_and_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rlm.toml");
    std::fs::write(
        &file,
        "[llm]\nprovider = \"openai\"\n[embeddings]\nmodel_path = \"models/minilm\"\nprovider_model = \"nomic\"\nbatch_size = 8\n",
    )
    .unwrap();
    let s = EmbeddingSettings::load_with_env(Some(&file), |_| None).unwrap();
    assert_eq!(s.model_path, Some(tmp.path().join("models/minilm")));
    assert_eq!(
        (s.provider_model.as_deref(), s.batch_size),
        (Some("nomic"), Some(8))
    );
    let s = EmbeddingSettings::load_with_env(Some(&file), |k| {
        (k == "RLM_EMBED_MODEL").then(|| "/elsewhere".to_string())
    })
    .unwrap();
    assert_eq!(s.model_path, Some(PathBuf::from("/elsewhere")));

    std::fs::write(&file, "[embeddings]\nmodel = \"x\"\n").unwrap();
    let err = EmbeddingSettings::load_with_env(Some(&file), |_| None).unwrap_err();
    assert!(
        err.to_string()
            .contains("[embeddings] has no setting \"model\""),
        "{err}"
    );
    let err = EmbeddingSettings::load_with_env(None, |k| {
        (k == "RLM_EMBED_BATCH").then(|| "many".to_string())
    })
    .unwrap_err();
    assert!(err.to_string().contains("RLM_EMBED_BATCH"), "{err}");

    let err = EmbeddingSettings::default()
        .local()
        .unwrap_err()
        .to_string();
    assert!(err.contains("RLM_EMBED_MODEL"), "{err}");
    assert_eq!(
        "LOCAL".parse::<EmbeddingsChoice>().ok(),
        Some(EmbeddingsChoice::Local)
    );
    assert!(
        "gpu"
            .parse::<EmbeddingsChoice>()
            .unwrap_err()
            .to_string()
            .contains("local, provider or none")
    );
    assert!(
        "dense"
            .parse::<RetrievalMode>()
            .unwrap_err()
            .to_string()
            .contains("bm25, vector or hybrid")
    );
}

#[test]
fn the_local_model_setting_and_the_languages_choose_the_model() {
    use rlm_corpus::embed::{LocalModel, LocalModelChoice, local_model_for_languages};
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rlm.toml");
    std::fs::write(
        &file,
        "[embeddings]\nlocal_model = \"e5-small\"\ne5_model_path = \"models/e5\"\n",
    )
    .unwrap();
    let s = EmbeddingSettings::load_with_env(Some(&file), |_| None).unwrap();
    assert_eq!(s.local_model, LocalModelChoice::E5Small);
    assert_eq!(s.e5_model_path, Some(tmp.path().join("models/e5")));
    let s = EmbeddingSettings::load_with_env(Some(&file), |k| match k {
        "RLM_EMBED_LOCAL_MODEL" => Some("minilm".to_string()),
        "RLM_EMBED_E5_MODEL" => Some("/elsewhere/e5".to_string()),
        _ => None,
    })
    .unwrap();
    assert_eq!(s.local_model, LocalModelChoice::MiniLm);
    assert_eq!(s.e5_model_path, Some(PathBuf::from("/elsewhere/e5")));
    assert_eq!(
        EmbeddingSettings::load_with_env(None, |_| None)
            .unwrap()
            .local_model,
        LocalModelChoice::Auto
    );
    let err = EmbeddingSettings::load_with_env(None, |k| {
        (k == "RLM_EMBED_LOCAL_MODEL").then(|| "bert".to_string())
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("RLM_EMBED_LOCAL_MODEL") && err.contains("minilm, e5-small or auto"),
        "{err}"
    );

    // English or unknown everywhere: the English model; anything else: e5.
    for langs in [&[][..], &["en"], &["en-GB", "und", ""], &["English", "eng"]] {
        assert_eq!(
            local_model_for_languages(langs),
            LocalModel::MiniLm,
            "{langs:?}"
        );
    }
    for langs in [&["de"][..], &["en", "de"], &["fr_FR"], &["zh", "und"]] {
        assert_eq!(
            local_model_for_languages(langs),
            LocalModel::E5Small,
            "{langs:?}"
        );
    }
    let auto = LocalModelChoice::Auto;
    assert_eq!(auto.resolve(None), LocalModel::MiniLm);
    assert_eq!(auto.resolve(Some(&["de"])), LocalModel::E5Small);
    assert_eq!(
        LocalModelChoice::MiniLm.resolve(Some(&["de"])),
        LocalModel::MiniLm
    );
    assert_eq!(
        LocalModel::from_model_id("local:multilingual-e5-small"),
        Some(LocalModel::E5Small)
    );

    // `--embeddings local` with e5 chosen and no folder: what to run.
    let s = EmbeddingSettings {
        local_model: LocalModelChoice::E5Small,
        ..EmbeddingSettings::default()
    };
    let err = s
        .embedder(EmbeddingsChoice::Local, || unreachable!("no provider"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("fetch-e5.sh") && err.contains("RLM_EMBED_E5_MODEL"),
        "{err}"
    );
    let err = EmbeddingSettings::default()
        .embedder_for_languages(EmbeddingsChoice::Local, &["de"], || {
            unreachable!("no provider")
        })
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("multilingual-e5-small not found"), "{err}");
}

/// Embeds queries apart from chunks, as e5 does with its prefixes.
struct QueryAwareEmbedder {
    queries: AtomicUsize,
}

impl Embedder for QueryAwareEmbedder {
    fn model_id(&self) -> &str {
        "test:query-aware"
    }
    fn dimension(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| hash_embed(t, 64)).collect())
    }
    fn embed_queries(&self, queries: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.queries.fetch_add(queries.len(), Ordering::SeqCst);
        self.embed(queries)
    }
}

#[test]
fn searches_embed_the_query_as_a_query() {
    let (_tmp, _docs, dir) = corpus();
    let store = Store::open(&dir).unwrap();
    let e = QueryAwareEmbedder {
        queries: AtomicUsize::new(0),
    };
    embed(&store, &e);
    assert_eq!(
        e.queries.load(Ordering::SeqCst),
        0,
        "chunks are not queries"
    );
    for mode in [RetrievalMode::Vector, RetrievalMode::Hybrid] {
        let hits = store
            .search_hybrid("apples harvest", &SearchOptions::new(mode), Some(&e))
            .unwrap()
            .hits;
        assert!(hits[0].path.ends_with("apples.md"), "{hits:?}");
    }
    assert_eq!(e.queries.load(Ordering::SeqCst), 2);
}

/// How the test server answers each request, in order; the last repeats.
#[derive(Clone)]
enum Reply {
    Embed,
    Status(u16, &'static str),
    Raw(&'static str),
}

struct EmbeddingServer {
    url: String,
    requests: Arc<Mutex<Vec<serde_json::Value>>>,
}

/// A real HTTP/1.1 server on 127.0.0.1:0 speaking OpenAI's embeddings protocol.
fn serve(script: Vec<Reply>, dim: usize) -> EmbeddingServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            let mut line = String::new();
            let mut auth = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if lower.starts_with("authorization:") {
                    auth = line.trim().to_string();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let mut req: serde_json::Value = serde_json::from_slice(&body).unwrap();
            req["auth"] = auth.into();
            seen.lock().unwrap().push(req.clone());
            let reply = script[n.min(script.len() - 1)].clone();
            let (status, body) = match reply {
                Reply::Embed => {
                    let data: Vec<_> = req["input"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .enumerate()
                        .rev() // out of order on purpose: `index` must be honored
                        .map(|(i, t)| {
                            // Not normalized on purpose: the client normalizes.
                            let v: Vec<f32> = hash_embed(t.as_str().unwrap(), dim)
                                .iter()
                                .map(|x| x * 3.0)
                                .collect();
                            serde_json::json!({"object": "embedding", "index": i, "embedding": v})
                        })
                        .collect();
                    (
                        200,
                        serde_json::json!({"object": "list", "data": data}).to_string(),
                    )
                }
                Reply::Status(code, body) => (code, body.to_string()),
                Reply::Raw(body) => (200, body.to_string()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    EmbeddingServer { url, requests }
}

fn provider_config(url: &str) -> ProviderEmbedderConfig {
    ProviderEmbedderConfig {
        base_url: url.to_string(),
        api_key: Some("sk-test".to_string()),
        model: "hash-embed".to_string(),
        timeout: Duration::from_secs(10),
        batch_size: 5,
    }
}

#[test]
fn provider_embeddings_over_http_index_and_search() {
    let server = serve(vec![Reply::Embed], 48);
    let e = ProviderEmbedder::connect(provider_config(&server.url)).unwrap();
    assert_eq!((e.dimension(), e.model_id()), (48, "provider:hash-embed"));
    let (_tmp, _docs, dir) = corpus();
    let store = Store::open(&dir).unwrap();
    let r = store
        .embed_chunks(&e, &EmbedOptions::default(), &mut |_| {})
        .unwrap();
    let total = store.stats().unwrap().chunks as usize;
    let reqs = server.requests.lock().unwrap().clone();
    // One probe, then batches of at most 5.
    assert_eq!(reqs.len(), 1 + total.div_ceil(5), "{r:?}");
    assert!(
        reqs.iter()
            .all(|r| r["model"] == "hash-embed" && r["auth"] == "Authorization: Bearer sk-test")
    );
    assert!(
        reqs[1..]
            .iter()
            .all(|r| r["input"].as_array().unwrap().len() <= 5)
    );
    let v = e.embed(&["apples orchard", "rockets engine"]).unwrap();
    assert!(
        (rlm_corpus::embed::dot(&v[0], &v[0]) - 1.0).abs() < 1e-5,
        "normalized"
    );
    let want = hash_embed("apples orchard", 48);
    assert!(
        rlm_corpus::embed::dot(&v[0], &want) > 0.9999,
        "index order honored"
    );
    let res = store
        .search_hybrid(
            "rockets engine launch",
            &SearchOptions::new(RetrievalMode::Vector),
            Some(&e),
        )
        .unwrap();
    assert_eq!(res.hits[0].path, "docs/rockets.md");
}

#[test]
fn provider_errors_are_clear() {
    // Wrong key: not retried, says which variable to fix.
    let server = serve(
        vec![Reply::Status(
            401,
            r#"{"error":{"message":"Incorrect API key"}}"#,
        )],
        8,
    );
    let err = ProviderEmbedder::connect(provider_config(&server.url))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HTTP 401")
            && err.contains("Incorrect API key")
            && err.contains("RLM_API_KEY"),
        "{err}"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 1);

    let server = serve(vec![Reply::Status(404, "not found")], 8);
    let err = ProviderEmbedder::connect(provider_config(&server.url))
        .unwrap_err()
        .to_string();
    assert!(err.contains("may not offer /embeddings"), "{err}");

    // A 503 is retried; the second answer succeeds.
    let server = serve(vec![Reply::Status(503, "busy"), Reply::Embed], 8);
    ProviderEmbedder::connect(provider_config(&server.url)).unwrap();
    assert_eq!(server.requests.lock().unwrap().len(), 2);

    let server = serve(vec![Reply::Raw("{\"data\": 5}")], 8);
    let err = ProviderEmbedder::connect(provider_config(&server.url))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("malformed answer") && err.contains("no `data` array"),
        "{err}"
    );
    let server = serve(vec![Reply::Raw("<html>")], 8);
    let err = ProviderEmbedder::connect(provider_config(&server.url))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not JSON"), "{err}");

    // Nothing listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = ProviderEmbedder::connect(provider_config(&format!("http://127.0.0.1:{port}/v1")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unreachable") && err.contains("RLM_BASE_URL"),
        "{err}"
    );

    let mut bad = provider_config("ftp://x");
    let err = ProviderEmbedder::connect(bad.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("must start with http"), "{err}");
    bad.base_url = "http://127.0.0.1:1".into();
    bad.batch_size = 0;
    let err = ProviderEmbedder::connect(bad).unwrap_err().to_string();
    assert!(err.contains("batch size"), "{err}");
}

#[test]
fn a_failed_embedding_run_keeps_its_committed_batches() {
    struct FailAfter(HashingEmbedder, usize);
    impl Embedder for FailAfter {
        fn model_id(&self) -> &str {
            self.0.model_id()
        }
        fn dimension(&self) -> usize {
            self.0.dimension()
        }
        fn batch_size(&self) -> usize {
            4
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            if self.0.calls.load(Ordering::SeqCst) >= self.1 {
                return Err(EmbedError::Config("boom".into()));
            }
            self.0.embed(texts)
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    // Enough chunks for more than one commit (256 texts).
    write(&docs, "big.md", &paragraph("ledger", 1200));
    let dir = tmp.path().join("store");
    index(&dir, &docs);
    let store = Store::open(&dir).unwrap();
    let failing = FailAfter(HashingEmbedder::new("test:hash", 16), 64);
    let err = store
        .embed_chunks(&failing, &EmbedOptions::default(), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("boom"));
    let kept = store.vector_status().unwrap().embedded;
    assert_eq!(kept, 256, "the first commit survives");
    let e = HashingEmbedder::new("test:hash", 16);
    let r = embed(&store, &e);
    assert_eq!(r.unchanged, kept);
    assert!(store.vector_status().unwrap().complete());
}
