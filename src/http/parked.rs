//! Answers that wait. A request in line for a lock may wait minutes, and all
//! that time it would keep every future it passed through on its way in: each
//! layer's, the router's, the handler's, and its live span. A handler whose
//! answer has to wait returns a placeholder instead, carrying the rest of its
//! work as a [`Parked`] future; the outermost layer
//! ([`ResolveParked`](super::ResolveParked)) lets everything else go and
//! keeps only that small future until it answers.
//!
//! A parked rest logs in a span like its request's, counts the request in
//! the metrics once it answers, and carries its request id; the deadline
//! layer sets its deadline through the placeholder ([`Parked::take`],
//! [`Parked::until`], [`Parked::back_into`]). The layers' own headers are not
//! copied from the placeholder: the request id is the only one they add.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use tokio::time::Instant;
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

    /// The rest itself, and its deadline if a layer set one: for the layer
    /// that waits for it.
    pub(super) fn into_rest(self) -> (BoxFuture<'static, Response>, Option<Instant>) {
        (self.rest, self.deadline)
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
