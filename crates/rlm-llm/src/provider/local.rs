//! Provider `local`: the embedded model. A GGUF runs in this process through
//! llama.cpp (`rlm-local`); usage is counted by the model's own tokenizer and
//! costs nothing. Parallel requests are decoded together in one batch, and
//! each streams its text to the request's [`crate::TokenSink`]. A request's
//! reply schema becomes a grammar ([`crate::schema::to_gbnf`]) that
//! llama.cpp samples under.

use std::path::PathBuf;
use std::sync::Once;

use rlm_local::{
    Finish, GenerateRequest, LocalError, LocalModel, LocalModelOptions, TextSink, Turn,
};

use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::provider::{BoxFuture, Provider};
use crate::types::{DraftTokens, FinishReason, ModelReply, ModelRequest, ReportedUsage};

/// The embedded model behind the [`Provider`] trait.
#[derive(Debug)]
pub struct LocalProvider {
    model: LocalModel,
    endpoint: String,
}

impl LocalProvider {
    /// Loads the model `config` names (`RLM_LOCAL_MODEL`, else the default
    /// model in the models directory) with the `RLM_LOCAL_*` settings. Says
    /// once on stderr when the local model was chosen because nothing else
    /// was configured.
    pub fn from_config(config: &LlmConfig) -> Result<Self, LlmError> {
        let path: PathBuf = match &config.local_model {
            Some(path) => path.clone(),
            None => rlm_local::default_model_path().map_err(local_error)?,
        };
        let options = LocalModelOptions::from_env().map_err(local_error)?;
        if config.local_auto_selected {
            static NOTICE: Once = Once::new();
            NOTICE.call_once(|| {
                eprintln!(
                    "rlm: no model provider or API key configured; answering with the local model {} (set RLM_PROVIDER and a key to use a hosted model)",
                    path.display()
                );
            });
        }
        let model = LocalModel::load(&path, options).map_err(local_error)?;
        Ok(LocalProvider {
            endpoint: format!("local:{}", path.display()),
            model,
        })
    }

    /// A provider over an already loaded model.
    pub fn new(model: LocalModel) -> Self {
        LocalProvider {
            endpoint: format!("local:{}", model.path().display()),
            model,
        }
    }

    /// The loaded model.
    pub fn model(&self) -> &LocalModel {
        &self.model
    }
}

impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    /// Sampling is seeded (`RLM_LOCAL_SEED`), so every request is answered
    /// the same way by the same model file and settings.
    fn reproducible(&self, _request: &ModelRequest) -> bool {
        true
    }

    fn reply_identity(&self) -> String {
        format!("local {}", self.model.reply_identity())
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>> {
        Box::pin(async move {
            let unsupported = |reason: String| LlmError::SchemaUnsupported {
                provider: "local".into(),
                reason,
            };
            let grammar = match &request.schema {
                Some(s) => Some(s.to_gbnf().map_err(|e| unsupported(e.to_string()))?),
                None => None,
            };
            let generation = self
                .model
                .generate(GenerateRequest {
                    turns: request
                        .messages
                        .iter()
                        .map(|m| Turn {
                            role: m.role.as_str().to_string(),
                            content: m.content.clone(),
                        })
                        .collect(),
                    max_tokens: request.max_output_tokens,
                    temperature: request.temperature,
                    stop: request.stop.clone(),
                    on_text: request
                        .on_token
                        .clone()
                        .map(|sink| TextSink::new(move |text: &str| sink.send(text))),
                    grammar,
                })
                .await
                .map_err(|e| match e {
                    LocalError::ContextExceeded {
                        prompt_tokens,
                        window,
                    } => LlmError::ContextWindowExceeded {
                        model: self.model.name().to_string(),
                        estimated_tokens: u64::from(prompt_tokens),
                        window: u64::from(window),
                    },
                    LocalError::Grammar(detail) => unsupported(detail),
                    other => local_error(other),
                })?;
            Ok(ModelReply {
                text: generation.text,
                finish_reason: match generation.finish {
                    Finish::Stop => FinishReason::Stop,
                    Finish::Length => FinishReason::Length,
                },
                model: self.model.name().to_string(),
                usage: Some(ReportedUsage {
                    input_tokens: u64::from(generation.prompt_tokens),
                    output_tokens: u64::from(generation.output_tokens),
                    cached_tokens: Some(u64::from(generation.cached_prompt_tokens)),
                }),
                draft: (generation.draft_proposed > 0).then_some(DraftTokens {
                    proposed: generation.draft_proposed,
                    accepted: generation.draft_accepted,
                }),
            })
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>> {
        let name = self.model.name().to_string();
        Box::pin(async move { Ok(vec![name]) })
    }
}

/// Missing and corrupt files are configuration problems (the message says
/// what to run); inference failures are reported as they are, not retried.
fn local_error(err: LocalError) -> LlmError {
    match err {
        LocalError::ModelMissing { .. }
        | LocalError::CorruptModel { .. }
        | LocalError::Load { .. }
        | LocalError::Config(_) => LlmError::Config(err.to_string()),
        other => LlmError::Unsupported(other.to_string()),
    }
}
