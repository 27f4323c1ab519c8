//! Pipeline overhead (everything but model time) over 1,000 files / 50,000
//! chunks with a zero-latency scripted model. A measurement, not a test:
//!
//! ```
//! cargo test --release -p rlm-engine --test pipeline_bench -- --ignored --nocapture
//! ```

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::worker;
use rlm_corpus::{IndexOptions, Store};
use rlm_engine::{
    AskRequest, BudgetConfig, Corpus, Engine, EngineConfig, Flow, FlowsConfig, Inspector,
};
use rlm_llm::testing::{Reply, Script, ScriptedServer};
use rlm_sandbox::{SandboxConfig, WorkerPool};

fn model() -> Script {
    Script::new().respond_with(|r| {
        let p = r.last_message();
        let text = if p.contains("Extract the semantic intent") {
            "{\"entity\": \"employee 7\", \"attribute\": \"skills\", \"output_type\": \"list\", \"semantic_intent\": \"skills\"}".to_string()
        } else if p.contains("def evaluate_chunk_relevance") {
            "```python\ndef evaluate_chunk_relevance(chunk_text):\n    if 'skills' in chunk_text.lower():\n        return True\n    return False\n```".to_string()
        } else if p.contains("def inspect_iteration") {
            "```python\ndef inspect_iteration(chunks):\n    sel = []\n    for c in chunks:\n        if 'skills' in c['text'].lower():\n            sel.append(c['chunk_id'])\n    return {'selected_chunk_ids': sel, 'extracted_data': {}, 'confidence': 0.95, 'stop': True}\n```".to_string()
        } else if p.contains("Summarize what these passages") {
            let id = p.split("[chunk:").nth(1).and_then(|s| s.split(']').next()).unwrap_or("x");
            format!("- a fact [[chunk:{id}]]")
        } else if p.contains("per-file summaries") {
            p.lines().filter(|l| l.starts_with("- ")).collect::<Vec<_>>().join("\n")
        } else {
            "ok".to_string()
        };
        Some(Reply::text(text).with_usage(10, 10))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn pipeline_overhead_1000_files_50000_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for f in 0..1000 {
        let mut text = String::new();
        for c in 0..50 {
            let topic = if c == 7 {
                "Skills: Python, Rust and SQL"
            } else {
                "Routine notes about meetings"
            };
            text.push_str(&format!(
                "Employee {f} record {c}. {topic}; paragraph filler text number {c}.\n\n"
            ));
        }
        std::fs::write(docs.join(format!("emp_{f:04}.txt")), text).unwrap();
    }
    let store_dir = dir.path().join("store");
    let t = Instant::now();
    let opts = IndexOptions {
        chunk_chars: 90,
        ..IndexOptions::default()
    };
    Store::index(&store_dir, &[docs], &opts, &mut |_| {}).unwrap();
    let store = Arc::new(Store::open(&store_dir).unwrap());
    println!(
        "indexed {} chunks in {:.1} s",
        store.stats().unwrap().chunks,
        t.elapsed().as_secs_f64()
    );
    let corpus = Arc::new(Corpus::load(store).unwrap());
    let server = ScriptedServer::start(model()).await;
    let budget = BudgetConfig {
        max_llm_calls: 100_000,
        root_reserved_calls: 5,
        max_concurrent: 16,
        ..BudgetConfig::default()
    };
    for inspector in [Inspector::PerChunk, Inspector::Iterative] {
        let config = EngineConfig {
            budget: budget.clone(),
            root_model: "root-model".into(),
            sub_model: "sub-model".into(),
            flows: FlowsConfig::default(),
            ..EngineConfig::default()
        };
        let pool = WorkerPool::new(SandboxConfig::new(worker()), 1)
            .await
            .unwrap();
        let engine = Engine::new(Arc::new(server.client()), pool, config);
        let mut req = AskRequest::new("Which skills does employee 7 have?");
        req.flow = Flow::Pipeline;
        req.pipeline.inspector = Some(inspector);
        let before = server.request_count();
        let t = Instant::now();
        let answer = engine.ask(corpus.clone(), req).await.unwrap();
        let secs = t.elapsed().as_secs_f64();
        let exp = answer
            .flow_report
            .as_ref()
            .unwrap()
            .expansion
            .clone()
            .unwrap();
        println!(
            "{:>10}: {:.2} s wall, {} model calls (zero latency), {} files / {} chunks inspected, {} dropped by caps, partial: {}",
            inspector.as_str(),
            secs,
            server.request_count() - before,
            exp.files,
            exp.total_chunks,
            exp.chunks_dropped,
            answer.partial
        );
    }
    let t = Instant::now();
    let mut req = AskRequest::new("Which skills does employee 7 have?");
    req.flow = Flow::Rag;
    let pool = WorkerPool::new(SandboxConfig::new(worker()), 1)
        .await
        .unwrap();
    let engine = Engine::new(Arc::new(server.client()), pool, EngineConfig::default());
    let _ = engine.ask(corpus.clone(), req).await.unwrap();
    println!("       rag: {:.3} s wall", t.elapsed().as_secs_f64());
}
