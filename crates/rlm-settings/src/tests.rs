//! The table's own checks: the generated reference is the committed one,
//! every name is declared once, every `RLM_*` variable the sources read is
//! in the table, and values are read with one set of rules.

use std::path::{Path, PathBuf};

use crate::table::{self, ALL};
use crate::{Found, Kind, OldName, Reader, Setting, SettingsFile, reference};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_configuration_reference_is_generated_from_the_table() {
    let path = repo().join("docs/configuration.md");
    let want = reference::markdown();
    if std::env::var("RLM_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/configuration.md differs from the settings table: run RLM_BLESS=1 cargo test -p rlm-settings and commit the file"
    );
}

#[test]
fn every_setting_is_in_the_table_once() {
    let declared: usize = [
        include_str!("table/models.rs"),
        include_str!("table/engine.rs"),
        include_str!("table/pipeline.rs"),
        include_str!("table/store.rs"),
    ]
    .iter()
    .map(|source| source.matches(": Setting = Setting::new(").count())
    .sum();
    assert_eq!(
        declared,
        ALL.len(),
        "a setting constant is missing from ALL"
    );
    let mut seen = std::collections::BTreeSet::new();
    for s in ALL {
        assert!(
            seen.insert((s.table, s.key)),
            "{:?} {} declared twice",
            s.table,
            s.key
        );
        assert!(!s.doc.is_empty() && !s.default.is_empty(), "{}", s.key);
        match s.kind {
            Kind::Whole(lo, hi) => assert!(lo < hi, "{}", s.key),
            Kind::Above(lo, hi) | Kind::Between(lo, hi) => {
                assert!(lo.is_finite() && hi.is_finite() && lo < hi, "{}", s.key)
            }
            _ => {}
        }
        if let Some(flag) = s.flag {
            assert!(flag.starts_with("--"), "{flag}");
        }
        assert!(
            !(s.kind == Kind::Secret && s.flag.is_some() && s.key == "api_key"),
            "keys on command lines leak"
        );
    }
    // A variable names one setting, except the concurrency limit, which the
    // model client and the budget both read.
    let mut envs = std::collections::BTreeMap::new();
    for s in ALL {
        for env in s
            .env
            .into_iter()
            .chain(s.old.iter().filter_map(|o| match o {
                OldName::Env(v) => Some(*v),
                OldName::Toml(_) => None,
            }))
        {
            if let Some(other) = envs.insert(env, s.key)
                && env != "RLM_MAX_CONCURRENT"
            {
                panic!("{env} names both {other} and {}", s.key);
            }
        }
    }
}

/// Every `RLM_*` (and old `MAX_*`) name in the crates' sources is a
/// setting's variable, an old name of one, or a test variable: a variable
/// read but not declared would be missing from the reference.
#[test]
fn every_variable_the_sources_name_is_declared() {
    let mut missing = Vec::new();
    let crates = repo().join("crates");
    let mut stack = vec![crates];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if name != "target" && name != "rlm-settings" && name != "node_modules" {
                    stack.push(p);
                }
                continue;
            }
            if !name.ends_with(".rs") || !p.to_string_lossy().contains("/src/") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for var in quoted_variables(&text) {
                let known = table::by_env(&var).is_some()
                    || table::TEST_VARIABLES.iter().any(|(t, _)| *t == var)
                    || var == "RLM_API_KEY";
                if !known {
                    missing.push(format!("{}: {var}", p.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "variables read but not in crates/rlm-settings/src/table/:\n{}",
        missing.join("\n")
    );
}

/// `"RLM_X"` string literals in `text`.
fn quoted_variables(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("\"RLM_") {
        let rest = &text[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        if rest[end..].starts_with('"') && end > 4 {
            out.push(rest[..end].to_string());
        }
    }
    out
}

fn one(setting: &'static Setting, value: &'static str) -> impl Fn(&Setting) -> Option<Found> {
    move |s| (s == setting).then(|| Found::env(setting.env.unwrap(), value))
}

#[test]
fn whole_numbers_are_range_checked() {
    let l = one(&table::MAX_DEPTH, "3");
    assert_eq!(Reader::new(&l).whole::<u32>(&table::MAX_DEPTH), Ok(Some(3)));
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
        let l = one(&table::MAX_DEPTH, bad);
        let e = Reader::new(&l)
            .whole::<u32>(&table::MAX_DEPTH)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("environment variable RLM_MAX_DEPTH") && e.contains("from 0 to 10"),
            "{bad}: {e}"
        );
    }
    let l = one(&table::MAX_DEPTH, "  ");
    assert_eq!(Reader::new(&l).whole::<u32>(&table::MAX_DEPTH), Ok(None));
}

#[test]
fn numbers_reject_nan_infinity_and_out_of_range() {
    let l = one(&table::MAX_WALL_SECS, "2.5");
    assert_eq!(Reader::new(&l).number(&table::MAX_WALL_SECS), Ok(Some(2.5)));
    for bad in ["0", "-1", "inf", "-inf", "NaN", "1e400", "604801", "soon"] {
        let l = one(&table::MAX_WALL_SECS, bad);
        let e = Reader::new(&l)
            .number(&table::MAX_WALL_SECS)
            .unwrap_err()
            .to_string();
        assert!(e.contains("RLM_MAX_WALL_SECS"), "{bad}: {e}");
        assert!(e.contains("more than 0 and at most 604800"), "{bad}: {e}");
    }
    let l = one(&table::HYPOTHESIS_KEEP, "1.5");
    let e = Reader::new(&l)
        .number(&table::HYPOTHESIS_KEEP)
        .unwrap_err()
        .to_string();
    assert!(e.contains("from 0 to 1"), "{e}");
    let l = one(&table::COVERAGE, "maybe");
    let e = Reader::new(&l)
        .boolean(&table::COVERAGE)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "environment variable RLM_COVERAGE=\"maybe\" is not a boolean; use true or false"
    );
}

