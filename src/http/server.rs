//! The accept loop: HTTP/1.1 and cleartext HTTP/2 (prior knowledge, as
//! `curl --http2-prior-knowledge` sends it) on one listener, with the
//! connection limits of the contract and a graceful shutdown.
//!
//! - At most [`Limits::max_connections`] connections at once; one past the cap
//!   is closed at once, unanswered, so a flood of slow sockets degrades the
//!   service instead of exhausting its open files, and it recovers as soon as
//!   they close.
//! - A connection that has not sent a whole request head within
//!   [`Limits::header_timeout`] of opening (or, on a keep-alive connection, of
//!   the first byte of its next request) is closed, and so is a connection
//!   with no request in flight for [`Limits::idle_timeout`]. hyper's own
//!   HTTP/1 header timer cannot do both: it also runs while a keep-alive
//!   connection is idle, so it would close idle connections after the header
//!   timeout. Each connection has one timer of its own instead, which sleeps
//!   while requests are in flight.
//! - HTTP/2 connections may carry many waits each; keep-alive pings drop a
//!   peer that vanished without closing, and with it its waits. A stream
//!   reset by the client drops its request's future, as a closed HTTP/1.1
//!   connection does: the waiter leaves the line.
//! - On shutdown: stop accepting, close at once every connection with no
//!   request in flight (an idle or half-sent one does not hold up SIGTERM),
//!   let the others finish (waiters are answered 503 by the engine), then
//!   return.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Response, Version};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::Service;

use crate::config::Settings;

/// The whole HTTP service, as the accept loop calls it: one boxed future per
/// request, and nothing else kept for it (a router's future would keep room
/// for a whole request).
pub type App = tower::util::BoxCloneSyncService<Request, Response<Body>, Infallible>;

/// How many requests one HTTP/2 connection may have in flight: as many waits
/// as the default connection cap has connections.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 10_000;
/// Flow-control window of one HTTP/2 stream: a whole default-sized body (an
/// acquire body is under 300 bytes), without letting a client park more than
/// that in baton's buffers per stream.
pub const H2_STREAM_WINDOW: u32 = 16 * 1024;
/// Flow-control window of one HTTP/2 connection, over all its streams.
pub const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;
/// Ping an HTTP/2 peer this often...
pub const H2_PING_INTERVAL: Duration = Duration::from_secs(10);
/// ...and drop the connection (and its waits) when a ping is not answered in this time.
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);
/// After shutdown, how long a connection whose requests have all finished may
/// take to write out its last response before it is closed.
const LINGER: Duration = Duration::from_millis(500);

/// The connection limits of the contract.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `BATON_HEADER_TIMEOUT_MS`.
    pub header_timeout: Duration,
    /// `BATON_IDLE_TIMEOUT_MS`.
    pub idle_timeout: Duration,
    /// `BATON_MAX_CONNECTIONS`.
    pub max_connections: usize,
}

impl Limits {
    /// The limits that `settings` ask for.
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            header_timeout: settings.header_timeout,
            idle_timeout: settings.idle_timeout,
            max_connections: settings.max_connections,
        }
    }
}

/// Raises the soft open-files limit to the hard limit, so that the connection
/// cap, not the process's file table, is what turns clients away. Returns the
/// limit now in force.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(io::Error::last_os_error());
            }
            limit = raised;
        }
    }
    Ok(limit.rlim_cur)
}

