//! The chaos checker: one pure function, [`judge`], from a recorded
//! [`History`] to a [`Verdict`], so that a synthetic history tests it.
//!
//! A hold lasts, as its client was told, from the receipt of its 201 until
//! the client sent a release that ended it (answered 204 or 404, or unanswered
//! but perhaps received: after that it no longer relies on the lease; a
//! release answered 503 ends nothing), a force-release of its name was sent,
//! Redis lost its data (unless its 201 came once Redis was back, from an
//! instance no fault held up: baton confirms a lease before telling it, a
//! claim each of its leases), or else its `expires_at` (as the latest refresh
//! answered told it; a refresh that went unanswered may have shortened it).
//! The last [`EXPIRY_GRACE`] before an `expires_at` is not counted, for the
//! clocks of the client and of Redis. For the line's room the other end
//! counts: until when Redis may still have held the lease.
//!
//! The checks count capacity, not leases: a lease takes its [`Ask::weight`]
//! of its name's capacity ([`Ask::capacity`]). What is judged, each as one
//! [`Rule`]:
//!
//! - capacity and tokens: never more held as told than the name's capacity;
//!   every token granted once, above every token told before it was asked;
//! - what a lease body says: what was asked, and an `expires_at` that is the
//!   `ttl_ms` asked from a moment between the call's sending and its answer,
//!   on Redis's clock;
//! - the line: no waiter stayed queued more than [`STUCK`] in all while the
//!   head of its name's line surely had room, with the time any fault could
//!   explain (its span and [`SETTLE`] after it) subtracted, and the time a
//!   request that got no answer may still have been in line (it counts as in
//!   line, see [`LEAVE`]); no acquisition refused while its name was free and
//!   nobody else asked; none granted ahead of one queued well before it
//!   ([`ORDER_SLACK`]), away from faults (a stall of Redis is no excuse: the
//!   line keeps its order through one);
//! - answers: a missing answer only when a fault of its instance or of Redis
//!   overlapped the call; a 503 only during or right after such a fault
//!   ([`UNAVAILABLE_AFTER`]); a 404 for a lease its holder was told it held
//!   only after a force-release or a loss of Redis's data;
//! - claims: none refused (409 `claim-refused`) after every one of its
//!   names was free, away from faults, for more than [`CLAIM_FREE`] before
//!   its wait ran out; its answer as for any call (no answer and 503 only
//!   around a fault); its leases are holds like any other;
//! - freezes: no lease of a frozen name granted inside the freeze's window
//!   (from [`FREEZE_SLACK`] after its `POST` was answered until its `DELETE`
//!   was sent, as instances apply a freeze within a second), away from faults
//!   of Redis, restarts of its instance and a loss of Redis's data; a pause of
//!   its instance excuses only a grant that may have come before the window
//!   (its 201 held up until the resume), see [`earliest_grant`]; the lines of
//!   a frozen name are not judged from the `POST` until [`SETTLE`] after the
//!   window surely ended;
//! - a lease's own stream: `held` first, `released` or `lost` last and only
//!   as its holder's calls (or a force-release) allow, `lost` by expiry
//!   neither before the holder was told it would end nor more than
//!   [`STREAM_LATE`] after the expiry (or a fault of the stream's instance or
//!   of Redis then); no `refreshed` or `expiring` after the expiry passed;
//! - tickets (`ticket_rules.rs`): none still waiting after a later request
//!   of the same or a lower priority was granted, none granted twice;
//! - the run: Redis without persistence lost its data at least once (and
//!   with persistence never); every required [`Path`] was taken during a
//!   fault.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

#[path = "ticket_rules.rs"]
mod ticket_rules;

use super::history::{when, Answer, Ask, Call, FaultKind, History, Op, Target, CLAIM_RELEASED};

/// The end of a lease as told that the checks ignore.
pub const EXPIRY_GRACE: Duration = Duration::from_millis(200);
/// A waiter kept this long in all, away from faults, while its name had
/// room, is stuck.
pub const STUCK: Duration = Duration::from_secs(2);
/// Stretches of room shorter than this are a hand-over in progress (the
/// grant made, its 201 on its way), not a stuck line.
pub const MIN_STRETCH: Duration = Duration::from_millis(250);
/// A request is in line this long after it was sent.
pub const QUEUED_AFTER: Duration = Duration::from_millis(100);
/// How long after a fault the line may still be settling: an unconfirmed
/// grant lapses (3 s), a resumed instance's waiters rejoin (1 s).
pub const SETTLE: Duration = Duration::from_secs(4);
/// How long after its client gave up a request may still be in line (a
/// waiter whose client is gone leaves within 5 s).
pub const LEAVE: Duration = Duration::from_secs(6);
/// A 503 is accepted until this long after a fault of its instance or of
/// Redis.
pub const UNAVAILABLE_AFTER: Duration = Duration::from_secs(3);
/// A missing answer is excused by a fault this close to the call.
pub const NO_ANSWER_SLACK: Duration = Duration::from_secs(1);
/// How far an `expires_at` may be from the ttl asked, past the call's span.
pub const CLOCK_TOLERANCE: Duration = Duration::from_millis(100);
/// A request sent this much later than another one reached the line after
/// it; a 201 this much earlier than another's came before it.
pub const ORDER_SLACK: Duration = Duration::from_millis(1500);

/// How late a lease's own stream may say `lost` after its expiry (or after
/// a fault of its instance or of Redis that went on past it), or still say
/// `refreshed` or `expiring` after the expiry.
pub const STREAM_LATE: Duration = Duration::from_millis(1500);

/// A claim refused after all its names were free this long in all, away
/// from faults, while it waited, was left waiting with room.
pub const CLAIM_FREE: Duration = Duration::from_secs(1);

/// How long after a freeze was made (or before it is deleted) an instance
/// may still not apply it: each reloads the freezes within a second.
pub const FREEZE_SLACK: Duration = Duration::from_secs(1);
/// How long a holder of a claim may run on after one of its names was
/// force-released (the force-release answered): the contract's 1 s for the
/// holder's stream to say so, and as much again for the test's own client.
pub const RUN_ON_LIMIT: Duration = Duration::from_secs(2);

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
    fn held_at(&self, at: SystemTime) -> bool {
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

    fn flag(&mut self, rule: Rule, text: String) {
        self.violations.push(Violation { rule, text });
    }

    fn took(&mut self, path: Path, faulted: bool) {
        let entry = self.paths.entry(path).or_default();
        entry.0 += 1;
        entry.1 += u64::from(faulted);
    }
}

