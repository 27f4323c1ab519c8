//! `rlm-lockfile`: an exclusive lock file that names its holder's pid.
//!
//! ```
//! use rlm_lockfile::{LockError, PidLock};
//!
//! let dir = std::env::temp_dir().join(format!("rlm-lockfile-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("write.lock");
//! let lock = PidLock::acquire(&path)?;
//! match PidLock::acquire(&path) {
//!     Err(LockError::Held { pid }) => assert_eq!(pid, std::process::id().to_string()),
//!     other => panic!("expected contention, got {other:?}"),
//! }
//! drop(lock); // released: the next acquire succeeds
//! assert!(!PidLock::is_held(&path));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), LockError>(())
//! ```
//!
//! The lock is the OS's advisory file lock (`File::try_lock`), so it is
//! released when the [`PidLock`] is dropped and also when the process dies;
//! the pid in the file is only there to name the holder in messages.

#![warn(missing_docs)]

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// What the holder's pid reads as when the lock file holds none (the holder
/// has not written it yet, or the file was emptied).
pub const UNKNOWN_PID: &str = "unknown";

/// An exclusive lock on a file, holding this process's pid in it; released on
/// drop.
#[derive(Debug)]
pub struct PidLock {
    _file: File,
    path: PathBuf,
}

/// The step of [`PidLock::acquire`] that failed with an I/O error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockStep {
    /// Opening (or creating) the lock file.
    Open,
    /// Taking the file lock (an OS error other than contention).
    Lock,
    /// Writing this process's pid into the locked file.
    WritePid,
}

impl LockStep {
    /// The verb for messages: `open`, `lock` or `write`.
    pub fn verb(self) -> &'static str {
        match self {
            LockStep::Open => "open",
            LockStep::Lock => "lock",
            LockStep::WritePid => "write",
        }
    }
}

/// Why [`PidLock::acquire`] did not get the lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another handle (usually another process) holds the lock.
    #[error("the lock is held by pid {pid}")]
    Held {
        /// The pid the holder wrote into the file, or [`UNKNOWN_PID`].
        pid: String,
    },
    /// The lock file could not be opened, locked or written.
    #[error("cannot {} {}: {source}", step.verb(), path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Which step failed.
        step: LockStep,
        /// The OS error.
        source: io::Error,
    },
}

impl PidLock {
    /// Takes the exclusive lock on `path` without waiting: opens the file
    /// (creating it), locks it, and replaces its content with this process's
    /// pid. When another handle holds it, returns [`LockError::Held`] with the
    /// pid that holder wrote.
    pub fn acquire(path: impl AsRef<Path>) -> Result<PidLock, LockError> {
        let path = path.as_ref();
        let io_error = |step| {
            move |source| LockError::Io {
                path: path.to_path_buf(),
                step,
                source,
            }
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_error(LockStep::Open))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    pid: read_pid(&mut file),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_error(LockStep::Lock)(e)),
        }
        write_pid(&mut file).map_err(io_error(LockStep::WritePid))?;
        Ok(PidLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// True when some handle holds the lock on `path` now (false when the
    /// file does not exist or cannot be opened).
    pub fn is_held(path: impl AsRef<Path>) -> bool {
        let Ok(file) = File::open(path) else {
            return false;
        };
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = file.unlock();
                false
            }
            Err(_) => true,
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The pid a holder wrote into the lock file, or [`UNKNOWN_PID`].
fn read_pid(file: &mut File) -> String {
    let mut pid = String::new();
    let _ = file.read_to_string(&mut pid);
    let pid = pid.trim();
    if pid.is_empty() { UNKNOWN_PID } else { pid }.to_string()
}

fn write_pid(file: &mut File) -> io::Result<()> {
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh empty folder under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir()
                .join(format!("rlm-lockfile-test-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn acquire_writes_this_pid_and_creates_the_file() {
        let tmp = TempDir::new("pid");
        let path = tmp.0.join("write.lock");
        let lock = PidLock::acquire(&path).unwrap();
        assert_eq!(lock.path(), path);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::process::id().to_string()
        );
    }

    #[test]
    fn second_handle_is_refused_and_names_the_holder() {
        let tmp = TempDir::new("contention");
        let path = tmp.0.join("write.lock");
        let _lock = PidLock::acquire(&path).unwrap();
        assert!(PidLock::is_held(&path));
        match PidLock::acquire(&path) {
            Err(LockError::Held { pid }) => assert_eq!(pid, std::process::id().to_string()),
            other => panic!("expected Held, got {other:?}"),
        }
    }

    #[test]
    fn holder_pid_is_read_as_written_and_unknown_when_empty() {
        let tmp = TempDir::new("holder");
        let path = tmp.0.join("x.lock");
        // Another holder: the lock taken on a raw handle, its pid written by hand.
        let mut other = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        other.lock().unwrap();
        match PidLock::acquire(&path) {
            Err(LockError::Held { pid }) => assert_eq!(pid, UNKNOWN_PID),
            other => panic!("expected Held, got {other:?}"),
        }
        other.write_all(b" 4242\n").unwrap();
        other.flush().unwrap();
        let err = PidLock::acquire(&path).unwrap_err();
        assert!(
            matches!(&err, LockError::Held { pid } if pid == "4242"),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "the lock is held by pid 4242");
    }

    #[test]
    fn released_on_drop() {
        let tmp = TempDir::new("drop");
        let path = tmp.0.join("write.lock");
        let lock = PidLock::acquire(&path).unwrap();
        drop(lock);
        assert!(!PidLock::is_held(&path));
        let again = PidLock::acquire(&path).unwrap();
        assert!(PidLock::is_held(again.path()));
    }

    #[test]
    fn is_held_is_false_without_a_file() {
        let tmp = TempDir::new("absent");
        assert!(!PidLock::is_held(tmp.0.join("none.lock")));
    }

    #[test]
    fn io_errors_name_the_step_and_the_file() {
        let tmp = TempDir::new("io");
        let path = tmp.0.join("missing-folder").join("write.lock");
        let err = PidLock::acquire(&path).unwrap_err();
        match &err {
            LockError::Io { step, path: p, .. } => {
                assert_eq!(*step, LockStep::Open);
                assert_eq!(p, &path);
            }
            other => panic!("expected Io, got {other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with(&format!("cannot open {}: ", path.display())),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}
