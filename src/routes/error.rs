//! `AppError`: every failure the API reports, as `application/problem+json`
//! (RFC 9457). It is a [`Problem`] of the wire's table, made by the wire's
//! constructors (which write every `detail` but those of `access`'s
//! refusals, whose `Display` says them), with what `Retry-After` counts from
//! and, for a failure of the service itself, its cause: logged, never sent.
//! 4xx details speak to the caller; 5xx hide internals.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::json::json_response;
use crate::access::oidc::IdentityRefusal;
use crate::access::{Denied, OverQuota, PriorityDenied, Quota};
use crate::domain::{Demand, Invalid, Kind, Name, Owner};
use crate::engine;
use crate::wire::{LockHeld, Mode, Problem, ProblemType, RetryAfter, SemaphoreFull};

/// A failure of a request: the problem it answers with.
#[derive(Debug)]
pub struct AppError {
    /// Boxed: an error travels in every handler's `Result`.
    problem: Box<Problem>,
    /// When a `Retry-After` of the type's policy comes due, where this
    /// occurrence knows.
    due: Due,
    /// What failed, when the service did: for the log only.
    cause: Option<Cause>,
}

/// When trying again may help, as far as one occurrence knows.
#[derive(Debug, Clone, Copy, Default)]
enum Due {
    /// Not known: the type's policy says it (one second for a moment).
    #[default]
    Unknown,
    /// When the lease in the way expires.
    In(Duration),
    /// When a freeze's window ends (ms since the Unix epoch).
    At(i64),
    /// After this many seconds, as the failure itself says.
    After(u64),
}

/// A failure of the service, not of the request.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// A bug of the service (neither Redis nor the request): answered 500.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// What the engine reported.
    #[error(transparent)]
    Engine(engine::Error),
}

impl AppError {
    /// `invalid-request` with `detail`, which names the field.
    pub fn invalid(detail: String) -> Self {
        Problem::invalid(detail).into()
    }

    /// A field-level validation failure; `field` leads the detail.
    pub fn field(field: &str, err: Invalid) -> Self {
        Problem::invalid_field(field, &err).into()
    }

    /// A failure of the service itself (a bug): 500 `internal-error`,
    /// `what` only logged.
    pub fn internal(what: &'static str) -> Self {
        Self::caused(Cause::Internal(what))
    }

    /// A `kind` named `name` that stayed held (full) for a whole wait.
    pub fn busy(kind: Kind, name: &Name, busy: engine::Busy) -> Self {
        let name = name.to_string();
        let problem = match kind {
            Kind::Lock => Problem::lock_held(LockHeld {
                name,
                owner: busy.owner.map(Owner::into_string),
                expires_in_ms: busy.next_expiry_in.unwrap_or_default().as_millis() as u64,
                mode: Mode::of(busy.holders, Demand::is_exclusive_weight(busy.used)),
                holders: busy.holders,
                waiting: busy.waiting,
            }),
            Kind::Semaphore => Problem::semaphore_full(SemaphoreFull {
                name,
                holders: busy.holders,
                used: busy.used,
                limit: busy.demand.limit() as u32,
                waiting: busy.waiting,
            }),
        };
        Self::due(problem, busy.next_expiry_in.map_or(Due::Unknown, Due::In))
    }

    /// `name` is frozen by `frozen`.
    pub fn frozen(name: &Name, frozen: engine::FrozenBy) -> Self {
        let problem = Problem::frozen(
            name.as_str(),
            frozen.reason.map(|r| r.as_str().to_owned()),
            frozen.freeze_id.map(|id| id.to_string()),
            frozen.until_ms,
        );
        Self::due(problem, Due::At(frozen.until_ms))
    }

    /// A claim refused `why` (the first of `names` was in its way), to try
    /// again when its lease expires in `next_expiry_in`.
    pub fn claim_refused(why: &str, names: Vec<String>, next_expiry_in: Option<Duration>) -> Self {
        let problem = Problem::claim_refused(why, names);
        Self::due(problem, next_expiry_in.map_or(Due::Unknown, Due::In))
    }