#[test]
fn old_names_still_work_and_warn_once() {
    let env = |k: &str| (k == "RLM_MAX_CALLS").then(|| "7".to_string());
    let f = crate::env_found(&table::MAX_ITERATIONS, &env).unwrap();
    assert_eq!(f.value, "7");
    assert_eq!(f.name, "environment variable RLM_MAX_CALLS");
    // The new name wins over the old one.
    let env = |k: &str| match k {
        "RLM_MAX_CALLS" => Some("7".to_string()),
        "RLM_MAX_ITERATIONS" => Some("9".to_string()),
        _ => None,
    };
    assert_eq!(
        crate::env_found(&table::MAX_ITERATIONS, &env)
            .unwrap()
            .value,
        "9"
    );
    let file = SettingsFile::parse("[engine]\nmax_calls = 4\n", Path::new("rlm.toml")).unwrap();
    let f = file.found(&table::MAX_ITERATIONS).unwrap();
    assert_eq!(f.value, "4");
    assert_eq!(f.name, "rlm.toml: [engine] max_calls (RLM_MAX_ITERATIONS)");
    let warnings = crate::take_deprecation_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("RLM_MAX_CALLS") && w.contains("use RLM_MAX_ITERATIONS")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("[engine] max_calls")),
        "{warnings:?}"
    );
}

#[test]
fn the_file_refuses_what_no_setting_reads() {
    let parse = |t: &str| SettingsFile::parse(t, Path::new("rlm.toml"));
    let e = parse("[engine]\nmax_llm_cals = 5\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[engine] has no setting \"max_llm_cals\""),
        "{e}"
    );
    assert!(e.contains("max_llm_calls"), "the keys are listed: {e}");
    let e = parse("[llm]\nprovder = \"openai\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("[llm] has no setting \"provder\""), "{e}");
    let e = parse("[llm.root]\ntemprature = 1\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[llm.root] has no setting \"temprature\""),
        "{e}"
    );
    let e = parse("[engine]\nmax_llm_calls = [1]\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("must be a string, number or boolean, not array"),
        "{e}"
    );
    let e = parse("[store]\nlocation = 3\n").unwrap_err().to_string();
    assert!(
        e.contains("[store] location must be text in quotes, not integer"),
        "{e}"
    );
    let e = parse("engine = 3\n").unwrap_err().to_string();
    assert!(e.contains("[engine] must be a table"), "{e}");
    let e = parse("[engine\n").unwrap_err().to_string();
    assert!(e.contains("not valid TOML"), "{e}");
    let e = SettingsFile::load(Some(Path::new("/nonexistent/rlm.toml")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot read config file /nonexistent/rlm.toml"),
        "{e}"
    );
    // Tables of other programs are theirs; structured tables are kept whole.
    let f = parse(
        "[tool.other]\nx = 1\n[llm]\nprovider = \"openai\"\n[llm.prices.\"m\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n[llm.context_windows]\nm = 4096\n[llm.sub]\ntemperature = 0.5\n",
    )
    .unwrap();
    assert!(f.structured("llm.prices").is_some());
    assert!(f.structured("llm.context_windows").is_some());
    assert_eq!(f.found(&table::SUB_TEMPERATURE).unwrap().value, "0.5");
    assert_eq!(f.found(&table::ROOT_TEMPERATURE), None);
}

#[test]
fn paths_in_the_file_are_relative_to_it() {
    let f = SettingsFile::parse(
        "[store]\nlocation = \"stores/main\"\n[embeddings]\nmodel_path = \"/abs/minilm\"\n",
        Path::new("/etc/rlm/rlm.toml"),
    )
    .unwrap();
    assert_eq!(
        f.path_value(&table::STORE),
        Some(PathBuf::from("/etc/rlm/stores/main"))
    );
    assert_eq!(
        f.path_value(&table::EMBED_MODEL),
        Some(PathBuf::from("/abs/minilm"))
    );
}

#[test]
fn layers_give_the_strongest_value() {
    let file = SettingsFile::parse(
        "[engine]\nmax_depth = 3\nrag_k = 4\n",
        Path::new("rlm.toml"),
    )
    .unwrap();
    let env = |k: &str| (k == "RLM_MAX_DEPTH").then(|| "1".to_string());
    let question = |s: &Setting| {
        (s == &table::RAG_K).then(|| Found {
            value: "9".into(),
            name: "--rag-k".into(),
            layer: crate::LAYER_QUESTION,
        })
    };
    let from_env_or_file = |s: &Setting| file.env_then_file(s, &env);
    let layers: [crate::Layer<'_>; 2] = [&question, &from_env_or_file];
    let lookup = crate::layered(&layers);
    let r = Reader::new(&lookup);
    assert_eq!(r.whole::<u32>(&table::MAX_DEPTH), Ok(Some(1)));
    assert_eq!(r.whole::<u32>(&table::RAG_K), Ok(Some(9)));
    assert_eq!(r.whole::<u32>(&table::MAX_FILES), Ok(None));
}
