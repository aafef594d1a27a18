//! What a holder's stream tells its holder: one event per change of its
//! lease, never its id.

use crate::domain::{Owner, Reason};

/// Why a followed lease ended without its holder releasing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// Its expiry passed without a refresh (Redis confirmed it is gone).
    Expired,
    /// An administrator ended it (`DELETE /locks/{name}`), or it ended while
    /// the stream's instance could not hear why (Redis says it is gone
    /// before its expiry).
    ForceReleased,
}

/// One event of a holder's stream; each names the lease by its fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HolderEvent {
    /// The first event: the lease as it is held now.
    Held {
        fencing_token: u64,
        /// ms since the epoch, Redis's clock.
        expires_at_ms: u64,
        owner: Option<Owner>,
    },
    /// Someone (on any instance) refreshed it: its new expiry.
    Refreshed {
        fencing_token: u64,
        expires_at_ms: u64,
    },
    /// Someone asks its holder to finish early; the lease is not touched.
    YieldRequested {
        fencing_token: u64,
        /// The asking request's owner label.
        by: Option<Owner>,
        reason: Option<Reason>,
        /// How many requests wait in line.
        waiting: u64,
    },
    /// It has `min(10 s, ttl/3)` left without a refresh (said once per
    /// expiry).
    Expiring {
        fencing_token: u64,
        expires_at_ms: u64,
    },
    /// The last event: its holder released it.
    Released { fencing_token: u64 },
    /// The last event: it ended without its holder.
    Lost {
        fencing_token: u64,
        reason: LostReason,
    },
}

impl HolderEvent {
    /// Whether the stream ends after it.
    pub fn is_last(&self) -> bool {
        matches!(self, Self::Released { .. } | Self::Lost { .. })
    }
}
