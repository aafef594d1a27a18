//! `AppError`: every failure the API reports, as `application/problem+json`
//! (RFC 9457). 4xx details speak to the caller; 5xx hide internals and log them.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Invalid;
use crate::engine;

/// An RFC 9457 problem: `type`, `title`, `status`, `detail`, and the extension
/// members of some problems.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "type": "/problems/lock-held",
    "title": "Lock is held",
    "status": 409,
    "detail": "lock 'deploy-prod' is held by someone else; it expires in 29500 ms unless refreshed",
    "owner": "https://ci.example.com/jobs/42",
    "expires_in_ms": 29500
}))]
pub struct Problem {
    /// A URI reference that ends in the problem's slug; `GET` it for a description.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong in this occurrence, and which field when a field is at fault.
    pub detail: String,
    /// `lock-held`: the current holder's owner label, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `lock-held`: when the current lease expires unless refreshed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// `semaphore-full`: how many leases are held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<u64>,
    /// `semaphore-full`: the limit the acquisition was judged against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Every problem type of the API: slug, status, title and description.
pub const PROBLEM_TYPES: &[(&str, u16, &str, &str)] = &[
    ("invalid-request", 400, "Invalid request",
     "The body is not valid JSON, has an unknown or out-of-range field, or the name or lease id in the path is malformed. `detail` names the field."),
    ("unauthorized", 401, "Unauthorized",
     "The service requires `Authorization: Bearer <token>` with one of its API tokens."),
    ("forbidden", 403, "Forbidden",
     "Force-releasing a lock needs one of the service's admin tokens."),
    ("not-found", 404, "Not found", "No such path."),
    ("lease-not-found", 404, "Lease not found",
     "No live lease with this id: it expired, was released, was force-released, or never belonged to this name. Nothing was changed."),
    ("lock-not-held", 404, "Lock not held", "The lock is not held by anyone."),
    ("method-not-allowed", 405, "Method not allowed", "This path does not take this method."),
    ("lock-held", 409, "Lock is held",
     "Someone else holds the lock and it was not released within `wait_ms`. `owner` and `expires_in_ms` describe the holder; `Retry-After` says when to try again."),
    ("semaphore-full", 409, "Semaphore is full",
     "All slots are taken (or promised to earlier waiters) and none came free within `wait_ms`. `holders` and `limit` say how full it is."),
    ("payload-too-large", 413, "Payload too large", "The request body is over the service's limit."),
    ("redis-unavailable", 503, "Redis unavailable",
     "The service cannot reach Redis right now. Nothing was half-done; retry after `Retry-After` seconds."),
    ("shutting-down", 503, "Shutting down", "The service is stopping; retry against another instance or after it restarts."),
    ("too-many-waiters", 503, "Too many waiters",
     "The service's cap on concurrently waiting requests is reached; retry later or with a shorter `wait_ms`."),
    ("request-timeout", 503, "Request timeout", "The request took longer than the service allows."),
    ("internal-error", 500, "Internal error", "The service failed unexpectedly; the cause is in its log."),
];

/// A failure of a request, mapped to its problem type.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Invalid(String),
    #[error("a bearer token is required")]
    Unauthorized,
    #[error("an admin token is required")]
    Forbidden,
    #[error("no such path")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("lease not found")]
    LeaseNotFound,
    #[error("lock not held")]
    LockNotHeld,
    #[error("lock held")]
    LockHeld {
        name: String,
        owner: Option<String>,
        expires_in_ms: u64,
    },
    #[error("semaphore full")]
    SemaphoreFull {
        name: String,
        holders: u64,
        limit: u32,
        retry_after_secs: u64,
    },
    #[error("payload too large")]
    PayloadTooLarge { limit: usize },
    #[error("request timed out")]
    Timeout,
    #[error(transparent)]
    Engine(#[from] engine::Error),
}

impl AppError {
    /// A field-level validation failure; `field` leads the detail.
    pub fn field(field: &str, err: Invalid) -> Self {
        Self::Invalid(format!("{field}: {}", err.0))
    }

    fn slug(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "invalid-request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::LeaseNotFound => "lease-not-found",
            Self::LockNotHeld => "lock-not-held",
            Self::LockHeld { .. } => "lock-held",
            Self::SemaphoreFull { .. } => "semaphore-full",
            Self::PayloadTooLarge { .. } => "payload-too-large",
            Self::Timeout => "request-timeout",
            Self::Engine(engine::Error::Unavailable(_)) => "redis-unavailable",
            Self::Engine(engine::Error::ShuttingDown) => "shutting-down",
            Self::Engine(engine::Error::TooManyWaiters) => "too-many-waiters",
            Self::Engine(engine::Error::Protocol(_)) => "internal-error",
        }
    }

