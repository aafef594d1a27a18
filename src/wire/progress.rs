//! The events of an acquisition that reports its progress (`Accept:
//! text/event-stream` and a `wait_ms`): `queued` while it waits, then
//! `acquired` (a lease body) or `problem` (a problem body); `frozen` while a
//! freeze holds the name.

use serde::{Deserialize, Serialize};

/// `queued` data: the position counts leases (each waiter ahead is one),
/// and the waiter's own shared flag or permits are shown, as are each
/// holder's.
#[derive(Debug, Serialize, Deserialize)]
pub struct Queued {
    pub position: u64,
    #[serde(default)]
    pub waiting: u64,
    /// The waiter's priority, when it is not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permits: Option<u64>,
    #[serde(default)]
    pub holders: Vec<QueuedBehind>,
    /// Its expected wait (ms), while the name has at least 3 finished holds
    /// (see the ticket's `eta_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_basis: Option<super::ticket::EtaBasis>,
}

/// `frozen` data: a freeze holds the name, and the waiter keeps its place
/// until `until` (RFC 3339), when the line is served in order.
#[derive(Debug, Serialize, Deserialize)]
pub struct FrozenLine {
    pub until: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_id: Option<String>,
}

/// A holder in the way of a `queued` waiter.
#[derive(Debug, Serialize, Deserialize)]
pub struct QueuedBehind {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub expires_in_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permits: Option<u64>,
}
