//! The model's state after a fixed prompt prefix, kept on disk so that a new
//! process does not decode it again.
//!
//! Every `rlm ask` starts a process that loads the model and sends a prompt
//! whose first turn, the system prompt, is the same from one question to
//! the next (about 2,400 tokens for the RLM loop). Decoding it is most of the
//! first answer's wait on a CPU. After decoding that prefix once, the worker
//! saves the sequence's cache entries with llama.cpp's
//! `llama_state_seq_save_file`; later processes restore them with
//! `llama_state_seq_load_file` and start decoding after the prefix.
//!
//! One file per (model, prefix), named by a SHA-256 over the model's
//! identity ([`model_identity`]: file name and size, the state format) and
//! the prefix's token ids, so a changed model or prompt simply misses.
//! What llama.cpp itself checks on load — file magic and version, the
//! model's layer count, K/V types and row sizes, the V layout (flash
//! attention on or off), the number of KV streams, enough free cells —
//! makes an incompatible file fail to load rather than load wrongly; the
//! context size and the number of parallel sequences do not matter (cells
//! are placed anywhere in the cache).
//!
//! File layout: llama.cpp's sequence state file, then a trailer of 40 bytes
//! — the SHA-256 of everything before it and the magic `RLMPFX01`. llama.cpp
//! ignores bytes after the state. The trailer is checked before llama.cpp
//! sees the file: a truncated or damaged file (disk full, a crash while
//! copying, bit rot) is deleted instead of being parsed by C++ code that
//! asserts on inconsistent data. Files are written to a temporary name in
//! the same directory and renamed into place (atomic; two processes saving
//! the same prefix both write complete files).
//!
//! The directory is bounded: after each save, files not used recently are
//! deleted until the `.state` files take at most [`MAX_DIR_BYTES`] (the file
//! just written always stays). A restore refreshes a file's modification
//! time, so the order is least recently used.

#![cfg_attr(not(feature = "llama"), allow(dead_code))]

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::cache::models_dir_with_env;

/// Environment variable: a directory for prefix states, or `off`.
pub const PREFIX_CACHE_ENV: &str = "RLM_LOCAL_PREFIX_CACHE";

/// A prefix shorter than this is decoded faster than its state is saved
/// and loaded; it is not kept.
pub(crate) const MIN_PREFIX_TOKENS: usize = 64;

/// Upper bound of the `.state` files in the directory (1 GiB: about 14
/// prefixes of 2,400 tokens with Qwen2.5-Coder-1.5B, 28 KiB per token).
pub const MAX_DIR_BYTES: u64 = 1 << 30;

const TRAILER_MAGIC: &[u8; 8] = b"RLMPFX01";
const TRAILER_LEN: u64 = 32 + 8;
const STATE_SUFFIX: &str = ".state";
const TEMP_SUFFIX: &str = ".tmp";
/// A temporary file this old was left by a process that died while saving.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// The default directory: `prefix-state` in the models directory
/// (`~/.cache/rlm/models/prefix-state`). Inside rather than next to it, so
/// that an `RLM_MODELS_DIR` of `/` or of a relative path still gives a
/// directory the user chose; `rlm model list` lists only `.gguf` files.
pub(crate) fn default_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    models_dir_with_env(|name| env(name).map(OsString::from))
        .ok()
        .map(|models| models.join("prefix-state"))
}

/// `RLM_LOCAL_PREFIX_CACHE`: `off` (any case) turns the cache off, a path
/// names the directory, unset or empty means [`default_dir`] (none when no
/// models directory can be found: then nothing is kept).
pub(crate) fn dir_from_env(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    match env(PREFIX_CACHE_ENV) {
        Some(raw) if raw.trim().eq_ignore_ascii_case("off") => None,
        Some(raw) if !raw.trim().is_empty() => Some(PathBuf::from(raw)),
        _ => default_dir(env),
    }
}

/// What identifies a model's state layout and values: the GGUF's file name
/// and size, and this file format. (Hashing the 1 GB file itself would cost
/// more than the decode it saves.)
pub(crate) fn model_identity(model: &Path) -> std::io::Result<Vec<u8>> {
    let size = std::fs::metadata(model)?.len();
    let name = model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut id = Vec::new();
    // The format: llama.cpp's sequence state file (its own version is
    // checked on load), our trailer, one unified KV cache.
    id.extend_from_slice(b"rlm-prefix-state/1 llama_state_seq kv_unified\0");
    id.extend_from_slice(name.as_bytes());
    id.push(0);
    id.extend_from_slice(&size.to_le_bytes());
    Ok(id)
}

