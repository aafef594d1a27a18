//! The deadline: no request runs longer than the configured time. A plain
//! tower layer whose future holds the inner one in place, so a waiting
//! request, which keeps its future for the whole wait, pays no allocation of
//! its own for it (`middleware::from_fn` boxes one future per layer and
//! request).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use tokio::time::Sleep;
use tower::{Layer, Service};

use super::parked::Parked;

/// No request runs longer than `after`: past it, the request's future is
/// dropped (a waiter leaves the line) and the client gets `timed_out()`
/// (503 `request-timeout`, as the routes word it).
#[derive(Clone, Copy)]
pub struct Deadline {
    pub after: Duration,
    pub timed_out: fn() -> Response,
}

impl<S> Layer<S> for Deadline {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            deadline: *self,
        }
    }
}

/// [`Deadline`] around a service.
#[derive(Clone)]
pub struct DeadlineService<S> {
    inner: S,
    deadline: Deadline,
}

impl<S> Service<Request> for DeadlineService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        DeadlineFuture {
            inner: self.inner.call(request),
            sleep: tokio::time::sleep(self.deadline.after),
            timed_out: self.deadline.timed_out,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response of [`DeadlineService`].
    pub struct DeadlineFuture<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Sleep,
        timed_out: fn() -> Response,
    }
}

impl<F> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(Ok(mut response)) = this.inner.poll(cx) {
            // A parked answer keeps the deadline of its request.
            if let Some(mut parked) = Parked::take(&mut response) {
                parked.until(this.sleep.deadline());
                return Poll::Ready(Ok(parked.back_into(response)));
            }
            return Poll::Ready(Ok(response));
        }
        ready!(this.sleep.poll(cx));
        Poll::Ready(Ok((this.timed_out)()))
    }
}
