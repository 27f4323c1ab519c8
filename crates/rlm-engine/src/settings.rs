//! Engine settings from `rlm.toml`: the `[engine]` table, consulted after
//! the environment. Its keys are declared with every other setting in
//! `rlm-settings` (docs/configuration.md lists them):
//!
//! ```toml
//! [engine]
//! max_llm_calls = 120
//! flow = "pipeline"
//! inspector = "hypothesis"
//! citation_policy = "strict"
//! ```

pub use rlm_settings::{DEFAULT_SETTINGS_FILE, SettingsFile};

use crate::EngineConfig;
use crate::values::{ConfigError, FromSettings, Setting};

/// The engine's configuration from a settings file: the environment first,
/// then the file. (The file refused keys no setting has when it was read.)
pub trait EngineSettings {
    /// The engine configuration from the process environment, then this file.
    fn engine_config(&self) -> Result<EngineConfig, ConfigError>;

    /// Like [`engine_config`](Self::engine_config) with an explicit
    /// environment (testable).
    fn engine_config_with_env(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<EngineConfig, ConfigError>;
}

impl EngineSettings for SettingsFile {
    fn engine_config(&self) -> Result<EngineConfig, ConfigError> {
        self.engine_config_with_env(&|k| std::env::var(k).ok())
    }

    fn engine_config_with_env(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<EngineConfig, ConfigError> {
        EngineConfig::from_settings(&|s: &Setting| self.env_then_file(s, env))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn file(text: &str) -> Result<SettingsFile, rlm_settings::SettingError> {
        SettingsFile::parse(text, Path::new("rlm.toml"))
    }

    #[test]
    fn values_apply_after_the_environment() {
        let f = file("[llm]\nprovider = \"openai\"\n[engine]\nmax_llm_calls = 77\nmax_depth = 3\ncontext_shape = \"list\"\nverify = false\n").unwrap();
        // The environment (here: the lookup) wins over the file.
        let c = f
            .engine_config_with_env(&|k| (k == "RLM_MAX_DEPTH").then(|| "1".into()))
            .unwrap();
        assert_eq!(c.budget.max_llm_calls, 77);
        assert_eq!(c.budget.max_depth, 1);
        assert_eq!(c.context_shape, crate::ContextShape::List);
        assert!(!c.verify_citations);
    }

    #[test]
    fn flow_settings_are_read_too() {
        let f = file("[engine]\nflow = \"pipeline\"\nmax_files = 7\n").unwrap();
        let c = f.engine_config_with_env(&|_| None).unwrap();
        assert_eq!(c.flows.max_files, 7);
    }

    #[test]
    fn bad_values_name_the_file_entry() {
        let f = file("[engine]\nmax_llm_calls = \"many\"\n").unwrap();
        let e = f.engine_config_with_env(&|_| None).unwrap_err().to_string();
        assert!(e.contains("RLM_MAX_LLM_CALLS"), "{e}");
        assert!(e.starts_with("rlm.toml: [engine] max_llm_calls"), "{e}");
        // An old key still works.
        let f = file("[engine]\nverify_citations = false\nmax_calls = 4\n").unwrap();
        let c = f.engine_config_with_env(&|_| None).unwrap();
        assert!(!c.verify_citations);
        assert_eq!(c.budget.max_iterations, 4);
    }
}
