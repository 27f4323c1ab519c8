//! Which draft model speculative decoding uses (`RLM_LOCAL_DRAFT`), and the
//! verdict that makes `auto` choose it: `rlm model pull --draft` measures
//! generation with and without the draft on this machine and writes
//! [`DRAFT_VERDICT_FILE`] in the models directory. Speculation pays only
//! where checking several tokens in one batch costs little more than one
//! (memory-bound generation); on a small CPU it may not, so `auto` takes the
//! draft only when its own measurement said it was faster here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::LocalError;

/// The verdict file in the models directory.
pub const DRAFT_VERDICT_FILE: &str = "draft-verdict.json";

/// What `rlm model pull --draft` measured: generation speed of the model
/// alone and with the draft, on the same prompt, greedy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DraftVerdict {
    /// Size of the draft GGUF measured (a replaced file invalidates it).
    pub draft_size: u64,
    /// CPU threads the measurement used.
    pub threads: i32,
    /// Generated tokens per second without the draft.
    pub plain_tokens_per_s: f64,
    /// Generated tokens per second with it.
    pub draft_tokens_per_s: f64,
    /// Tokens the draft proposed and the model kept.
    pub proposed: u32,
    /// Of `proposed`, those kept.
    pub accepted: u32,
    /// Both runs wrote the same text (speculation must not change it).
    pub same_text: bool,
}

impl DraftVerdict {
    /// The draft is worth using: at least 5% faster, and exact.
    pub fn faster(&self) -> bool {
        self.same_text && self.draft_tokens_per_s >= self.plain_tokens_per_s * 1.05
    }

    /// Reads the verdict in `models_dir`, if there is one this build reads.
    pub fn read(models_dir: &Path) -> Option<DraftVerdict> {
        let text = std::fs::read_to_string(models_dir.join(DRAFT_VERDICT_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the verdict into `models_dir`.
    pub fn write(&self, models_dir: &Path) -> Result<(), LocalError> {
        let path = models_dir.join(DRAFT_VERDICT_FILE);
        let text = serde_json::to_string_pretty(self).expect("a verdict serializes");
        std::fs::write(&path, text)
            .map_err(LocalError::io(format!("cannot write {}", path.display())))
    }
}

/// The draft model `RLM_LOCAL_DRAFT` names: `off` → none; a path → that
/// file; `auto` (the default, also when unset) → the pulled draft, when
/// its verdict on this machine (`threads`) says it is faster.
pub fn draft_from_setting(
    value: Option<&str>,
    models_dir: Option<&Path>,
    threads: i32,
) -> Option<PathBuf> {
    let value = value.map(str::trim).filter(|v| !v.is_empty());
    match value {
        Some(v) if v.eq_ignore_ascii_case("off") => None,
        Some(v) if !v.eq_ignore_ascii_case("auto") => Some(PathBuf::from(v)),
        _ => {
            let dir = models_dir?;
            let path = dir.join(crate::draft_model().file_name);
            let size = std::fs::metadata(&path).ok()?.len();
            let verdict = DraftVerdict::read(dir)?;
            (verdict.faster() && verdict.draft_size == size && verdict.threads == threads)
                .then_some(path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(draft_tok_s: f64, same_text: bool) -> DraftVerdict {
        DraftVerdict {
            draft_size: 5,
            threads: 2,
            plain_tokens_per_s: 20.0,
            draft_tokens_per_s: draft_tok_s,
            proposed: 40,
            accepted: 30,
            same_text,
        }
    }

    #[test]
    fn auto_takes_the_draft_only_where_it_was_measured_faster() {
        let dir = tempfile::tempdir().unwrap();
        let models = Some(dir.path());
        assert_eq!(draft_from_setting(None, models, 2), None, "no draft pulled");
        let file = dir.path().join(crate::draft_model().file_name);
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(draft_from_setting(None, models, 2), None, "never measured");
        verdict(19.0, true).write(dir.path()).unwrap();
        assert_eq!(draft_from_setting(Some("auto"), models, 2), None, "slower");
        verdict(30.0, false).write(dir.path()).unwrap();
        assert_eq!(draft_from_setting(None, models, 2), None, "not exact");
        verdict(30.0, true).write(dir.path()).unwrap();
        assert_eq!(draft_from_setting(None, models, 2), Some(file.clone()));
        assert_eq!(draft_from_setting(None, models, 8), None, "other threads");
        std::fs::write(&file, b"123456").unwrap();
        assert_eq!(draft_from_setting(None, models, 2), None, "another file");
        assert_eq!(draft_from_setting(Some("off"), models, 2), None);
        assert_eq!(
            draft_from_setting(Some("/x/d.gguf"), models, 2),
            Some(PathBuf::from("/x/d.gguf"))
        );
    }
}