    fn detail(&self) -> String {
        match self {
            Self::Invalid(detail) => detail.clone(),
            Self::Unauthorized => {
                "this service needs an `Authorization: Bearer <token>` header with a valid API token".into()
            }
            Self::Forbidden => "force-releasing a lock needs an admin token".into(),
            Self::NotFound => "no such path; see /docs for the API".into(),
            Self::MethodNotAllowed => "this path does not take this method; see /docs".into(),
            Self::LeaseNotFound => {
                "no live lease with this id: it expired, was released, or is not this name's".into()
            }
            Self::LockNotHeld => "the lock is not held".into(),
            Self::LockHeld {
                name,
                expires_in_ms,
                ..
            } => format!(
                "lock '{name}' is held by someone else; it expires in {expires_in_ms} ms unless refreshed"
            ),
            Self::SemaphoreFull {
                name,
                holders,
                limit,
                ..
            } => format!(
                "semaphore '{name}' is full: {holders} of {limit} slots held"
            ),
            Self::PayloadTooLarge { limit } => {
                format!("the request body is over the limit of {limit} bytes")
            }
            Self::Timeout => "the request took longer than the service allows".into(),
            Self::Engine(engine::Error::Unavailable(_)) => {
                "Redis cannot be reached right now; nothing was changed that a retry would not see".into()
            }
            Self::Engine(engine::Error::ShuttingDown) => {
                "the service is shutting down; retry elsewhere or once it is back".into()
            }
            Self::Engine(engine::Error::TooManyWaiters) => {
                "too many requests are waiting on this instance; retry later".into()
            }
            Self::Engine(engine::Error::Protocol(_)) => "the service failed unexpectedly".into(),
        }
    }

    /// The problem document this error answers with.
    pub fn problem(&self) -> Problem {
        let slug = self.slug();
        let (status, title) = PROBLEM_TYPES
            .iter()
            .find(|(s, ..)| *s == slug)
            .map_or((500, "Internal error"), |(_, status, title, _)| {
                (*status, *title)
            });
        let mut problem = Problem {
            kind: problem_type(slug),
            title: title.into(),
            status,
            detail: self.detail(),
            owner: None,
            expires_in_ms: None,
            holders: None,
            limit: None,
        };
        match self {
            Self::LockHeld {
                owner,
                expires_in_ms,
                ..
            } => {
                problem.owner.clone_from(owner);
                problem.expires_in_ms = Some(*expires_in_ms);
            }
            Self::SemaphoreFull { holders, limit, .. } => {
                problem.holders = Some(*holders);
                problem.limit = Some(*limit);
            }
            _ => {}
        }
        problem
    }

    /// Seconds a client should wait before retrying, where that is known.
    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::LockHeld { expires_in_ms, .. } => Some(expires_in_ms.div_ceil(1000).max(1)),
            Self::SemaphoreFull {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::Engine(engine::Error::Unavailable(_) | engine::Error::TooManyWaiters)
            | Self::Timeout => Some(1),
            Self::Engine(engine::Error::ShuttingDown) => Some(2),
            _ => None,
        }
    }
}

/// The `type` URI of a problem slug.
pub fn problem_type(slug: &str) -> String {
    format!("/problems/{slug}")
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let Self::Engine(err @ (engine::Error::Unavailable(_) | engine::Error::Protocol(_))) =
            &self
        {
            tracing::warn!(%err, "request failed");
        }
        let problem = self.problem();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = crate::routes::json_response(&problem, "application/problem+json");
        *response.status_mut() = status;
        let headers = response.headers_mut();
        if let Some(secs) = self.retry_after() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_held_carries_holder_and_retry_after() {
        let err = AppError::LockHeld {
            name: "deploy".into(),
            owner: Some("ci".into()),
            expires_in_ms: 1500,
        };
        let problem = err.problem();
        assert_eq!(problem.status, 409);
        assert!(problem.kind.ends_with("/lock-held"));
        assert_eq!(problem.owner.as_deref(), Some("ci"));
        assert_eq!(problem.expires_in_ms, Some(1500));
        assert_eq!(err.retry_after(), Some(2));
    }

    #[test]
    fn redis_errors_do_not_leak_internals() {
        let err = AppError::Engine(engine::Error::Unavailable("10.0.0.7:6379 refused".into()));
        let problem = err.problem();
        assert_eq!(problem.status, 503);
        assert!(!problem.detail.contains("10.0.0.7"));
    }

    #[test]
    fn every_slug_has_a_problem_type() {
        let errors = [
            AppError::Invalid("x".into()),
            AppError::Unauthorized,
            AppError::Forbidden,
            AppError::NotFound,
            AppError::MethodNotAllowed,
            AppError::LeaseNotFound,
            AppError::LockNotHeld,
            AppError::PayloadTooLarge { limit: 1 },
            AppError::Timeout,
            AppError::Engine(engine::Error::ShuttingDown),
            AppError::Engine(engine::Error::TooManyWaiters),
            AppError::Engine(engine::Error::Protocol("x".into())),
        ];
        for err in errors {
            let slug = err.slug();
            assert!(PROBLEM_TYPES.iter().any(|(s, ..)| *s == slug), "{slug}");
        }
    }
}
