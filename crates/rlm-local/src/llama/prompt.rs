//! Prompts through the model's chat template, the sampler chain (with a
//! grammar when the request carries one) and stop strings.

use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::request::*;
use crate::LocalError;

/// The conversation through the model's chat template, tokenized.
pub(super) fn render_prompt(
    model: &LlamaModel,
    template: &LlamaChatTemplate,
    turns: &[Turn],
) -> Result<Vec<LlamaToken>, LocalError> {
    let messages = turns
        .iter()
        .map(|t| {
            // C strings: a NUL inside a message would end it early.
            LlamaChatMessage::new(t.role.clone(), t.content.replace('\0', ""))
                .map_err(|e| LocalError::Inference(format!("bad message: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let text = model
        .apply_chat_template(template, &messages, true)
        .map_err(|e| LocalError::Inference(format!("cannot apply the chat template: {e}")))?;
    let tokens = model.vocab().tokenize(text.as_bytes(), true, true);
    if tokens.is_empty() {
        return Err(LocalError::Inference("the prompt is empty".into()));
    }
    Ok(tokens)
}

/// The sampler chain of one request. A grammar goes first: every later
/// step then chooses among the tokens it admits (a token it rejects never
/// reaches top-k), and llama.cpp advances it with each sampled token.
pub(super) fn sampler(
    model: &LlamaModel,
    options: &LocalModelOptions,
    temperature: f32,
    grammar: Option<&str>,
) -> Result<LlamaSampler, LocalError> {
    let mut chain = Vec::new();
    if let Some(grammar) = grammar {
        chain.push(
            LlamaSampler::grammar(model, grammar, "root")
                .map_err(|e| LocalError::Grammar(e.to_string()))?,
        );
    }
    chain.push(LlamaSampler::penalties(
        model.n_vocab(),
        options.repeat_last_n,
        options.repeat_penalty,
        0.0,
        0.0,
    ));
    if temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
    } else {
        chain.extend([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::temp(temperature),
            LlamaSampler::dist(options.seed),
        ]);
    }
    Ok(LlamaSampler::chain_simple(chain))
}

/// Truncates `output` before the first stop string it contains; true if one
/// was found.
pub(super) fn cut_at_stop(output: &mut Vec<u8>, stops: &[String]) -> bool {
    let cut = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| output.windows(s.len()).position(|w| w == s.as_bytes()))
        .min();
    match cut {
        Some(at) => {
            output.truncate(at);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_cut_the_output_at_the_earliest_match() {
        let mut out = b"answer\nFINAL(x)\n```".to_vec();
        assert!(cut_at_stop(&mut out, &["```".into(), "\nFINAL".into()]));
        assert_eq!(out, b"answer");
        let mut out = b"no stop here".to_vec();
        assert!(!cut_at_stop(&mut out, &["".into(), "zzz".into()]));
        assert_eq!(out, b"no stop here");
    }
}
