//! What `rlm serve` adds to an [`crate::App`] beyond its limits: who may use
//! it (a token, the host names it answers to), where uploads go, the sources
//! a re-index reads, and the model client the health check asks.

use std::path::PathBuf;

/// Longest accepted token, in bytes.
const MAX_TOKEN_BYTES: usize = 4096;

/// Access rules and features of a server (see `API.md`, "Access"). Its
/// `Debug` shows whether a token is set, never the token.
#[derive(Clone, Default)]
pub struct ServerOptions {
    /// The bearer token every `/api`, `/v1` and `/mcp` request must carry
    /// (`--token`, `RLM_SERVE_TOKEN`); `None`: no token asked.
    pub token: Option<String>,
    /// Host names accepted in the `Host` header beside `localhost` and the
    /// bound address (`--allowed-host`), lowercase, without port.
    pub allowed_hosts: Vec<String>,
    /// Where uploaded files go (`--upload-dir`); `None`: uploads are off
    /// (`--allow-upload` not given).
    pub upload_dir: Option<PathBuf>,
    /// `POST /api/index` may index a path on the server (`--allow-index-paths`);
    /// it needs a token and [`ServerOptions::index_roots`].
    pub allow_index_paths: bool,
    /// The folders `POST /api/index` may read, absolute (`--index-root`); a
    /// path is indexed only when it resolves inside one of them.
    pub index_roots: Vec<PathBuf>,
    /// The folders and files the store was indexed from (`--source`), read
    /// again by `POST /api/reindex`.
    pub sources: Vec<PathBuf>,
    /// The model client `GET /api/health` checks (its model list); `None`:
    /// the model's health is `unknown`.
    pub model: Option<rlm_llm::LlmClient>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("upload_dir", &self.upload_dir)
            .field("allow_index_paths", &self.allow_index_paths)
            .field("index_roots", &self.index_roots)
            .field("sources", &self.sources)
            .field("model", &self.model)
            .finish()
    }
}

impl ServerOptions {
    /// Checks the token and host names: one line saying what is wrong.
    pub fn validate(&self) -> Result<(), crate::error::StartError> {
        if let Some(t) = &self.token {
            if t.is_empty() {
                return Err(
                    "the token is empty; give a non-empty --token (or RLM_SERVE_TOKEN), or none"
                        .into(),
                );
            }
            if t.len() > MAX_TOKEN_BYTES {
                return Err(format!(
                    "the token has {} bytes; use at most {MAX_TOKEN_BYTES}",
                    t.len()
                )
                .into());
            }
            if !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err("the token must be printable ASCII without spaces (it is sent in an Authorization header)".into());
            }
        }
        for h in &self.allowed_hosts {
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
            if !ok {
                return Err(format!(
                    "--allowed-host {h:?} is not a host name; give a name such as rlm.example.org (no scheme, no port)"
                ).into());
            }
        }
        if self.allow_index_paths {
            if self.token.is_none() {
                return Err("--allow-index-paths needs --token (or RLM_SERVE_TOKEN): without one, any local user could read the server's files through it".into());
            }
            if self.index_roots.is_empty() {
                return Err("--allow-index-paths needs --index-root DIR (repeatable): the folders POST /api/index may read".into());
            }
        }
        for p in &self.index_roots {
            if !p.is_absolute() {
                return Err(
                    format!("--index-root {} must be an absolute path", p.display()).into(),
                );
            }
        }
        for p in &self.sources {
            if !p.is_absolute() {
                return Err(format!(
                    "--source {} must be an absolute path (the server re-indexes it from wherever it runs)",
                    p.display()
                ).into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_token() {
        let o = ServerOptions {
            token: Some("s3cret-value".into()),
            ..ServerOptions::default()
        };
        let shown = format!("{o:?}");
        assert!(
            !shown.contains("s3cret-value") && shown.contains("<set>"),
            "{shown}"
        );
    }
}
