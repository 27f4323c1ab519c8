//! What the store benchmarks share: search latency percentiles, and a
//! generated corpus: files of words drawn from a
//! Zipf-distributed vocabulary (word i with probability ∝ 1/(i+1), as in
//! natural text), in sentences of 12 words and paragraphs, deterministic
//! for a given seed. Words are made of syllables, so they are not English
//! stop words and stem (mostly) to themselves.

use std::path::Path;
use std::time::{Duration, Instant};

/// The `p` quantile of sorted durations, in ms.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// p50, p99 and mean in ms of `run` over `questions`, after 20 warm-up
/// runs (page cache, tantivy's readers, PostgreSQL's buffers).
pub fn latency(questions: &[String], mut run: impl FnMut(&str)) -> (f64, f64, f64) {
    for q in questions.iter().take(20) {
        run(q);
    }
    let mut times: Vec<Duration> = questions
        .iter()
        .map(|q| {
            let t = Instant::now();
            run(q);
            t.elapsed()
        })
        .collect();
    times.sort();
    let mean = times.iter().map(Duration::as_secs_f64).sum::<f64>() / times.len() as f64;
    (
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        mean * 1000.0,
    )
}

/// A small deterministic generator (xorshift), so every run indexes the same text.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A word index below `vocabulary`, Zipf-like: P(index ≤ x) =
    /// ln(x + 1) / ln(vocabulary), a density ∝ 1/(x + 1).
    pub fn word(&mut self, vocabulary: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((vocabulary as f64).powf(u) as usize).saturating_sub(1)
    }
}

/// The `i`-th word of the vocabulary.
pub fn word(i: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "bri", "dan", "fel", "gor", "hil", "jun",
        "pex", "qua",
    ];
    let mut w = String::new();
    let mut n = i + 1;
    while n > 0 {
        w.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    w
}

/// Writes `files` files of about `file_bytes` each under `dir`, 50 per
/// folder; returns the bytes written.
pub fn generate(dir: &Path, files: usize, file_bytes: usize, vocabulary: usize) -> u64 {
    let words: Vec<String> = (0..vocabulary).map(word).collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut bytes = 0;
    let mut text = String::with_capacity(file_bytes + 2_000);
    for f in 0..files {
        text.clear();
        while text.len() < file_bytes {
            for _ in 0..12 {
                text.push_str(&words[rng.word(vocabulary)]);
                text.push(' ');
            }
            text.push_str(".\n");
            if rng.next().is_multiple_of(8) {
                text.push('\n');
            }
        }
        let sub = dir.join(format!("d{:04}", f / 50));
        if f % 50 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(sub.join(format!("f{f:07}.txt")), &text).unwrap();
        bytes += text.len() as u64;
    }
    bytes
}

/// `n` questions of 2–5 words drawn from the same distribution.
pub fn questions(n: usize, vocabulary: usize) -> Vec<String> {
    let mut rng = Rng(42);
    (0..n)
        .map(|_| {
            let words = 2 + (rng.next() % 4) as usize;
            (0..words)
                .map(|_| word(rng.word(vocabulary)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}
