//! Which embedder to use and where its model lives: flags > environment >
//! `rlm.toml` `[embeddings]` > defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_settings::{Reader, Setting, SettingError, SettingsFile, table};

use super::{
    DEFAULT_PROVIDER_MODEL, E5_MODEL_ID, E5Embedder, EmbedError, Embedder, MINILM_MODEL_ID,
    MiniLmEmbedder, ProviderEmbedder, ProviderEmbedderConfig,
};

/// The `--embeddings` choice of `rlm index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmbeddingsChoice {
    /// No vectors (BM25 only).
    #[default]
    None,
    /// A model in-process on the CPU: which one, [`LocalModelChoice`] says.
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

/// A model `--embeddings local` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalModel {
    /// all-MiniLM-L6-v2: English only, 6 layers (the faster one).
    MiniLm,
    /// multilingual-e5-small: about 100 languages, 12 layers.
    E5Small,
}

impl LocalModel {
    /// The id recorded in a store for this model's vectors.
    pub fn model_id(self) -> &'static str {
        match self {
            LocalModel::MiniLm => MINILM_MODEL_ID,
            LocalModel::E5Small => E5_MODEL_ID,
        }
    }

    /// The model whose vectors a store records as `id`, if it is local.
    pub fn from_model_id(id: &str) -> Option<LocalModel> {
        [LocalModel::MiniLm, LocalModel::E5Small]
            .into_iter()
            .find(|m| m.model_id() == id)
    }
}

/// The share of a store's chunks a language needs to count when `auto`
/// chooses the local model.
pub const MIN_LANGUAGE_SHARE: f64 = 0.05;

/// The `local_model` setting (`RLM_EMBED_LOCAL_MODEL`): a model, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalModelChoice {
    /// all-MiniLM-L6-v2.
    MiniLm,
    /// multilingual-e5-small.
    E5Small,
    /// The caller decides by the languages of the documents
    /// ([`local_model_for_languages`]); all-MiniLM-L6-v2 when it knows none.
    #[default]
    Auto,
}

impl LocalModelChoice {
    /// The model to run for documents in `languages` (`None`: not known).
    pub fn resolve(self, languages: Option<&[&str]>) -> LocalModel {
        match (self, languages) {
            (LocalModelChoice::MiniLm, _) => LocalModel::MiniLm,
            (LocalModelChoice::E5Small, _) => LocalModel::E5Small,
            (LocalModelChoice::Auto, Some(langs)) => local_model_for_languages(langs),
            (LocalModelChoice::Auto, None) => LocalModel::MiniLm,
        }
    }
}

impl std::str::FromStr for LocalModelChoice {
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Self, EmbedError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "minilm" | "all-minilm-l6-v2" => Ok(LocalModelChoice::MiniLm),
            "e5-small" | "e5" | "multilingual-e5-small" => Ok(LocalModelChoice::E5Small),
            "auto" => Ok(LocalModelChoice::Auto),
            other => Err(EmbedError::Config(format!(
                "unknown local embedding model {other:?}: use minilm, e5-small or auto"
            ))),
        }
    }
}

/// The local model for documents in `languages` (ISO 639 codes or English
/// names, with or without a region: `en`, `en-GB`, `eng`, `English`, `de`):
/// all-MiniLM-L6-v2 when every language is English or unknown (`""`, `und`,
/// `unknown`, `zxx`), which is also the answer for no languages at all, else
/// multilingual-e5-small. all-MiniLM-L6-v2 has only an English vocabulary:
/// German or French text comes out as word fragments it was never trained on.
pub fn local_model_for_languages(languages: &[&str]) -> LocalModel {
    let english_or_unknown = |lang: &&str| {
        let lang = lang.trim().to_ascii_lowercase();
        let primary = lang.split(['-', '_']).next().unwrap_or("");
        matches!(
            primary,
            "en" | "eng" | "english" | "" | "und" | "unknown" | "zxx"
        )
    };
    if languages.iter().all(english_or_unknown) {
        LocalModel::MiniLm
    } else {
        LocalModel::E5Small
    }
}

