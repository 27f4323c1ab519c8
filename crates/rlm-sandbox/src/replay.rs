//! Replays real model-written REPL trajectories through the sandbox and compares
//! each cell with what CPython printed (`tests/data/`, see `REPLAY_DATA.md`).
//!
//! The reference outputs are `tests/data/cpython_results.jsonl`: what CPython
//! 3.11 printed for each cell, given a synthetic context of the recorded kind
//! and size and stub host functions. The contexts and stubs are rebuilt here
//! exactly as that CPython run made them, including Python's Mersenne
//! Twister, so the stdout of every cell can be compared byte for byte.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::interpreter::{
    HostCall, HostError, HostFunctionKind, HostHandler, InputValue, Interpreter, InterpreterSpec,
    SandboxConfig, SandboxError,
};

/// Characters of stdout the CPython reference kept per cell.
const MAX_OUT: usize = 2000;
const STUB: &str = "stub answer";

const NIAH_VOCAB: &[&str] = &[
    "apple", "banana", "chair", "cherry", "desert", "door", "floor", "forest", "gentle", "grape",
    "happy", "mountain", "ocean", "orange", "quiet", "read", "river", "simple", "steady", "table",
    "talk", "think", "walk", "window", "write",
];
const PROSE: &[&str] = &[
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "the",
    "committee",
    "reviews",
    "the",
    "quarterly",
    "report",
    "and",
    "the",
    "researchers",
    "discuss",
    "intelligence",
    "learning",
    "systems",
    "memory",
    "attention",
    "and",
    "the",
    "future",
    "of",
    "science",
];

