//! What one HTTP request shows in logs and metrics: its span, its request
//! id and W3C trace id, the context a parked request keeps to make its span
//! again, and the one line a server error logs.

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};

use super::metrics::record_request;

/// The span of one HTTP request: method, route template (recorded once
/// routed), the request id, and the W3C trace id when the client sent a
/// `traceparent`. Never the path: paths carry lease ids.
pub fn request_span(method: &Method, headers: &HeaderMap) -> tracing::Span {
    let request_id = headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    span(method, request_id, trace_id_in(headers))
}

fn span(method: &Method, request_id: &str, trace_id: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        "request",
        %method,
        route = tracing::field::Empty,
        request_id,
        trace_id,
    )
}

fn trace_id_in(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(trace_id_of)
}

/// What a request's span and metrics show, kept so that the span can be
/// made again: a request parked in line keeps this, not its live span (whose
/// formatted fields cost a few hundred bytes), logs inside a copy of it, and
/// is counted with it once answered.
#[derive(Debug, Clone)]
pub struct RequestContext {
    method: Method,
    route: Option<axum::extract::MatchedPath>,
    request_id: Box<str>,
    trace_id: Option<Box<str>>,
    /// When its handler started.
    started: Instant,
}

impl RequestContext {
    /// The context of the request with this head (after the request id was set).
    pub fn of(parts: &axum::http::request::Parts) -> Self {
        let request_id = parts
            .headers
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        Self {
            method: parts.method.clone(),
            route: parts.extensions.get().cloned(),
            request_id: request_id.into(),
            trace_id: trace_id_in(&parts.headers).map(Into::into),
            started: Instant::now(),
        }
    }

    /// The request's id, as its span shows it.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// How long its handler has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Counts the request, answered `status` after `working` of its own time.
    pub fn record(&self, status: StatusCode, working: Duration) {
        let route = self
            .route
            .as_ref()
            .map_or("unmatched", axum::extract::MatchedPath::as_str);
        record_request(&self.method, route, status, working);
    }

    /// A span like the request's own, route included.
    pub fn span(&self) -> tracing::Span {
        let span = span(&self.method, &self.request_id, self.trace_id.as_deref());
        if let Some(route) = &self.route {
            span.record("route", route.as_str());
        }
        span
    }
}

/// Logs a request answered with a server error, once, inside its span.
pub fn request_failed(answer: impl std::fmt::Display, latency: std::time::Duration) {
    tracing::warn!(
        answer = %answer,
        latency_ms = latency.as_millis() as u64,
        "request failed"
    );
}

/// The request-id header, echoed in every response.
pub const REQUEST_ID: &str = "x-request-id";

/// Whether a client's `X-Request-Id` is used as it is: at most 128 visible
/// ASCII characters; anything else is replaced by a fresh id.
pub fn acceptable_request_id(value: &axum::http::HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty() && bytes.len() <= 128 && bytes.iter().all(|b| b.is_ascii_graphic())
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), if
/// well formed and not all zeros.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace_id, 32)
        && hex(parent_id, 16)
        && hex(flags, 2)
        && trace_id.bytes().any(|b| b != b'0')
        && (version != "00" || parts.next().is_none());
    valid.then_some(trace_id)
}