/// The file name for `prefix` (token ids) of the model `identity`.
pub(crate) fn file_name(identity: &[u8], prefix: &[i32]) -> String {
    let mut hash = Sha256::new();
    hash.update((identity.len() as u64).to_le_bytes());
    hash.update(identity);
    hash.update((prefix.len() as u64).to_le_bytes());
    for token in prefix {
        hash.update(token.to_le_bytes());
    }
    format!("{}{STATE_SUFFIX}", hex(&hash.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of the first `len` bytes of `file`.
fn digest_of(file: &mut File, len: u64) -> std::io::Result<[u8; 32]> {
    file.seek(SeekFrom::Start(0))?;
    let mut hash = Sha256::new();
    let mut rest = file.take(len);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = rest.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    if rest.limit() != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the file shrank while it was read",
        ));
    }
    Ok(hash.finalize().into())
}

/// Appends the trailer to a state file llama.cpp has just written; returns
/// the file's final size.
pub(crate) fn seal(path: &Path) -> std::io::Result<u64> {
    let mut file = File::options().read(true).append(true).open(path)?;
    let len = file.metadata()?.len();
    let digest = digest_of(&mut file, len)?;
    file.write_all(&digest)?;
    file.write_all(TRAILER_MAGIC)?;
    file.sync_all()?;
    Ok(len + TRAILER_LEN)
}

/// Whether `path` is a complete, undamaged sealed file: `Ok(None)` if so,
/// `Ok(Some(reason))` if it is damaged, an error (`NotFound` when there is
/// no such file) if it cannot be read.
pub(crate) fn check(path: &Path) -> std::io::Result<Option<String>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len < TRAILER_LEN {
        return Ok(Some(format!("{len} bytes is too short")));
    }
    let body = len - TRAILER_LEN;
    let mut trailer = [0u8; TRAILER_LEN as usize];
    file.seek(SeekFrom::Start(body))?;
    file.read_exact(&mut trailer)?;
    if &trailer[32..] != TRAILER_MAGIC {
        return Ok(Some("no trailer (truncated or not written by rlm)".into()));
    }
    if digest_of(&mut file, body)? != trailer[..32] {
        return Ok(Some("checksum mismatch".into()));
    }
    Ok(None)
}

/// Marks a file as just used (for the least-recently-used bound).
pub(crate) fn touch(path: &Path) {
    if let Ok(file) = File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// A fresh temporary path in `dir` for `final_name`.
pub(crate) fn temp_path(dir: &Path, final_name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(
        ".{final_name}.{}.{n}{TEMP_SUFFIX}",
        std::process::id()
    ))
}

/// Seals `temp`, renames it to `dest` and bounds the directory; returns the
/// file's size. On error the temporary file is removed.
pub(crate) fn commit(temp: &Path, dest: &Path) -> std::io::Result<u64> {
    let sealed = seal(temp).and_then(|size| std::fs::rename(temp, dest).map(|()| size));
    match sealed {
        Ok(size) => {
            if let Some(dir) = dest.parent() {
                evict(dir, dest, MAX_DIR_BYTES);
            }
            Ok(size)
        }
        Err(e) => {
            let _ = std::fs::remove_file(temp);
            Err(e)
        }
    }
}

/// Deletes least recently used `.state` files until the rest take at most
/// `max_bytes` (`keep` always stays), and temporary files left by processes
/// that died while saving. Other files in the directory are not touched.
/// Errors are ignored: another process may be evicting the same files.
pub(crate) fn evict(dir: &Path, keep: &Path, max_bytes: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut states = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if name.starts_with('.') && name.ends_with(TEMP_SUFFIX) {
            if now.duration_since(modified).unwrap_or_default() > STALE_TEMP {
                let _ = std::fs::remove_file(entry.path());
            }
        } else if is_state_name(&name) {
            states.push((entry.path(), modified, meta.len()));
        }
    }
    // Newest first; the kept file counts first whatever its time.
    states.sort_by_key(|s| std::cmp::Reverse((s.0 == keep, s.1)));
    let mut total = 0u64;
    for (path, _, size) in states {
        total += size;
        if total > max_bytes && path != keep {
            let _ = std::fs::remove_file(&path);
            total -= size;
        }
    }
}

