//! What the `/locks` and `/semaphores` routes share: the `{name}` and `{id}`
//! path parameters (each pattern stated once), the parse of a refresh's and
//! an acquisition's fields into domain types, the making of the fields every
//! lease, holder and waiter body shows, and the helpers the handlers of
//! [`super::kind`] are made of.

use std::future::Future;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::IntoParams;

use super::{AppError, Json};
use crate::domain::{
    AcquireRequest, Demand, Forsaken, KeepPlace, Kind, LeaseId, Name, NotifyUrl, Owner, Priority,
    Reason, Ttl, WaitTime,
};
use crate::engine;
use crate::wire::rfc3339_ms;
use crate::wire::{AcquireFields, EtaBasis, Problem, ProblemType, WaiterBody};

/// The `{name}` path parameter.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NamePath {
    /// The lock's or semaphore's name: 1 to 200 printable characters (no
    /// control characters), percent-encoded: a `/` as `%2F`. Not `.` or `..`
    /// (URL clients resolve them as dot segments, even as `%2E`).
    // The pattern is `domain::Printable::Name` (a test checks it).
    #[param(value_type = String, min_length = 1, max_length = 200, pattern = r"^[^\u0000-\u001F\u007F-\u009F\u061C\u200E\u200F\u2028-\u202E\u2066-\u2069]+$", example = "review%2Fapp-1")]
    pub name: Name,
}

/// The `{id}` path parameter, next to `{name}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IdPath {
    /// The lease id from the acquisition.
    #[param(value_type = String, format = Uuid)]
    pub id: LeaseId,
}

/// The raw value of path parameter `key`.
async fn path_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    key: &str,
) -> Result<String, AppError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| AppError::invalid(format!("{key}: {}", e.body_text())))?;
    let value = params.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
    value
        .map(str::to_owned)
        .ok_or_else(|| AppError::invalid(format!("{key}: missing from the path")))
}

impl<S: Send + Sync> FromRequestParts<S> for NamePath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let raw = path_param(parts, state, "name").await?;
        let name = Name::parse(&raw).map_err(|e| AppError::field("name", e))?;
        Ok(Self { name })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let raw = path_param(parts, state, "id").await?;
        let id = LeaseId::parse(&raw).map_err(|e| {
            AppError::invalid(format!(
                "id: {}; if the name has a `/` in it, send it as `%2F` \
                 (review/app-1 as review%2Fapp-1)",
                e.0
            ))
        })?;
        Ok(Self { id })
    }
}

/// The `ttl_ms` of a refresh or an acquisition, if one was given.
///
/// # Errors
/// `invalid-request` naming `ttl_ms` when it is out of range.
pub fn ttl(ttl_ms: Option<u64>) -> Result<Option<Ttl>, AppError> {
    ttl_ms
        .map(Ttl::from_ms)
        .transpose()
        .map_err(|e| AppError::field("ttl_ms", e))
}

/// The fields every acquisition takes, parsed into a domain request.
///
/// # Errors
/// `invalid-request` naming the first field at fault.
/// `webhook_hosts` are those a `notify` URL may name (none: notices are off).
pub fn acquire_request(
    fields: AcquireFields,
    max_wait_ms: u64,
    webhook_hosts: &[String],
) -> Result<AcquireRequest, AppError> {
    let AcquireFields {
        ttl_ms,
        wait_ms,
        owner,
        newest_wins,
        override_reason,
        priority,
        ask_yield,
        keep_place_ms,
        notify,
    } = fields;
    let notify = match (notify, keep_place_ms) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(AppError::invalid(
                "notify: a turn notice is for a ticket: send keep_place_ms with it".into(),
            ))
        }
        (Some(raw), Some(_)) => {
            Some(NotifyUrl::parse(&raw, webhook_hosts).map_err(|e| AppError::field("notify", e))?)
        }
    };
    let ttl = ttl(ttl_ms)?.unwrap_or_default();
    let mut wait_ms = wait_ms.unwrap_or(0);
    if keep_place_ms.is_some() {
        // A request that keeps its place waits what it may, then keeps it.
        wait_ms = wait_ms.min(max_wait_ms);
    }
    let wait = WaitTime::from_ms(wait_ms, max_wait_ms)
        .map_err(|why| AppError::from(Problem::wait_too_long(&why, max_wait_ms)))?;
    let owner = Owner::parse(owner).map_err(|e| AppError::field("owner", e))?;
    let override_reason = Reason::parse(override_reason)
        .map_err(|e| AppError::field("override", e))?
        .map(Box::new);
    Ok(AcquireRequest {
        ttl,
        wait,
        owner,
        newest_wins: newest_wins.unwrap_or(false),
        ask_yield: ask_yield.unwrap_or(false),
        priority: priority
            .map_or(Ok(Priority::default()), Priority::new)
            .map_err(|e| AppError::field("priority", e))?,
        // Not the body's to say: the handler sets it from the caller.
        by: None,
        override_reason,
        // Checked against the service's bounds by the route, which knows them.
        keep_place: keep_place_ms.map(|keep_ms| KeepPlace {
            keep_ms,
            pickup_ms: 0,
            notify,
            forsaken: Forsaken::default(),
        }),
    })
}

/// 201 with the lease's `Location`.
pub fn created(kind: &str, name: &Name, id: LeaseId, body: impl Serialize) -> Response {
    let location = format!("/{kind}/{}/{}", name.path_segment(), id.expose());
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response()
}

