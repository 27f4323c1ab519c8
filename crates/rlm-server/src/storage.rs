//! What the server writes to `<store>/runs/`, with every failure seen: run
//! records replaced atomically (a full disk never leaves a 0-byte or
//! half-written record), the trace appended as events come and synced when
//! the run ends, and trace files read back up to a torn last line.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use rlm_engine::trace::{Trace, TraceRecord};

use crate::state::StateError;

/// Replaces `path` with `bytes`: a temporary file beside it, synced, then
/// renamed over it (and the folder synced). On failure the old file, if
/// any, is left as it was and the temporary file is removed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{:08x}.tmp", fastrand::u32(..)));
    let written = (|| {
        // A new file, never one already there (nor a link planted under its name).
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself reaches the disk with the folder.
        File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Deletes temporary files that [`write_atomic`] left behind when the
/// process died mid-write.
pub(crate) fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A run's trace file `runs/<id>.jsonl`, written by the server from the
/// trace's history: appended (and flushed) as events come, so a killed
/// server keeps every event up to the kill; the first failure is kept to be
/// reported with the run.
#[derive(Debug)]
pub(crate) struct TraceFile {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    /// Events written so far.
    written: usize,
    /// The first failure: what and after which event.
    error: Option<String>,
}

impl TraceFile {
    /// Creates (truncates) the file.
    pub(crate) fn create(path: PathBuf) -> std::io::Result<Self> {
        let f = File::create(&path)?;
        Ok(TraceFile {
            path,
            out: Some(BufWriter::new(f)),
            written: 0,
            error: None,
        })
    }

    /// Appends the events not written yet. After a failure it writes no more
    /// (the run goes on; [`TraceFile::finish`] tries once more).
    pub(crate) fn catch_up(&mut self, trace: &Trace) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let records = trace.records_from(self.written);
        if records.is_empty() {
            return;
        }
        let mut result = Ok(());
        for r in &records {
            result = serde_json::to_string(r)
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(out, "{line}"));
            if result.is_err() {
                break;
            }
            self.written += 1;
        }
        if let Err(e) = result.and_then(|_| out.flush()) {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        self.error
            .get_or_insert_with(|| format!("after event {}: {e}", self.written));
        self.out = None;
    }

    /// Writes the rest and syncs the file. If any write failed, the whole
    /// trace is written again from memory (atomically); if that fails too,
    /// says what was lost and why.
    pub(crate) fn finish(&mut self, trace: &Trace) -> Result<(), StateError> {
        self.catch_up(trace);
        if let Some(out) = self.out.take() {
            match out.into_inner().map_err(|e| e.into_error()) {
                Ok(f) => {
                    if let Err(e) = f.sync_all() {
                        self.fail(e);
                    }
                }
                Err(e) => self.fail(e),
            }
        }
        let Some(error) = self.error.clone() else {
            return Ok(());
        };
        let mut text = Vec::new();
        for r in trace.records_from(0) {
            if let Ok(line) = serde_json::to_string(&r) {
                text.extend_from_slice(line.as_bytes());
                text.push(b'\n');
            }
        }
        match write_atomic(&self.path, &text) {
            Ok(()) => {
                self.error = None;
                Ok(())
            }
            Err(e) => Err(format!(
                "the trace {} ({error}; written again whole: {e})",
                self.path.display()
            )
            .into()),
        }
    }
}

/// Reads a trace file a batch at a time, up to its first unreadable line (a
/// line torn by a kill or a full disk ends it; nothing after it is trusted).
pub(crate) struct TraceReader {
    lines: Option<std::io::Lines<BufReader<File>>>,
}

impl TraceReader {
    /// The events of the file at `path` (none if it cannot be opened).
    pub(crate) fn open(path: Option<&Path>) -> Self {
        TraceReader {
            lines: path
                .and_then(|p| File::open(p).ok())
                .map(|f| BufReader::new(f).lines()),
        }
    }

    /// The next `max` events at most; empty at the end.
    pub(crate) fn next_batch(&mut self, max: usize) -> Vec<TraceRecord> {
        let mut out = Vec::new();
        while out.len() < max {
            let next = self.lines.as_mut().and_then(|lines| {
                lines
                    .next()?
                    .ok()
                    .and_then(|line| serde_json::from_str::<TraceRecord>(&line).ok())
            });
            match next {
                Some(r) => out.push(r),
                None => {
                    self.lines = None;
                    break;
                }
            }
        }
        out
    }
}

/// The last event of a trace file, read one batch at a time.
pub(crate) fn last_event(path: &Path) -> Option<TraceRecord> {
    let mut reader = TraceReader::open(Some(path));
    let mut last = None;
    loop {
        let batch = reader.next_batch(256);
        match batch.into_iter().last() {
            Some(r) => last = Some(r),
            None => return last,
        }
    }
}
