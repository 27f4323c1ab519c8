//! Which embedder to use and where its model lives: flags > environment >
//! `rlm.toml` `[embeddings]` > defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_settings::{Reader, Setting, SettingError, SettingsFile, table};

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
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Self, EmbedError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(EmbeddingsChoice::None),
            "local" => Ok(EmbeddingsChoice::Local),
            "provider" => Ok(EmbeddingsChoice::Provider),
            other => Err(EmbedError::UnknownChoice(other.to_string())),
        }
    }
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
    /// The values are declared in `rlm-settings` (the `[embeddings]` table,
    /// `RLM_EMBED_*`); the environment beats the file.
    pub fn load_with_env(
        config_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<EmbeddingSettings, EmbedError> {
        // Not only regular files: a named FIFO or device is read too (with
        // the size cap), as the other readers of the same file do.
        let file = match config_file.filter(|p| p.exists()) {
            Some(path) => SettingsFile::load(Some(path)).map_err(config_error)?,
            None => SettingsFile::default(),
        };
        let found = |s: &Setting| file.env_then_file(s, &env);
        let r = Reader::new(&found);
        let model_path = match rlm_settings::env_found(&table::EMBED_MODEL, &env) {
            Some(f) => Some(PathBuf::from(f.value)),
            // Relative to the config file, like other paths in it.
            None => file.path_value(&table::EMBED_MODEL),
        };
        Ok(EmbeddingSettings {
            model_path,
            provider_model: r.text(&table::EMBED_PROVIDER_MODEL),
            batch_size: r.whole(&table::EMBED_BATCH).map_err(config_error)?,
        })
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

fn config_error(e: SettingError) -> EmbedError {
    EmbedError::Config(e.to_string())
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
        text.push_str(&"#".repeat(rlm_settings::SETTINGS_FILE_LIMIT as usize));
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
