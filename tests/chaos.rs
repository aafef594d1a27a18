//! Chaos test of what a 201 promises: two baton processes on one Redis,
//! clients contending for a few locks (each acquisition shared or exclusive
//! at random) and a semaphore (each asking 1 to `limit` permits at random)
//! through both, while
//! the test kills (SIGKILL), stops (SIGTERM) and pauses (SIGSTOP, 1-6 s)
//! the baton processes, stalls Redis (DEBUG SLEEP, 1-4 s), and kills and
//! restarts Redis. The checker records every 201 with the time it arrived
//! and its `expires_at`, and every release, and asserts:
//!
//! - capacity, not leases: a lock was held as told either by one exclusive
//!   lease alone or by shared leases only, and a semaphore's leases held at
//!   once as told never took more than `limit` permits, ignoring the last
//!   200 ms before an `expires_at`; every 201 said it granted what was asked;
//! - every token granted once, and above the tokens of every hold (of either
//!   mode) whose 201 had arrived before it was asked for;
//! - no waiter stayed queued more than 2 s while the head of its name's line
//!   had room, away from faults (its instance running, Redis answering);
//! - every request that got no answer was sent to an instance the test was
//!   faulting, and every process the test did not kill is alive at each
//!   fault and at the end.
//!
//! `CHAOS_SECONDS` sets how long the main run lasts (default 40; the run
//! without persistence lasts half as long), `CHAOS_SEED` replays a run.

#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;
#[path = "support/chaos.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use helpers::RedisServer;
use serde_json::json;
use support::{
    check_holds, client_loop, holds_by_name, unexplained_failures, usage, when, Ask, Asks, Fault,
    Hold, Instance, Record, Rng, Target, Wait, Workload, LOCK_CAPACITY,
};
use tokio::sync::watch;

const LOCKS: [&str; 3] = ["deploy-a", "deploy-b", "deploy-c"];
const SEMAPHORE: &str = "workers";
/// One limit for every acquisition of the semaphore; each asks 1 to
/// `LIMIT` permits.
const LIMIT: u32 = 3;
const LOCK_CLIENTS: usize = 9;
const SEMAPHORE_CLIENTS: usize = 5;
/// Longer than any hold, so that a lease lost mid-hold is overlapped by the
/// next holder while its first holder still holds it as told; and longer
/// than an unconfirmed grant lives (3 s), so a grant answered before it was
/// confirmed can lapse under its holder.
const TTL_MS: u64 = 6000;
/// Most clients hold a lease up to 1.5 s; one client of each name holds it
/// up to 5 s, past the 3 s an unconfirmed grant lives.
const HOLD_UP_TO: Duration = Duration::from_millis(1500);
const LONG_HOLD_UP_TO: Duration = Duration::from_millis(5000);
const LOCK_WAIT_MS: u64 = 8000;
const SEMAPHORE_WAIT_MS: u64 = 3000;
/// A name with room this long, while a waiter was queued, is a stuck line.
const STUCK: Duration = Duration::from_secs(2);
/// How long after a fault the line may still be settling: an unconfirmed
/// grant lapses, a dead instance's lease expires (one ttl), a resumed
/// instance's waiters rejoin.
const SETTLE: Duration = Duration::from_millis(TTL_MS + 1500);

fn capacity(name: &str) -> u64 {
    if name == SEMAPHORE {
        u64::from(LIMIT)
    } else {
        LOCK_CAPACITY
    }
}

