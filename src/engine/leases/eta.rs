//! The expected wait of a place in line (`eta_ms`, with `eta_basis`): the
//! time left of the leases in the way plus, for each waiter ahead, the
//! name's typical hold (the median hold of its last 20 finished holds in the
//! history; for a semaphore, shared by its limit). None while the name has
//! fewer than 3 finished holds.
//!
//! "The time left" of a lease in the way is what it will most likely still
//! be held: the typical hold less what it has been held already, never more
//! than its expiry (a lease held longer than typical ends by its expiry at
//! the latest). On a steady workload (fixed holds) that is the real time
//! left, where the expiry alone (a refreshed lease's ttl) would count a
//! whole ttl for each lease.
//!
//! An estimate is a courtesy: one that cannot be worked out (Redis did not
//! answer) is left out, and never fails the request that shows it.

use std::time::Duration;

use super::operations::Leases;
use crate::domain::{Kind, Limit, Name};
use crate::engine::error::Error;
use crate::engine::model::{Eta, HistoryEntry, HistoryLimit, Holder, LeaseEnd, Status};

/// How many finished holds the typical hold is the median of.
const LOOKED_AT: u64 = 20;
/// Fewer finished holds than this: no estimate.
const AT_LEAST: usize = 3;

/// A name's typical hold, from its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypicalHold {
    pub hold: Duration,
    /// How many finished holds it is the median of.
    pub holds: u32,
}

impl TypicalHold {
    /// The median hold of the finished ones among `entries` (newest first);
    /// `None` below [`AT_LEAST`]. A ticket's lease never collected was never
    /// held and does not count.
    pub fn of(entries: &[HistoryEntry]) -> Option<Self> {
        let mut held: Vec<u64> = entries
            .iter()
            .filter(|e| !matches!(e.end, LeaseEnd::Held | LeaseEnd::NotCollected))
            .filter_map(|e| {
                e.ended_at_ms
                    .map(|end| end.saturating_sub(e.acquired_at_ms))
            })
            .take(usize::try_from(LOOKED_AT).unwrap_or(usize::MAX))
            .collect();
        if held.len() < AT_LEAST {
            return None;
        }
        held.sort_unstable();
        let n = held.len();
        let median = if n % 2 == 1 {
            held[n / 2]
        } else {
            (held[n / 2 - 1] + held[n / 2]) / 2
        };
        Some(Self {
            hold: Duration::from_millis(median),
            holds: u32::try_from(n).unwrap_or(u32::MAX),
        })
    }

    /// The expected wait of the waiter at `place` (1: next) of a name of
    /// `kind` with `limit`, behind `leases`.
    pub fn eta(self, kind: Kind, limit: Option<Limit>, leases: &[Holder], place: u64) -> Eta {
        let left = |lease: &Holder| lease.expires_in.min(self.hold.saturating_sub(lease.held));
        // A lock waits for every lease in its way (the last to end); a
        // semaphore's next waiter for the first to leave room.
        let in_the_way = match kind {
            Kind::Lock => leases.iter().map(left).max(),
            Kind::Semaphore => leases.iter().map(left).min(),
        }
        .unwrap_or_default();
        let shared_by = match kind {
            Kind::Lock => 1,
            Kind::Semaphore => limit.map_or(1, Limit::get).max(1),
        };
        let ahead = u32::try_from(place.saturating_sub(1)).unwrap_or(u32::MAX);
        Eta {
            wait: in_the_way + self.hold.saturating_mul(ahead) / shared_by,
            holds: self.holds,
        }
    }
}

impl Leases {
    /// `name`'s typical hold, from its history.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn typical_hold(&self, name: &Name) -> Result<Option<TypicalHold>, Error> {
        let limit = HistoryLimit::new(LOOKED_AT).expect("20 is a history limit");
        let history = self.history(name, limit, None).await?;
        Ok(TypicalHold::of(&history.entries))
    }

    /// Each waiter of `status` with its expected wait (see the module).
    pub async fn with_etas(&self, mut status: Status) -> Status {
        if status.waiters.is_empty() {
            return status;
        }
        if let Ok(Some(typical)) = self.typical_hold(&status.name).await {
            for waiter in &mut status.waiters {
                waiter.eta =
                    Some(typical.eta(self.kind, status.limit, &status.leases, waiter.position));
            }
        }
        status
    }

    /// The expected wait at `place` of `name` (see the module): its status
    /// and its history read; `None` when either is out of reach or the name
    /// has no typical hold yet.
    pub async fn eta_at(&self, name: &Name, place: u64) -> Option<Eta> {
        let typical = self.typical_hold(name).await.ok()??;
        let status = self.status(name).await.ok()?;
        Some(typical.eta(self.kind, status.limit, &status.leases, place))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(acquired: u64, held_ms: u64) -> HistoryEntry {
        HistoryEntry {
            end: LeaseEnd::Released,
            ended_at_ms: Some(acquired + held_ms),
            fencing_token: acquired,
            weight: 1,
            limit: 1,
            acquired_at_ms: acquired,
            waited_ms: 0,
            priority: crate::domain::Priority::default(),
            owner: None,
            by: None,
            override_reason: None,
            expires_at_ms: acquired + 60_000,
            ended_by: None,
        }
    }

    fn holder(held: u64, expires_in: u64) -> Holder {
        Holder {
            owner: None,
            fencing_token: 1,
            expires_in: Duration::from_millis(expires_in),
            weight: 1,
            held: Duration::from_millis(held),
        }
    }

    #[test]
    fn the_typical_hold_is_the_median_of_at_least_three() {
        assert_eq!(TypicalHold::of(&[ended(0, 1000), ended(5, 900)]), None);
        let typical = TypicalHold::of(&[ended(0, 1000), ended(5, 900), ended(9, 5000)]).unwrap();
        assert_eq!(typical.hold, Duration::from_millis(1000));
        assert_eq!(typical.holds, 3);
        let mut collected_not = ended(1, 1);
        collected_not.end = LeaseEnd::NotCollected;
        let with = [ended(0, 1000), ended(5, 900), collected_not, ended(9, 1100)];
        assert_eq!(
            TypicalHold::of(&with).unwrap().hold,
            Duration::from_millis(1000)
        );
    }

    #[test]
    fn a_place_waits_for_the_leases_in_its_way_then_a_typical_hold_each() {
        let typical = TypicalHold {
            hold: Duration::from_millis(1000),
            holds: 5,
        };
        // A lock held for 400 ms of a typical 1000, its expiry 30 s away:
        // 600 ms left, then a second for each waiter ahead.
        let leases = [holder(400, 30_000)];
        let eta = |place| typical.eta(Kind::Lock, None, &leases, place).wait;
        assert_eq!(eta(1), Duration::from_millis(600));
        assert_eq!(eta(3), Duration::from_millis(2600));
        // Held longer than typical: it ends by its expiry at the latest.
        let late = [holder(5000, 200)];
        assert_eq!(typical.eta(Kind::Lock, None, &late, 1).wait, Duration::ZERO);
        // A semaphore of 3: the first to leave makes room, and each waiter
        // ahead takes a third of a hold.
        let limit = Limit::new(3).ok();
        let three = [holder(100, 9000), holder(500, 9000), holder(700, 9000)];
        let wait = |place| typical.eta(Kind::Semaphore, limit, &three, place).wait;
        assert_eq!(wait(1), Duration::from_millis(300));
        assert_eq!(wait(4), Duration::from_millis(1300));
    }
}
