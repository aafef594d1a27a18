//! `GET /`: the live dashboard, one HTML page with its script and styles
//! inline, embedded in the binary: it loads nothing from any other host.
//!
//! The page reads `GET /locks`, `GET /semaphores` and their status calls, and
//! follows `GET /events` with `fetch()` (not `EventSource`, which cannot send
//! the `Authorization` header a service with API tokens needs; the token stays
//! in the browser's `sessionStorage`, never in a URL).

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page, from `static/dashboard.html`.
const PAGE: &str = include_str!("../../static/dashboard.html");

/// `GET /`: the dashboard.
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            // Everything the page needs is inline or on this origin.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                 frame-ancestors 'none'",
            ),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        PAGE,
    )
        .into_response()
}
