//! A small W3C WebDriver client over plain HTTP/1.1 (`TcpStream`), for
//! headless Chromium through chromedriver. One browser serves every test of
//! the binary (tests take it in turn); it is closed when the process exits.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SKIP: &str =
    "skipped: no chromedriver (scripts/install-browser installs chromium and chromium-driver)";
/// How long a page may take to show what a test waits for.
pub const WAIT: Duration = Duration::from_secs(25);
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

// ---------------------------------------------------------------------------
// HTTP

/// `method path` on `127.0.0.1:port`: status and the body parsed as JSON
/// (`Null` when empty or not JSON).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let (status, _, bytes) = http_raw(
        port,
        method,
        path,
        body.map(|b| b.to_string()).as_deref(),
        &[],
    )?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// One request, one connection: status, lower-cased head, body (de-chunked).
pub fn http_raw(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(90)))?;
    let body = body.unwrap_or("");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        request.push_str("Content-Type: application/json; charset=utf-8\r\n");
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let got = raw.len() - end - 4;
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|n| got >= n)
                || (head.contains("chunked") && raw.ends_with(b"0\r\n\r\n"))
            {
                break;
            }
        }
    }
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("response without a header end"))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head}")))?;
    let mut payload = raw[end + 4..].to_vec();
    if head
        .lines()
        .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"))
    {
        payload = dechunk(&payload);
    }
    Ok((status, head, payload))
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// A port nothing listens on (yet).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The browser

/// A chromedriver process and its Chromium session.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

/// chromedriver and chromium, if both are installed.
fn binaries() -> Option<(PathBuf, PathBuf)> {
    let pick = |var: &str, default: &str| {
        let path = std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default));
        path.is_file().then_some(path)
    };
    Some((
        pick("CHROMEDRIVER", "/usr/bin/chromedriver")?,
        pick("CHROME_BIN", "/usr/bin/chromium")?,
    ))
}

static SHARED: Mutex<Option<Browser>> = Mutex::new(None);
/// (driver port, session, driver pid) of the shared browser, for the exit hook.
static FOR_EXIT: Mutex<Option<(u16, String, u32)>> = Mutex::new(None);

#[cfg(unix)]
extern "C" fn close_at_exit() {
    let Ok(mut guard) = FOR_EXIT.try_lock() else {
        return;
    };
    if let Some((port, session, pid)) = guard.take() {
        let _ = http(port, "DELETE", &format!("/session/{session}"), None);
        // SAFETY: kill(2) on the chromedriver this process started.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
    }
}

/// The shared browser, for one test at a time; `None` (after printing why)
/// when chromedriver is missing, unless `RLM_REQUIRE_BROWSER=1` (CI).
pub fn browser() -> Option<MutexGuard<'static, Option<Browser>>> {
    let mut guard = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if guard
        .as_ref()
        .is_some_and(|b| b.try_cmd("GET", "/url", None).is_err())
    {
        *guard = None; // crashed: start another
    }
    if guard.is_none() {
        let Some((driver, chrome)) = binaries() else {
            if std::env::var("RLM_REQUIRE_BROWSER").as_deref() == Ok("1") {
                panic!("{SKIP}");
            }
            println!("{SKIP}");
            return None;
        };
        let b = Browser::start(&driver, &chrome);
        let first = FOR_EXIT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace((b.port, b.session.clone(), b.driver.id()))
            .is_none();
        // Closed when the test process exits (statics are never dropped).
        #[cfg(unix)]
        if first {
            // SAFETY: registers a plain function, run once by exit(3).
            unsafe {
                libc::atexit(close_at_exit);
            }
        }
        #[cfg(not(unix))]
        let _ = first;
        *guard = Some(b);
    }
    Some(guard)
}

impl Browser {
    fn start(driver: &Path, chrome: &Path) -> Self {
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let mut b = Browser {
            driver: child,
            port,
            session: String::new(),
        };
        let deadline = Instant::now() + WAIT;
        while !matches!(http(port, "GET", "/status", None), Ok((200, ref v)) if v["value"]["ready"] == true)
        {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {
                "binary": chrome.to_string_lossy(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1440,900", "--hide-scrollbars", "--force-color-profile=srgb"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let (status, v) = http(port, "POST", "/session", Some(&caps)).expect("new session");
        assert_eq!(status, 200, "cannot start chromium: {v}");
        b.session = v["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        b
    }

    /// A WebDriver command; panics on a WebDriver error.
    pub fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_cmd(method, path, body)
            .unwrap_or_else(|e| panic!("webdriver {method} {path}: {e}"))
    }

    /// A WebDriver command; the error as text.
    pub fn try_cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let full = format!("/session/{}{path}", self.session);
        let (status, v) =
            http(self.port, method, &full, body.as_ref()).map_err(|e| e.to_string())?;
        if status == 200 {
            Ok(v["value"].clone())
        } else {
            Err(format!(
                "{status} {}: {}",
                v["value"]["error"], v["value"]["message"]
            ))
        }
    }

    /// Chrome DevTools command (`Emulation.*`, `Browser.*`).
    pub fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
    }

    /// The viewport at exactly `width`×`height` CSS pixels (touch and
    /// mobile metrics below 800 px wide).
    pub fn viewport(&self, width: u32, height: u32) {
        let scheme = self.js(
            "return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';",
            json!([]),
        );
        self.color_scheme(scheme.as_str().unwrap_or("light"));
        let mobile = width < 800;
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        );
        self.cdp(
            "Emulation.setTouchEmulationEnabled",
            json!({"enabled": mobile}),
        );
    }

