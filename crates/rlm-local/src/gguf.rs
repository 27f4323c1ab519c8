//! The first bytes of a GGUF file: enough to tell a model from a truncated
//! download, an HTML error page or a file in another format.

use std::io::Read;
use std::path::Path;

use crate::LocalError;

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// What the fixed-size GGUF header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufHeader {
    /// Format version (2 or 3 in the wild).
    pub version: u32,
    /// Number of tensors.
    pub tensor_count: u64,
    /// Number of metadata key/value pairs.
    pub metadata_count: u64,
}

/// Reads and checks the header of the GGUF at `path`: the magic, a known
/// version, and counts a real model could have. A missing file is
/// [`LocalError::ModelMissing`]; anything else wrong is
/// [`LocalError::CorruptModel`].
pub fn read_header(path: &Path) -> Result<GgufHeader, LocalError> {
    let mut file = std::fs::File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            LocalError::ModelMissing {
                path: path.to_path_buf(),
            }
        } else {
            LocalError::Io {
                what: format!("cannot open model file {}", path.display()),
                source: e,
            }
        }
    })?;
    let mut bytes = [0u8; 24];
    let mut read = 0;
    while read < bytes.len() {
        match file.read(&mut bytes[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => {
                return Err(LocalError::Io {
                    what: format!("cannot read model file {}", path.display()),
                    source: e,
                });
            }
        }
    }
    parse_header(&bytes[..read]).map_err(|reason| LocalError::CorruptModel {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    })
}

/// Why bytes are not the header of a GGUF model a real file could have.
/// The message completes "… is not a usable GGUF model: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// The first four bytes are not [`GGUF_MAGIC`].
    #[error("it does not start with the GGUF magic bytes")]
    NoMagic,
    /// Fewer bytes than the fixed-size header.
    #[error("it is only {0} bytes long")]
    TooShort(usize),
    /// A format version other than 2 or 3.
    #[error("GGUF version {0} is not supported (2 or 3 expected)")]
    UnsupportedVersion(u32),
    /// No tensors, or more than any real model has.
    #[error("its header claims {0} tensors")]
    TensorCount(u64),
    /// More metadata entries than any real model has.
    #[error("its header claims {0} metadata entries")]
    MetadataCount(u64),
}

/// Checks a header given as bytes (at least 24 of them).
pub fn parse_header(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    if bytes.len() < 4 || &bytes[..4] != GGUF_MAGIC {
        return Err(GgufError::NoMagic);
    }
    if bytes.len() < 24 {
        return Err(GgufError::TooShort(bytes.len()));
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let header = GgufHeader {
        version: u32_at(4),
        tensor_count: u64_at(8),
        metadata_count: u64_at(16),
    };
    if !(2..=3).contains(&header.version) {
        return Err(GgufError::UnsupportedVersion(header.version));
    }
    // Far beyond any real model: a larger count means garbage after the magic.
    if header.tensor_count == 0 || header.tensor_count > 1_000_000 {
        return Err(GgufError::TensorCount(header.tensor_count));
    }
    if header.metadata_count > 1_000_000 {
        return Err(GgufError::MetadataCount(header.metadata_count));
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u32, tensors: u64, metadata: u64) -> Vec<u8> {
        let mut b = GGUF_MAGIC.to_vec();
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&tensors.to_le_bytes());
        b.extend_from_slice(&metadata.to_le_bytes());
        b
    }

    #[test]
    fn accepts_a_plausible_header() {
        assert_eq!(
            parse_header(&header(3, 339, 26)),
            Ok(GgufHeader {
                version: 3,
                tensor_count: 339,
                metadata_count: 26
            })
        );
    }

    #[test]
    fn rejects_wrong_magic_short_files_and_absurd_counts() {
        assert!(
            parse_header(b"<html>not a model</html>......")
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
        assert_eq!(parse_header(b"GGUF"), Err(GgufError::TooShort(4)));
        assert!(
            parse_header(b"GGUF")
                .unwrap_err()
                .to_string()
                .contains("only 4 bytes")
        );
        assert!(
            parse_header(&header(9, 1, 1))
                .unwrap_err()
                .to_string()
                .contains("version 9")
        );
        assert!(
            parse_header(&header(3, 0, 1))
                .unwrap_err()
                .to_string()
                .contains("0 tensors")
        );
        assert!(
            parse_header(&header(3, u64::MAX, 1))
                .unwrap_err()
                .to_string()
                .contains("tensors")
        );
    }

    #[test]
    fn missing_and_corrupt_files_get_distinct_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.gguf");
        assert!(matches!(
            read_header(&missing),
            Err(LocalError::ModelMissing { .. })
        ));
        let bad = dir.path().join("bad.gguf");
        std::fs::write(&bad, b"PK\x03\x04 a zip, not a model").unwrap();
        let err = read_header(&bad).unwrap_err();
        assert!(matches!(err, LocalError::CorruptModel { .. }), "{err}");
        assert!(err.to_string().contains("bad.gguf"), "{err}");
    }
}
