//! An OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, Ollama,
//! llama.cpp, LM Studio, …) as an [`Embedder`].
//!
//! A blocking client without an async runtime, so it is safe to call from any
//! thread, including a `spawn_blocking` task inside the engine's runtime.

use std::time::Duration;

use serde_json::{Value, json};

use super::{EmbedError, Embedder, normalize};

/// The model asked for when none is configured.
pub const DEFAULT_PROVIDER_MODEL: &str = "text-embedding-3-small";
/// Attempts per batch; 429 and 5xx answers and dropped connections are retried.
const ATTEMPTS: u32 = 3;
/// A `Retry-After` longer than this fails at once instead of stalling indexing.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Where and how to call the endpoint.
#[derive(Debug, Clone)]
pub struct ProviderEmbedderConfig {
    /// API base ending before `/embeddings`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Bearer token, when the server wants one.
    pub api_key: Option<String>,
    /// Embedding model name, e.g. `text-embedding-3-small`.
    pub model: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Texts per request.
    pub batch_size: usize,
}

/// Embeddings from a provider's endpoint, L2-normalized on arrival.
pub struct ProviderEmbedder {
    config: ProviderEmbedderConfig,
    url: String,
    agent: ureq::Agent,
    model_id: String,
    dimension: usize,
}

impl std::fmt::Debug for ProviderEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of debug output.
        f.debug_struct("ProviderEmbedder")
            .field("url", &self.url)
            .field("model", &self.config.model)
            .field("dimension", &self.dimension)
            .finish()
    }
}

impl ProviderEmbedder {
    /// Checks the configuration and learns the vector length with one short
    /// request, so a wrong URL, key or model fails before any indexing work.
    pub fn connect(config: ProviderEmbedderConfig) -> Result<ProviderEmbedder, EmbedError> {
        if config.model.trim().is_empty() {
            return Err(EmbedError::Config(
                "no embedding model named: set RLM_EMBED_PROVIDER_MODEL or `[embeddings] provider_model`".into(),
            ));
        }
        if config.batch_size == 0 {
            return Err(EmbedError::Config(
                "the embedding batch size must be at least 1".into(),
            ));
        }
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(EmbedError::Config(format!(
                "base URL {base:?} must start with http:// or https://"
            )));
        }
        let url = format!("{base}/embeddings");
        let agent = ureq::AgentBuilder::new()
            .timeout(config.timeout)
            .timeout_connect(config.timeout.min(Duration::from_secs(15)))
            .build();
        let mut embedder = ProviderEmbedder {
            model_id: format!("provider:{}", config.model),
            config,
            url,
            agent,
            dimension: 0,
        };
        let probe = embedder.request(&["dimension probe"])?;
        embedder.dimension = probe[0].len();
        Ok(embedder)
    }

    /// The endpoint called.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = json!({"model": self.config.model, "input": texts}).to_string();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self
                .agent
                .post(&self.url)
                .set("Content-Type", "application/json");
            if let Some(key) = &self.config.api_key {
                req = req.set("Authorization", &format!("Bearer {key}"));
            }
            match req.send_string(&body) {
                Ok(resp) => {
                    let text = resp.into_string().map_err(|e| EmbedError::Malformed {
                        url: self.url.clone(),
                        detail: format!("cannot read the body: {e}"),
                    })?;
                    return self.parse(&text, texts.len());
                }
                Err(ureq::Error::Status(status, resp)) => {
                    let retry_after = resp
                        .header("retry-after")
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .map(Duration::from_secs_f64);
                    let body = resp.into_string().unwrap_or_default();
                    let retryable = status == 429 || status >= 500;
                    let wait = retry_after.unwrap_or(Duration::from_millis(500 << attempt));
                    if retryable && attempt < ATTEMPTS && wait <= MAX_RETRY_AFTER {
                        std::thread::sleep(wait);
                        continue;
                    }
                    return Err(self.status_error(status, &body));
                }
                Err(ureq::Error::Transport(t)) => {
                    if attempt < ATTEMPTS && t.kind() != ureq::ErrorKind::ConnectionFailed {
                        std::thread::sleep(Duration::from_millis(500 << attempt));
                        continue;
                    }
                    return Err(EmbedError::Unreachable {
                        url: self.url.clone(),
                        detail: t.to_string(),
                    });
                }
            }
        }
    }

    fn status_error(&self, status: u16, body: &str) -> EmbedError {
        let message = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .or_else(|| v.get("error"))
                    .or_else(|| v.get("message"))
                    .map(|m| {
                        m.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| m.to_string())
                    })
            })
            .unwrap_or_else(|| body.chars().take(200).collect());
        let hint = match status {
            401 | 403 => "check RLM_API_KEY",
            404 => {
                "the server may not offer /embeddings, or the model name is wrong (RLM_EMBED_PROVIDER_MODEL)"
            }
            400 | 422 => "check the embedding model name (RLM_EMBED_PROVIDER_MODEL)",
            429 => "rate limited; retry later or lower RLM_EMBED_BATCH",
            _ => "retry later",
        };
        EmbedError::Status {
            url: self.url.clone(),
            status,
            detail: format!("{message} ({hint})"),
        }
    }

    fn parse(&self, body: &str, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let malformed = |detail: String| EmbedError::Malformed {
            url: self.url.clone(),
            detail,
        };
        let v: Value =
            serde_json::from_str(body).map_err(|e| malformed(format!("not JSON ({e})")))?;
        let data = v
            .get("data")
            .and_then(|d| d.as_array())
            .ok_or_else(|| malformed("no `data` array".into()))?;
        if data.len() != expected {
            return Err(malformed(format!(
                "{} embeddings for {expected} inputs",
                data.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
        for (pos, item) in data.iter().enumerate() {
            let index = item
                .get("index")
                .and_then(|i| i.as_u64())
                .map_or(pos, |i| i as usize);
            let vector: Vec<f32> = item
                .get("embedding")
                .and_then(|e| e.as_array())
                .ok_or_else(|| malformed(format!("item {pos} has no `embedding` array")))?
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    malformed(format!("item {pos} has a non-number in its embedding"))
                })?;
            if vector.is_empty() || (self.dimension != 0 && vector.len() != self.dimension) {
                return Err(malformed(format!(
                    "item {pos} has {} dimensions, expected {}",
                    vector.len(),
                    self.dimension
                )));
            }
            let slot = out
                .get_mut(index)
                .ok_or_else(|| malformed(format!("index {index} is out of range")))?;
            let mut vector = vector;
            normalize(&mut vector);
            *slot = Some(vector);
        }
        out.into_iter()
            .enumerate()
            .map(|(i, v)| v.ok_or_else(|| malformed(format!("no embedding for input {i}"))))
            .collect()
    }
}

impl Embedder for ProviderEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn batch_size(&self) -> usize {
        self.config.batch_size
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size) {
            out.extend(self.request(batch)?);
        }
        Ok(out)
    }
}
