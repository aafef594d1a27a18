//! `/locks`: acquire, refresh, release, check, status, listing, force-release.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::kind::{self, impl_kind, Acquisition};
use super::lease::{acquire_body, lease_body};
use super::lease::{NamePath, WaiterBody};
use super::problem::responses::LockHeld;
use super::{AppError, AppState};
use crate::domain::Owner;
use crate::engine::{LockStatus, Locks};

/// The `/locks` routes, documented.
pub fn router() -> OpenApiRouter<AppState> {
    kind::routes::<Locks>(routes!(acquire))
}

acquire_body! {
    /// Body of `POST /locks/{name}`; every field is optional and an empty body
    /// means all defaults.
    #[schema(example = json!({"ttl_ms": 60000, "wait_ms": 10000, "owner": "https://ci.example.com/jobs/42"}))]
    pub struct AcquireLock {}
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
    #[schema(format = DateTime)]
    pub expires_at: String,
}

lease_body!(LockLeaseBody);

impl_kind!(Locks, Lock, LockLeaseBody, LockStatusBody, locks);

/// A lock as anyone may see it; the lease id is never shown.
#[derive(Debug, Default, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "held": true,
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "expires_in_ms": 41230,
    "waiting": 1,
    "waiters": [{"position": 1, "owner": "https://ci.example.com/jobs/43", "waited_ms": 5200}]
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
    /// How many requests are queued in the line.
    pub waiting: u64,
    /// The first of them (at most 100), in the order they will be served.
    pub waiters: Vec<WaiterBody>,
}

impl From<LockStatus> for LockStatusBody {
    fn from(status: LockStatus) -> Self {
        let holder = status.holder().cloned();
        Self {
            name: status.name.to_string(),
            held: holder.is_some(),
            fencing_token: holder.as_ref().map(|h| h.fencing_token),
            expires_in_ms: holder.as_ref().map(|h| h.expires_in.as_millis() as u64),
            owner: holder.and_then(|h| h.owner).map(Owner::into_string),
            waiting: status.waiting,
            waiters: status.waiters.into_iter().map(Into::into).collect(),
        }
    }
}

/// Acquire a lock
///
/// Takes the lock if it is free. If it is held and `wait_ms` is above 0, waits
/// until it is released or expires (woken by the release itself, within
/// milliseconds) for at most `wait_ms`.
#[utoipa::path(post, path = "/locks/{name}", operation_id = "acquire_lock", params(NamePath),
    request_body(content = Option<AcquireLock>, description = "May be empty: all defaults", content_type = "application/json"),
    responses((status = 409, response = LockHeld)))]
pub async fn acquire(
    State(state): State<AppState>,
    call: Acquisition<AcquireLock>,
) -> Result<Response, AppError> {
    let (body, call) = call.split();
    let request = body.request(state.settings.max_wait_ms)?;
    let wait = request.wait;
    let acquisition = Box::pin(state.locks.acquire(
        call.name.clone(),
        crate::domain::Demand::EXCLUSIVE,
        request,
    ));
    kind::acquired::<Locks>(state, call, wait, acquisition).await
}