fn workloads() -> Vec<Workload> {
    let hold = |id: usize| {
        if id < LOCKS.len() || id == LOCK_CLIENTS {
            LONG_HOLD_UP_TO
        } else {
            HOLD_UP_TO
        }
    };
    let lock = |name: &str, id: usize| Workload {
        path: format!("locks/{name}"),
        body: json!({"ttl_ms": TTL_MS, "wait_ms": LOCK_WAIT_MS, "owner": format!("client-{id}")}),
        asks: Asks::SharedOrExclusive,
        hold_up_to: hold(id),
        timeout: Duration::from_millis(LOCK_WAIT_MS) + Duration::from_secs(10),
    };
    let semaphore = |id: usize| Workload {
        path: format!("semaphores/{SEMAPHORE}"),
        body: json!({"ttl_ms": TTL_MS, "wait_ms": SEMAPHORE_WAIT_MS, "owner": format!("client-{id}")}),
        asks: Asks::Permits { limit: LIMIT },
        hold_up_to: hold(id),
        timeout: Duration::from_millis(SEMAPHORE_WAIT_MS) + Duration::from_secs(10),
    };
    (0..LOCK_CLIENTS)
        .map(|id| lock(LOCKS[id % LOCKS.len()], id))
        .chain((0..SEMAPHORE_CLIENTS).map(|i| semaphore(LOCK_CLIENTS + i)))
        .collect()
}

/// The stretches of time away from every fault (and its settling), from
/// `start` to `end`.
fn quiet(faults: &[Fault], start: SystemTime, end: SystemTime) -> Vec<(SystemTime, SystemTime)> {
    let mut busy: Vec<(SystemTime, SystemTime)> =
        faults.iter().map(|f| (f.from, f.to + SETTLE)).collect();
    busy.sort();
    let mut quiet = Vec::new();
    let mut from = start;
    for (b0, b1) in busy {
        if b0 > from {
            quiet.push((from, b0.min(end)));
        }
        from = from.max(b1);
    }
    if end > from {
        quiet.push((from, end));
    }
    quiet
}

/// The stretches when the head of `name`'s line had room, whoever it was,
/// from `start` to `end`.
///
/// The line admits its head as soon as the capacity held plus the head's own
/// weight fits (for a lock: an exclusive head when nothing is held, a shared
/// head when no exclusive lease is). The clients cannot tell the order of the
/// line, but the head is one of the acquisitions then outstanding, so the
/// head surely fits when the weight held as told plus the largest weight
/// outstanding does. That never blames the line for a head that did not fit
/// (a large request at the head is not overtaken by smaller ones behind it,
/// a reader waits behind a queued writer), and a free name with anyone
/// waiting always counts as room.
fn room(
    holds: &[Hold],
    waits: &[Wait],
    capacity: u64,
    start: SystemTime,
    end: SystemTime,
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
    for h in holds.iter().filter(|h| h.told_until() > h.start) {
        changes.push((h.start, Change::HoldStarts(h.ask.weight())));
        changes.push((h.told_until(), Change::HoldEnds(h.ask.weight())));
    }
    for w in waits.iter().filter(|w| w.answered > w.requested) {
        changes.push((w.requested, Change::WaitStarts(w.ask.weight())));
        changes.push((w.answered, Change::WaitEnds(w.ask.weight())));
    }
    changes.sort();
    let mut used = 0u64;
    // The weights outstanding, each with how many ask it.
    let mut outstanding: BTreeMap<u64, usize> = BTreeMap::new();
    let mut stretches = Vec::new();
    let mut since = Some(start);
    let mut i = 0;
    while i < changes.len() {
        let at = changes[i].0;
        while i < changes.len() && changes[i].0 == at {
            match changes[i].1 {
                Change::HoldStarts(w) => used += w,
                Change::HoldEnds(w) => used -= w,
                Change::WaitStarts(w) => *outstanding.entry(w).or_default() += 1,
                Change::WaitEnds(w) => {
                    let n = outstanding.get_mut(&w).expect("a wait that started");
                    *n -= 1;
                    if *n == 0 {
                        outstanding.remove(&w);
                    }
                }
            }
            i += 1;
        }
        let largest = outstanding.keys().next_back().copied().unwrap_or(0);
        let has_room = used + largest <= capacity;
        match (since, has_room) {
            (Some(from), false) => {
                if at > from {
                    stretches.push((from, at));
                }
                since = None;
            }
            (None, true) => since = Some(at.max(start)),
            _ => {}
        }
    }
    if let Some(from) = since {
        if end > from {
            stretches.push((from, end));
        }
    }
    stretches
}

