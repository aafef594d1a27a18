//! The bodies of `/locks`: what an acquisition sends, what its holder is
//! told, and what anyone sees (the routes are [`super::kind`]'s).

use serde::Serialize;
use utoipa::ToSchema;

use super::lease::WaiterBody;
use super::lease::{acquire_body, lease_body};
use super::AppError;
use crate::domain::{AcquireRequest, Limit, Owner};
use crate::engine::Status;

acquire_body! {
    /// Body of `POST /locks/{name}`; every field is optional and an empty body
    /// means all defaults.
    #[schema(example = json!({"ttl_ms": 60000, "wait_ms": 10000, "owner": "https://ci.example.com/jobs/42"}))]
    pub struct AcquireLock {}
}

impl AcquireLock {
    /// A lock's acquisition: limit 1, and the fields every acquisition takes.
    ///
    /// # Errors
    /// `invalid-request` naming the first field at fault.
    pub fn parse(self, max_wait_ms: u64) -> Result<(Limit, AcquireRequest), AppError> {
        Ok((Limit::ONE, self.request(max_wait_ms)?))
    }
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

impl From<Status> for LockStatusBody {
    fn from(status: Status) -> Self {
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
