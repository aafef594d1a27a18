//! Fair counting semaphores: at most `limit` live leases per name, granted in
//! the order in which requests reached Redis, waiters first come first served.

use crate::domain::{AcquireRequest, Limit, Name};

use super::lease::{shared_lease_ops, Lease, Leases, Refusal};
use super::Error;

/// Semaphore operations; cheap to clone.
#[derive(Clone)]
pub struct Semaphores(Leases);

impl Semaphores {
    pub(super) fn new(leases: Leases) -> Self {
        Self(leases)
    }

    /// Takes a slot of `name`, waiting in line up to `wait` while it is full.
    /// `Ok(Err(_))` when no slot came free for it in time, or a newer
    /// `newest_wins` request took its place.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub async fn acquire(
        &self,
        name: &Name,
        limit: Limit,
        request: AcquireRequest,
    ) -> Result<Result<Lease, Refusal>, Error> {
        self.0.acquire(name, limit, request).await
    }
}

shared_lease_ops!(Semaphores);