/// CPython's `random.Random` (MT19937 with `init_by_array` seeding).
pub struct PyRandom {
    mt: [u32; 624],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)` for a seed below 2**32.
    pub fn new(seed: u32) -> Self {
        let mut r = Self {
            mt: [0; 624],
            index: 624,
        };
        r.init_genrand(19_650_218);
        let key = [seed];
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624 {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                r.mt[0] = r.mt[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                r.mt[0] = r.mt[623];
                i = 1;
            }
        }
        r.mt[0] = 0x8000_0000;
        r.index = 624;
        r
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..624 {
            self.mt[i] = 1_812_433_253u32
                .wrapping_mul(self.mt[i - 1] ^ (self.mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for i in 0..624 {
                let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.mt[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[i] = v;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `_randbelow(n)` by rejection sampling on `getrandbits(n.bit_length())`.
    pub fn randbelow(&mut self, n: u64) -> u64 {
        assert!(n > 0 && n <= u32::MAX as u64, "randbelow range");
        let k = 64 - n.leading_zeros();
        loop {
            let r = (self.next_u32() >> (32 - k)) as u64;
            if r < n {
                return r;
            }
        }
    }

    /// `randint(a, b)`, both ends included.
    pub fn randint(&mut self, a: i64, b: i64) -> i64 {
        a + self.randbelow((b - a + 1) as u64) as i64
    }

    /// `choice(seq)`.
    pub fn choice<'a>(&mut self, seq: &[&'a str]) -> &'a str {
        seq[self.randbelow(seq.len() as u64) as usize]
    }
}

/// `int(sha256(id).hexdigest()[:8], 16)`.
fn seed_of(id: &str) -> u32 {
    let digest = Sha256::digest(id.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

fn char_prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn niah_context(rng: &mut PyRandom, needle: Option<&str>, num_lines: usize) -> String {
    let mut lines: Vec<String> = (0..num_lines)
        .map(|_| {
            let n = rng.randint(4, 8);
            (0..n)
                .map(|_| rng.choice(NIAH_VOCAB))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    if let Some(needle) = needle.filter(|n| !n.is_empty()) {
        let i = rng.randbelow(num_lines as u64) as usize;
        let mut words: Vec<String> = lines[i].split_whitespace().map(str::to_string).collect();
        let w = rng.randbelow(words.len() as u64) as usize;
        words[w] = needle.to_string();
        lines[i] = words.join(" ");
    }
    lines.join("\n")
}

fn fastrlm_context(rng: &mut PyRandom, rec: &Trajectory) -> String {
    let first = rec.cells.first();
    let out = match first {
        Some(c) if c.harness => c.recorded_output.clone().unwrap_or_default(),
        _ => String::new(),
    };
    let size = rec.context_chars.filter(|&s| s > 0).unwrap_or(5000) as usize;
    const FIRST: &str = "First 500 characters of str(context):  ";
    const LAST: &str = "Last 500 characters of str(context):  ";
    let (mut head, tail) = if let Some((_, rest)) = out.split_once(FIRST) {
        let head = rest
            .split("\n---\nLast 500 characters")
            .next()
            .unwrap_or("")
            .to_string();
        let tail = if out.contains("Last 500 characters") {
            out.split_once(LAST)
                .map(|(_, t)| t.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        (head, tail)
    } else if let Some((_, rest)) = out.split_once("Context:  ") {
        return rest.to_string();
    } else {
        (String::new(), String::new())
    };
    let key = char_prefix(&head, 80).to_string();
    if char_len(&key) >= 40 {
        for c in rec.cells.iter().skip(1) {
            let out2 = c.recorded_output.as_deref().unwrap_or("");
            if let Some(pos) = out2.find(&key)
                && char_len(&out2[pos..]) > char_len(&head)
            {
                head = out2[pos..].to_string();
                if head.ends_with("...") || head.contains("\n... (truncated)") {
                    head = head
                        .split("\n... (truncated)")
                        .next()
                        .unwrap_or("")
                        .to_string();
                }
            }
        }
    }
    const SEP: &str = "\nid,guest,title,text\n";
    if head.contains(SEP) {
        let pre = format!("{}{SEP}", head.split(SEP).next().unwrap_or(""));
        let first_row = head
            .split_once(SEP)
            .map(|(_, r)| r)
            .unwrap_or("")
            .split('\n')
            .next()
            .unwrap_or("");
        let m = match_csv_head(first_row);
        let block = (0..20000)
            .map(|_| rng.choice(PROSE))
            .collect::<Vec<_>>()
            .join(" ");
        let n_rows = 321i64;
        let per =
            (((size as i64) - char_len(&pre) as i64).div_euclid(n_rows) - 40).max(200) as usize;
        let repeated = block.repeat(per / block.len() + 1);
        let text = repeated[..per].replace('"', "'");
        let mut rows = Vec::with_capacity(321);
        for k in 1..=n_rows {
            let (guest, title) = match (&m, k) {
                (Some((g, t)), 1) => (g.to_string(), t.to_string()),
                _ => (format!("Guest {k}"), format!("Title {k}")),
            };
            rows.push(format!("{k},{guest},{title},\"{text}\""));
        }
        return pre + &rows.join("\n");
    }
    let mut body_lines: Vec<String> = head
        .split('\n')
        .skip(2)
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    if body_lines.is_empty() {
        body_lines.push(
            (0..12)
                .map(|_| rng.choice(PROSE))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    let mut parts = head.clone();
    let mut total = char_len(&head) + char_len(&tail);
    let mut k = 0usize;
    while total < size {
        let mut l = body_lines[k % body_lines.len()].clone();
        if l.chars().next().is_some_and(|c| c.is_ascii_digit())
            && let Some(comma) = l.find(',')
        {
            l = format!("{}{}", k + 2, &l[comma..]);
        }
        let n = rng.randint(0, 12);
        let words = (0..n)
            .map(|_| rng.choice(PROSE))
            .collect::<Vec<_>>()
            .join(" ");
        l = format!("{l} {words}");
        if l.matches('"').count() % 2 == 1 {
            l.push('"');
        }
        parts.push('\n');
        parts.push_str(&l);
        total += char_len(&l) + 1;
        k += 1;
    }
    let keep = size.saturating_sub(char_len(&tail));
    format!("{}{tail}", char_prefix(&parts, keep))
}

/// `re.match(r'(\d+),([^,]*),([^,]*),"', row)` → groups 2 and 3.
fn match_csv_head(row: &str) -> Option<(String, String)> {
    let digits = row.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = row[digits..].strip_prefix(',')?;
    let (g2, rest) = rest.split_once(',')?;
    let (g3, rest) = rest.split_once(',')?;
    rest.starts_with('"')
        .then(|| (g2.to_string(), g3.to_string()))
}

/// One recorded trajectory: the cells a model wrote in one run.
#[derive(Debug, Clone, Deserialize)]
pub struct Trajectory {
    /// Trajectory id.
    pub id: String,
    /// Harness family: `verifiers`, `fastrlm`, `rlm_repo` (or `dspy`, unsupported here).
    pub family: String,
    /// Name of the context variable.
    #[serde(default)]
    pub context_var: Option<String>,
    /// `str` or `none`.
    #[serde(default)]
    pub context_kind: Option<String>,
    /// Recorded context size.
    #[serde(default)]
    pub context_chars: Option<u64>,
    /// Sub-agent depth (fast-rlm).
    #[serde(default)]
    pub depth: Option<u64>,
    /// Generation hints (needle, seed variables, ...).
    #[serde(default)]
    pub hints: Option<Value>,
    /// The cells in order.
    pub cells: Vec<RecordedCell>,
}

/// One recorded cell.
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedCell {
    /// Python source.
    pub code: String,
    /// What the original harness printed.
    #[serde(default)]
    pub recorded_output: Option<String>,
    /// True for the harness's own bootstrap cell.
    #[serde(default)]
    pub harness: bool,
    /// Variables the harness set before this cell.
    #[serde(default)]
    pub pre_vars: Option<serde_json::Map<String, Value>>,
}

/// What CPython did with a cell.
#[derive(Debug, Clone, Deserialize)]
pub struct ReferenceCell {
    /// Trajectory id.
    pub id: String,
    /// Cell index.
    pub cell: usize,
    /// `ok`, `final`, `error` or `skipped`.
    pub status: String,
    /// Exception type on error.
    #[serde(default)]
    pub exc_type: Option<String>,
    /// First 2,000 characters of stdout.
    #[serde(default)]
    pub stdout: String,
    /// Harness bootstrap cell.
    #[serde(default)]
    pub harness: bool,
}

/// The outcome of one cell in the sandbox, next to CPython's.
#[derive(Debug, Clone)]
pub struct CellOutcome {
    /// Trajectory id.
    pub id: String,
    /// Cell index.
    pub cell: usize,
    /// Harness bootstrap cell.
    pub harness: bool,
    /// CPython's status.
    pub cpython_status: String,
    /// CPython's exception type.
    pub cpython_exc: Option<String>,
    /// Whether the sandbox ran the cell without an exception.
    pub ran: bool,
    /// Whether the sandbox's stdout (first 2,000 chars) equals CPython's.
    pub same_stdout: bool,
    /// The sandbox's error as `Type: message` (or the interpreter error).
    pub error: Option<String>,
    /// The sandbox's stdout (first 2,000 characters).
    pub stdout: String,
    /// CPython's stdout.
    pub cpython_stdout: String,
    /// Wall time of the cell in the sandbox.
    pub elapsed: Duration,
}

impl CellOutcome {
    /// CPython ran it; the target counts these.
    pub fn cpython_ran(&self) -> bool {
        self.cpython_status == "ok" || self.cpython_status == "final"
    }

    /// Ran in the sandbox with the same stdout.
    pub fn passed(&self) -> bool {
        self.ran && self.same_stdout
    }
}

/// Results of a whole replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayReport {
    /// Every replayed cell.
    pub cells: Vec<CellOutcome>,
}

impl ReplayReport {
    /// Cells CPython ran (model cells only) and how many of those pass here.
    pub fn pass_counts(&self) -> (usize, usize) {
        let counted: Vec<_> = self
            .cells
            .iter()
            .filter(|c| !c.harness && c.cpython_ran())
            .collect();
        (counted.iter().filter(|c| c.passed()).count(), counted.len())
    }

    /// Fraction of model cells CPython runs that also run here with the same stdout.
    pub fn pass_rate(&self) -> f64 {
        let (pass, total) = self.pass_counts();
        if total == 0 {
            0.0
        } else {
            pass as f64 / total as f64
        }
    }

    /// Failure causes of cells CPython ran, most frequent first.
    pub fn failure_causes(&self) -> Vec<(String, usize)> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for c in self
            .cells
            .iter()
            .filter(|c| !c.harness && c.cpython_ran() && !c.passed())
        {
            let cause = match &c.error {
                Some(e) => cause_key(e),
                None => "stdout differs from CPython".to_string(),
            };
            *counts.entry(cause).or_default() += 1;
        }
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Human-readable summary: rate, per-family counts, top causes.
    pub fn summary(&self) -> String {
        let (pass, total) = self.pass_counts();
        let mut s = format!(
            "replay: {pass}/{total} model cells that CPython runs also run here with the same stdout ({:.1}%)\n",
            100.0 * self.pass_rate()
        );
        let cp_err: Vec<_> = self
            .cells
            .iter()
            .filter(|c| !c.harness && c.cpython_status == "error")
            .collect();
        let both = cp_err.iter().filter(|c| !c.ran).count();
        let same_type = cp_err
            .iter()
            .filter(|c| match (&c.error, &c.cpython_exc) {
                (Some(e), Some(t)) => e.starts_with(&format!("{t}:")),
                _ => false,
            })
            .count();
        s.push_str(&format!(
            "cells CPython fails on: {} (the sandbox fails on {both} of them too, {same_type} with the same exception type)\n",
            cp_err.len(),
        ));
        let harness: Vec<_> = self
            .cells
            .iter()
            .filter(|c| c.harness && c.cpython_ran())
            .collect();
        s.push_str(&format!(
            "harness bootstrap cells: {}/{} pass\n",
            harness.iter().filter(|c| c.passed()).count(),
            harness.len()
        ));
        if let Some(slowest) = self.cells.iter().max_by_key(|c| c.elapsed) {
            s.push_str(&format!(
                "slowest cell: {:.0} ms ({} cell {})\n",
                slowest.elapsed.as_secs_f64() * 1e3,
                slowest.id,
                slowest.cell
            ));
        }
        let causes = self.failure_causes();
        if !causes.is_empty() {
            s.push_str("top failure causes:\n");
            for (cause, n) in causes.iter().take(15) {
                s.push_str(&format!("  {n:3}  {cause}\n"));
            }
        }
        s
    }
}

/// Groups similar messages: drops quoted names and numbers after the first words.
fn cause_key(error: &str) -> String {
    let one_line = error.lines().next().unwrap_or("");
    let cut = one_line.find(" (sandbox:").unwrap_or(one_line.len());
    char_prefix(&one_line[..cut], 110).to_string()
}

/// State shared by the stub host functions of one trajectory.
struct Stubs {
    family: String,
    depth: u64,
    short_guard: bool,
    final_value: Mutex<Option<Value>>,
}

impl HostHandler for Stubs {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        match (self.family.as_str(), call.name.as_str()) {
            ("fastrlm", "llm_query") => {
                if self.depth >= 3 {
                    return Err(HostError::runtime(
                        "MAXIMUM DEPTH REACHED. You must solve this task on your own without calling llm_query.",
                    ));
                }
                let arg = call
                    .args
                    .first()
                    .or_else(|| call.kwargs.get("context"))
                    .cloned();
                if self.short_guard
                    && let Some(Value::String(s)) = &arg
                    && char_len(s) < 1000
                {
                    return Err(HostError::runtime(format!(
                        "Context too short ({} chars). Ensure you have attached the context to llm_query().",
                        char_len(s)
                    )));
                }
                Ok(json!(STUB))
            }
            ("fastrlm", "batch_llm_query") | (_, "llm_query_batched") => {
                let n = call
                    .args
                    .first()
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                Ok(Value::Array(vec![json!(STUB); n]))
            }
            (_, "llm_query") => Ok(json!(STUB)),
            (_, "FINAL") | (_, "FINAL_VAR") => {
                let v = call.args.first().cloned().unwrap_or(Value::Null);
                *self.final_value.lock().unwrap_or_else(|e| e.into_inner()) = Some(v.clone());
                Ok(if self.family == "rlm_repo" {
                    v
                } else {
                    Value::Null
                })
            }
            _ => Err(HostError::Raise {
                exc_type: "NameError".into(),
                message: format!("name '{}' is not defined", call.name),
            }),
        }
    }
}

/// Why a replay could not run: its data files are not what it reads.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A line of the CPython results is not a reference cell.
    #[error("reference line {line}: {error}")]
    BadReference {
        /// 1-based line number.
        line: usize,
        /// Why it does not parse.
        error: serde_json::Error,
    },
    /// A line of the trajectories is not a trajectory.
    #[error("trajectory line {line}: {error}")]
    BadTrajectory {
        /// 1-based line number.
        line: usize,
        /// Why it does not parse.
        error: serde_json::Error,
    },
    /// A trajectory of a harness family the replay does not reproduce.
    #[error("family {0} is not replayed")]
    UnknownFamily(String),
}

/// Builds the interpreter spec of a trajectory the way the CPython reference run did.
fn spec_for(rec: &Trajectory) -> Result<(InterpreterSpec, Stubs, Vec<String>), ReplayError> {
    let mut rng = PyRandom::new(seed_of(&rec.id));
    let hints = rec.hints.clone().unwrap_or(Value::Null);
    let mut spec = InterpreterSpec::new();
    let context: Option<InputValue>;
    let mut depth = 0;
    let mut short_guard = false;
    let mut setup = Vec::new();
    match rec.family.as_str() {
        "verifiers" => {
            context = if rec.context_kind.as_deref() == Some("none") {
                None
            } else {
                let needle = hints.get("needle").and_then(Value::as_str);
                let lines = hints
                    .get("num_lines")
                    .and_then(Value::as_u64)
                    .unwrap_or(1000) as usize;
                Some(InputValue::Text(niah_context(&mut rng, needle, lines)))
            };
            spec = spec.input(
                "answer",
                InputValue::Json(json!({"content": "", "ready": false})),
            );
        }
        "fastrlm" => {
            context = Some(if rec.context_kind.as_deref() == Some("str") {
                InputValue::Text(fastrlm_context(&mut rng, rec))
            } else {
                InputValue::Json(json!({}))
            });
            depth = rec.depth.unwrap_or(0);
            // fast-rlm's "context too short" guard existed until 2026-02-16.
            short_guard = log_date(&rec.id).is_some_and(|date| date <= "2026-02-16");
            spec = spec
                .function("llm_query", HostFunctionKind::Async)
                .function("batch_llm_query", HostFunctionKind::Async)
                .function("FINAL", HostFunctionKind::Sync)
                .function("FINAL_VAR", HostFunctionKind::Sync);
        }
        "rlm_repo" => {
            context = Some(InputValue::Text(
                hints
                    .get("context_text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            ));
            // Seeded with a setup cell: 2**99 does not fit a JSON number.
            if let Some(Value::Object(seeds)) = hints.get("seed_vars") {
                for (k, v) in seeds {
                    match v.as_str() {
                        Some("list_powers_of_two_100") => {
                            setup.push(format!("{k} = [2 ** i for i in range(100)]"))
                        }
                        Some("newline_joined_powers_of_two_100") => {
                            setup.push(format!("{k} = '\\n'.join(str(2 ** i) for i in range(100))"))
                        }
                        _ => {}
                    }
                }
            }
            spec = spec
                .function("llm_query", HostFunctionKind::Sync)
                .function("llm_query_batched", HostFunctionKind::Sync)
                .function("FINAL_VAR", HostFunctionKind::Sync);
        }
        other => return Err(ReplayError::UnknownFamily(other.to_string())),
    }
    if let Some(var) = rec.context_var.as_deref().filter(|v| !v.is_empty()) {
        spec = spec.input(
            var.to_string(),
            context.unwrap_or(InputValue::Json(Value::Null)),
        );
    }
    let stubs = Stubs {
        family: rec.family.clone(),
        depth,
        short_guard,
        final_value: Mutex::new(None),
    };
    Ok((spec, stubs, setup))
}

/// The `yyyy-mm-dd` of `_yyyy-mm-ddT` in a fast-rlm log id.
fn log_date(id: &str) -> Option<&str> {
    let b = id.as_bytes();
    (0..b.len().saturating_sub(11)).find_map(|i| {
        let ok = b[i] == b'_'
            && b[i + 1..i + 5].iter().all(u8::is_ascii_digit)
            && b[i + 5] == b'-'
            && b[i + 6..i + 8].iter().all(u8::is_ascii_digit)
            && b[i + 8] == b'-'
            && b[i + 9..i + 11].iter().all(u8::is_ascii_digit)
            && b[i + 11] == b'T';
        ok.then(|| &id[i + 1..i + 11])
    })
}

/// Families whose harness echoes the last expression as `Out[n]: repr`.
fn echoes(family: &str) -> bool {
    matches!(family, "dspy" | "verifiers")
}

/// Replays every trajectory (JSONL text) and pairs each cell with CPython's result.
pub async fn run_replay(
    config: &SandboxConfig,
    trajectories_jsonl: &str,
    reference_jsonl: &str,
) -> Result<ReplayReport, ReplayError> {
    let mut reference: HashMap<(String, usize), ReferenceCell> = HashMap::new();
    for (n, line) in reference_jsonl
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: ReferenceCell = serde_json::from_str(line)
            .map_err(|error| ReplayError::BadReference { line: n + 1, error })?;
        reference.insert((r.id.clone(), r.cell), r);
    }
    let mut report = ReplayReport::default();
    for (n, line) in trajectories_jsonl
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let rec: Trajectory = serde_json::from_str(line)
            .map_err(|error| ReplayError::BadTrajectory { line: n + 1, error })?;
        replay_one(config, &rec, &reference, &mut report).await;
    }
    Ok(report)
}

async fn replay_one(
    config: &SandboxConfig,
    rec: &Trajectory,
    reference: &HashMap<(String, usize), ReferenceCell>,
    report: &mut ReplayReport,
) {
    let outcome = |i: usize, ran: bool, stdout: String, error: Option<String>, elapsed| {
        let r = reference.get(&(rec.id.clone(), i));
        let cpython_stdout = r.map(|r| r.stdout.clone()).unwrap_or_default();
        CellOutcome {
            id: rec.id.clone(),
            cell: i,
            harness: r.is_some_and(|r| r.harness),
            cpython_status: r.map_or("missing".into(), |r| r.status.clone()),
            cpython_exc: r.and_then(|r| r.exc_type.clone()),
            ran,
            same_stdout: stdout == cpython_stdout,
            error,
            stdout,
            cpython_stdout,
            elapsed,
        }
    };
    let (spec, stubs, setup) = match spec_for(rec) {
        Ok(x) => x,
        Err(e) => {
            for i in 0..rec.cells.len() {
                report.cells.push(outcome(
                    i,
                    false,
                    String::new(),
                    Some(e.to_string()),
                    Duration::ZERO,
                ));
            }
            return;
        }
    };
    let stubs = Arc::new(stubs);
    let mut interp = match Interpreter::start(config, &spec).await {
        Ok(s) => s,
        Err(e) => {
            for i in 0..rec.cells.len() {
                report.cells.push(outcome(
                    i,
                    false,
                    String::new(),
                    Some(e.to_string()),
                    Duration::ZERO,
                ));
            }
            return;
        }
    };
    let mut dead: Option<SandboxError> = None;
    for code in &setup {
        if let Err(e) = interp.run_cell(code, &stubs).await {
            dead = Some(e);
        }
    }
    for (i, cell) in rec.cells.iter().enumerate() {
        if let Some(e) = &dead {
            report.cells.push(outcome(
                i,
                false,
                String::new(),
                Some(e.to_string()),
                Duration::ZERO,
            ));
            continue;
        }
        if let Some(vars) = &cell.pre_vars {
            for (k, v) in vars {
                if let Err(e) = interp.set_var(k, v.clone()).await {
                    dead = Some(e);
                }
            }
        }
        match interp.run_cell(&cell.code, &stubs).await {
            Ok(r) => {
                let mut stdout = r.stdout.clone();
                if echoes(&rec.family)
                    && r.error.is_none()
                    && r.ended_by_host.is_none()
                    && let Some(v) = &r.value
                {
                    stdout.push_str(&format!("Out[{}]: {v}\n", i + 1));
                }
                let stdout = char_prefix(&stdout, MAX_OUT).to_string();
                let error = r
                    .error
                    .as_ref()
                    .map(|e| format!("{}: {}", e.exc_type, e.message));
                report
                    .cells
                    .push(outcome(i, error.is_none(), stdout, error, r.elapsed));
            }
            Err(e) => {
                report.cells.push(outcome(
                    i,
                    false,
                    String::new(),
                    Some(e.to_string()),
                    Duration::ZERO,
                ));
                dead = Some(e);
            }
        }
    }
    interp.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mersenne_twister_matches_cpython() {
        // python3 -c "import random; r=random.Random(12345); print([r.randint(0, 99) for _ in range(5)], r.choice('abcdefghij'))"
        let mut r = PyRandom::new(12345);
        let v: Vec<i64> = (0..5).map(|_| r.randint(0, 99)).collect();
        assert_eq!(v, vec![53, 93, 1, 38, 47]);
        let letters: Vec<&str> = "abcdefghij".split("").filter(|s| !s.is_empty()).collect();
        assert_eq!(r.choice(&letters), "d");
    }

    #[test]
    fn csv_head_match() {
        assert_eq!(
            match_csv_head("1,Guest,Title,\"text"),
            Some(("Guest".into(), "Title".into()))
        );
        assert_eq!(match_csv_head("x,Guest,Title,\"text"), None);
    }
}
