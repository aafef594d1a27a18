//! The connection limits of the contract, as the settings give them: the
//! accept loop caps the connections, each connection's timer closes it.

use std::time::Duration;

use crate::config::Settings;

/// The connection limits of the contract.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `BATON_HEADER_TIMEOUT_MS`.
    pub header_timeout: Duration,
    /// `BATON_IDLE_TIMEOUT_MS`.
    pub idle_timeout: Duration,
    /// `BATON_MAX_CONNECTIONS`.
    pub max_connections: usize,
}

impl Limits {
    /// The limits that `settings` ask for.
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            header_timeout: settings.header_timeout,
            idle_timeout: settings.idle_timeout,
            max_connections: settings.max_connections,
        }
    }
}
