//! A name's history as the core answers it: how each lease ended, one entry
//! per lease (never its id), and a page of them with its cursor and limit.

use super::page::{Page, PageSize};
use crate::domain::{Invalid, Owner, Priority, TokenName};

/// How a lease in a name's history ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Not yet: it is held now.
    Held,
    /// Its holder released it.
    Released,
    /// It reached its expiry unreleased.
    Expired,
    /// An administrator ended it.
    ForceReleased,
    /// Granted to a ticket and not collected by its `pickup_by` (or given up).
    NotCollected,
}

/// One lease of a name, as its history shows it (never its id).
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    pub end: LeaseEnd,
    /// When it ended (Redis clock, ms; an expired lease's expiry); `None`
    /// while held.
    pub ended_at_ms: Option<u64>,
    pub fencing_token: u64,
    /// What it took of the name (permits; a lock's capacity when exclusive).
    pub weight: u64,
    /// The limit it was judged against.
    pub limit: u64,
    pub acquired_at_ms: u64,
    /// How long its request waited in line for it.
    pub waited_ms: u64,
    pub priority: Priority,
    pub owner: Option<Owner>,
    /// The name of the token its request was made with.
    pub by: Option<TokenName>,
    /// The reason an administrator gave to take it through a freeze.
    pub override_reason: Option<String>,
    /// When it expires, or expired (ms).
    pub expires_at_ms: u64,
    /// A force-released lease: the name of the token that force-released it.
    pub ended_by: Option<TokenName>,
}

/// One page of a name's history, newest first.
pub type History = Page<HistoryEntry, HistoryCursor>;

/// Where a page of history starts: opaque to clients (a stream id,
/// `MS-SEQ`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryCursor(String);

impl HistoryCursor {
    /// # Errors
    /// When `raw` is not a cursor a history page gave.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let valid = raw
            .split_once('-')
            .is_some_and(|(ms, seq)| ms.parse::<u64>().is_ok() && seq.parse::<u64>().is_ok());
        if valid && raw.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            Ok(Self(raw.to_owned()))
        } else {
            Err(Invalid(
                "must be the next_cursor of a previous page of this history".into(),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How many entries a page of history holds: 1 to 100, 20 by default.
pub type HistoryLimit = PageSize<100, 20>;
