//! The wire protocol between the parent and a worker process.
//!
//! A frame is `u32 header length, JSON header, u32 blob count, (u64 length,
//! bytes)*` over the worker's stdin/stdout. Large strings (the corpus) travel as
//! raw blobs, never JSON-escaped, so loading 100 MB costs one memcpy per side.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest value (as JSON) that crosses between the parent and the worker:
/// a host call's arguments, a host function's answer, a variable. Larger ones
/// are refused with a clear error on the side that has them.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;
/// Lists, tuples and dicts a value may nest (serde_json reads at most 128
/// levels, and the message around the value takes a few).
pub const MAX_VALUE_DEPTH: usize = 100;
/// Upper bound on one header: a value plus the message around it. Also the
/// bound on a whole frame from the worker, so a corrupt or hostile length cannot
/// make the parent allocate wildly.
pub const MAX_HEADER_BYTES: u32 = MAX_VALUE_BYTES as u32 + 1024 * 1024;
/// Upper bound on one blob (4 GiB is beyond any memory limit we allow).
const MAX_BLOB_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// A decoded frame: a JSON header plus raw byte blobs it refers to by index.
#[derive(Debug, Default)]
pub struct Frame {
    /// The message, serialized as JSON.
    pub header: Vec<u8>,
    /// Raw payloads the header points at by index.
    pub blobs: Vec<Vec<u8>>,
}

/// Writes one frame (blocking), then flushes.
pub fn write_frame(out: &mut impl Write, header: &[u8], blobs: &[&[u8]]) -> io::Result<()> {
    let header_len = u32::try_from(header.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "frame header too large"))?;
    out.write_all(&header_len.to_le_bytes())?;
    out.write_all(header)?;
    out.write_all(&(blobs.len() as u32).to_le_bytes())?;
    for blob in blobs {
        out.write_all(&(blob.len() as u64).to_le_bytes())?;
        out.write_all(blob)?;
    }
    out.flush()
}

/// Reads one frame (blocking). `Ok(None)` on a clean end of stream.
pub fn read_frame(input: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut len4 = [0u8; 4];
    match input.read_exact(&mut len4) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let header_len = u32::from_le_bytes(len4);
    if header_len > MAX_HEADER_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame header length out of range",
        ));
    }
    let mut header = vec![0u8; header_len as usize];
    input.read_exact(&mut header)?;
    input.read_exact(&mut len4)?;
    let count = u32::from_le_bytes(len4);
    let mut blobs = Vec::with_capacity(count.min(1 << 20) as usize);
    for _ in 0..count {
        let mut len8 = [0u8; 8];
        input.read_exact(&mut len8)?;
        let len = u64::from_le_bytes(len8);
        if len > MAX_BLOB_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "frame blob length out of range",
            ));
        }
        let mut blob = vec![0u8; len as usize];
        input.read_exact(&mut blob)?;
        blobs.push(blob);
    }
    Ok(Some(Frame { header, blobs }))
}

/// How an interpreter input is shaped on the wire. Strings are blob indices.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireInput {
    /// One string: `blob` indexes the frame's blobs.
    Text {
        /// Blob index.
        blob: usize,
    },
    /// A list of strings, one blob each.
    TextList {
        /// Blob indices in order.
        blobs: Vec<usize>,
    },
    /// A list of document records; each text is a blob.
    Documents {
        /// Records (text replaced by its blob index).
        docs: Vec<WireDocument>,
    },
    /// Any JSON value (converted to dict/list/str/int/float/bool/None).
    Json {
        /// The value.
        value: Value,
    },
    /// One string the worker joins from literals and blobs (blobs may be
    /// shared with other inputs).
    Assembled {
        /// The pieces in order.
        pieces: Vec<WirePiece>,
    },
}

/// A piece of a [`WireInput::Assembled`] string.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WirePiece {
    /// Literal text.
    Literal {
        /// The text.
        text: String,
    },
    /// The text of a blob.
    Blob {
        /// Blob index.
        blob: usize,
    },
}

