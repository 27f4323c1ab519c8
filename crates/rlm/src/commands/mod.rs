//! The subcommands of `rlm`, one module each, and what they share.

pub mod ask;
pub mod bench;
pub mod corpus;
pub mod display;
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

/// Ctrl-C or SIGTERM: what stops `rlm serve` and `rlm mcp`.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
