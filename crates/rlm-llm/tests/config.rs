//! Configuration precedence (flags > env > rlm.toml > defaults) and errors.

use std::collections::HashMap;
use std::time::Duration;

use rlm_llm::{ApiKey, ConfigOverrides, LlmConfig, LlmError, ProviderKind};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn config_err(toml: &str, pairs: &[(&str, &str)]) -> String {
    LlmConfig::from_toml_str(toml, &ConfigOverrides::default(), env(pairs))
        .unwrap_err()
        .to_string()
}

#[test]
fn defaults_are_openai_with_standard_models_and_limits() {
    // Nothing configured: the embedded model where it is built in (the
    // `local` feature, on in the default build of `rlm`), else OpenAI.
    let bare = LlmConfig::from_toml_str("", &ConfigOverrides::default(), env(&[])).unwrap();
    if cfg!(feature = "local") {
        assert_eq!(bare.provider, ProviderKind::Local);
        assert!(bare.local_auto_selected);
    } else {
        assert_eq!(bare.provider, ProviderKind::OpenAi);
    }
    let c = LlmConfig::from_toml_str(
        "",
        &ConfigOverrides::default(),
        env(&[("RLM_PROVIDER", "openai")]),
    )
    .unwrap();
    assert_eq!(c.provider, ProviderKind::OpenAi);
    assert_eq!(c.base_url, "https://api.openai.com/v1");
    assert!(c.api_key.is_none());
    assert_eq!(c.root.model, "gpt-4.1");
    assert_eq!(c.sub.model, "gpt-4.1-mini");
    assert_eq!(c.timeout, Duration::from_secs(180));
    assert_eq!(c.max_concurrent, 12);
    assert_eq!(c.retry.max_retries, 4);

    let a = LlmConfig::from_toml_str(
        "",
        &ConfigOverrides::default(),
        env(&[("RLM_PROVIDER", "anthropic")]),
    )
    .unwrap();
    assert_eq!(a.base_url, "https://api.anthropic.com/v1");
    assert_eq!(a.root.model, "claude-sonnet-4-5");
}

#[test]
fn flags_beat_env_beat_file() {
    let toml = r#"
        [llm]
        provider = "anthropic"
        base_url = "http://file/v1"
        primary_model = "file-root"
        sub_model = "file-sub"
        timeout_secs = 30
        max_concurrent = 3
        [llm.root]
        temperature = 0.1
        max_output_tokens = 100
        [llm.sub]
        temperature = 0.9
        [other_crate]
        anything = "is ignored"
    "#;
    let from_file = LlmConfig::from_toml_str(toml, &ConfigOverrides::default(), env(&[])).unwrap();
    assert_eq!(from_file.provider, ProviderKind::Anthropic);
    assert_eq!(from_file.base_url, "http://file/v1");
    assert_eq!(from_file.root.model, "file-root");
    assert_eq!(from_file.sub.model, "file-sub");
    assert_eq!(from_file.timeout, Duration::from_secs(30));
    assert_eq!(from_file.max_concurrent, 3);
    assert_eq!(from_file.root.temperature, Some(0.1));
    assert_eq!(from_file.root.max_output_tokens, Some(100));
    assert_eq!(from_file.sub.temperature, Some(0.9));

    let vars = [
        ("RLM_PROVIDER", "openai"),
        ("RLM_BASE_URL", "http://env/v1/"),
        ("RLM_PRIMARY_MODEL", "env-root"),
        ("RLM_TIMEOUT", "2.5"),
        ("RLM_MAX_CONCURRENT", "7"),
        ("RLM_SUB_TEMPERATURE", "0.5"),
        ("RLM_SUB_MAX_OUTPUT_TOKENS", "64"),
        ("RLM_ROOT_TEMPERATURE", ""),
    ];
    let from_env = LlmConfig::from_toml_str(toml, &ConfigOverrides::default(), env(&vars)).unwrap();
    assert_eq!(from_env.provider, ProviderKind::OpenAi);
    assert_eq!(from_env.base_url, "http://env/v1", "trailing slash trimmed");
    assert_eq!(from_env.root.model, "env-root");
    assert_eq!(from_env.sub.model, "file-sub");
    assert_eq!(from_env.timeout, Duration::from_millis(2500));
    assert_eq!(from_env.max_concurrent, 7);
    assert_eq!(from_env.sub.temperature, Some(0.5));
    assert_eq!(from_env.sub.max_output_tokens, Some(64));
    assert_eq!(
        from_env.root.temperature,
        Some(0.1),
        "empty env var counts as unset"
    );

    let flags = ConfigOverrides {
        provider: Some(ProviderKind::Azure),
        base_url: Some("https://flag.openai.azure.com".into()),
        primary_model: Some("flag-root".into()),
        sub_model: Some("flag-sub".into()),
        timeout_secs: Some(9.0),
        max_concurrent: Some(1),
        sub_temperature: Some(0.0),
        ..Default::default()
    };
    let from_flags = LlmConfig::from_toml_str(toml, &flags, env(&vars)).unwrap();
    assert_eq!(from_flags.provider, ProviderKind::Azure);
    assert_eq!(from_flags.base_url, "https://flag.openai.azure.com");
    assert_eq!(from_flags.root.model, "flag-root");
    assert_eq!(from_flags.sub.model, "flag-sub");
    assert_eq!(from_flags.timeout, Duration::from_secs(9));
    assert_eq!(from_flags.max_concurrent, 1);
    assert_eq!(from_flags.sub.temperature, Some(0.0));
}

