//! Which embedder to use and where its model lives: flags > environment >
//! `rlm.toml` `[embeddings]` > defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    DEFAULT_PROVIDER_MODEL, EmbedError, Embedder, MiniLmEmbedder, ProviderEmbedder,
    ProviderEmbedderConfig,
};

/// The `--embeddings` choice of `rlm index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmbeddingsChoice {
    /// No vectors (BM25 only).
    #[default]
    None,
    /// all-MiniLM-L6-v2 in-process, from `RLM_EMBED_MODEL`.
    Local,
    /// The configured provider's `/v1/embeddings`.
    Provider,
}

impl std::str::FromStr for EmbeddingsChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(EmbeddingsChoice::None),
            "local" => Ok(EmbeddingsChoice::Local),
            "provider" => Ok(EmbeddingsChoice::Provider),
            other => Err(format!(
                "unknown embeddings choice {other:?}: use local, provider or none"
            )),
        }
    }
}

/// The largest config file read (as `rlm_llm::bounded::CONFIG_FILE_LIMIT`;
/// this crate does not depend on `rlm-llm`).
const CONFIG_FILE_LIMIT: u64 = 1 << 20;

/// The text of the config file `path`, refused past [`CONFIG_FILE_LIMIT`]
/// (only that much is read, so an endless file ends too).
fn read_config(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let fail = |e: std::io::Error| format!("cannot read config file {}: {e}", path.display());
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(CONFIG_FILE_LIMIT + 1).read_to_string(&mut text))
        .map_err(fail)?;
    if text.len() as u64 > CONFIG_FILE_LIMIT {
        return Err(format!(
            "config file {} is larger than the limit of 1 MiB",
            path.display()
        ));
    }
    Ok(text)
}

/// Embedding settings that do not belong to the model provider's config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbeddingSettings {
    /// Folder of the local all-MiniLM-L6-v2 files (`RLM_EMBED_MODEL`, `model_path`).
    pub model_path: Option<PathBuf>,
    /// Provider embedding model (`RLM_EMBED_PROVIDER_MODEL`, `provider_model`).
    pub provider_model: Option<String>,
    /// Texts per provider request (`RLM_EMBED_BATCH`, `batch_size`; default 64).
    pub batch_size: Option<usize>,
}

impl EmbeddingSettings {
    /// Reads the process environment and the `[embeddings]` table of
    /// `config_file` (when it exists). Unknown keys in the table are errors.
    pub fn load(config_file: Option<&Path>) -> Result<EmbeddingSettings, EmbedError> {
        Self::load_with_env(config_file, |k| std::env::var(k).ok())
    }

