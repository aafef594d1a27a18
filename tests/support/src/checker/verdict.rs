//! What the checker judges by and finds: the rules, the paths, the holds
//! as told, the verdict.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::checker::limits::SETTLE;
use crate::history::Ask;

/// What a violation broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// More held at once than the name's capacity.
    Capacity,
    /// A token granted twice, or not above one told before.
    Tokens,
    /// A lease body that says other than what was asked.
    Granted,
    /// An answer the contract does not name for the call.
    Unclear,
    /// A waiter left queued while its name had room.
    Stuck,
    /// An acquisition refused while its name was free.
    RefusedWithRoom,
    /// A request granted ahead of one that had queued well before it.
    Overtaken,
    /// No answer, with no fault to explain it.
    NoAnswer,
    /// A 503 away from any fault.
    Unavailable,
    /// A 404 for a lease its holder was told it held.
    LeaseLost,
    /// An `expires_at` other than the `ttl_ms` asked.
    Expiry,
    /// Redis without persistence never lost its data (or with it, did).
    DataLoss,
    /// A required path never taken under faults.
    Path,
    /// A lease's own stream that says other than what happened to it.
    Stream,
    /// A claim refused although all its names were free while it waited.
    ClaimWaited,
    /// A lease granted inside a freeze window of its name.
    Frozen,
    /// A ticket still waiting after a later request of the same or a
    /// lower priority was granted.
    TicketOvertaken,
    /// A ticket granted twice, or one token told for two acquisitions.
    TicketTwice,
    /// A holder of a claim (as `baton run` holds one) that went on running
    /// more than [`RUN_ON_LIMIT`] after one of its names was force-released.
    ClaimRanOn,
}

/// One violation: the rule and what happened.
#[derive(Debug, Clone)]
pub struct Violation {
    pub rule: Rule,
    pub text: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{:?}] {}", self.rule, self.text)
    }
}

/// A way through the service that the workload should take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Path {
    /// A grant to a name nobody else held or asked for (the fast path).
    Alone,
    /// A grant after waiting behind another holder.
    AfterWaiting,
    Exclusive,
    Shared,
    /// A semaphore lease of more than one permit.
    Permits,
    /// A refresh answered with an earlier expiry.
    RefreshShorten,
    /// A refresh answered with a later expiry.
    RefreshExtend,
    /// A release answered 204.
    Release,
    /// A `newest_wins` waiter superseded (409 `superseded`).
    NewestWins,
    /// A force-release answered 204.
    ForceRelease,
    /// A request of higher priority granted ahead of a lower one sent before
    /// it.
    Priority,
    /// A lease's own stream followed to its last event.
    Followed,
    /// A claim answered 201.
    Claim,
    /// A claim refused (409 `claim-refused`) after its wait.
    ClaimRefused,
    /// An acquisition answered 423 `frozen`.
    Frozen,
}

/// What a kind of run must show.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The paths each taken at least once during a fault.
    pub required: Vec<Path>,
    /// How long after a cluster failover the line may still be settling: a
    /// release the failover lost leaves its lease until it expires.
    pub failover_settle: Duration,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            required: Vec::new(),
            failover_settle: SETTLE,
        }
    }
}

/// A lease as its client was told it.
#[derive(Debug, Clone)]
pub struct Hold {
    pub name: String,
    pub client: usize,
    pub token: u64,
    /// What its 201 said it holds.
    pub ask: Ask,
    /// When the acquisition was sent: it was granted after this.
    pub requested: SystemTime,
    /// When its 201 arrived.
    pub start: SystemTime,
    /// Until when its holder could count on it (the overlap checks).
    pub told_until: SystemTime,
    /// Until when Redis may still have held it (the line's room).
    pub may_until: SystemTime,
    /// Until when Redis may have held it by its expiry alone, whatever ended
    /// it before (the last `expires_at` told, or later if a refresh that
    /// went unanswered may have extended it): after this, nothing may say
    /// it is held.
    pub expires_by: SystemTime,
}

impl Hold {
    pub(crate) fn held_at(&self, at: SystemTime) -> bool {
        self.start <= at && at < self.told_until
    }
}

/// What [`judge`] found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub violations: Vec<Violation>,
    pub holds: Vec<Hold>,
    /// Each path: how often taken, and how often during a fault.
    pub paths: BTreeMap<Path, (u64, u64)>,
    /// Timelines around the violations of the line.
    pub evidence: Vec<String>,
}

impl Verdict {
    /// How many violations broke `rule`.
    pub fn count(&self, rule: Rule) -> usize {
        self.violations.iter().filter(|v| v.rule == rule).count()
    }

    pub(crate) fn flag(&mut self, rule: Rule, text: String) {
        self.violations.push(Violation { rule, text });
    }

    pub(crate) fn took(&mut self, path: Path, faulted: bool) {
        let entry = self.paths.entry(path).or_default();
        entry.0 += 1;
        entry.1 += u64::from(faulted);
    }
}
