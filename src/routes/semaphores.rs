//! What `/semaphores` asks and answers beyond what every kind does: a
//! semaphore's acquisition (its limit and permits) parsed, and its lease,
//! slots and status made of the engine's answers (the bodies are the wire's;
//! the routes are [`super::kind`]'s).

use super::lease::{acquire_request, holder_body, lease_body, waiter_bodies};
use super::AppError;
use crate::domain::{AcquireRequest, Demand, Kind, Limit, Permits};
use crate::engine::Status;
use crate::wire::{AcquireSemaphore, SemaphoreLeaseBody, SemaphoreStatusBody, SlotBody};

/// A semaphore's acquisition: its permits of its limit, and the fields
/// every acquisition takes.
///
/// # Errors
/// `invalid-request` naming the first field at fault.
pub fn asked(
    body: AcquireSemaphore,
    max_wait_ms: u64,
    webhook_hosts: &[String],
) -> Result<(Demand, AcquireRequest), AppError> {
    let limit = body
        .limit
        .ok_or_else(|| AppError::invalid("limit: is required".into()))
        .and_then(|n| Limit::new(n).map_err(|e| AppError::field("limit", e)))?;
    let permits = body
        .permits
        .map_or(Ok(Permits::ONE), Permits::new)
        .map_err(|e| AppError::field("permits", e))?;
    let demand = Demand::semaphore(permits, limit).map_err(|e| AppError::field("permits", e))?;
    Ok((
        demand,
        acquire_request(body.into(), max_wait_ms, webhook_hosts)?,
    ))
}

lease_body!(
    SemaphoreLeaseBody,
    limit = |lease| lease.demand.limit() as u32,
    permits = |lease| lease.demand.permits()
);

holder_body!(SlotBody, permits = |holder| holder.weight);

impl From<Status> for SemaphoreStatusBody {
    fn from(status: Status) -> Self {
        Self {
            name: status.name.to_string(),
            holders: status.holders,
            used: (status.holders > 0).then_some(status.used),
            waiting: status.waiting,
            waiters: waiter_bodies(Kind::Semaphore, status.waiters),
            frozen: status.frozen.map(super::outcome::frozen_body),
            limit: status.limit.map(Limit::get),
            leases: status.leases.into_iter().map(SlotBody::from).collect(),
        }
    }
}
