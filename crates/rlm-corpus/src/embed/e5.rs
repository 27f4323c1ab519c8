//! multilingual-e5-small in-process on the CPU: the BERT encoder of `bert.rs`
//! (12 layers, 384 wide, 12 heads, 512 positions) behind XLM-RoBERTa's
//! SentencePiece tokenizer (250k pieces, about 100 languages), mean pooling
//! and L2 normalization, as sentence-transformers computes it.
//!
//! The model was trained with a prefix on every text: `"query: "` for what is
//! searched for and `"passage: "` for what is searched in. [`Embedder::embed`]
//! embeds passages (chunks) and [`Embedder::embed_queries`] queries; mixing
//! them up costs retrieval quality without any error.
//!
//! The weights come as one file, `e5-small-q4.bin` (`scripts/fetch-e5.sh`
//! puts it in a folder): a header, the tokenizer (pieces, scores and the
//! normalizer's per-character map) and a directory of tensors, the large
//! matrices in 4-bit blocks (Q4_0: an `f16` scale per 32 values). The layer
//! matrices are expanded to `f32` at load (85 MB) so that the forward pass is
//! plain `sgemm`; the 250k-row word table stays 4-bit and is expanded per
//! token.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::bert::{
    BertEncoder, BertShape, Q4_BLOCK_BYTES, Q4_BLOCK_VALUES, Tensor, WordEmbeddings,
    dequantize_q4_block,
};
use super::sentencepiece::{SentencePieceTokenizer, UnigramVocab};
use super::{EmbedError, Embedder};

/// The id recorded in a store for vectors of this model.
pub const E5_MODEL_ID: &str = "local:multilingual-e5-small";
/// Vector length.
pub const E5_DIMENSION: usize = 384;
/// The model's limit in tokens, `<s>` and `</s>` included: longer texts are cut.
pub const E5_MAX_TOKENS: usize = 512;
/// The model file inside the model folder.
pub const E5_MODEL_FILE: &str = "e5-small-q4.bin";
/// What queries start with.
pub const E5_QUERY_PREFIX: &str = "query: ";
/// What passages (chunks) start with.
pub const E5_PASSAGE_PREFIX: &str = "passage: ";

const SHAPE: BertShape = BertShape {
    name: "multilingual-e5-small",
    layers: 12,
    hidden: E5_DIMENSION,
    heads: 12,
    intermediate: 1536,
    max_positions: E5_MAX_TOKENS,
    layer_norm_eps: 1e-12,
};
/// Tensor kinds of the file's directory.
const DTYPE_F32: u8 = 0;
const DTYPE_Q4: u8 = 1;

/// multilingual-e5-small loaded from a folder holding `e5-small-q4.bin`.
pub struct E5Embedder {
    tokenizer: SentencePieceTokenizer,
    encoder: BertEncoder,
    dir: PathBuf,
}

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder")
            .field("dir", &self.dir)
            .finish()
    }
}

impl E5Embedder {
    /// Loads the model from `dir`, checking that the file is
    /// multilingual-e5-small's shape.
    pub fn load(dir: &Path) -> Result<E5Embedder, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::E5ModelNotFound(format!(
                "{} is not a folder",
                dir.display()
            )));
        }
        let path = dir.join(E5_MODEL_FILE);
        if !path.is_file() {
            return Err(EmbedError::E5ModelNotFound(format!(
                "{} has no {E5_MODEL_FILE}",
                dir.display()
            )));
        }
        let bad = |detail: String| EmbedError::BadModel {
            path: path.display().to_string(),
            detail,
        };
        let bytes = std::fs::read(&path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let (tokenizer, encoder) = parse(&bytes).map_err(bad)?;
        Ok(E5Embedder {
            tokenizer,
            encoder,
            dir: dir.to_path_buf(),
        })
    }

    /// The folder the model was read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Token ids the model sees for `text` as given, with no prefix added
    /// (for tests against the reference tokenizer).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, E5_MAX_TOKENS)
    }

    /// The tokenizer (for tests and token counts).
    pub fn tokenizer(&self) -> &SentencePieceTokenizer {
        &self.tokenizer
    }

    /// The normalized embedding of `text` as given (the caller adds the
    /// prefix).
    pub fn embed_raw(&self, text: &str) -> Vec<f32> {
        self.encoder.embed_ids(&self.token_ids(text))
    }

    /// The embedding of a search query (`"query: "` + `query`).
    pub fn embed_query(&self, query: &str) -> Vec<f32> {
        self.embed_raw(&format!("{E5_QUERY_PREFIX}{query}"))
    }

    /// The embedding of a passage (`"passage: "` + `passage`).
    pub fn embed_passage(&self, passage: &str) -> Vec<f32> {
        self.embed_raw(&format!("{E5_PASSAGE_PREFIX}{passage}"))
    }
}

