//! Reading setting values, with one set of rules for every place a value
//! can come from: a command-line flag, a field of an API request, an
//! environment variable, or the `[engine]` table of `rlm.toml`.
//!
//! Every numeric setting has its range in [`NUMERIC_SETTINGS`]; a value that
//! is not a number, is NaN or infinite, negative, zero where zero makes no
//! sense, or past its ceiling is a one-line error that names the setting the
//! way the user wrote it (`--max-wall-secs`, `max_wall_secs`, `environment
//! variable RLM_MAX_WALL_SECS`, `rlm.toml: [engine] max_wall_secs`).

use std::str::FromStr;

/// A setting's value as found, with how to name it in an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The value as written.
    pub value: String,
    /// The setting as the user wrote it, e.g. `--max-depth` or
    /// `environment variable RLM_MAX_DEPTH`.
    pub name: String,
    /// Where it came from: lower is stronger (0 a question's own settings,
    /// 1 the environment, 2 a settings file).
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

/// Layer of a question's own settings (flags, API fields).
pub const LAYER_QUESTION: u8 = 0;
/// Layer of the environment.
pub const LAYER_ENV: u8 = 1;
/// Layer of a settings file.
pub const LAYER_FILE: u8 = 2;

/// Where setting values are looked up: `RLM_*` key → value found.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<Found>;

/// Settings read from `RLM_*` keys: implement [`from_settings`]
/// (strongest source first), get the environment readers for free.
///
/// [`from_settings`]: FromSettings::from_settings
pub trait FromSettings: Sized {
    /// The settings from `lookup`, every value checked by this module.
    fn from_settings(lookup: Lookup<'_>) -> Result<Self, String>;

    /// Like [`from_env`](Self::from_env) with an explicit variable lookup (testable).
    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        Self::from_settings(&|k: &str| get(k).map(|v| Found::env(k, v)))
    }

    /// Defaults overridden by the `RLM_*` environment variables (see the
    /// README tables); a bad value is an error naming it.
    fn from_env() -> Result<Self, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }
}

/// The kind and range of a numeric setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    /// A whole number from `.0` to `.1`.
    Whole(u64, u64),
    /// A number more than `.0` (exclusive) and at most `.1`.
    Above(f64, f64),
    /// A number from `.0` to `.1` (inclusive).
    Between(f64, f64),
}

/// One numeric setting: its `RLM_*` key and its range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumericSetting {
    /// The environment variable (and, lower-cased without `RLM_`, the `rlm.toml` key).
    pub key: &'static str,
    /// Accepted values.
    pub range: Range,
}

const fn whole(key: &'static str, min: u64, max: u64) -> NumericSetting {
    NumericSetting {
        key,
        range: Range::Whole(min, max),
    }
}

/// Every numeric setting of the engine with its accepted range.
pub const NUMERIC_SETTINGS: &[NumericSetting] = &[
    // Budgets.
    whole("RLM_MAX_DEPTH", 0, 10),
    whole("RLM_MAX_CALLS", 1, 1_000),
    whole("RLM_SUB_AGENT_CALLS", 1, 1_000),
    whole("RLM_MAX_LLM_CALLS", 1, 100_000),
    whole("RLM_ROOT_RESERVED", 0, 100_000),
    whole("RLM_MAX_CONCURRENT", 1, 1_024),
    whole("RLM_MAX_TOKENS", 1, 100_000_000_000),
    NumericSetting {
        key: "RLM_MAX_COST_USD",
        range: Range::Above(0.0, 1_000_000.0),
    },
    NumericSetting {
        key: "RLM_MAX_WALL_SECS",
        range: Range::Above(0.0, 604_800.0),
    },
    whole("RLM_MAX_ERRORS", 1, 1_000),
    whole("RLM_TRUNCATE_LEN", 100, 100_000_000),
    // The REPL loop.
    whole("RLM_INSPECT_SEARCH_K", 0, 50),
    whole("RLM_MAX_NO_CODE_REPLIES", 1, 100),
    whole("RLM_SUB_CONTEXT_CHARS", 1_000, 100_000_000),
    // Retrieval and the pipeline.
    whole("RLM_RAG_K", 1, 1_000),
    whole("RLM_HIGH_RECALL_K", 1, 10_000),
    whole("RLM_MAX_FILES", 1, 10_000),
    whole("RLM_MAX_CHUNKS", 1, 1_000_000),
    whole("MAX_PREFILTER_CHUNKS", 1, 10_000),
    whole("MAX_RLM_ITERATIONS", 1, 100),
    whole("RLM_MIN_KEEP", 0, 1_000),
    whole("MAX_SELECTED_CHUNKS_PER_FILE", 1, 10_000),
    whole("MAX_TOTAL_CHARS_FOR_SUMMARY", 1, 10_000_000),
    whole("RLM_MAX_EXTRACTED_BYTES", 0, 100_000_000),
    whole("RLM_HYPOTHESIS_MAX_DEPTH", 1, 100),
    NumericSetting {
        key: "RLM_HYPOTHESIS_CONFIDENCE",
        range: Range::Between(0.0, 1.0),
    },
    NumericSetting {
        key: "RLM_HYPOTHESIS_KEEP",
        range: Range::Between(0.0, 1.0),
    },
    whole("RLM_RELEVANCE_BATCH", 1, 1_000),
    whole("RLM_CHUNK_EVAL_TIMEOUT_MS", 1, 600_000),
    whole("RLM_CHUNK_EVAL_MEMORY_MB", 16, 65_536),
    whole("RLM_ITERATION_TIMEOUT_MS", 1, 600_000),
    whole("RLM_ITERATION_MEMORY_MB", 16, 65_536),
];

