//! `AppError`: every failure the API reports, as `application/problem+json`
//! (RFC 9457), each mapped to its [`ProblemType`]. 4xx details speak to the
//! caller; 5xx hide internals and log them.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::json::json_response;
use super::json::rfc3339_ms;
use crate::access::oidc::IdentityRefusal;
use crate::access::Denied;
use crate::domain::{Invalid, Kind};
use crate::engine;
use crate::wire::{Mode, Problem, ProblemType, RetryAfter};

/// A failure of a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Invalid(String),
    /// A `wait_ms` over the server's maximum: told so the client can retry with it.
    #[error("wait_ms over the maximum")]
    WaitTooLong { max_wait_ms: u64 },
    #[error("a bearer token is required")]
    Unauthorized,
    /// A job's token (`[[issuer]]`) refused: 401 naming the check, 403 (no
    /// rule), or 503 (its issuer's keys cannot be fetched).
    #[error(transparent)]
    Identity(#[from] crate::access::oidc::IdentityRefusal),
    /// Outside the token's scopes.
    #[error(transparent)]
    Forbidden(#[from] Denied),
    #[error("no such path")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("lease not found")]
    LeaseNotFound,
    #[error("ticket not found")]
    TicketNotFound,
    #[error("freeze not found")]
    FreezeNotFound,
    /// Force-release of a lock or semaphore of which nothing is held.
    #[error("{0} not held")]
    NotHeld(Kind),
    #[error("lock held")]
    LockHeld {
        name: String,
        owner: Option<String>,
        /// When the last lease in the request's way expires.
        expires_in: Duration,
        /// How it is held (none: only waiters ahead are in the way).
        mode: Option<Mode>,
        /// Leases held.
        holders: u64,
        /// Requests queued in the line.
        waiting: u64,
    },
    #[error("semaphore full")]
    SemaphoreFull {
        name: String,
        holders: u64,
        /// Permits they hold.
        used: u64,
        limit: u32,
        /// When the first lease expires, if any is held.
        next_expiry_in: Option<Duration>,
        /// Requests queued in the line.
        waiting: u64,
    },
    #[error("superseded")]
    Superseded {
        name: String,
        /// The newer request's owner label.
        owner: Option<String>,
    },
    /// A freeze holds the name.
    #[error("frozen")]
    Frozen {
        name: String,
        freeze_id: Option<String>,
        reason: Option<String>,
        /// When the window ends (ms since the Unix epoch).
        until_ms: i64,
    },
    /// A claim that could not have every name within its wait.
    #[error("claim refused")]
    ClaimRefused {
        /// The names in its way (kind, name).
        names: Vec<(Kind, String)>,
        /// Why, for people: how busy the first of them is.
        detail: String,
        /// When the first lease in its way expires, if known.
        next_expiry_in: Option<Duration>,
    },
    /// No claim with this id holds a lease; `lost`: those a refresh found
    /// gone (the rest were released).
    #[error("claim not found")]
    ClaimNotFound { lost: Vec<(Kind, String)> },
    #[error("payload too large")]
    PayloadTooLarge { limit: usize },
    #[error("request timed out")]
    Timeout,
    #[error("too many event streams")]
    TooManyStreams { max: usize },
    /// The caller's token holds its share of a cap already.
    #[error(transparent)]
    OverQuota(#[from] crate::access::OverQuota),
    /// A `priority` above the token's `max_priority`.
    #[error(transparent)]
    Priority(#[from] crate::access::PriorityDenied),
    /// A failure of the service itself (a bug), not of Redis nor of the
    /// request: answered 500 `internal-error`; its cause is only logged.
    #[error("internal error: {0}")]
    Internal(&'static str),
    #[error(transparent)]
    Engine(#[from] engine::Error),
}

impl AppError {
    /// A field-level validation failure; `field` leads the detail.
    pub fn field(field: &str, err: Invalid) -> Self {
        Self::Invalid(format!("{field}: {}", err.0))
    }

    /// A `kind` named `name` that stayed held (full) for a whole wait.
    pub fn busy(kind: Kind, name: &crate::domain::Name, busy: engine::Busy) -> Self {
        let name = name.to_string();
        match kind {
            Kind::Lock => Self::LockHeld {
                name,
                owner: busy.owner.map(crate::domain::Owner::into_string),
                expires_in: busy.next_expiry_in.unwrap_or_default(),
                mode: Mode::of(
                    busy.holders,
                    crate::domain::Demand::is_exclusive_weight(busy.used),
                ),
                holders: busy.holders,
                waiting: busy.waiting,
            },
            Kind::Semaphore => Self::SemaphoreFull {
                name,
                holders: busy.holders,
                used: busy.used,
                limit: busy.demand.limit() as u32,
                next_expiry_in: busy.next_expiry_in,
                waiting: busy.waiting,
            },
        }
    }

    /// `name` is frozen by `frozen`.
    pub fn frozen(name: &crate::domain::Name, frozen: engine::FrozenBy) -> Self {
        Self::Frozen {
            name: name.to_string(),
            freeze_id: frozen.freeze_id.map(|id| id.to_string()),
            reason: frozen.reason.map(|r| r.as_str().to_owned()),
            until_ms: frozen.until_ms,
        }
    }

    /// Its problem type.
    pub fn problem_type(&self) -> ProblemType {
        match self {
            Self::Invalid(_) | Self::WaitTooLong { .. } => ProblemType::InvalidRequest,
            Self::Unauthorized => ProblemType::Unauthorized,
            Self::Identity(refusal) => match refusal {
                IdentityRefusal::Failed { .. } => ProblemType::Unauthorized,
                IdentityRefusal::NoRule => ProblemType::Forbidden,
                IdentityRefusal::KeysUnavailable { .. } => ProblemType::IssuerUnavailable,
            },
            Self::Forbidden(_) => ProblemType::Forbidden,
            Self::NotFound => ProblemType::NotFound,
            Self::MethodNotAllowed => ProblemType::MethodNotAllowed,
            Self::LeaseNotFound => ProblemType::LeaseNotFound,
            Self::TicketNotFound | Self::Engine(engine::Error::TicketGone) => {
                ProblemType::TicketNotFound
            }
            Self::FreezeNotFound => ProblemType::FreezeNotFound,
            Self::NotHeld(kind) => ProblemType::not_held(*kind),
            Self::LockHeld { .. } => ProblemType::LockHeld,
            Self::SemaphoreFull { .. } => ProblemType::SemaphoreFull,
            Self::Superseded { .. } => ProblemType::Superseded,
            Self::Frozen { .. } => ProblemType::Frozen,
            Self::ClaimRefused { .. } => ProblemType::ClaimRefused,
            Self::ClaimNotFound { .. } => ProblemType::ClaimNotFound,
            Self::PayloadTooLarge { .. } => ProblemType::PayloadTooLarge,
            Self::Timeout => ProblemType::RequestTimeout,
            Self::TooManyStreams { .. } => ProblemType::TooManyStreams,
            Self::OverQuota(over) => match over.quota {
                crate::access::Quota::Waiters => ProblemType::TooManyWaiters,
                crate::access::Quota::Streams => ProblemType::TooManyStreams,
            },
            Self::Priority(_) => ProblemType::Forbidden,
            Self::Engine(engine::Error::Unavailable(_)) => ProblemType::RedisUnavailable,
            Self::Engine(engine::Error::ShuttingDown) => ProblemType::ShuttingDown,
            Self::Engine(engine::Error::TooManyWaiters) => ProblemType::TooManyWaiters,
            Self::Internal(_) | Self::Engine(engine::Error::Protocol(_)) => {
                ProblemType::InternalError
            }
        }
    }

    /// The problem document this error answers with.
    pub fn problem(&self) -> Problem {
        let kind = self.problem_type();
        let mut problem = Problem::new(kind, kind.facts().detail.to_owned());
        match self {
            Self::Invalid(detail) => problem.detail.clone_from(detail),
            Self::WaitTooLong { max_wait_ms } => {
                problem.detail =
                    format!("wait_ms: must be between 0 and {max_wait_ms} (the server's maximum)");
                problem.max_wait_ms = Some(*max_wait_ms);
            }
            Self::LockHeld {
                name,
                owner,
                expires_in,
                mode,
                holders,
                waiting,
            } => {
                let ms = expires_in.as_millis() as u64;
                problem.waiting = Some(*waiting);
                problem.detail = match mode {
                    Some(Mode::Shared) if *holders == 1 => format!(
                        "lock '{name}' is held shared by 1 reader; it expires in {ms} ms unless refreshed"
                    ),
                    Some(Mode::Shared) => format!(
                        "lock '{name}' is held shared by {holders} readers; the last of them \
                         expires in {ms} ms unless refreshed"
                    ),
                    _ => format!(
                        "lock '{name}' is held by someone else; it expires in {ms} ms unless refreshed"
                    ),
                };
                problem.owner.clone_from(owner);
                problem.expires_in_ms = Some(ms);
                problem.mode = *mode;
                problem.holders = Some(*holders);
            }
            Self::SemaphoreFull {
                name,
                holders,
                used,
                limit,
                waiting,
                ..
            } => {
                problem.waiting = Some(*waiting);
                let leases = if *holders == 1 { "lease" } else { "leases" };
                problem.detail = format!(
                    "semaphore '{name}' is full: {used} of {limit} permits held by {holders} {leases}"
                );
                problem.holders = Some(*holders);
                problem.used = Some(*used);
                problem.limit = Some(*limit);
            }
            Self::Identity(refusal) => problem.detail = refusal.to_string(),
            Self::Forbidden(denied) => {
                problem.detail = denied.to_string();
                problem.scope = Some(denied.needed.as_str().to_owned());
            }
            Self::Superseded { name, owner } => {
                problem.detail = format!(
                    "a newer request for '{name}' asked for newest_wins; this one left the line"
                );
                problem.owner.clone_from(owner);
            }
            Self::Frozen {
                name,
                freeze_id,
                reason,
                until_ms,
            } => {
                let until = rfc3339_ms(u64::try_from(*until_ms).unwrap_or(0));
                problem.detail = match reason {
                    Some(reason) => format!("'{name}' is frozen until {until}: {reason}"),
                    None => format!("'{name}' is frozen until {until}"),
                };
                problem.reason.clone_from(reason);
                problem.freeze_id.clone_from(freeze_id);
                problem.until = Some(until);
            }
            Self::ClaimRefused { names, detail, .. } => {
                problem.detail = format!("{detail}; the claim holds none of its names");
                problem.names = Some(names.iter().map(|(_, name)| name.clone()).collect());
            }
            Self::ClaimNotFound { lost } if !lost.is_empty() => {
                let gone: Vec<_> = lost
                    .iter()
                    .map(|(kind, name)| format!("{kind} '{name}'"))
                    .collect();
                problem.detail = format!(
                    "the claim is no longer whole: the lease of {} was gone (expired or \
                     force-released), so the rest were released",
                    gone.join(", ")
                );
                problem.names = Some(lost.iter().map(|(_, name)| name.clone()).collect());
            }
            Self::PayloadTooLarge { limit } => {
                problem.detail = format!("the request body is over the limit of {limit} bytes");
            }
            Self::TooManyStreams { max } => {
                problem.detail = format!(
                    "this instance already serves its maximum of {max} event streams; retry later"
                );
            }
            Self::OverQuota(over) => {
                let what = match over.quota {
                    crate::access::Quota::Waiters => "waiting requests",
                    crate::access::Quota::Streams => "event streams (/events and holders' streams)",
                };
                problem.detail = format!(
                    "this token already has {} {what} open on this instance, its share (half of \
                     {}); other tokens are still served; retry once one ends",
                    over.max,
                    over.quota.setting()
                );
            }
            Self::Priority(denied) => {
                problem.detail = denied.to_string();
            }
            _ => {}
        }
        problem
    }

    /// Seconds a client should wait before retrying, where that is known.
    fn retry_after(&self) -> Option<u64> {
        match self.problem_type().facts().retry {
            RetryAfter::Never => None,
            RetryAfter::Seconds(secs) => match self {
                Self::Identity(IdentityRefusal::KeysUnavailable { retry_after }) => {
                    Some(*retry_after)
                }
                _ => Some(secs),
            },
            RetryAfter::AtExpiry => {
                let expiry = match self {
                    Self::LockHeld { expires_in, .. } => Some(*expires_in),
                    Self::SemaphoreFull { next_expiry_in, .. }
                    | Self::ClaimRefused { next_expiry_in, .. } => *next_expiry_in,
                    _ => None,
                };
                Some(expiry.map_or(1, |d| (d.as_millis().div_ceil(1000) as u64).max(1)))
            }
            RetryAfter::AtThaw => {
                let Self::Frozen { until_ms, .. } = self else {
                    return Some(1);
                };
                let left = until_ms.saturating_sub(crate::engine::wall_clock_ms());
                Some(u64::try_from(left).unwrap_or(0).div_ceil(1000).max(1))
            }
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        // Each 5xx answer is logged once by the trace layer, with its route;
        // an outage once where it starts and ends. The cause goes with them:
        // at warn when it is a bug, at debug when Redis is out of reach.
        match &self {
            Self::Internal(_) | Self::Engine(engine::Error::Protocol(_)) => {
                tracing::warn!(err = %self, "cause");
            }
            Self::Engine(err @ engine::Error::Unavailable(_)) => tracing::debug!(%err, "cause"),
            _ => {}
        }
        let problem = self.problem();
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json_response(&problem, "application/problem+json");
        *response.status_mut() = status;
        if let Some(secs) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Self::Unauthorized | Self::Identity(IdentityRefusal::Failed { .. }) = self {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
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
            expires_in: Duration::from_millis(1500),
            mode: Some(crate::wire::Mode::Exclusive),
            holders: 1,
            waiting: 3,
        };
        let problem = err.problem();
        assert_eq!(problem.status, 409);
        assert!(problem.kind.ends_with("/lock-held"));
        assert_eq!(problem.owner.as_deref(), Some("ci"));
        assert_eq!(problem.expires_in_ms, Some(1500));
        assert_eq!(problem.waiting, Some(3));
        assert_eq!(problem.holders, Some(1));
        assert!(matches!(problem.mode, Some(crate::wire::Mode::Exclusive)));
        assert_eq!(err.retry_after(), Some(2));
    }

    #[test]
    fn a_full_semaphore_retries_at_its_next_expiry() {
        let full = |next_expiry_in| AppError::SemaphoreFull {
            name: "s".into(),
            holders: 2,
            used: 2,
            limit: 2,
            next_expiry_in,
            waiting: 0,
        };
        assert_eq!(
            full(Some(Duration::from_millis(2001))).retry_after(),
            Some(3)
        );
        assert_eq!(full(Some(Duration::from_millis(10))).retry_after(), Some(1));
        assert_eq!(full(None).retry_after(), Some(1));
    }

    #[test]
    fn a_wait_over_the_maximum_names_the_maximum() {
        let problem = AppError::WaitTooLong { max_wait_ms: 5000 }.problem();
        assert_eq!(problem.status, 400);
        assert_eq!(problem.max_wait_ms, Some(5000));
        assert!(problem.detail.starts_with("wait_ms: "));
    }

    #[test]
    fn unauthorized_challenges_for_a_bearer_token() {
        let response = AppError::Unauthorized.into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
    }

    #[test]
    fn an_internal_error_answers_500_without_its_cause() {
        let err = AppError::Internal("a parked request panicked");
        let problem = err.problem();
        assert_eq!(problem.status, 500);
        assert!(problem.kind.ends_with("/internal-error"));
        assert!(!problem.detail.contains("panicked"));
    }

    #[test]
    fn redis_errors_do_not_leak_internals() {
        let err = AppError::Engine(engine::Error::Unavailable("10.0.0.7:6379 refused".into()));
        let problem = err.problem();
        assert_eq!(problem.status, 503);
        assert!(!problem.detail.contains("10.0.0.7"));
        assert_eq!(err.retry_after(), Some(1));
    }
}
