//! Locks: at most one live lease per name, each with a fencing token. A lock
//! is the lease core with limit 1.

use crate::domain::{AcquireRequest, Limit, Name};

use super::lease::{shared_lease_ops, Lease, Leases, Refusal};
use super::Error;

/// Lock operations; cheap to clone.
#[derive(Clone)]
pub struct Locks(Leases);

impl Locks {
    pub(super) fn new(leases: Leases) -> Self {
        Self(leases)
    }

    /// Acquires `name`, waiting in line up to `wait` while someone else holds
    /// it. `Ok(Err(_))` when it is still held at the end of the wait, or a
    /// newer `newest_wins` request took this one's place.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub async fn acquire(
        &self,
        name: &Name,
        request: AcquireRequest,
    ) -> Result<Result<Lease, Refusal>, Error> {
        self.0.acquire(name, Limit::ONE, request).await
    }
}

shared_lease_ops!(Locks);
