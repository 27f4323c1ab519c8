//! The CPython back-end: a real Python interpreter (the user's, with their
//! installed packages) as the worker, isolated by the operating system.
//!
//! The worker is `src/cpython/worker.py`, embedded in the binary and run with
//! `python -I -c`; it speaks the same frames as the monty worker, so the
//! parent side ([`crate::Interpreter`], the pool, host calls, limits) is the
//! same for both back-ends. The isolation is bubblewrap's (`bwrap`), set up
//! before Python starts:
//!
//! - namespaces: a new network namespace (no network, not even the host's
//!   loopback), mount namespace (an empty root with read-only binds of the
//!   interpreter, its packages and the system libraries, a fresh `/proc` of
//!   its own pid namespace, a minimal `/dev`, a small private `/tmp`), pid,
//!   IPC, UTS, cgroup and user namespaces (uid 65534 inside, no
//!   capabilities; the seccomp filter refuses new namespaces);
//! - an empty environment (`--clearenv` plus a few fixed variables);
//! - rlimits set before `bwrap` starts: address space (the memory limit),
//!   CPU seconds, file size, open files, no core dumps;
//! - a seccomp filter ([`seccomp`]): no new processes, namespaces, mounts,
//!   `ptrace`, keyrings, `bpf`, …;
//! - `--die-with-parent`: the sandbox ends with its `bwrap`, which the parent
//!   kills on timeout, or past its threads ([`threads`]: the kernel's count,
//!   watched from the parent).
//!
//! Where this cannot work (not Linux, no `bwrap`, user namespaces disabled)
//! the back-end refuses with one line saying why; it never runs Python
//! without the isolation.

mod seccomp;
pub(crate) mod threads;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The worker script run by the sandboxed Python.
pub(crate) const WORKER_SCRIPT: &str = include_str!("worker.py");

/// Environment variable naming the Python of the CPython back-end: an
/// interpreter, or a virtual environment's directory.
pub const PYTHON_ENV: &str = "RLM_PYTHON";
/// Size of the sandbox's private, writable `/tmp` (and the largest file it may write).
const TMP_BYTES: u64 = 16 * 1024 * 1024;
/// Open files the sandboxed process may hold.
const MAX_OPEN_FILES: u64 = 1024;
/// The descriptor the seccomp program is read from by `bwrap`.
const SECCOMP_FD: i32 = 3;
/// Where the sandbox's working directory is.
const SANDBOX_HOME: &str = "/tmp";

/// A Python found for the CPython back-end, and how to start it isolated.
#[derive(Debug, Clone)]
pub struct CPythonLauncher {
    /// The interpreter as it will be run (a venv's `bin/python` stays a venv).
    pub executable: PathBuf,
    /// `sys.version` of it, first word (e.g. `3.11.7`).
    pub version: String,
    /// Where the choice came from (`RLM_PYTHON`, `VIRTUAL_ENV`, `PATH`, the config).
    pub source: String,
    /// Directories (and files) bound read-only into the sandbox.
    pub mounts: Vec<PathBuf>,
    /// The `bwrap` program.
    pub bwrap: PathBuf,
    /// The seccomp program, when this machine has one.
    seccomp: Option<Arc<Vec<u8>>>,
    /// This bwrap can bound a tmpfs's size (`--size`, bubblewrap 0.8).
    sized_tmpfs: bool,
}

impl CPythonLauncher {
    /// One line for people: which Python, from where, and the isolation.
    pub fn describe(&self) -> String {
        format!(
            "CPython {} at {} (from {}), isolated by bubblewrap{}",
            self.version,
            self.executable.display(),
            self.source,
            if self.seccomp.is_some() {
                " + seccomp"
            } else {
                " (no seccomp filter for this architecture)"
            }
        )
    }

