//! The real `rlm serve` for the browser tests, and a model address that can
//! be down and then come up (a TCP forwarder started on demand).

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlm_llm::testing::{ScriptedServer, TEST_API_KEY};
use serde_json::Value;

use super::webdriver::http;
use crate::common;

/// `rlm serve` on port 0 over `<dir>/store`; killed when dropped.
pub struct Server {
    child: Child,
    pub url: String,
    pub port: u16,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Serves `<dir>/store` with the model at `model_base_url`.
    pub fn start(dir: &Path, model_base_url: &str, extra: &[&str]) -> Self {
        let env = [
            ("RLM_PROVIDER", "openai"),
            ("RLM_BASE_URL", model_base_url),
            ("RLM_API_KEY", TEST_API_KEY),
            ("RLM_PRIMARY_MODEL", "root-model"),
            ("RLM_SUB_MODEL", "sub-model"),
        ];
        let mut args = vec!["serve", "--store", "store", "--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = common::command(dir, &args, &env)
            .spawn()
            .expect("rlm serve starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            let _ = tx.send(lines.next().and_then(Result::ok));
            for _ in lines {}
        });
        let first = rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
        let mut server = Server {
            child,
            url: String::new(),
            port: 0,
            stderr,
        };
        let Some(line) = first else {
            panic!(
                "rlm serve printed no address; stderr:\n{}",
                server.stderr.lock().unwrap()
            );
        };
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line of rlm serve: {line:?}"))
            .trim()
            .trim_end_matches('/')
            .to_string();
        server.port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {url:?}"));
        server.url = url;
        server
    }

    /// Serves with the scripted model.
    pub fn with_model(dir: &Path, model: &ScriptedServer, extra: &[&str]) -> Self {
        Self::start(dir, &model.base_url(), extra)
    }

    /// `GET path` with `Authorization: Bearer token` when given; must be 200.
    pub fn get(&self, path: &str, token: Option<&str>) -> Value {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        let (status, _, body) = super::webdriver::http_raw(self.port, "GET", path, None, &headers)
            .expect("server answers");
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    /// Stops the server (the page then finds it gone).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What the server wrote to stderr.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- rlm serve stderr ---\n{}", self.stderr.lock().unwrap());
        }
    }
}

/// A model address that refuses connections until [`Gate::open`], then
/// forwards each connection to the scripted model.
pub struct Gate {
    pub port: u16,
    target: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Gate {
    pub fn closed(model: &ScriptedServer) -> Self {
        Gate {
            port: super::webdriver::free_port(),
            target: model.addr(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The base URL to give `rlm serve` (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Starts listening: the model is up from now on.
    pub fn open(&self) {
        let listener =
            TcpListener::bind(("127.0.0.1", self.port)).expect("the gate's port is still free");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let (target, stop) = (self.target, self.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        if let Ok(upstream) = TcpStream::connect(target) {
                            pipe(client, upstream);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies bytes both ways until either side closes.
fn pipe(a: TcpStream, b: TcpStream) {
    let (mut a2, mut b2) = (a.try_clone().expect("clone"), b.try_clone().expect("clone"));
    let (mut a, mut b) = (a, b);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut a, &mut b2);
        let _ = b2.shutdown(std::net::Shutdown::Write);
    });
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut b, &mut a2);
        let _ = a2.shutdown(std::net::Shutdown::Write);
    });
}

/// Keeps `http` reachable for the tests that poke the API directly.
pub fn api(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    http(port, method, path, body).expect("server answers")
}