#[test]
fn one_named_model_serves_both_roles() {
    let c = LlmConfig::from_toml_str(
        "",
        &ConfigOverrides::default(),
        env(&[("RLM_PRIMARY_MODEL", "qwen")]),
    )
    .unwrap();
    assert_eq!(c.root.model, "qwen");
    assert_eq!(c.sub.model, "qwen");
}

#[test]
fn api_key_falls_back_to_the_providers_own_variable() {
    let load = |pairs: &[(&str, &str)], flags: &ConfigOverrides| {
        LlmConfig::from_toml_str("[llm]\napi_key = \"from-file\"", flags, env(pairs)).unwrap()
    };
    let none = ConfigOverrides::default();
    let c = load(
        &[("OPENAI_API_KEY", "o"), ("ANTHROPIC_API_KEY", "a")],
        &none,
    );
    assert_eq!(c.api_key, Some(ApiKey::new("o")));
    assert_eq!(c.api_key_source.as_deref(), Some("OPENAI_API_KEY"));

    let c = load(
        &[
            ("RLM_PROVIDER", "anthropic"),
            ("OPENAI_API_KEY", "o"),
            ("ANTHROPIC_API_KEY", "a"),
        ],
        &none,
    );
    assert_eq!(c.api_key, Some(ApiKey::new("a")));

    let c = load(
        &[
            ("RLM_PROVIDER", "azure"),
            ("RLM_BASE_URL", "https://r.openai.azure.com"),
            ("RLM_PRIMARY_MODEL", "dep"),
            ("AZURE_OPENAI_API_KEY", "z"),
        ],
        &none,
    );
    assert_eq!(c.api_key, Some(ApiKey::new("z")));

    let c = load(&[("RLM_API_KEY", "r"), ("OPENAI_API_KEY", "o")], &none);
    assert_eq!(c.api_key, Some(ApiKey::new("r")));
    assert_eq!(c.api_key_source.as_deref(), Some("RLM_API_KEY"));

    let c = load(&[], &none);
    assert_eq!(c.api_key, Some(ApiKey::new("from-file")));

    let flag = ConfigOverrides {
        api_key: Some(ApiKey::new("f")),
        ..Default::default()
    };
    assert_eq!(
        load(&[("RLM_API_KEY", "r")], &flag).api_key,
        Some(ApiKey::new("f"))
    );
    // Keys never show in debug output.
    assert!(!format!("{c:?}").contains("from-file"));
}

