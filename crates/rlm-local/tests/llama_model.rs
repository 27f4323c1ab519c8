//! The real model in-process (feature `llama`): runs only when the model
//! file is present (`rlm model pull` or RLM_LOCAL_MODEL); skipped otherwise.
//! Prints load time and prompt/generation speed (single and 4 in parallel).

#![cfg(feature = "llama")]

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rlm_local::{GenerateRequest, LocalModel, LocalModelOptions, TextSink, Turn};

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
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_model_answers_alone_and_in_parallel() {
    let path = match rlm_local::configured_model_path() {
        Ok(p) if p.is_file() => p,
        _ => {
            eprintln!("skipped: no local model file (run `rlm model pull` or set RLM_LOCAL_MODEL)");
            return;
        }
    };
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
