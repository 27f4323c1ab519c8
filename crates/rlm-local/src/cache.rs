//! Where models are stored and what is there.

use std::path::{Path, PathBuf};

use crate::LocalError;
use crate::catalog::{ModelSpec, default_model};

/// Environment variable that overrides the models directory.
pub const MODELS_DIR_ENV: &str = "RLM_MODELS_DIR";

/// The models directory: `$RLM_MODELS_DIR`, else `rlm/models` under the
/// user's cache directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux,
/// `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows).
pub fn models_dir() -> Result<PathBuf, LocalError> {
    models_dir_with_env(|name| std::env::var_os(name))
}

/// [`models_dir`] with an explicit environment lookup.
pub fn models_dir_with_env(
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<PathBuf, LocalError> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var(MODELS_DIR_ENV) {
        return Ok(dir);
    }
    let cache = if cfg!(target_os = "windows") {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME")
            .filter(|p| p.is_absolute())
            .or_else(|| var("HOME").map(|h| h.join(".cache")))
    };
    cache.map(|c| c.join("rlm").join("models")).ok_or_else(|| {
        LocalError::Config(format!(
            "cannot find a cache directory (no HOME): set {MODELS_DIR_ENV}"
        ))
    })
}

/// Where the default model lives once pulled.
pub fn default_model_path() -> Result<PathBuf, LocalError> {
    Ok(models_dir()?.join(default_model().file_name))
}

/// A model file in the models directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// File name without `.gguf`.
    pub name: String,
    /// Full path.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Whether this is the default model (`rlm model pull` fetches it).
    pub is_default: bool,
}

/// The `.gguf` files in `dir`, sorted by name (an absent directory is empty).
/// Unfinished downloads (`*.partial`, parts directories) are not listed.
pub fn list_models(dir: &Path) -> Result<Vec<CachedModel>, LocalError> {
    let default = default_model();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(LocalError::Io {
                what: format!("cannot read models directory {}", dir.display()),
                source: e,
            });
        }
    };
    let mut models = Vec::new();
    for entry in entries {
        let entry = entry.map_err(LocalError::io(format!("cannot read {}", dir.display())))?;
        let path = entry.path();
        let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(name) = file_name.strip_suffix(".gguf") else {
            continue;
        };
        let meta = entry
            .metadata()
            .map_err(LocalError::io(format!("cannot stat {}", path.display())))?;
        if !meta.is_file() {
            continue;
        }
        models.push(CachedModel {
            name: name.to_string(),
            is_default: file_name == default.file_name,
            size: meta.len(),
            path,
        });
    }
    models.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(models)
}

/// The file a spec is stored in under `dir`.
pub fn model_path(dir: &Path, spec: &ModelSpec) -> PathBuf {
    dir.join(&spec.file_name)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    #[test]
    fn models_dir_prefers_the_override_then_the_cache_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            models_dir_with_env(env(&[("RLM_MODELS_DIR", "/m"), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/m")
        );
        if cfg!(target_os = "linux") {
            assert_eq!(
                models_dir_with_env(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])).unwrap(),
                PathBuf::from("/x/rlm/models")
            );
            assert_eq!(
                models_dir_with_env(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])).unwrap(),
                PathBuf::from("/h/.cache/rlm/models"),
                "a relative XDG_CACHE_HOME is ignored, as the spec says"
            );
            let err = models_dir_with_env(env(&[])).unwrap_err();
            assert!(err.to_string().contains("RLM_MODELS_DIR"), "{err}");
        }
    }

    #[test]
    fn list_shows_gguf_files_only_and_marks_the_default() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list_models(&dir.path().join("absent")).unwrap().is_empty());
        std::fs::write(dir.path().join("zeta.gguf"), b"1234").unwrap();
        std::fs::write(dir.path().join(default_model().file_name), b"12").unwrap();
        std::fs::write(dir.path().join("x.gguf.partial"), b"1").unwrap();
        std::fs::create_dir(dir.path().join("x.parts")).unwrap();
        let models = list_models(dir.path()).unwrap();
        let names: Vec<_> = models
            .iter()
            .map(|m| (m.name.as_str(), m.size, m.is_default))
            .collect();
        assert_eq!(
            names,
            [("qwen2.5-coder-1.5b-instruct", 2, true), ("zeta", 4, false)]
        );
    }
}
