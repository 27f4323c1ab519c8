//! The sandbox worker process: one monty REPL interpreter over stdin/stdout.
//!
//! Started by `rlm_sandbox::Interpreter`; not meant to be run by hand.

/// Counts every allocation of this process so the memory limit can be enforced.
#[global_allocator]
static ALLOCATOR: rlm_sandbox::LimitedAllocator = rlm_sandbox::LimitedAllocator;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(rlm_sandbox::worker::run_worker(&args));
}