/// Waiters that stayed queued more than [`STUCK`] while the head of
/// `name`'s line had room (see [`room`]), away from faults; returns the
/// stretches of room they stayed queued in.
fn stuck_waiters(
    name: &str,
    holds: &[Hold],
    waits: &[Wait],
    quiet: &[(SystemTime, SystemTime)],
    violations: &mut Vec<String>,
) -> Vec<(SystemTime, SystemTime)> {
    let mut stretches = Vec::new();
    let Some(start) = waits.iter().map(|w| w.requested).min() else {
        return stretches;
    };
    let end = waits.iter().map(|w| w.answered).max().unwrap_or(start);
    for (r0, r1) in room(holds, waits, capacity(name), start, end) {
        for &(q0, q1) in quiet {
            let (from, to) = (r0.max(q0), r1.min(q1));
            // Each waiter queued (sent a moment before) in that stretch, and
            // still waiting more than STUCK of it.
            let stuck = waits.iter().find(|w| {
                let queued = from.max(w.requested + Duration::from_millis(100));
                let until = to.min(w.answered);
                w.name == name && until.duration_since(queued).unwrap_or_default() > STUCK
            });
            if let Some(w) = stuck {
                violations.push(format!(
                    "{name}: had room from {} to {} while a waiter for {} on instance {} (sent {}, answered {}) stayed queued",
                    when(from),
                    when(to),
                    w.ask,
                    w.instance,
                    when(w.requested),
                    when(w.answered)
                ));
                stretches.push((from, to));
            }
        }
    }
    stretches
}

