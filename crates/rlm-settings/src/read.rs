//! Typed reading of a setting's value, checked against its declaration.
//! A value that is not a number, is NaN or infinite, is out of range, or is
//! not one of the accepted words is one error naming the setting as the
//! user wrote it.

use std::fmt::Display;
use std::str::FromStr;

use crate::error::SettingError;
use crate::sources::Found;
use crate::spec::{Kind, Setting};

/// Where setting values are looked up, strongest source first.
pub type Lookup<'a> = &'a dyn Fn(&Setting) -> Option<Found>;

/// Reads settings from a [`Lookup`].
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    lookup: Lookup<'a>,
}

impl<'a> Reader<'a> {
    /// A reader over `lookup`.
    pub fn new(lookup: Lookup<'a>) -> Self {
        Reader { lookup }
    }

    /// The value of `setting`, if set to something other than blanks.
    pub fn found(&self, setting: &Setting) -> Option<Found> {
        (self.lookup)(setting).filter(|f| !f.value.trim().is_empty())
    }

    /// Trimmed text of `setting`.
    pub fn text(&self, setting: &Setting) -> Option<String> {
        self.found(setting).map(|f| f.value.trim().to_string())
    }

    /// A whole number in `setting`'s range.
    pub fn whole<T: TryFrom<u64>>(&self, setting: &Setting) -> Result<Option<T>, SettingError> {
        let Some(f) = self.found(setting) else {
            return Ok(None);
        };
        let (min, max) = match setting.kind {
            Kind::Whole(min, max) => (min, max),
            _ => (0, u64::MAX),
        };
        let v = f.value.trim();
        v.parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| invalid(&f, format!("a whole number from {min} to {max}")))
    }

    /// A finite number in `setting`'s range.
    pub fn number(&self, setting: &Setting) -> Result<Option<f64>, SettingError> {
        let Some(f) = self.found(setting) else {
            return Ok(None);
        };
        let n = f.value.trim().parse::<f64>().ok().filter(|n| n.is_finite());
        let ok = |n: f64| match setting.kind {
            Kind::Above(lo, hi) => n > lo && n <= hi,
            Kind::Between(lo, hi) => (lo..=hi).contains(&n),
            Kind::Whole(lo, hi) => n >= lo as f64 && n <= hi as f64,
            _ => true,
        };
        let want = match setting.kind {
            Kind::Whole(lo, hi) => format!("a number from {lo} to {hi}"),
            kind @ (Kind::Above(..) | Kind::Between(..)) => kind.describe(),
            _ => "a number".to_string(),
        };
        match n {
            Some(n) if ok(n) => Ok(Some(n)),
            _ => Err(invalid(&f, want)),
        }
    }

    /// A boolean (`true`/`false`, `on`/`off`, `yes`/`no`, `1`/`0`).
    pub fn boolean(&self, setting: &Setting) -> Result<Option<bool>, SettingError> {
        let Some(f) = self.found(setting) else {
            return Ok(None);
        };
        parse_bool(&f.value)
            .map(Some)
            .ok_or_else(|| SettingError::Invalid {
                name: f.name.clone(),
                value: f.value.trim().to_string(),
                want: "a boolean; use true or false".to_string(),
            })
    }

    /// A value parsed by its type (flows, policies, shapes); the type's
    /// error says what is accepted.
    pub fn parsed<T>(&self, setting: &Setting) -> Result<Option<T>, SettingError>
    where
        T: FromStr,
        T::Err: Display,
    {
        let Some(f) = self.found(setting) else {
            return Ok(None);
        };
        f.value
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|e| SettingError::Refused {
                name: f.name,
                message: e.to_string(),
            })
    }
}

/// `true`/`false`, `on`/`off`, `yes`/`no`, `1`/`0` in any case.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn invalid(f: &Found, want: String) -> SettingError {
    SettingError::Invalid {
        name: f.name.clone(),
        value: f.value.trim().to_string(),
        want,
    }
}
