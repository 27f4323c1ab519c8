//! Load time, prompt-processing and generation speed of the in-process model
//! on one prompt: `cargo run --release -p rlm-local --features llama --example
//! throughput -- PROMPT_FILE [MAX_TOKENS]`. One JSON line on stdout, the same
//! fields `scripts/side_by_side.sh` measures for llama-cpp-python's server.
//!
//! `throughput -- --prefix-state SYSTEM_FILE CACHE_DIR|off [QUESTION]`: the
//! first request of a fresh process (no warm-up), system turn = the file,
//! with the prefix state kept in CACHE_DIR. One JSON line: load time, prompt
//! tokens, how many came from disk, prompt time (admission to first token,
//! the restore included), the state files in CACHE_DIR. Run it twice on an
//! empty CACHE_DIR (`scripts/prefix_state.sh` does): the first run decodes
//! the system turn and saves it, the second restores it.

use std::path::PathBuf;
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
        grammar: None,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "--prefix-state") {
        args.next();
        return prefix_state(args.collect()).await;
    }
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

/// `--prefix-state SYSTEM_FILE CACHE_DIR|off [QUESTION]`.
async fn prefix_state(args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: throughput --prefix-state SYSTEM_FILE CACHE_DIR|off [QUESTION]";
    let (Some(system_file), Some(cache)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    let system = std::fs::read_to_string(system_file)?;
    let question = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "Which section of the text above explains undo?".into());
    let cache = (cache != "off").then(|| PathBuf::from(cache));
    let options = LocalModelOptions {
        prefix_cache: cache.clone(),
        ..LocalModelOptions::default()
    };
    let path = rlm_local::configured_model_path()?;
    let started = Instant::now();
    let model = LocalModel::load(&path, options)?;
    let load_s = started.elapsed().as_secs_f64();
    let mut r = request(&question, 16);
    r.turns.insert(
        0,
        Turn {
            role: "system".into(),
            content: system,
        },
    );
    let g = model.generate(r).await?;
    let (files, bytes) = cache
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".state"))
                .filter_map(|e| e.metadata().ok())
                .fold((0, 0), |(n, b), m| (n + 1, b + m.len()))
        })
        .unwrap_or((0, 0));
    println!(
        "{{\"load_s\":{load_s:.2},\"prompt_tokens\":{},\"disk_prompt_tokens\":{},\"prompt_s\":{:.2},\"load_and_answer_s\":{:.2},\"state_files\":{files},\"state_bytes\":{bytes},\"text\":{}}}",
        g.prompt_tokens,
        g.disk_prompt_tokens,
        g.prompt_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        serde_json::to_string(&g.text)?,
    );
    Ok(())
}
