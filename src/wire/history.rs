//! A name's history on the wire: `GET /locks/{name}/history` and `GET
//! /semaphores/{name}/history`, one entry per lease, newest first, never a
//! lease id.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How a lease ended (`held`: not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseEndBody {
    /// Held now.
    Held,
    /// Its holder released it.
    Released,
    /// It reached its `expires_at` unreleased (`ended_at` is that time).
    Expired,
    /// An administrator ended it.
    ForceReleased,
    /// Granted to a ticket and not collected by its `pickup_by`.
    NotCollected,
}

/// One lease of a name, as its history shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"fencing_token": 1732780800123456_u64, "owner": "https://ci.example.com/jobs/42",
    "acquired_at": "2026-11-28T07:00:00.123Z", "waited_ms": 5200, "end": "released",
    "ended_at": "2026-11-28T07:03:10.456Z", "held_ms": 190333}))]
pub struct HistoryEntryBody {
    pub fencing_token: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// A lock's lease: `true` when it was shared (absent for a semaphore).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// A semaphore's lease: the permits it took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permits: Option<u64>,
    /// Its priority in line, when it was not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// When it was granted (RFC 3339, Redis's clock).
    pub acquired_at: String,
    /// How long its request waited in line for it.
    pub waited_ms: u64,
    pub end: LeaseEndBody,
    /// When it ended; an expired lease's `expires_at`. Absent while held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// From `acquired_at` to `ended_at`. Absent while held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_ms: Option<u64>,
    /// While held: when it expires unless refreshed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// The name of the token its request was made with (never the token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The reason an administrator gave to take it through a freeze.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub override_reason: Option<String>,
    /// A force-released lease: the name of the token that force-released it
    /// (never the token; absent when the service has no tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<String>,
}

/// One page of a name's history.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryBody {
    pub name: String,
    /// Newest first: the leases held now (and any expired unnoticed), then
    /// the others in the order they ended, the latest first.
    pub entries: Vec<HistoryEntryBody>,
    /// Pass it back as `?before=` for the next (older) page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