/// Serves `app` on `listener` until `stop` is cancelled, then closes idle
/// connections at once, lets the others finish, and returns when all are
/// closed.
///
/// # Errors
/// None today: accept errors are logged and retried.
pub async fn serve(
    listener: TcpListener,
    app: App,
    limits: Limits,
    stop: CancellationToken,
) -> io::Result<()> {
    match raise_open_files_limit() {
        Ok(files) if files < limits.max_connections as u64 + 64 => tracing::warn!(
            open_files = files,
            max_connections = limits.max_connections,
            "the open-files limit is below BATON_MAX_CONNECTIONS; clients past it are refused by the system"
        ),
        Ok(files) => tracing::debug!(open_files = files, "open-files limit"),
        Err(err) => tracing::warn!(%err, "cannot raise the open-files limit"),
    }
    let builder = Arc::new(builder());
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Every connection task holds a receiver; `closed()` resolves when all are gone.
    let (all_closed, open) = watch::channel(());
    let mut warned_full: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                // E.g. out of open files: wait for some to close, as hyper
                // and axum do, but stop waiting at shutdown.
                tracing::error!(%err, "accept failed; retrying in a second");
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Closed unanswered: the cheapest thing baton can do with it.
            drop(tcp);
            if warned_full.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                warned_full = Some(Instant::now());
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached; closing new connections until others close"
                );
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let open = open.clone();
        let connection = Connection {
            builder: builder.clone(),
            app: app.clone(),
            limits,
            stop: stop.clone(),
        };
        tokio::spawn(async move {
            connection.serve(tcp).await;
            drop(slot);
            drop(open);
        });
    }
    drop(listener);
    drop(open);
    all_closed.closed().await;
    Ok(())
}

/// HTTP/1.1 and HTTP/2 with the limits above.
fn builder() -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        // The connection's own timer does this (see the module docs).
        .header_read_timeout(None)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    builder
}

fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// What one connection task needs.
struct Connection {
    builder: Arc<Builder<TokioExecutor>>,
    app: App,
    limits: Limits,
    stop: CancellationToken,
}

impl Connection {
    async fn serve(self, tcp: TcpStream) {
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            tcp,
            activity: activity.clone(),
        });
        let service = Tracked {
            app: self.app,
            activity: activity.clone(),
        };
        let conn = self.builder.serve_connection(io, service);
        tokio::pin!(conn);
        let expired = activity.expired(self.limits);
        tokio::pin!(expired);
        let drained = async {
            self.stop.cancelled().await;
            activity.drained().await;
        };
        tokio::pin!(drained);
        let mut stopping = false;
        loop {
            tokio::select! {
                biased;
                result = conn.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(%err, "connection ended with an error");
                    }
                    return;
                }
                () = self.stop.cancelled(), if !stopping => {
                    stopping = true;
                    // No new requests; those in flight finish. `drained`
                    // closes it at once when none are.
                    conn.as_mut().graceful_shutdown();
                }
                () = &mut drained => return,
                () = &mut expired => {
                    tracing::debug!("connection closed: header or idle timeout");
                    return;
                }
            }
        }
    }
}

/// What a connection is doing, shared by its socket, its requests and its timer.
struct Activity {
    opened: Instant,
    /// Requests whose response has not been written out yet.
    in_flight: AtomicU32,
    /// Whether any request has arrived on this connection.
    served: AtomicBool,
    /// Whether it speaks HTTP/2 (then bytes between requests are pings and
    /// window updates, not a request head).
    h2: AtomicBool,
    /// Milliseconds after `opened` when the last request finished.
    idle_since: AtomicU64,
    /// Milliseconds after `opened` of the first byte read since then, or `NONE`.
    head_started: AtomicU64,
    /// Told when the last request in flight finishes.
    idle: Notify,
}

const NONE: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            in_flight: AtomicU32::new(0),
            served: AtomicBool::new(false),
            h2: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(NONE),
            idle: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(NONE - 1)
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    fn on_read(&self) {
        if !self.busy() && self.head_started.load(Ordering::Relaxed) == NONE {
            self.head_started.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    fn begin(self: &Arc<Self>, version: Version) -> Guard {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        if !self.served.load(Ordering::Relaxed) {
            self.served.store(true, Ordering::Relaxed);
            if version == Version::HTTP_2 {
                self.h2.store(true, Ordering::Relaxed);
            }
        }
        Guard(self.clone())
    }

    fn end(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since.store(self.now_ms(), Ordering::Relaxed);
            self.head_started.store(NONE, Ordering::Relaxed);
            self.idle.notify_one();
        }
    }

    /// When the connection is to be closed if nothing happens before, or
    /// `None` while a request is in flight.
    fn deadline(&self, limits: Limits) -> Option<Instant> {
        if self.busy() {
            return None;
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(NONE / 2);
        let (since, limit) = if !self.served.load(Ordering::Relaxed) {
            (0, limits.header_timeout)
        } else {
            let head = self.head_started.load(Ordering::Relaxed);
            if head != NONE && !self.h2.load(Ordering::Relaxed) {
                (head, limits.header_timeout)
            } else {
                (self.idle_since.load(Ordering::Relaxed), limits.idle_timeout)
            }
        };
        Some(self.opened + Duration::from_millis(since.saturating_add(ms(limit))))
    }

    /// Resolves when the header or the idle timeout has passed.
    async fn expired(&self, limits: Limits) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            match self.deadline(limits) {
                Some(at) if at <= Instant::now() => return,
                // A request head may start while this sleeps, unnoticed (a
                // read does not wake the timer, to cost nothing per
                // request): look again within a header timeout.
                Some(at) => {
                    tokio::time::sleep_until(at.min(Instant::now() + limits.header_timeout)).await;
                }
                None => idle.await,
            }
        }
    }

    /// Resolves at once when no request is in flight, else a moment after the
    /// last one has finished.
    async fn drained(&self) {
        if !self.busy() {
            return;
        }
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if !self.busy() {
                break;
            }
            idle.await;
        }
        tokio::time::sleep(LINGER).await;
    }
}