/// A document record whose text travels as a blob.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireDocument {
    /// Position in the corpus (0-based).
    pub index: u64,
    /// Display name (corpus-relative path).
    pub name: String,
    /// Stable document id.
    pub id: String,
    /// Length of the text in characters.
    pub chars: u64,
    /// Number of chunks the store split the document into.
    pub chunk_count: u64,
    /// Blob index of the text.
    pub text_blob: usize,
}

/// Per-interpreter settings sent with `Start`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireLimits {
    /// Interpreter time per cell, in milliseconds.
    pub cell_time_limit_ms: u64,
    /// Host calls allowed per cell.
    pub max_host_calls_per_cell: u64,
    /// Bytes of printed output the worker keeps per cell (head + tail).
    pub max_captured_output_bytes: usize,
    /// Maximum recursion depth of Python functions.
    pub max_recursion_depth: usize,
}

/// Messages from the parent to the worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Start the interpreter with these inputs and host functions.
    Start {
        /// Named inputs.
        inputs: Vec<(String, WireInput)>,
        /// Host functions: (name, awaitable).
        functions: Vec<(String, bool)>,
        /// Limits for every cell of the interpreter.
        limits: WireLimits,
    },
    /// Run one cell.
    Cell {
        /// Python source.
        code: String,
        /// The cell's number in the interpreter's life (1, 2, ...), echoed
        /// in its result: a result for another cell is never taken for
        /// this one's.
        #[serde(default)]
        seq: u64,
    },
    /// The answer to a host call.
    HostResult {
        /// The call being answered.
        call_id: u64,
        /// The value or the error to raise.
        result: WireHostResult,
    },
    /// Bind a variable to a JSON value (between cells).
    SetVar {
        /// The variable name.
        name: String,
        /// Its new value.
        value: Value,
    },
    /// Read a variable's value (between cells).
    GetVar {
        /// The variable name.
        name: String,
    },
}

/// A host function's answer on the wire.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireHostResult {
    /// Return this value to Python.
    Value {
        /// The value.
        value: Value,
    },
    /// Raise a Python exception at the call site.
    Raise {
        /// Exception type name, e.g. `RuntimeError`.
        exc_type: String,
        /// Message.
        message: String,
    },
    /// Stop the cell now (uncatchable); the cell reports `ended_by_host`.
    EndCell {
        /// Why the host stopped the cell.
        reason: String,
    },
    /// Stop the cell now (uncatchable) with this exception as its error, e.g.
    /// when its host calls ran past the host-wait limit.
    Abort {
        /// Exception type name, e.g. `TimeoutError`.
        exc_type: String,
        /// Message.
        message: String,
    },
}

/// Messages from the worker to the parent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// The worker is up and waits for `Start`.
    Hello {
        /// The monty version compiled in.
        monty_version: String,
    },
    /// The interpreter started (inputs loaded).
    Started,
    /// A `SetVar` was applied.
    VarSet,
    /// Python called a host function.
    HostCall {
        /// Correlation id for the answer, unique over the interpreter's life (an
        /// answer that arrives after its cell ended can never be taken for the
        /// answer to a call of a later cell).
        call_id: u64,
        /// Function name.
        name: String,
        /// Positional arguments.
        args: Vec<Value>,
        /// Keyword arguments.
        kwargs: serde_json::Map<String, Value>,
        /// True when Python will `await` the result (answers may come in any order).
        awaitable: bool,
    },
    /// A cell finished.
    CellDone(WireCellResult),
    /// The value of a variable asked for with `GetVar` (`null` when undefined).
    Var {
        /// Whether the variable exists.
        defined: bool,
        /// Its value as JSON.
        value: Value,
    },
    /// The answer to `GetVar` when the value cannot be sent (nested too deep,
    /// too large); the interpreter lives on.
    Unsendable {
        /// Why, naming the variable and the limit.
        message: String,
    },
    /// The worker cannot continue (bad request); it exits after sending this.
    Fatal {
        /// What went wrong.
        message: String,
    },
}

/// A finished cell on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireCellResult {
    /// Captured output (possibly cut in the middle, see `stdout_chars`).
    pub stdout: String,
    /// Characters the cell printed in total.
    pub stdout_chars: u64,
    /// `repr()` of the last expression's value, unless it was `None`.
    pub value: Option<String>,
    /// The exception that ended the cell.
    pub error: Option<WireCellError>,
    /// Worker-side wall time in microseconds.
    pub elapsed_us: u64,
    /// Host calls made by the cell.
    pub host_calls: u64,
    /// Set when a host function stopped the cell on purpose.
    pub ended_by_host: Option<String>,
    /// The `seq` of the cell this is the result of.
    #[serde(default)]
    pub seq: u64,
}

