//! The global allocator of binaries that host the worker (`rlm-sandbox-worker`,
//! `rlm __sandbox-worker`).
//!
//! `monty_alloc::LimitedAllocator` counts every byte from the first allocation
//! (a counter armed later would see frees it never charged) and ends the process
//! with "monty worker: allocation of N bytes failed" (exit 65) when the system
//! allocator refuses. That is right inside a worker, whose parent reads exit 65
//! as "the cell exceeded the memory limit", but wrong in every other command of a
//! binary that installs it: `rlm index` under a memory ulimit printed the worker
//! message, and a `try_reserve` could not fail gracefully. This allocator counts
//! the same way from the start, and delegates to monty's only once the process
//! became a worker ([`enter_worker_mode`], called by [`crate::worker::run_worker`]);
//! before that a refused allocation is returned to the caller as null, which is
//! what the standard library expects (`try_reserve` errors, infallible
//! allocations report "memory allocation of N bytes failed").

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use monty_types::LIVE_MEMORY;

/// Set once the process runs a worker; never cleared.
static WORKER: AtomicBool = AtomicBool::new(false);

/// Makes monty's limits (and its out-of-memory exit) apply to this process.
pub(crate) fn enter_worker_mode() {
    WORKER.store(true, Ordering::SeqCst);
}

fn in_worker() -> bool {
    WORKER.load(Ordering::Relaxed)
}

/// Counts live bytes like `monty_alloc::LimitedAllocator` (so the worker's memory
/// limit can be armed) and enforces its limits only inside a worker process.
pub struct LimitedAllocator;

// SAFETY: every method forwards its arguments unchanged to `System` or to
// `monty_alloc::LimitedAllocator` (which forwards to `System`) and returns what
// they returned. Both paths keep `LIVE_MEMORY` equal to the bytes of live
// blocks, so a block allocated on one path may be freed on the other.
unsafe impl GlobalAlloc for LimitedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if in_worker() {
            // SAFETY: forwarded unchanged.
            return unsafe { monty_alloc::LimitedAllocator.alloc(layout) };
        }
        // SAFETY: forwarded unchanged.
        counted(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if in_worker() {
            // SAFETY: forwarded unchanged.
            return unsafe { monty_alloc::LimitedAllocator.alloc_zeroed(layout) };
        }
        // SAFETY: forwarded unchanged.
        counted(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // monty's dealloc only refunds the count and frees: right on both paths.
        // SAFETY: `ptr` came from this allocator with this `layout`.
        unsafe { monty_alloc::LimitedAllocator.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if in_worker() {
            // SAFETY: forwarded unchanged.
            return unsafe { monty_alloc::LimitedAllocator.realloc(ptr, layout, new_size) };
        }
        // SAFETY: forwarded unchanged.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            if new_size >= layout.size() {
                LIVE_MEMORY.fetch_add(new_size - layout.size(), Ordering::Relaxed);
            } else {
                LIVE_MEMORY.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        new_ptr
    }
}

/// Counts a block the system allocated (a refusal, null, is passed on).
fn counted(ptr: *mut u8, size: usize) -> *mut u8 {
    if !ptr.is_null() {
        LIVE_MEMORY.fetch_add(size, Ordering::Relaxed);
    }
    ptr
}
