//! Finding the all-MiniLM-L6-v2 files for the tests that need them.

use std::path::PathBuf;

/// The model folder: RLM_EMBED_MODEL, else where `scripts/fetch-minilm.sh`
/// puts it. `None` (test skipped) when absent, except under CI, where a
/// missing model fails the test.
pub fn model_dir() -> Option<PathBuf> {
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
    assert!(
        std::env::var_os("CI").is_none(),
        "all-MiniLM-L6-v2 not found at {}: run crates/rlm-corpus/scripts/fetch-minilm.sh",
        dir.display()
    );
    eprintln!(
        "skipped: no model at {} (scripts/fetch-minilm.sh)",
        dir.display()
    );
    None
}