/// Judges a whole run.
pub fn judge(history: &History, rules: &Rules) -> Verdict {
    let mut verdict = Verdict::default();
    // A stall of Redis keeps the line's order (the waiters' instances stay
    // alive, and a waiter dropped rejoins in its place): it excuses no
    // overtaking.
    let reordering = explained(history, rules, |kind| kind != FaultKind::RedisStall);
    let explained = explained(history, rules, |_| true);
    answers(history, &mut verdict);
    expiries(history, &mut verdict);
    let lost = holds(history, &explained, &mut verdict);
    for (name, from, to) in lost {
        let holds: Vec<Hold> = verdict
            .holds
            .iter()
            .filter(|h| h.name == name)
            .cloned()
            .collect();
        let timeline = timeline(history, &holds, &name, from, to);
        verdict.evidence.push(timeline);
    }
    let names: Vec<String> = {
        let mut names: Vec<String> = history.calls.iter().map(|c| c.name.clone()).collect();
        names.sort();
        names.dedup();
        names
    };
    for name in &names {
        let holds: Vec<Hold> = verdict
            .holds
            .iter()
            .filter(|h| &h.name == name)
            .cloned()
            .collect();
        for (from, to) in capacity(name, &holds, &mut verdict) {
            let timeline = timeline(history, &holds, name, from, to);
            verdict.evidence.push(timeline);
        }
        tokens(name, &holds, &mut verdict);
        line(history, name, &holds, &explained, &reordering, &mut verdict);
    }
    data_loss(history, &mut verdict);
    claims(history, &explained, &mut verdict);
    claim_runs(history, &explained, &mut verdict);
    frozen(history, &explained, &mut verdict);
    streams(history, &explained, &mut verdict);
    ticket_rules::tickets(history, &mut verdict);
    for path in &rules.required {
        if verdict
            .paths
            .get(path)
            .is_none_or(|(_, faulted)| *faulted == 0)
        {
            let taken = verdict.paths.get(path).map_or(0, |(n, _)| *n);
            verdict.flag(
                Rule::Path,
                format!("{path:?} never taken during a fault ({taken} times in all)"),
            );
        }
    }
    verdict
}

/// The stretches any fault of the kinds `counted` may explain: its span
/// and [`SETTLE`] after it (after a failover, [`Rules::failover_settle`]).
fn explained(
    history: &History,
    rules: &Rules,
    counted: impl Fn(FaultKind) -> bool,
) -> Vec<(SystemTime, SystemTime)> {
    let settle = |kind: FaultKind| match kind {
        FaultKind::MasterKill | FaultKind::MasterKillLaggingReplica => rules.failover_settle,
        _ => SETTLE,
    };
    union(
        history
            .faults
            .iter()
            .filter(|f| counted(f.kind))
            .map(|f| (f.from, f.to + settle(f.kind)))
            .collect(),
    )
}

