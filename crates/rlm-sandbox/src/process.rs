//! The worker process's hygiene: it keeps no descriptor it inherited besides
//! stdin/stdout/stderr, and it dies with its parent.
//!
//! Both are done by the worker itself, at its start, so they hold whoever
//! spawned it (and the parent keeps `posix_spawn`'s fast path, which a
//! `pre_exec` hook would disable). `PR_SET_PDEATHSIG` is not used: it fires
//! when the parent *thread* that forked exits (a tokio blocking-pool thread
//! retires after 10 s idle), which would kill healthy workers.
//!
//! The few libc calls are declared here rather than pulling in a crate.

/// Closes every descriptor above 2: the parent's other files, sockets and
/// pipes that were opened without `O_CLOEXEC` must not reach Python.
/// Call before any thread starts.
#[cfg(unix)]
pub(crate) fn close_inherited_fds() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range(3, ~0, 0) only closes descriptors; nothing in this
        // process uses one yet.
        if unsafe { sys::syscall(sys::SYS_CLOSE_RANGE, 3u32, u32::MAX, 0u32) } == 0 {
            return;
        }
    }
    // Older kernels and other systems: close what the fd directory lists.
    let dir = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    let fds: Vec<i32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: closing a descriptor this process never uses; the listing's
        // own descriptor is already closed (EBADF, ignored).
        unsafe { sys::close(fd) };
    }
}

#[cfg(not(unix))]
pub(crate) fn close_inherited_fds() {}

/// Ends this process as soon as process `parent` ends (also when it already
/// has). On Linux a pidfd wakes a watcher thread the moment the parent exits;
/// elsewhere (or without pidfds) the thread checks every 100 ms.
#[cfg(unix)]
pub(crate) fn die_with_parent(parent: u32) {
    let Ok(pid) = i32::try_from(parent) else {
        return;
    };
    #[cfg(target_os = "linux")]
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let pidfd = unsafe { sys::syscall(sys::SYS_PIDFD_OPEN, pid, 0u32) } as i32;
    #[cfg(not(target_os = "linux"))]
    let pidfd = -1;
    // Checked after the pidfd is open, so a parent that dies in between is
    // seen by one or the other. Spawned by it, the worker is its child; behind
    // a wrapper (e.g. `nice`, `timeout`) it is not, and the parent's
    // existence is what counts.
    let direct = std::os::unix::process::parent_id() == parent;
    let gone = move || {
        if direct {
            std::os::unix::process::parent_id() != parent
        } else {
            // SAFETY: signal 0 only checks that the process exists.
            let exists = unsafe { sys::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(sys::EPERM);
            !exists
        }
    };
    if gone() {
        orphaned();
    }
    let watcher = std::thread::Builder::new()
        .name("parent-watch".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            if pidfd >= 0 {
                let mut fds = [sys::PollFd {
                    fd: pidfd,
                    events: sys::POLLIN,
                    revents: 0,
                }];
                loop {
                    // SAFETY: `fds` is a valid array of one pollfd.
                    let n = unsafe { sys::poll(fds.as_mut_ptr(), 1, -1) };
                    if n > 0 {
                        orphaned();
                    }
                    if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(sys::EINTR) {
                        break;
                    }
                }
            }
            loop {
                if gone() {
                    orphaned();
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
    if watcher.is_err() {
        eprintln!("rlm sandbox worker: cannot watch the parent process");
    }
}

#[cfg(not(unix))]
pub(crate) fn die_with_parent(_parent: u32) {}

/// Ends the process at once, whatever its other threads are doing.
#[cfg(unix)]
fn orphaned() -> ! {
    // SAFETY: _exit ends the process without running anything else.
    unsafe { sys::_exit(1) }
}

#[cfg(unix)]
mod sys {
    #[cfg(target_os = "linux")]
    use std::ffi::c_long;
    use std::ffi::{c_int, c_short};

    /// Same number on every Linux architecture (new syscalls are unified).
    #[cfg(target_os = "linux")]
    pub const SYS_PIDFD_OPEN: c_long = 434;
    #[cfg(target_os = "linux")]
    pub const SYS_CLOSE_RANGE: c_long = 436;
    pub const POLLIN: c_short = 1;
    pub const EPERM: i32 = 1;
    pub const EINTR: i32 = 4;

    #[repr(C)]
    pub struct PollFd {
        pub fd: c_int,
        pub events: c_short,
        pub revents: c_short,
    }

    unsafe extern "C" {
        #[cfg(target_os = "linux")]
        pub fn syscall(number: c_long, ...) -> c_long;
        pub fn close(fd: c_int) -> c_int;
        pub fn kill(pid: c_int, sig: c_int) -> c_int;
        #[cfg(target_os = "linux")]
        pub fn poll(fds: *mut PollFd, nfds: std::ffi::c_ulong, timeout: c_int) -> c_int;
        #[cfg(not(target_os = "linux"))]
        pub fn poll(fds: *mut PollFd, nfds: std::ffi::c_uint, timeout: c_int) -> c_int;
        pub fn _exit(status: c_int) -> !;
    }
}
