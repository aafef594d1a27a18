//! The Redis core: locks and semaphores as one Lua script per operation, and the
//! waiters that sleep until a release or an expiry instead of polling.
//!
//! Nothing here knows about HTTP; the routes turn its results into responses.

mod acquire;
mod error;
mod keys;
mod lock;
mod reply;
mod scripts;
mod semaphore;
mod store;
mod waiters;

pub use error::Error;
pub use keys::Keys;
pub use lock::{LockHeld, LockLease, LockStatus, Locks};
pub use semaphore::{SemaphoreFull, SemaphoreLease, SemaphoreStatus, Semaphores, SlotStatus};
pub use store::{Store, StoreConfig};
pub use waiters::{Subscriber, Waiters};

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// What the lock and semaphore cores share; one pointer to clone, since every
/// acquisition keeps a copy to undo itself with.
#[derive(Clone)]
pub struct Engine(Arc<EngineParts>);

/// The parts of an [`Engine`]: the Redis connection, the key layout, the
/// registry of local waiters, and the signal to stop waiting.
pub struct EngineParts {
    pub store: Store,
    pub keys: Keys,
    pub waiters: Arc<Waiters>,
    /// Cancelled when the service shuts down: every waiter gives up at once.
    pub shutdown: CancellationToken,
}

impl std::ops::Deref for Engine {
    type Target = EngineParts;

    fn deref(&self) -> &EngineParts {
        &self.0
    }
}

impl Engine {
    pub fn new(parts: EngineParts) -> Self {
        Self(Arc::new(parts))
    }

    pub fn locks(&self) -> Locks {
        Locks::new(self.clone())
    }

    pub fn semaphores(&self) -> Semaphores {
        Semaphores::new(self.clone())
    }
}