fn overlaps(a: (SystemTime, SystemTime), b: (SystemTime, SystemTime)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Sorted, disjoint stretches covering the same time as `spans`.
fn union(mut spans: Vec<(SystemTime, SystemTime)>) -> Vec<(SystemTime, SystemTime)> {
    spans.retain(|s| s.1 > s.0);
    spans.sort();
    let mut out: Vec<(SystemTime, SystemTime)> = Vec::new();
    for s in spans {
        match out.last_mut() {
            Some(last) if s.0 <= last.1 => last.1 = last.1.max(s.1),
            _ => out.push(s),
        }
    }
    out
}

/// `spans` less `minus` (both sorted and disjoint).
fn subtract(
    spans: &[(SystemTime, SystemTime)],
    minus: &[(SystemTime, SystemTime)],
) -> Vec<(SystemTime, SystemTime)> {
    let mut out = Vec::new();
    for &(mut from, to) in spans {
        for &(m0, m1) in minus {
            if m1 <= from || m0 >= to {
                continue;
            }
            if m0 > from {
                out.push((from, m0));
            }
            from = from.max(m1);
            if from >= to {
                break;
            }
        }
        if from < to {
            out.push((from, to));
        }
    }
    out
}

/// Whether a fault of `instance` or of Redis touches `from .. to`, widened
/// by `before` and `after`.
fn faulted(
    history: &History,
    instance: usize,
    (from, to): (SystemTime, SystemTime),
    before: Duration,
    after: Duration,
) -> bool {
    history.faults.iter().any(|f| {
        matches!(f.target, Target::Redis) || f.target == Target::Instance(instance)
    } && f.from <= to + before
        && from <= f.to + after)
}

/// Whether a fault of `instance` itself (not of Redis) touches `from .. to`.
fn instance_faulted(
    history: &History,
    instance: usize,
    (from, to): (SystemTime, SystemTime),
) -> bool {
    history
        .faults
        .iter()
        .any(|f| f.target == Target::Instance(instance) && f.from <= to && from <= f.to)
}

/// Each answer against what the contract names for its call, and missing
/// answers and 503s against the faults.
fn answers(history: &History, verdict: &mut Verdict) {
    for call in &history.calls {
        let what = || {
            format!(
                "{} {:?} via instance {} (sent {}, answered {})",
                call.name,
                call.op,
                call.instance,
                when(call.sent),
                when(call.answered)
            )
        };
        match &call.answer {
            Answer::Unclear(answer) => verdict.flag(Rule::Unclear, format!("{}: {answer}", what())),
            Answer::None { .. } => {
                if !faulted(
                    history,
                    call.instance,
                    (call.sent, call.answered),
                    NO_ANSWER_SLACK,
                    NO_ANSWER_SLACK,
                ) {
                    verdict.flag(
                        Rule::NoAnswer,
                        format!(
                            "{}: {} outside any fault of it or Redis",
                            what(),
                            call.answer
                        ),
                    );
                }
            }
            Answer::Status { status: 503, .. } => {
                // A request waits out an outage: its 503 comes when the
                // outage is still on, or a moment after.
                if !faulted(
                    history,
                    call.instance,
                    (call.answered, call.answered),
                    Duration::ZERO,
                    UNAVAILABLE_AFTER,
                ) {
                    verdict.flag(
                        Rule::Unavailable,
                        format!("{}: 503 away from any fault of it or Redis", what()),
                    );
                }
            }
            Answer::Status { status, slug } => {
                let named = match call.op {
                    Op::Acquire(_) => matches!(*status, 409 | 423),
                    Op::Refresh { .. } => *status == 404,
                    Op::Release { .. } | Op::ForceRelease => matches!(*status, 204 | 404),
                };
                if !named {
                    verdict.flag(Rule::Unclear, format!("{}: {status} {slug}", what()));
                }
            }
            Answer::Lease { granted, .. } => {
                if let Op::Acquire(acquire) = call.op {
                    if *granted != acquire.ask {
                        verdict.flag(
                            Rule::Granted,
                            format!("{}: asked {}, told {granted}", what(), acquire.ask),
                        );
                    }
                }
                if matches!(call.op, Op::Release { .. } | Op::ForceRelease) {
                    verdict.flag(Rule::Unclear, format!("{}: a lease body", what()));
                }
            }
        }
    }
}

/// Each `expires_at` told against the `ttl_ms` asked, on Redis's clock.
fn expiries(history: &History, verdict: &mut Verdict) {
    for call in &history.calls {
        let ttl = match call.op {
            Op::Acquire(acquire) => acquire.ttl_ms,
            Op::Refresh { ttl_ms, .. } => ttl_ms,
            _ => continue,
        };
        let Answer::Lease { expires_at, .. } = call.answer else {
            continue;
        };
        let ttl = Duration::from_millis(ttl);
        let told = history.local(expires_at);
        let (earliest, latest) = (
            call.sent + ttl - CLOCK_TOLERANCE,
            call.answered + ttl + CLOCK_TOLERANCE,
        );
        if told < earliest || told > latest {
            verdict.flag(
                Rule::Expiry,
                format!(
                    "{} {:?}: expires_at {} (Redis's clock; {} on the test's), but {} ms from a moment between {} and {}",
                    call.name,
                    call.op,
                    when(expires_at),
                    when(told),
                    ttl.as_millis(),
                    when(call.sent),
                    when(call.answered)
                ),
            );
        }
    }
}

/// The holds of the run, as their clients were told them (see the module
/// doc), the leases lost under their holders, and the paths their calls
/// took.
/// Returns the spans of the leases lost, for the timelines.
fn holds(
    history: &History,
    explained: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) -> Vec<(String, SystemTime, SystemTime)> {
    let mut lost = Vec::new();
    let during_fault = |call: &Call| {
        explained
            .iter()
            .any(|e| overlaps(*e, (call.sent, call.answered + Duration::from_millis(1))))
    };
    let data_lost: Vec<(SystemTime, SystemTime)> = history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::RedisRestart { data_lost: true })
        .map(|f| (f.from, f.to))
        .collect();
    let forces: Vec<&Call> = history
        .calls
        .iter()
        .filter(|c| c.op == Op::ForceRelease)
        .collect();
    // Each client's calls on each name, in the order it sent them.
    let mut by_client: BTreeMap<(usize, &str), Vec<&Call>> = BTreeMap::new();
    for call in &history.calls {
        by_client
            .entry((call.client, call.name.as_str()))
            .or_default()
            .push(call);
    }
    for calls in by_client.values_mut() {
        calls.sort_by_key(|c| c.sent);
    }
    // A 201 received once Redis was back from a loss of its data, from an
    // instance no fault held up meanwhile, tells of a lease held after the
    // loss (a claim confirms each lease it took before its 201): the loss
    // did not end it, nor excuses a 404 for it.
    let told_after = |call: &Call, &(from, to): &(SystemTime, SystemTime)| {
        call.answered >= to && !instance_faulted(history, call.instance, (from, call.answered))
    };
    for call in &history.calls {
        let faulted = during_fault(call);
        match (&call.op, &call.answer) {
            (Op::ForceRelease, Answer::Status { status: 204, .. }) => {
                verdict.took(Path::ForceRelease, faulted);
            }
            (Op::Release { .. }, Answer::Status { status: 204, .. }) => {
                verdict.took(Path::Release, faulted);
            }
            (Op::Acquire(a), Answer::Status { status: 409, slug })
                if a.newest_wins && slug == "superseded" =>
            {
                verdict.took(Path::NewestWins, faulted);
            }
            _ => {}
        }
        let (
            Op::Acquire(_),
            Answer::Lease {
                token,
                expires_at,
                granted,
            },
        ) = (&call.op, &call.answer)
        else {
            continue;
        };
        match granted {
            Ask::Lock { shared: true } => verdict.took(Path::Shared, faulted),
            Ask::Lock { shared: false } => verdict.took(Path::Exclusive, faulted),
            Ask::Permits { permits, .. } if *permits > 1 => verdict.took(Path::Permits, faulted),
            Ask::Permits { .. } => {}
        }
        let expires = history.local(*expires_at);
        let mut hold = Hold {
            name: call.name.clone(),
            client: call.client,
            token: *token,
            ask: *granted,
            requested: call.sent,
            start: call.answered,
            told_until: expires - EXPIRY_GRACE,
            may_until: expires + EXPIRY_GRACE,
            expires_by: expires + EXPIRY_GRACE,
        };
        // When the first release of it that went unanswered (perhaps
        // received) or answered 503 was sent: it may have ended the lease,
        // as a later 404 says; a later 204 says it did not.
        let mut pending: Option<SystemTime> = None;
        let own = &by_client[&(call.client, call.name.as_str())];
        for next in own.iter().filter(|c| c.sent >= call.answered) {
            let lease = match next.op {
                Op::Refresh { lease, .. } | Op::Release { lease } => lease,
                _ => continue,
            };
            if lease != *token || next.sent >= hold.told_until {
                continue;
            }
            // (A call answered after the lease's expiry, e.g. held up in a
            // paused instance, may have come too late.)
            let lost_here = |hold: &Hold| {
                pending.is_none()
                    && next.answered < hold.told_until
                    // (From the request: a lease granted before the loss
                    // may be answered after it, unless its 201 came once
                    // Redis was back, see `told_after`.)
                    && !data_lost.iter().any(|l| {
                        overlaps(*l, (hold.requested, next.answered)) && !told_after(call, l)
                    })
                    && !forces.iter().any(|f| {
                        f.name == hold.name
                            && overlaps((f.sent, effect_until(f)), (hold.requested, next.answered))
                    })
            };
            match (&next.op, &next.answer) {
                (Op::Refresh { .. }, Answer::Lease { expires_at, .. }) => {
                    let told = history.local(*expires_at);
                    let before = hold.told_until + EXPIRY_GRACE;
                    if told < before {
                        verdict.took(Path::RefreshShorten, during_fault(next));
                    } else if told > before {
                        verdict.took(Path::RefreshExtend, during_fault(next));
                    }
                    hold.told_until = told - EXPIRY_GRACE;
                    hold.may_until = told + EXPIRY_GRACE;
                    hold.expires_by = told + EXPIRY_GRACE;
                }
                (
                    Op::Refresh { ttl_ms, .. },
                    Answer::None { .. } | Answer::Status { status: 503, .. },
                ) => {
                    // It may have run: a shortening counts from its sending,
                    // an extension does not count.
                    let ttl = Duration::from_millis(*ttl_ms);
                    hold.told_until = hold.told_until.min(next.sent + ttl - EXPIRY_GRACE);
                    hold.may_until = hold.may_until.max(next.answered + ttl + EXPIRY_GRACE);
                    hold.expires_by = hold.expires_by.max(effect_until(next) + ttl + EXPIRY_GRACE);
                }
                (
                    Op::Release { .. },
                    Answer::Status { status: 503, .. }
                    | Answer::None { reached: true }
                    | Answer::Unclear(_),
                ) => {
                    pending.get_or_insert(next.sent);
                }
                (
                    _,
                    Answer::Status {
                        status: 204 | 404, ..
                    },
                ) => {
                    if next.answer.status() == Some(404) && lost_here(&hold) {
                        lost.push((hold.name.clone(), hold.start, next.answered));
                        verdict.flag(
                            Rule::LeaseLost,
                            format!(
                                "{}: token {} ({}, 201 at {}) answered 404 to {:?} sent {}, before it was told to end ({})",
                                hold.name,
                                hold.token,
                                hold.ask,
                                when(hold.start),
                                next.op,
                                when(next.sent),
                                when(hold.told_until + EXPIRY_GRACE)
                            ),
                        );
                    }
                    let ended = match (next.answer.status(), pending) {
                        (Some(404), Some(first)) => first,
                        _ => next.sent,
                    };
                    hold.told_until = hold.told_until.min(ended);
                    hold.may_until = hold.may_until.min(next.answered);
                    pending = None;
                    break;
                }
                _ => {}
            }
        }
        // Releases that may have run, and none answered after them.
        if let Some(first) = pending {
            hold.told_until = hold.told_until.min(first);
        }
        // A force-release that may have run after the grant (which came
        // between the request and its 201) ends the hold, unless the lease
        // answered its holder after it (a refresh or a release that found
        // it): the force-release ran before the grant.
        let alive_after = |at: SystemTime| {
            own.iter().any(|c| {
                c.sent > at
                    && matches!(c.op, Op::Refresh { lease, .. } | Op::Release { lease } if lease == *token)
                    && match &c.answer {
                        Answer::Lease { .. } => true,
                        // A claim's 204 releases whatever of it is left.
                        Answer::Status { status: 204, slug } => slug != CLAIM_RELEASED,
                        _ => false,
                    }
            })
        };
        for force in forces.iter().filter(|f| f.name == hold.name) {
            if force.sent < hold.told_until
                && effect_until(force) > hold.requested
                && !matches!(force.answer, Answer::None { reached: false })
                && !alive_after(effect_until(force))
            {
                hold.told_until = hold.told_until.min(force.sent.max(hold.start));
                // Surely after the grant: it ended the lease for the room too.
                if force.answer.status() == Some(204) && force.sent > hold.start {
                    hold.may_until = hold.may_until.min(force.answered);
                }
            }
        }
        // A loss of Redis's data ends it, unless it answered its holder
        // after, or its 201 came after (it was granted once Redis was back).
        for &(from, to) in &data_lost {
            if from < hold.may_until
                && to > hold.requested
                && !alive_after(to)
                && !told_after(call, &(from, to))
            {
                hold.told_until = hold.told_until.min(from.max(hold.start));
                hold.may_until = hold.may_until.min(to);
            }
        }
        verdict.holds.push(hold);
    }
    lost
}

