//! The bodies of `/semaphores`: what an acquisition of a slot sends, what
//! its holder is told, and what anyone sees (the routes are [`super::kind`]'s).

use serde::Serialize;
use utoipa::ToSchema;

use super::field;
use super::lease::{acquire_body, holder_body, lease_body, WaiterBody};
use super::AppError;
use crate::domain::{AcquireRequest, Demand, Kind, Limit, Permits};
use crate::engine::Status;

acquire_body! {
    /// Body of `POST /semaphores/{name}`.
    #[schema(example = json!({"limit": 4, "permits": 1, "ttl_ms": 60000, "wait_ms": 10000, "owner": "worker-7"}))]
    pub struct AcquireSemaphore {
        #[schema(schema_with = field::limit, required = true)]
        pub limit: Option<u64>,
        #[schema(schema_with = field::permits)]
        pub permits: Option<u64>,
    }
}

impl AcquireSemaphore {
    /// # Errors
    /// `invalid-request` naming the first field at fault.
    pub fn parse(self, max_wait_ms: u64) -> Result<(Demand, AcquireRequest), AppError> {
        let limit = self
            .limit
            .ok_or_else(|| AppError::Invalid("limit: is required".into()))
            .and_then(|n| Limit::new(n).map_err(|e| AppError::field("limit", e)))?;
        let permits = self
            .permits
            .map_or(Ok(Permits::ONE), Permits::new)
            .map_err(|e| AppError::field("permits", e))?;
        let demand =
            Demand::semaphore(permits, limit).map_err(|e| AppError::field("permits", e))?;
        Ok((demand, self.request(max_wait_ms)?))
    }
}

/// A semaphore lease, as its holder sees it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "migrations",
    "id": "0b7f7c0e-2a51-4c0e-8f5e-9d3c1a2b4c6d",
    "owner": "worker-7",
    "limit": 4,
    "permits": 1,
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
    /// How many of the limit this lease counts as.
    pub permits: u64,
    /// Strictly increases per semaphore name, in the order slots were granted.
    pub fencing_token: u64,
    pub ttl_ms: u64,
    /// When the lease expires unless refreshed (RFC 3339, Redis's clock).
    #[schema(format = DateTime)]
    pub expires_at: String,
}

lease_body!(
    SemaphoreLeaseBody,
    limit = |lease| lease.demand.limit() as u32,
    permits = |lease| lease.demand.permits()
);

/// One held slot, without its lease id.
#[derive(Debug, Serialize, ToSchema)]
pub struct SlotBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub fencing_token: u64,
    pub expires_in_ms: u64,
    /// How many of the limit it counts as.
    pub permits: u64,
}

holder_body!(SlotBody, permits = |holder| holder.weight);

/// A semaphore as anyone may see it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "migrations",
    "holders": 2,
    "used": 3,
    "limit": 4,
    "leases": [
        {"owner": "worker-7", "fencing_token": 1_763_780_000_000_017_u64, "expires_in_ms": 51200, "permits": 2},
        {"fencing_token": 1_763_780_000_000_020_u64, "expires_in_ms": 58800, "permits": 1}
    ],
    "waiting": 1,
    "waiters": [{"position": 1, "owner": "worker-9", "waited_ms": 1200, "permits": 2}]
}))]
pub struct SemaphoreStatusBody {
    pub name: String,
    /// How many leases are held now.
    pub holders: u64,
    /// How many permits they hold in all (absent while none is held).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    /// The limit of the latest acquisition, while the semaphore is in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The held leases, in the order they were granted.
    pub leases: Vec<SlotBody>,
    /// How many requests are queued in the line.
    pub waiting: u64,
    /// The first of them (at most 100), in the order they will be served.
    pub waiters: Vec<WaiterBody>,
}

impl From<Status> for SemaphoreStatusBody {
    fn from(status: Status) -> Self {
        Self {
            name: status.name.to_string(),
            holders: status.holders,
            used: (status.holders > 0).then_some(status.used),
            waiting: status.waiting,
            waiters: WaiterBody::all(Kind::Semaphore, status.waiters),
            limit: status.limit.map(Limit::get),
            leases: status.leases.into_iter().map(SlotBody::from).collect(),
        }
    }
}