    /// The sandboxed command: `bwrap … -- python -I -B -c <worker>`, with an
    /// address-space limit of `memory_limit_bytes` (0 = none) and `cpu_time`
    /// of CPU over its life; the caller adds the worker's own arguments.
    pub(crate) fn command(
        &self,
        memory_limit_bytes: u64,
        cpu_time: Duration,
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.bwrap);
        cmd.args(self.bwrap_args());
        cmd.arg("--")
            .arg(&self.executable)
            // Isolated mode (no PYTHON* variables, no user site), no .pyc writes.
            .args(["-I", "-B", "-c", WORKER_SCRIPT]);
        self.restrict(&mut cmd, memory_limit_bytes, cpu_time);
        cmd
    }

    fn bwrap_args(&self) -> Vec<OsString> {
        fn push(a: &mut Vec<OsString>, items: &[&str]) {
            a.extend(items.iter().map(OsString::from));
        }
        let mut a: Vec<OsString> = Vec::new();
        push(
            &mut a,
            &[
                "--unshare-all",
                "--unshare-user",
                "--uid",
                "65534",
                "--gid",
                "65534",
                "--cap-drop",
                "ALL",
                "--die-with-parent",
                "--new-session",
                "--clearenv",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
            ],
        );
        // A small private /tmp where bwrap can bound its size (0.8 and later);
        // older ones get none (a tmpfs without a size would take host memory).
        if self.sized_tmpfs {
            a.push("--size".into());
            a.push(TMP_BYTES.to_string().into());
            push(&mut a, &["--tmpfs", SANDBOX_HOME, "--chdir", SANDBOX_HOME]);
        } else {
            push(&mut a, &["--chdir", "/"]);
        }
        for (var, value) in [
            ("HOME", SANDBOX_HOME),
            ("LANG", "C.UTF-8"),
            // The memory limit is an address-space limit: glibc's per-thread
            // arenas (64 MiB each) and one thread per numeric library keep
            // threads from using it up.
            ("MALLOC_ARENA_MAX", "2"),
            ("OMP_NUM_THREADS", "1"),
            ("OPENBLAS_NUM_THREADS", "1"),
            ("MKL_NUM_THREADS", "1"),
            ("NUMEXPR_NUM_THREADS", "1"),
            ("MPLBACKEND", "Agg"),
        ] {
            push(&mut a, &["--setenv", var, value]);
        }
        for link in ["/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"] {
            match std::fs::read_link(link) {
                Ok(target) => {
                    a.push("--symlink".into());
                    a.push(target.into());
                    a.push(link.into());
                }
                Err(_) if Path::new(link).is_dir() && !self.covered(Path::new(link)) => {
                    a.push("--ro-bind".into());
                    a.push(link.into());
                    a.push(link.into());
                }
                Err(_) => {}
            }
        }
        for mount in &self.mounts {
            a.push("--ro-bind".into());
            a.push(mount.into());
            a.push(mount.into());
        }
        if self.seccomp.is_some() {
            a.push("--seccomp".into());
            a.push(SECCOMP_FD.to_string().into());
        }
        a
    }

    fn covered(&self, path: &Path) -> bool {
        self.mounts.iter().any(|m| path.starts_with(m))
    }

    /// rlimits and the seccomp program's descriptor, set in the child before
    /// `bwrap` runs (they are inherited by the sandboxed Python).
    #[cfg(target_os = "linux")]
    fn restrict(&self, cmd: &mut tokio::process::Command, memory: u64, cpu_time: Duration) {
        let cpu = cpu_time.as_secs().max(1);
        let program = self.seccomp.clone();
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe functions (setrlimit, pipe2, write, close, dup2)
        // on memory allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let limit = |resource, value: u64| {
                    let r = libc::rlimit {
                        rlim_cur: value as libc::rlim_t,
                        rlim_max: value as libc::rlim_t,
                    };
                    if libc::setrlimit(resource, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                };
                if memory > 0 {
                    limit(libc::RLIMIT_AS, memory)?;
                }
                limit(libc::RLIMIT_CPU, cpu)?;
                limit(libc::RLIMIT_FSIZE, TMP_BYTES)?;
                limit(libc::RLIMIT_NOFILE, MAX_OPEN_FILES)?;
                limit(libc::RLIMIT_CORE, 0)?;
                if let Some(program) = &program {
                    let mut fds = [0i32; 2];
                    if libc::pipe2(fds.as_mut_ptr(), 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The program (well under a pipe's 64 KiB) fits before anyone reads.
                    let n = libc::write(fds[1], program.as_ptr().cast(), program.len());
                    if n != program.len() as isize {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(fds[1]);
                    if fds[0] != SECCOMP_FD {
                        if libc::dup2(fds[0], SECCOMP_FD) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        libc::close(fds[0]);
                    }
                }
                Ok(())
            });
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn restrict(&self, _cmd: &mut tokio::process::Command, _memory: u64, _cpu_time: Duration) {}
}

/// Why the CPython back-end cannot run here. Each message is one line that
/// says why and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CPythonError {
    /// No Python was named and there is no `python3` on `PATH`.
    #[error(
        "the CPython sandbox found no python3 on PATH: set {} to a Python \
         interpreter or a virtual environment's directory",
        PYTHON_ENV
    )]
    NoPython,
    /// The Python named is a directory without `bin/python3` (or `bin/python`).
    #[error(
        "{} (from {origin}) is a directory without bin/python3: give a Python \
         interpreter or a virtual environment's directory",
        .dir.display()
    )]
    NotAnEnvironment {
        /// The directory.
        dir: PathBuf,
        /// Where it was named (`RLM_PYTHON`, `VIRTUAL_ENV`, the configuration).
        origin: String,
    },
    /// Not Linux: no namespaces to isolate Python with.
    #[error(
        "the CPython sandbox needs Linux namespaces (bubblewrap) and is not available on \
         this system; use the default monty sandbox (--sandbox monty)"
    )]
    NotLinux,
    /// `bwrap` is not installed.
    #[error(
        "the CPython sandbox needs bubblewrap (bwrap), which is not installed: install it \
         (apt-get install bubblewrap, dnf install bubblewrap) or use --sandbox monty"
    )]
    NoBubblewrap,
    /// The Python could not be started.
    #[error("cannot run {} (from {origin}): {error}", .python.display())]
    CannotRun {
        /// The interpreter.
        python: PathBuf,
        /// Where it was named.
        origin: String,
        /// The OS error's message.
        error: String,
    },
    /// The Python started but failed.
    #[error("{} (from {origin}) failed to start: {last_line}", .python.display())]
    FailedToStart {
        /// The interpreter.
        python: PathBuf,
        /// Where it was named.
        origin: String,
        /// The last line it wrote to stderr.
        last_line: String,
    },
    /// The Python ran but did not answer like a Python 3.
    #[error("{} (from {origin}) is not a usable Python 3: {error}", .python.display())]
    NotPython3 {
        /// The interpreter.
        python: PathBuf,
        /// Where it was named.
        origin: String,
        /// Why its answer could not be read.
        error: String,
    },
    /// `bwrap` could not be started.
    #[error("cannot run bubblewrap ({}): {error}", .bwrap.display())]
    CannotRunBubblewrap {
        /// The `bwrap` program.
        bwrap: PathBuf,
        /// The OS error's message.
        error: String,
    },
    /// `bwrap` runs but cannot isolate (no unprivileged user namespaces).
    #[error(
        "the CPython sandbox cannot isolate Python here (bubblewrap: {why}); it needs \
         unprivileged user namespaces (kernel.unprivileged_userns_clone=1, or a container \
         started with them allowed); use --sandbox monty"
    )]
    NoIsolation {
        /// The last line bubblewrap wrote to stderr.
        why: String,
    },
}

