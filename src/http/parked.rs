//! Answers that wait. A request in line for a lock may wait minutes, and all
//! that time it would keep every future it passed through on its way in: each
//! layer's, the router's, the handler's, and its live span. A handler whose
//! answer has to wait returns a placeholder instead, carrying the rest of its
//! work as a [`Parked`] future; the outermost layer ([`ResolveParked`]) lets
//! everything else go and keeps only that small future until it answers,
//! with the headers the layers put on the placeholder (the request id).
//!
//! The same layer reads each request's body whole (up to the body limit)
//! before the layers and the handler see it, so that no handler sits on its
//! state while a client sends its body: a burst of thousands of waits costs
//! little more than the waits.
//!
//! A parked rest logs in a span like its request's, counts the request in
//! the metrics once it answers, and carries its request id; the deadline
//! layer sets its deadline through the placeholder ([`Parked::take`],
//! [`Parked::until`], [`Parked::back_into`]). The layers' own headers are not
//! copied from the placeholder: the request id is the only one they add.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use http_body::Body as _;
use http_body_util::BodyExt;
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};
use tower_http::classify::ServerErrorsFailureClass;

use crate::telemetry::{RequestContext, REQUEST_ID};

/// The rest of a request's work, once all it needs to do is wait.
pub struct Parked {
    rest: BoxFuture<'static, Response>,
    /// Past this, the request answers 503 `request-timeout` (its rest is dropped).
    deadline: Option<Instant>,
}

/// How a [`Parked`] rides on the placeholder's extensions (which must be
/// `Clone + Sync`); taken out once, by the first layer that asks.
#[derive(Clone)]
struct Slot(Arc<Mutex<Option<Parked>>>);

impl Parked {
    /// `rest`, logging inside a span like its request's (`context`): the
    /// audit line of a lease granted after a wait carries the request's id,
    /// and a 5xx it answers is logged once, as the layers log any other.
    /// Once it answers, the request is counted in the metrics, its duration
    /// being its handler's time until now (the rest is its time in line), and
    /// its answer carries its request id.
    pub fn new(
        rest: impl Future<Output = Response> + Send + 'static,
        context: RequestContext,
    ) -> Self {
        let rest = InSpan {
            rest,
            working: context.elapsed(),
            context,
            parked: Instant::now(),
        };
        Self {
            rest: Box::pin(rest),
            deadline: None,
        }
    }

    /// Whether `response` is a placeholder.
    pub fn is_placeholder(response: &Response) -> bool {
        response.extensions().get::<Slot>().is_some()
    }

    /// The placeholder that carries it out through the layers; no client
    /// ever sees it.
    pub fn into_response(self) -> Response {
        self.back_into(StatusCode::ACCEPTED.into_response())
    }

    /// Puts it (taken with [`Parked::take`]) back into the placeholder it
    /// came in.
    pub fn back_into(self, mut placeholder: Response) -> Response {
        placeholder
            .extensions_mut()
            .insert(Slot(Arc::new(Mutex::new(Some(self)))));
        placeholder
    }

    /// The parked rest that `response` carries, if it is a placeholder.
    pub fn take(response: &mut Response) -> Option<Self> {
        let Slot(slot) = response.extensions_mut().remove::<Slot>()?;
        let parked = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        parked
    }

    /// Answers 503 `request-timeout` at `deadline` at the latest.
    pub fn until(&mut self, deadline: Instant) {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
    }
}

pin_project_lite::pin_project! {
    /// A parked rest, polled inside a span made again from its request's
    /// context; `working` is its handler's time until it parked.
    struct InSpan<F> {
        #[pin]
        rest: F,
        context: RequestContext,
        working: Duration,
        parked: Instant,
    }
}

impl<F: Future<Output = Response>> Future for InSpan<F> {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let this = self.project();
        let _span = this.context.span().entered();
        let mut response = ready!(this.rest.poll(cx));
        if response.status().is_server_error() {
            let class = ServerErrorsFailureClass::StatusCode(response.status());
            crate::telemetry::request_failed(class, this.parked.elapsed());
        }
        this.context.record(response.status(), *this.working);
        if let Ok(id) = HeaderValue::from_str(this.context.request_id()) {
            response.headers_mut().insert(REQUEST_ID, id);
        }
        Poll::Ready(response)
    }
}

/// The outermost layer: reads a request whole (at most `body_limit` bytes of
/// its body, for at most `deadline`; a larger or slower one is left to the
/// limit and deadline further in), then answers a parked request once its
/// rest has, keeping nothing of the way in meanwhile. A parked rest past its
/// deadline answers `timed_out()` (503 `request-timeout`), one that panics
/// `panicked()` (500 `internal-error`), as the routes word them.
#[derive(Clone, Copy)]
pub struct ResolveParked {
    pub body_limit: usize,
    pub deadline: Duration,
    pub timed_out: fn() -> Response,
    pub panicked: fn() -> Response,
}

