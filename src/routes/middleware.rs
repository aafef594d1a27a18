//! The two layers every request passes through that need to act after the
//! handler: the deadline, and the request metrics. Each is a plain tower layer
//! whose future holds the inner one in place, so a waiting request, which
//! keeps its future for the whole wait, pays no allocation of its own for them
//! (`middleware::from_fn` boxes one future per layer and request).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use tokio::time::Sleep;
use tower::{Layer, Service};

use super::{AppError, Parked};
use crate::telemetry;

/// No request runs longer than `deadline`: past it, the request's future is
/// dropped (a waiter leaves the line) and the client gets 503 `request-timeout`.
#[derive(Clone, Copy)]
pub struct Deadline(pub Duration);

impl<S> Layer<S> for Deadline {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            deadline: self.0,
        }
    }
}

/// [`Deadline`] around a service.
#[derive(Clone)]
pub struct DeadlineService<S> {
    inner: S,
    deadline: Duration,
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
            sleep: tokio::time::sleep(self.deadline),
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
        Poll::Ready(Ok(AppError::Timeout.into_response()))
    }
}

/// Requests by route, method and status, and their duration. Inside the
/// router, where the matched route is known. A request parked in line is
/// counted by its parked rest once it answers ([`Parked::new`]).
#[derive(Clone, Copy)]
pub struct RecordMetrics;

impl<S> Layer<S> for RecordMetrics {
    type Service = RecordMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RecordMetricsService(inner)
    }
}

/// [`RecordMetrics`] around a service.
#[derive(Clone)]
pub struct RecordMetricsService<S>(S);

impl<S> Service<Request> for RecordMetricsService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RecordMetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let route = request.extensions().get::<MatchedPath>().cloned();
        tracing::Span::current().record(
            "route",
            route.as_ref().map_or("unmatched", MatchedPath::as_str),
        );
        RecordMetricsFuture {
            started: Instant::now(),
            method: request.method().clone(),
            route,
            inner: self.0.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response of [`RecordMetricsService`].
    pub struct RecordMetricsFuture<F> {
        started: Instant,
        method: Method,
        route: Option<MatchedPath>,
        #[pin]
        inner: F,
    }
}

impl<F> Future for RecordMetricsFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = ready!(this.inner.poll(cx));
        if !Parked::is_placeholder(&response) {
            let route = this.route.as_ref().map_or("unmatched", MatchedPath::as_str);
            let working = this.started.elapsed();
            telemetry::record_request(this.method, route, response.status(), working);
        }
        Poll::Ready(Ok(response))
    }
}