/// What the clients saw of `name` around `from` .. `to`: the faults, the
/// holds and the acquisitions that touched it, each time in milliseconds
/// from `from`.
fn timeline(
    record: &Record,
    faults: &[Fault],
    name: &str,
    from: SystemTime,
    to: SystemTime,
) -> String {
    let margin = SETTLE + Duration::from_secs(3);
    let (lo, hi) = (from - margin, to + margin);
    let ms = |t: SystemTime| match t.duration_since(from) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    };
    let mut rows: Vec<(SystemTime, String)> = Vec::new();
    for f in faults.iter().filter(|f| f.to >= lo && f.from <= hi) {
        rows.push((
            f.from,
            format!(
                "fault {:?} {}: {} .. {}",
                f.target,
                f.what,
                ms(f.from),
                ms(f.to)
            ),
        ));
    }
    for h in record
        .holds
        .iter()
        .filter(|h| h.name == name && h.told_until() >= lo && h.requested <= hi)
    {
        rows.push((
            h.start,
            format!(
                "hold token {} {}: sent {}, 201 {}, released {}, expires {}",
                h.token,
                h.ask,
                ms(h.requested),
                ms(h.start),
                ms(h.end),
                ms(h.expires)
            ),
        ));
    }
    for w in record
        .waits
        .iter()
        .chain(&record.failures)
        .filter(|w| w.name == name && w.answered >= lo && w.requested <= hi)
    {
        rows.push((
            w.requested,
            format!(
                "acquire {} via instance {}: sent {}, answered {} {}",
                w.ask,
                w.instance,
                ms(w.requested),
                ms(w.answered),
                w.outcome
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

/// Every check of a run.
fn check(record: &mut Record, faults: &[Fault], started: SystemTime, ended: SystemTime) {
    let quiet = quiet(faults, started, ended);
    let by_name = holds_by_name(&record.holds);
    let mut violations = Vec::new();
    for (name, holds) in &by_name {
        check_holds(name, holds, capacity(name), &mut violations);
    }
    for name in LOCKS.iter().chain([&SEMAPHORE]) {
        let holds = by_name.get(*name).map_or(&[][..], Vec::as_slice);
        let waits: Vec<Wait> = record
            .waits
            .iter()
            .filter(|w| w.name == *name)
            .cloned()
            .collect();
        for (from, to) in stuck_waiters(name, holds, &waits, &quiet, &mut violations) {
            let timeline = timeline(record, faults, name, from, to);
            record.evidence.push(timeline);
        }
    }
    unexplained_failures(record, faults, &mut violations);
    record.violations.extend(violations);
}

/// Whether a fault kind may run in this run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Persistence {
    /// Redis fsyncs every write: its restarts lose nothing.
    Always,
    /// Redis keeps nothing: a restart loses every lease and the fence.
    None,
}

/// One run: clients against two batons on one Redis while faults are
/// injected for `length`; returns the record, the faults and the seed.
async fn run(length: Duration, persistence: Persistence) -> (Record, Vec<Fault>, u64) {
    let seed = Rng::seed();
    println!("chaos seed: {seed} (CHAOS_SEED={seed} replays the schedule)");
    let mut rng = Rng::new(seed);
    let mut redis = match persistence {
        Persistence::Always => RedisServer::start_persistent(),
        Persistence::None => RedisServer::start(),
    };
    let prefix = helpers::unique_prefix();
    let url = redis.url();
    let env = [
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
    ];
    let mut instances = [Instance::start(&env), Instance::start(&env)];
    let bases: Vec<String> = instances.iter().map(Instance::base).collect();
    let record = Arc::new(Mutex::new(Record::default()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let clients: Vec<_> = workloads()
        .into_iter()
        .enumerate()
        .map(|(id, work)| {
            tokio::spawn(client_loop(
                id,
                work,
                bases.clone(),
                record.clone(),
                stop_rx.clone(),
                seed,
            ))
        })
        .collect();

    let mut faults: Vec<Fault> = Vec::new();
    let started = Instant::now();
    let alive = |instances: &mut [Instance; 2], redis: &RedisServer, when: &str| {
        for (i, instance) in instances.iter_mut().enumerate() {
            assert!(instance.alive(), "baton instance {i} died unasked ({when})");
        }
        let pong: String = redis::cmd("PING")
            .query(&mut redis.conn())
            .unwrap_or_else(|e| panic!("redis died unasked ({when}): {e}"));
        assert_eq!(pong, "PONG");
    };
    while started.elapsed() < length {
        tokio::time::sleep(rng.ms(1500, 9000)).await;
        alive(&mut instances, &redis, "before a fault");
        let from = SystemTime::now();
        let victim = (rng.next() % 2) as usize;
        let (target, what) = match rng.next() % 5 {
            0 => {
                tokio::task::block_in_place(|| redis.kill());
                tokio::time::sleep(Duration::from_millis(700)).await;
                tokio::task::block_in_place(|| redis.restart());
                (Target::Redis, "redis killed and restarted")
            }
            1 => {
                let stall = rng.ms(1000, 4000).as_secs_f64();
                let mut conn = redis.conn();
                tokio::task::spawn_blocking(move || {
                    redis::cmd("DEBUG")
                        .arg("SLEEP")
                        .arg(stall)
                        .query::<()>(&mut conn)
                })
                .await
                .expect("stall")
                .expect("DEBUG SLEEP");
                (Target::Redis, "redis stalled (DEBUG SLEEP 1-4 s)")
            }
            2 => {
                let instance = &mut instances[victim];
                tokio::task::block_in_place(|| instance.kill());
                tokio::time::sleep(Duration::from_millis(500)).await;
                tokio::task::block_in_place(|| instance.launch());
                (
                    Target::Instance(victim),
                    "baton killed (SIGKILL) and restarted",
                )
            }
            3 => {
                let instance = &mut instances[victim];
                let status = tokio::task::block_in_place(|| instance.terminate());
                assert!(
                    status.is_some_and(|s| s.success()),
                    "SIGTERM exit status {status:?}"
                );
                tokio::task::block_in_place(|| instance.launch());
                (
                    Target::Instance(victim),
                    "baton stopped (SIGTERM, exit 0) and restarted",
                )
            }
            _ => {
                instances[victim].pause();
                tokio::time::sleep(rng.ms(1000, 6000)).await;
                instances[victim].resume();
                (
                    Target::Instance(victim),
                    "baton paused (SIGSTOP 1-6 s, SIGCONT)",
                )
            }
        };
        faults.push(Fault {
            target,
            what,
            from,
            to: SystemTime::now(),
        });
    }
    // Settle, so the last fault's waiters are judged too.
    tokio::time::sleep(SETTLE).await;
    alive(&mut instances, &redis, "at the end");
    stop_tx.send(true).unwrap();
    for client in clients {
        tokio::time::timeout(Duration::from_secs(40), client)
            .await
            .expect("every client stops")
            .expect("client task");
    }
    alive(&mut instances, &redis, "after the clients stopped");
    let record = std::mem::take(&mut *record.lock().unwrap());
    (record, faults, seed)
}

fn report(label: &str, record: &Record, faults: &[Fault]) {
    println!(
        "chaos ({label}): {} lock clients on {} locks (shared or exclusive at random), {} semaphore clients (1 to {LIMIT} permits of {LIMIT})",
        LOCK_CLIENTS,
        LOCKS.len(),
        SEMAPHORE_CLIENTS
    );
    println!("grants (201s) checked: {}", record.holds.len());
    println!("acquisitions answered: {}", record.waits.len());
    // How much the modes met: the most readers of one lock at once, and the
    // most permits of the semaphore in use at once (as told).
    for (name, holds) in holds_by_name(&record.holds) {
        let usage = usage(&holds).into_iter().map(|(_, used)| used);
        if name == SEMAPHORE {
            let peak = usage.max().unwrap_or(0);
            println!("{name}: at most {peak} of {LIMIT} permits held at once");
        } else {
            let readers = usage
                .filter(|used| *used < LOCK_CAPACITY as i64)
                .max()
                .unwrap_or(0);
            println!("{name}: at most {readers} shared leases held at once");
        }
    }
    let mut by_kind: BTreeMap<&str, u32> = BTreeMap::new();
    for fault in faults {
        *by_kind.entry(fault.what).or_default() += 1;
    }
    println!("faults injected: {}", faults.len());
    for (fault, n) in &by_kind {
        println!("fault: {fault}: {n}");
    }
    for (outcome, n) in &record.outcomes {
        println!("outcome: {outcome}: {n}");
    }
    println!("violations: {}", record.violations.len());
    for v in record.violations.iter().take(20) {
        println!("  {v}");
    }
    for e in record.evidence.iter().take(5) {
        println!("  {e}");
    }
}

fn length() -> Duration {
    Duration::from_secs(
        std::env::var("CHAOS_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(40),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_two_clients_are_told_they_hold_a_lock_through_pauses_stalls_and_crashes() {
    let started = SystemTime::now();
    let (mut record, faults, seed) = run(length(), Persistence::Always).await;
    check(&mut record, &faults, started, SystemTime::now());
    report("persistent Redis", &record, &faults);
    assert!(
        record.violations.is_empty(),
        "{} violations (seed {seed})",
        record.violations.len()
    );
    assert!(record.holds.len() > 100, "too few holds to mean anything");
    assert!(faults.len() >= 5, "too few faults injected");
}

/// Without persistence a Redis restart loses every lease: nothing is
/// promised about a hold across it, so holds are cut at each restart; tokens
/// must still rise (they are floored by Redis's clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_still_rise_when_redis_loses_everything() {
    let started = SystemTime::now();
    let (mut record, faults, seed) = run(length() / 2, Persistence::None).await;
    let restarts: Vec<SystemTime> = faults
        .iter()
        .filter(|f| f.what.starts_with("redis killed"))
        .map(|f| f.from)
        .collect();
    for hold in &mut record.holds {
        if let Some(lost) = restarts
            .iter()
            .find(|r| **r >= hold.start && **r < hold.told_until())
        {
            hold.end = *lost;
        }
    }
    check(&mut record, &faults, started, SystemTime::now());
    report("Redis without persistence", &record, &faults);
    assert!(
        record.violations.is_empty(),
        "{} violations (seed {seed})",
        record.violations.len()
    );
    assert!(record.holds.len() > 50, "too few holds to mean anything");
}

/// A time in the checker's tests: `ms` after the epoch.
#[cfg(test)]
fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// A hold of `ask` in the checker's tests, told from `start` to `end`.
#[cfg(test)]
fn hold_of(name: &str, ask: Ask, token: u64, requested: u64, start: u64, end: u64) -> Hold {
    Hold {
        name: name.into(),
        token,
        ask,
        requested: at(requested),
        start: at(start),
        end: at(end),
        expires: at(end + 60_000),
    }
}

/// An acquisition of `ask` in the checker's tests, outstanding from
/// `requested` to `answered`.
#[cfg(test)]
fn wait_of(name: &str, ask: Ask, requested: u64, answered: u64) -> Wait {
    Wait {
        name: name.into(),
        ask,
        instance: 0,
        requested: at(requested),
        answered: at(answered),
        outcome: "201".into(),
    }
}

/// The violations [`check`] finds in these holds, waits and faults.
#[cfg(test)]
fn checked(holds: Vec<Hold>, waits: Vec<Wait>, faults: Vec<Fault>) -> Vec<String> {
    let mut record = Record {
        holds,
        waits,
        ..Record::default()
    };
    check(&mut record, &faults, at(0), at(60_000));
    record.violations
}

/// One permit of the semaphore.
#[cfg(test)]
const ONE_PERMIT: Ask = Ask::Permits {
    permits: 1,
    limit: LIMIT,
};

#[test]
fn the_checker_catches_overlaps_excess_holders_backward_tokens_and_stuck_lines() {
    // Exclusive leases of the locks, one permit of the semaphore.
    let ask = |name: &str| {
        if name == SEMAPHORE {
            ONE_PERMIT
        } else {
            Ask::EXCLUSIVE
        }
    };
    let hold = |name: &str, token, requested, start, end| {
        hold_of(name, ask(name), token, requested, start, end)
    };
    let fine = checked(
        vec![
            hold("deploy-a", 1, 0, 10, 20),
            hold("deploy-a", 2, 5, 20, 30),
            hold(SEMAPHORE, 5, 0, 0, 50),
            hold(SEMAPHORE, 6, 0, 10, 60),
        ],
        vec![],
        vec![],
    );
    assert!(fine.is_empty(), "{fine:?}");

    let overlap = checked(
        vec![
            hold("deploy-a", 1, 0, 10, 20),
            hold("deploy-a", 2, 0, 15, 30),
        ],
        vec![],
        vec![],
    );
    assert_eq!(overlap.len(), 1, "{overlap:?}");

    // A lease held as told until its expiry, less the grace.
    let mut expired = hold("deploy-a", 1, 0, 10, 5000);
    expired.expires = at(5000);
    let after_expiry = checked(
        vec![expired.clone(), hold("deploy-a", 2, 0, 4850, 6000)],
        vec![],
        vec![],
    );
    assert!(after_expiry.is_empty(), "{after_expiry:?}");
    let before_expiry = checked(
        vec![expired, hold("deploy-a", 2, 0, 4700, 6000)],
        vec![],
        vec![],
    );
    assert_eq!(before_expiry.len(), 1, "{before_expiry:?}");

    let crowded = checked(
        (0..=u64::from(LIMIT))
            .map(|i| hold(SEMAPHORE, 10 + i, 0, 10, 20))
            .collect(),
        vec![],
        vec![],
    );
    assert!(!crowded.is_empty());

    let backwards = checked(
        vec![
            hold("deploy-b", 9, 0, 10, 20),
            hold("deploy-b", 3, 25, 30, 40),
        ],
        vec![],
        vec![],
    );
    assert_eq!(backwards.len(), 1, "{backwards:?}");

    let wait = |name: &str, requested, answered| wait_of(name, ask(name), requested, answered);
    let stuck = checked(
        vec![
            hold("deploy-c", 1, 0, 0, 1000),
            hold("deploy-c", 2, 500, 7000, 8000),
        ],
        vec![wait("deploy-c", 500, 8000)],
        vec![],
    );
    assert_eq!(stuck.len(), 1, "{stuck:?}");
    // With the timeline of the name around it.
    let mut record = Record {
        holds: vec![
            hold("deploy-c", 1, 0, 0, 1000),
            hold("deploy-c", 2, 500, 7000, 8000),
        ],
        waits: vec![wait("deploy-c", 500, 8000)],
        ..Record::default()
    };
    check(&mut record, &[], at(0), at(60_000));
    assert_eq!(record.evidence.len(), 1, "{:?}", record.evidence);
    assert!(
        record.evidence[0].contains("hold token 2 exclusive: sent -500, 201 6000"),
        "{}",
        record.evidence[0]
    );
    // The same, but the free time fell in a fault: not judged.
    let faulted = checked(
        vec![
            hold("deploy-c", 1, 0, 0, 1000),
            hold("deploy-c", 2, 500, 7000, 8000),
        ],
        vec![wait("deploy-c", 500, 8000)],
        vec![Fault {
            target: Target::Instance(0),
            what: "paused",
            from: at(900),
            to: at(3000),
        }],
    );
    assert!(faulted.is_empty(), "{faulted:?}");
    // A semaphore with room (one of two held) and a waiter left queued.
    let semaphore_stuck = checked(
        vec![
            hold(SEMAPHORE, 1, 0, 0, 9000),
            hold(SEMAPHORE, 2, 500, 7000, 8000),
        ],
        vec![wait(SEMAPHORE, 500, 7000)],
        vec![],
    );
    assert_eq!(semaphore_stuck.len(), 1, "{semaphore_stuck:?}");

    let served = checked(
        vec![
            hold("deploy-c", 1, 0, 0, 1000),
            hold("deploy-c", 2, 500, 1010, 2000),
            hold("deploy-c", 3, 9000, 9000, 9500),
        ],
        vec![wait("deploy-c", 500, 1010)],
        vec![],
    );
    assert!(served.is_empty(), "{served:?}");

    // A request with no answer outside every fault.
    let mut record = Record {
        failures: vec![wait("deploy-a", 100, 200)],
        ..Record::default()
    };
    check(&mut record, &[], at(0), at(60_000));
    assert_eq!(record.violations.len(), 1, "{:?}", record.violations);
}

#[test]
fn the_checker_counts_capacity_not_leases() {
    let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
    let permits = |permits| Ask::Permits {
        permits,
        limit: LIMIT,
    };
    let lock = "deploy-a";

    // Readers together, a writer alone before and after them, the semaphore
    // full to its limit but not past it: all fine.
    let fine = checked(
        vec![
            hold_of(lock, exclusive, 1, 0, 0, 100),
            hold_of(lock, shared, 2, 50, 100, 300),
            hold_of(lock, shared, 3, 60, 150, 250),
            hold_of(lock, shared, 4, 60, 160, 400),
            hold_of(lock, exclusive, 5, 70, 400, 500),
            hold_of(SEMAPHORE, permits(LIMIT - 1), 1, 0, 0, 100),
            hold_of(SEMAPHORE, ONE_PERMIT, 2, 0, 10, 200),
            hold_of(SEMAPHORE, permits(LIMIT), 3, 0, 200, 300),
        ],
        vec![],
        vec![],
    );
    assert!(fine.is_empty(), "{fine:?}");

    // A writer beside a reader, in either order.
    for (first, second) in [(exclusive, shared), (shared, exclusive)] {
        let overlap = checked(
            vec![
                hold_of(lock, first, 1, 0, 10, 200),
                hold_of(lock, second, 2, 0, 100, 300),
            ],
            vec![],
            vec![],
        );
        assert_eq!(overlap.len(), 1, "{overlap:?}");
        assert!(overlap[0].contains("2 leases held"), "{overlap:?}");
    }
    // A writer beside several readers: one violation as each comes in.
    let beside_readers = checked(
        vec![
            hold_of(lock, shared, 1, 0, 10, 200),
            hold_of(lock, shared, 2, 0, 20, 200),
            hold_of(lock, exclusive, 3, 0, 100, 300),
        ],
        vec![],
        vec![],
    );
    assert_eq!(beside_readers.len(), 1, "{beside_readers:?}");

    // Permits past the limit, with fewer leases than the limit.
    let over = checked(
        vec![
            hold_of(SEMAPHORE, permits(LIMIT - 1), 1, 0, 10, 200),
            hold_of(SEMAPHORE, permits(2), 2, 0, 100, 300),
        ],
        vec![],
        vec![],
    );
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(
        over[0].contains(&format!("{} of {LIMIT} held", LIMIT + 1)),
        "{over:?}"
    );

    // Tokens rise across modes: a writer asked for after a reader was told
    // must carry a larger token; readers granted together need not be in
    // the order their 201s arrived.
    let backwards = checked(
        vec![
            hold_of(lock, shared, 9, 0, 10, 20),
            hold_of(lock, exclusive, 8, 15, 30, 40),
        ],
        vec![],
        vec![],
    );
    assert_eq!(backwards.len(), 1, "{backwards:?}");
    let together = checked(
        vec![
            hold_of(lock, shared, 7, 0, 11, 20),
            hold_of(lock, shared, 6, 0, 12, 20),
        ],
        vec![],
        vec![],
    );
    assert!(together.is_empty(), "{together:?}");

    // The line: a waiter is only blamed when the head of the line surely
    // fits, whoever the head is.
    let stuck = |holds: Vec<Hold>, waits: Vec<Wait>| checked(holds, waits, vec![]);
    let reader = hold_of(lock, shared, 1, 0, 0, 9000);
    // A writer waits for a reader: right.
    let writer_waits = stuck(
        vec![reader.clone()],
        vec![wait_of(lock, exclusive, 500, 8000)],
    );
    assert!(writer_waits.is_empty(), "{writer_waits:?}");
    // A reader behind a queued writer waits too: right.
    let behind_writer = stuck(
        vec![reader.clone()],
        vec![
            wait_of(lock, exclusive, 400, 9000),
            wait_of(lock, shared, 500, 8000),
        ],
    );
    assert!(behind_writer.is_empty(), "{behind_writer:?}");
    // A reader kept out while only readers hold: stuck.
    let reader_kept_out = stuck(vec![reader], vec![wait_of(lock, shared, 500, 8000)]);
    assert_eq!(reader_kept_out.len(), 1, "{reader_kept_out:?}");
    // Two writers queued on a free lock: the head is stuck, whichever it is.
    let free_lock = stuck(
        vec![hold_of(lock, exclusive, 1, 0, 0, 100)],
        vec![
            wait_of(lock, exclusive, 50, 8000),
            wait_of(lock, exclusive, 60, 8100),
        ],
    );
    assert_eq!(free_lock.len(), 1, "{free_lock:?}");
    // One permit held of three: a request for all three waits, one for two
    // is stuck.
    let one_held = || hold_of(SEMAPHORE, ONE_PERMIT, 1, 0, 0, 9000);
    let all_wait = stuck(
        vec![one_held()],
        vec![wait_of(SEMAPHORE, permits(LIMIT), 500, 7000)],
    );
    assert!(all_wait.is_empty(), "{all_wait:?}");
    let two_stuck = stuck(
        vec![one_held()],
        vec![wait_of(SEMAPHORE, permits(LIMIT - 1), 500, 7000)],
    );
    assert_eq!(two_stuck.len(), 1, "{two_stuck:?}");
}
