//! Embeds every file under `ui/` (the web page and the files it loads) in
//! the binary: writes `$OUT_DIR/ui_files.rs`, a table of (path, bytes)
//! made of `include_bytes!`, so a file added to `ui/` is served without a
//! change to the code.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let ui = manifest.join("ui");
    println!("cargo:rerun-if-changed=ui");
    let mut files = Vec::new();
    collect(&ui, &ui, &mut files);
    files.sort();
    let mut out = String::from(
        "/// Every file under `ui/`: its path there (`/`-separated) and its bytes.\npub(crate) static UI_FILES: &[(&str, &[u8])] = &[\n",
    );
    for (rel, abs) in &files {
        out.push_str(&format!("    ({rel:?}, include_bytes!({abs:?})),\n"));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("ui_files.rs");
    std::fs::write(&dest, out).expect("OUT_DIR is writable");
}

/// The files under `dir` (hidden ones left out), as (path relative to
/// `root`, absolute path).
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = e.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((rel, path.display().to_string()));
        }
    }
}