impl<S> Layer<S> for ResolveParked {
    type Service = ResolveParkedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ResolveParkedService {
            inner,
            layer: *self,
        }
    }
}

/// [`ResolveParked`] around a service.
#[derive(Clone)]
pub struct ResolveParkedService<S> {
    inner: S,
    layer: ResolveParked,
}

impl<S, B> Service<Request> for ResolveParkedService<S>
where
    S: Service<Request, Response = axum::http::Response<B>, Error = Infallible>,
    S: Clone + Send + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ResolveFuture<B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let mut inner = self.inner.clone();
        let ResolveParked {
            body_limit,
            deadline,
            timed_out,
            panicked,
        } = self.layer;
        // Boxed, so that its space is freed once it has answered.
        ResolveFuture::Routing {
            inner: Box::pin(async move {
                let handled = inner.call(read_whole(request, body_limit, deadline).await);
                drop(inner);
                handled.await
            }),
            timed_out,
            panicked,
        }
    }
}

/// `request` with its body read, up to its end, past `limit`, or until
/// `within` has passed; what is left (a body over the limit, one still
/// coming, or its error) is still to be read, behind what was, and the
/// limit and deadline further in deal with it.
async fn read_whole(request: Request, limit: usize, within: Duration) -> Request {
    let (parts, mut body) = request.into_parts();
    if body.is_end_stream() {
        return Request::from_parts(parts, body);
    }
    let mut read: Vec<bytes::Bytes> = Vec::new();
    let mut failed = None;
    let reading = async {
        let mut length = 0;
        while !body.is_end_stream() && length <= limit {
            match body.frame().await {
                None => break,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        length += data.len();
                        read.push(data);
                    }
                }
                Some(Err(err)) => {
                    failed = Some(err);
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(within, reading).await;
    let rest = match failed {
        Some(err) => axum::body::Body::new(Failed(Some(err))),
        None => body,
    };
    Request::from_parts(parts, Prefixed::body(read, rest))
}

/// A body of the chunks already read, then the rest.
struct Prefixed {
    read: std::vec::IntoIter<bytes::Bytes>,
    rest: axum::body::Body,
}

impl Prefixed {
    fn body(read: Vec<bytes::Bytes>, rest: axum::body::Body) -> axum::body::Body {
        match read.len() {
            0 => rest,
            1 if rest.is_end_stream() => {
                axum::body::Body::from(read.into_iter().next().unwrap_or_default())
            }
            _ => axum::body::Body::new(Self {
                read: read.into_iter(),
                rest,
            }),
        }
    }
}

impl http_body::Body for Prefixed {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        if let Some(chunk) = self.read.next() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.read.len() == 0 && self.rest.is_end_stream()
    }
}

/// A body whose reading failed, failing once more for whoever reads it.
struct Failed(Option<axum::Error>);

impl http_body::Body for Failed {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

pin_project_lite::pin_project! {
    /// The response of [`ResolveParkedService`].
    #[project = State]
    pub enum ResolveFuture<B> {
        /// On the way in: reading the body, the layers, the router, the handler.
        Routing {
            inner: BoxFuture<'static, Result<axum::http::Response<B>, Infallible>>,
            timed_out: fn() -> Response,
            panicked: fn() -> Response,
        },
        /// Parked: its rest (a panic in it answered already), its deadline
        /// and what it answers then.
        Parked {
            rest: BoxFuture<'static, Response>,
            #[pin]
            deadline: Sleep,
            timed_out: fn() -> Response,
        },
        Done,
    }
}

impl<B> Future for ResolveFuture<B>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                State::Routing {
                    inner,
                    timed_out,
                    panicked,
                } => {
                    let Ok(response) = ready!(inner.as_mut().poll(cx));
                    let mut response = response.map(axum::body::Body::new);
                    let Some(parked) = Parked::take(&mut response) else {
                        self.set(Self::Done);
                        return Poll::Ready(Ok(response));
                    };
                    // No deadline: one no request reaches.
                    let deadline = parked
                        .deadline
                        .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 86_400));
                    let (timed_out, panicked) = (*timed_out, *panicked);
                    let rest = AssertUnwindSafe(parked.rest)
                        .catch_unwind()
                        .map(move |answer| {
                            answer.unwrap_or_else(|_| {
                                tracing::error!("a parked request panicked");
                                panicked()
                            })
                        });
                    self.set(Self::Parked {
                        rest: Box::pin(rest),
                        deadline: tokio::time::sleep_until(deadline),
                        timed_out,
                    });
                }
                State::Parked {
                    rest,
                    deadline,
                    timed_out,
                } => {
                    let response = match rest.as_mut().poll(cx) {
                        Poll::Ready(response) => response,
                        Poll::Pending => {
                            ready!(deadline.poll(cx));
                            timed_out()
                        }
                    };
                    self.set(Self::Done);
                    return Poll::Ready(Ok(response));
                }
                State::Done => panic!("ResolveFuture polled after it answered"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> RequestContext {
        let request = Request::builder()
            .header(REQUEST_ID, "r-1")
            .body(())
            .expect("a request");
        RequestContext::of(&request.into_parts().0)
    }

    async fn resolve<F>(handler: F) -> Response
    where
        F: Fn() -> Response + Clone + Send + 'static,
    {
        let inner = tower::service_fn(move |_: Request| {
            let handler = handler.clone();
            async move { Ok::<_, Infallible>(handler()) }
        });
        let layer = ResolveParked {
            body_limit: 1024,
            deadline: Duration::from_secs(10),
            timed_out: || StatusCode::SERVICE_UNAVAILABLE.into_response(),
            panicked: || StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        };
        let Ok(response) = layer
            .layer(inner)
            .call(Request::new(axum::body::Body::empty()))
            .await;
        response
    }

    #[tokio::test]
    async fn a_parked_answer_is_its_rest_s_with_the_request_id_not_the_placeholder_s() {
        let response = resolve(|| {
            let rest = async { (StatusCode::CREATED, [("x-own", "1")], "done").into_response() };
            let mut placeholder = Parked::new(rest, context()).into_response();
            let headers = placeholder.headers_mut();
            headers.insert("x-placeholder", HeaderValue::from_static("1"));
            placeholder
        })
        .await;
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()[REQUEST_ID], "r-1");
        assert_eq!(response.headers()["x-own"], "1");
        assert!(response.headers().get("x-placeholder").is_none());
        assert!(!Parked::is_placeholder(&response));
    }

    #[tokio::test]
    async fn a_plain_answer_passes_as_it_is() {
        let response = resolve(|| StatusCode::NO_CONTENT.into_response()).await;
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
    }

    #[tokio::test]
    async fn a_parked_rest_that_panics_answers_500() {
        let response = resolve(|| Parked::new(async { panic!("boom") }, context()).into_response());
        assert_eq!(response.await.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn a_body_is_read_whole_and_one_over_the_limit_is_left_whole_for_the_limit_further_in() {
        let chunks = |n: usize| {
            let frames = (0..n).map(|i| {
                Ok::<_, Infallible>(http_body::Frame::data(bytes::Bytes::from(vec![
                    b'a' + i
                        as u8;
                    4
                ])))
            });
            axum::body::Body::new(http_body_util::StreamBody::new(futures_util::stream::iter(
                frames,
            )))
        };
        for (n, limit) in [(1, 16), (3, 16), (8, 16)] {
            let request = read_whole(Request::new(chunks(n)), limit, Duration::from_secs(1)).await;
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let expected: Vec<u8> = (0..n).flat_map(|i| vec![b'a' + i as u8; 4]).collect();
            assert_eq!(
                body.as_ref(),
                expected.as_slice(),
                "{n} chunks, limit {limit}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_still_coming_at_the_deadline_is_passed_on_with_what_came() {
        use futures_util::StreamExt;
        let first = futures_util::stream::iter([Ok::<_, Infallible>(http_body::Frame::data(
            bytes::Bytes::from_static(b"abc"),
        ))]);
        let frames = first.chain(futures_util::stream::pending());
        let body = axum::body::Body::new(http_body_util::StreamBody::new(frames));
        let started = Instant::now();

        let request = read_whole(Request::new(body), 16, Duration::from_secs(5)).await;

        assert_eq!(started.elapsed(), Duration::from_secs(5));
        let mut body = request.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "abc");
        let rest = tokio::time::timeout(Duration::from_secs(1), body.frame()).await;
        assert!(rest.is_err(), "the rest is still to come");
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_rest_past_its_deadline_answers_503_at_the_earliest_deadline() {
        let response = resolve(move || {
            let mut parked = Parked::new(std::future::pending(), context());
            parked.until(Instant::now() + Duration::from_secs(5));
            parked.until(Instant::now() + Duration::from_secs(9));
            parked.into_response()
        });
        let started = Instant::now();
        assert_eq!(response.await.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