#[test]
fn bad_values_are_one_line_errors_naming_the_setting() {
    assert!(config_err("", &[("RLM_TIMEOUT", "soon")]).contains(
        "environment variable RLM_TIMEOUT=\"soon\" is not a number more than 0 and at most 86400"
    ));
    assert!(
        config_err("", &[("RLM_TIMEOUT", "0")])
            .contains("RLM_TIMEOUT=\"0\" is not a number more than 0 and at most 86400")
    );
    assert!(
        config_err("", &[("RLM_MAX_CONCURRENT", "0")])
            .contains("is not a whole number from 1 to 1024")
    );
    assert!(
        config_err("", &[("RLM_MAX_CONCURRENT", "many")]).contains("RLM_MAX_CONCURRENT=\"many\"")
    );
    assert!(config_err("", &[("RLM_PROVIDER", "gemini")]).contains("unknown provider 'gemini'"));
    assert!(
        config_err("", &[("RLM_BASE_URL", "localhost:8080")]).contains("must start with http://")
    );
    assert!(
        config_err("", &[("RLM_ROOT_TEMPERATURE", "3")])
            .contains("RLM_ROOT_TEMPERATURE=\"3\" is not a number from 0 to 2")
    );
    assert!(
        config_err("", &[("RLM_SUB_MAX_OUTPUT_TOKENS", "0")])
            .contains("RLM_SUB_MAX_OUTPUT_TOKENS=\"0\" is not a whole number from 1 to")
    );
    assert!(
        config_err("", &[("RLM_PROVIDER", "azure")])
            .contains("RLM_BASE_URL=https://<resource>.openai.azure.com")
    );
    assert!(
        config_err(
            "",
            &[
                ("RLM_PROVIDER", "azure"),
                ("RLM_BASE_URL", "https://r.openai.azure.com")
            ]
        )
        .contains("set RLM_PRIMARY_MODEL")
    );
    let unknown_key = config_err("[llm]\nprimary_modle = \"x\"", &[]);
    assert!(unknown_key.contains("primary_modle"), "{unknown_key}");
    assert!(!unknown_key.contains('\n'));
    assert!(config_err("[llm\n", &[]).contains("invalid configuration"));
}

#[test]
fn the_config_file_is_read_from_a_named_path_and_must_exist_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rlm.toml");
    std::fs::write(
        &path,
        "[llm]\nprimary_model = \"m\"\n[llm.prices.m]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n[llm.context_windows]\nm = 1000\n",
    )
    .unwrap();
    let flags = ConfigOverrides {
        config_file: Some(path.clone()),
        ..Default::default()
    };
    let c = LlmConfig::load_with_env(&flags, env(&[])).unwrap();
    assert_eq!(c.root.model, "m");
    assert_eq!(c.config_file.as_deref(), Some(path.as_path()));
    assert_eq!(c.prices.price("m").unwrap().output_per_mtok, 2.0);
    assert_eq!(c.context_windows.window("m"), Some(1000));

    let flags = ConfigOverrides {
        config_file: Some(dir.path().join("nope.toml")),
        ..Default::default()
    };
    let err = LlmConfig::load_with_env(&flags, env(&[])).unwrap_err();
    assert!(matches!(err, LlmError::Config(_)));
    assert!(err.to_string().contains("cannot read config file"), "{err}");
}

#[test]
fn every_flag_reaches_its_setting() {
    let flags = ConfigOverrides {
        max_retries: Some(1),
        root_temperature: Some(0.25),
        sub_max_output_tokens: Some(32),
        provider: Some(ProviderKind::OpenAi),
        ..ConfigOverrides::default()
    };
    let c = LlmConfig::from_toml_str(
        "[llm]\nmax_retries = 7\n[llm.root]\ntemperature = 1.0\n",
        &flags,
        |_| None,
    )
    .unwrap();
    assert_eq!(c.retry.max_retries, 1);
    assert_eq!(c.root.temperature, Some(0.25));
    assert_eq!(c.sub.max_output_tokens, Some(32));
    let e = LlmConfig::from_toml_str(
        "",
        &ConfigOverrides {
            max_retries: Some(21),
            ..flags
        },
        |_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--max-retries=\"21\" is not a whole number from 0 to 20"),
        "{e}"
    );
}
