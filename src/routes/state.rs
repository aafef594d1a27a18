//! `AppState`: what every handler can reach.

use std::sync::Arc;

use crate::access::{Quotas, Tokens};
use crate::config::Settings;
use crate::domain::Kind;
use crate::engine::{Engine, Leases};

/// What every handler can reach; one pointer to clone per request.
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

/// The parts of [`AppState`].
pub struct AppParts {
    /// The core: the leases of each kind ([`AppState::leases`]), Redis's
    /// answer and the eviction warning for readiness, the change events.
    pub engine: Engine,
    pub settings: Settings,
    /// The tokens in force (swapped whole on SIGHUP).
    pub tokens: Arc<Tokens>,
    /// Each token's waiters and event streams on this instance: at most
    /// half of each cap.
    pub quotas: Quotas,
    /// When each asker last had each name's holders told to yield.
    pub yields: super::yield_throttle::YieldThrottle,
}

impl AppState {
    pub fn new(parts: AppParts) -> Self {
        Self(Arc::new(parts))
    }

    /// The operations on the leases of `kind`.
    pub fn leases(&self, kind: Kind) -> Leases {
        self.engine.leases(kind)
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}