/// Until when a call may still take effect: its answer, or for one
/// unanswered or answered 503 a while after (a paused instance serves it
/// when it resumes, a stalled Redis runs it when it wakes).
fn effect_until(call: &Call) -> SystemTime {
    match call.answer {
        Answer::None { .. } | Answer::Status { status: 503, .. } => call.answered + LEAVE,
        _ => call.answered,
    }
}

/// How much of a name `holds` take, by `until` (told or may), at each time
/// that changes: (when, in use from then on). Holds that touch do not
/// overlap.
fn usage(holds: &[Hold], until: impl Fn(&Hold) -> SystemTime) -> Vec<(SystemTime, i64)> {
    let mut changes: BTreeMap<SystemTime, i64> = BTreeMap::new();
    for h in holds {
        if until(h) > h.start {
            let weight = h.ask.weight() as i64;
            *changes.entry(h.start).or_default() += weight;
            *changes.entry(until(h)).or_default() -= weight;
        }
    }
    let mut used = 0;
    changes
        .into_iter()
        .map(|(at, delta)| {
            used += delta;
            (at, used)
        })
        .collect()
}

/// More than the name's capacity held at once, as told; returns when, for
/// the timelines.
fn capacity(name: &str, holds: &[Hold], verdict: &mut Verdict) -> Vec<(SystemTime, SystemTime)> {
    let mut evidence = Vec::new();
    let Some(capacity) = holds.first().map(|h| h.ask.capacity()) else {
        return evidence;
    };
    for (at, used) in usage(holds, |h| h.told_until) {
        if used <= capacity as i64 {
            continue;
        }
        let held: Vec<String> = holds
            .iter()
            .filter(|h| h.held_at(at))
            .map(|h| {
                format!(
                    "token {} {} (client {}, {} .. {})",
                    h.token,
                    h.ask,
                    h.client,
                    when(h.start),
                    when(h.told_until)
                )
            })
            .collect();
        let used = if capacity == super::history::LOCK_CAPACITY {
            format!("{} leases", held.len())
        } else {
            format!("{used} of {capacity}")
        };
        verdict.flag(
            Rule::Capacity,
            format!("{name}: {used} held at {}: {}", when(at), held.join("; ")),
        );
        evidence.push((at, at));
    }
    evidence
}

/// Every token granted once, and above the tokens of every hold (of either
/// mode) whose 201 had arrived before it was asked for (across Redis
/// restarts, data loss and failovers too).
fn tokens(name: &str, holds: &[Hold], verdict: &mut Verdict) {
    let mut seen = HashSet::new();
    for h in holds {
        if !seen.insert(h.token) {
            verdict.flag(
                Rule::Tokens,
                format!("{name}: token {} granted twice", h.token),
            );
        }
    }
    let mut by_start = holds.to_vec();
    by_start.sort_by_key(|h| h.start);
    let mut by_request = holds.to_vec();
    by_request.sort_by_key(|h| h.requested);
    let mut max_told: Option<&Hold> = None;
    let mut j = 0;
    for h in &by_request {
        while j < by_start.len() && by_start[j].start < h.requested {
            if max_told.is_none_or(|m| by_start[j].token > m.token) {
                max_told = Some(&by_start[j]);
            }
            j += 1;
        }
        if let Some(m) = max_told.filter(|m| h.token <= m.token) {
            verdict.flag(
                Rule::Tokens,
                format!(
                    "{name}: token {} ({}, sent {}) after token {} ({}, told {})",
                    h.token,
                    h.ask,
                    when(h.requested),
                    m.token,
                    m.ask,
                    when(m.start)
                ),
            );
        }
    }
}

