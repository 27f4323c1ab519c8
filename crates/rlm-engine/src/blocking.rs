//! Blocking work called from async code (a database round trip, SQLite).

/// Runs `f`, which may wait on I/O (a database round trip), without
/// stalling the other tasks of the runtime worker it is called on: on a
/// multi-thread tokio runtime they move to another worker meanwhile
/// (`block_in_place`); elsewhere (a current-thread runtime, a plain thread)
/// `f` just runs. Every call of a [`crate::session::SessionBackend`] from
/// async code goes through it; back-ends may use it for their own waits.
pub fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
