//! `[store] location` in `rlm.toml`: the store every command uses when
//! neither `--store` nor `RLM_STORE` names one (flags > environment > file >
//! `./.rlm`). A folder is relative to the file's own folder; a PostgreSQL
//! URL (`postgres://…`) is taken as written.

use std::ffi::OsString;
use std::path::PathBuf;

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
    let file = named.unwrap_or_else(|| PathBuf::from(rlm_settings::DEFAULT_SETTINGS_FILE));
    if !file.is_file() {
        return Ok(None);
    }
    let settings = match rlm_settings::SettingsFile::load(Some(&file)) {
        Ok(settings) => settings,
        // A wrong [store] table is this function's to report; anything else
        // in the file is left to the command, which reads it again.
        Err(rlm_settings::SettingError::Table { table, message }) if table == "store" => {
            bail!("{message}")
        }
        Err(_) => return Ok(None),
    };
    let Some(found) = settings.found(&rlm_settings::table::STORE) else {
        return Ok(None);
    };
    if rlm_store_pg::is_postgres_url(found.value.trim()) {
        return Ok(Some(found.value.trim().into()));
    }
    Ok(settings
        .path_value(&rlm_settings::table::STORE)
        .map(PathBuf::into_os_string))
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
                "[store] has no setting \"locaton\"; its keys are: location",
            ),
            (
                "[store]\nlocation = 3\n",
                "[store] location must be text in quotes",
            ),
            ("store = \"x\"\n", "[store] must be a table"),
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