/// The line of one name: stuck waiters, refusals while free, overtaking
/// (away from the faults `reordering` explains) and the paths of its grants
/// (alone, after waiting).
fn line(
    history: &History,
    name: &str,
    holds: &[Hold],
    explained: &[(SystemTime, SystemTime)],
    reordering: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    let calls: Vec<&Call> = history.calls.iter().filter(|c| c.name == name).collect();
    let acquisitions: Vec<(&Call, Ask)> = calls
        .iter()
        .filter_map(|c| match c.op {
            Op::Acquire(a) => Some((*c, a.ask)),
            _ => None,
        })
        .collect();
    let Some(capacity) = acquisitions.first().map(|(_, a)| a.capacity()) else {
        return;
    };
    // A request with no answer (or a 503, or an unclear one) may be in line
    // until a while after its client gave up: its name is not judged then.
    let unknown = union(
        acquisitions
            .iter()
            .filter(|(c, _)| {
                matches!(
                    c.answer,
                    Answer::None { .. } | Answer::Unclear(_) | Answer::Status { status: 503, .. }
                )
            })
            .map(|(c, _)| (c.sent, c.answered + LEAVE))
            .collect(),
    );
    let frozen = frozen_windows(history, name);
    let unjudged = union(
        explained
            .iter()
            .chain(&unknown)
            .chain(&frozen)
            .copied()
            .collect(),
    );
    let unordered = union(
        reordering
            .iter()
            .chain(&unknown)
            .chain(&frozen)
            .copied()
            .collect(),
    );
    let outstanding: Vec<(SystemTime, SystemTime, u64)> = acquisitions
        .iter()
        .map(|(c, a)| (c.sent, c.answered, a.weight()))
        .collect();
    let room = subtract(&room(holds, &outstanding, capacity), &unjudged);
    overtaken(name, &acquisitions, &unjudged, &unordered, verdict);

    for (call, ask) in &acquisitions {
        let Op::Acquire(acquire) = call.op else {
            continue;
        };
        let others = |from: SystemTime, to: SystemTime| {
            acquisitions.iter().any(|(c, _)| {
                !std::ptr::eq(*c, *call) && overlaps((c.sent, c.answered), (from, to))
            }) || holds.iter().any(|h| {
                h.token != call_token(call).unwrap_or(0)
                    && overlaps((h.start, h.may_until), (from, to))
            })
        };
        let span = (call.sent, call.answered + Duration::from_millis(1));
        let faulted = explained.iter().any(|e| overlaps(*e, span));
        match &call.answer {
            Answer::Lease { .. } => {
                if !others(call.sent, call.answered) {
                    verdict.took(Path::Alone, faulted);
                } else if call.answered.duration_since(call.sent).unwrap_or_default()
                    > Duration::from_millis(300)
                {
                    verdict.took(Path::AfterWaiting, faulted);
                }
            }
            Answer::Status { status: 409, slug } if slug != "superseded" => {
                // Refused although nothing was held or asked around it.
                let idle = !others(call.sent, call.answered);
                let judged = !unjudged.iter().any(|u| overlaps(*u, span));
                if idle && judged && ask.weight() <= capacity {
                    verdict.flag(
                        Rule::RefusedWithRoom,
                        format!(
                            "{name}: {ask} refused ({slug}) via instance {} (sent {}, answered {}) while nothing else held or asked for it",
                            call.instance,
                            when(call.sent),
                            when(call.answered)
                        ),
                    );
                }
            }
            _ => {}
        }
        // Stuck: only requests that were answered (else they are unknown).
        if acquire.wait_ms == 0
            || matches!(
                call.answer,
                Answer::None { .. } | Answer::Unclear(_) | Answer::Status { status: 503, .. }
            )
        {
            continue;
        }
        let queued = call.sent + QUEUED_AFTER;
        let until = call
            .answered
            .min(call.sent + Duration::from_millis(acquire.wait_ms));
        let stretches: Vec<(SystemTime, SystemTime)> = room
            .iter()
            .map(|&(r0, r1)| (r0.max(queued), r1.min(until)))
            .filter(|(from, to)| to.duration_since(*from).unwrap_or_default() >= MIN_STRETCH)
            .collect();
        let total: Duration = stretches
            .iter()
            .map(|(from, to)| to.duration_since(*from).unwrap_or_default())
            .sum();
        if total > STUCK {
            let (from, to) = (stretches[0].0, stretches[stretches.len() - 1].1);
            verdict.flag(
                Rule::Stuck,
                format!(
                    "{name}: a waiter for {ask} via instance {} (sent {}, answered {} {}) stayed queued {} ms in all while the line had room, away from faults ({} .. {})",
                    call.instance,
                    when(call.sent),
                    when(call.answered),
                    call.answer,
                    total.as_millis(),
                    when(from),
                    when(to)
                ),
            );
            verdict
                .evidence
                .push(timeline(history, holds, name, from, to));
        }
    }
}

/// First come, first served: a request granted while one sent well before it
/// still waited (and went on waiting well after), with no fault or unknown
/// request around the grant (`unordered`: a stall of Redis is no excuse),
/// overtook it. (With one limit per name, as the runs use, the line is
/// strictly in order, for readers and permits too; a waiter that lost its
/// place to a fault of its instance or a restart of Redis rejoins at the
/// back within the settle time, one dropped in a stall in its place.)
/// Names with `newest_wins` requests are not judged. The path of priority is
/// taken during a fault when any fault (`unjudged`) was around it.
fn overtaken(
    name: &str,
    acquisitions: &[(&Call, Ask)],
    unjudged: &[(SystemTime, SystemTime)],
    unordered: &[(SystemTime, SystemTime)],
    verdict: &mut Verdict,
) {
    let newest_wins = acquisitions
        .iter()
        .any(|(c, _)| matches!(c.op, Op::Acquire(a) if a.newest_wins));
    if newest_wins {
        return;
    }
    let priority = |c: &Call| match c.op {
        Op::Acquire(a) => a.priority,
        _ => 0,
    };
    let waited = |c: &Call| {
        matches!(c.op, Op::Acquire(a) if a.wait_ms > 0)
            && matches!(
                c.answer,
                Answer::Lease { .. } | Answer::Status { status: 409, .. }
            )
    };
    for (b, b_ask) in acquisitions
        .iter()
        .filter(|(c, _)| matches!(c.answer, Answer::Lease { .. }))
    {
        let span = (b.sent, b.answered + Duration::from_millis(1));
        let faulted = unjudged.iter().any(|u| overlaps(*u, span));
        let excused = unordered.iter().any(|u| overlaps(*u, span));
        let passed = |a: &Call| {
            waited(a) && a.sent + ORDER_SLACK < b.sent && a.answered > b.answered + ORDER_SLACK
        };
        // Ahead of a lower priority sent before it: the line's order.
        if acquisitions.iter().any(|(a, _)| {
            waited(a) && a.sent < b.sent && a.answered > b.answered && priority(a) < priority(b)
        }) {
            verdict.took(Path::Priority, faulted);
        }
        if excused {
            continue;
        }
        let ahead = acquisitions
            .iter()
            .find(|(a, _)| passed(a) && priority(a) >= priority(b));
        if let Some((a, a_ask)) = ahead {
            verdict.flag(
                Rule::Overtaken,
                format!(
                    "{name}: {b_ask} via instance {} (sent {}, 201 {}) granted ahead of {a_ask} via instance {} (sent {}, answered {} {})",
                    b.instance,
                    when(b.sent),
                    when(b.answered),
                    a.instance,
                    when(a.sent),
                    when(a.answered),
                    a.answer
                ),
            );
        }
    }
}

