//! Engine settings from `rlm.toml`: the `[engine]` table, consulted after the
//! environment. Its keys are the engine's `RLM_*` variables (budgets, flows,
//! retrieval, pipeline constants) without the prefix, in lower case:
//!
//! ```toml
//! [engine]
//! max_llm_calls = 120
//! flow = "pipeline"
//! inspector = "hypothesis"
//! citation_policy = "strict"
//! ```
//!
//! One table instead of a schema per setting: every variable the engine reads
//! through [`EngineConfig::from_settings`] works here, and a key that no setting
//! reads is refused by name (a typo must not be silently ignored).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::EngineConfig;
use crate::values::{Found, FromSettings, LAYER_FILE};

/// The config file read when none is named, if it exists.
pub const DEFAULT_SETTINGS_FILE: &str = "rlm.toml";

/// The `[engine]` table of a settings file (empty when there is none).
#[derive(Debug, Clone, Default)]
pub struct SettingsFile {
    path: Option<PathBuf>,
    values: BTreeMap<String, String>,
}

impl SettingsFile {
    /// Reads `path`, or `./rlm.toml` when `path` is `None` and that file
    /// exists. A named file must exist; other tables (`[llm]`, ...) are left
    /// to their readers.
    pub fn load(path: Option<&Path>) -> Result<Self, String> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => {
                let p = PathBuf::from(DEFAULT_SETTINGS_FILE);
                if !p.is_file() {
                    return Ok(Self::default());
                }
                p
            }
        };
        let text =
            rlm_llm::bounded::read_text(&path, "config file", rlm_llm::bounded::CONFIG_FILE_LIMIT)?;
        Self::parse(&text, &path)
    }

    /// Parses settings text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, String> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e| format!("{} is not valid TOML: {e}", path.display()))?;
        let mut values = BTreeMap::new();
        if let Some(engine) = doc.get("engine") {
            let table = engine.as_table().ok_or_else(|| {
                format!(
                    "{}: [engine] must be a table of settings, e.g. max_llm_calls = 80",
                    path.display()
                )
            })?;
            for (key, value) in table {
                let text = match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "{}: [engine] {key} must be a string, number or boolean, not {}",
                            path.display(),
                            other.type_str()
                        ));
                    }
                };
                values.insert(key.to_ascii_lowercase(), text);
            }
        }
        Ok(Self {
            path: Some(path.to_path_buf()),
            values,
        })
    }

    /// The value for environment variable `var` (`RLM_MAX_DEPTH` → `max_depth`).
    pub fn get(&self, var: &str) -> Option<String> {
        let key = var.strip_prefix("RLM_").unwrap_or(var).to_ascii_lowercase();
        self.values.get(&key).cloned()
    }

    /// The value of `var` from `env`, else from this file, named the way
    /// the user wrote it (`environment variable RLM_X`, or
    /// `rlm.toml: [engine] x (RLM_X)`).
    fn found(&self, var: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<Found> {
        if let Some(v) = env(var).filter(|v| !v.trim().is_empty()) {
            return Some(Found::env(var, v));
        }
        let key = var.strip_prefix("RLM_").unwrap_or(var).to_ascii_lowercase();
        self.values.get(&key).map(|v| Found {
            value: v.clone(),
            name: format!("{}: [engine] {key} ({var})", self.path_text()),
            layer: LAYER_FILE,
        })
    }

    fn path_text(&self) -> String {
        self.path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// The engine configuration from the environment, then this file,
    /// refusing keys of the file that no setting reads.
    pub fn engine_config(&self) -> Result<EngineConfig, String> {
        self.engine_config_with_env(&|k| std::env::var(k).ok())
    }

    /// Like [`engine_config`](Self::engine_config) with an explicit
    /// environment (testable).
    pub fn engine_config_with_env(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<EngineConfig, String> {
        let asked = RefCell::new(BTreeSet::new());
        let lookup = |k: &str| {
            asked
                .borrow_mut()
                .insert(k.strip_prefix("RLM_").unwrap_or(k).to_ascii_lowercase());
            self.found(k, env)
        };
        let config = EngineConfig::from_settings(&lookup)?;
        let asked = asked.into_inner();
        if let Some(unknown) = self.values.keys().find(|k| !asked.contains(*k)) {
            return Err(format!(
                "{}: [engine] has no setting {unknown:?}; its keys are the engine's RLM_* variables from the README without the prefix, in lower case (e.g. max_llm_calls, flow, inspector)",
                self.path_text()
            ));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<SettingsFile, String> {
        SettingsFile::parse(text, Path::new("rlm.toml"))
    }

    #[test]
    fn values_apply_after_the_environment() {
        let f = file("[llm]\nprovider = \"openai\"\n[engine]\nmax_llm_calls = 77\nmax_depth = 3\ncontext_shape = \"list\"\nverify_citations = false\n").unwrap();
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
    fn bad_files_are_clear_errors() {
        let f = file("[engine]\nmax_llm_cals = 5\n").unwrap();
        let e = f.engine_config_with_env(&|_| None).unwrap_err();
        assert!(e.contains("no setting \"max_llm_cals\""), "{e}");
        let e = file("[engine]\nmax_llm_calls = [1]\n").unwrap_err();
        assert!(
            e.contains("must be a string, number or boolean, not array"),
            "{e}"
        );
        let e = file("engine = 3\n").unwrap_err();
        assert!(e.contains("[engine] must be a table"), "{e}");
        let e = file("[engine\n").unwrap_err();
        assert!(e.contains("not valid TOML"), "{e}");
        let f = file("[engine]\nmax_llm_calls = \"many\"\n").unwrap();
        let e = f.engine_config_with_env(&|_| None).unwrap_err();
        assert!(e.contains("RLM_MAX_LLM_CALLS"), "{e}");
        assert!(e.starts_with("rlm.toml: [engine] max_llm_calls"), "{e}");
        let e = SettingsFile::load(Some(Path::new("/nonexistent/rlm.toml"))).unwrap_err();
        assert!(
            e.contains("cannot read config file /nonexistent/rlm.toml"),
            "{e}"
        );
    }
}
