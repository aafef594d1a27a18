//! The values the core answers with: a lease as its holder sees it, a lock
//! or semaphore as anyone may see it (never a lease id), and why an
//! acquisition got no lease.

use std::time::Duration;

use crate::domain::{
    Demand, FreezeId, Invalid, LeaseId, Limit, Name, Owner, Priority, Reason, TokenName, Ttl,
};

/// A live lease, as its holder sees it.
#[derive(Debug, Clone)]
pub struct Lease {
    pub name: Name,
    pub id: LeaseId,
    pub owner: Option<Owner>,
    /// What it takes of its name: shared or not, its permits and limit.
    pub demand: Demand,
    /// Strictly increasing per name: the order of the grants.
    pub fencing_token: u64,
    pub ttl: Ttl,
    /// Expiry in milliseconds since the Unix epoch, on Redis's clock.
    pub expires_at_ms: u64,
}

/// Why an acquisition got no lease.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// Held (full) for the whole wait.
    Busy(Busy),
    /// A newer `newest_wins` request took this waiter's place in line.
    Superseded { owner: Option<Owner> },
    /// A freeze holds the name (and the request did not override it).
    Frozen(FrozenBy),
    /// Not granted yet, and its place is kept as a ticket (`keep_place_ms`):
    /// answered 202, not a refusal to the client.
    Ticketed(Box<TicketPlace>),
}

/// A ticket's place in line.
#[derive(Debug, Clone)]
pub struct TicketPlace {
    /// The ticket (a capability like a lease id; the id of its lease).
    pub ticket: LeaseId,
    /// 1 for the next to be served; 0 once granted.
    pub place: u64,
    /// Requests in line in all.
    pub waiting: u64,
    /// Until when the place is kept (ms since the Unix epoch, Redis's clock).
    pub place_expires_at_ms: u64,
    /// The freeze that holds the name now, as this instance knows it.
    pub frozen: Option<FrozenBy>,
    /// Granted and held for it until then (ms, Redis's clock); `None` while
    /// it waits.
    pub pickup_by_ms: Option<u64>,
    /// Its expected wait while it waits, when the name has a typical hold.
    pub eta: Option<Eta>,
    /// Its turn notice, once granted and delivered or failing (boxed: a
    /// refusal carries a ticket's place); `None` otherwise.
    pub notice: Option<Box<NoticeState>>,
}

/// A ticket's turn notice (`notify`), as far as it went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoticeState {
    /// Delivered then (ms since the Unix epoch, Redis's clock).
    pub notified_at_ms: Option<u64>,
    /// Why its delivery fails, while it does (a short sentence).
    pub error: Option<String>,
}

/// The freeze that held a name when an acquisition was refused.
#[derive(Debug, Clone)]
pub struct FrozenBy {
    /// The freeze whose window holds (unknown when it was deleted meanwhile).
    pub freeze_id: Option<FreezeId>,
    pub reason: Option<Reason>,
    /// When the window ends (ms since the Unix epoch).
    pub until_ms: i64,
}

/// The name was held (a semaphore: full) when the wait ended.
#[derive(Debug, Clone)]
pub struct Busy {
    /// Live leases.
    pub holders: u64,
    /// The weight the live leases take (permits; a lock's capacity while
    /// held exclusively).
    pub used: u64,
    /// What the refused request asked for, and the limit it was judged against.
    pub demand: Demand,
    /// Requests queued in the line.
    pub waiting: u64,
    /// The lease in its way (a lock: the one that ends last; a semaphore:
    /// the first): its owner and time left.
    pub owner: Option<Owner>,
    pub next_expiry_in: Option<Duration>,
}

/// One live lease as anyone may see it: never its id.
#[derive(Debug, Clone)]
pub struct Holder {
    pub owner: Option<Owner>,
    pub fencing_token: u64,
    pub expires_in: Duration,
    /// What it takes of the name (permits; a lock's capacity when exclusive).
    pub weight: u64,
    /// How long it has been held.
    pub held: Duration,
}

/// One queued request as anyone may see it.
#[derive(Debug, Clone)]
pub struct Waiter {
    /// 1 for the next to be served.
    pub position: u64,
    pub owner: Option<Owner>,
    pub waited: Duration,
    /// What it asks of the name (permits; a lock's capacity when exclusive).
    pub weight: u64,
    /// Its place among the waiters: ahead of every lower priority.
    pub priority: Priority,
    /// A ticket (`keep_place_ms`, nobody waiting on it now): until when its
    /// place is kept (ms since the Unix epoch, Redis's clock).
    pub kept_until_ms: Option<u64>,
    /// Its expected wait, while the name has a typical hold.
    pub eta: Option<Eta>,
}

/// An expected wait (`leases/eta.rs`): how long,
/// and from how many finished holds the typical one was worked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eta {
    pub wait: Duration,
    pub holds: u32,
}

/// A lock or semaphore as anyone may see it.
#[derive(Debug, Clone)]
pub struct Status {
    pub name: Name,
    /// Live leases in all.
    pub holders: u64,
    /// The weight they take (permits; a lock's capacity while held
    /// exclusively).
    pub used: u64,
    /// The limit of the latest acquisition, while known.
    pub limit: Option<Limit>,
    /// At most 100 live leases, in the order they were granted.
    pub leases: Vec<Holder>,
    /// Requests queued in all.
    pub waiting: u64,
    /// At most the first 100 of them, in the order they will be served.
    pub waiters: Vec<Waiter>,
    /// The freeze that holds the name now, as this instance knows it.
    pub frozen: Option<FrozenBy>,
}

impl Busy {
    /// The name's state as a refusal judged against `limit` shows it.
    pub(crate) fn new(state: Occupancy, demand: Demand) -> Self {
        Self {
            holders: state.holders,
            used: state.used,
            demand,
            waiting: state.waiting,
            owner: state.owner,
            next_expiry_in: state.next_expiry_in,
        }
    }
}

/// How busy a name is, as a function that refuses reports it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Occupancy {
    /// Live leases.
    pub holders: u64,
    /// The weight they take.
    pub used: u64,
    /// Requests queued in the line.
    pub waiting: u64,
    /// The lease in its way: its owner and time left.
    pub owner: Option<Owner>,
    pub next_expiry_in: Option<Duration>,
}

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
#[derive(Debug, Clone)]
pub struct History {
    pub name: Name,
    pub entries: Vec<HistoryEntry>,
    /// Where the next page starts, while more remain.
    pub next_cursor: Option<HistoryCursor>,
}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryLimit(usize);

impl HistoryLimit {
    pub const MAX: usize = 100;
    pub const DEFAULT: usize = 20;

    /// # Errors
    /// When `n` is 0 or over 100.
    pub fn new(n: u64) -> Result<Self, Invalid> {
        match usize::try_from(n) {
            Ok(n) if (1..=Self::MAX).contains(&n) => Ok(Self(n)),
            _ => Err(Invalid(format!("must be between 1 and {}", Self::MAX))),
        }
    }

    pub fn get(self) -> usize {
        self.0
    }
}

impl Default for HistoryLimit {
    fn default() -> Self {
        Self(Self::DEFAULT)
    }
}

/// Where a waiter stands.
#[derive(Debug, Clone)]
pub struct Place {
    /// 1 for the next to be served.
    pub position: u64,
    /// Requests in line in all.
    pub waiting: u64,
    /// The live leases it waits behind (at most 100), those that expire first.
    pub holders: Vec<Holder>,
    /// Its expected wait, while the name has a typical hold.
    pub eta: Option<Eta>,
}
