//! The bodies of `/locks`: what an acquisition sends, what its holder is
//! told, and what anyone sees (the routes are [`super::kind`]'s).

use serde::Serialize;
use utoipa::ToSchema;

use super::lease::{acquire_body, holder_body, lease_body, WaiterBody};
use super::AppError;
use crate::domain::{AcquireRequest, Demand, Kind, Owner};
use crate::engine::Status;

acquire_body! {
    /// Body of `POST /locks/{name}`; every field is optional and an empty body
    /// means all defaults.
    #[schema(example = json!({"ttl_ms": 60000, "wait_ms": 10000, "owner": "https://ci.example.com/jobs/42"}))]
    pub struct AcquireLock {
        /// `true` asks for a shared (read) lease: any number of shared leases
        /// are held at once, never beside an exclusive one, and a shared
        /// request behind a queued exclusive one waits for it. Default
        /// `false`: an exclusive (write) lease, held alone.
        #[schema(default = false)]
        pub shared: Option<bool>,
    }
}

impl AcquireLock {
    /// A lock's acquisition: shared or exclusive (all of the lock's
    /// capacity), and the fields every acquisition takes.
    ///
    /// # Errors
    /// `invalid-request` naming the first field at fault.
    pub fn parse(self, max_wait_ms: u64) -> Result<(Demand, AcquireRequest), AppError> {
        let demand = Demand::lock(self.shared.unwrap_or(false));
        Ok((demand, self.request(max_wait_ms)?))
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
    "expires_at": "2026-11-22T03:14:15.926Z",
    "shared": false
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
    /// Whether it is a shared (read) lease.
    pub shared: bool,
}

lease_body!(LockLeaseBody, shared = |lease| lease.demand.is_shared());

/// One lease of a lock, without its id.
#[derive(Debug, Serialize, ToSchema)]
pub struct LockHolderBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub fencing_token: u64,
    pub expires_in_ms: u64,
    /// Whether it is a shared (read) lease.
    pub shared: bool,
}

holder_body!(
    LockHolderBody,
    shared = |holder| !Demand::is_exclusive_weight(holder.weight)
);

/// How a held lock is held.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// By one exclusive (write) lease.
    Exclusive,
    /// By shared (read) leases, any number of them.
    Shared,
}

impl Mode {
    /// How a lock with `holders` leases is held, `exclusive` or not: `None`
    /// while it is free.
    pub fn of(holders: u64, exclusive: bool) -> Option<Self> {
        match (holders, exclusive) {
            (0, _) => None,
            (_, true) => Some(Self::Exclusive),
            (_, false) => Some(Self::Shared),
        }
    }
}

/// A lock as anyone may see it; the lease id is never shown.
#[derive(Debug, Default, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "deploy-prod",
    "held": true,
    "mode": "exclusive",
    "owner": "https://ci.example.com/jobs/42",
    "fencing_token": 1_763_780_000_000_001_u64,
    "expires_in_ms": 41230,
    "holders": 1,
    "leases": [{"owner": "https://ci.example.com/jobs/42", "fencing_token": 1_763_780_000_000_001_u64, "expires_in_ms": 41230, "shared": false}],
    "waiting": 1,
    "waiters": [{"position": 1, "owner": "https://ci.example.com/jobs/43", "waited_ms": 5200}]
}))]
pub struct LockStatusBody {
    pub name: String,
    pub held: bool,
    /// While held: `exclusive` (one writer) or `shared` (readers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// The exclusive holder's owner label (absent while held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The exclusive holder's fencing token (absent while held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// When the exclusive holder's lease expires (absent while held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// While held: how many leases, 1 exclusive or any number shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<u64>,
    /// While held: the leases (at most 100), in the order they were granted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases: Option<Vec<LockHolderBody>>,
    /// How many requests are queued in the line.
    pub waiting: u64,
    /// The first of them (at most 100), in the order they will be served.
    pub waiters: Vec<WaiterBody>,
}

impl From<Status> for LockStatusBody {
    fn from(status: Status) -> Self {
        let exclusive = status
            .leases
            .iter()
            .find(|l| Demand::is_exclusive_weight(l.weight))
            .cloned();
        Self {
            name: status.name.to_string(),
            held: status.holders > 0,
            mode: Mode::of(status.holders, exclusive.is_some()),
            fencing_token: exclusive.as_ref().map(|h| h.fencing_token),
            expires_in_ms: exclusive.as_ref().map(|h| h.expires_in.as_millis() as u64),
            owner: exclusive.and_then(|h| h.owner).map(Owner::into_string),
            holders: (status.holders > 0).then_some(status.holders),
            leases: (status.holders > 0).then(|| {
                status
                    .leases
                    .into_iter()
                    .map(LockHolderBody::from)
                    .collect()
            }),
            waiting: status.waiting,
            waiters: WaiterBody::all(Kind::Lock, status.waiters),
        }
    }
}
