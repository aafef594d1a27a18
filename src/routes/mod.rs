//! The HTTP API: one file per resource. Handlers parse requests into domain
//! types, call the engine, and map its results to JSON and problem+json.

mod auth;
mod extract;
pub mod health;
pub mod locks;
pub mod problems;
pub mod semaphores;

pub use auth::{require_token, Access, Auth};
pub use extract::{BodyLimit, JsonBody};

use std::sync::Arc;

use crate::config::Settings;
use crate::engine::{Locks, Semaphores, Store};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub locks: Locks,
    pub semaphores: Semaphores,
    pub store: Store,
    pub settings: Arc<Settings>,
    pub auth: Arc<Auth>,
}

/// RFC 3339 UTC with milliseconds, from milliseconds since the Unix epoch.
pub(crate) fn rfc3339_ms(epoch_ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(epoch_ms);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_redis_time_as_rfc3339() {
        assert_eq!(
            super::rfc3339_ms(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
    }
}
