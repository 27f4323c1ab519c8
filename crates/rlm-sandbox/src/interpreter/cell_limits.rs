//! A cell's time limits and the checks on what its worker sends back: the
//! clock that splits the cell's own time from time waiting on the host, the
//! limit a cell ran past, and a result the worker could not have sent
//! honestly.

use std::time::Duration;

use super::{CellError, CellResult, HostCalls, SandboxConfig};
use crate::protocol::{WireCellResult, WireHostResult};

/// The time a cell has left.
pub(super) struct CellClock {
    /// Time the worker may compute, with no call or only lookups in flight...
    compute_left: Duration,
    /// ... and time the cell may wait with calls on the host in flight.
    host_left: Duration,
    /// Set when a limit ran out: later calls are answered with it at once.
    pub(super) refusal: Option<Refusal>,
}

impl CellClock {
    pub(super) fn new(config: &SandboxConfig) -> Self {
        CellClock {
            compute_left: config.cell_time_limit.saturating_add(config.kill_grace),
            host_left: config.host_wait_limit,
            refusal: None,
        }
    }

    /// How long to wait for the next event. Lookups the host answers itself
    /// count as the cell's own time; only calls waiting on something slow by
    /// nature (a model) count against the host-wait limit.
    pub(super) fn budget(&self, calls: &HostCalls, config: &SandboxConfig) -> Duration {
        if calls.waits_on_host() {
            self.host_left
        } else if !calls.is_empty() {
            // Only lookups in flight: the parent alone keeps the cell's
            // time, with no grace (that is for an unresponsive worker).
            self.compute_left.saturating_sub(config.kill_grace)
        } else {
            self.compute_left
        }
    }

    pub(super) fn spend(&mut self, waiting_on_host: bool, spent: Duration) {
        let left = if waiting_on_host {
            &mut self.host_left
        } else {
            &mut self.compute_left
        };
        *left = left.saturating_sub(spent);
    }

    /// After `refusal` ended the calls in flight: the worker has the rest of
    /// its own time (at least the grace) to finish, or only the grace when
    /// its own time is what ran out.
    pub(super) fn refused(&mut self, refusal: Refusal, config: &SandboxConfig) {
        self.refusal = Some(refusal);
        self.compute_left = match refusal {
            Refusal::HostWait => self.compute_left.max(config.kill_grace),
            Refusal::CellTime => config.kill_grace,
        };
    }
}

/// A limit a cell ran past; every host call after it is answered with it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Refusal {
    /// Calls waiting on the host ran past [`SandboxConfig::host_wait_limit`].
    HostWait,
    /// The interpreter and its lookups ran past
    /// [`SandboxConfig::cell_time_limit`].
    CellTime,
}

impl Refusal {
    /// The uncatchable `TimeoutError` that ends the cell.
    pub(super) fn answer(self, config: &SandboxConfig) -> WireHostResult {
        let message = match self {
            Refusal::HostWait => format!(
                "host calls did not finish within {:?} (the limit a cell may wait for them); \
                 the cell was stopped. Make fewer or smaller calls per cell",
                config.host_wait_limit
            ),
            Refusal::CellTime => format!(
                "the cell ran past its time limit ({:?}, its lookups included); \
                 the cell was stopped and its variables are kept. Look up less per cell: \
                 fewer or smaller searches, then read what they found",
                config.cell_time_limit
            ),
        };
        WireHostResult::Abort {
            exc_type: "TimeoutError".into(),
            message,
        }
    }
}

/// Room beyond the output cap for the worker's own notes in the text
/// (where it cut the output, a value's repr cut in the middle).
const OUTPUT_SLACK_BYTES: usize = 64 * 1024;

/// A cell result the worker could not have sent honestly: for a later
/// cell, or with more output than its cap.
pub(super) fn check_result(
    r: &WireCellResult,
    seq: u64,
    config: &SandboxConfig,
) -> Result<(), String> {
    if r.seq != seq {
        return Err(format!(
            "the worker sent the result of cell {} while cell {seq} ran; the worker was stopped",
            r.seq
        ));
    }
    let cap = config.max_captured_output_bytes + OUTPUT_SLACK_BYTES;
    let longest = r.stdout.len().max(r.value.as_ref().map_or(0, String::len));
    if longest > cap {
        return Err(format!(
            "the cell's output has {longest} bytes, past the cap of {} its worker should have kept; the worker was stopped",
            config.max_captured_output_bytes
        ));
    }
    Ok(())
}

pub(super) fn cell_result(r: WireCellResult, elapsed: Duration) -> CellResult {
    CellResult {
        stdout: r.stdout,
        stdout_chars: r.stdout_chars,
        value: r.value,
        error: r.error.map(|e| CellError {
            exc_type: e.exc_type,
            message: e.message,
            line: e.line,
        }),
        elapsed,
        host_calls: r.host_calls,
        ended_by_host: r.ended_by_host,
    }
}