fn range_of(key: &str) -> Range {
    NUMERIC_SETTINGS
        .iter()
        .find(|s| s.key == key)
        .map(|s| s.range)
        // A numeric key missing from the table is a programming error; no
        // range is then enforced beyond the type's.
        .unwrap_or(Range::Whole(0, u64::MAX))
}

/// Reads settings from a [`Lookup`] with the rules above.
pub struct Reader<'a> {
    lookup: Lookup<'a>,
}

impl<'a> Reader<'a> {
    /// A reader over `lookup`.
    pub fn new(lookup: Lookup<'a>) -> Self {
        Reader { lookup }
    }

    /// The value of `key`, if set to something other than blanks.
    pub fn found(&self, key: &str) -> Option<Found> {
        (self.lookup)(key).filter(|f| !f.value.trim().is_empty())
    }

    /// Trimmed text of `key`.
    pub fn text(&self, key: &str) -> Option<String> {
        self.found(key).map(|f| f.value.trim().to_string())
    }

    /// A whole number in `key`'s range.
    pub fn whole<T: TryFrom<u64>>(&self, key: &str) -> Result<Option<T>, String> {
        let Some(f) = self.found(key) else {
            return Ok(None);
        };
        let (min, max) = match range_of(key) {
            Range::Whole(min, max) => (min, max),
            _ => (0, u64::MAX),
        };
        let v = f.value.trim();
        v.parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("{}={v:?} is not a whole number from {min} to {max}", f.name))
    }

    /// A finite number in `key`'s range.
    pub fn number(&self, key: &str) -> Result<Option<f64>, String> {
        let Some(f) = self.found(key) else {
            return Ok(None);
        };
        let v = f.value.trim();
        let n = v.parse::<f64>().ok().filter(|n| n.is_finite());
        let (ok, want) = match range_of(key) {
            Range::Above(lo, hi) => (
                n.is_some_and(|n| n > lo && n <= hi),
                format!("a number more than {lo} and at most {hi}"),
            ),
            Range::Between(lo, hi) => (
                n.is_some_and(|n| (lo..=hi).contains(&n)),
                format!("a number from {lo} to {hi}"),
            ),
            Range::Whole(lo, hi) => (
                n.is_some_and(|n| n >= lo as f64 && n <= hi as f64),
                format!("a number from {lo} to {hi}"),
            ),
        };
        match n {
            Some(n) if ok => Ok(Some(n)),
            _ => Err(format!("{}={v:?} is not {want}", f.name)),
        }
    }

    /// A boolean (`true`/`false`, `on`/`off`, `yes`/`no`, `1`/`0`).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        let Some(f) = self.found(key) else {
            return Ok(None);
        };
        let v = f.value.trim();
        match v.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Some(true)),
            "0" | "false" | "no" | "off" => Ok(Some(false)),
            _ => Err(format!(
                "{}={v:?} is not a boolean; use true or false",
                f.name
            )),
        }
    }

    /// A value parsed by its type (flows, policies, shapes); the type's
    /// error says what is accepted.
    pub fn parsed<T: FromStr<Err: std::fmt::Display>>(
        &self,
        key: &str,
    ) -> Result<Option<T>, String> {
        let Some(f) = self.found(key) else {
            return Ok(None);
        };
        f.value
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|e| format!("{}: {e}", f.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(key: &'static str, value: &'static str) -> impl Fn(&str) -> Option<Found> {
        move |k| (k == key).then(|| Found::env(key, value))
    }

    #[test]
    fn whole_numbers_are_range_checked() {
        let l = one("RLM_MAX_DEPTH", "3");
        assert_eq!(Reader::new(&l).whole::<u32>("RLM_MAX_DEPTH"), Ok(Some(3)));
        for bad in [
            "-1",
            "11",
            "1.5",
            "inf",
            "NaN",
            "1e3",
            "x",
            "99999999999999999999999",
        ] {
            let l = one("RLM_MAX_DEPTH", bad);
            let e = Reader::new(&l).whole::<u32>("RLM_MAX_DEPTH").unwrap_err();
            assert!(
                e.contains("environment variable RLM_MAX_DEPTH") && e.contains("from 0 to 10"),
                "{bad}: {e}"
            );
        }
        let l = one("RLM_MAX_DEPTH", "  ");
        assert_eq!(Reader::new(&l).whole::<u32>("RLM_MAX_DEPTH"), Ok(None));
    }

    #[test]
    fn numbers_reject_nan_infinity_and_out_of_range() {
        let l = one("RLM_MAX_WALL_SECS", "2.5");
        assert_eq!(Reader::new(&l).number("RLM_MAX_WALL_SECS"), Ok(Some(2.5)));
        for bad in ["0", "-1", "inf", "-inf", "NaN", "1e400", "604801", "soon"] {
            let l = one("RLM_MAX_WALL_SECS", bad);
            let e = Reader::new(&l).number("RLM_MAX_WALL_SECS").unwrap_err();
            assert!(e.contains("RLM_MAX_WALL_SECS"), "{bad}: {e}");
            assert!(e.contains("more than 0 and at most 604800"), "{bad}: {e}");
        }
        let l = one("RLM_HYPOTHESIS_KEEP", "1.5");
        let e = Reader::new(&l).number("RLM_HYPOTHESIS_KEEP").unwrap_err();
        assert!(e.contains("from 0 to 1"), "{e}");
    }

    #[test]
    fn every_numeric_setting_has_a_sane_range() {
        for s in NUMERIC_SETTINGS {
            match s.range {
                Range::Whole(lo, hi) => assert!(lo < hi, "{}", s.key),
                Range::Above(lo, hi) | Range::Between(lo, hi) => {
                    assert!(lo.is_finite() && hi.is_finite() && lo < hi, "{}", s.key)
                }
            }
        }
    }
}
