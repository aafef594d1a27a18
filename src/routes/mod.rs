//! The HTTP API: one file per resource. Handlers parse requests into domain
//! types, call the engine, and map its results to JSON and problem+json.

mod auth;
mod extract;
pub mod health;
pub mod locks;
pub mod problems;
pub mod semaphores;

pub use auth::{require_token, Access, Auth};
pub use extract::{BodyLimit, JsonBody};

use std::sync::Arc;

use crate::config::Settings;
use crate::engine::{Locks, Semaphores, Store};

/// What every handler can reach; one pointer to clone per request.
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

/// The parts of [`AppState`].
pub struct AppParts {
    pub locks: Locks,
    pub semaphores: Semaphores,
    pub store: Store,
    pub settings: Settings,
    pub auth: Arc<Auth>,
}

impl AppState {
    pub fn new(parts: AppParts) -> Self {
        Self(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// A JSON response body that ends in a newline, so that `curl` output in a
/// terminal or a log stays one answer per line.
pub struct Json<T>(pub T);

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        json_response(&self.0, "application/json")
    }
}

/// `value` as a JSON body of `content_type`, newline-terminated.
pub(crate) fn json_response(
    value: &impl serde::Serialize,
    content_type: &'static str,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match serde_json::to_vec(value) {
        Ok(mut body) => {
            body.push(b'\n');
            ([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Err(err) => {
            tracing::error!(%err, "cannot serialize a response");
            axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// RFC 3339 UTC with milliseconds, from milliseconds since the Unix epoch.
pub(crate) fn rfc3339_ms(epoch_ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(epoch_ms);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_redis_time_as_rfc3339() {
        assert_eq!(
            super::rfc3339_ms(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
    }
}
