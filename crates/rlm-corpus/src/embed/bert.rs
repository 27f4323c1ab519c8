//! The BERT encoder both local models run: embeddings (word + position +
//! token type, layer norm), N post-norm encoder layers, then mean pooling over
//! the tokens and L2 normalization, as sentence-transformers computes it.
//!
//! Written out here (a few hundred lines over `sgemm`) instead of pulling a
//! tensor framework: one fixed architecture needs only matrix products,
//! softmax, GELU and layer norm. Each model supplies its [`BertShape`] and its
//! tensors under Hugging Face's names, whatever file they were read from.

use std::collections::HashMap;

use super::normalize;

/// The sizes of one BERT model; a file of another shape is refused, since a
/// different BERT would silently give meaningless vectors.
#[derive(Debug, Clone, Copy)]
pub(super) struct BertShape {
    /// The model's name, for error messages.
    pub name: &'static str,
    /// Encoder layers.
    pub layers: usize,
    /// Width of every token vector (and of the sentence embedding).
    pub hidden: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate: usize,
    /// Rows of the position-embedding table: the longest input in tokens.
    pub max_positions: usize,
    /// Epsilon of every layer norm.
    pub layer_norm_eps: f32,
}

/// A row-major matrix `[rows, cols]` (a vector when `rows == 1`).
pub(super) struct Tensor {
    /// `rows * cols` values.
    pub data: Vec<f32>,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
}

/// The word-embedding table: plain `f32` rows, or 4-bit rows (Q4_0) turned
/// into `f32` one token at a time. A 250k-token multilingual vocabulary would
/// take 384 MB as `f32`, while each text reads only its few hundred rows.
pub(super) enum WordEmbeddings {
    /// `[vocab, hidden]` in `f32`.
    Dense(Tensor),
    /// Q4_0 rows: per 32 values a little-endian `f16` scale and 16 bytes whose
    /// low nibbles are values 0..16 and high nibbles values 16..32, each
    /// `(nibble - 8) * scale`.
    Q4 {
        /// `rows * cols / 32` blocks of 18 bytes.
        blocks: Vec<u8>,
        /// Vocabulary size.
        rows: usize,
        /// Width of a row (a multiple of 32).
        cols: usize,
    },
}

/// Bytes of one Q4_0 block (32 values).
pub(super) const Q4_BLOCK_BYTES: usize = 18;
/// Values per Q4_0 block.
pub(super) const Q4_BLOCK_VALUES: usize = 32;

impl WordEmbeddings {
    fn rows(&self) -> usize {
        match self {
            WordEmbeddings::Dense(t) => t.rows,
            WordEmbeddings::Q4 { rows, .. } => *rows,
        }
    }

    fn cols(&self) -> usize {
        match self {
            WordEmbeddings::Dense(t) => t.cols,
            WordEmbeddings::Q4 { cols, .. } => *cols,
        }
    }

    /// Adds row `id` to `out` (`cols` long).
    fn add_row(&self, id: usize, out: &mut [f32]) {
        match self {
            WordEmbeddings::Dense(t) => {
                let row = &t.data[id * t.cols..(id + 1) * t.cols];
                out.iter_mut().zip(row).for_each(|(o, w)| *o += w);
            }
            WordEmbeddings::Q4 { blocks, cols, .. } => {
                let per_row = cols / Q4_BLOCK_VALUES * Q4_BLOCK_BYTES;
                let row = &blocks[id * per_row..(id + 1) * per_row];
                for (block, o) in row
                    .chunks_exact(Q4_BLOCK_BYTES)
                    .zip(out.chunks_exact_mut(Q4_BLOCK_VALUES))
                {
                    dequantize_q4_block(block, o, true);
                }
            }
        }
    }
}

/// Writes (or, with `add`, adds) the 32 values of one Q4_0 block to `out`.
pub(super) fn dequantize_q4_block(block: &[u8], out: &mut [f32], add: bool) {
    let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
    for (j, &byte) in block[2..Q4_BLOCK_BYTES].iter().enumerate() {
        let lo = ((byte & 0x0F) as i32 - 8) as f32 * scale;
        let hi = ((byte >> 4) as i32 - 8) as f32 * scale;
        if add {
            out[j] += lo;
            out[j + 16] += hi;
        } else {
            out[j] = lo;
            out[j + 16] = hi;
        }
    }
}

