//! The threads of a CPython sandbox, counted by the kernel. The worker
//! refuses a Python thread past its cap, but a cell shares the interpreter
//! with the worker (it can reach the functions the cap wraps, or start
//! threads through `ctypes`), and a C library may start pools of its own.
//! So the parent reads how many threads the sandbox's processes run, every
//! [`INTERVAL`], and stops the sandbox past its limit, saying why in the
//! worker's error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the threads are counted.
const INTERVAL: Duration = Duration::from_millis(100);

/// Processes looked at below the worker (bubblewrap, its init, Python: the
/// seccomp filter refuses more).
const MAX_PROCESSES: usize = 16;

/// Stops the watcher when dropped (with the worker it watches: its process
/// id could then be another process's).
#[derive(Debug)]
pub(crate) struct Watcher(tokio::task::AbortHandle);

impl Drop for Watcher {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches the process `pid` and those below it: past `limit` threads in
/// all, `why` gets a line saying so (the worker's error names it) and the
/// process is killed (its sandbox dies with it). `None` where the threads
/// cannot be read (not Linux, no `/proc`).
pub(crate) fn watch(pid: u32, limit: u64, why: Arc<Mutex<String>>) -> Option<Watcher> {
    let started = start_time(pid)?;
    threads_below(pid)?;
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // The same process still (its id is not reused while it lives).
            if start_time(pid) != Some(started) {
                return;
            }
            let Some(n) = threads_below(pid) else { return };
            if n > limit {
                let mut t = why.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&format!(
                    "\nthe sandbox ran {n} threads at once, past its limit of {limit}: \
                     start fewer threads (join some first), or use asyncio.gather for many host calls\n"
                ));
                drop(t);
                kill(pid);
                return;
            }
        }
    });
    Some(Watcher(task.abort_handle()))
}

/// When process `pid` started (field 22 of its `stat`), in clock ticks
/// since boot.
fn start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 22)
}

/// Threads of process `pid` and of the processes below it.
pub(crate) fn threads_below(pid: u32) -> Option<u64> {
    let mut total = 0;
    let mut todo = vec![pid];
    let mut seen = 0;
    while let Some(p) = todo.pop() {
        seen += 1;
        if seen > MAX_PROCESSES {
            break;
        }
        // A process that just ended counts nothing.
        let Some(n) = stat_field(p, 20) else {
            if p == pid {
                return None;
            }
            continue;
        };
        total += n;
        todo.extend(children(p));
    }
    Some(total)
}

/// Field `n` (1-based, as `proc(5)` numbers them) of `/proc/PID/stat`.
fn stat_field(pid: u32, n: usize) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The child processes of `pid` (of each of its threads).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    out
}

#[cfg(unix)]
fn kill(pid: u32) {
    // SAFETY: kill(2) with a process id and a signal number; the process is
    // the watched one (its start time was checked just before).
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill(_pid: u32) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn counts_the_threads_of_a_process_and_those_below_it() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 3 & sleep 3 & wait"])
            .spawn()
            .unwrap();
        let pid = sh.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while threads_below(pid) != Some(3) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(threads_below(pid), Some(3));
        assert!(start_time(pid).is_some());
        sh.kill().unwrap();
        sh.wait().unwrap();
        assert_eq!(threads_below(pid), None);
    }
}
