//! The [`Provider`] trait (one HTTP attempt, no retries) and the three wire
//! protocols behind it. Retries, timeouts, concurrency and accounting live in
//! [`crate::LlmClient`], above every provider, so wrappers such as the
//! recorder see exactly what went over the wire.

mod anthropic;
mod http;
#[cfg(feature = "local")]
mod local;
mod openai;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use anthropic::AnthropicProvider;
#[cfg(feature = "local")]
pub use local::LocalProvider;
pub use openai::OpenAiProvider;

use crate::config::{LlmConfig, ProviderKind};
use crate::error::LlmError;
use crate::types::{ModelReply, ModelRequest};

/// A boxed, sendable future: what trait methods return so the traits stay
/// object-safe (`Arc<dyn Provider>`, `Arc<dyn ChatModel>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One model API: sends a resolved request once and parses the answer.
pub trait Provider: Send + Sync {
    /// Provider name for messages (`openai`, `azure`, `anthropic`, `replay`).
    fn name(&self) -> &str;

    /// Where requests go, for messages.
    fn endpoint(&self) -> &str;

    /// One attempt: no retry, no timeout (the client adds both).
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>>;

    /// The model names the endpoint serves.
    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>>;

    /// Whether this provider answers `request` the same way every time, so
    /// its reply may be kept and reused: at temperature 0 by default (a
    /// provider with a fixed sampling seed says so itself).
    fn reproducible(&self, request: &ModelRequest) -> bool {
        request.temperature == Some(0.0)
    }

    /// What decides a reply besides the request itself: the provider and
    /// its endpoint (a model name means another model elsewhere).
    fn reply_identity(&self) -> String {
        format!("{} {}", self.name(), self.endpoint())
    }
}

/// Builds the HTTP provider `config` names (or, for `local`, loads the
/// embedded model). Fails when no API key was found.
pub fn http_provider(config: &LlmConfig) -> Result<Box<dyn Provider>, LlmError> {
    if config.provider == ProviderKind::Local {
        return local_provider(config);
    }
    let key = config
        .api_key
        .clone()
        .ok_or_else(|| LlmError::MissingApiKey {
            provider: config.provider.to_string(),
            hint: format!("RLM_API_KEY or {}", config.provider.key_env_var()),
        })?;
    let http = http::client(config.timeout)?;
    Ok(match config.provider {
        ProviderKind::OpenAi => Box::new(
            OpenAiProvider::openai(http, &config.base_url, key).with_streaming(config.stream),
        ),
        ProviderKind::Azure => Box::new(
            OpenAiProvider::azure(http, &config.base_url, key, &config.azure_api_version)
                .with_streaming(config.stream),
        ),
        ProviderKind::Anthropic => Box::new(
            AnthropicProvider::new(http, &config.base_url, key, &config.anthropic_version)
                .with_streaming(config.stream),
        ),
        ProviderKind::Local => return local_provider(config),
    })
}

/// The embedded model (`rlm-local`, llama.cpp in-process).
#[cfg(feature = "local")]
fn local_provider(config: &LlmConfig) -> Result<Box<dyn Provider>, LlmError> {
    Ok(Box::new(LocalProvider::from_config(config)?))
}

/// Without the `local` feature there is no embedded model to run.
#[cfg(not(feature = "local"))]
fn local_provider(_config: &LlmConfig) -> Result<Box<dyn Provider>, LlmError> {
    Err(LlmError::Config(
        "this rlm was built without the local model (--no-default-features): rebuild with the default features (`cargo install --locked --path crates/rlm`, or `--features local-model`), or set RLM_PROVIDER to openai, azure or anthropic".into(),
    ))
}

/// A [`crate::ReplySchema`] name as wire protocols accept it (OpenAI's
/// schema name, Anthropic's tool name): ASCII letters, digits, `_` and `-`,
/// at most 64 characters, `reply` when nothing is left.
pub(crate) fn wire_schema_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.trim_matches('_').is_empty() {
        "reply".to_string()
    } else {
        cleaned
    }
}

/// Parses `Retry-After` / `retry-after-ms`: seconds, milliseconds, or an
/// HTTP date.
pub(crate) fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use reqwest::header::{HeaderMap, HeaderValue};

    use super::{parse_retry_after, wire_schema_name};

    #[test]
    fn schema_names_keep_only_what_the_wire_accepts() {
        assert_eq!(wire_schema_name("rlm_turn-2"), "rlm_turn-2");
        assert_eq!(wire_schema_name("my schema.json"), "my_schema_json");
        assert_eq!(wire_schema_name(""), "reply");
        assert_eq!(wire_schema_name("…"), "reply");
        assert_eq!(wire_schema_name(&"x".repeat(80)).len(), 64);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_accepts_seconds_milliseconds_and_http_dates() {
        assert_eq!(parse_retry_after(&headers(&[])), None);
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "7")])),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "7"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250)),
            "the precise header wins"
        );
        let in_a_minute = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let wait = parse_retry_after(&headers(&[("retry-after", &in_a_minute)])).unwrap();
        assert!(
            wait > Duration::from_secs(55) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", &past)])),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "soon")])),
            None
        );
        assert_eq!(parse_retry_after(&headers(&[("retry-after", "-3")])), None);
    }
}
