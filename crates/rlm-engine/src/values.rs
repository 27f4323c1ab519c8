//! Reading the engine's settings: the declarations, the layered lookup and
//! the typed reader live in `rlm-settings` (one place for every crate);
//! this module adds [`FromSettings`], the engine's way to build a settings
//! struct from a lookup or the environment.

pub use rlm_settings::{
    Found, Kind, LAYER_ENV, LAYER_FILE, LAYER_QUESTION, Lookup, Reader, Setting, SettingError,
    table,
};

/// Settings built from a [`Lookup`]: implement [`from_settings`]
/// (strongest source first), get the environment readers for free.
///
/// [`from_settings`]: FromSettings::from_settings
pub trait FromSettings: Sized {
    /// The settings from `lookup`, every value checked against its declaration.
    fn from_settings(lookup: Lookup<'_>) -> Result<Self, String>;

    /// Like [`from_env`](Self::from_env) with an explicit variable lookup
    /// (testable): `get` answers environment variable names, old names included.
    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        Self::from_settings(&|s: &Setting| rlm_settings::env_found(s, &get))
    }

    /// Defaults overridden by the `RLM_*` environment variables (see
    /// docs/configuration.md); a bad value is an error naming it.
    fn from_env() -> Result<Self, String> {
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