    fn due(problem: Problem, due: Due) -> Self {
        Self {
            problem: Box::new(problem),
            due,
            cause: None,
        }
    }

    fn caused(cause: Cause) -> Self {
        let kind = match &cause {
            Cause::Internal(_) | Cause::Engine(engine::Error::Protocol(_)) => {
                ProblemType::InternalError
            }
            Cause::Engine(engine::Error::Unavailable(_)) => ProblemType::RedisUnavailable,
            Cause::Engine(engine::Error::ShuttingDown) => ProblemType::ShuttingDown,
            Cause::Engine(engine::Error::TooManyWaiters) => ProblemType::TooManyWaiters,
            Cause::Engine(engine::Error::TicketGone) => ProblemType::TicketNotFound,
        };
        Self {
            cause: Some(cause),
            ..Problem::of(kind).into()
        }
    }

    /// The problem document this error answers with.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// Its problem type.
    pub fn problem_type(&self) -> ProblemType {
        self.problem
            .problem_type()
            .unwrap_or(ProblemType::InternalError)
    }

    /// What failed, when the service did.
    pub fn cause(&self) -> Option<&Cause> {
        self.cause.as_ref()
    }

    /// Seconds a client should wait before retrying, where that is known.
    fn retry_after(&self) -> Option<u64> {
        let seconds = |ms: u128| (ms.div_ceil(1000) as u64).max(1);
        match (self.problem_type().facts().retry, self.due) {
            (RetryAfter::Never, _) => None,
            (_, Due::After(secs)) | (RetryAfter::Seconds(secs), _) => Some(secs),
            (RetryAfter::AtExpiry, Due::In(left)) => Some(seconds(left.as_millis())),
            (RetryAfter::AtThaw, Due::At(until_ms)) => {
                let left = until_ms.saturating_sub(crate::engine::wall_clock_ms());
                Some(seconds(u128::try_from(left).unwrap_or(0)))
            }
            (RetryAfter::AtExpiry | RetryAfter::AtThaw, _) => Some(1),
        }
    }
}

impl From<Problem> for AppError {
    fn from(problem: Problem) -> Self {
        Self::due(problem, Due::Unknown)
    }
}

/// A problem that says what every occurrence of its type says.
impl From<ProblemType> for AppError {
    fn from(kind: ProblemType) -> Self {
        Problem::of(kind).into()
    }
}

impl From<engine::Error> for AppError {
    fn from(err: engine::Error) -> Self {
        Self::caused(Cause::Engine(err))
    }
}

/// A job's token (`[[issuer]]`) refused: 401 naming the check, 403 (no
/// rule), or 503 (its issuer's keys cannot be fetched).
impl From<IdentityRefusal> for AppError {
    fn from(refusal: IdentityRefusal) -> Self {
        let (kind, due) = match refusal {
            IdentityRefusal::Failed { .. } => (ProblemType::Unauthorized, Due::Unknown),
            IdentityRefusal::NoRule => (ProblemType::Forbidden, Due::Unknown),
            IdentityRefusal::KeysUnavailable { retry_after } => {
                (ProblemType::IssuerUnavailable, Due::After(retry_after))
            }
        };
        Self::due(Problem::new(kind, refusal.to_string()), due)
    }
}

/// Outside the token's scopes.
impl From<Denied> for AppError {
    fn from(denied: Denied) -> Self {
        Problem::forbidden(denied.to_string(), Some(denied.needed.as_str())).into()
    }
}

/// A `priority` above the token's `max_priority`.
impl From<PriorityDenied> for AppError {
    fn from(denied: PriorityDenied) -> Self {
        Problem::forbidden(denied.to_string(), None).into()
    }
}

