//! `/locks`: acquire, refresh, release, check, status, listing, force-release.

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{LeasePath, NamePath};
use super::problems::{
    Forbidden, InvalidRequest, LeaseNotFound, LockHeld, LockNotHeld, PayloadTooLarge, Unauthorized,
    Unavailable,
};
use super::{rfc3339_ms, Access, AppState, Json, JsonBody};
use crate::domain::{NamePrefix, Owner, Ttl, WaitTime};
use crate::engine::{LockLease, LockStatus};
use crate::error::AppError;

/// The `/locks` routes, documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(acquire, status, force_release))
        .routes(routes!(check, refresh, release))
}

/// Body of `POST /locks/{name}`; every field is optional and an empty body
/// means all defaults.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"ttl_ms": 60000, "wait_ms": 10000, "owner": "https://ci.example.com/jobs/42"}))]
pub struct AcquireLock {
    /// Lease lifetime in ms unless refreshed: 1 to 86400000, default 30000.
    #[schema(minimum = 1, maximum = 86_400_000, default = 30_000)]
    #[serde(default, deserialize_with = "super::extract::whole_number")]
    pub ttl_ms: Option<u64>,
    /// How long to wait for the lock, in ms: 0 (default) to the server's maximum
    /// (`BATON_MAX_WAIT_MS`, 300000 unless configured otherwise).
    #[schema(minimum = 0, maximum = 300_000, default = 0)]
    #[serde(default, deserialize_with = "super::extract::whole_number")]
    pub wait_ms: Option<u64>,
    /// Who holds the lease, shown in status (e.g. a CI job URL); at most 200 characters,
    /// none of them a control character.
    #[schema(max_length = 200, pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$")]
    pub owner: Option<String>,
}

/// Body of `PATCH /locks/{name}/{id}` and `PATCH /semaphores/{name}/{id}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"ttl_ms": 60000}))]
pub struct Refresh {
    /// New lifetime from now, in ms: 1 to 86400000; default: the lease's own ttl.
    #[schema(minimum = 1, maximum = 86_400_000)]
    #[serde(default, deserialize_with = "super::extract::whole_number")]
    pub ttl_ms: Option<u64>,
}

/// A lock lease, as its holder sees it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "id": "5f0c6f5e-8d8e-4b7a-9c55-2f1f0e7d9a31",
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "ttl_ms": 60000,
    "expires_at": "2026-11-22T03:14:15.926Z"
}))]
pub struct LockLeaseBody {
    pub name: String,
    /// The lease id: the capability to refresh and release. Keep it secret.
    #[schema(format = Uuid)]
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Strictly increases with every acquisition of this lock; pass it to what
    /// the lock protects so it can refuse writes from a stale holder.
    pub fencing_token: u64,
    pub ttl_ms: u64,
    /// When the lease expires unless refreshed (RFC 3339, Redis's clock).
    pub expires_at: String,
}

impl From<LockLease> for LockLeaseBody {
    fn from(lease: LockLease) -> Self {
        Self {
            name: lease.name.to_string(),
            id: lease.id.expose(),
            owner: lease.owner.map(Owner::into_string),
            fencing_token: lease.fencing_token,
            ttl_ms: lease.ttl.as_ms(),
            expires_at: rfc3339_ms(lease.expires_at_ms),
        }
    }
}

/// A lock as anyone may see it; the lease id is never shown.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "held": true,
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "expires_in_ms": 41230
}))]
pub struct LockStatusBody {
    pub name: String,
    pub held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
}

impl From<LockStatus> for LockStatusBody {
    fn from(status: LockStatus) -> Self {
        let name = status.name.to_string();
        match status.holder {
            Some(holder) => Self {
                name,
                held: true,
                owner: holder.owner.map(Owner::into_string),
                fencing_token: Some(holder.fencing_token),
                expires_in_ms: Some(holder.expires_in.as_millis() as u64),
            },
            None => Self {
                name,
                held: false,
                owner: None,
                fencing_token: None,
                expires_in_ms: None,
            },
        }
    }
}

/// The held locks.
#[derive(Debug, Serialize, ToSchema)]
pub struct LockList {
    pub locks: Vec<LockStatusBody>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only locks whose names start with this (name characters only).
    #[param(max_length = 200, pattern = "^[A-Za-z0-9._:-]*$", example = "deploy-")]
    pub prefix: Option<String>,
}

pub(crate) fn parse_ttl(ms: Option<u64>) -> Result<Option<Ttl>, AppError> {
    ms.map(Ttl::from_ms)
        .transpose()
        .map_err(|e| AppError::field("ttl_ms", e))
}

pub(crate) fn parse_wait(ms: Option<u64>, max_ms: u64) -> Result<WaitTime, AppError> {
    WaitTime::from_ms(ms.unwrap_or(0), max_ms).map_err(|e| AppError::field("wait_ms", e))
}

pub(crate) fn parse_owner(owner: Option<String>) -> Result<Option<Owner>, AppError> {
    Owner::parse(owner).map_err(|e| AppError::field("owner", e))
}

fn created(location: String, body: impl Serialize) -> Response {
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response()
}

