//! Every numeric setting through every entry point the engine owns (the
//! environment, `rlm.toml`, a question's flags and API fields): hostile
//! values are one-line errors naming the setting, never a panic; the
//! bounds of each range are accepted.

use std::path::Path;

use rlm_engine::values::{FromSettings, Kind, Setting, numeric_settings, table};
use rlm_engine::{EngineConfig, EngineSettings, QuestionSettings, SettingsFile, Surface};

/// Values no numeric setting accepts, plus the ones just past its range.
fn bad_values(s: &Setting) -> Vec<String> {
    let mut v: Vec<String> = [
        "nan",
        "NaN",
        "inf",
        "-inf",
        "infinity",
        "-1",
        "1e400",
        "99999999999999999999999999",
        "ten",
        "0x10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match s.kind {
        Kind::Whole(min, max) => {
            v.push((max as u128 + 1).to_string());
            if min > 0 {
                v.push((min - 1).to_string());
            }
            v.push("1.5".into());
        }
        Kind::Above(min, max) => {
            v.push(min.to_string());
            v.push((max * 2.0).to_string());
        }
        Kind::Between(min, max) => {
            v.push((min - 0.5).to_string());
            v.push((max + 0.5).to_string());
        }
        _ => {}
    }
    v
}

/// Values at the edges of the range, which must be accepted alone.
fn good_values(s: &Setting) -> Vec<String> {
    match s.kind {
        Kind::Whole(min, max) => vec![min.to_string(), max.to_string()],
        Kind::Above(min, max) => vec![(min + 0.5).to_string(), max.to_string()],
        Kind::Between(min, max) => vec![min.to_string(), max.to_string()],
        _ => Vec::new(),
    }
}

/// Settings whose accepted range still depends on another setting.
fn needs_partner(key: &str, value: &str) -> bool {
    // The root's reserve must stay below the call limit (50 by default).
    key == "RLM_ROOT_RESERVED" && value.parse::<u64>().is_ok_and(|v| v >= 50)
}

#[test]
fn environment_values() {
    for s in numeric_settings() {
        let env = s.env.unwrap();
        for bad in bad_values(s) {
            let r = std::panic::catch_unwind(|| {
                EngineConfig::from_lookup(|k| (k == env).then(|| bad.clone()))
            });
            let e = r
                .unwrap_or_else(|_| panic!("{env}={bad} panicked"))
                .expect_err(&format!("{env}={bad} accepted"))
                .to_string();
            assert!(e.contains(env), "{env}={bad}: {e}");
            assert!(!e.contains('\n'), "{env}={bad}: {e}");
        }
        for good in good_values(s) {
            let r = EngineConfig::from_lookup(|k| (k == env).then(|| good.clone()));
            if !needs_partner(env, &good) {
                assert!(r.is_ok(), "{env}={good}: {r:?}");
            }
        }
    }
}

#[test]
fn settings_file_values() {
    for s in numeric_settings() {
        let key = s.key;
        for bad in bad_values(s) {
            // As a TOML number where TOML has one (nan, inf, -1, 1.5 …), else as a string.
            // (TOML's own 0x10 is the number 16: only its string form is bad.)
            let bare = (bad != "0x10").then(|| bad.clone());
            for literal in bare.into_iter().chain([format!("{bad:?}")]) {
                let text = format!("[engine]\n{key} = {literal}\n");
                let Ok(file) = SettingsFile::parse(&text, Path::new("rlm.toml")) else {
                    continue; // not TOML at all: its own one-line error
                };
                let e = file
                    .engine_config_with_env(&|_| None)
                    .expect_err(&format!("{key} = {literal} accepted"))
                    .to_string();
                assert!(
                    e.starts_with(&format!("rlm.toml: [engine] {key}")),
                    "{key} = {literal}: {e}"
                );
            }
        }
    }
}

/// A question's numeric settings: (field, flag, key).
const QUESTION_NUMBERS: [(&str, &str, &str); 5] = [
    ("max_llm_calls", "--max-llm-calls", "RLM_MAX_LLM_CALLS"),
    ("max_iterations", "--max-iterations", "RLM_MAX_ITERATIONS"),
    ("max_depth", "--max-depth", "RLM_MAX_DEPTH"),
    ("max_cost_usd", "--max-cost-usd", "RLM_MAX_COST_USD"),
    ("max_wall_secs", "--max-wall-secs", "RLM_MAX_WALL_SECS"),
];

fn question(field: &str, value: &str, surface: Surface) -> QuestionSettings {
    let setting = QuestionSettings::SETTINGS
        .iter()
        .find(|s| s.api == Some(field))
        .unwrap();
    QuestionSettings::new(surface).with(setting, Some(value))
}

#[test]
fn question_values_from_flags_and_api_fields() {
    let base = EngineConfig::default();
    for (field, flag, key) in QUESTION_NUMBERS {
        let s = numeric_settings().find(|s| s.env == Some(key)).unwrap();
        for (surface, name) in [(Surface::Flags, flag), (Surface::Api, field)] {
            for bad in bad_values(s) {
                let e = question(field, &bad, surface)
                    .resolve(&base)
                    .expect_err(&format!("{name}={bad} accepted"))
                    .to_string();
                assert!(e.starts_with(&format!("{name}=")), "{name}={bad}: {e}");
            }
            for good in good_values(s) {
                let r = question(field, &good, surface).resolve(&base);
                assert!(r.is_ok(), "{name}={good}: {r:?}");
            }
        }
    }
    // A question's call limit shrinks the default reserve to fit.
    let r = question("max_llm_calls", "2", Surface::Api)
        .resolve(&base)
        .unwrap();
    assert_eq!(r.config.budget.max_llm_calls, 2);
    assert!(r.config.budget.root_reserved_calls < 2);
    let r = question("max_wall_secs", "2.5", Surface::Flags)
        .resolve(&base)
        .unwrap();
    assert_eq!(r.config.budget.wall_clock.as_secs_f64(), 2.5);
}

