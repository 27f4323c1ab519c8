//! The subcommands of `rlm`, one module each, and what they share.

pub mod ask;
pub mod bench;
pub mod corpus;
pub mod display;
pub mod fetch;
pub mod llm;
pub mod mcp;
pub mod model;
pub mod repl;
pub mod serve;
pub mod store_config;
pub mod trace;

/// `value` of a numeric `flag` in `range`, or a one-line error naming the
/// flag, written like the engine's (`--max-depth="11" is not a whole number
/// from 0 to 10`).
pub(crate) fn check_flag(
    flag: &str,
    value: u64,
    range: std::ops::RangeInclusive<u64>,
) -> anyhow::Result<u64> {
    if range.contains(&value) {
        return Ok(value);
    }
    anyhow::bail!(
        "{flag}=\"{value}\" is not a whole number from {} to {}",
        range.start(),
        range.end()
    )
}

/// Ctrl-C or SIGTERM, with the handlers installed when this is made: a
/// server makes it before it says where it listens, so a signal sent as soon
/// as a script reads that line stops it cleanly instead of killing it.
pub(crate) struct ShutdownSignal {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignal {
    /// Installs the handlers now (inside a tokio runtime).
    pub(crate) fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            ShutdownSignal {
                term: signal(SignalKind::terminate()).ok(),
                interrupt: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        ShutdownSignal {}
    }

    /// Waits for Ctrl-C or SIGTERM.
    pub(crate) async fn wait(self) {
        #[cfg(unix)]
        {
            let (Some(mut term), Some(mut interrupt)) = (self.term, self.interrupt) else {
                let _ = tokio::signal::ctrl_c().await;
                return;
            };
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Ctrl-C or SIGTERM, handlers installed when first polled.
pub(crate) async fn shutdown_signal() {
    ShutdownSignal::install().wait().await
}