/// Acquire a lock
///
/// Takes the lock if it is free. If it is held and `wait_ms` is above 0, waits
/// until it is released or expires (woken by the release itself, within
/// milliseconds) for at most `wait_ms`.
#[utoipa::path(
    post,
    path = "/locks/{name}",
    operation_id = "acquire_lock",
    tag = "locks",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Lock name: 1 to 200 of A-Z a-z 0-9 . _ - :", example = "deploy-prod")),
    request_body(content = Option<AcquireLock>, description = "May be empty: all defaults", content_type = "application/json"),
    responses(
        (status = 201, description = "Acquired", body = LockLeaseBody,
            headers(("Location" = String, description = "The lease: /locks/{name}/{id}"))),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 409, response = LockHeld),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn acquire(
    State(state): State<AppState>,
    NamePath(name): NamePath,
    JsonBody(body): JsonBody<AcquireLock>,
) -> Result<Response, AppError> {
    let ttl = parse_ttl(body.ttl_ms)?.unwrap_or_default();
    let wait = parse_wait(body.wait_ms, state.settings.max_wait_ms)?;
    let owner = parse_owner(body.owner)?;
    match state.locks.acquire(&name, ttl, wait, owner).await? {
        Ok(lease) => {
            let location = format!("/locks/{}/{}", lease.name, lease.id.expose());
            Ok(created(location, LockLeaseBody::from(lease)))
        }
        Err(held) => Err(AppError::LockHeld {
            name: name.to_string(),
            owner: held.owner.map(Owner::into_string),
            expires_in_ms: held.expires_in.as_millis() as u64,
        }),
    }
}

/// Refresh a lease
///
/// Extends a lease that is still held, by `ttl_ms` from now (default: its own
/// ttl). An expired lease cannot be brought back.
#[utoipa::path(
    patch,
    path = "/locks/{name}/{id}",
    operation_id = "refresh_lock",
    tag = "locks",
    params(
        ("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Lock name", example = "deploy-prod"),
        ("id" = String, Path, format = Uuid, description = "Lease id from the acquisition"),
    ),
    request_body(content = Option<Refresh>, description = "May be empty: the lease's own ttl", content_type = "application/json"),
    responses(
        (status = 200, description = "Refreshed", body = LockLeaseBody),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = LeaseNotFound),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn refresh(
    State(state): State<AppState>,
    lease: LeasePath,
    JsonBody(body): JsonBody<Refresh>,
) -> Result<Json<LockLeaseBody>, AppError> {
    let ttl = parse_ttl(body.ttl_ms)?;
    state
        .locks
        .refresh(&lease.name, lease.id, ttl)
        .await?
        .map(|l| Json(l.into()))
        .ok_or(AppError::LeaseNotFound)
}

/// Release a lease
///
/// Frees the lock if this lease holds it, and wakes its waiters.
#[utoipa::path(
    delete,
    path = "/locks/{name}/{id}",
    operation_id = "release_lock",
    tag = "locks",
    params(
        ("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Lock name", example = "deploy-prod"),
        ("id" = String, Path, format = Uuid, description = "Lease id from the acquisition"),
    ),
    responses(
        (status = 204, description = "Released"),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = LeaseNotFound),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn release(
    State(state): State<AppState>,
    lease: LeasePath,
) -> Result<StatusCode, AppError> {
    if state.locks.release(&lease.name, lease.id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::LeaseNotFound)
    }
}

/// Check a lease
///
/// The lease, if it is still held.
#[utoipa::path(
    get,
    path = "/locks/{name}/{id}",
    operation_id = "check_lock",
    tag = "locks",
    params(
        ("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Lock name", example = "deploy-prod"),
        ("id" = String, Path, format = Uuid, description = "Lease id from the acquisition"),
    ),
    responses(
        (status = 200, description = "Still held", body = LockLeaseBody),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = LeaseNotFound),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn check(
    State(state): State<AppState>,
    lease: LeasePath,
) -> Result<Json<LockLeaseBody>, AppError> {
    state
        .locks
        .get(&lease.name, lease.id)
        .await?
        .map(|l| Json(l.into()))
        .ok_or(AppError::LeaseNotFound)
}

/// Lock status
///
/// Whether the lock is held, by whom (owner label) and until when. Never the lease id.
#[utoipa::path(
    get,
    path = "/locks/{name}",
    operation_id = "lock_status",
    tag = "locks",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Lock name", example = "deploy-prod")),
    responses(
        (status = 200, description = "Status", body = LockStatusBody),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn status(
    State(state): State<AppState>,
    NamePath(name): NamePath,
) -> Result<Json<LockStatusBody>, AppError> {
    Ok(Json(state.locks.status(&name).await?.into()))
}

/// List held locks
///
/// The held locks, sorted by name, optionally only those whose names start
/// with `prefix`.
#[utoipa::path(
    get,
    path = "/locks",
    operation_id = "list_locks",
    tag = "locks",
    params(ListQuery),
    responses(
        (status = 200, description = "Held locks", body = LockList),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn list(
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<LockList>, AppError> {
    let Query(query) = query.map_err(|e| AppError::Invalid(format!("query: {}", e.body_text())))?;
    let prefix = NamePrefix::parse(query.prefix.as_deref().unwrap_or(""))
        .map_err(|e| AppError::field("prefix", e))?;
    let locks = state.locks.list(&prefix).await?;
    Ok(Json(LockList {
        locks: locks.into_iter().map(Into::into).collect(),
    }))
}

/// Force-release a lock
///
/// Frees the lock whoever holds it (an administrator's action) and wakes its
/// waiters. Needs an admin token when the service has tokens.
#[utoipa::path(
    delete,
    path = "/locks/{name}",
    operation_id = "force_release_lock",
    tag = "locks",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Lock name", example = "deploy-prod")),
    responses(
        (status = 204, description = "Released"),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = LockNotHeld),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn force_release(
    State(state): State<AppState>,
    access: Option<Extension<Access>>,
    NamePath(name): NamePath,
) -> Result<StatusCode, AppError> {
    let access = access.map_or(Access::Anonymous, |Extension(a)| a);
    state.auth.allow_force_release(access)?;
    if state.locks.force_release(&name).await? {
        tracing::info!(lock = %name, ?access, "force-released");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::LockNotHeld)
    }
}
