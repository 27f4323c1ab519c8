//! Where values come from: a question's own settings, the environment and
//! `rlm.toml`, strongest first. Each value found carries the name the user
//! wrote it under, so errors can say `--max-depth`, `environment variable
//! RLM_MAX_DEPTH` or `rlm.toml: [engine] max_depth (RLM_MAX_DEPTH)`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::SettingError;
use crate::spec::{Kind, OldName, Setting};
use crate::table;

/// The config file read when none is named, if it exists.
pub const DEFAULT_SETTINGS_FILE: &str = "rlm.toml";
/// The largest settings file read (1 MiB); only that much is read, so an
/// endless file (a FIFO, a device) ends too.
pub const SETTINGS_FILE_LIMIT: u64 = 1 << 20;

/// Layer of a question's own settings (flags, API fields).
pub const LAYER_QUESTION: u8 = 0;
/// Layer of the environment.
pub const LAYER_ENV: u8 = 1;
/// Layer of a settings file.
pub const LAYER_FILE: u8 = 2;

/// A setting's value as found, with how to name it in an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The value as written.
    pub value: String,
    /// The setting as the user wrote it, e.g. `--max-depth` or
    /// `environment variable RLM_MAX_DEPTH`.
    pub name: String,
    /// Where it came from: lower is stronger (see the `LAYER_*` constants).
    pub layer: u8,
}

impl Found {
    /// A value of environment variable `key`.
    pub fn env(key: &str, value: impl Into<String>) -> Self {
        Found {
            value: value.into(),
            name: format!("environment variable {key}"),
            layer: LAYER_ENV,
        }
    }
}

static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Says once per process, on stderr, that `old` is an old name of `new`.
fn warn_deprecated(old: &str, new: &str) {
    let line = format!("rlm: warning: {old} is an old name; use {new} (the old name still works)");
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.insert(line.clone()) {
        eprintln!("{line}");
    }
}

/// The deprecation warnings given so far in this process (for tests and
/// for surfaces that report warnings in their own output).
pub fn take_deprecation_warnings() -> Vec<String> {
    let warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    warned.iter().cloned().collect()
}

/// The value of `setting` in the environment `env` (its variable, else one of
/// its old variables, with a warning). Blank values count as unset: shells
/// make them easy to leave behind.
pub fn env_found(setting: &Setting, env: &dyn Fn(&str) -> Option<String>) -> Option<Found> {
    let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(var) = setting.env
        && let Some(v) = get(var)
    {
        return Some(Found::env(var, v));
    }
    setting.old.iter().find_map(|old| match old {
        OldName::Env(var) => get(var).map(|v| {
            warn_deprecated(
                &format!("environment variable {var}"),
                setting.env.unwrap_or(setting.key),
            );
            Found::env(var, v)
        }),
        OldName::Toml(_) => None,
    })
}

/// One source of values: a setting's value there, if it has one.
pub type Layer<'a> = &'a dyn Fn(&Setting) -> Option<Found>;