/// IEEE half precision to single (exact: every `f16` is an `f32`).
pub(super) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        // Subnormal: the value is man · 2⁻²⁴, exact in f32.
        (0, _) => {
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (31, _) => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// `y = x · Wᵀ + b`.
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

/// A loaded BERT encoder that turns token ids into a sentence embedding.
pub(super) struct BertEncoder {
    shape: BertShape,
    word_embeddings: WordEmbeddings,
    position_embeddings: Tensor,
    token_type_embedding: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
}

/// Takes the tensor `name` (or `bert.name`, as some exports prefix it) of
/// `rows * cols` values out of `tensors`; the error says what is missing or
/// how the sizes differ.
pub(super) fn take_tensor(
    tensors: &mut HashMap<String, Tensor>,
    shape: &BertShape,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Tensor, String> {
    let key = [name.to_string(), format!("bert.{name}")]
        .into_iter()
        .find(|k| tensors.contains_key(k))
        .ok_or_else(|| format!("the model file has no tensor {name}"))?;
    let Some(t) = tensors.remove(&key) else {
        return Err(format!("the model file has no tensor {name}"));
    };
    if t.rows * t.cols != rows * cols {
        return Err(format!(
            "tensor {name} has {} values, {} has {}",
            t.rows * t.cols,
            shape.name,
            rows * cols
        ));
    }
    Ok(Tensor {
        data: t.data,
        rows,
        cols,
    })
}

impl BertEncoder {
    /// Builds the encoder from `tensors` named as Hugging Face names BERT's
    /// (`embeddings.…`, `encoder.layer.N.…`), checking every size against
    /// `shape`; `word_embeddings` is the table already read.
    pub fn from_tensors(
        shape: BertShape,
        word_embeddings: WordEmbeddings,
        tensors: &mut HashMap<String, Tensor>,
    ) -> Result<BertEncoder, String> {
        let h = shape.hidden;
        if word_embeddings.cols() != h || word_embeddings.rows() == 0 {
            return Err(format!(
                "word embeddings are {} wide, {}'s are {h}",
                word_embeddings.cols(),
                shape.name
            ));
        }
        let mut take =
            |name: &str, rows: usize, cols: usize| take_tensor(tensors, &shape, name, rows, cols);
        let position_embeddings = take(
            "embeddings.position_embeddings.weight",
            shape.max_positions,
            h,
        )?;
        let types = take("embeddings.token_type_embeddings.weight", 2, h)?;
        let token_type_embedding = types.data[..h].to_vec();
        let embedding_norm = layer_norm_of(&mut take, "embeddings.LayerNorm", h)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let p = format!("encoder.layer.{l}");
            let ff = shape.intermediate;
            let mut lin = |name: &str, out: usize, inp: usize| {
                linear_of(&mut take, &format!("{p}.{name}"), out, inp)
            };
            let query = lin("attention.self.query", h, h)?;
            let key = lin("attention.self.key", h, h)?;
            let value = lin("attention.self.value", h, h)?;
            let attention_out = lin("attention.output.dense", h, h)?;
            let intermediate = lin("intermediate.dense", ff, h)?;
            let output = lin("output.dense", h, ff)?;
            let attention_norm =
                layer_norm_of(&mut take, &format!("{p}.attention.output.LayerNorm"), h)?;
            let output_norm = layer_norm_of(&mut take, &format!("{p}.output.LayerNorm"), h)?;
            layers.push(Layer {
                query,
                key,
                value,
                attention_out,
                attention_norm,
                intermediate,
                output,
                output_norm,
            });
        }
        Ok(BertEncoder {
            shape,
            word_embeddings,
            position_embeddings,
            token_type_embedding,
            embedding_norm,
            layers,
        })
    }

    /// The normalized mean of the last layer over `ids` (at most
    /// `max_positions` of them; the tokenizers cut longer texts before).
    /// Ids past the vocabulary read its last row rather than failing.
    pub fn embed_ids(&self, ids: &[u32]) -> Vec<f32> {
        let h = self.shape.hidden;
        let ids = &ids[..ids.len().min(self.shape.max_positions)];
        let n = ids.len();
        if n == 0 {
            return vec![0.0; h];
        }
        let vocab = self.word_embeddings.rows();
        let mut x = vec![0.0f32; n * h];
        for (t, &id) in ids.iter().enumerate() {
            let row = &mut x[t * h..(t + 1) * h];
            let pos = &self.position_embeddings.data[t * h..(t + 1) * h];
            for ((r, p), ty) in row.iter_mut().zip(pos).zip(&self.token_type_embedding) {
                *r = p + ty;
            }
            self.word_embeddings
                .add_row((id as usize).min(vocab - 1), row);
        }
        layer_norm(&mut x, &self.embedding_norm, &self.shape);
        let mut scratch = Scratch::new(n, &self.shape);
        for layer in &self.layers {
            layer.forward(&mut x, n, &self.shape, &mut scratch);
        }
        let mut pooled = vec![0.0f32; h];
        for row in x.chunks_exact(h) {
            pooled.iter_mut().zip(row).for_each(|(p, v)| *p += v);
        }
        pooled.iter_mut().for_each(|p| *p /= n as f32);
        normalize(&mut pooled);
        pooled
    }
}

fn linear_of(
    take: &mut impl FnMut(&str, usize, usize) -> Result<Tensor, String>,
    name: &str,
    out: usize,
    inp: usize,
) -> Result<Linear, String> {
    Ok(Linear {
        weight: take(&format!("{name}.weight"), out, inp)?,
        bias: take(&format!("{name}.bias"), 1, out)?.data,
    })
}

fn layer_norm_of(
    take: &mut impl FnMut(&str, usize, usize) -> Result<Tensor, String>,
    name: &str,
    width: usize,
) -> Result<LayerNorm, String> {
    Ok(LayerNorm {
        gamma: take(&format!("{name}.weight"), 1, width)?.data,
        beta: take(&format!("{name}.bias"), 1, width)?.data,
    })
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
    fn new(n: usize, shape: &BertShape) -> Scratch {
        let nh = n * shape.hidden;
        Scratch {
            q: vec![0.0; nh],
            k: vec![0.0; nh],
            v: vec![0.0; nh],
            context: vec![0.0; nh],
            scores: vec![0.0; n * n],
            projected: vec![0.0; nh],
            intermediate: vec![0.0; n * shape.intermediate],
        }
    }
}

impl Layer {
    /// One encoder layer over `x` (`[n, hidden]`), in place.
    fn forward(&self, x: &mut [f32], n: usize, shape: &BertShape, s: &mut Scratch) {
        let hidden = shape.hidden;
        let head_dim = hidden / shape.heads;
        self.query.apply(x, n, &mut s.q);
        self.key.apply(x, n, &mut s.k);
        self.value.apply(x, n, &mut s.v);
        let scale = 1.0 / (head_dim as f32).sqrt();
        for h in 0..shape.heads {
            let off = h * head_dim;
            // SAFETY: q, k and v are `[n, hidden]` and scores `[n, n]`; head
            // h's columns `off..off + head_dim` lie inside every row, and the
            // strides below never leave those buffers.
            unsafe {
                // scores = q_h · k_hᵀ, both read in place through strides.
                matrixmultiply::sgemm(
                    n,
                    head_dim,
                    n,
                    scale,
                    s.q.as_ptr().add(off),
                    hidden as isize,
                    1,
                    s.k.as_ptr().add(off),
                    1,
                    hidden as isize,
                    0.0,
                    s.scores.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            for row in s.scores.chunks_exact_mut(n) {
                softmax(row);
            }
            // SAFETY: as above; context is `[n, hidden]`.
            unsafe {
                // context_h = scores · v_h, written into its slice of the context.
                matrixmultiply::sgemm(
                    n,
                    n,
                    head_dim,
                    1.0,
                    s.scores.as_ptr(),
                    n as isize,
                    1,
                    s.v.as_ptr().add(off),
                    hidden as isize,
                    1,
                    0.0,
                    s.context.as_mut_ptr().add(off),
                    hidden as isize,
                    1,
                );
            }
        }
        self.attention_out.apply(&s.context, n, &mut s.projected);
        add_into(x, &s.projected);
        layer_norm(x, &self.attention_norm, shape);
        self.intermediate.apply(x, n, &mut s.intermediate);
        s.intermediate.iter_mut().for_each(|v| *v = gelu(*v));
        self.output.apply(&s.intermediate, n, &mut s.projected);
        add_into(x, &s.projected);
        layer_norm(x, &self.output_norm, shape);
    }
}

impl Linear {
    /// `out = input · Wᵀ + b` for `n` rows.
    fn apply(&self, input: &[f32], n: usize, out: &mut [f32]) {
        let (outs, ins) = (self.weight.rows, self.weight.cols);
        assert!(input.len() == n * ins && out.len() == n * outs);
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

fn layer_norm(x: &mut [f32], norm: &LayerNorm, shape: &BertShape) {
    let width = shape.hidden as f32;
    for row in x.chunks_exact_mut(shape.hidden) {
        let mean = row.iter().sum::<f32>() / width;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width;
        let inv = 1.0 / (var + shape.layer_norm_eps).sqrt();
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
    fn half_floats_convert_exactly() {
        for (bits, want) in [
            (0x3C00u16, 1.0f32),
            (0xC000, -2.0),
            (0x3555, 0.333_251_95),
            (0x0001, 5.960_464_5e-8),
            (0x8000, -0.0),
            (0x7BFF, 65504.0),
        ] {
            assert_eq!(f16_to_f32(bits), want, "{bits:#06x}");
        }
        assert!(f16_to_f32(0x7E00).is_nan());
        assert_eq!(f16_to_f32(0x7C00), f32::INFINITY);
    }

    #[test]
    fn q4_blocks_unpack_low_then_high_nibbles() {
        // Scale 0.5; byte j holds value j (low nibble) and value j + 16 (high).
        let mut block = vec![0x00, 0x38];
        block.extend((0..16u8).map(|j| (j & 0x0F) | ((15 - j) << 4)));
        let mut out = [0.0f32; 32];
        dequantize_q4_block(&block, &mut out, false);
        for j in 0..16 {
            assert_eq!(out[j], (j as f32 - 8.0) * 0.5);
            assert_eq!(out[j + 16], (7.0 - j as f32) * 0.5);
        }
        dequantize_q4_block(&block, &mut out, true);
        assert_eq!(out[0], -8.0);
    }
}