/// The caller's token holds its share of a cap already.
impl From<OverQuota> for AppError {
    fn from(over: OverQuota) -> Self {
        let (kind, what) = match over.quota {
            Quota::Waiters => (ProblemType::TooManyWaiters, "waiting requests"),
            Quota::Streams => (
                ProblemType::TooManyStreams,
                "event streams (/events and holders' streams)",
            ),
        };
        Problem::over_quota(kind, over.max, what, over.quota.setting()).into()
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            Some(cause) => cause.fmt(f),
            None => f.write_str(&self.problem.detail),
        }
    }
}

impl std::error::Error for AppError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_ref().map(|c| c as _)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        // Each 5xx answer is logged once by the trace layer, with its route;
        // an outage once where it starts and ends. The cause goes with them:
        // at warn when it is a bug, at debug when Redis is out of reach.
        match &self.cause {
            Some(err @ (Cause::Internal(_) | Cause::Engine(engine::Error::Protocol(_)))) => {
                tracing::warn!(%err, "cause");
            }
            Some(Cause::Engine(err @ engine::Error::Unavailable(_))) => {
                tracing::debug!(%err, "cause");
            }
            _ => {}
        }
        let status =
            StatusCode::from_u16(self.problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.retry_after();
        let challenge = self.problem_type() == ProblemType::Unauthorized;
        let mut response = json_response(&*self.problem, "application/problem+json");
        *response.status_mut() = status;
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if challenge {
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

    fn held(expires_in_ms: u64) -> AppError {
        let problem = Problem::lock_held(LockHeld {
            name: "deploy".into(),
            owner: Some("ci".into()),
            expires_in_ms,
            mode: Some(Mode::Exclusive),
            holders: 1,
            waiting: 3,
        });
        AppError::due(problem, Due::In(Duration::from_millis(expires_in_ms)))
    }

    #[test]
    fn lock_held_carries_holder_and_retry_after() {
        let err = held(1500);
        let problem = err.problem();
        assert_eq!(problem.status, 409);
        assert!(problem.kind.ends_with("/lock-held"));
        assert_eq!(problem.owner.as_deref(), Some("ci"));
        assert_eq!(problem.expires_in_ms, Some(1500));
        assert_eq!(problem.waiting, Some(3));
        assert_eq!(problem.holders, Some(1));
        assert!(matches!(problem.mode, Some(Mode::Exclusive)));
        assert_eq!(err.retry_after(), Some(2));
    }

    #[test]
    fn a_refusal_retries_at_its_next_expiry() {
        assert_eq!(held(2001).retry_after(), Some(3));
        assert_eq!(held(10).retry_after(), Some(1));
        let unknown = AppError::claim_refused("busy", vec!["s".into()], None);
        assert_eq!(unknown.retry_after(), Some(1));
    }

    #[test]
    fn a_wait_over_the_maximum_names_the_maximum() {
        let why = crate::domain::WaitTime::from_ms(6000, 5000).unwrap_err();
        let err = AppError::from(Problem::wait_too_long(&why, 5000));
        let problem = err.problem();
        assert_eq!(problem.status, 400);
        assert_eq!(problem.max_wait_ms, Some(5000));
        assert!(problem.detail.starts_with("wait_ms: "));
    }

    #[test]
    fn unauthorized_challenges_for_a_bearer_token() {
        let response = AppError::from(ProblemType::Unauthorized).into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
    }

    #[test]
    fn an_internal_error_answers_500_without_its_cause() {
        let err = AppError::internal("a parked request panicked");
        let problem = err.problem();
        assert_eq!(problem.status, 500);
        assert!(problem.kind.ends_with("/internal-error"));
        assert!(!problem.detail.contains("panicked"));
        assert!(err.to_string().contains("panicked"));
    }

    #[test]
    fn redis_errors_do_not_leak_internals() {
        let err = AppError::from(engine::Error::Unavailable("10.0.0.7:6379 refused".into()));
        let problem = err.problem();
        assert_eq!(problem.status, 503);
        assert!(!problem.detail.contains("10.0.0.7"));
        assert_eq!(err.retry_after(), Some(1));
    }
}