/// The answer to a path that no route takes: when it is a name under `/locks/`
/// or `/semaphores/` with a raw `/` in it (`POST /locks/review/x`), a 400 that
/// says to send the `/` as `%2F`; else `otherwise` (404 or 405).
pub fn unrouted(path: &str, method: &axum::http::Method, otherwise: AppError) -> AppError {
    let rest = path
        .strip_prefix("/locks/")
        .or_else(|| path.strip_prefix("/semaphores/"));
    let segments = rest.map_or(0, |r| r.split('/').count());
    // Two segments whose second is a lease id are a lease
    // (`/locks/{name}/{id}`), which takes no POST: 405 as for any other
    // method it lacks. Any other second segment was meant as part of a name.
    let lease_path = rest
        .and_then(|r| r.split('/').nth(1))
        .is_some_and(|id| LeaseId::parse(id).is_ok());
    // A path that a route took (405: the method is what is wrong) has the
    // segments that route names: `/tickets/{ticket}` or `/{id}/events` are
    // not names with a `/`.
    let routed = otherwise.problem_type() == ProblemType::MethodNotAllowed;
    let too_many = segments > 2 && !routed;
    if too_many || (segments == 2 && method == axum::http::Method::POST && !lease_path) {
        AppError::invalid(
            "name: a `/` in a name must be sent percent-encoded as `%2F` \
             (POST /locks/review%2Fapp-1 for the name review/app-1)"
                .into(),
        )
    } else {
        otherwise
    }
}

/// The lease, or `lease-not-found`: refresh and check.
///
/// # Errors
/// `lease-not-found` when there is no such live lease; what the engine reports.
pub async fn found(
    lease: impl Future<Output = Result<Option<engine::Lease>, engine::Error>>,
) -> Result<engine::Lease, AppError> {
    lease
        .await?
        .ok_or(AppError::from(ProblemType::LeaseNotFound))
}

/// 204, or `lease-not-found`: release.
///
/// # Errors
/// `lease-not-found` when there is no such live lease; what the engine reports.
pub async fn released(
    released: impl Future<Output = Result<bool, engine::Error>>,
) -> Result<StatusCode, AppError> {
    if released.await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::from(ProblemType::LeaseNotFound))
    }
}

/// Implements `From<engine::Lease>` for a kind's lease body: the fields both
/// kinds show, plus the body's own, each computed from the lease.
macro_rules! lease_body {
    ($body:ty $(, $field:ident = |$lease:ident| $value:expr)*) => {
        impl From<$crate::engine::Lease> for $body {
            fn from(lease: $crate::engine::Lease) -> Self {
                $(let $field = { let $lease = &lease; $value };)*
                Self {
                    name: lease.name.to_string(),
                    id: lease.id.expose(),
                    owner: lease.owner.map($crate::domain::Owner::into_string),
                    fencing_token: lease.fencing_token,
                    ttl_ms: lease.ttl.as_ms(),
                    expires_at: $crate::wire::rfc3339_ms(lease.expires_at_ms),
                    $($field,)*
                }
            }
        }
    };
}
pub(crate) use lease_body;

/// Implements `From<engine::Holder>` for a kind's holder body (one lease in
/// a status, without its id): the fields both kinds show, plus the body's
/// own, computed from the holder.
macro_rules! holder_body {
    ($body:ty, $field:ident = |$holder:ident| $value:expr) => {
        impl From<$crate::engine::Holder> for $body {
            fn from(holder: $crate::engine::Holder) -> Self {
                let $field = {
                    let $holder = &holder;
                    $value
                };
                Self {
                    owner: holder.owner.map($crate::domain::Owner::into_string),
                    fencing_token: holder.fencing_token,
                    expires_in_ms: holder.expires_in.as_millis() as u64,
                    $field,
                }
            }
        }
    };
}
pub(crate) use holder_body;

/// A waiter of a `kind`, as a status shows it: a lock's says whether it is
/// shared, a semaphore's how many permits it asks for.
pub fn waiter_body(kind: Kind, waiter: engine::Waiter) -> WaiterBody {
    let shared_lock = !Demand::is_exclusive_weight(waiter.weight);
    let (shared, permits) = match kind {
        Kind::Lock => (shared_lock.then_some(true), None),
        Kind::Semaphore => (None, Some(waiter.weight)),
    };
    WaiterBody {
        position: waiter.position,
        owner: waiter.owner.map(Owner::into_string),
        waited_ms: waiter.waited.as_millis() as u64,
        priority: (!waiter.priority.is_default()).then(|| waiter.priority.get()),
        shared,
        permits,
        ticket: waiter.kept_until_ms.map(|_| true),
        kept_until: waiter.kept_until_ms.map(rfc3339_ms),
        eta_ms: waiter.eta.map(|eta| eta_ms(eta.wait)),
        eta_basis: waiter.eta.map(|eta| EtaBasis { holds: eta.holds }),
    }
}

/// An expected wait, in whole ms.
pub fn eta_ms(wait: std::time::Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}

/// The waiters of a `kind`'s status, in the order they will be served.
pub fn waiter_bodies(kind: Kind, waiters: Vec<engine::Waiter>) -> Vec<WaiterBody> {
    waiters.into_iter().map(|w| waiter_body(kind, w)).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_name_pattern_says_what_the_domain_refuses() {
        use utoipa::openapi::{schema::Schema, RefOr};
        use utoipa::IntoParams;

        let params = super::NamePath::into_params(|| None);
        let Some(RefOr::T(Schema::Object(schema))) = &params[0].schema else {
            panic!("the name parameter has an inline schema");
        };
        let refused = crate::domain::Printable::Name.refused_class();
        assert_eq!(schema.pattern, Some(format!("^[^{refused}]+$")));
    }
}
