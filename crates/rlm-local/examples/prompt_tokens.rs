//! What each part of a prompt costs in the model's tokens: `cargo run -p
//! rlm-local --features llama --example prompt_tokens -- MODEL.gguf FILE...`.
//! Each FILE is split before every line that starts a Markdown heading
//! (`## `) or a numbered item (`3. `); one line per part on stdout:
//! tokens, characters, the part's first words. The totals end each file.
//! Only the vocabulary is loaded (no weights), so it takes a second.

use std::path::PathBuf;

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;

fn starts_part(line: &str) -> bool {
    let numbered = line
        .split_once(". ")
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    line.starts_with("## ") || numbered
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = PathBuf::from(
        args.next()
            .ok_or("usage: prompt_tokens MODEL.gguf FILE...")?,
    );
    let backend = LlamaBackend::init()?;
    let params = LlamaModelParams::default().with_vocab_only(true);
    let model = LlamaModel::load_from_file(&backend, &model, &params)?;
    for file in args {
        let text = std::fs::read_to_string(&file)?;
        let mut parts: Vec<String> = vec![String::new()];
        for line in text.split_inclusive('\n') {
            if starts_part(line) && !parts.last().is_some_and(String::is_empty) {
                parts.push(String::new());
            }
            parts.last_mut().expect("one part").push_str(line);
        }
        let (mut tokens, mut chars) = (0, 0);
        println!("{file}");
        for part in &parts {
            let n = model.vocab().tokenize(part.as_bytes(), false, true).len();
            let head: String = part.trim_start().chars().take(60).collect();
            println!(
                "{n:6} {:7}  {}",
                part.chars().count(),
                head.replace('\n', " ")
            );
            tokens += n;
            chars += part.chars().count();
        }
        println!("{tokens:6} {chars:7}  total");
    }
    Ok(())
}
