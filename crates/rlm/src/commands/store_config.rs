//! `[store] location` in `rlm.toml`: the store every command uses when
//! neither `--store` nor `RLM_STORE` names one (flags > environment > file >
//! `./.rlm`). A folder is relative to the file's own folder; a PostgreSQL
//! URL (`postgres://…`) is taken as written.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// The `[store] location` of the config file named by `--config` in `args`
/// (else `./rlm.toml` when present), when `--store` and `RLM_STORE` say
/// nothing. A config file that cannot be read or parsed is left to the
/// command, which reports it; a wrong `[store]` table is an error here.
pub fn location_from_config(
    args: &[OsString],
    env_store: Option<OsString>,
) -> anyhow::Result<Option<OsString>> {
    if env_store.is_some_and(|v| !v.is_empty()) {
        return Ok(None);
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args
        .iter()
        .any(|a| a == "--store" || a.starts_with("--store="))
    {
        return Ok(None);
    }
    let named = args
        .windows(2)
        .find(|w| w[0] == "--config")
        .map(|w| PathBuf::from(&w[1]))
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--config=").map(PathBuf::from))
        });
    let file = named.unwrap_or_else(|| PathBuf::from("rlm.toml"));
    if !file.is_file() {
        return Ok(None);
    }
    let Ok(text) =
        rlm_llm::bounded::read_text(&file, "config", rlm_llm::bounded::CONFIG_FILE_LIMIT)
    else {
        return Ok(None);
    };
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Ok(None);
    };
    let Some(table) = doc.get("store") else {
        return Ok(None);
    };
    let Some(table) = table.as_table() else {
        bail!(
            "{}: `store` must be a table: [store] with location = \"DIR or postgres://…\"",
            file.display()
        );
    };
    if let Some(key) = table.keys().find(|k| k.as_str() != "location") {
        bail!(
            "{}: [store] has no key `{key}`; it takes: location",
            file.display()
        );
    }
    let Some(location) = table.get("location") else {
        return Ok(None);
    };
    let Some(location) = location.as_str().filter(|l| !l.trim().is_empty()) else {
        bail!(
            "{}: [store] location must be a folder or a postgres:// URL in quotes",
            file.display()
        );
    };
    if rlm_store_pg::is_postgres_url(location) {
        return Ok(Some(location.into()));
    }
    let base = file.parent().unwrap_or(Path::new("."));
    Ok(Some(base.join(location).into_os_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_file_names_the_store_only_when_flag_and_environment_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("rlm.toml");
        std::fs::write(&cfg, "[store]\nlocation = \"postgres://rlm@db/corpus\"\n").unwrap();
        let c = cfg.display().to_string();
        let got = location_from_config(&args(&["rlm", "docs", "--config", &c]), None).unwrap();
        assert_eq!(got, Some("postgres://rlm@db/corpus".into()));
        let eq = format!("--config={c}");
        assert!(
            location_from_config(&args(&["rlm", "docs", &eq]), None)
                .unwrap()
                .is_some()
        );
        // A flag or the environment wins.
        let flag = args(&["rlm", "docs", "--config", &c, "--store", "x"]);
        assert_eq!(location_from_config(&flag, None).unwrap(), None);
        let env = Some(OsString::from("./other"));
        assert_eq!(
            location_from_config(&args(&["rlm", "docs", "--config", &c]), env).unwrap(),
            None
        );
        // A folder is relative to the file.
        std::fs::write(&cfg, "[store]\nlocation = \"stores/main\"\n").unwrap();
        let got = location_from_config(&args(&["rlm", "docs", "--config", &c]), None).unwrap();
        assert_eq!(got, Some(dir.path().join("stores/main").into_os_string()));
    }

    #[test]
    fn a_wrong_store_table_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("rlm.toml");
        let c = cfg.display().to_string();
        let a = args(&["rlm", "docs", "--config", &c]);
        for (text, want) in [
            (
                "[store]\nlocaton = \"x\"\n",
                "[store] has no key `locaton`; it takes: location",
            ),
            (
                "[store]\nlocation = 3\n",
                "[store] location must be a folder or a postgres:// URL",
            ),
            ("store = \"x\"\n", "`store` must be a table"),
        ] {
            std::fs::write(&cfg, text).unwrap();
            let e = location_from_config(&a, None).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        // No [store] table, or no file: nothing to say.
        std::fs::write(&cfg, "[llm]\nprovider = \"openai\"\n").unwrap();
        assert_eq!(location_from_config(&a, None).unwrap(), None);
        let missing = args(&["rlm", "docs", "--config", "/nonexistent/rlm.toml"]);
        assert_eq!(location_from_config(&missing, None).unwrap(), None);
    }
}
