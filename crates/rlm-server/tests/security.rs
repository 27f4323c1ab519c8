//! Who may use the server and what its answers carry, on a real socket: the
//! bearer token (401 naming what is missing, `WWW-Authenticate`, OpenAI's
//! shape under `/v1`, the query token of event streams), the Host check
//! (DNS rebinding), the Origin check (cross-site requests), bodies refused
//! from their declared length, text fields over their caps, half-open
//! connections, and the page's headers (CSP hashes, ETag and 304, gzip).

use std::io::Read;
use std::time::Duration;

use rlm_server::{Limits, ServerOptions};
use serde_json::json;

use crate::common;
use common::{Harness, error_message, needle_script, raw};

const TOKEN: &str = "s3cret-token_1";

fn with_token() -> ServerOptions {
    ServerOptions {
        token: Some(TOKEN.into()),
        ..ServerOptions::default()
    }
}

/// `n` connections to `addr`, each having sent half a request head.
fn half_open_clients(addr: &str, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            std::io::Write::write_all(&mut s, b"GET /api/info HTTP/1.1\r\nHost: 127").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
            s
        })
        .collect()
}

fn addr(h: &Harness) -> String {
    h.base.trim_start_matches("http://").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_the_api_and_the_page_loads_without_it() {
    let mut h = Harness::start_with(needle_script(), Limits::default(), with_token()).await;
    // Without it: 401, naming what is missing, with the challenge.
    for path in [
        "/api/info",
        "/api/sessions",
        "/api/health",
        "/api/documents",
        "/api/runs/r1-2/events",
    ] {
        let r = h.http.get(h.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"rlm\"");
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["status"], 401);
        assert!(error_message(&v).contains("requires a token"), "{v}");
    }
    // A wrong token, another scheme.
    let r = h
        .http
        .get(h.url("/api/info"))
        .bearer_auth("s3cret-token_2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(error_message(&v).contains("does not match"), "{v}");
    let r = h
        .http
        .get(h.url("/api/info"))
        .basic_auth("u", Some("p"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(error_message(&v).contains("not a Bearer token"), "{v}");
    // A question without the token reaches nothing.
    let r = h
        .http
        .post(h.url("/api/chat"))
        .json(&json!({"question": "What is the secret code?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(h.model.request_count(), 0, "nothing reached the model");
    // OpenAI's shape under /v1 (the SDKs send the token as their API key).
    let r = h.http.get(h.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_api_key");
    assert_eq!(v["error"]["type"], "authentication_error");
    // Open: the page, the API's shape.
    for path in ["/", "/api/openapi.json", "/api/docs"] {
        let r = h.http.get(h.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }

    // With it: everything works, and the info says a token is required.
    let (status, info) = h.get("/api/info").await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["auth"]["required"], true);
    let (status, started) = h
        .post("/api/runs", json!({"question": "What is the secret code?"}))
        .await;
    assert_eq!(status, 202, "{started}");
    let id = started["id"].as_str().unwrap();
    // An event stream by fetch with the header, and by EventSource's query token.
    let events = h.events(id, None).await;
    assert_eq!(events.last().unwrap().0, "end");
    let r = h
        .http
        .get(h.url(&format!("/api/runs/{id}/events?access_token={TOKEN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(common::read_events(r).await.len(), events.len());
    // ... but the query token is taken nowhere else, and a wrong one fails.
    let r = h
        .http
        .get(h.url(&format!("/api/info?access_token={TOKEN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = h
        .http
        .get(h.url(&format!("/api/runs/{id}/events?access_token=nope")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = h
        .http
        .get(h.url("/v1/models"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_hosts_and_other_sites_are_refused() {
    let mut h = Harness::start_with(
        needle_script(),
        Limits::default(),
        ServerOptions {
            allowed_hosts: vec!["rlm.example.org".into()],
            ..ServerOptions::default()
        },
    )
    .await;
    let a = addr(&h);
    let port = a.rsplit(':').next().unwrap().to_string();
    // DNS rebinding: a name that is not this server's, on any route.
    for path in ["/api/sessions", "/", "/api/chunks/x-1"] {
        let (status, text) = raw(
            &a,
            format!(
                "GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert_eq!(status, 403, "{path}: {text}");
        assert!(text.contains("does not answer to the host"), "{text}");
        assert!(text.contains("--allowed-host evil.example"), "{text}");
    }
    for host in [
        "localhost",
        "127.0.0.1",
        "rlm.example.org",
        "RLM.example.org.",
    ] {
        let (status, text) = raw(
            &a,
            format!("GET /api/info HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(status, 200, "{host}: {text}");
    }
    let (status, _) = raw(
        &a,
        b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.2\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 403, "another address than the bound one");

    // Cross-site: another page's POST, PATCH or DELETE is refused before it acts.
    let r = h
        .http
        .post(h.url("/api/chat"))
        .header("origin", "http://evil.example")
        .json(&json!({"question": "What is the secret code?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(error_message(&v).contains("cross-site"), "{v}");
    for origin in ["null", "http://127.0.0.1:1"] {
        let r = h
            .http
            .post(h.url("/api/sessions"))
            .header("origin", origin)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{origin}");
    }
    let r = h
        .http
        .delete(h.url("/api/sessions/x"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(h.model.request_count(), 0, "nothing reached the model");
    // Reading is not state-changing; the page's own origin and an allowed
    // host may post; no Origin (curl, SDKs) may too.
    let r = h
        .http
        .get(h.url("/api/info"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    for origin in [h.base.clone(), "https://rlm.example.org".to_string()] {
        let r = h
            .http
            .post(h.url("/api/sessions"))
            .header("origin", origin.as_str())
            .json(&json!({"title": "from the page"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{origin}");
    }
    let (status, _) = h.post("/api/sessions", json!({})).await;
    assert_eq!(status, 201);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_declared_bodies_and_long_fields_are_refused_at_once() {
    let limits = Limits {
        // Were the body waited for, no answer would come within the test.
        body_timeout: Duration::from_secs(600),
        max_briefing_chars: 1000,
        ..Limits::default()
    };
    let mut h = Harness::start(needle_script(), limits).await;
    let a = addr(&h);
    // 10^14 bytes announced, none sent: 413 from the head alone.
    for path in [
        "/api/chat",
        "/api/runs",
        "/v1/chat/completions",
        "/api/uploads?name=a.txt",
    ] {
        let (status, text) = raw(
            &a,
            format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000000000000\r\n\r\n").as_bytes(),
        );
        assert_eq!(status, 413, "{path}: {text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
        assert!(text.contains("100000000000000 bytes"), "{text}");
    }
    // A briefing over its cap is named (it used to escape the question's).
    let (status, v) = h
        .post(
            "/api/chat",
            json!({"question": "What is the secret code?", "briefing": "b".repeat(1001)}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        error_message(&v),
        "the briefing has 1001 characters; the limit is 1000 (rlm serve --max-briefing-chars)"
    );
    let (status, v) = h
        .post("/api/chat", json!({"question": "q".repeat(20_001)}))
        .await;
    assert_eq!(status, 400);
    assert!(
        error_message(&v).contains("the question has 20001 characters"),
        "{v}"
    );
    let (status, v) = h
        .post("/api/sessions", json!({"title": "t".repeat(201)}))
        .await;
    assert_eq!(status, 400);
    assert!(error_message(&v).contains("201 characters"), "{v}");
    let (status, v) = h
        .get(&format!("/api/documents?q={}", "q".repeat(501)))
        .await;
    assert_eq!(status, 400);
    assert!(error_message(&v).contains("q has 501 characters"), "{v}");
    assert_eq!(h.model.request_count(), 0, "nothing reached the model");

    // {date} in a briefing becomes today's date.
    let today: String = rlm_engine::trace::now_rfc3339().chars().take(10).collect();
    let (status, v) = h
        .post(
            "/api/chat",
            json!({"question": "What is the secret code?", "briefing": "Today is {date}."}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let system = h.model.requests()[0].system();
    assert!(system.contains(&format!("Today is {today}.")), "{system}");
    assert!(!system.contains("{date}"));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_are_all_closed_and_extra_ones_refused_at_once() {
    let limits = Limits {
        header_timeout: Duration::from_secs(5),
        max_connections: 64,
        ..Limits::default()
    };
    let mut h = Harness::start(needle_script(), limits).await;
    let a = addr(&h);
    // 200 clients send half a request head and wait: those the server took
    // (64 at most at once) are closed after the header timeout, the rest
    // refused with 503 at once.
    let clients = half_open_clients(&a, 200);
    let (mut closed, mut refused) = (0, 0);
    for mut s in clients {
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got);
        if text.starts_with("HTTP/1.1 503") {
            assert!(text.contains("connections open"), "{text}");
            refused += 1;
        } else {
            // Closed without an answer to half a head (or a 408 by hyper).
            assert!(got.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
            closed += 1;
        }
    }
    assert_eq!(closed + refused, 200, "every connection ended");
    assert!(refused > 0, "connections beyond the cap are refused");
    // The server still answers.
    let (status, _) = h.get("/api/info").await;
    assert_eq!(status, 200);
    h.shutdown().await;
}

/// A client that trickles its request head a byte at a time (each byte
/// well within the header timeout of the one before) and never sends its
/// token: the timeout is a deadline for the whole head, so the connection
/// ends by it, before the token is ever checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_trickled_a_byte_at_a_time_ends_at_the_header_timeout() {
    let limits = Limits {
        header_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let mut h = Harness::start_with(needle_script(), limits, with_token()).await;
    let a = addr(&h);
    let t0 = std::time::Instant::now();
    let ended = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(&a).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let head = b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for &b in head {
            if std::io::Write::write_all(&mut s, &[b]).is_err() {
                return t0.elapsed();
            }
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                // Closed (or answered 408 and closed).
                Ok(_) => return t0.elapsed(),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return t0.elapsed(),
                Err(_) => {}
            }
        }
        panic!("the whole head was trickled over {:?} and the connection is still open", t0.elapsed());
    })
    .await
    .unwrap();
    eprintln!("a trickled head ended after {ended:?}");
    assert!(ended < Duration::from_secs(3), "held {ended:?}");
    let (status, _) = h.get("/api/info").await;
    assert_eq!(status, 200);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_every_connection() {
    let limits = Limits {
        header_timeout: Duration::from_secs(20),
        max_connections: 64,
        max_connections_per_client: 16,
        ..Limits::default()
    };
    let mut h = Harness::start(needle_script(), limits).await;
    let a = addr(&h);
    // One client address holds half-open heads and reopens what is refused.
    let mut held = half_open_clients(&a, 40);
    let mut refused = 0;
    for s in &mut held {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut got = [0u8; 512];
        if let Ok(n) = s.read(&mut got) {
            let text = String::from_utf8_lossy(&got[..n]);
            if text.starts_with("HTTP/1.1 503") {
                assert!(text.contains("limit per client address"), "{text}");
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 24, "16 of the 40 are held, the rest refused");
    // Another client address is still answered.
    let other = {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut s = socket.connect(a.parse().unwrap()).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
    drop(held);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_has_a_strict_policy_an_etag_and_gzip() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let r = h.http.get(h.url("/")).send().await.unwrap();
    let headers = r.headers().clone();
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["cache-control"], "no-cache");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.starts_with("default-src 'none'; script-src 'self'"),
        "{csp}"
    );
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    // Every inline script of the page is allowed by its hash, nothing else.
    let page = rlm_server::INDEX_HTML;
    let lower = page.to_ascii_lowercase();
    let inline_scripts = lower
        .split("<script")
        .skip(1)
        .filter(|rest| {
            let tag = &rest[..rest.find('>').unwrap_or(0)];
            rest.starts_with(['>', ' ', '\n', '\t']) && !tag.contains("src=")
        })
        .count();
    let script_src = csp
        .split(';')
        .find(|d| d.trim().starts_with("script-src"))
        .unwrap();
    assert_eq!(
        script_src.matches("'sha256-").count(),
        inline_scripts,
        "{csp}"
    );
    assert_eq!(r.text().await.unwrap(), page);

    // Asked again with its ETag: 304, no body.
    let etag = headers["etag"].to_str().unwrap();
    let r = h
        .http
        .get(h.url("/"))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 304);
    assert_eq!(r.headers()["etag"], etag);
    assert!(r.bytes().await.unwrap().is_empty());

    // Gzip when accepted: smaller, and the same page once unpacked.
    let r = h
        .http
        .get(h.url("/"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let page_gz = r.bytes().await.unwrap();
    assert!(
        page_gz.len() < page.len(),
        "{} of {}",
        page_gz.len(),
        page.len()
    );
    let mut unpacked = String::new();
    flate2::read::GzDecoder::new(&page_gz[..])
        .read_to_string(&mut unpacked)
        .unwrap();
    assert_eq!(unpacked, page);

    // JSON answers too (the OpenAPI document), not small ones.
    let r = h
        .http
        .get(h.url("/api/openapi.json"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let packed = r.bytes().await.unwrap();
    let mut doc = String::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_string(&mut doc)
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let r = h
        .http
        .get(h.url("/api/runs"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert!(
        r.headers().get("content-encoding").is_none(),
        "a short answer is sent as it is"
    );
    // Every file the page loads is served from the binary, with the headers;
    // the page's weight, as sent plain and gzipped, is printed.
    let (mut raw_bytes, mut gz_bytes) = (page.len(), page_gz.len());
    for attr in ["src=\"", "href=\""] {
        for part in page.split(attr).skip(1) {
            let url = part.split('"').next().unwrap();
            if !url.starts_with('/') {
                continue;
            }
            let r = h.http.get(h.url(url)).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200, "{url}");
            assert!(r.headers().contains_key("etag"), "{url}");
            assert_eq!(r.headers()["x-content-type-options"], "nosniff");
            let ctype = r.headers()["content-type"].to_str().unwrap().to_string();
            if url.ends_with(".js") {
                assert!(ctype.starts_with("text/javascript"), "{url}: {ctype}");
            } else if url.ends_with(".css") {
                assert!(ctype.starts_with("text/css"), "{url}: {ctype}");
            }
            raw_bytes += r.bytes().await.unwrap().len();
            let r = h
                .http
                .get(h.url(url))
                .header("accept-encoding", "gzip")
                .send()
                .await
                .unwrap();
            gz_bytes += r.bytes().await.unwrap().len();
        }
    }
    eprintln!(
        "page weight (the page and the files it loads): {raw_bytes} bytes, {gz_bytes} gzipped"
    );
    // Another method on the page's files is 405; an unknown file 404.
    let r = h.http.post(h.url("/")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let (status, _) = h.get("/no-such-file.js").await;
    assert_eq!(status, 404);
    h.shutdown().await;
}

/// A measurement, not a check (`cargo test -p rlm-server --test integration --
/// --ignored --nocapture security::measure_three`): 3,000 clients each send half a request head and
/// wait, against the default limits (256 connections, 10 s header
/// timeout). Prints how long until every connection was answered or closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_three_thousand_half_open_connections() {
    let mut h = Harness::start(needle_script(), Limits::default()).await;
    let a = addr(&h);
    let started = std::time::Instant::now();
    let clients = half_open_clients(&a, 3000);
    let connected = started.elapsed();
    let (refused_by, ended_by, refused) = tokio::task::spawn_blocking(move || {
        // Each socket polled without blocking until it ended: when each
        // client saw its 503 or its close.
        let mut open: Vec<(std::net::TcpStream, Vec<u8>)> = clients
            .into_iter()
            .map(|s| {
                s.set_nonblocking(true).unwrap();
                (s, Vec::new())
            })
            .collect();
        let (mut refused_by, mut ended_by, mut refused) = (Duration::ZERO, Duration::ZERO, 0);
        while !open.is_empty() && started.elapsed() < Duration::from_secs(120) {
            open.retain_mut(|(s, got)| {
                let mut buf = [0u8; 1024];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                        Err(_) => break,
                    }
                }
                if got.starts_with(b"HTTP/1.1 503") {
                    refused += 1;
                    refused_by = started.elapsed();
                }
                ended_by = started.elapsed();
                false
            });
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            open.is_empty(),
            "{} connections still open after 2 minutes",
            open.len()
        );
        (refused_by, ended_by, refused)
    })
    .await
    .unwrap();
    eprintln!(
        "3000 half-open connections: connected in {connected:.2?}; {refused} refused with 503, the last {refused_by:.2?} after the first connect; every connection ended after {ended_by:.2?}"
    );
    let (status, _) = h.get("/api/info").await;
    assert_eq!(status, 200);
    h.shutdown().await;
}
