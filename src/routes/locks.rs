//! What `/locks` asks and answers beyond what every kind does: a lock's
//! acquisition (shared or exclusive) parsed, and its lease, holders and
//! status made of the engine's answers (the bodies are the wire's; the
//! routes are [`super::kind`]'s).

use super::lease::{acquire_request, holder_body, lease_body, waiter_bodies};
use super::AppError;
use crate::domain::{AcquireRequest, Demand, Kind, Owner};
use crate::engine::Status;
use crate::wire::{AcquireLock, LockHolderBody, LockLeaseBody, LockStatusBody, Mode};

/// A lock's acquisition: shared or exclusive (all of the lock's capacity),
/// and the fields every acquisition takes.
///
/// # Errors
/// `invalid-request` naming the first field at fault.
pub fn asked(
    body: AcquireLock,
    max_wait_ms: u64,
    webhook_hosts: &[String],
) -> Result<(Demand, AcquireRequest), AppError> {
    let demand = Demand::lock(body.shared.unwrap_or(false));
    Ok((
        demand,
        acquire_request(body.into(), max_wait_ms, webhook_hosts)?,
    ))
}

lease_body!(LockLeaseBody, shared = |lease| lease.demand.is_shared());

holder_body!(
    LockHolderBody,
    shared = |holder| !Demand::is_exclusive_weight(holder.weight)
);

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
            waiters: waiter_bodies(Kind::Lock, status.waiters),
            frozen: status.frozen.map(super::outcome::frozen_body),
        }
    }
}
