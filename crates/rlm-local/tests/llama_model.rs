//! The real model in-process (feature `llama`): runs only when the model
//! file is present (`rlm model pull` or RLM_LOCAL_MODEL); skipped otherwise.
//! Prints load time and prompt/generation speed (single and 4 in parallel),
//! and checks the prefix state kept on disk between "processes" (separate
//! model loads). The tests take turns: they share two cores.

#![cfg(feature = "llama")]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rlm_local::{GenerateRequest, Generation, LocalModel, LocalModelOptions, TextSink, Turn};
use sha2::{Digest, Sha256};

/// One model test at a time (each loads the model and uses every core).
static MODEL_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn model_path() -> Option<PathBuf> {
    match rlm_local::configured_model_path() {
        Ok(p) if p.is_file() => Some(p),
        _ => {
            eprintln!("skipped: no local model file (run `rlm model pull` or set RLM_LOCAL_MODEL)");
            None
        }
    }
}

fn request(question: &str) -> GenerateRequest {
    GenerateRequest {
        turns: vec![
            Turn {
                role: "system".into(),
                content: "You are a concise assistant.".into(),
            },
            Turn {
                role: "user".into(),
                content: question.into(),
            },
        ],
        max_tokens: Some(64),
        temperature: Some(0.0),
        stop: vec![],
        on_text: None,
        grammar: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_model_answers_alone_and_in_parallel() {
    let Some(path) = model_path() else { return };
    let _turn = MODEL_TESTS.lock().await;
    let model = LocalModel::load(&path, LocalModelOptions::default()).unwrap();
    eprintln!(
        "load: {:?} (context {} tokens)",
        model.load_time(),
        model.context_tokens()
    );

    let g = model
        .generate(request("What is 2 + 3? Reply with just the number."))
        .await
        .unwrap();
    eprintln!(
        "single: {:?} | prompt {} tok in {:?} ({:.1} tok/s) | output {} tok in {:?} ({:.1} tok/s)",
        g.text,
        g.prompt_tokens,
        g.prompt_time,
        g.prompt_tokens as f64 / g.prompt_time.as_secs_f64(),
        g.output_tokens,
        g.generation_time,
        g.output_tokens.saturating_sub(1) as f64 / g.generation_time.as_secs_f64().max(1e-9),
    );
    assert!(g.text.contains('5'), "{:?}", g.text);
    assert!(g.prompt_tokens > 10);

    let mut long = request("Write a 12-line poem about the sea.");
    long.max_tokens = Some(128);
    let g = model.generate(long).await.unwrap();
    eprintln!(
        "long: prompt {} tok in {:?} ({:.1} tok/s) | output {} tok in {:?} ({:.1} tok/s)",
        g.prompt_tokens,
        g.prompt_time,
        g.prompt_tokens as f64 / g.prompt_time.as_secs_f64(),
        g.output_tokens,
        g.generation_time,
        g.output_tokens.saturating_sub(1) as f64 / g.generation_time.as_secs_f64().max(1e-9),
    );

    // The next turn of a conversation reuses the cached prefix: only the
    // reply and the new message are decoded.
    let first = request("Name one planet of the solar system.");
    let g1 = model.generate(first.clone()).await.unwrap();
    let mut second = first;
    second.turns.push(Turn {
        role: "assistant".into(),
        content: g1.text.clone(),
    });
    second.turns.push(Turn {
        role: "user".into(),
        content: "Name another one.".into(),
    });
    let g2 = model.generate(second).await.unwrap();
    eprintln!(
        "second turn: prompt {} tok, {} reused from the cache, prompt time {:?} (first turn {:?}); {:?} then {:?}",
        g2.prompt_tokens, g2.cached_prompt_tokens, g2.prompt_time, g1.prompt_time, g1.text, g2.text
    );
    assert!(
        g2.cached_prompt_tokens >= g1.prompt_tokens,
        "the whole first prompt is reused: {} of {}",
        g2.cached_prompt_tokens,
        g1.prompt_tokens
    );
    assert!(g2.cached_prompt_tokens < g2.prompt_tokens);
    assert!(!g2.text.trim().is_empty());

    let started = Instant::now();
    let questions = [
        "Name a primary color.",
        "What is the capital of France?",
        "Say hello in Spanish.",
        "What is 10 * 10?",
    ];
    let (answers, streamed) = futures_join(&model, &questions).await;
    let wall = started.elapsed();
    let out: u32 = answers.iter().map(|g| g.output_tokens).sum();
    eprintln!(
        "parallel x4: {out} output tokens in {wall:?} ({:.1} tok/s aggregate)",
        out as f64 / wall.as_secs_f64()
    );
    for ((q, a), pieces) in questions.iter().zip(&answers).zip(&streamed) {
        let pieces = pieces.lock().unwrap();
        eprintln!(
            "  {q} -> {:?} (streamed in {} pieces)",
            a.text,
            pieces.len()
        );
        assert!(!a.text.trim().is_empty());
        // Every parallel sequence streams its own text, exactly.
        assert_eq!(pieces.concat(), a.text);
        assert!(pieces.len() as u32 <= a.output_tokens, "{pieces:?}");
    }
    let pieces: usize = streamed.iter().map(|p| p.lock().unwrap().len()).sum();
    assert!(pieces > questions.len(), "answers streamed token by token");
    assert!(answers[1].text.contains("Paris"), "{:?}", answers[1].text);
}

type Pieces = Arc<Mutex<Vec<String>>>;

/// The four questions at once, each streaming into its own list of pieces.
async fn futures_join(
    model: &LocalModel,
    questions: &[&str],
) -> (Vec<rlm_local::Generation>, Vec<Pieces>) {
    let streamed: Vec<Pieces> = (0..4).map(|_| Pieces::default()).collect();
    let streaming = |i: usize| {
        let pieces = streamed[i].clone();
        GenerateRequest {
            on_text: Some(TextSink::new(move |t| {
                pieces.lock().unwrap().push(t.to_string())
            })),
            ..request(questions[i])
        }
    };
    let (a, b, c, d) = tokio::join!(
        model.generate(streaming(0)),
        model.generate(streaming(1)),
        model.generate(streaming(2)),
        model.generate(streaming(3)),
    );
    (
        vec![a.unwrap(), b.unwrap(), c.unwrap(), d.unwrap()],
        streamed,
    )
}

/// A system turn of `rules` numbered rules (about 20 tokens each).
fn long_system(rules: u32) -> String {
    let mut text = String::from("You answer questions about a numbered list of items.\n");
    for i in 1..=rules {
        text.push_str(&format!(
            "Rule {i}: when asked about item {i}, reply with the number {} and nothing else.\n",
            i * 7 + 3
        ));
    }
    text
}

fn with_system(system: &str, question: &str) -> GenerateRequest {
    let mut r = request(question);
    r.turns[0].content = system.to_string();
    r.max_tokens = Some(24);
    r
}

fn options(prefix_cache: Option<&Path>) -> LocalModelOptions {
    LocalModelOptions {
        context_tokens: 4096,
        parallel: 2,
        prefix_cache: prefix_cache.map(Path::to_path_buf),
        ..LocalModelOptions::default()
    }
}

/// One request on a freshly loaded model: what a new `rlm ask` process does.
async fn in_new_process(path: &Path, options: LocalModelOptions, r: GenerateRequest) -> Generation {
    let model = LocalModel::load(path, options).unwrap();
    let g = model.generate(r).await.unwrap();
    eprintln!(
        "  prompt {} tok ({} from disk, {} cached) in {:?}: {:?}",
        g.prompt_tokens, g.disk_prompt_tokens, g.cached_prompt_tokens, g.prompt_time, g.text
    );
    g
}

fn state_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "state"));
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_turn_is_restored_from_disk_in_the_next_process() {
    let Some(path) = model_path() else { return };
    let _turn = MODEL_TESTS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("prefix-state");
    let system = long_system(24);

    eprintln!("first process (cold, saves the system turn):");
    let first = in_new_process(
        &path,
        options(Some(&cache)),
        with_system(&system, "What is the answer for item 3?"),
    )
    .await;
    assert_eq!(
        (first.disk_prompt_tokens, first.cached_prompt_tokens),
        (0, 0)
    );
    let files = state_files(&cache);
    assert_eq!(files.len(), 1, "one state file: {files:?}");
    let size = std::fs::metadata(&files[0]).unwrap().len();
    eprintln!("  state file: {size} bytes");

    eprintln!("second process (another question, same system turn):");
    let question = with_system(&system, "What is the answer for item 12?");
    let warm = in_new_process(&path, options(Some(&cache)), question.clone()).await;
    assert!(
        warm.disk_prompt_tokens >= 400 && warm.disk_prompt_tokens < warm.prompt_tokens,
        "the system turn comes from disk: {} of {}",
        warm.disk_prompt_tokens,
        warm.prompt_tokens
    );
    assert_eq!(warm.cached_prompt_tokens, warm.disk_prompt_tokens);
    assert!(
        warm.prompt_tokens - warm.disk_prompt_tokens < 40,
        "only the question is decoded"
    );
    assert_eq!(state_files(&cache), files, "nothing else is written");

    eprintln!("the same prompt with the cache off:");
    let cold = in_new_process(&path, options(None), question).await;
    assert_eq!((cold.disk_prompt_tokens, cold.cached_prompt_tokens), (0, 0));
    assert_eq!(cold.prompt_tokens, warm.prompt_tokens);
    assert_eq!(
        warm.text, cold.text,
        "greedy decoding after a restored prefix equals decoding it cold"
    );
    assert!(warm.prompt_time < cold.prompt_time);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_or_unwritable_prefix_state_only_costs_time() {
    let Some(path) = model_path() else { return };
    let _turn = MODEL_TESTS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("states");
    let request = with_system(&long_system(10), "What is the answer for item 2?");

    eprintln!("saving:");
    let saved = in_new_process(&path, options(Some(&cache)), request.clone()).await;
    let [file] = state_files(&cache).try_into().unwrap();
    let good = std::fs::read(&file).unwrap();

    eprintln!("truncated file:");
    std::fs::write(&file, &good[..good.len() / 2]).unwrap();
    let g = in_new_process(&path, options(Some(&cache)), request.clone()).await;
    assert_eq!(g.disk_prompt_tokens, 0);
    assert_eq!(g.text, saved.text);
    assert_eq!(std::fs::read(&file).unwrap().len(), good.len(), "replaced");

    // A trailer that checks out over bytes that are not a llama.cpp state:
    // llama.cpp refuses it, the request goes on.
    eprintln!("well-sealed garbage:");
    let mut garbage = vec![0x5a_u8; 4096];
    let digest: [u8; 32] = Sha256::digest(&garbage).into();
    garbage.extend_from_slice(&digest);
    garbage.extend_from_slice(b"RLMPFX01");
    std::fs::write(&file, &garbage).unwrap();
    let g = in_new_process(&path, options(Some(&cache)), request.clone()).await;
    assert_eq!(g.disk_prompt_tokens, 0);
    assert_eq!(g.text, saved.text);
    assert_eq!(std::fs::read(&file).unwrap().len(), good.len(), "replaced");

    eprintln!("restored:");
    let g = in_new_process(&path, options(Some(&cache)), request.clone()).await;
    assert!(g.disk_prompt_tokens > 0);
    assert_eq!(g.text, saved.text);

    // A directory that cannot be created: said once on stderr, answered.
    eprintln!("unwritable directory:");
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"").unwrap();
    let g = in_new_process(&path, options(Some(&blocker.join("sub"))), request).await;
    assert_eq!(g.disk_prompt_tokens, 0);
    assert_eq!(g.text, saved.text);
}

