//! `AppState`: what every handler can reach.

use std::sync::Arc;

use super::Auth;
use crate::config::Settings;
use crate::engine::{Engine, Locks, Semaphores};

/// What every handler can reach; one pointer to clone per request.
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

/// The parts of [`AppState`].
pub struct AppParts {
    pub locks: Locks,
    pub semaphores: Semaphores,
    /// For readiness: Redis's answer and the eviction warning.
    pub engine: Engine,
    pub settings: Settings,
    pub auth: Arc<Auth>,
}

impl AppState {
    pub fn new(parts: AppParts) -> Self {
        Self(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}