/// Embedding settings that do not belong to the model provider's config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbeddingSettings {
    /// Folder of the local all-MiniLM-L6-v2 files (`RLM_EMBED_MODEL`, `model_path`).
    pub model_path: Option<PathBuf>,
    /// Folder of multilingual-e5-small's `e5-small-q4.bin`
    /// (`RLM_EMBED_E5_MODEL`, `e5_model_path`).
    pub e5_model_path: Option<PathBuf>,
    /// Which model `--embeddings local` runs (`RLM_EMBED_LOCAL_MODEL`,
    /// `local_model`; default `auto`).
    pub local_model: LocalModelChoice,
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
        // Relative to the config file, like other paths in it.
        let path = |s: &Setting| match rlm_settings::env_found(s, &env) {
            Some(f) => Some(PathBuf::from(f.value)),
            None => file.path_value(s),
        };
        Ok(EmbeddingSettings {
            model_path: path(&table::EMBED_MODEL),
            e5_model_path: path(&table::EMBED_E5_MODEL),
            local_model: r
                .parsed(&table::EMBED_LOCAL_MODEL)
                .map_err(config_error)?
                .unwrap_or_default(),
            provider_model: r.text(&table::EMBED_PROVIDER_MODEL),
            batch_size: r.whole(&table::EMBED_BATCH).map_err(config_error)?,
        })
    }

    /// Loads all-MiniLM-L6-v2 from `model_path`.
    pub fn local(&self) -> Result<MiniLmEmbedder, EmbedError> {
        let path = self
            .model_path
            .as_ref()
            .ok_or_else(|| EmbedError::ModelNotFound("no model folder configured".to_string()))?;
        MiniLmEmbedder::load(path)
    }

    /// Loads multilingual-e5-small from `e5_model_path`.
    pub fn e5(&self) -> Result<E5Embedder, EmbedError> {
        let path = self
            .e5_model_path
            .as_ref()
            .ok_or_else(|| EmbedError::E5ModelNotFound("no model folder configured".to_string()))?;
        E5Embedder::load(path)
    }

    /// Loads the local `model`.
    pub fn local_model(&self, model: LocalModel) -> Result<Box<dyn Embedder>, EmbedError> {
        Ok(match model {
            LocalModel::MiniLm => Box::new(self.local()?),
            LocalModel::E5Small => Box::new(self.e5()?),
        })
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
    /// `provider` supplies the base URL, key and timeout when needed. With
    /// `local_model = auto` this runs all-MiniLM-L6-v2: a caller that knows
    /// the documents' languages calls [`EmbeddingSettings::embedder_for_languages`].
    pub fn embedder(
        &self,
        choice: EmbeddingsChoice,
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, EmbedError> {
        self.embedder_with(choice, None, provider)
    }

    /// [`EmbeddingSettings::embedder`] for documents in `languages`: with
    /// `local_model = auto`, [`local_model_for_languages`] picks the model.
    pub fn embedder_for_languages(
        &self,
        choice: EmbeddingsChoice,
        languages: &[&str],
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, EmbedError> {
        self.embedder_with(choice, Some(languages), provider)
    }

    fn embedder_with(
        &self,
        choice: EmbeddingsChoice,
        languages: Option<&[&str]>,
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, EmbedError> {
        Ok(match choice {
            EmbeddingsChoice::None => None,
            EmbeddingsChoice::Local => Some(self.local_model(self.local_model.resolve(languages))?),
            EmbeddingsChoice::Provider => {
                let (url, key, timeout) = provider()?;
                Some(Box::new(self.provider(&url, key, timeout)?))
            }
        })
    }

    /// True when the embedder for `choice` depends on the documents (a
    /// local model chosen `auto`): [`EmbeddingSettings::embedder_for_index`]
    /// then picks it after indexing.
    pub fn chosen_by_documents(&self, choice: EmbeddingsChoice) -> bool {
        choice == EmbeddingsChoice::Local && self.local_model == LocalModelChoice::Auto
    }

    /// The embedder for an indexing run into `store` with `choice`: a local
    /// model chosen `auto` is the one the store's vectors already have
    /// (unless `replace`, which embeds everything again), else the one for
    /// the store's languages, counting those with at least
    /// [`MIN_LANGUAGE_SHARE`] of its chunks (one French file in an English
    /// codebase does not make it multilingual).
    pub fn embedder_for_index(
        &self,
        choice: EmbeddingsChoice,
        store: &dyn crate::CorpusStore,
        replace: bool,
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, crate::RetrievalError> {
        if !self.chosen_by_documents(choice) {
            return Ok(self.embedder(choice, provider)?);
        }
        if !replace
            && let Some((id, _)) = store.embedding_model()?
            && let Some(model) = LocalModel::from_model_id(&id)
        {
            return Ok(Some(self.local_model(model)?));
        }
        let shares = store.languages()?;
        let total: u64 = shares.iter().map(|s| s.chunks).sum();
        let languages: Vec<&str> = shares
            .iter()
            .filter(|s| s.chunks as f64 >= MIN_LANGUAGE_SHARE * total as f64)
            .map(|s| s.code.as_str())
            .collect();
        Ok(self.embedder_for_languages(choice, &languages, provider)?)
    }

    /// The embedder that can embed queries for `store`: the model recorded in
    /// it (a local model, whatever `local_model` says, or the provider model it
    /// was embedded with, whatever `provider_model` says). `None` when the
    /// store has no embeddings.
    pub fn embedder_for_store(
        &self,
        store: &dyn crate::CorpusStore,
        provider: impl FnOnce() -> Result<(String, Option<String>, Duration), EmbedError>,
    ) -> Result<Option<Box<dyn Embedder>>, crate::RetrievalError> {
        let Some((model, _)) = store.embedding_model()? else {
            return Ok(None);
        };
        let mut settings = self.clone();
        let choice = if let Some(local) = LocalModel::from_model_id(&model) {
            settings.local_model = match local {
                LocalModel::MiniLm => LocalModelChoice::MiniLm,
                LocalModel::E5Small => LocalModelChoice::E5Small,
            };
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
