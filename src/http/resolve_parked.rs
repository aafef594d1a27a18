//! The outermost layer, [`ResolveParked`]: it reads each request's body
//! whole first ([`super::whole_body`]), so that no handler sits on its state
//! while a client sends its body, then answers a parked request ([`Parked`])
//! once its rest has, keeping nothing of the way in meanwhile: a burst of
//! thousands of waits costs little more than the waits.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

use super::parked::Parked;
use super::whole_body::read_whole;

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
                    let (rest, deadline) = parked.into_rest();
                    // No deadline: one no request reaches.
                    let deadline = deadline
                        .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 86_400));
                    let (timed_out, panicked) = (*timed_out, *panicked);
                    let rest = AssertUnwindSafe(rest).catch_unwind().map(move |answer| {
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
    use axum::http::{HeaderValue, StatusCode};
    use axum::response::IntoResponse;

    use super::*;
    use crate::telemetry::{RequestContext, REQUEST_ID};

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