    /// The OS color scheme the page sees (`light` or `dark`), with reduced
    /// motion (drawers open at once, so clicks never land mid-slide).
    pub fn color_scheme(&self, scheme: &str) {
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [
                {"name": "prefers-color-scheme", "value": scheme},
                {"name": "prefers-reduced-motion", "value": "reduce"},
            ]}),
        );
    }

    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    /// Runs `script` (a function body; `arguments` are `args`).
    pub fn js(&self, script: &str, args: Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Runs an async script: it calls `arguments[arguments.length - 1]`
    /// with its result.
    pub fn js_async(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/timeouts", Some(json!({"script": 120_000})));
        self.cmd(
            "POST",
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
    }

    pub fn text(&self, css: &str) -> String {
        self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
            json!([css]),
        )
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// True when `css` matches an element that is rendered (not hidden).
    pub fn visible(&self, css: &str) -> bool {
        self.js(
            "const e = document.querySelector(arguments[0]);
             if (!e) return false;
             const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
             return r.width > 0 && r.height > 0 && s.visibility !== 'hidden';",
            json!([css]),
        ) == true
    }

    pub fn count(&self, css: &str) -> u64 {
        self.js(
            "return document.querySelectorAll(arguments[0]).length;",
            json!([css]),
        )
        .as_u64()
        .unwrap_or(0)
    }

    pub fn find(&self, css: &str) -> Option<String> {
        self.try_cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )
        .ok()
        .and_then(|v| v[ELEMENT_KEY].as_str().map(str::to_string))
    }

    pub fn element(&self, css: &str) -> String {
        self.find(css)
            .unwrap_or_else(|| panic!("no element {css}; page: {}", self.page_text()))
    }

    /// A real click (WebDriver scrolls it into view and fails when covered).
    pub fn click(&self, css: &str) {
        let id = self.element(css);
        self.cmd("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        );
    }

    /// Presses keys on whatever has focus (`\u{E004}` Tab, `\u{E007}` Enter,
    /// `\u{E00C}` Escape).
    pub fn keys(&self, keys: &str) {
        let mut actions = Vec::new();
        for k in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": k.to_string()}));
            actions.push(json!({"type": "keyUp", "value": k.to_string()}));
        }
        self.cmd(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "kb", "actions": actions}]})),
        );
        self.cmd("DELETE", "/actions", None);
    }

    /// Presses `key` while `modifier` is held (`\u{E009}` Control).
    pub fn chord(&self, modifier: char, key: char) {
        let actions = [
            json!({"type": "keyDown", "value": modifier.to_string()}),
            json!({"type": "keyDown", "value": key.to_string()}),
            json!({"type": "keyUp", "value": key.to_string()}),
            json!({"type": "keyUp", "value": modifier.to_string()}),
        ];
        self.cmd(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "kb", "actions": actions}]})),
        );
        self.cmd("DELETE", "/actions", None);
    }

    /// `id`, else a short description, of the focused element.
    pub fn focused(&self) -> String {
        self.js(
            "const e = document.activeElement; if (!e) return '';
             return e.id || (e.tagName + '.' + e.className + ':' + (e.getAttribute('aria-label') || e.textContent.trim().slice(0, 40)));",
            json!([]),
        )
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// The page's visible text (its last 4,000 characters), for failures.
    pub fn page_text(&self) -> String {
        let text = self
            .try_cmd(
                "POST",
                "/execute/sync",
                Some(json!({"script": "return document.body.innerText;", "args": []})),
            )
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let tail: String = text.chars().rev().take(4000).collect();
        tail.chars().rev().collect()
    }

    /// Polls `check` until it gives a value; panics with the page after [`WAIT`].
    pub fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; page text:\n{}",
                    self.page_text()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the first element matching `css` contains `needle`.
    pub fn wait_text(&self, css: &str, needle: &str) -> String {
        self.wait_for(&format!("{css} to contain {needle:?}"), |b| {
            let t = b.text(css);
            t.contains(needle).then_some(t)
        })
    }

    /// Waits until `css` matches an element.
    pub fn wait_el(&self, css: &str) {
        self.wait_for(&format!("an element {css}"), |b| {
            (b.count(css) > 0).then_some(())
        });
    }

    /// Saves a PNG of the viewport as `target/ui-screenshots/<name>.png`.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let data = self.cmd("GET", "/screenshot", None);
        let png = base64_decode(data.as_str().expect("base64 PNG"));
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot folder");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }

    /// Console errors the page logged since the last call.
    pub fn console_errors(&self) -> Vec<String> {
        let logs = self
            .try_cmd("POST", "/se/log", Some(json!({"type": "browser"})))
            .unwrap_or(Value::Null);
        logs.as_array()
            .map(|a| {
                a.iter()
                    .filter(|l| l["level"] == "SEVERE")
                    .filter_map(|l| l["message"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `target/ui-screenshots` of this workspace.
pub fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|t| t.join("ui-screenshots"))
        .expect("the target folder")
}
