//! Locks: at most one live lease per name, each with a fencing token. A lock
//! is the lease core with limit 1.

use std::future::Future;

use crate::domain::{AcquireRequest, Demand, Name};

use super::lease::{shared_lease_ops, Acquiring, Leases};
use super::Error;

/// Lock operations; cheap to clone.
#[derive(Clone)]
pub struct Locks(Leases);

impl Locks {
    pub(super) fn new(leases: Leases) -> Self {
        Self(leases)
    }

    /// Acquires `name`, or joins its line while someone else holds it and the
    /// request may wait ([`Acquiring::Queued`]).
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub fn acquire(
        &self,
        name: Name,
        demand: Demand,
        request: AcquireRequest,
    ) -> impl Future<Output = Result<Acquiring, Error>> + Send + 'static {
        self.0.clone().acquire(name, demand, request)
    }
}

shared_lease_ops!(Locks);
