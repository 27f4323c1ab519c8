//! Reading the engine's settings: the declarations, the layered lookup and
//! the typed reader live in `rlm-settings` (one place for every crate);
//! this module adds [`FromSettings`], the engine's way to build a settings
//! struct from a lookup or the environment.

pub use rlm_settings::{
    Found, Kind, LAYER_ENV, LAYER_FILE, LAYER_QUESTION, Lookup, Reader, Setting, SettingError,
    table,
};

/// A configuration that cannot be used: a value its setting does not
/// accept, or values that do not fit together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value outside its setting's type or range, named as the user wrote it.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// Values that do not fit together, a word a setting does not know, or
    /// a back-end that cannot start here; the message says which and why.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for ConfigError {
    fn from(message: String) -> Self {
        ConfigError::Invalid(message)
    }
}

impl From<&str> for ConfigError {
    fn from(message: &str) -> Self {
        ConfigError::Invalid(message.to_string())
    }
}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

/// Settings built from a [`Lookup`]: implement [`from_settings`]
/// (strongest source first), get the environment readers for free.
///
/// [`from_settings`]: FromSettings::from_settings
pub trait FromSettings: Sized {
    /// The settings from `lookup`, every value checked against its declaration.
    fn from_settings(lookup: Lookup<'_>) -> Result<Self, ConfigError>;

    /// Like [`from_env`](Self::from_env) with an explicit variable lookup
    /// (testable): `get` answers environment variable names, old names included.
    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_settings(&|s: &Setting| rlm_settings::env_found(s, &get))
    }

    /// Defaults overridden by the `RLM_*` environment variables (see
    /// docs/configuration.md); a bad value is an error naming it.
    fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }
}

/// The engine's numeric settings (`[engine]` entries with a range), for
/// schemas and exhaustive tests.
pub fn numeric_settings() -> impl Iterator<Item = &'static Setting> {
    table::ALL.iter().copied().filter(|s| {
        s.table == Some("engine")
            && matches!(
                s.kind,
                Kind::Whole(..) | Kind::Above(..) | Kind::Between(..)
            )
    })
}
