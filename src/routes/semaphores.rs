//! `/semaphores`: acquire a slot, refresh, release, check, status.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{LeasePath, NamePath};
use super::locks::{parse_owner, parse_ttl, parse_wait, Refresh};
use super::problems::{
    InvalidRequest, LeaseNotFound, PayloadTooLarge, SemaphoreFull, Unauthorized, Unavailable,
};
use super::{rfc3339_ms, AppState, Json, JsonBody};
use crate::domain::{Limit, Owner};
use crate::engine::{SemaphoreLease, SemaphoreStatus};
use crate::error::AppError;

/// The `/semaphores` routes, documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(acquire, status))
        .routes(routes!(check, refresh, release))
}

/// Body of `POST /semaphores/{name}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"limit": 4, "ttl_ms": 60000, "wait_ms": 10000, "owner": "worker-7"}))]
pub struct AcquireSemaphore {
    /// At most this many leases are held at once: 1 to 100000. Required.
    #[schema(value_type = u64, minimum = 1, maximum = 100_000, required = true)]
    #[serde(default, deserialize_with = "super::extract::whole_number")]
    pub limit: Option<u64>,
    /// Lease lifetime in ms unless refreshed: 1 to 86400000, default 30000.
    #[schema(minimum = 1, maximum = 86_400_000, default = 30_000)]
    #[serde(default, deserialize_with = "super::extract::whole_number")]
    pub ttl_ms: Option<u64>,
    /// How long to wait in line for a slot, in ms: 0 (default) to the server's maximum
    /// (`BATON_MAX_WAIT_MS`, 300000 unless configured otherwise).
    #[schema(minimum = 0, maximum = 300_000, default = 0)]
    #[serde(default, deserialize_with = "super::extract::whole_number")]
    pub wait_ms: Option<u64>,
    /// Who holds the lease, shown in status; at most 200 characters,
    /// none of them a control character.
    #[schema(max_length = 200, pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$")]
    pub owner: Option<String>,
}

/// A semaphore lease, as its holder sees it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "migrations",
    "id": "0b7f7c0e-2a51-4c0e-8f5e-9d3c1a2b4c6d",
    "owner": "worker-7",
    "limit": 4,
    "fencing_token": 1_763_780_000_000_017_u64,
    "ttl_ms": 60000,
    "expires_at": "2026-11-22T03:14:15.926Z"
}))]
pub struct SemaphoreLeaseBody {
    pub name: String,
    /// The lease id: the capability to refresh and release. Keep it secret.
    #[schema(format = Uuid)]
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The limit this acquisition was judged against.
    pub limit: u32,
    /// Strictly increases per semaphore name, in the order slots were granted.
    pub fencing_token: u64,
    pub ttl_ms: u64,
    /// When the lease expires unless refreshed (RFC 3339, Redis's clock).
    pub expires_at: String,
}

impl From<SemaphoreLease> for SemaphoreLeaseBody {
    fn from(lease: SemaphoreLease) -> Self {
        Self {
            name: lease.name.to_string(),
            id: lease.id.expose(),
            owner: lease.owner.map(Owner::into_string),
            limit: lease.limit.get(),
            fencing_token: lease.fencing_token,
            ttl_ms: lease.ttl.as_ms(),
            expires_at: rfc3339_ms(lease.expires_at_ms),
        }
    }
}

/// One held slot, without its lease id.
#[derive(Debug, Serialize, ToSchema)]
pub struct SlotBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub fencing_token: u64,
    pub expires_in_ms: u64,
}

/// A semaphore as anyone may see it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "migrations",
    "holders": 2,
    "limit": 4,
    "leases": [
        {"owner": "worker-7", "fencing_token": 1_763_780_000_000_017_u64, "expires_in_ms": 51200},
        {"fencing_token": 1_763_780_000_000_020_u64, "expires_in_ms": 58800}
    ]
}))]
pub struct SemaphoreStatusBody {
    pub name: String,
    /// How many leases are held now.
    pub holders: u64,
    /// The limit of the latest acquisition, while the semaphore is in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The held leases, in the order they were granted.
    pub leases: Vec<SlotBody>,
}

impl From<SemaphoreStatus> for SemaphoreStatusBody {
    fn from(status: SemaphoreStatus) -> Self {
        Self {
            name: status.name.to_string(),
            holders: status.leases.len() as u64,
            limit: status.limit.map(Limit::get),
            leases: status
                .leases
                .into_iter()
                .map(|l| SlotBody {
                    owner: l.owner.map(Owner::into_string),
                    fencing_token: l.fencing_token,
                    expires_in_ms: l.expires_in.as_millis() as u64,
                })
                .collect(),
        }
    }
}