    /// [`EmbeddingSettings::load`] with an explicit environment, for tests.
    pub fn load_with_env(
        config_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<EmbeddingSettings, EmbedError> {
        let mut s = EmbeddingSettings::default();
        // Not only regular files: a named FIFO or device is read too (with
        // the size cap), as the other readers of the same file do.
        if let Some(path) = config_file.filter(|p| p.exists()) {
            let text = read_config(path).map_err(EmbedError::Config)?;
            let doc: toml::Table = toml::from_str(&text)
                .map_err(|e| EmbedError::Config(format!("{}: {e}", path.display())))?;
            if let Some(table) = doc.get("embeddings") {
                let table = table.as_table().ok_or_else(|| {
                    EmbedError::Config(format!("{}: [embeddings] must be a table", path.display()))
                })?;
                for (key, value) in table {
                    let bad = || {
                        EmbedError::Config(format!(
                            "{}: [embeddings] {key} has the wrong type",
                            path.display()
                        ))
                    };
                    match key.as_str() {
                        "model_path" => {
                            let p = PathBuf::from(value.as_str().ok_or_else(bad)?);
                            // Relative to the config file, like other paths in it.
                            s.model_path = Some(match path.parent() {
                                Some(dir) if p.is_relative() => dir.join(p),
                                _ => p,
                            });
                        }
                        "provider_model" => {
                            s.provider_model = Some(value.as_str().ok_or_else(bad)?.to_string())
                        }
                        "batch_size" => {
                            s.batch_size = Some(
                                value
                                    .as_integer()
                                    .and_then(|n| usize::try_from(n).ok())
                                    .ok_or_else(bad)?,
                            )
                        }
                        other => {
                            return Err(EmbedError::Config(format!(
                                "{}: unknown key [embeddings] {other} (known: model_path, provider_model, batch_size)",
                                path.display()
                            )));
                        }
                    }
                }
            }
        }
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if let Some(p) = env("RLM_EMBED_MODEL") {
            s.model_path = Some(PathBuf::from(p));
        }
        if let Some(m) = env("RLM_EMBED_PROVIDER_MODEL") {
            s.provider_model = Some(m);
        }
        if let Some(b) = env("RLM_EMBED_BATCH") {
            s.batch_size = Some(b.trim().parse().map_err(|_| {
                EmbedError::Config(format!("RLM_EMBED_BATCH={b:?} is not a whole number"))
            })?);
        }
        if s.batch_size == Some(0) {
            return Err(EmbedError::Config(
                "the embedding batch size must be at least 1".into(),
            ));
        }
        Ok(s)
    }

    /// Loads the local model named by `model_path`.
    pub fn local(&self) -> Result<MiniLmEmbedder, EmbedError> {
        let path = self
            .model_path
            .as_ref()
            .ok_or_else(|| EmbedError::ModelNotFound("no model folder configured".to_string()))?;
        MiniLmEmbedder::load(path)
    }

    /// Connects to a provider at `base_url` with `api_key`.
    pub fn provider(
        &self,
        base_url: &str,
        api_key: Option<String>,
        timeout: Duration,
    ) -> Result<ProviderEmbedder, EmbedError> {
        ProviderEmbedder::connect(ProviderEmbedderConfig {
            base_url: base_url.to_string(),
            api_key,
            model: self
                .provider_model
                .clone()
                .unwrap_or_else(|| DEFAULT_PROVIDER_MODEL.to_string()),
            timeout,
            batch_size: self.batch_size.unwrap_or(64),
        })
    }

    /// The embedder for `choice`, or `None` for [`EmbeddingsChoice::None`].
    /// `provider` supplies the base URL, key and timeout when needed.
    pub fn embedder(
        &self,
        choice: EmbeddingsChoice,
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, EmbedError> {
        Ok(match choice {
            EmbeddingsChoice::None => None,
            EmbeddingsChoice::Local => Some(Box::new(self.local()?)),
            EmbeddingsChoice::Provider => {
                let (url, key, timeout) = provider()?;
                Some(Box::new(self.provider(&url, key, timeout)?))
            }
        })
    }

    /// The embedder that can embed queries for `store`: the model recorded in
    /// it (local all-MiniLM-L6-v2, or the provider model it was embedded with,
    /// whatever `provider_model` says). `None` when the store has no embeddings.
    pub fn embedder_for_store(
        &self,
        store: &dyn crate::CorpusStore,
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, crate::RetrievalError> {
        let Some((model, _)) = store.embedding_model()? else {
            return Ok(None);
        };
        let mut settings = self.clone();
        let choice = if model == super::MINILM_MODEL_ID {
            EmbeddingsChoice::Local
        } else if let Some(name) = model.strip_prefix("provider:") {
            settings.provider_model = Some(name.to_string());
            EmbeddingsChoice::Provider
        } else {
            return Err(EmbedError::Config(format!(
                "store {} was embedded by {model:?}, which this rlm cannot load: re-embed with `rlm index <paths> --store {} --embeddings local --rebuild`",
                store.location(),
                store.location()
            ))
            .into());
        };
        Ok(settings.embedder(choice, provider)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_past_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rlm.toml");
        let mut text = "[embeddings]\nbatch_size = 8\n".to_string();
        std::fs::write(&p, &text).unwrap();
        let s = EmbeddingSettings::load_with_env(Some(&p), |_| None).unwrap();
        assert_eq!(s.batch_size, Some(8));
        text.push_str(&"#".repeat(CONFIG_FILE_LIMIT as usize));
        std::fs::write(&p, &text).unwrap();
        let e = EmbeddingSettings::load_with_env(Some(&p), |_| None).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "embeddings configuration: config file {} is larger than the limit of 1 MiB",
                p.display()
            )
        );
    }
}