#[test]
fn question_words_are_checked_too() {
    let base = EngineConfig::default();
    let mut q = QuestionSettings::new(Surface::Flags);
    q.flow = Some("magic".into());
    assert!(
        q.resolve(&base)
            .unwrap_err()
            .to_string()
            .starts_with("--flow: unknown flow")
    );
    let q = QuestionSettings::new(Surface::Api).with(&table::VERIFY, Some("maybe"));
    let e = q.resolve(&base).unwrap_err().to_string();
    assert!(
        e.starts_with("verify: \"maybe\" is not a verification mode"),
        "{e}"
    );
    let mut q = QuestionSettings::new(Surface::Api)
        .with(&table::CITATIONS, Some("strict"))
        .with(&table::INSPECTOR, Some("per-chunk"));
    q.use_rlm = Some(false);
    let r = q.resolve(&base).unwrap();
    assert_eq!(r.flow, rlm_engine::Flow::Rag);
    assert_eq!(
        r.pipeline.citation_policy,
        Some(rlm_engine::CitationPolicy::Strict)
    );
    assert_eq!(r.pipeline.inspector, Some(rlm_engine::Inspector::PerChunk));
}

#[test]
fn the_sandbox_setting_is_checked_on_every_surface() {
    let base = EngineConfig::default();
    let q = QuestionSettings::new(Surface::Api).with(&table::SANDBOX, Some("jail"));
    assert_eq!(
        q.resolve(&base).unwrap_err().to_string(),
        "sandbox: unknown sandbox \"jail\": use monty (the default) or cpython"
    );
    let q = QuestionSettings::new(Surface::Flags).with(&table::SANDBOX, Some("Monty"));
    assert_eq!(
        q.resolve(&base).unwrap().config.sandbox,
        rlm_sandbox::SandboxBackend::Monty
    );
    let c =
        EngineConfig::from_lookup(|k| (k == "RLM_SANDBOX").then(|| "cpython".to_string())).unwrap();
    assert_eq!(c.sandbox, rlm_sandbox::SandboxBackend::CPython);
    let e = EngineConfig::from_lookup(|k| (k == "RLM_SANDBOX").then(|| "docker".to_string()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("RLM_SANDBOX") && e.contains("monty"), "{e}");
}

mod fuzz {
    //! Random text (any Unicode, huge numbers, NaN, signs, exponents) in
    //! every setting of every entry point: the settings are refused or
    //! accepted, never a panic.

    use super::*;
    use proptest::prelude::*;

    /// Keys every engine setting is read under.
    const KEYS: &[&str] = &[
        "RLM_CONTEXT_SHAPE",
        "RLM_SANDBOX",
        "RLM_CITATIONS",
        "RLM_VERIFY_CITATIONS",
        "RLM_VERIFY",
        "RLM_COVERAGE",
        "RLM_STOP_AFTER_CODE",
        "RLM_DEFER_FINAL",
        "RLM_ENABLED",
        "RLM_FLOW",
        "RLM_INSPECTOR",
        "RLM_CITATION_POLICY",
        "RLM_RECENCY",
        "RLM_LOW_RECALL_MODE",
        "RLM_CODEGEN_MODEL",
        "RLM_SUMMARY_MODEL",
    ];

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[-+]?[0-9]{0,30}(\\.[0-9]{0,10})?([eE][-+]?[0-9]{1,4})?",
            Just("NaN".to_string()),
            Just("inf".to_string()),
            Just("-inf".to_string()),
            Just("".to_string()),
            any::<f64>().prop_map(|f| f.to_string()),
            any::<i128>().prop_map(|i| i.to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_environment_value_is_accepted_or_refused(
            pick in 0usize..64,
            v in value(),
        ) {
            let keys: Vec<&str> = numeric_settings().filter_map(|s| s.env).chain(KEYS.iter().copied()).collect();
            let key = keys[pick % keys.len()];
            let _ = EngineConfig::from_lookup(|k| (k == key).then(|| v.clone()));
        }

        #[test]
        fn any_question_is_accepted_or_refused(
            vals in proptest::collection::vec(proptest::option::of(value()), 10),
            use_rlm in proptest::option::of(any::<bool>()),
            api in any::<bool>(),
        ) {
            let mut q = QuestionSettings::new(if api { Surface::Api } else { Surface::Flags });
            q.flow = vals[0].clone();
            q.use_rlm = use_rlm;
            // Every question setting, each from one of the random values.
            for (i, setting) in QuestionSettings::SETTINGS.iter().enumerate() {
                q = q.with(setting, vals[1 + i % 9].clone());
            }
            if let Err(e) = q.resolve(&EngineConfig::default()) {
                prop_assert!(!e.to_string().contains('\n'), "{e}");
            }
        }
    }
}
