//! Finding the files to index, with ripgrep's ignore rules.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;

use crate::error::CorpusError;
use crate::extract::SkipReason;
use crate::index_options::{IndexOptions, IndexProgress};

/// A file found by the walk.
#[derive(Debug, Clone)]
pub(crate) struct FileEntry {
    /// Where it is on disk.
    pub abs_path: PathBuf,
    /// Corpus-relative path: `<root name>/<path inside root>`, with `/` separators.
    pub rel_path: String,
    /// The root name it was found under.
    pub root: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

/// What the walk found.
pub(crate) struct Walked {
    pub files: Vec<FileEntry>,
    pub roots: Vec<String>,
    pub skipped: Vec<(String, SkipReason)>,
    pub errors: Vec<(String, String)>,
}

/// The name a root contributes to corpus-relative paths. It depends only on the
/// root's canonical location, so ids stay stable whatever the working directory.
fn root_name(canonical: &Path) -> String {
    canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_string())
}

pub(crate) fn walk(
    paths: &[PathBuf],
    opts: &IndexOptions,
    store_dir: Option<&Path>,
    progress: &mut dyn FnMut(IndexProgress),
) -> Result<Walked, CorpusError> {
    let store_canon = store_dir.and_then(|d| d.canonicalize().ok());
    let mut out = Walked {
        files: Vec::new(),
        roots: Vec::new(),
        skipped: Vec::new(),
        errors: Vec::new(),
    };
    for path in paths {
        let canon = path.canonicalize().map_err(|e| CorpusError::io(path, e))?;
        let is_dir = canon.is_dir();
        let name = root_name(&canon);
        // A single file is its own root; a folder's files sit under its name.
        let base = if is_dir {
            canon.clone()
        } else {
            canon.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let mut overrides = OverrideBuilder::new(&base);
        for g in &opts.include {
            overrides
                .add(g)
                .map_err(|e| CorpusError::InvalidOption(format!("--include {g:?}: {e}")))?;
        }
        for g in &opts.exclude {
            overrides
                .add(&format!("!{g}"))
                .map_err(|e| CorpusError::InvalidOption(format!("--exclude {g:?}: {e}")))?;
        }
        let overrides = overrides
            .build()
            .map_err(|e| CorpusError::InvalidOption(e.to_string()))?;
        let walker = WalkBuilder::new(&canon)
            .hidden(!opts.hidden)
            .git_ignore(!opts.no_ignore)
            .git_global(!opts.no_ignore)
            .git_exclude(!opts.no_ignore)
            .ignore(!opts.no_ignore)
            .parents(!opts.no_ignore)
            // Respect .gitignore even outside a git repository, as users expect.
            .require_git(false)
            .overrides(overrides)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        if !out.roots.contains(&name) {
            out.roots.push(name.clone());
        }
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    let p = error_path(&e).unwrap_or_else(|| path.display().to_string());
                    out.errors
                        .push((p, format!("{e} (fix its permissions or --exclude it)")));
                    continue;
                }
            };
            let Some(ft) = entry.file_type() else {
                continue;
            };
            if !ft.is_file() {
                continue;
            }
            let abs = entry.path().to_path_buf();
            if let Some(store) = &store_canon
                && abs.starts_with(store)
            {
                continue;
            }
            let inner = abs.strip_prefix(&base).unwrap_or(&abs);
            let inner = inner
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let rel_path = if is_dir {
                format!("{name}/{inner}")
            } else {
                inner
            };
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) => {
                    out.errors.push((rel_path, format!("cannot read: {e}")));
                    continue;
                }
            };
            if meta.len() == 0 {
                out.skipped.push((rel_path, SkipReason::Empty));
                continue;
            }
            out.files.push(FileEntry {
                abs_path: abs,
                rel_path,
                root: name.clone(),
                size: meta.len(),
                mtime_ns: mtime_ns(&meta),
            });
            if out.files.len().is_multiple_of(256) {
                progress(IndexProgress::Walking {
                    found: out.files.len() as u64,
                });
            }
        }
    }
    // The same file named twice (overlapping roots) is indexed once.
    out.files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
    out.files.dedup_by(|a, b| a.rel_path == b.rel_path);
    progress(IndexProgress::Walking {
        found: out.files.len() as u64,
    });
    Ok(out)
}

fn error_path(e: &ignore::Error) -> Option<String> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.display().to_string()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

/// Modification time in nanoseconds since the epoch (0 when unknown).
fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}
