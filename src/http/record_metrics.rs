//! The request metrics: each request counted by route, method and status,
//! with its duration. A plain tower layer whose future holds the inner one in
//! place, so a waiting request, which keeps its future for the whole wait,
//! pays no allocation of its own for it (`middleware::from_fn` boxes one
//! future per layer and request).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use tower::{Layer, Service};

use super::parked::Parked;
use crate::telemetry;

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
