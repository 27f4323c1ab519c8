//! The one error type of settings: what was wrong, named the way the user
//! wrote it, and what is accepted.

/// A setting that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// A value outside the setting's type or range, e.g.
    /// `--max-depth="11" is not a whole number from 0 to 10`.
    #[error("{name}={value:?} is not {want}")]
    Invalid {
        /// The setting as the user wrote it.
        name: String,
        /// The value as written.
        value: String,
        /// What is accepted.
        want: String,
    },
    /// A value its type's own parser refused (flows, policies, shapes); the
    /// message says what is accepted.
    #[error("{name}: {message}")]
    Refused {
        /// The setting as the user wrote it.
        name: String,
        /// The parser's message.
        message: String,
    },
    /// The settings file could not be read or is not valid TOML.
    #[error("{0}")]
    File(String),
    /// A table of the settings file is wrong: not a table, a key no setting
    /// has, a value of the wrong type.
    #[error("{message}")]
    Table {
        /// The table, e.g. `engine` or `llm.root`.
        table: String,
        /// What is wrong, naming the file and the entry.
        message: String,
    },
}

impl From<SettingError> for String {
    fn from(e: SettingError) -> String {
        e.to_string()
    }
}