/// The token a call's answer carries, if any.
fn call_token(call: &Call) -> Option<u64> {
    match call.answer {
        Answer::Lease { token, .. } => Some(token),
        _ => None,
    }
}

/// The stretches when the head of a name's line surely had room, whoever it
/// was.
///
/// The line admits its head as soon as the capacity held plus the head's own
/// weight fits. The clients cannot tell the order of the line, but the head
/// is one of the acquisitions then outstanding (answered or not), so the head
/// surely fits when the weight Redis may hold plus the largest weight
/// outstanding does. That never blames the line for a head that did not fit
/// (a large request at the head is not overtaken by smaller ones behind it,
/// a reader waits behind a queued writer).
fn room(
    holds: &[Hold],
    outstanding: &[(SystemTime, SystemTime, u64)],
    capacity: u64,
) -> Vec<(SystemTime, SystemTime)> {
    /// What happens at an instant; ends sort before starts, so that touching
    /// holds and waits do not overlap.
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Change {
        HoldEnds(u64),
        WaitEnds(u64),
        HoldStarts(u64),
        WaitStarts(u64),
    }
    let mut changes: Vec<(SystemTime, Change)> = Vec::new();
    for h in holds.iter().filter(|h| h.may_until > h.start) {
        changes.push((h.start, Change::HoldStarts(h.ask.weight())));
        changes.push((h.may_until, Change::HoldEnds(h.ask.weight())));
    }
    for &(from, to, weight) in outstanding.iter().filter(|(from, to, _)| to > from) {
        changes.push((from, Change::WaitStarts(weight)));
        changes.push((to, Change::WaitEnds(weight)));
    }
    changes.sort();
    let mut used = 0u64;
    let mut waiting: BTreeMap<u64, usize> = BTreeMap::new();
    let mut stretches = Vec::new();
    let mut since: Option<SystemTime> = None;
    let mut i = 0;
    while i < changes.len() {
        let at = changes[i].0;
        while i < changes.len() && changes[i].0 == at {
            match changes[i].1 {
                Change::HoldStarts(w) => used += w,
                Change::HoldEnds(w) => used -= w,
                Change::WaitStarts(w) => *waiting.entry(w).or_default() += 1,
                Change::WaitEnds(w) => {
                    let n = waiting.get_mut(&w).expect("a wait that started");
                    *n -= 1;
                    if *n == 0 {
                        waiting.remove(&w);
                    }
                }
            }
            i += 1;
        }
        // Room only matters while someone waits.
        let has_room = waiting
            .keys()
            .next_back()
            .is_some_and(|largest| used + largest <= capacity);
        match (since, has_room) {
            (Some(from), false) => {
                if at > from {
                    stretches.push((from, at));
                }
                since = None;
            }
            (None, true) => since = Some(at),
            _ => {}
        }
    }
    stretches
}

/// Each lease's own stream against what happened to the lease: `held`
/// first, nothing after its last event, `released` only after its holder
/// sent a release, `lost` for a force-release only after one was sent, for
/// an expiry only once the lease's told expiry had passed and no more than
/// [`STREAM_LATE`] after its expiry (or after a fault of the stream's
/// instance or of Redis that went on past it); no `refreshed` or `expiring`
/// heard more than [`STREAM_LATE`] after the lease's expiry passed (its
/// instance paused meanwhile or not: a lease gone is only `lost`).
fn streams(history: &History, explained: &[(SystemTime, SystemTime)], verdict: &mut Verdict) {
    for followed in &history.follows {
        let Some(hold) = verdict
            .holds
            .iter()
            .find(|h| h.name == followed.name && h.token == followed.lease)
            .cloned()
        else {
            continue;
        };
        let what = format!("{}: the stream of token {}", hold.name, hold.token);
        let events = &followed.events;
        if let Some(first) = events.first() {
            if first.kind != "held" {
                verdict.flag(Rule::Stream, format!("{what} began with {}", first.kind));
            }
        }
        for event in events
            .iter()
            .filter(|e| e.kind == "refreshed" || e.kind == "expiring")
            .filter(|e| e.at > hold.expires_by + STREAM_LATE)
        {
            verdict.flag(
                Rule::Stream,
                format!(
                    "{what} said {} at {}, after the lease's expiry passed ({})",
                    event.kind,
                    when(event.at),
                    when(hold.expires_by)
                ),
            );
        }
        let last = events
            .iter()
            .position(|e| e.kind == "released" || e.kind == "lost");
        let Some(last) = last else {
            continue;
        };
        if last + 1 < events.len() {
            verdict.flag(
                Rule::Stream,
                format!("{what} went on after {}", events[last].kind),
            );
        }
        let event = &events[last];
        let faulted = explained
            .iter()
            .any(|e| overlaps(*e, (followed.opened, event.at)));
        verdict.took(Path::Followed, faulted);
        let sent_before = |op: &dyn Fn(&Call) -> bool| {
            history
                .calls
                .iter()
                .any(|c| c.name == hold.name && c.sent < event.at && op(c))
        };
        let released = sent_before(&|c| c.op == Op::Release { lease: hold.token });
        let forced = sent_before(&|c| c.op == Op::ForceRelease);
        let wrong = match (event.kind.as_str(), event.reason.as_deref()) {
            ("released", _) => !released,
            ("lost", Some("force-released")) => !forced,
            // Expired: not before the holder was told it would (unless a
            // release or force-release may have ended it first, or Redis
            // lost it).
            ("lost", Some("expired")) => event.at < hold.told_until && !released && !forced,
            ("lost", Some("superseded")) => true,
            _ => true,
        };
        if event.kind == "lost" && event.reason.as_deref() == Some("expired") {
            // Due at the expiry, or once a fault of the stream's instance or
            // of Redis that was on then was over.
            let mut due = hold.expires_by;
            while let Some(fault) = history.faults.iter().find(|f| {
                (f.target == Target::Redis || f.target == Target::Instance(followed.instance))
                    && f.from <= due
                    && due < f.to
            }) {
                due = fault.to;
            }
            if event.at > due + STREAM_LATE {
                verdict.flag(
                    Rule::Stream,
                    format!(
                        "{what} said lost (expired) at {}, {} ms after it was due ({})",
                        when(event.at),
                        event.at.duration_since(due).unwrap_or_default().as_millis(),
                        when(due)
                    ),
                );
            }
        }
        if wrong {
            verdict.flag(
                Rule::Stream,
                format!(
                    "{what} ended {} {:?} at {} (201 at {}, told until {})",
                    event.kind,
                    event.reason,
                    when(event.at),
                    when(hold.start),
                    when(hold.told_until)
                ),
            );
        }
    }
}

