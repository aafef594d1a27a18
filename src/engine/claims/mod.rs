//! Claims: several names held together, all or nothing, never a deadlock.
//!
//! A claim takes its names one by one in the one global order of
//! [`ClaimParts`](crate::domain::ClaimParts) (kind, then name), each through
//! that name's own line with the ordinary acquisition (`leases/`), so each
//! of its leases is an ordinary lease of its name. On Redis Cluster its
//! names may live on different masters: no call writes two of them.
//!
//! - `acquire.rs`: taking the names in order, keeping those held alive while
//!   it waits for the next, and giving everything back when it gives up.
//! - `frozen.rs`: a waiting claim holds none of its names while a freeze
//!   holds one of them; it waits for the window to end.
//! - `held.rs`: the leases a claim holds so far, kept alive, and released
//!   at once (or in the background, should nobody hear the outcome).
//! - `record.rs`: which leases a claim holds, kept in Redis so any instance
//!   can refresh, release or show it.
//! - `operations.rs`: check, refresh and release of a held claim.

mod acquire;
mod frozen;
mod held;
mod operations;
mod record;

use crate::domain::{ClaimId, Kind, Name};
use crate::engine::handle::Engine;
use crate::engine::leases::InLine;
use crate::engine::model::{FrozenBy, Lease, Refusal};

pub use operations::Refreshed;

impl Engine {
    /// The operations on claims.
    pub fn claims(&self) -> Claims {
        Claims {
            engine: self.clone(),
        }
    }
}

/// The operations on claims; cheap to clone.
#[derive(Clone)]
pub struct Claims {
    engine: Engine,
}

/// A claim whose every lease is held, in the order they were taken.
#[derive(Debug, Clone)]
pub struct Claim {
    pub id: ClaimId,
    pub leases: Vec<(Kind, Lease)>,
}

impl Claim {
    /// The earliest expiry of its leases (milliseconds since the Unix epoch,
    /// Redis's clock): the claim is whole until then.
    pub fn expires_at_ms(&self) -> u64 {
        self.leases
            .iter()
            .map(|(_, lease)| lease.expires_at_ms)
            .min()
            .unwrap_or(0)
    }
}

/// Why a claim got none of its names: the name in its way.
#[derive(Debug, Clone)]
pub struct ClaimRefused {
    pub kind: Kind,
    pub name: Name,
    /// How busy the name was when the wait ended; `None` when a lease the
    /// claim held was lost (expired, force-released) and the wait ended
    /// before it could be taken again.
    pub refusal: Option<Refusal>,
}

/// Where a waiting claim stands: the names it holds, and the one it waits
/// for, with its place in that name's line, or the freeze that holds that
/// name (then it holds nothing and is in no line).
#[derive(Debug, Clone)]
pub struct ClaimProgress {
    pub held: Vec<(Kind, Name)>,
    pub waiting_for: (Kind, Name),
    pub waiting: ClaimWaiting,
}

/// What a waiting claim waits for.
#[derive(Debug, Clone)]
pub enum ClaimWaiting {
    /// Its turn in the line of the name it waits for.
    InLine(InLine),
    /// The end of the freeze that holds that name.
    Frozen(FrozenBy),
}
