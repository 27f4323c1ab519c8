//! Connections: hyper's HTTP/1 server with the limits a server on a network
//! needs and `axum::serve` does not set: a deadline for each request head
//! (and for the next request on a kept-alive connection), one for each
//! request body, one for a write a client stopped reading, and a cap on
//! connections open at once. A client that sends half a request, opens idle
//! connections or stops reading an event stream holds a connection for a
//! bounded time, never forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Sleep;
use tower_service::Service;

use crate::Limits;

/// The error a request body gives when it did not arrive by its deadline.
pub(crate) const BODY_TIMED_OUT: &str = "the request body did not arrive in time";

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting, lets `on_shutdown` run (it cancels the runs), closes kept-alive
/// connections gracefully and waits up to `limits.shutdown_grace` for the
/// open ones.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()>,
    on_shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let clients = Arc::new(ClientCounts::default());
    // Every connection task holds a receiver: the sender sees them all
    // dropped when the last connection ends.
    let (stopping_tx, stopping_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (tcp, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => (tcp, peer.ip()),
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                    ) {
                        eprintln!("rlm serve: cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Events are small writes: without TCP_NODELAY, Nagle's algorithm
        // and delayed ACKs hold each for ~40 ms.
        let _ = tcp.set_nodelay(true);
        let Some(place) = clients.take(client, limits.max_connections_per_client) else {
            refuse(
                &tcp,
                &format!(
                    "this client has {} connections open (the limit per client address); close one or try again shortly",
                    limits.max_connections_per_client
                ),
            );
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refuse(
                &tcp,
                &format!(
                    "the server has {} connections open (its limit); try again shortly",
                    limits.max_connections
                ),
            );
            continue;
        };
        let router = router.clone();
        let mut stopping = stopping_rx.clone();
        let (header_timeout, write_timeout) = (limits.header_timeout, limits.write_timeout);
        tokio::spawn(async move {
            let io = TokioIo::new(WriteTimeout::new(tcp, write_timeout));
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut router = router.clone();
                router.call(req.map(Body::new))
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            let conn = builder.serve_connection(io, service);
            tokio::pin!(conn);
            let stop = async move {
                let _ = stopping.wait_for(|s| *s).await;
                stopping
            };
            tokio::select! {
                _ = conn.as_mut() => {}
                _stopping = stop => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(permit);
            drop(place);
        });
    }
    drop(listener);
    on_shutdown.await;
    let _ = stopping_tx.send(true);
    drop(stopping_rx);
    let _ = tokio::time::timeout(limits.shutdown_grace, stopping_tx.closed()).await;
    Ok(())
}

/// Connections open per client address.
#[derive(Default)]
struct ClientCounts(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

impl ClientCounts {
    /// A place for one more connection of `client`, unless it holds `max`.
    fn take(self: &Arc<Self>, client: std::net::IpAddr, max: usize) -> Option<ClientPlace> {
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(client).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ClientPlace {
            counts: self.clone(),
            client,
        })
    }
}

/// One open connection of a client, given back when dropped.
struct ClientPlace {
    counts: Arc<ClientCounts>,
    client: std::net::IpAddr,
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

/// Answers a connection over a cap with 503 and `why`, and closes it,
/// without waiting for it: a new socket's send buffer takes these few bytes
/// at once.
fn refuse(tcp: &TcpStream, why: &str) {
    let body = format!(
        "{{\"error\": {{\"status\": 503, \"message\": {}}}}}",
        serde_json::Value::from(why)
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.try_write(response.as_bytes());
}

/// A connection whose writes fail once one has been blocked for `limit`
/// (the client stopped reading): hyper then closes it, dropping what it
/// was sending (an event stream's cursor included).
struct WriteTimeout<T> {
    inner: T,
    limit: Duration,
    blocked: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteTimeout<T> {
    fn new(inner: T, limit: Duration) -> Self {
        WriteTimeout {
            inner,
            limit,
            blocked: None,
        }
    }

    /// After the inner write returned `r`: progress clears the clock, a
    /// block starts (or checks) it.
    fn watch<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if r.is_ready() {
            self.blocked = None;
            return r;
        }
        let limit = self.limit;
        let clock = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match clock.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, r)
    }
}

/// The request with a body that fails ([`BODY_TIMED_OUT`]) unless it has
/// all arrived within `limit` of now, and that is drained if left unread.
pub(crate) fn with_body_deadline(req: Request, limit: Duration) -> Request {
    req.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
            ended: false,
        })
    })
}

/// At most this much of a body left unread by its handler (refused as too
/// large or not JSON) is still read, and dropped.
const DRAIN_BYTES: usize = 64 << 20;

struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
    /// The last frame was read.
    ended: bool,
}

/// A body dropped before its end is read to its end (at most
/// [`DRAIN_BYTES`], until its deadline) and dropped. Otherwise the
/// connection would close under a client still sending it, which then
/// gets a reset connection instead of the answer (413, 415) written
/// before it finished.
impl Drop for DeadlineBody {
    fn drop(&mut self) {
        if self.ended || self.inner.is_end_stream() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut body = std::mem::replace(&mut self.inner, Body::empty());
        let until = self.deadline.deadline();
        runtime.spawn(async move {
            let drain = async {
                let mut read = 0;
                while read < DRAIN_BYTES {
                    let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
                    match frame.await {
                        Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
                        _ => break,
                    }
                }
            };
            let _ = tokio::time::timeout_at(until, drain).await;
        });
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.ended |= frame.is_none();
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "{BODY_TIMED_OUT} ({} s)",
                    this.limit.as_secs_f64()
                )
                .into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