/// A lookup that tries each of `layers` in order (the strongest first).
pub fn layered<'a>(layers: &'a [Layer<'a>]) -> impl Fn(&Setting) -> Option<Found> + 'a {
    move |s| layers.iter().find_map(|l| l(s))
}

/// The settings of `rlm.toml`: every table this program reads, checked
/// against [`table::ALL`] when read (a key no setting has is an error: a
/// typo must not be silently ignored).
#[derive(Debug, Clone, Default)]
pub struct SettingsFile {
    path: Option<PathBuf>,
    /// `(table, key)` → the value as text.
    values: BTreeMap<(String, String), String>,
    /// The structured tables (`llm.prices`, `llm.context_windows`), as written.
    structured: BTreeMap<String, toml::Value>,
}

impl SettingsFile {
    /// Reads `path`, or `./rlm.toml` when `path` is `None` and that file
    /// exists (else no settings). A named file must exist.
    pub fn load(path: Option<&Path>) -> Result<Self, SettingError> {
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
        let text = read_bounded(&path)?;
        Self::parse(&text, &path)
    }

    /// Parses settings text; `path` names the file in errors and is the
    /// folder relative paths in it are resolved against.
    pub fn parse(text: &str, path: &Path) -> Result<Self, SettingError> {
        let shown = path.display();
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            SettingError::File(format!(
                "{shown} is not valid TOML: {}",
                e.to_string().trim().replace('\n', " ")
            ))
        })?;
        let mut file = SettingsFile {
            path: Some(path.to_path_buf()),
            ..Default::default()
        };
        for (name, value) in &doc {
            if !known_table(name) {
                // Tables of other programs sharing the file are theirs.
                continue;
            }
            let table = value.as_table().ok_or_else(|| {
                in_table(
                    name,
                    format!(
                        "{shown}: [{name}] must be a table of settings, e.g. {}",
                        example(name)
                    ),
                )
            })?;
            file.take_table(name, table)?;
        }
        Ok(file)
    }

    fn take_table(&mut self, name: &str, table: &toml::Table) -> Result<(), SettingError> {
        let shown = self.path_text();
        for (key, value) in table {
            let full = format!("{name}.{key}");
            if table::STRUCTURED_TABLES.iter().any(|(t, _)| *t == full) {
                self.structured.insert(full, value.clone());
                continue;
            }
            if let toml::Value::Table(inner) = value
                && known_table(&full)
            {
                self.take_table(&full, inner)?;
                continue;
            }
            if !known_key(name, key) {
                return Err(in_table(
                    name,
                    format!(
                        "{shown}: [{name}] has no setting {key:?}; its keys are: {} (see docs/configuration.md)",
                        keys_of(name).join(", ")
                    ),
                ));
            }
            let wants_text = table::ALL.iter().any(|s| {
                s.table == Some(name)
                    && s.key == key.to_ascii_lowercase()
                    && matches!(s.kind, Kind::Path | Kind::Text | Kind::Secret)
            });
            if wants_text && !value.is_str() {
                return Err(in_table(
                    name,
                    format!(
                        "{shown}: [{name}] {key} must be text in quotes, not {}",
                        value.type_str()
                    ),
                ));
            }
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(in_table(
                        name,
                        format!(
                            "{shown}: [{name}] {key} must be a string, number or boolean, not {}",
                            other.type_str()
                        ),
                    ));
                }
            };
            self.values
                .insert((name.to_string(), key.to_ascii_lowercase()), text);
        }
        Ok(())
    }

    /// The file that was read, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn path_text(&self) -> String {
        self.path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// The value of `setting` in this file (its key, else an old key, with
    /// a warning), named as `rlm.toml: [engine] max_depth (RLM_MAX_DEPTH)`.
    pub fn found(&self, setting: &Setting) -> Option<Found> {
        let table = setting.table?;
        let get = |key: &str| {
            self.values
                .get(&(table.to_string(), key.to_string()))
                .filter(|v| !v.trim().is_empty())
        };
        let (key, value) = match get(setting.key) {
            Some(v) => (setting.key, v),
            None => setting.old.iter().find_map(|old| match old {
                OldName::Toml(k) => get(k).map(|v| {
                    warn_deprecated(
                        &format!("[{table}] {k} in {}", self.path_text()),
                        &format!("[{table}] {}", setting.key),
                    );
                    (*k, v)
                }),
                OldName::Env(_) => None,
            })?,
        };
        let mut name = format!("{}: [{table}] {key}", self.path_text());
        if let Some(env) = setting.env {
            name.push_str(&format!(" ({env})"));
        }
        Some(Found {
            value: value.clone(),
            name,
            layer: LAYER_FILE,
        })
    }

    /// A path setting's value, relative paths resolved against the file's
    /// folder (as every path in the file is).
    pub fn path_value(&self, setting: &Setting) -> Option<PathBuf> {
        let found = self.found(setting)?;
        let p = PathBuf::from(found.value.trim());
        Some(match self.path.as_ref().and_then(|f| f.parent()) {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p,
        })
    }

    /// A structured table (`llm.prices`, `llm.context_windows`) as written.
    pub fn structured(&self, name: &str) -> Option<&toml::Value> {
        self.structured.get(name)
    }

    /// The value of `setting` from `env`, else from this file.
    pub fn env_then_file(
        &self,
        setting: &Setting,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Found> {
        env_found(setting, env).or_else(|| self.found(setting))
    }
}

/// An error of the file's table `table`.
fn in_table(table: &str, message: String) -> SettingError {
    SettingError::Table {
        table: table.to_string(),
        message,
    }
}

/// Reads `path`, refused past [`SETTINGS_FILE_LIMIT`].
fn read_bounded(path: &Path) -> Result<String, SettingError> {
    let fail = |e: std::io::Error| {
        SettingError::File(format!("cannot read config file {}: {e}", path.display()))
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(SETTINGS_FILE_LIMIT + 1).read_to_string(&mut text))
        .map_err(fail)?;
    if text.len() as u64 > SETTINGS_FILE_LIMIT {
        return Err(SettingError::File(format!(
            "config file {} is larger than the limit of 1 MiB",
            path.display()
        )));
    }
    Ok(text)
}

fn known_table(name: &str) -> bool {
    table::ALL.iter().any(|s| s.table == Some(name))
}

fn known_key(table: &str, key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    table::ALL
        .iter()
        .any(|s| s.table == Some(table) && (s.key == key || s.old.iter().any(|o| o.is_toml(&key))))
        || table::ALL
            .iter()
            .any(|s| s.table == Some(&format!("{table}.{key}")))
}

fn keys_of(table: &str) -> Vec<&'static str> {
    let mut keys: Vec<&str> = table::ALL
        .iter()
        .filter(|s| s.table == Some(table))
        .map(|s| s.key)
        .collect();
    keys.dedup();
    keys
}

fn example(table: &str) -> String {
    keys_of(table)
        .first()
        .map(|k| format!("{k} = …"))
        .unwrap_or_default()
}