impl Embedder for E5Embedder {
    fn model_id(&self) -> &str {
        E5_MODEL_ID
    }

    fn dimension(&self) -> usize {
        E5_DIMENSION
    }

    fn batch_size(&self) -> usize {
        64
    }

    /// Chunks, as passages.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // One sequence per task: no padding, so no wasted work on short texts.
        Ok(texts.par_iter().map(|t| self.embed_passage(t)).collect())
    }

    fn embed_queries(&self, queries: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(queries.par_iter().map(|q| self.embed_query(q)).collect())
    }
}

/// Bounds-checked little-endian reads over the file.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("the file is truncated (in {what})"));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn count(&mut self, what: &str) -> Result<usize, String> {
        // Counts are stored as i32: a negative one is a broken file.
        let v = self.u32(what)? as i32;
        usize::try_from(v).map_err(|_| format!("{what} is negative"))
    }

    fn u64(&mut self, what: &str) -> Result<usize, String> {
        let b = self.take(8, what)?;
        let v = u64::from_le_bytes(b.try_into().map_err(|_| what.to_string())?);
        usize::try_from(v).map_err(|_| format!("{what} is too large"))
    }

    fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>, String> {
        let bytes = self.take(n.checked_mul(4).ok_or(what)?, what)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

/// Reads the whole file: header, tokenizer, tensors.
fn parse(bytes: &[u8]) -> Result<(SentencePieceTokenizer, BertEncoder), String> {
    let mut c = Cursor { bytes, at: 0 };
    if c.take(4, "the header")? != b"E5S1" {
        return Err(
            "it is not a multilingual-e5-small file (run crates/rlm-corpus/scripts/fetch-e5.sh again)"
                .to_string(),
        );
    }
    let version = c.u32("the header")?;
    let mut header = [0usize; 7];
    for h in &mut header {
        *h = c.count("the header")?;
    }
    let [
        hidden,
        layers,
        heads,
        intermediate,
        vocab,
        positions,
        _types,
    ] = header;
    let eps = f32::from_bits(c.u32("the header")?);
    let block = c.count("the header")?;
    let want = [
        ("version", version as usize, 1),
        ("hidden size", hidden, SHAPE.hidden),
        ("layers", layers, SHAPE.layers),
        ("attention heads", heads, SHAPE.heads),
        ("intermediate size", intermediate, SHAPE.intermediate),
        ("positions", positions, SHAPE.max_positions),
        ("block size", block, Q4_BLOCK_VALUES),
    ];
    for (what, got, want) in want {
        if got != want {
            return Err(format!(
                "its {what} is {got}, multilingual-e5-small's is {want}"
            ));
        }
    }
    let shape = BertShape {
        layer_norm_eps: eps,
        ..SHAPE
    };
    let tokenizer = read_tokenizer(&mut c)?;
    if tokenizer.vocab_size() > vocab {
        return Err(format!(
            "its tokenizer has {} pieces for {vocab} word embeddings",
            tokenizer.vocab_size()
        ));
    }
    let (word, mut tensors) = read_tensors(&mut c, bytes, vocab)?;
    let encoder = BertEncoder::from_tensors(shape, word, &mut tensors)?;
    Ok((tokenizer, encoder))
}

/// The pieces with their scores, the special ids and the normalizer's map.
fn read_tokenizer(c: &mut Cursor<'_>) -> Result<SentencePieceTokenizer, String> {
    let what = "the tokenizer";
    let n = c.count(what)?;
    let bos = c.count(what)? as u32;
    let eos = c.count(what)? as u32;
    let pad = c.count(what)? as u32;
    let unk = c.count(what)? as u32;
    let blob_len = c.u64(what)?;
    let offsets: Vec<usize> = (0..=n)
        .map(|_| c.u32(what).map(|o| o as usize))
        .collect::<Result<_, _>>()?;
    let scores = c.f32s(n, what)?;
    let blob = c.take(blob_len, what)?;
    let mut pieces = Vec::with_capacity(n);
    for (i, score) in scores.into_iter().enumerate() {
        let (start, end) = (offsets[i], offsets[i + 1]);
        let raw = blob
            .get(start..end)
            .ok_or_else(|| format!("piece {i} lies outside the tokenizer"))?;
        let piece = std::str::from_utf8(raw).map_err(|_| format!("piece {i} is not UTF-8"))?;
        pieces.push((piece.to_string(), score));
    }
    let entries = c.count(what)?;
    let map_len = c.u32(what)? as usize;
    let mut m = Cursor {
        bytes: c.take(map_len, what)?,
        at: 0,
    };
    let mut char_map = HashMap::with_capacity(entries);
    let as_char = |v: u32| char::from_u32(v).ok_or_else(|| format!("{v:#x} is no character"));
    for _ in 0..entries {
        let from = as_char(m.u32(what)?)?;
        let len = m.take(1, what)?[0];
        let to = (0..len)
            .map(|_| m.u32(what).and_then(as_char))
            .collect::<Result<String, _>>()?;
        char_map.insert(from, to);
    }
    let mask = pieces.iter().position(|(p, _)| p == "<mask>");
    SentencePieceTokenizer::new(UnigramVocab {
        pieces,
        unk_id: unk,
        bos_id: bos,
        eos_id: eos,
        control_ids: [bos, eos, pad]
            .into_iter()
            .chain(mask.map(|m| m as u32))
            .collect(),
        char_map,
    })
}

/// The file's short tensor names and the Hugging Face BERT names they stand
/// for (`l{N}.` is `encoder.layer.{N}.`).
const LAYER_NAMES: [(&str, &str); 16] = [
    ("q.w", "attention.self.query.weight"),
    ("q.b", "attention.self.query.bias"),
    ("k.w", "attention.self.key.weight"),
    ("k.b", "attention.self.key.bias"),
    ("v.w", "attention.self.value.weight"),
    ("v.b", "attention.self.value.bias"),
    ("ao.w", "attention.output.dense.weight"),
    ("ao.b", "attention.output.dense.bias"),
    ("aln.w", "attention.output.LayerNorm.weight"),
    ("aln.b", "attention.output.LayerNorm.bias"),
    ("fi.w", "intermediate.dense.weight"),
    ("fi.b", "intermediate.dense.bias"),
    ("fo.w", "output.dense.weight"),
    ("fo.b", "output.dense.bias"),
    ("oln.w", "output.LayerNorm.weight"),
    ("oln.b", "output.LayerNorm.bias"),
];

/// The Hugging Face name of the file's tensor `short`, if it is one BERT has.
fn hf_name(short: &str) -> Option<String> {
    let fixed = match short {
        "emb.word" => Some("embeddings.word_embeddings.weight"),
        "emb.pos" => Some("embeddings.position_embeddings.weight"),
        "emb.type" => Some("embeddings.token_type_embeddings.weight"),
        "emb.ln.w" => Some("embeddings.LayerNorm.weight"),
        "emb.ln.b" => Some("embeddings.LayerNorm.bias"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.to_string());
    }
    let (layer, rest) = short.strip_prefix('l')?.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (_, long) = LAYER_NAMES.iter().find(|(s, _)| *s == rest)?;
    Some(format!("encoder.layer.{layer}.{long}"))
}

/// The word table (kept 4-bit) and every other tensor as `f32`, under Hugging
/// Face's names. Tensors the model does not use are skipped.
fn read_tensors(
    c: &mut Cursor<'_>,
    file: &[u8],
    vocab: usize,
) -> Result<(WordEmbeddings, HashMap<String, Tensor>), String> {
    let what = "the tensor directory";
    let n = c.count(what)?;
    let mut word = None;
    let mut tensors = HashMap::new();
    for _ in 0..n {
        let len = c.take(2, what)?;
        let len = u16::from_le_bytes([len[0], len[1]]) as usize;
        let short = String::from_utf8_lossy(c.take(len, what)?).into_owned();
        let dtype = c.take(1, what)?[0];
        let count = c.u32(what)? as usize;
        let (offset, size) = (c.u64(what)?, c.u64(what)?);
        let data = offset
            .checked_add(size)
            .and_then(|end| file.get(offset..end))
            .ok_or_else(|| format!("tensor {short} lies outside the file"))?;
        let Some(name) = hf_name(&short) else {
            continue;
        };
        let expected = match dtype {
            DTYPE_F32 => count.checked_mul(4),
            DTYPE_Q4 if count.is_multiple_of(Q4_BLOCK_VALUES) => {
                Some(count / Q4_BLOCK_VALUES * Q4_BLOCK_BYTES)
            }
            _ => None,
        };
        if expected != Some(size) {
            return Err(format!(
                "tensor {short} ({count} values, kind {dtype}) has {size} bytes"
            ));
        }
        if short == "emb.word" {
            if dtype != DTYPE_Q4 || count != vocab * SHAPE.hidden {
                return Err(format!(
                    "tensor emb.word is not {vocab} rows of {} 4-bit values",
                    SHAPE.hidden
                ));
            }
            word = Some(WordEmbeddings::Q4 {
                blocks: data.to_vec(),
                rows: vocab,
                cols: SHAPE.hidden,
            });
            continue;
        }
        let values = if dtype == DTYPE_F32 {
            data.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        } else {
            let mut out = vec![0.0f32; count];
            for (block, o) in data
                .chunks_exact(Q4_BLOCK_BYTES)
                .zip(out.chunks_exact_mut(Q4_BLOCK_VALUES))
            {
                dequantize_q4_block(block, o, false);
            }
            out
        };
        let tensor = Tensor {
            data: values,
            rows: 1,
            cols: count,
        };
        tensors.insert(name, tensor);
    }
    let word = word.ok_or("the file has no tensor emb.word")?;
    Ok((word, tensors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_map_to_bert_names() {
        assert_eq!(
            hf_name("l11.fo.b").as_deref(),
            Some("encoder.layer.11.output.dense.bias")
        );
        assert_eq!(
            hf_name("emb.ln.w").as_deref(),
            Some("embeddings.LayerNorm.weight")
        );
        assert_eq!(hf_name("sae.w"), None);
        assert_eq!(hf_name("lx.q.w"), None);
    }

    #[test]
    fn a_missing_folder_or_file_says_what_to_run() {
        let err = E5Embedder::load(Path::new("/nonexistent/e5")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("fetch-e5.sh") && text.contains("RLM_EMBED_E5_MODEL"),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        let err = E5Embedder::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("has no e5-small-q4.bin"), "{err}");
    }

    #[test]
    fn a_broken_file_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(E5_MODEL_FILE);
        std::fs::write(&file, b"GGUF....").unwrap();
        let err = E5Embedder::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a multilingual-e5-small file"), "{err}");
        std::fs::write(&file, b"E5S1\x01\0\0\0\x80\x01").unwrap();
        let err = E5Embedder::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        // A header of another shape: 768 wide.
        let mut header = b"E5S1".to_vec();
        for v in [1u32, 768, 12, 12, 3072, 250_037, 512, 2] {
            header.extend(v.to_le_bytes());
        }
        header.extend(1e-12f32.to_le_bytes());
        header.extend(32u32.to_le_bytes());
        std::fs::write(&file, &header).unwrap();
        let err = E5Embedder::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("hidden size is 768"), "{err}");
    }
}