/// Each claim's answer against the contract and the faults, and each one
/// refused against its names: refused although all of them were free (no
/// hold Redis may have had from its request on, no other acquisition or
/// claim of it outstanding, no fault explaining the time) for more than
/// [`CLAIM_FREE`] in all while it waited.
fn claims(history: &History, explained: &[(SystemTime, SystemTime)], verdict: &mut Verdict) {
    for claim in &history.claims {
        let names: Vec<&str> = claim.names.iter().map(|(n, _)| n.as_str()).collect();
        let what = || {
            format!(
                "claim of {} via instance {} (sent {}, answered {})",
                names.join(", "),
                claim.instance,
                when(claim.sent),
                when(claim.answered)
            )
        };
        let span = (claim.sent, claim.answered);
        let during = explained
            .iter()
            .any(|e| overlaps(*e, (claim.sent, claim.answered + Duration::from_millis(1))));
        match &claim.answer {
            Answer::None { .. } => {
                if !faulted(
                    history,
                    claim.instance,
                    span,
                    NO_ANSWER_SLACK,
                    NO_ANSWER_SLACK,
                ) {
                    verdict.flag(
                        Rule::NoAnswer,
                        format!(
                            "{}: {} outside any fault of it or Redis",
                            what(),
                            claim.answer
                        ),
                    );
                }
                continue;
            }
            Answer::Status { status: 503, .. } => {
                let at = (claim.answered, claim.answered);
                if !faulted(
                    history,
                    claim.instance,
                    at,
                    Duration::ZERO,
                    UNAVAILABLE_AFTER,
                ) {
                    verdict.flag(
                        Rule::Unavailable,
                        format!("{}: 503 away from any fault of it or Redis", what()),
                    );
                }
                continue;
            }
            Answer::Status { status: 201, .. } => {
                verdict.took(Path::Claim, during);
                continue;
            }
            Answer::Status { status: 409, slug } if slug == "claim-refused" => {
                verdict.took(Path::ClaimRefused, during);
            }
            // Frozen, as a single request is: only while a freeze of one of
            // its names may have held (a claim that waits holds none of its
            // names meanwhile, and takes them when the window ends).
            Answer::Status { status: 423, slug } if slug == "frozen" => {
                let frozen = names.iter().any(|name| {
                    frozen_windows(history, name)
                        .iter()
                        .any(|w| overlaps(*w, (claim.sent, claim.answered)))
                });
                if frozen {
                    verdict.took(Path::Frozen, during);
                } else {
                    verdict.flag(
                        Rule::Unclear,
                        format!("{}: 423 frozen outside any freeze of its names", what()),
                    );
                }
                continue;
            }
            other => {
                verdict.flag(Rule::Unclear, format!("{}: {other}", what()));
                continue;
            }
        }
        // Refused: when was every name free?
        let mut busy: Vec<(SystemTime, SystemTime)> = explained.to_vec();
        for name in &names {
            busy.extend(frozen_windows(history, name));
            busy.extend(
                verdict
                    .holds
                    .iter()
                    .filter(|h| h.name == *name)
                    .map(|h| (h.requested, h.may_until)),
            );
            busy.extend(
                history
                    .calls
                    .iter()
                    .filter(|c| c.name == *name && matches!(c.op, Op::Acquire(_)))
                    .map(|c| (c.sent, effect_until(c))),
            );
            busy.extend(
                history
                    .claims
                    .iter()
                    .filter(|c| !std::ptr::eq(*c, claim))
                    .filter(|c| c.names.iter().any(|(n, _)| n == name))
                    .map(|c| match c.answer {
                        Answer::None { .. } | Answer::Status { status: 503, .. } => {
                            (c.sent, c.answered + LEAVE)
                        }
                        _ => (c.sent, c.answered),
                    }),
            );
        }
        let until = claim
            .answered
            .min(claim.sent + Duration::from_millis(claim.wait_ms));
        let waited = [(claim.sent + QUEUED_AFTER, until)];
        let free = subtract(&waited, &union(busy));
        let total: Duration = free
            .iter()
            .map(|(from, to)| to.duration_since(*from).unwrap_or_default())
            .sum();
        if total > CLAIM_FREE {
            verdict.flag(
                Rule::ClaimWaited,
                format!(
                    "{}: refused after every name was free {} ms in all, away from faults ({} .. {})",
                    what(),
                    total.as_millis(),
                    when(free[0].0),
                    when(free[free.len() - 1].1)
                ),
            );
        }
    }
}

/// Each holder of a claim that runs as `baton run` does, against the
/// force-releases of its names: once one was answered 204 while it held the
/// claim, it must have stopped within [`RUN_ON_LIMIT`], unless a fault
/// (of an instance, of Redis) overlaps the time in between.
fn claim_runs(history: &History, explained: &[(SystemTime, SystemTime)], verdict: &mut Verdict) {
    for run in &history.claim_runs {
        let forced = history
            .calls
            .iter()
            .filter(|c| c.op == Op::ForceRelease && run.names.contains(&c.name))
            .filter(|c| matches!(c.answer, Answer::Status { status: 204, .. }))
            .filter(|c| c.answered > run.granted && c.sent < run.stopped)
            .min_by_key(|c| c.answered);
        let Some(forced) = forced else {
            continue;
        };
        let faulted = explained
            .iter()
            .any(|e| overlaps(*e, (forced.sent, run.stopped)));
        let ran_on = run
            .stopped
            .duration_since(forced.answered)
            .unwrap_or_default();
        if ran_on > RUN_ON_LIMIT && !faulted {
            verdict.flag(
                Rule::ClaimRanOn,
                format!(
                    "the holder of the claim of {} (client {}, 201 {}) ran on {} ms after {} was force-released ({}); it heard of a loss {}",
                    run.names.join(", "),
                    run.client,
                    when(run.granted),
                    ran_on.as_millis(),
                    forced.name,
                    when(forced.answered),
                    run.lost_heard
                        .map_or_else(|| "never".to_owned(), |at| format!("at {}", when(at)))
                ),
            );
        }
    }
}

