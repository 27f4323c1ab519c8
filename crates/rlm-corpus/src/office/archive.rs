//! ZIP archives: each member a document named under the archive's path
//! (`deals.zip/2024/offer.docx`), read as its own extension says, under
//! the limits of [`super::package`]. Folders and macOS resource forks
//! (`__MACOSX/`) are not members.

use std::path::Path;

use super::package::Package;
use super::{ReadFile, Refusal, push_member, safe_segment};
use crate::extracted::Extraction;

/// The members of a `.zip`.
pub(super) fn extract_zip(bytes: &[u8], depth: usize, read_file: ReadFile) -> Extraction {
    let mut package = match Package::open(bytes) {
        Ok(p) => p,
        Err(refusal) => return refusal.into_extraction("ZIP archive"),
    };
    let mut members = Vec::new();
    for i in 0..package.len() {
        let (name, content) = match package.read_index(i) {
            Ok(entry) => entry,
            // One encrypted member is skipped alone; a bomb or a broken
            // archive stops the whole file (what follows is not trusted).
            Err(Refusal::Skip(reason)) => {
                let name = package.names().get(i).cloned().unwrap_or_default();
                push_member(
                    &mut members,
                    &member_path(&name, i),
                    Extraction::Skipped(reason),
                );
                continue;
            }
            Err(refusal) => return refusal.into_extraction("ZIP archive"),
        };
        let Some(content) = content else {
            continue;
        };
        if name.starts_with("__MACOSX/") {
            continue;
        }
        let path = member_path(&name, i);
        let extraction = read_file(Path::new(&path), &content, depth + 1);
        push_member(&mut members, &path, extraction);
    }
    Extraction::Many(members)
}

/// A member's name as a relative path: each segment made safe (no
/// absolute paths, no `..`).
fn member_path(name: &str, index: usize) -> String {
    let segments: Vec<String> = name
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != "." && *s != "..")
        .map(|s| safe_segment(s, "_"))
        .collect();
    if segments.is_empty() {
        format!("entry-{}", index + 1)
    } else {
        segments.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_stay_inside_the_archive() {
        assert_eq!(member_path("/etc/../passwd", 0), "etc/passwd");
        assert_eq!(member_path("a\\b.txt", 0), "a/b.txt");
        assert_eq!(member_path("..", 4), "entry-5");
    }
}