/// A Python exception on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireCellError {
    /// Exception type, e.g. `NameError`.
    pub exc_type: String,
    /// Message, with a hint appended when we know a workaround.
    pub message: String,
    /// 1-based line in the cell, when known.
    pub line: Option<u32>,
}

/// Reads one frame from the worker (parent side). `Ok(None)` on a clean end of
/// stream. A frame of more than `max_bytes` (header and blobs) is an
/// `InvalidData` error, and memory grows only with the bytes that arrive, so
/// a garbage length costs nothing.
pub async fn read_frame_async<R: tokio::io::AsyncRead + Unpin>(
    input: &mut R,
    max_bytes: u64,
) -> io::Result<Option<Frame>> {
    use tokio::io::AsyncReadExt;
    let mut len4 = [0u8; 4];
    match input.read_exact(&mut len4).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut left = max_bytes;
    let header_len = u64::from(u32::from_le_bytes(len4));
    let header = read_part(input, header_len, &mut left, max_bytes).await?;
    input.read_exact(&mut len4).await?;
    let count = u32::from_le_bytes(len4);
    let mut blobs = Vec::new();
    for _ in 0..count {
        let mut len8 = [0u8; 8];
        input.read_exact(&mut len8).await?;
        // Each blob is charged its bookkeeping too, so a flood of empty blobs
        // is bounded like the bytes are.
        left = left.saturating_sub(std::mem::size_of::<Vec<u8>>() as u64);
        let len = u64::from_le_bytes(len8);
        blobs.push(read_part(input, len, &mut left, max_bytes).await?);
    }
    Ok(Some(Frame { header, blobs }))
}

/// Reads `len` bytes of a frame that may take `left` more bytes.
async fn read_part<R: tokio::io::AsyncRead + Unpin>(
    input: &mut R,
    len: u64,
    left: &mut u64,
    max_bytes: u64,
) -> io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    if len > *left {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of more than {max_bytes} bytes (the limit) was announced"),
        ));
    }
    *left -= len;
    let mut bytes = Vec::new();
    let got = (&mut *input).take(len).read_to_end(&mut bytes).await?;
    if got as u64 != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(bytes)
}

/// Async counterpart of [`write_frame`] for the parent side.
pub async fn write_frame_async<W: tokio::io::AsyncWrite + Unpin>(
    out: &mut W,
    header: &[u8],
    blobs: &[&[u8]],
) -> io::Result<()> {
    write_frame_lazy_async(out, header, blobs.len(), |i| {
        Ok(std::borrow::Cow::Borrowed(blobs[i]))
    })
    .await
}

/// Writes a frame whose blobs are produced one at a time by `blob(i)` (for
/// `i` in `0..count`), so a large input never has to be in memory at once. An
/// error from `blob` stops the write half-way: the stream is unusable after it.
pub async fn write_frame_lazy_async<'a, W, F>(
    out: &mut W,
    header: &[u8],
    count: usize,
    mut blob: F,
) -> io::Result<()>
where
    W: tokio::io::AsyncWrite + Unpin,
    F: FnMut(usize) -> io::Result<std::borrow::Cow<'a, [u8]>>,
{
    use tokio::io::AsyncWriteExt;
    let header_len = u32::try_from(header.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "frame header too large"))?;
    let count32 = u32::try_from(count)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "too many frame blobs"))?;
    let mut prefix = Vec::with_capacity(header.len() + 8);
    prefix.extend_from_slice(&header_len.to_le_bytes());
    prefix.extend_from_slice(header);
    prefix.extend_from_slice(&count32.to_le_bytes());
    out.write_all(&prefix).await?;
    for i in 0..count {
        let bytes = blob(i)?;
        out.write_all(&(bytes.len() as u64).to_le_bytes()).await?;
        out.write_all(&bytes).await?;
    }
    out.flush().await
}