/// The draft model pulled by `rlm model pull --draft`; `RLM_REQUIRE_DRAFT=1`
/// makes its absence a failure (CI pulls it).
fn draft_path() -> Option<PathBuf> {
    let path = rlm_local::models_dir()
        .ok()?
        .join(rlm_local::draft_model().file_name);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("RLM_REQUIRE_DRAFT").as_deref() != Ok("1"),
        "RLM_REQUIRE_DRAFT=1 but {} is missing: run `rlm model pull --draft`",
        path.display()
    );
    eprintln!("skipped: no draft model (run `rlm model pull --draft`)");
    None
}

/// Requests of the kinds the engine makes: code, a JSON turn under a
/// grammar, and prose sampled at the default temperature (seeded).
fn speculation_requests() -> Vec<GenerateRequest> {
    let mut code = request(
        "Write a Python function that counts the lines of a text that contain a given word, with a docstring.",
    );
    code.max_tokens = Some(96);
    let mut json = request("Give the capital of France as JSON with the keys country and capital.");
    json.grammar = Some(
        r#"root ::= "{\"country\": \"" [A-Za-z ]* "\", \"capital\": \"" [A-Za-z ]* "\"}""#.into(),
    );
    let mut sampled = request("Name three uses of a hash map, one line each.");
    sampled.temperature = None;
    vec![code, json, sampled]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculative_decoding_writes_what_plain_decoding_writes() {
    let (Some(path), Some(draft)) = (model_path(), draft_path()) else {
        return;
    };
    let _turn = MODEL_TESTS.lock().await;
    let run = |draft: Option<PathBuf>| {
        let path = path.clone();
        async move {
            let options = LocalModelOptions {
                draft,
                ..LocalModelOptions::default()
            };
            let model = LocalModel::load(&path, options).unwrap();
            let mut out = Vec::new();
            for r in speculation_requests() {
                out.push(model.generate(r).await.unwrap());
            }
            out
        }
    };
    let plain = run(None).await;
    let speculative = run(Some(draft)).await;
    let mut proposed = 0;
    for (p, s) in plain.iter().zip(&speculative) {
        assert_eq!(s.text, p.text, "speculation changed the text");
        assert_eq!(s.output_tokens, p.output_tokens);
        assert_eq!(p.draft_proposed, 0);
        proposed += s.draft_proposed;
        assert!(s.draft_accepted <= s.draft_proposed);
        let rate = |g: &Generation| f64::from(g.output_tokens) / g.generation_time.as_secs_f64();
        eprintln!(
            "plain {:.1} tok/s, speculative {:.1} tok/s, {} of {} proposed tokens kept: {:?}",
            rate(p),
            rate(s),
            s.draft_accepted,
            s.draft_proposed,
            p.text.chars().take(60).collect::<String>()
        );
    }
    assert!(proposed > 0, "the draft proposed nothing");
}