/// Acquire a semaphore slot
///
/// Takes one of `limit` slots. Slots go first come, first served: if the
/// semaphore is full (or earlier waiters are in line) and `wait_ms` is above
/// 0, the request queues and waits for its turn, for at most `wait_ms`.
#[utoipa::path(
    post,
    path = "/semaphores/{name}",
    operation_id = "acquire_semaphore",
    tag = "semaphores",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Semaphore name: 1 to 200 of A-Z a-z 0-9 . _ - :", example = "migrations")),
    request_body(content = AcquireSemaphore, content_type = "application/json"),
    responses(
        (status = 201, description = "Acquired", body = SemaphoreLeaseBody,
            headers(("Location" = String, description = "The lease: /semaphores/{name}/{id}"))),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 409, response = SemaphoreFull),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn acquire(
    State(state): State<AppState>,
    NamePath(name): NamePath,
    JsonBody(body): JsonBody<AcquireSemaphore>,
) -> Result<Response, AppError> {
    let limit = body
        .limit
        .ok_or_else(|| AppError::Invalid("limit: is required".into()))
        .and_then(|n| Limit::new(n).map_err(|e| AppError::field("limit", e)))?;
    let ttl = parse_ttl(body.ttl_ms)?.unwrap_or_default();
    let wait = parse_wait(body.wait_ms, state.settings.max_wait_ms)?;
    let owner = parse_owner(body.owner)?;
    match state
        .semaphores
        .acquire(&name, limit, ttl, wait, owner)
        .await?
    {
        Ok(lease) => {
            let location = format!("/semaphores/{}/{}", lease.name, lease.id.expose());
            Ok((
                StatusCode::CREATED,
                [(header::LOCATION, location)],
                Json(SemaphoreLeaseBody::from(lease)),
            )
                .into_response())
        }
        Err(full) => Err(AppError::SemaphoreFull {
            name: name.to_string(),
            holders: full.holders,
            limit: full.limit.get(),
            retry_after_secs: full
                .next_expiry_in
                .map_or(1, |d| d.as_millis().div_ceil(1000).max(1) as u64),
        }),
    }
}

/// Refresh a semaphore lease
///
/// Extends a live lease by `ttl_ms` from now (default: its own ttl). A lease
/// that has expired is gone: 404, and it is not brought back.
#[utoipa::path(
    patch,
    path = "/semaphores/{name}/{id}",
    operation_id = "refresh_semaphore",
    tag = "semaphores",
    params(
        ("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Semaphore name", example = "migrations"),
        ("id" = String, Path, format = Uuid, description = "Lease id from the acquisition"),
    ),
    request_body(content = Option<Refresh>, description = "May be empty: the lease's own ttl", content_type = "application/json"),
    responses(
        (status = 200, description = "Refreshed", body = SemaphoreLeaseBody),
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
) -> Result<Json<SemaphoreLeaseBody>, AppError> {
    let ttl = parse_ttl(body.ttl_ms)?;
    state
        .semaphores
        .refresh(&lease.name, lease.id, ttl)
        .await?
        .map(|l| Json(l.into()))
        .ok_or(AppError::LeaseNotFound)
}

/// Release a semaphore lease
///
/// Gives the slot back and wakes the next waiter in line.
#[utoipa::path(
    delete,
    path = "/semaphores/{name}/{id}",
    operation_id = "release_semaphore",
    tag = "semaphores",
    params(
        ("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Semaphore name", example = "migrations"),
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
    if state.semaphores.release(&lease.name, lease.id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::LeaseNotFound)
    }
}

/// Check a semaphore lease
///
/// The lease, if it is still live.
#[utoipa::path(
    get,
    path = "/semaphores/{name}/{id}",
    operation_id = "check_semaphore",
    tag = "semaphores",
    params(
        ("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Semaphore name", example = "migrations"),
        ("id" = String, Path, format = Uuid, description = "Lease id from the acquisition"),
    ),
    responses(
        (status = 200, description = "Still held", body = SemaphoreLeaseBody),
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
) -> Result<Json<SemaphoreLeaseBody>, AppError> {
    state
        .semaphores
        .get(&lease.name, lease.id)
        .await?
        .map(|l| Json(l.into()))
        .ok_or(AppError::LeaseNotFound)
}

/// Semaphore status
///
/// How many leases are held, with each holder's owner label, fencing token
/// and time left, in the order they were granted. Never the lease ids.
#[utoipa::path(
    get,
    path = "/semaphores/{name}",
    operation_id = "semaphore_status",
    tag = "semaphores",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9._:-]+$", description = "Semaphore name", example = "migrations")),
    responses(
        (status = 200, description = "Status", body = SemaphoreStatusBody),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    ),
    security((), ("bearer" = []))
)]
pub async fn status(
    State(state): State<AppState>,
    NamePath(name): NamePath,
) -> Result<Json<SemaphoreStatusBody>, AppError> {
    Ok(Json(state.semaphores.status(&name).await?.into()))
}