/// A Python that was checked: its launcher, or why it cannot run.
type Found = Result<Arc<CPythonLauncher>, CPythonError>;

/// Finds the Python of the CPython back-end and checks once per process that
/// the isolation works with it. `explicit` (a config or flag) beats
/// `RLM_PYTHON`, which beats an active virtual environment (`VIRTUAL_ENV`),
/// which beats `python3` on `PATH`. The result is cached per choice. The
/// error is one line saying why the back-end cannot run and what to do.
pub fn launcher(explicit: Option<&Path>) -> Result<Arc<CPythonLauncher>, CPythonError> {
    let (path, source) = choose_python(explicit)?;
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Found>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&path) {
        return found.clone();
    }
    let found = prepare(&path, &source).map(Arc::new);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path, found.clone());
    found
}

fn choose_python(explicit: Option<&Path>) -> Result<(PathBuf, String), CPythonError> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let (given, source) = if let Some(p) = explicit {
        (p.to_path_buf(), "the configuration".to_string())
    } else if let Some(p) = env(PYTHON_ENV) {
        (PathBuf::from(p), PYTHON_ENV.to_string())
    } else if let Some(venv) = env("VIRTUAL_ENV") {
        (PathBuf::from(venv), "VIRTUAL_ENV".to_string())
    } else {
        let on_path = env("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("python3"))
                    .find(|p| p.is_file())
            })
            .ok_or(CPythonError::NoPython)?;
        (on_path, "PATH".to_string())
    };
    let python = if given.is_dir() {
        ["bin/python3", "bin/python"]
            .iter()
            .map(|p| given.join(p))
            .find(|p| p.is_file())
            .ok_or_else(|| CPythonError::NotAnEnvironment {
                dir: given.clone(),
                origin: source.clone(),
            })?
    } else {
        given
    };
    let python = std::path::absolute(&python).unwrap_or(python);
    Ok((python, source))
}

