//! Every numeric setting a user can give on the command line, in the
//! environment or in `rlm.toml`, with hostile values, through the real
//! binary: a one-line error naming the setting and exit status 1 (never a
//! panic's 101). The API's fields are covered by rlm-server's tests, the
//! whole table of settings by rlm-engine's `tests/settings.rs`.

use crate::common;

use common::{rlm, stderr};

const BAD: [&str; 7] = [
    "inf",
    "-inf",
    "nan",
    "-1",
    "0",
    "1e400",
    "99999999999999999999",
];

fn assert_one_line_error(o: &std::process::Output, names: &str, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: {err}");
    assert!(err.starts_with("error: "), "{what}: {err}");
    assert!(err.contains(names), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
}

#[test]
fn ask_flags() {
    let dir = tempfile::tempdir().unwrap();
    for flag in [
        "--max-llm-calls",
        "--max-iterations",
        "--max-depth",
        "--max-cost-usd",
        "--max-wall-secs",
    ] {
        for bad in BAD {
            if bad == "0" && flag == "--max-depth" {
                continue; // depth 0: the root alone, a valid setting
            }
            let arg = format!("{flag}={bad}");
            let o = rlm(dir.path(), &["ask", "q", "--store", "store", &arg], &[]);
            assert_one_line_error(&o, &format!("{flag}=\"{bad}\""), &arg);
        }
    }
}

#[test]
fn ask_environment_and_config_file() {
    let dir = tempfile::tempdir().unwrap();
    for (var, key) in [
        ("RLM_MAX_WALL_SECS", "max_wall_secs"),
        ("RLM_MAX_COST_USD", "max_cost_usd"),
        ("RLM_MAX_TOKENS", "max_tokens"),
        ("RLM_HYPOTHESIS_KEEP", "hypothesis_keep"),
        ("RLM_TRUNCATE_LEN", "truncate_len"),
    ] {
        for bad in BAD {
            if bad == "0" && var == "RLM_HYPOTHESIS_KEEP" {
                continue; // keep nothing below 0: a valid setting
            }
            let o = rlm(dir.path(), &["ask", "q", "--store", "store"], &[(var, bad)]);
            assert_one_line_error(&o, &format!("environment variable {var}"), var);
            let toml = dir.path().join("rlm.toml");
            std::fs::write(&toml, format!("[engine]\n{key} = {bad:?}\n")).unwrap();
            let o = rlm(dir.path(), &["ask", "q", "--store", "store"], &[]);
            std::fs::remove_file(&toml).unwrap();
            assert_one_line_error(&o, &format!("[engine] {key}"), key);
        }
    }
}

#[test]
fn serve_and_repl_read_the_same_settings() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in [
        &["serve", "--store", "store", "--addr", "127.0.0.1:0"][..],
        &["repl", "--store", "store", "--jsonl"][..],
    ] {
        let o = rlm(dir.path(), cmd, &[("RLM_MAX_WALL_SECS", "inf")]);
        assert_one_line_error(&o, "RLM_MAX_WALL_SECS", cmd[0]);
    }
}
