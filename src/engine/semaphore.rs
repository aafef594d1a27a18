//! Fair counting semaphores: at most `limit` live leases per name, granted in
//! the order in which requests reached Redis, waiters first come first served.

use std::future::Future;

use crate::domain::{AcquireRequest, Demand, Name};

use super::lease::{shared_lease_ops, Acquiring, Leases};
use super::Error;

/// Semaphore operations; cheap to clone.
#[derive(Clone)]
pub struct Semaphores(Leases);

impl Semaphores {
    pub(super) fn new(leases: Leases) -> Self {
        Self(leases)
    }

    /// Takes a slot of `name`, or joins its line while it is full and the
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

shared_lease_ops!(Semaphores);