/// Asks the interpreter where it lives, then starts it once in the sandbox.
fn prepare(python: &Path, source: &str) -> Result<CPythonLauncher, CPythonError> {
    if !cfg!(target_os = "linux") {
        return Err(CPythonError::NotLinux);
    }
    let bwrap = find_on_path("bwrap").ok_or(CPythonError::NoBubblewrap)?;
    // The user's own interpreter, run as the user (a pyenv shim needs its
    // environment); -I keeps PYTHON* variables and the user site out.
    let probe = std::process::Command::new(python)
        .args(["-I", "-c", PROBE_SCRIPT])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| CPythonError::CannotRun {
            python: python.to_path_buf(),
            origin: source.to_string(),
            error: e.to_string(),
        })?;
    if !probe.status.success() {
        return Err(CPythonError::FailedToStart {
            python: python.to_path_buf(),
            origin: source.to_string(),
            last_line: last_line(&probe.stderr),
        });
    }
    let info: ProbeInfo =
        serde_json::from_slice(&probe.stdout).map_err(|e| CPythonError::NotPython3 {
            python: python.to_path_buf(),
            origin: source.to_string(),
            error: e.to_string(),
        })?;
    // Each path as Python names it and where its symlinks lead.
    let mut paths: Vec<PathBuf> = Vec::new();
    for dir in info.dirs.iter().map(PathBuf::from) {
        if dir.is_absolute() && dir.exists() {
            if let Ok(real) = dir.canonicalize() {
                paths.push(real);
            }
            paths.push(dir);
        }
    }
    // sys.executable is the interpreter itself (a venv's bin/python, not a
    // pyenv shim); its directory as named holds a venv's symlinks. Then the
    // system libraries and the dynamic linker's cache.
    let executable = PathBuf::from(&info.executable);
    if let Some(dir) = executable.parent() {
        paths.push(dir.to_path_buf());
    }
    for system in ["/usr/lib", "/usr/lib64", "/usr/lib32", "/etc/ld.so.cache"] {
        if Path::new(system).exists() {
            paths.push(PathBuf::from(system));
        }
    }
    let launcher = CPythonLauncher {
        executable,
        version: info.version,
        source: source.to_string(),
        mounts: outermost(paths),
        sized_tmpfs: bwrap_supports(&bwrap, "--size"),
        bwrap,
        seccomp: seccomp::filter_program().map(Arc::new),
    };
    check_isolation(&launcher)?;
    Ok(launcher)
}

/// Runs `python -c pass` in the sandbox: where user namespaces are off (some
/// containers, hardened kernels) `bwrap` fails here, once, with its reason.
fn check_isolation(launcher: &CPythonLauncher) -> Result<(), CPythonError> {
    // With the filter in force a fork must be refused.
    let script = if launcher.seccomp.is_some() {
        "import os\ntry:\n    os.fork()\nexcept PermissionError:\n    print('isolated')\n"
    } else {
        "print('isolated')"
    };
    let mut cmd = tokio::process::Command::new(&launcher.bwrap);
    cmd.args(launcher.bwrap_args())
        .arg("--")
        .arg(&launcher.executable)
        .args(["-I", "-c", script])
        .env_clear()
        .stdin(std::process::Stdio::null());
    launcher.restrict(&mut cmd, 1 << 30, Duration::from_secs(60));
    let mut cmd = cmd.into_std();
    let out = cmd
        .output()
        .map_err(|e| CPythonError::CannotRunBubblewrap {
            bwrap: launcher.bwrap.clone(),
            error: e.to_string(),
        })?;
    if !out.status.success() || String::from_utf8_lossy(&out.stdout).trim() != "isolated" {
        return Err(CPythonError::NoIsolation {
            why: last_line(&out.stderr),
        });
    }
    Ok(())
}

/// What the probe prints about the interpreter.
#[derive(serde::Deserialize)]
struct ProbeInfo {
    version: String,
    executable: String,
    dirs: Vec<String>,
}

/// Prints the interpreter's version and every directory it loads code from.
const PROBE_SCRIPT: &str = "import sys, json, sysconfig\n\
dirs = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable]\n\
dirs += [p for p in sys.path if p]\n\
dirs += [v for v in sysconfig.get_paths().values()]\n\
dirs.append(sysconfig.get_config_var('LIBDIR') or '')\n\
print(json.dumps({'version': sys.version.split()[0], 'executable': sys.executable, 'dirs': [d for d in dirs if d]}))\n";

/// The paths none of the others contain, deduplicated.
fn outermost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !kept.iter().any(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    kept
}

/// Whether `bwrap --help` lists `option`.
fn bwrap_supports(bwrap: &Path, option: &str) -> bool {
    std::process::Command::new(bwrap)
        .arg("--help")
        .output()
        .is_ok_and(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .any(|w| w == option)
        })
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .chain(["/usr/bin".into(), "/bin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.trim()
        .lines()
        .last()
        .unwrap_or("no output")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worker's thread cap and the parent's bound on host calls waiting
    /// at once are the same number.
    #[test]
    fn the_worker_caps_threads_as_the_parent_does() {
        let line = format!("\nMAX_THREADS = {}\n", crate::MAX_CELL_THREADS);
        assert!(WORKER_SCRIPT.contains(&line), "worker.py lacks {line:?}");
    }

    #[test]
    fn outermost_keeps_only_the_enclosing_paths() {
        let got = outermost(vec![
            "/usr/lib/python3.11".into(),
            "/usr".into(),
            "/opt/venv/lib".into(),
            "/opt/venv".into(),
            "/opt/venv2".into(),
            "/usr".into(),
        ]);
        let want: Vec<PathBuf> = vec!["/opt/venv".into(), "/opt/venv2".into(), "/usr".into()];
        assert_eq!(got, want);
    }
}
