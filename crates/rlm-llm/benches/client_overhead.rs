//! Client overhead: 1,000 calls to the scripted server at zero latency with
//! 32 in flight, through `LlmClient` and through bare reqwest posting the same
//! body. The difference is what the client adds (role resolution, window
//! check, semaphore, retry loop, timeout, parsing, accounting).
//!
//! `cargo bench -p rlm-llm --features testing --bench client_overhead`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rlm_llm::testing::{Script, ScriptedServer, TEST_API_KEY};
use rlm_llm::{ChatRequest, LlmClient, ProviderKind};

const CALLS: usize = 1_000;
const CONCURRENCY: usize = 32;
const WARMUP: usize = 200;

/// Runs `CALLS` calls of `call` from `CONCURRENCY` tasks; returns wall time
/// and sorted per-call latencies.
async fn drive<F, Fut>(calls: usize, call: F) -> (Duration, Vec<Duration>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let call = call.clone();
            let next = next.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        break latencies;
                    }
                    let t = Instant::now();
                    call(i).await;
                    latencies.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(calls);
    for w in workers {
        all.extend(w.await.expect("worker"));
    }
    let wall = started.elapsed();
    all.sort();
    (wall, all)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn report(name: &str, wall: Duration, lat: &[Duration]) -> (f64, Duration, Duration) {
    let rate = lat.len() as f64 / wall.as_secs_f64();
    let (p50, p99) = (pct(lat, 0.50), pct(lat, 0.99));
    println!(
        "{name:<14} {:>8.0} calls/s   p50 {:>7.2} ms   p99 {:>7.2} ms",
        rate,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    (rate, p50, p99)
}

fn main() {
    // The server gets its own thread and runtime, as a remote endpoint would.
    let server = ScriptedServer::spawn(Script::new().otherwise("ok"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut config = server.config(ProviderKind::OpenAi);
        config.max_concurrent = CONCURRENCY;
        let client = LlmClient::from_config(config).expect("client");

        let http = reqwest::Client::new();
        let url = format!("{}/chat/completions", server.base_url());
        let body = serde_json::json!({
            "model": "root-model",
            "messages": [{"role": "user", "content": "benchmark call"}],
        })
        .to_string();

        let raw_call = {
            let (http, url, body) = (http.clone(), url.clone(), body.clone());
            move |_| {
                let (http, url, body) = (http.clone(), url.clone(), body.clone());
                async move {
                    let resp = http
                        .post(&url)
                        .bearer_auth(TEST_API_KEY)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                        .expect("raw send");
                    let bytes = resp.bytes().await.expect("raw body");
                    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("raw json");
                    assert!(v["choices"][0]["message"]["content"].is_string());
                }
            }
        };
        let client_call = {
            let client = client.clone();
            move |_| {
                let client = client.clone();
                async move {
                    let r = client
                        .chat(ChatRequest::user("benchmark call"))
                        .await
                        .expect("client call");
                    assert_eq!(r.text, "ok");
                }
            }
        };

        drive(WARMUP, raw_call.clone()).await;
        drive(WARMUP, client_call.clone()).await;

        println!("{CALLS} calls, {CONCURRENCY} in flight, scripted server at zero latency");
        let (raw_wall, raw_lat) = drive(CALLS, raw_call).await;
        let (_, _, raw_p99) = report("bare reqwest", raw_wall, &raw_lat);
        let (cli_wall, cli_lat) = drive(CALLS, client_call).await;
        let (_, _, cli_p99) = report("LlmClient", cli_wall, &cli_lat);

        let mean = |l: &[Duration]| l.iter().sum::<Duration>() / l.len() as u32;
        println!(
            "added by the client: mean {:+.3} ms, p99 {:+.3} ms",
            (mean(&cli_lat).as_secs_f64() - mean(&raw_lat).as_secs_f64()) * 1e3,
            (cli_p99.as_secs_f64() - raw_p99.as_secs_f64()) * 1e3
        );
        assert_eq!(client.usage().total.calls as usize, WARMUP + CALLS);
    });
}