/// One request in flight, until its response body is dropped.
struct Guard(Arc<Activity>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The socket, noting when a request head starts to arrive.
struct Watched {
    tcp: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.tcp).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.activity.on_read();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The app as hyper's service, counting the requests in flight.
#[derive(Clone)]
struct Tracked {
    app: App,
    activity: Arc<Activity>,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = TrackedFuture;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let guard = self.activity.begin(req.version());
        // Every service of the app is ready at all times.
        let mut app = self.app.clone();
        TrackedFuture {
            inner: app.call(req.map(Body::new)),
            guard: Some(guard),
        }
    }
}

pin_project_lite::pin_project! {
    /// The app's future; its response body carries the request's guard.
    struct TrackedFuture {
        #[pin]
        inner: futures_util::future::BoxFuture<'static, Result<Response<Body>, Infallible>>,
        guard: Option<Guard>,
    }
}

impl Future for TrackedFuture {
    type Output = Result<Response<TrackedBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = ready!(this.inner.poll(cx));
        let guard = this.guard.take();
        Poll::Ready(Ok(response.map(|body| TrackedBody {
            inner: body,
            _guard: guard,
        })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that counts as a request in flight until it is dropped
    /// (written out, or abandoned with its connection or stream).
    struct TrackedBody {
        #[pin]
        inner: Body,
        _guard: Option<Guard>,
    }
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            header_timeout: Duration::from_millis(100),
            idle_timeout: Duration::from_millis(1000),
            max_connections: 1,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_has_the_header_timeout() {
        let activity = Arc::new(Activity::new());
        let opened = activity.opened;
        assert_eq!(
            activity.deadline(limits()),
            Some(opened + Duration::from_millis(100))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout_runs_while_a_request_is_in_flight_then_the_idle_one() {
        let activity = Arc::new(Activity::new());
        let guard = activity.begin(Version::HTTP_11);
        assert_eq!(activity.deadline(limits()), None);
        tokio::time::advance(Duration::from_millis(500)).await;
        drop(guard);
        assert_eq!(
            activity.deadline(limits()),
            Some(activity.opened + Duration::from_millis(1500))
        );
        // The first byte of the next request head starts the header timeout.
        tokio::time::advance(Duration::from_millis(200)).await;
        activity.on_read();
        assert_eq!(
            activity.deadline(limits()),
            Some(activity.opened + Duration::from_millis(800))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_between_http2_requests_do_not_start_a_header_timeout() {
        let activity = Arc::new(Activity::new());
        drop(activity.begin(Version::HTTP_2));
        activity.on_read();
        assert_eq!(
            activity.deadline(limits()),
            Some(activity.opened + Duration::from_millis(1000))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expired_resolves_after_the_idle_timeout_not_before() {
        let activity = Arc::new(Activity::new());
        drop(activity.begin(Version::HTTP_11));
        let expired = activity.expired(limits());
        tokio::pin!(expired);
        assert!(
            tokio::time::timeout(Duration::from_millis(990), expired.as_mut())
                .await
                .is_err()
        );
        tokio::time::timeout(Duration::from_millis(20), expired)
            .await
            .expect("closed after the idle timeout");
    }
}
