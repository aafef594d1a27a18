//! One connection: hyper serves it, through a socket and a service that
//! tell its [`Activity`] when a request head starts and which requests are
//! in flight; its timer closes it on the header or idle timeout, and on
//! shutdown it finishes the requests in flight, then closes.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::Response;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::activity::{Activity, Guard};
use super::limits::Limits;

/// The whole HTTP service, as the accept loop calls it: one boxed future per
/// request, and nothing else kept for it (a router's future would keep room
/// for a whole request).
pub type App = tower::util::BoxCloneSyncService<Request, Response<Body>, Infallible>;

/// What one connection task needs.
pub(super) struct Connection {
    pub(super) builder: Arc<Builder<TokioExecutor>>,
    pub(super) app: App,
    pub(super) limits: Limits,
    pub(super) stop: CancellationToken,
}

impl Connection {
    /// Serves the connection on `tcp` until it ends, or its timer expires,
    /// or, once `stop` is cancelled, its requests in flight have finished.
    pub(super) async fn serve(self, tcp: TcpStream) {
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
