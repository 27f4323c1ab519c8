//! Load time, prompt-processing and generation speed of the in-process model
//! on one prompt: `cargo run --release -p rlm-local --features llama --example
//! throughput -- PROMPT_FILE [MAX_TOKENS]`. One JSON line on stdout, the same
//! fields `scripts/side_by_side.sh` measures for llama-cpp-python's server.

use std::time::Instant;

use rlm_local::{GenerateRequest, LocalModel, LocalModelOptions, Turn};

fn request(prompt: &str, max_tokens: u32) -> GenerateRequest {
    GenerateRequest {
        turns: vec![Turn {
            role: "user".into(),
            content: prompt.into(),
        }],
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        stop: vec![],
        on_text: None,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let prompt_file = args
        .next()
        .ok_or("usage: throughput PROMPT_FILE [MAX_TOKENS]")?;
    let max_tokens: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(128);
    let prompt = std::fs::read_to_string(&prompt_file)?;
    let path = rlm_local::configured_model_path()?;
    let started = Instant::now();
    let model = LocalModel::load(&path, LocalModelOptions::default())?;
    let load_s = started.elapsed().as_secs_f64();
    // Warm-up, as the server gets one: the first decode pays one-time costs.
    model.generate(request("Say hi.", 4)).await?;
    let g = model.generate(request(&prompt, max_tokens)).await?;
    let prompt_s = g.prompt_time.as_secs_f64();
    let gen_s = g.generation_time.as_secs_f64();
    println!(
        "{{\"runtime\":\"rlm in-process\",\"load_s\":{load_s:.2},\"prompt_tokens\":{},\"prompt_s\":{prompt_s:.2},\"prompt_tok_s\":{:.1},\"output_tokens\":{},\"generation_s\":{gen_s:.2},\"generation_tok_s\":{:.1}}}",
        g.prompt_tokens,
        f64::from(g.prompt_tokens) / prompt_s,
        g.output_tokens,
        f64::from(g.output_tokens.saturating_sub(1)) / gen_s.max(1e-9),
    );
    Ok(())
}
