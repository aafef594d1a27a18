//! The values the core answers with: a lease as its holder sees it, a lock
//! or semaphore as anyone may see it (never a lease id), and why an
//! acquisition got no lease; a name's history in `history.rs`, and one
//! page of anything answered a page at a time in `page.rs`.

use std::time::Duration;

use crate::domain::{Demand, FreezeId, LeaseId, Limit, Name, Owner, Priority, Reason, Ttl};

mod history;
mod page;

pub use history::{History, HistoryCursor, HistoryEntry, HistoryLimit, LeaseEnd};
pub use page::{Page, PageSize};

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