fn is_state_name(name: &str) -> bool {
    name.strip_suffix(STATE_SUFFIX)
        .is_some_and(|stem| stem.len() == 64 && stem.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The saving side's memory within one process: which prefixes were already
/// attempted (each is saved at most once per process) and whether a failure
/// was reported (once).
#[derive(Debug, Default)]
pub(crate) struct SaveLog {
    attempted: HashSet<String>,
    warned: bool,
}

impl SaveLog {
    /// True the first time `name` is asked for.
    pub(crate) fn first_attempt(&mut self, name: &str) -> bool {
        self.attempted.insert(name.to_string())
    }

    /// Says on stderr, once per process, that states cannot be saved.
    pub(crate) fn warn(&mut self, dir: &Path, detail: &str) {
        if !self.warned {
            self.warned = true;
            eprintln!(
                "rlm: cannot keep the local model's prompt state in {}: {detail} (answers are not affected; set {PREFIX_CACHE_ENV}=off to stop trying)",
                dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_directory_comes_from_the_variable_or_the_models_directory() {
        let dir = |pairs| dir_from_env(&env(pairs));
        assert_eq!(dir(&[("RLM_LOCAL_PREFIX_CACHE", "off")]), None);
        assert_eq!(dir(&[("RLM_LOCAL_PREFIX_CACHE", " OFF ")]), None);
        assert_eq!(
            dir(&[("RLM_LOCAL_PREFIX_CACHE", "/tmp/p"), ("HOME", "/h")]),
            Some(PathBuf::from("/tmp/p"))
        );
        assert_eq!(
            dir(&[("RLM_LOCAL_PREFIX_CACHE", ""), ("RLM_MODELS_DIR", "/m")]),
            Some(PathBuf::from("/m/prefix-state")),
            "empty means the default"
        );
        assert_eq!(
            dir(&[("RLM_MODELS_DIR", "/m")]),
            Some(PathBuf::from("/m/prefix-state"))
        );
        if cfg!(target_os = "linux") {
            assert_eq!(
                dir(&[("HOME", "/h")]),
                Some(PathBuf::from("/h/.cache/rlm/models/prefix-state"))
            );
            assert_eq!(dir(&[]), None, "no cache directory: nothing is kept");
        }
    }

    #[test]
    fn names_depend_on_the_model_and_every_token() {
        let a = file_name(b"model-a", &[1, 2, 3]);
        assert!(is_state_name(&a), "{a}");
        assert_eq!(a, file_name(b"model-a", &[1, 2, 3]));
        assert_ne!(a, file_name(b"model-b", &[1, 2, 3]));
        assert_ne!(a, file_name(b"model-a", &[1, 2, 4]));
        assert_ne!(a, file_name(b"model-a", &[1, 2]));
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, b"1234").unwrap();
        let one = model_identity(&gguf).unwrap();
        std::fs::write(&gguf, b"12345").unwrap();
        assert_ne!(one, model_identity(&gguf).unwrap(), "the size counts");
    }

    #[test]
    fn sealed_files_check_out_and_damaged_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let temp = temp_path(dir.path(), "x.state");
        std::fs::write(&temp, vec![7u8; 3_000_000]).unwrap();
        let dest = dir.path().join(file_name(b"m", &[1]));
        assert_eq!(commit(&temp, &dest).unwrap(), 3_000_000 + TRAILER_LEN);
        assert!(!temp.exists());
        assert_eq!(check(&dest).unwrap(), None);

        let bytes = std::fs::read(&dest).unwrap();
        std::fs::write(&dest, &bytes[..bytes.len() - 1]).unwrap();
        assert!(check(&dest).unwrap().unwrap().contains("trailer"));
        std::fs::write(&dest, &bytes[..1_000_000]).unwrap();
        assert!(check(&dest).unwrap().is_some(), "truncated");
        std::fs::write(&dest, b"short").unwrap();
        assert!(check(&dest).unwrap().unwrap().contains("too short"));
        let mut flipped = bytes.clone();
        flipped[10] ^= 1;
        std::fs::write(&dest, &flipped).unwrap();
        assert_eq!(check(&dest).unwrap().unwrap(), "checksum mismatch");
        std::fs::remove_file(&dest).unwrap();
        assert_eq!(
            check(&dest).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    #[test]
    fn eviction_keeps_the_newest_files_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let base = SystemTime::now() - Duration::from_secs(7200);
        let mut paths = Vec::new();
        for i in 0..5u64 {
            let path = dir.path().join(file_name(b"m", &[i as i32]));
            std::fs::write(&path, vec![0u8; 100]).unwrap();
            File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(base + Duration::from_secs(i * 60))
                .unwrap();
            paths.push(path);
        }
        let other = dir.path().join("notes.txt");
        std::fs::write(&other, vec![0u8; 1000]).unwrap();
        let stale = dir.path().join(".abc.state.1.0.tmp");
        std::fs::write(&stale, b"x").unwrap();
        File::options()
            .append(true)
            .open(&stale)
            .unwrap()
            .set_modified(base)
            .unwrap();
        let fresh = temp_path(dir.path(), "def.state");
        std::fs::write(&fresh, b"x").unwrap();

        // The oldest file is the one to keep: it stays, with the two newest.
        evict(dir.path(), &paths[0], 300);
        let alive: Vec<bool> = paths.iter().map(|p| p.exists()).collect();
        assert_eq!(alive, [true, false, false, true, true]);
        assert!(other.exists(), "files that are not ours stay");
        assert!(!stale.exists(), "a dead process's temporary file goes");
        assert!(fresh.exists(), "a save in progress is left alone");

        touch(&paths[0]);
        evict(dir.path(), &paths[4], 200);
        let alive: Vec<bool> = paths.iter().map(|p| p.exists()).collect();
        assert_eq!(alive, [true, false, false, false, true]);
    }

    #[test]
    fn save_failures_are_reported_once_and_each_prefix_tried_once() {
        let mut log = SaveLog::default();
        assert!(log.first_attempt("a"));
        assert!(!log.first_attempt("a"));
        assert!(log.first_attempt("b"));
        log.warn(Path::new("/x"), "disk full");
        assert!(log.warned);
    }
}