/// When `name` may have been frozen: from each freeze's `POST` until
/// [`SETTLE`] after it surely ended (deleted, or its `until`).
fn frozen_windows(history: &History, name: &str) -> Vec<(SystemTime, SystemTime)> {
    history
        .freezes
        .iter()
        .filter(|f| f.name == name)
        .map(|f| {
            let end = f
                .closed
                .map_or(f.until, |(_, answered)| answered.min(f.until));
            (f.opened.0, end + FREEZE_SLACK + SETTLE)
        })
        .collect()
}

/// No grant of a frozen name inside its freeze's window (see the module
/// doc); the 423s answered.
fn frozen(history: &History, explained: &[(SystemTime, SystemTime)], verdict: &mut Verdict) {
    for call in &history.calls {
        if let (Op::Acquire(_), Answer::Status { status: 423, .. }) = (&call.op, &call.answer) {
            let span = (call.sent, call.answered + Duration::from_millis(1));
            let during = explained.iter().any(|e| overlaps(*e, span));
            verdict.took(Path::Frozen, during);
        }
    }
    let data_lost: Vec<(SystemTime, SystemTime)> = history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::RedisRestart { data_lost: true })
        .map(|f| (f.from, f.to))
        .collect();
    for freeze in history.freezes.iter().filter(|f| f.made) {
        let from = freeze.opened.1 + FREEZE_SLACK;
        let to = freeze
            .closed
            .map_or(freeze.until, |(sent, _)| sent.min(freeze.until));
        for call in &history.calls {
            let (Op::Acquire(acquire), Answer::Lease { token, .. }) = (&call.op, &call.answer)
            else {
                continue;
            };
            if call.name != freeze.name {
                continue;
            }
            // Granted at most a moment before its 201 arrived, unless a
            // fault held the 201 up.
            let granted_after = call.answered
                - FREEZE_SLACK.min(call.answered.duration_since(call.sent).unwrap_or_default());
            let earliest =
                earliest_grant(history, call, acquire.ask, granted_after, &verdict.holds);
            let inside = earliest > from && call.answered < to;
            // A fault of Redis (a call queued in a stalled Redis runs when it
            // wakes, with the window its instance knew when it sent it) or a
            // restart of its instance; a pause only as `earliest_grant` says.
            let excused = history.faults.iter().any(|f| {
                (f.target == Target::Redis
                    || (f.target == Target::Instance(call.instance)
                        && f.kind != FaultKind::InstancePause))
                    && f.from <= call.answered + FREEZE_SLACK
                    && granted_after <= f.to
            }) || data_lost
                .iter()
                .any(|l| overlaps(*l, (freeze.opened.0, call.answered)));
            if inside && !excused {
                verdict.flag(
                    Rule::Frozen,
                    format!(
                        "{}: token {token} granted via instance {} (sent {}, 201 {}) inside the freeze made {} and deleted {:?}",
                        call.name,
                        call.instance,
                        when(call.sent),
                        when(call.answered),
                        when(freeze.opened.1),
                        freeze.closed.map(|(sent, _)| when(sent).to_string())
                    ),
                );
            }
        }
    }
}

/// The earliest moment the lease `call` was told of may have been granted:
/// `granted_after` (a moment before its 201), or, when a pause of its
/// instance may have held the 201 up (it came within [`FREEZE_SLACK`] of the
/// resume), a moment before the pause, but never before the request was
/// sent, nor while a hold that leaves it no room was still held as told.
/// (A pause does not excuse a grant that cannot have come before it.)
fn earliest_grant(
    history: &History,
    call: &Call,
    ask: Ask,
    granted_after: SystemTime,
    holds: &[Hold],
) -> SystemTime {
    let mut earliest = granted_after;
    for f in &history.faults {
        if f.target == Target::Instance(call.instance)
            && f.kind == FaultKind::InstancePause
            && f.from < call.answered
            && call.answered <= f.to + FREEZE_SLACK
        {
            let before = f.from.checked_sub(FREEZE_SLACK).unwrap_or(f.from);
            earliest = earliest.min(before.max(call.sent));
        }
    }
    let token = call_token(call);
    loop {
        let busy = holds.iter().find(|h| {
            h.name == call.name
                && Some(h.token) != token
                && h.ask.weight() + ask.weight() > ask.capacity()
                && h.held_at(earliest)
        });
        match busy {
            Some(h) if h.told_until < call.answered => earliest = h.told_until,
            _ => return earliest,
        }
    }
}

/// Redis without persistence must have lost its data at least once; with
/// persistence, never.
fn data_loss(history: &History, verdict: &mut Verdict) {
    let lost = history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::RedisRestart { data_lost: true })
        .count();
    match history.persistent {
        Some(false) if lost == 0 => verdict.flag(
            Rule::DataLoss,
            "Redis without persistence never lost its data: the run proves nothing about a restart"
                .into(),
        ),
        Some(true) if lost > 0 => verdict.flag(
            Rule::DataLoss,
            format!("Redis with persistence lost its data {lost} times"),
        ),
        _ => {}
    }
}

/// What the clients saw of `name` around `from` .. `to`: the faults, the
/// holds and the acquisitions that touched it, each time in milliseconds
/// from `from`.
fn timeline(
    history: &History,
    holds: &[Hold],
    name: &str,
    from: SystemTime,
    to: SystemTime,
) -> String {
    let margin = Duration::from_secs(3);
    let (lo, hi) = (from - margin, to + margin);
    let ms = |t: SystemTime| match t.duration_since(from) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    };
    let mut rows: Vec<(SystemTime, String)> = Vec::new();
    for f in history.faults.iter().filter(|f| f.to >= lo && f.from <= hi) {
        rows.push((
            f.from,
            format!(
                "fault {:?} {}: {} .. {}",
                f.target,
                f.kind,
                ms(f.from),
                ms(f.to)
            ),
        ));
    }
    for h in holds
        .iter()
        .filter(|h| h.may_until >= lo && h.requested <= hi)
    {
        rows.push((
            h.start,
            format!(
                "hold token {} {}: sent {}, 201 {}, told until {}, may until {}",
                h.token,
                h.ask,
                ms(h.requested),
                ms(h.start),
                ms(h.told_until),
                ms(h.may_until)
            ),
        ));
    }
    for c in history
        .calls
        .iter()
        .filter(|c| c.name == name && c.answered >= lo && c.sent <= hi)
    {
        rows.push((
            c.sent,
            format!(
                "{:?} via instance {}: sent {}, answered {} {}",
                c.op,
                c.instance,
                ms(c.sent),
                ms(c.answered),
                c.answer
            ),
        ));
    }
    rows.sort_by_key(|(t, _)| *t);
    let mut out = format!("{name} from {} (= 0 ms) to {}:", when(from), when(to));
    for (_, row) in rows {
        out.push_str("\n    ");
        out.push_str(&row);
    }
    out
}
