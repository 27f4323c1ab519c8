//! Every setting of `rlm` declared once, and read one way.
//!
//! [`table`] declares each setting: its type and range, its default, and its
//! name on each surface (flag, environment variable, `rlm.toml` key, API
//! field). Values are looked up strongest first — a question's own settings
//! (flags, request fields), then the environment, then `rlm.toml` — and
//! checked by [`Reader`] against the declaration, so a bad value is one
//! error that names the setting the way the user wrote it. Old names still
//! work, with a one-line deprecation warning. `docs/configuration.md` is
//! generated from the table by [`reference::markdown`].

mod error;
mod read;
pub mod reference;
mod sources;
mod spec;
pub mod table;

pub use error::SettingError;
pub use read::{Lookup, Reader, parse_bool};
pub use sources::{
    DEFAULT_SETTINGS_FILE, Found, LAYER_ENV, LAYER_FILE, LAYER_QUESTION, Layer,
    SETTINGS_FILE_LIMIT, SettingsFile, env_found, layered, take_deprecation_warnings,
};
pub use spec::{Group, Kind, OldName, Setting};

#[cfg(test)]
mod tests;
