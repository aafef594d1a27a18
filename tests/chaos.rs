//! Chaos test of what a 201 promises, judged over the whole run: two baton
//! processes on one Redis, clients taking every path (locks shared or
//! exclusive, a semaphore's permits, names used alone, refreshes that
//! shorten and extend, `newest_wins`, force-release, claims of several
//! names, a freeze opened and deleted) through both, while the
//! test kills (SIGKILL), stops (SIGTERM) and pauses (SIGSTOP, 1-6 s) the
//! baton processes, stalls Redis (DEBUG SLEEP, 1-4 s), and kills and
//! restarts Redis. Every call and its answer is recorded into a history,
//! and the checker (`support/checker.rs`, a pure function of the history)
//! judges it: its module doc lists each rule. The checker's own tests are
//! at the end of this file: each rule flags a synthetic history that breaks
//! it and passes the same history without the break.
//!
//! `CHAOS_SECONDS` sets how long the main run lasts (default 40; the run
//! without persistence lasts half as long), `CHAOS_SEED` replays a run.

#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;
#[allow(dead_code)] // the cluster run uses the rest
#[path = "support/chaos.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use helpers::RedisServer;
use support::checker::{judge, Path, Rules, Verdict};
use support::claims::{claim_loop, ClaimWork};
use support::freezes::freeze_once;
use support::history::{Answer, Ask, Fault, FaultKind, History, Target, TicketOp};
use support::tickets::{ticket_loop, PICKUP_MS};
use support::{
    client_loop, force_release_loop, redis_ahead_ms, Asks, Instance, Rng, Run, Workload,
};
use tokio::sync::watch;

const LOCKS: [&str; 3] = ["deploy-a", "deploy-b", "deploy-c"];
/// The lock an admin force-releases now and then.
const FORCED: &str = "deploy-c";
const SEMAPHORE: &str = "workers";
/// One limit for every acquisition of the semaphore; each asks 1 to
/// `LIMIT` permits.
const LIMIT: u32 = 3;
const LOCK_CLIENTS: usize = 9;
const SEMAPHORE_CLIENTS: usize = 5;
/// Names each used by one client alone: the fast path.
const ALONE: [(&str, Asks); 3] = [
    ("alone-a", Asks::SharedOrExclusive),
    ("alone-b", Asks::SharedOrExclusive),
    ("alone-s", Asks::Permits { limit: 2 }),
];
/// The lock of a deploy queue: every request asks `newest_wins`.
const QUEUE: &str = "queue";
const QUEUE_CLIENTS: usize = 3;
/// The lock of the ticket clients: every request keeps its place.
const TICKETS: &str = "tickets-a";
const TICKET_CLIENTS: usize = 4;
/// Longer than any hold, so that a lease lost mid-hold is overlapped by the
/// next holder while its first holder still holds it as told; and longer
/// than an unconfirmed grant lives (3 s), so a grant answered before it was
/// confirmed can lapse under its holder.
const TTL_MS: u64 = 6000;
/// Most clients hold a lease up to 1.5 s; one client of each name holds it
/// up to 5 s, past the 3 s an unconfirmed grant lives.
const HOLD_UP_TO: Duration = Duration::from_millis(1500);
const LONG_HOLD_UP_TO: Duration = Duration::from_millis(5000);
/// Lock requests wait 8 s or 20 s: long enough, after a pause that got an
/// instance's waiters pruned, to see them rejoin (or not) the line.
const LOCK_WAITS_MS: [u64; 2] = [8000, 20_000];
const SEMAPHORE_WAIT_MS: u64 = 3000;
/// The priorities of the lock requests: mostly 0, some 1 or 2, which go
/// ahead of the lower ones in line.
const PRIORITIES: [u8; 4] = [0, 0, 1, 2];
/// The names claims take two or three at a time (names of their own: a
/// claim's wait is judged by its own rule, not by its names' lines).
const CLAIM_LOCKS: [&str; 3] = ["claim-x", "claim-y", "claim-z"];
const CLAIM_SEMAPHORE: &str = "claim-pool";
const CLAIM_LIMIT: u32 = 2;
const CLAIM_CLIENTS: usize = 4;
/// Claims wait 1 s or 3 s: short enough that some are refused.
const CLAIM_WAITS_MS: [u64; 2] = [1000, 3000];

/// Half the claim clients hold their claims as `baton run` does (they
/// follow every lease's stream and stop at a loss), and they alone also
/// claim this lock, which an admin force-releases every few seconds.
const CLAIM_RUNNERS: usize = 2;
const CLAIM_FORCED: &str = "claim-w";
/// A lock of the claims frozen once in each run, a while after `FROZEN`.
const CLAIM_FROZEN: &str = "claim-y";

/// The lock frozen once in each run, and for how long.
const FROZEN: &str = "deploy-a";
const FREEZE_FOR: Duration = Duration::from_secs(3);

fn claim_work(runs: bool) -> ClaimWork {
    let mut names: Vec<(String, Ask)> = CLAIM_LOCKS
        .iter()
        .map(|name| ((*name).to_owned(), Ask::EXCLUSIVE))
        .collect();
    if runs {
        names.push((CLAIM_FORCED.to_owned(), Ask::EXCLUSIVE));
    }
    let pool = Ask::Permits {
        permits: CLAIM_LIMIT,
        limit: CLAIM_LIMIT,
    };
    names.push((CLAIM_SEMAPHORE.to_owned(), pool));
    ClaimWork {
        names,
        ttl_ms: TTL_MS,
        waits: CLAIM_WAITS_MS.to_vec(),
        hold_up_to: HOLD_UP_TO,
        runs,
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
    let lock = |id: usize| Workload {
        refreshes: true,
        // The holders of the lock force-released follow their leases.
        follows: LOCKS[id % LOCKS.len()] == FORCED,
        priorities: PRIORITIES.to_vec(),
        waits: LOCK_WAITS_MS.to_vec(),
        ..Workload::new(
            LOCKS[id % LOCKS.len()],
            Asks::SharedOrExclusive,
            TTL_MS,
            0,
            hold(id),
        )
    };
    let semaphore = |id: usize| Workload {
        refreshes: true,
        ..Workload::new(
            SEMAPHORE,
            Asks::Permits { limit: LIMIT },
            TTL_MS,
            SEMAPHORE_WAIT_MS,
            hold(id),
        )
    };
    let alone = |(name, asks): (&str, Asks)| Workload {
        waits: vec![0, 2000],
        refreshes: true,
        rest_up_to: Duration::from_millis(300),
        ..Workload::new(name, asks, TTL_MS, 0, Duration::from_millis(600))
    };
    let queue = || Workload {
        newest_wins: true,
        ..Workload::new(
            QUEUE,
            Asks::SharedOrExclusive,
            TTL_MS,
            4000,
            Duration::from_millis(800),
        )
    };
    (0..LOCK_CLIENTS)
        .map(lock)
        .chain((LOCK_CLIENTS..LOCK_CLIENTS + SEMAPHORE_CLIENTS).map(semaphore))
        .chain(ALONE.into_iter().map(alone))
        .chain((0..QUEUE_CLIENTS).map(|_| queue()))
        .collect()
}

/// Every path this run must take during a fault.
fn rules() -> Rules {
    Rules {
        required: vec![
            Path::Alone,
            Path::AfterWaiting,
            Path::Exclusive,
            Path::Shared,
            Path::Permits,
            Path::RefreshShorten,
            Path::RefreshExtend,
            Path::Release,
            Path::NewestWins,
            Path::ForceRelease,
            Path::Priority,
            Path::Followed,
            Path::Claim,
            Path::ClaimRefused,
        ],
        ..Rules::default()
    }
}

/// Whether a Redis restart keeps the data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Persistence {
    /// Redis fsyncs every write: its restarts lose nothing.
    Always,
    /// Redis keeps nothing: a restart loses every lease and the fence.
    None,
}

/// Kills and restarts Redis; whether a key written before was gone after.
async fn restart_redis(redis: &mut RedisServer, prefix: &str) -> bool {
    let marker = format!("{prefix}chaos-marker");
    redis::cmd("SET")
        .arg(&marker)
        .arg(1)
        .query::<()>(&mut redis.conn())
        .expect("marker written");
    tokio::task::block_in_place(|| redis.kill());
    tokio::time::sleep(Duration::from_millis(700)).await;
    tokio::task::block_in_place(|| redis.restart());
    let kept: bool = redis::cmd("EXISTS")
        .arg(&marker)
        .query(&mut redis.conn())
        .expect("marker read");
    !kept
}

/// One run: clients against two batons on one Redis while faults are
/// injected for `length`; returns the history and the seed.
async fn run(length: Duration, persistence: Persistence) -> (History, u64) {
    let seed = Rng::seed();
    println!("chaos seed: {seed} (CHAOS_SEED={seed} replays the schedule)");
    let mut rng = Rng::new(seed);
    let mut redis = match persistence {
        Persistence::Always => RedisServer::start_persistent(),
        Persistence::None => RedisServer::start(),
    };
    let prefix = helpers::unique_prefix();
    let url = redis.url();
    let pickup = PICKUP_MS.to_string();
    let env = [
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_PICKUP_MS", pickup.as_str()),
    ];
    let mut instances = [Instance::start(&env), Instance::start(&env)];
    let bases: Vec<String> = instances.iter().map(Instance::base).collect();
    support::warm_up(&bases).await;
    let mut history = History::new(SystemTime::now());
    history.persistent = Some(persistence == Persistence::Always);
    history.redis_ahead_ms = redis_ahead_ms(&mut redis.conn());
    let record = Arc::new(Mutex::new(history));
    let (stop_tx, stop_rx) = watch::channel(false);
    let works = workloads();
    let admin = works.len();
    let shared = Run::new(bases, record.clone(), stop_rx, seed);
    let mut clients: Vec<_> = works
        .into_iter()
        .enumerate()
        .map(|(id, work)| tokio::spawn(client_loop(id, work, shared.clone())))
        .collect();
    // One freeze of a busy lock, a third into the run, for 3 s.
    let freeze = freeze_once(FROZEN.to_owned(), length / 3, FREEZE_FOR, shared.clone());
    clients.push(tokio::spawn(freeze));
    // And one of a claims' lock, over claims waiting and not.
    let freeze = freeze_once(
        CLAIM_FROZEN.to_owned(),
        length / 2,
        FREEZE_FOR,
        shared.clone(),
    );
    clients.push(tokio::spawn(freeze));
    for id in admin + 1..=admin + CLAIM_CLIENTS {
        let runs = id - admin <= CLAIM_RUNNERS;
        clients.push(tokio::spawn(claim_loop(
            id,
            claim_work(runs),
            shared.clone(),
        )));
    }
    for id in 0..TICKET_CLIENTS {
        let id = admin + CLAIM_CLIENTS + 1 + id;
        let lock = TICKETS.to_owned();
        clients.push(tokio::spawn(ticket_loop(id, lock, shared.clone())));
    }
    let every = Duration::from_secs(3);
    let claims_admin = admin + CLAIM_CLIENTS + TICKET_CLIENTS + 1;
    let forcing = force_release_loop(
        claims_admin,
        CLAIM_FORCED.to_owned(),
        Duration::from_secs(4),
        shared.clone(),
    );
    clients.push(tokio::spawn(forcing));
    let admin = force_release_loop(admin, FORCED.to_owned(), every, shared);
    clients.push(tokio::spawn(admin));

    let mut faults: Vec<Fault> = Vec::new();
    let started = Instant::now();
    let alive = |instances: &mut [Instance; 2], redis: &RedisServer, when: &str| {
        for (i, instance) in instances.iter_mut().enumerate() {
            assert!(
                instance.alive(),
                "baton instance {i} died unasked ({when}); its last words:\n{}",
                instance.last_words()
            );
        }
        let pong: String = redis::cmd("PING")
            .query(&mut redis.conn())
            .unwrap_or_else(|e| panic!("redis died unasked ({when}): {e}"));
        assert_eq!(pong, "PONG");
    };
    let mut deck: Vec<u64> = Vec::new();
    let restarted = |faults: &[Fault]| {
        faults
            .iter()
            .any(|f| matches!(f.kind, FaultKind::RedisRestart { .. }))
    };
    // Without persistence, the run goes on until Redis was restarted (a
    // long pause and its quiet while can take it past its length first).
    while started.elapsed() < length || (persistence == Persistence::None && !restarted(&faults)) {
        tokio::time::sleep(rng.ms(1500, 6000)).await;
        alive(&mut instances, &redis, "before a fault");
        let from = SystemTime::now();
        let victim = (rng.next() % 2) as usize;
        // Without persistence, a restart (which loses the data) comes by
        // the middle of the run whatever the dice say.
        let must_restart = persistence == Persistence::None
            && !restarted(&faults)
            && started.elapsed() >= length / 2;
        // Every kind comes once in each five faults, in a random order.
        if deck.is_empty() {
            deck = (0..5).collect();
            for i in (1..deck.len()).rev() {
                deck.swap(i, (rng.next() % (i as u64 + 1)) as usize);
            }
        }
        let dice = if must_restart {
            0
        } else {
            deck.pop().unwrap_or(0)
        };
        let (target, kind) = match dice {
            0 => {
                let data_lost = restart_redis(&mut redis, &prefix).await;
                (Target::Redis, FaultKind::RedisRestart { data_lost })
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
                (Target::Redis, FaultKind::RedisStall)
            }
            2 => {
                let instance = &mut instances[victim];
                tokio::task::block_in_place(|| instance.kill());
                tokio::time::sleep(Duration::from_millis(500)).await;
                tokio::task::block_in_place(|| instance.launch());
                (Target::Instance(victim), FaultKind::InstanceKill)
            }
            3 => {
                let instance = &mut instances[victim];
                let status = tokio::task::block_in_place(|| instance.terminate());
                assert!(
                    status.is_some_and(|s| s.success()),
                    "SIGTERM exit status {status:?}"
                );
                tokio::task::block_in_place(|| instance.launch());
                (Target::Instance(victim), FaultKind::InstanceStop)
            }
            _ => {
                // The first pause of a run outlasts the 3 s after which an
                // instance is presumed dead and its waiters are pruned: they
                // must rejoin when it resumes.
                let long = !faults.iter().any(|f| f.kind == FaultKind::InstancePause);
                let pause = if long {
                    rng.ms(4000, 6000)
                } else {
                    rng.ms(1000, 6000)
                };
                instances[victim].pause();
                tokio::time::sleep(pause).await;
                instances[victim].resume();
                (Target::Instance(victim), FaultKind::InstancePause)
            }
        };
        faults.push(Fault {
            target,
            kind,
            from,
            to: SystemTime::now(),
        });
        // After the first (long) pause, a quiet while in which its
        // instance's waiters must be back in line, in order.
        let paused = faults.iter().filter(|f| f.kind == FaultKind::InstancePause);
        if kind == FaultKind::InstancePause && paused.count() == 1 {
            tokio::time::sleep(Duration::from_secs(8)).await;
        }
    }
    // Settle, so the last fault's waiters are judged too.
    tokio::time::sleep(support::checker::SETTLE + Duration::from_secs(2)).await;
    alive(&mut instances, &redis, "at the end");
    stop_tx.send(true).unwrap();
    for client in clients {
        tokio::time::timeout(Duration::from_secs(40), client)
            .await
            .expect("every client stops")
            .expect("client task");
    }
    alive(&mut instances, &redis, "after the clients stopped");
    let mut history = std::mem::replace(
        &mut *record.lock().unwrap(),
        History::new(SystemTime::now()),
    );
    history.faults = faults;
    history.ended = SystemTime::now();
    (history, seed)
}

/// The tickets' figures: taken (202), granted at once (201 to the take),
/// collected (a collect answered 201), left (a `DELETE` answered 204), not
/// collected (taken, never asked for again), collects answered 202.
fn ticket_counts(history: &History) -> [usize; 6] {
    let tickets = &history.tickets;
    let calls = |op: TicketOp, status: u16| {
        tickets
            .iter()
            .flat_map(|t| &t.calls)
            .filter(|c| c.op == op && c.status == status)
            .count()
    };
    [
        calls(TicketOp::Take, 202),
        calls(TicketOp::Take, 201),
        calls(TicketOp::Collect, 201),
        calls(TicketOp::Leave, 204),
        tickets.iter().filter(|t| t.abandoned && t.taken()).count(),
        calls(TicketOp::Collect, 202),
    ]
}

/// Every way of a ticket was taken: taken, collected, left, not collected.
fn assert_tickets(history: &History) {
    let [taken, _, collected, left, abandoned, _] = ticket_counts(history);
    assert!(
        taken > 0 && collected > 0 && left > 0 && abandoned > 0,
        "tickets: {taken} taken, {collected} collected, {left} left, {abandoned} not collected"
    );
}

/// Prints the run's figures: grants, faults by kind, paths, answers,
/// violations.
pub fn report(label: &str, history: &History, verdict: &Verdict) {
    println!("chaos ({label}): {} calls", history.calls.len());
    println!("grants (201s) checked: {}", verdict.holds.len());
    let mut by_kind: BTreeMap<String, u32> = BTreeMap::new();
    for fault in &history.faults {
        *by_kind.entry(fault.kind.to_string()).or_default() += 1;
    }
    println!("faults injected: {}", history.faults.len());
    for (fault, n) in &by_kind {
        println!("  fault: {fault}: {n}");
    }
    for (path, (n, faulted)) in &verdict.paths {
        println!("  path {path:?}: {n} ({faulted} during a fault)");
    }
    let mut answers: BTreeMap<String, u64> = BTreeMap::new();
    for call in &history.calls {
        let op = match call.op {
            support::history::Op::Acquire(_) => "acquire",
            support::history::Op::Refresh { .. } => "refresh",
            support::history::Op::Release { .. } => "release",
            support::history::Op::ForceRelease => "force-release",
        };
        let answer = match &call.answer {
            Answer::Lease { .. } => "lease".to_owned(),
            other => other.to_string(),
        };
        *answers.entry(format!("{op}: {answer}")).or_default() += 1;
    }
    for (answer, n) in &answers {
        println!("  answer {answer}: {n}");
    }
    let mut claims: BTreeMap<String, u64> = BTreeMap::new();
    for claim in &history.claims {
        let answer = match &claim.answer {
            Answer::Status { status: 201, .. } => "201".to_owned(),
            other => other.to_string(),
        };
        *claims.entry(answer).or_default() += 1;
    }
    for freeze in &history.freezes {
        let to = freeze.closed.map_or(freeze.until, |(sent, _)| sent);
        let during = |c: &&support::history::Call| {
            c.name == freeze.name && c.answered > freeze.opened.1 && c.answered < to
        };
        let answers: Vec<String> = history
            .calls
            .iter()
            .filter(during)
            .filter(|c| matches!(c.op, support::history::Op::Acquire(_)))
            .map(|c| c.answer.to_string())
            .collect();
        println!(
            "freeze of {}: made {}, {} ms until its DELETE was sent, acquisitions answered meanwhile: {answers:?}",
            freeze.name,
            freeze.made,
            to.duration_since(freeze.opened.1).unwrap_or_default().as_millis()
        );
    }
    println!("claims: {}", history.claims.len());
    for (answer, n) in &claims {
        println!("  claim {answer}: {n}");
    }
    let runs = &history.claim_runs;
    let heard = runs.iter().filter(|r| r.lost_heard.is_some()).count();
    println!(
        "claims held as baton run holds them: {}, {heard} stopped at a loss heard on a lease's stream",
        runs.len()
    );
    let [taken, at_once, collected, left, abandoned, waited] = ticket_counts(history);
    println!(
        "tickets on {TICKETS}: {} acquisitions, {at_once} granted at once, {taken} taken, \
         {collected} collected, {left} left, {abandoned} not collected, {waited} collects \
         answered 202 (judged for overtaking)",
        history.tickets.len()
    );
    println!("violations: {}", verdict.violations.len());
    for v in verdict.violations.iter().take(20) {
        println!("  {v}");
    }
    for e in verdict.evidence.iter().take(5) {
        println!("  {e}");
    }
}

/// Writes the history of a run that failed to a file, for a closer look;
/// returns its path.
fn keep(history: &History, seed: u64) -> String {
    let path = std::env::temp_dir().join(format!("baton-chaos-history-{seed}.txt"));
    std::fs::write(&path, format!("{history:#?}")).expect("history written");
    path.display().to_string()
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
    let (history, seed) = run(length(), Persistence::Always).await;
    let verdict = judge(&history, &rules());
    report("persistent Redis", &history, &verdict);
    assert!(
        verdict.violations.is_empty(),
        "{} violations (seed {seed}, history in {})",
        verdict.violations.len(),
        keep(&history, seed)
    );
    assert!(verdict.holds.len() > 100, "too few holds to mean anything");
    assert_tickets(&history);
    assert!(history.faults.len() >= 5, "too few faults injected");
}

/// Without persistence a Redis restart loses every lease: nothing is
/// promised about a hold across it, so holds are cut at each restart that
/// lost the data (the checker asserts there was one); tokens must still rise
/// (they are floored by Redis's clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_still_rise_when_redis_loses_everything() {
    let (history, seed) = run(length() / 2, Persistence::None).await;
    let verdict = judge(&history, &Rules::default());
    report("Redis without persistence", &history, &verdict);
    assert!(
        verdict.violations.is_empty(),
        "{} violations (seed {seed}, history in {})",
        verdict.violations.len(),
        keep(&history, seed)
    );
    assert!(verdict.holds.len() > 50, "too few holds to mean anything");
    assert_tickets(&history);
}

/// Synthetic histories for the checker's own tests.
#[cfg(test)]
mod synthetic {
    use std::time::{Duration, SystemTime};

    pub use crate::support::checker::{judge, Rule, Rules, Verdict};
    pub use crate::support::history::{
        Acquire, Answer, Ask, Call, Fault, FaultKind, History, Op, Target,
    };

    /// The ttl of the synthetic leases: longer than any test's span.
    pub const TTL: u64 = 60_000;
    pub const LOCK: &str = "deploy-a";
    pub const SEMAPHORE: &str = "workers";
    pub const LIMIT: u32 = 3;
    pub const ONE_PERMIT: Ask = Ask::Permits {
        permits: 1,
        limit: LIMIT,
    };

    /// A time `ms` after the epoch.
    pub fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    pub fn status(status: u16, slug: &str) -> Answer {
        Answer::Status {
            status,
            slug: slug.into(),
        }
    }

    pub fn call(
        client: usize,
        name: &str,
        instance: usize,
        op: Op,
        (sent, answered): (u64, u64),
        answer: Answer,
    ) -> Call {
        Call {
            client,
            name: name.into(),
            instance,
            op,
            sent: at(sent),
            answered: at(answered),
            answer,
        }
    }

    pub fn acquire(ask: Ask, ttl_ms: u64, wait_ms: u64) -> Op {
        Op::Acquire(Acquire {
            ask,
            ttl_ms,
            wait_ms,
            newest_wins: false,
            priority: 0,
        })
    }

    /// An acquisition by `client` (on instance 0) sent at `sent`, waiting
    /// up to `wait_ms`, answered with lease `token` at `answered`.
    pub fn grant(
        client: usize,
        name: &str,
        ask: Ask,
        token: u64,
        (sent, answered): (u64, u64),
        wait_ms: u64,
    ) -> Call {
        let lease = Answer::Lease {
            token,
            expires_at: at(answered + TTL),
            granted: ask,
        };
        call(
            client,
            name,
            0,
            acquire(ask, TTL, wait_ms),
            (sent, answered),
            lease,
        )
    }

    /// An acquisition refused with 409 after waiting.
    pub fn refused(client: usize, name: &str, ask: Ask, (sent, answered): (u64, u64)) -> Call {
        let slug = if name == SEMAPHORE {
            "semaphore-full"
        } else {
            "lock-held"
        };
        let op = acquire(ask, TTL, answered - sent);
        call(client, name, 0, op, (sent, answered), status(409, slug))
    }

    pub fn release(
        client: usize,
        name: &str,
        token: u64,
        (sent, answered): (u64, u64),
        answer: Answer,
    ) -> Call {
        call(
            client,
            name,
            0,
            Op::Release { lease: token },
            (sent, answered),
            answer,
        )
    }

    /// A hold of `ask` (client = `token`), asked at `requested` (without
    /// waiting), told at `start`, released (204) at `end`.
    pub fn hold(
        name: &str,
        ask: Ask,
        token: u64,
        requested: u64,
        start: u64,
        end: u64,
    ) -> Vec<Call> {
        let client = token as usize;
        vec![
            grant(client, name, ask, token, (requested, start), 0),
            release(client, name, token, (end, end + 1), status(204, "")),
        ]
    }

    /// A waiter (client 100 + `token`) sent at `sent`, granted lease
    /// `token` at `answered`, released at once.
    pub fn waiter(name: &str, ask: Ask, token: u64, sent: u64, answered: u64) -> Vec<Call> {
        let client = 100 + token as usize;
        vec![
            grant(client, name, ask, token, (sent, answered), 30_000),
            release(
                client,
                name,
                token,
                (answered + 10, answered + 11),
                status(204, ""),
            ),
        ]
    }

    pub fn fault(target: Target, kind: FaultKind, from: u64, to: u64) -> Fault {
        Fault {
            target,
            kind,
            from: at(from),
            to: at(to),
        }
    }

    pub fn history(calls: Vec<Vec<Call>>, faults: Vec<Fault>) -> History {
        let mut history = History::new(at(0));
        history.ended = at(120_000);
        history.calls = calls.into_iter().flatten().collect();
        history.faults = faults;
        history
    }

    /// The verdict on these calls and faults, with no path required.
    pub fn checked(calls: Vec<Vec<Call>>, faults: Vec<Fault>) -> Verdict {
        judge(&history(calls, faults), &Rules::default())
    }
}

#[cfg(test)]
use synthetic::*;

#[test]
fn the_checker_counts_capacity_and_tokens() {
    let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
    let permits = |permits| Ask::Permits {
        permits,
        limit: LIMIT,
    };
    // Readers together, a writer alone before and after them, the semaphore
    // full to its limit but not past it: all fine.
    let fine = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 100),
            hold(LOCK, shared, 2, 50, 100, 300),
            hold(LOCK, shared, 3, 60, 150, 250),
            hold(LOCK, shared, 4, 60, 160, 400),
            hold(LOCK, exclusive, 5, 70, 400, 500),
            hold(SEMAPHORE, permits(LIMIT - 1), 1, 0, 0, 100),
            hold(SEMAPHORE, ONE_PERMIT, 2, 0, 10, 200),
            hold(SEMAPHORE, permits(LIMIT), 3, 0, 200, 300),
        ],
        vec![],
    );
    assert!(fine.violations.is_empty(), "{:?}", fine.violations);
    assert_eq!(fine.holds.len(), 8);

    // A writer beside a reader, in either order.
    for (first, second) in [(exclusive, shared), (shared, exclusive)] {
        let overlap = checked(
            vec![
                hold(LOCK, first, 1, 0, 10, 200),
                hold(LOCK, second, 2, 0, 100, 300),
            ],
            vec![],
        );
        assert_eq!(overlap.count(Rule::Capacity), 1, "{:?}", overlap.violations);
    }
    // Permits past the limit, with fewer leases than the limit.
    let over = checked(
        vec![
            hold(SEMAPHORE, permits(LIMIT - 1), 1, 0, 10, 200),
            hold(SEMAPHORE, permits(2), 2, 0, 100, 300),
        ],
        vec![],
    );
    assert_eq!(over.count(Rule::Capacity), 1, "{:?}", over.violations);

    // A lease counts as held until its expiry, less the grace.
    let mut expiring = hold(LOCK, exclusive, 1, 0, 10, 99_000);
    expiring[0].op = acquire(exclusive, 5000, 0);
    expiring[0].answer = Answer::Lease {
        token: 1,
        expires_at: at(5010),
        granted: exclusive,
    };
    let after_expiry = checked(
        vec![expiring.clone(), hold(LOCK, exclusive, 2, 4850, 4860, 6000)],
        vec![],
    );
    assert_eq!(
        after_expiry.count(Rule::Capacity),
        0,
        "{:?}",
        after_expiry.violations
    );
    let before_expiry = checked(
        vec![expiring, hold(LOCK, exclusive, 2, 4700, 4710, 6000)],
        vec![],
    );
    assert_eq!(
        before_expiry.count(Rule::Capacity),
        1,
        "{:?}",
        before_expiry.violations
    );

    // Tokens rise across modes: a writer asked for after a reader was told
    // must carry a larger token; readers granted together need not be in
    // the order their 201s arrived.
    let backwards = checked(
        vec![
            hold(LOCK, shared, 9, 0, 10, 20),
            hold(LOCK, exclusive, 8, 15, 30, 40),
        ],
        vec![],
    );
    assert_eq!(
        backwards.count(Rule::Tokens),
        1,
        "{:?}",
        backwards.violations
    );
    let together = checked(
        vec![
            hold(LOCK, shared, 7, 0, 11, 20),
            hold(LOCK, shared, 6, 0, 12, 20),
        ],
        vec![],
    );
    assert!(together.violations.is_empty(), "{:?}", together.violations);
    // A body that says other than what was asked.
    let mut wrong = hold(LOCK, shared, 1, 0, 10, 20);
    wrong[0].answer = Answer::Lease {
        token: 1,
        expires_at: at(10 + TTL),
        granted: exclusive,
    };
    assert_eq!(checked(vec![wrong], vec![]).count(Rule::Granted), 1);
}

#[test]
fn the_checker_blames_the_line_only_when_its_head_surely_fits() {
    let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
    // A writer left waiting on a free lock: stuck.
    let stuck = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 1000),
            waiter(LOCK, exclusive, 2, 500, 7000),
        ],
        vec![],
    );
    assert_eq!(stuck.count(Rule::Stuck), 1, "{:?}", stuck.violations);
    assert!(
        stuck.evidence[0].contains("hold token 1 exclusive"),
        "{}",
        stuck.evidence[0]
    );
    // Served at once: fine.
    let served = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 1000),
            waiter(LOCK, exclusive, 2, 500, 1010),
        ],
        vec![],
    );
    assert!(served.violations.is_empty(), "{:?}", served.violations);
    let reader = || hold(LOCK, shared, 1, 0, 0, 9000);
    // A writer waits for a reader: right.
    let writer_waits = checked(
        vec![reader(), waiter(LOCK, exclusive, 2, 500, 9010)],
        vec![],
    );
    assert!(
        writer_waits.violations.is_empty(),
        "{:?}",
        writer_waits.violations
    );
    // A reader behind a queued writer waits too: right.
    let behind_writer = checked(
        vec![
            reader(),
            waiter(LOCK, exclusive, 3, 400, 9010),
            waiter(LOCK, shared, 2, 500, 9020),
        ],
        vec![],
    );
    assert!(
        behind_writer.violations.is_empty(),
        "{:?}",
        behind_writer.violations
    );
    // A reader kept out while only readers hold: stuck.
    let reader_kept_out = checked(vec![reader(), waiter(LOCK, shared, 2, 500, 8000)], vec![]);
    assert_eq!(
        reader_kept_out.count(Rule::Stuck),
        1,
        "{:?}",
        reader_kept_out.violations
    );
    // One permit held of three: a request for all three waits, one for two
    // is stuck.
    let permits = |permits| Ask::Permits {
        permits,
        limit: LIMIT,
    };
    let one_held = || hold(SEMAPHORE, ONE_PERMIT, 1, 0, 0, 9000);
    let all_wait = checked(
        vec![one_held(), waiter(SEMAPHORE, permits(LIMIT), 2, 500, 9010)],
        vec![],
    );
    assert!(all_wait.violations.is_empty(), "{:?}", all_wait.violations);
    let two_stuck = checked(
        vec![one_held(), waiter(SEMAPHORE, permits(2), 2, 500, 7000)],
        vec![],
    );
    assert_eq!(
        two_stuck.count(Rule::Stuck),
        1,
        "{:?}",
        two_stuck.violations
    );
    // Refused at once while nothing was held or asked: a lease left behind.
    let refused_free = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 1000),
            vec![refused(7, LOCK, exclusive, (2000, 2005))],
        ],
        vec![],
    );
    assert_eq!(
        refused_free.count(Rule::RefusedWithRoom),
        1,
        "{:?}",
        refused_free.violations
    );
    let refused_held = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 3000),
            vec![refused(7, LOCK, exclusive, (2000, 2005))],
        ],
        vec![],
    );
    assert!(
        refused_held.violations.is_empty(),
        "{:?}",
        refused_held.violations
    );

    // First come, first served: a writer queued at 0.5 s behind a holder
    // until 9 s; another sent at 3 s granted at 5 s overtook it.
    let line = |second: u64| {
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 5000),
            waiter(LOCK, exclusive, 2, 500, 9000),
            hold(LOCK, exclusive, 3, 3000, second, 8990),
        ]
    };
    let overtaken = checked(line(5000), vec![]);
    assert_eq!(
        overtaken.count(Rule::Overtaken),
        1,
        "{:?}",
        overtaken.violations
    );
    // The same around a fault: not judged.
    let pause = vec![fault(
        Target::Instance(0),
        FaultKind::InstancePause,
        4000,
        4500,
    )];
    let faulted = checked(line(5000), pause);
    assert_eq!(
        faulted.count(Rule::Overtaken),
        0,
        "{:?}",
        faulted.violations
    );
    // A higher priority goes ahead: right; a lower one does not.
    let prioritized = |first: u8, second: u8| {
        let mut calls = line(5000);
        for (i, priority) in [(1, first), (2, second)] {
            if let Op::Acquire(a) = &mut calls[i][0].op {
                a.priority = priority;
            }
        }
        checked(calls, vec![])
    };
    let higher = prioritized(0, 1);
    assert_eq!(higher.count(Rule::Overtaken), 0, "{:?}", higher.violations);
    assert_eq!(higher.paths.get(&Path::Priority).map(|p| p.0), Some(1));
    let lower = prioritized(2, 1);
    assert_eq!(lower.count(Rule::Overtaken), 1, "{:?}", lower.violations);
}

/// Point 1 of issue 30: a waiter stuck mid-run, between faults that leave
/// only short quiet gaps, is judged over the sum of those gaps.
#[test]
fn the_checker_judges_a_stuck_waiter_between_faults() {
    // A fault every 6 s (each 1 s long): with the settle after each, the
    // quiet gaps are 1 s, shorter than STUCK.
    let faults: Vec<Fault> = (0..6)
        .map(|k| {
            let from = 2000 + k * 6000;
            fault(
                Target::Instance(1),
                FaultKind::InstancePause,
                from,
                from + 1000,
            )
        })
        .collect();
    let exclusive = Ask::EXCLUSIVE;
    // A writer left waiting 30 s on a lock freed at 1 s: stuck, in five gaps.
    let stuck = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 1000),
            waiter(LOCK, exclusive, 2, 500, 30_500),
        ],
        faults.clone(),
    );
    assert_eq!(stuck.count(Rule::Stuck), 1, "{:?}", stuck.violations);
    // The same wait behind a holder that held the lock until then: fine.
    let behind_holder = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 30_400),
            waiter(LOCK, exclusive, 2, 500, 30_500),
        ],
        faults.clone(),
    );
    assert!(
        behind_holder.violations.is_empty(),
        "{:?}",
        behind_holder.violations
    );
    // A free stretch the faults explain (each within its settle): fine.
    let explained = checked(
        vec![
            hold(LOCK, exclusive, 1, 0, 0, 1000),
            waiter(LOCK, exclusive, 2, 500, 7500),
        ],
        vec![fault(Target::Redis, FaultKind::RedisStall, 900, 3000)],
    );
    assert!(
        explained.violations.is_empty(),
        "{:?}",
        explained.violations
    );
}

/// Point 2 of issue 30: a request that got no answer may still be in line,
/// ahead of others; it counts in the room until it surely left.
#[test]
fn the_checker_keeps_requests_without_an_answer_in_the_line() {
    let (exclusive, shared) = (Ask::EXCLUSIVE, Ask::SHARED);
    // A reader holds; a writer queues at 1 s through instance 1, which is
    // paused a moment; its client gives up at 14 s (no answer); a reader
    // queued behind it at 1.2 s waits for it, rightly, until it left.
    let writer_cut_off = || {
        let op = acquire(exclusive, TTL, 8000);
        vec![call(
            50,
            LOCK,
            1,
            op,
            (1000, 14_000),
            Answer::None { reached: true },
        )]
    };
    let pause = || {
        vec![fault(
            Target::Instance(1),
            FaultKind::InstancePause,
            1500,
            2500,
        )]
    };
    let reader = || hold(LOCK, shared, 1, 0, 0, 30_000);
    let blocked_rightly = checked(
        vec![
            reader(),
            writer_cut_off(),
            waiter(LOCK, shared, 2, 1200, 15_000),
        ],
        pause(),
    );
    assert!(
        blocked_rightly.violations.is_empty(),
        "{:?}",
        blocked_rightly.violations
    );
    // Kept out long after the writer surely left: stuck.
    let kept_out = checked(
        vec![
            reader(),
            writer_cut_off(),
            waiter(LOCK, shared, 2, 1200, 27_000),
        ],
        pause(),
    );
    assert_eq!(kept_out.count(Rule::Stuck), 1, "{:?}", kept_out.violations);
}

/// Point 3 of issue 30: a missing answer only with a fault of its instance
/// or Redis over it; releases judged; a 503 only during or right after a
/// fault; a 404 for a held lease only after a force-release or data loss.
#[test]
fn the_checker_excuses_missing_answers_and_503s_only_by_their_faults() {
    let exclusive = Ask::EXCLUSIVE;
    let unanswered_release = || {
        let mut calls = hold(LOCK, exclusive, 1, 0, 0, 9000);
        calls.insert(
            1,
            release(1, LOCK, 1, (1000, 2500), Answer::None { reached: true }),
        );
        calls
    };
    let of_other = checked(
        vec![unanswered_release()],
        vec![fault(
            Target::Instance(1),
            FaultKind::InstanceKill,
            1200,
            1300,
        )],
    );
    assert_eq!(
        of_other.count(Rule::NoAnswer),
        1,
        "{:?}",
        of_other.violations
    );
    let of_its_own = checked(
        vec![unanswered_release()],
        vec![fault(
            Target::Instance(0),
            FaultKind::InstanceKill,
            1200,
            1300,
        )],
    );
    assert!(
        of_its_own.violations.is_empty(),
        "{:?}",
        of_its_own.violations
    );
    let of_redis = checked(
        vec![unanswered_release()],
        vec![fault(Target::Redis, FaultKind::RedisStall, 1200, 1300)],
    );
    assert!(of_redis.violations.is_empty(), "{:?}", of_redis.violations);

    // A 503 long after a fault, and one right after it.
    let unavailable = |answered: u64| {
        let mut calls = hold(LOCK, exclusive, 1, 0, 0, 20_000);
        calls.insert(
            1,
            release(
                1,
                LOCK,
                1,
                (answered - 1000, answered),
                status(503, "redis-unavailable"),
            ),
        );
        calls
    };
    let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 1000, 3000)];
    let late = checked(vec![unavailable(10_000)], stall());
    assert_eq!(late.count(Rule::Unavailable), 1, "{:?}", late.violations);
    let right_after = checked(vec![unavailable(4000)], stall());
    assert!(
        right_after.violations.is_empty(),
        "{:?}",
        right_after.violations
    );

    // A release answered 404 while its holder was told it held the lease.
    let lost = || {
        let mut calls = hold(LOCK, exclusive, 1, 0, 0, 5000);
        calls[1].answer = status(404, "lease-not-found");
        calls
    };
    let nothing_explains = checked(vec![lost()], vec![]);
    assert_eq!(
        nothing_explains.count(Rule::LeaseLost),
        1,
        "{:?}",
        nothing_explains.violations
    );
    let forced = vec![call(
        9,
        LOCK,
        1,
        Op::ForceRelease,
        (3000, 3010),
        status(204, ""),
    )];
    let force_explains = checked(vec![lost(), forced], vec![]);
    assert!(
        force_explains.violations.is_empty(),
        "{:?}",
        force_explains.violations
    );
    // A force-release sent before the grant, unanswered (its instance
    // paused): it may run when the instance resumes, after the grant.
    let late = call(
        9,
        LOCK,
        1,
        Op::ForceRelease,
        (0, 10),
        Answer::None { reached: true },
    );
    let paused = fault(Target::Instance(1), FaultKind::InstancePause, 0, 3000);
    let mut later = hold(LOCK, exclusive, 1, 100, 100, 5000);
    later[1].answer = status(404, "lease-not-found");
    let late_force = checked(vec![later, vec![late]], vec![paused]);
    assert_eq!(
        late_force.count(Rule::LeaseLost),
        0,
        "{:?}",
        late_force.violations
    );
    let loss = vec![fault(
        Target::Redis,
        FaultKind::RedisRestart { data_lost: true },
        3000,
        3700,
    )];
    let loss_explains = checked(vec![lost()], loss.clone());
    assert!(
        loss_explains.violations.is_empty(),
        "{:?}",
        loss_explains.violations
    );
    // Granted once Redis was back (its release found it): the loss did not
    // end it, and a second holder beside it is an overlap.
    let survived = checked(
        vec![
            hold(LOCK, exclusive, 1, 2000, 4000, 6000),
            hold(LOCK, exclusive, 2, 4400, 4500, 5000),
        ],
        loss,
    );
    assert_eq!(
        survived.count(Rule::Capacity),
        1,
        "{:?}",
        survived.violations
    );
}

/// Point 4 of issue 30: a run without persistence must have lost Redis's
/// data at least once.
#[test]
fn the_checker_demands_a_data_loss_without_persistence() {
    let judged = |data_lost: bool, persistent: bool| {
        let mut history = history(
            vec![hold(LOCK, Ask::EXCLUSIVE, 1, 0, 0, 100)],
            vec![fault(
                Target::Redis,
                FaultKind::RedisRestart { data_lost },
                1000,
                1700,
            )],
        );
        history.persistent = Some(persistent);
        judge(&history, &Rules::default())
    };
    assert_eq!(judged(false, false).count(Rule::DataLoss), 1);
    assert!(judged(true, false).violations.is_empty());
    assert!(judged(false, true).violations.is_empty());
    assert_eq!(judged(true, true).count(Rule::DataLoss), 1);
}

/// Point 5 of issue 30: every required path taken during a fault.
#[test]
fn the_checker_demands_every_path_under_faults() {
    let exclusive = Ask::EXCLUSIVE;
    let two_permits = Ask::Permits {
        permits: 2,
        limit: LIMIT,
    };
    let refresh = |lease: u64, ttl_ms: u64, (sent, answered): (u64, u64)| {
        let lease_body = Answer::Lease {
            token: lease,
            expires_at: at(answered + ttl_ms),
            granted: exclusive,
        };
        call(
            lease as usize,
            "refreshed",
            0,
            Op::Refresh { lease, ttl_ms },
            (sent, answered),
            lease_body,
        )
    };
    let superseded = {
        let op = Op::Acquire(Acquire {
            ask: exclusive,
            ttl_ms: TTL,
            wait_ms: 4000,
            newest_wins: true,
            priority: 0,
        });
        vec![call(
            60,
            "queue",
            0,
            op,
            (100, 200),
            status(409, "superseded"),
        )]
    };
    let all = |shorten: bool| {
        let mut refreshed = hold("refreshed", exclusive, 1, 600, 610, 900);
        if shorten {
            refreshed.insert(1, refresh(1, 2000, (700, 710)));
        }
        refreshed.insert(1, refresh(1, 10_000, (800, 810)));
        vec![
            hold("alone", exclusive, 1, 100, 110, 200),
            hold(LOCK, Ask::SHARED, 1, 300, 310, 400),
            hold(SEMAPHORE, two_permits, 1, 500, 510, 550),
            refreshed,
            superseded.clone(),
            vec![call(
                61,
                "forced",
                0,
                Op::ForceRelease,
                (1000, 1010),
                status(204, ""),
            )],
        ]
    };
    let rules = Rules {
        required: vec![
            Path::Alone,
            Path::Exclusive,
            Path::Shared,
            Path::Permits,
            Path::RefreshShorten,
            Path::RefreshExtend,
            Path::Release,
            Path::NewestWins,
            Path::ForceRelease,
        ],
        ..Rules::default()
    };
    let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 0, 1000)];
    let every_path = judge(&history(all(true), stall()), &rules);
    assert!(
        every_path.violations.is_empty(),
        "{:?}",
        every_path.violations
    );
    let no_shortening = judge(&history(all(false), stall()), &rules);
    assert_eq!(
        no_shortening.count(Rule::Path),
        1,
        "{:?}",
        no_shortening.violations
    );
    // Taken, but never during a fault.
    let unfaulted = judge(&history(all(true), vec![]), &rules);
    assert_eq!(
        unfaulted.count(Rule::Path),
        rules.required.len(),
        "{:?}",
        unfaulted.violations
    );
}

/// Point 6 of issue 30: `expires_at` is the `ttl_ms` asked on Redis's
/// clock, and a hold whose release answered 503 lasts until a later release
/// is answered.
#[test]
fn the_checker_holds_the_client_to_what_it_was_told() {
    let exclusive = Ask::EXCLUSIVE;
    let told = |expires_in: u64, redis_ahead_ms: i64| {
        let mut calls = hold(LOCK, exclusive, 1, 0, 10, 100);
        let expires = (10 + expires_in) as i64 + redis_ahead_ms;
        calls[0].answer = Answer::Lease {
            token: 1,
            expires_at: at(expires as u64),
            granted: exclusive,
        };
        let mut history = history(vec![calls], vec![]);
        history.redis_ahead_ms = redis_ahead_ms;
        judge(&history, &Rules::default())
    };
    assert!(told(TTL, 0).violations.is_empty());
    assert_eq!(told(TTL / 2, 0).count(Rule::Expiry), 1);
    assert_eq!(told(TTL + 5000, 0).count(Rule::Expiry), 1);
    // Redis's clock 5 s ahead: its expires_at reads 5 s later.
    assert!(told(TTL, 5000).violations.is_empty());
    assert_eq!(told(TTL, 0).count(Rule::Expiry), 0);

    // A release answered 503 (during a stall), then another client granted
    // the lock, then the first client's release answered 204: both held.
    let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 900, 1500)];
    let first = |answer: Answer| {
        let mut calls = hold(LOCK, exclusive, 1, 0, 0, 2000);
        calls.insert(1, release(1, LOCK, 1, (1000, 1400), answer));
        calls
    };
    let unavailable = checked(
        vec![
            first(status(503, "redis-unavailable")),
            hold(LOCK, exclusive, 2, 1100, 1600, 3000),
        ],
        stall(),
    );
    assert_eq!(
        unavailable.count(Rule::Capacity),
        1,
        "{:?}",
        unavailable.violations
    );
    // The first release answered: the lease ended when it was sent.
    let released = checked(
        vec![
            first(status(204, "")),
            hold(LOCK, exclusive, 2, 1100, 1600, 3000),
        ],
        stall(),
    );
    assert_eq!(
        released.count(Rule::Capacity),
        0,
        "{:?}",
        released.violations
    );
    // A release answered 503 then one answered 404: the first may have run
    // (its reply lost in the stall), so the lease may have ended with it.
    let mut ran = first(status(503, "redis-unavailable"));
    ran[2].answer = status(404, "lease-not-found");
    let lost_reply = checked(
        vec![ran, hold(LOCK, exclusive, 2, 1100, 1600, 3000)],
        stall(),
    );
    assert!(
        lost_reply.violations.is_empty(),
        "{:?}",
        lost_reply.violations
    );
}

/// The holder's own stream: `released` only after its holder released,
/// `lost` for an expiry only once the lease was told to end.
#[test]
fn the_checker_holds_a_lease_s_stream_to_what_happened() {
    use support::history::{Followed, StreamEvent};
    let judged = |kind: &str, reason: Option<&str>, at_ms: u64| {
        let mut history = history(vec![hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 5000)], vec![]);
        let event = |kind: &str, reason: Option<&str>, at_ms| StreamEvent {
            at: at(at_ms),
            kind: kind.into(),
            reason: reason.map(str::to_owned),
        };
        history.follows.push(Followed {
            client: 1,
            name: LOCK.into(),
            lease: 1,
            instance: 0,
            opened: at(20),
            status: 200,
            events: vec![event("held", None, 30), event(kind, reason, at_ms)],
        });
        judge(&history, &Rules::default())
    };
    let released = judged("released", None, 5010);
    assert!(released.violations.is_empty(), "{:?}", released.violations);
    assert_eq!(released.paths.get(&Path::Followed).map(|p| p.0), Some(1));
    assert_eq!(judged("released", None, 4000).count(Rule::Stream), 1);
    assert_eq!(judged("lost", Some("expired"), 3000).count(Rule::Stream), 1);
    assert_eq!(
        judged("lost", Some("force-released"), 3000).count(Rule::Stream),
        1
    );
}

/// Issue 35: no claim left waiting past its `wait_ms` while all its names
/// were free. A claim of two locks (sent at 0, waiting 5 s, refused at 5 s):
/// flagged when the second lock's only hold ended at 1 s (both free 4 s), not
/// when that hold lasted the whole wait, nor when a fault explains the free
/// time; its leases, when granted, are judged as holds (a claim granted
/// beside a holder is an overlap).
#[test]
fn the_checker_flags_a_claim_refused_while_its_names_were_free() {
    let (x, y) = ("claim-x", "claim-y");
    let claim = |answer: Answer, (sent, answered): (u64, u64)| support::history::Claim {
        client: 50,
        instance: 0,
        names: vec![
            (x.to_owned(), Ask::EXCLUSIVE),
            (y.to_owned(), Ask::EXCLUSIVE),
        ],
        ttl_ms: TTL,
        wait_ms: answered - sent,
        sent: at(sent),
        answered: at(answered),
        answer,
    };
    let refused = || claim(status(409, "claim-refused"), (0, 5000));
    let judged = |y_released: u64, faults: Vec<Fault>| {
        let mut history = history(vec![hold(y, Ask::EXCLUSIVE, 1, 0, 10, y_released)], faults);
        history.claims.push(refused());
        judge(&history, &Rules::default())
    };
    let free = judged(1000, Vec::new());
    assert_eq!(free.count(Rule::ClaimWaited), 1, "{:?}", free.violations);
    assert_eq!(free.violations.len(), 1, "{:?}", free.violations);
    let busy = judged(6000, Vec::new());
    assert!(busy.violations.is_empty(), "{:?}", busy.violations);
    let pause = vec![fault(
        Target::Instance(0),
        FaultKind::InstancePause,
        500,
        2000,
    )];
    let explained = judged(1000, pause);
    assert!(
        explained.violations.is_empty(),
        "{:?}",
        explained.violations
    );
    // Granted: its two leases are holds; one beside another holder of x is
    // more than x's capacity.
    let granted = |token: u64, name: &str| {
        vec![
            grant(50, name, Ask::EXCLUSIVE, token, (0, 200), 0),
            release(50, name, token, (1000, 1001), status(204, "")),
        ]
    };
    let judged = |other: u64| {
        let mut history = history(
            vec![
                granted(10, x),
                granted(11, y),
                hold(x, Ask::EXCLUSIVE, 20, other, other + 10, other + 500),
            ],
            Vec::new(),
        );
        history.claims.push(claim(status(201, ""), (0, 200)));
        judge(&history, &Rules::default())
    };
    let overlap = judged(300);
    assert_eq!(overlap.count(Rule::Capacity), 1, "{:?}", overlap.violations);
    let after = judged(1500);
    assert!(after.violations.is_empty(), "{:?}", after.violations);
    // A claim granted before a loss of Redis's data (at 1 s to 2 s): its
    // release's 204 (which releases whatever is left) does not say its lease
    // outlived the loss, so a holder after the loss is no overlap; a lease's
    // own 204 would. (A claim whose 201 came after the loss was told of
    // leases held after it: see issue 42's item 1 below.)
    let across = |slug: &str| {
        let mut history = history(
            vec![
                vec![
                    grant(50, x, Ask::EXCLUSIVE, 10, (0, 800), 0),
                    release(50, x, 10, (4000, 4001), status(204, slug)),
                ],
                hold(x, Ask::EXCLUSIVE, 20, 2500, 2600, 3500),
            ],
            vec![fault(
                Target::Redis,
                FaultKind::RedisRestart { data_lost: true },
                1000,
                2000,
            )],
        );
        history.claims.push(claim(status(201, ""), (0, 800)));
        judge(&history, &Rules::default())
    };
    let claim_released = across(support::history::CLAIM_RELEASED);
    assert!(
        claim_released.violations.is_empty(),
        "{:?}",
        claim_released.violations
    );
    assert_eq!(across("").count(Rule::Capacity), 1);
}

/// No grant inside a freeze window: a lock frozen from 1 s (its `POST`
/// answered) to 6 s (its `DELETE` sent); a waiter granted at 4 s is flagged,
/// one granted at 1.5 s (instances apply a freeze within a second) or at
/// 6.5 s is not, nor one at 4 s when the freeze was never made (its `POST`
/// unanswered) or a pause of its instance held its 201 up; the line is not
/// judged while the name was frozen (a waiter held back is not stuck).
#[test]
fn the_checker_flags_a_grant_inside_a_freeze_window() {
    let freeze = |made: bool| support::history::Freeze {
        name: LOCK.to_owned(),
        opened: (at(900), at(1000)),
        made,
        until: at(20_000),
        closed: Some((at(6000), at(6100))),
    };
    let judged = |granted: u64, made: bool, faults: Vec<Fault>| {
        let mut history = history(
            vec![
                hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 500),
                waiter(LOCK, Ask::EXCLUSIVE, 2, 600, granted),
            ],
            faults,
        );
        history.freezes.push(freeze(made));
        judge(&history, &Rules::default())
    };
    let inside = judged(4000, true, Vec::new());
    assert_eq!(inside.count(Rule::Frozen), 1, "{:?}", inside.violations);
    assert_eq!(inside.violations.len(), 1, "{:?}", inside.violations);
    for (granted, made) in [(1500, true), (6500, true), (4000, false)] {
        let verdict = judged(granted, made, Vec::new());
        assert!(
            verdict.violations.is_empty(),
            "{granted} {made}: {:?}",
            verdict.violations
        );
    }
    let pause = vec![fault(
        Target::Instance(0),
        FaultKind::InstancePause,
        2000,
        3900,
    )];
    let paused = judged(4000, true, pause);
    assert!(paused.violations.is_empty(), "{:?}", paused.violations);
    // Without the freeze, the same waiter held back 5.5 s with room is stuck.
    let mut history = history(
        vec![
            hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 500),
            waiter(LOCK, Ask::EXCLUSIVE, 2, 600, 6500),
        ],
        Vec::new(),
    );
    assert_eq!(judge(&history, &Rules::default()).count(Rule::Stuck), 1);
    history.freezes.push(freeze(true));
    let held_back = judge(&history, &Rules::default());
    assert!(
        held_back.violations.is_empty(),
        "{:?}",
        held_back.violations
    );
}

#[test]
fn the_checker_flags_a_ticket_overtaken_or_granted_twice() {
    use support::history::{Ticket, TicketCall};
    let call = |op, (sent, answered): (u64, u64), status, token| TicketCall {
        op,
        instance: 0,
        sent: at(sent),
        answered: at(answered),
        status,
        token,
    };
    let ticket = |client, priority, calls| Ticket {
        client,
        name: TICKETS.to_owned(),
        priority,
        abandoned: false,
        calls,
    };
    // Taken at 100 (priority 1), still waiting at 2000-3500, collected at
    // 4000 with token 3.
    let waiting = |token: u64| {
        ticket(
            1,
            1,
            vec![
                call(TicketOp::Take, (0, 100), 202, None),
                call(TicketOp::Collect, (2000, 3500), 202, None),
                call(TicketOp::Collect, (3600, 4000), 201, Some(token)),
            ],
        )
    };
    // A later request (sent at `sent`, priority `priority`) granted token 2
    // at `granted`.
    let later = |sent: u64, priority: u8, granted: u64| {
        ticket(
            2,
            priority,
            vec![call(TicketOp::Take, (sent, granted), 201, Some(2))],
        )
    };
    let judged = |tickets: Vec<Ticket>| {
        let mut history = history(Vec::new(), Vec::new());
        history.tickets = tickets;
        judge(&history, &Rules::default())
    };
    // Granted before the ticket was answered still waiting: overtaken, by
    // the same priority and by a lower one.
    for priority in [0, 1] {
        let verdict = judged(vec![waiting(3), later(500, priority, 1000)]);
        assert_eq!(verdict.count(Rule::TicketOvertaken), 1, "{:?}", verdict);
        assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
    }
    // Not by a higher priority, one sent before the ticket was taken, one
    // granted after the ticket's last wait was sent, nor when the ticket was
    // never answered waiting after it (left, or its place expired: 404).
    let left = ticket(
        1,
        1,
        vec![
            call(TicketOp::Take, (0, 100), 202, None),
            call(TicketOp::Collect, (2000, 2100), 404, None),
        ],
    );
    for tickets in [
        vec![waiting(3), later(500, 2, 1000)],
        vec![waiting(3), later(50, 1, 1000)],
        vec![waiting(3), later(500, 1, 2500)],
        vec![left, later(500, 1, 1000)],
    ] {
        let verdict = judged(tickets);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    }
    // Granted twice: one ticket collected with two tokens, or one token told
    // to two acquisitions.
    let mut twice = waiting(3);
    twice
        .calls
        .push(call(TicketOp::Collect, (4100, 4200), 201, Some(4)));
    let verdict = judged(vec![twice]);
    assert_eq!(verdict.count(Rule::TicketTwice), 1, "{:?}", verdict);
    let verdict = judged(vec![waiting(2), later(5000, 1, 5100)]);
    assert_eq!(verdict.count(Rule::TicketTwice), 1, "{:?}", verdict);
    // A retried collect that gets the same lease is no second grant.
    let mut retried = waiting(3);
    retried
        .calls
        .push(call(TicketOp::Collect, (4100, 4200), 201, Some(3)));
    let verdict = judged(vec![retried, later(5000, 1, 5100)]);
    assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
}

/// Issue 42, item 1: a claim of [L1, L2, S] that took L1 and waited for L2
/// while Redis restarted without its data, then answered 201 (0.3 s after
/// Redis was back) telling L1 held for 25 s more, while another client's
/// `POST` of L1 got 201 too. A 201 that came after the loss tells of a hold
/// after it (baton confirms every lease of a claim before its 201): the loss
/// does not excuse it. The service now starts the claim over (L1 taken
/// again, the other client refused).
#[test]
fn the_checker_flags_a_claim_told_201_for_a_lease_redis_lost() {
    let (l1, l2, s) = ("claim-x", "claim-y", "claim-pool");
    let one_of_two = Ask::Permits {
        permits: 1,
        limit: 2,
    };
    let (claim_sent, claim_answered) = (1000, 6000);
    let loss = || {
        vec![fault(
            Target::Redis,
            FaultKind::RedisRestart { data_lost: true },
            5000,
            5700,
        )]
    };
    let judged = |l1_token: u64, l1_taken: u64, other: Answer| {
        // The claim's lease of each name, as told by its 201, and its
        // `DELETE` (204, releasing whatever is left) at 9 s.
        let lease = |name: &str, ask: Ask, token: u64, taken: u64| {
            let mut granted = grant(50, name, ask, token, (claim_sent, claim_answered), 0);
            granted.answer = Answer::Lease {
                token,
                expires_at: at(taken + TTL),
                granted: ask,
            };
            vec![
                granted,
                release(
                    50,
                    name,
                    token,
                    (9000, 9001),
                    status(204, support::history::CLAIM_RELEASED),
                ),
            ]
        };
        // L2's holder, whose lease the loss took (its release: 404).
        let mut l2_holder = hold(l2, Ask::EXCLUSIVE, 1, 0, 10, 7000);
        l2_holder[1].answer = status(404, "lease-not-found");
        // Another client's `POST /locks/L1` (no wait) at 6.2 s via
        // instance 1, released at 8 s when granted.
        let mut newcomer = vec![call(
            7,
            l1,
            1,
            acquire(Ask::EXCLUSIVE, TTL, 0),
            (6200, 6210),
            other.clone(),
        )];
        if let Answer::Lease { token, .. } = other {
            newcomer[0].answer = Answer::Lease {
                token,
                expires_at: at(6210 + TTL),
                granted: Ask::EXCLUSIVE,
            };
            newcomer.push(release(7, l1, token, (8000, 8001), status(204, "")));
        }
        let mut history = history(
            vec![
                l2_holder,
                lease(l1, Ask::EXCLUSIVE, l1_token, l1_taken),
                lease(l2, Ask::EXCLUSIVE, 3, 5990),
                lease(s, one_of_two, 4, 1010),
                newcomer,
            ],
            loss(),
        );
        history.claims.push(support::history::Claim {
            client: 50,
            instance: 0,
            names: vec![
                (l1.to_owned(), Ask::EXCLUSIVE),
                (l2.to_owned(), Ask::EXCLUSIVE),
                (s.to_owned(), one_of_two),
            ],
            ttl_ms: TTL,
            wait_ms: 30_000,
            sent: at(claim_sent),
            answered: at(claim_answered),
            answer: status(201, ""),
        });
        judge(&history, &Rules::default())
    };
    let lease = |token| Answer::Lease {
        token,
        expires_at: at(0),
        granted: Ask::EXCLUSIVE,
    };
    // The bug: L1 taken at 1 s (token 2), told at 6 s; the newcomer granted.
    let told_lost = judged(2, 1010, lease(5));
    assert_eq!(
        told_lost.count(Rule::Capacity),
        1,
        "{:?}",
        told_lost.violations
    );
    assert!(
        told_lost.violations[0].text.starts_with("claim-x"),
        "{:?}",
        told_lost.violations
    );
    assert_eq!(told_lost.violations.len(), 1, "{:?}", told_lost.violations);
    // Now: L1 taken again after the loss (token 6), the newcomer refused.
    let started_over = judged(6, 5990, status(409, "lock-held"));
    assert!(
        started_over.violations.is_empty(),
        "{:?}",
        started_over.violations
    );
}

/// Issue 42, item 2: instance 1 paused (500 ms to 3 s) while a freeze of
/// the lock was made (answered at 1 s, so applied by 2 s), its list stale
/// when it resumed: it granted a waiter (sent before the pause, whose
/// holder released inside the window, at 2.5 s) 2.3 s into the window, and
/// then a newcomer that does not wait. The pause cannot have held up a
/// grant made before the window: the holder held the lock until inside it.
/// The service now checks its list after a resume: the waiter is granted
/// after the freeze is deleted, the newcomer refused (423).
#[test]
fn the_checker_flags_grants_from_a_freeze_list_stale_after_a_pause() {
    let freeze = support::history::Freeze {
        name: LOCK.to_owned(),
        opened: (at(900), at(1000)),
        made: true,
        until: at(20_000),
        closed: Some((at(6000), at(6100))),
    };
    let pause = || {
        vec![fault(
            Target::Instance(1),
            FaultKind::InstancePause,
            500,
            3000,
        )]
    };
    let judged = |waiter_granted: u64, newcomer: Answer| {
        let mut waited = waiter(LOCK, Ask::EXCLUSIVE, 2, 300, waiter_granted);
        for c in &mut waited {
            c.instance = 1;
        }
        let mut new = vec![call(
            8,
            LOCK,
            1,
            acquire(Ask::EXCLUSIVE, TTL, 0),
            (3320, 3330),
            newcomer.clone(),
        )];
        if let Answer::Lease { token, .. } = newcomer {
            new[0].answer = Answer::Lease {
                token,
                expires_at: at(3330 + TTL),
                granted: Ask::EXCLUSIVE,
            };
            new.push(release(8, LOCK, token, (3400, 3401), status(204, "")));
        }
        let mut history = history(
            vec![hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 2500), waited, new],
            pause(),
        );
        history.freezes.push(freeze.clone());
        judge(&history, &Rules::default())
    };
    let lease = Answer::Lease {
        token: 3,
        expires_at: at(0),
        granted: Ask::EXCLUSIVE,
    };
    // The bug: both granted inside the window, just after the resume.
    let stale = judged(3300, lease);
    assert_eq!(stale.count(Rule::Frozen), 2, "{:?}", stale.violations);
    assert_eq!(stale.violations.len(), 2, "{:?}", stale.violations);
    // Now: the waiter granted once the freeze was deleted, the newcomer
    // refused.
    let checked = judged(6050, status(423, "frozen"));
    assert!(checked.violations.is_empty(), "{:?}", checked.violations);
}

/// Issue 42, item 3: waiters queued well apart (at 0.5 s and 3 s, behind a
/// holder until 7 s), a Redis stall of 2.5 s (3.5 s to 6 s), then the later
/// one served first (at 7 s, the first at 9.5 s): overtaken, of the same
/// priority or of a lower one than the first's. A stall of Redis does not
/// excuse it: the waiters' instances stayed alive, and the line keeps its
/// order through a stall. The service now serves them in order.
#[test]
fn the_checker_flags_waiters_served_out_of_order_across_a_redis_stall() {
    let stall = || vec![fault(Target::Redis, FaultKind::RedisStall, 3500, 6000)];
    let judged = |first_granted: u64, second_granted: u64, priorities: (u8, u8)| {
        let mut calls = vec![
            hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 7000),
            waiter(LOCK, Ask::EXCLUSIVE, 2, 500, first_granted),
            waiter(LOCK, Ask::EXCLUSIVE, 3, 3000, second_granted),
        ];
        for (i, priority) in [(1, priorities.0), (2, priorities.1)] {
            if let Op::Acquire(a) = &mut calls[i][0].op {
                a.priority = priority;
            }
        }
        checked(calls, stall())
    };
    for priorities in [(0, 0), (2, 1)] {
        // The bug: the later waiter served first, the first 2.5 s after.
        let out_of_order = judged(9500, 7010, priorities);
        assert_eq!(
            out_of_order.count(Rule::Overtaken),
            1,
            "{priorities:?}: {:?}",
            out_of_order.violations
        );
        assert_eq!(
            out_of_order.violations.len(),
            1,
            "{priorities:?}: {:?}",
            out_of_order.violations
        );
        // Now: served in the order they queued.
        let in_order = judged(7010, 7030, priorities);
        assert!(
            in_order.violations.is_empty(),
            "{priorities:?}: {:?}",
            in_order.violations
        );
    }
    // A higher priority that queued later goes first: right, stall or not.
    let higher = judged(9500, 7010, (0, 1));
    assert!(higher.violations.is_empty(), "{:?}", higher.violations);
    // A pause of an instance still excuses it: its waiters may have been
    // dropped and rejoined behind.
    let mut calls = vec![
        hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 7000),
        waiter(LOCK, Ask::EXCLUSIVE, 2, 500, 9500),
        waiter(LOCK, Ask::EXCLUSIVE, 3, 3000, 7010),
    ];
    calls[1][0].instance = 1;
    let paused = checked(
        calls,
        vec![fault(
            Target::Instance(1),
            FaultKind::InstancePause,
            3500,
            6000,
        )],
    );
    assert_eq!(paused.count(Rule::Overtaken), 0, "{:?}", paused.violations);
}

/// Issue 42, item 4: a holder's stream on instance 1, paused (0.4 s to
/// 4.5 s) across a refresh (at 0.5 s, to 1 s: the lease expired at 1.5 s):
/// it said `refreshed` and `expiring` after it resumed, for a lease long
/// gone, and `lost` 2 s after that; and after a loss of Redis's data it said
/// `force-released` with nobody having force-released it. The service now
/// says `lost` (`expired`) at once after the resume, and `expired` for a
/// lease lost with Redis's data.
#[test]
fn the_checker_flags_a_stream_that_speaks_of_a_lease_already_gone() {
    use support::history::{Followed, StreamEvent};
    let event = |kind: &str, reason: Option<&str>, at_ms| StreamEvent {
        at: at(at_ms),
        kind: kind.into(),
        reason: reason.map(str::to_owned),
    };
    let followed = |events: Vec<StreamEvent>| Followed {
        client: 1,
        name: LOCK.into(),
        lease: 1,
        instance: 1,
        opened: at(20),
        status: 200,
        events,
    };
    // Granted at 10 ms for 3 s, refreshed to 1 s at 0.5 s via instance 0;
    // its release at 8 s answered 404 (long expired).
    let paused_across = |events: Vec<StreamEvent>| {
        let mut calls = hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 8000);
        calls[0].op = acquire(Ask::EXCLUSIVE, 3000, 0);
        calls[0].answer = Answer::Lease {
            token: 1,
            expires_at: at(3010),
            granted: Ask::EXCLUSIVE,
        };
        calls[1].answer = status(404, "lease-not-found");
        calls.insert(
            1,
            call(
                1,
                LOCK,
                0,
                Op::Refresh {
                    lease: 1,
                    ttl_ms: 1000,
                },
                (500, 510),
                Answer::Lease {
                    token: 1,
                    expires_at: at(1510),
                    granted: Ask::EXCLUSIVE,
                },
            ),
        );
        let pause = fault(Target::Instance(1), FaultKind::InstancePause, 400, 4500);
        let mut history = history(vec![calls], vec![pause]);
        history.follows.push(followed(events));
        judge(&history, &Rules::default())
    };
    let held = || event("held", None, 30);
    // The bug: refreshed and expiring after the resume, lost 2 s later.
    let late = paused_across(vec![
        held(),
        event("refreshed", None, 4510),
        event("expiring", None, 4520),
        event("lost", Some("expired"), 6520),
    ]);
    assert_eq!(late.count(Rule::Stream), 3, "{:?}", late.violations);
    assert_eq!(late.violations.len(), 3, "{:?}", late.violations);
    // Each on its own.
    for events in [
        vec![
            held(),
            event("refreshed", None, 4510),
            event("lost", Some("expired"), 4530),
        ],
        vec![
            held(),
            event("expiring", None, 4520),
            event("lost", Some("expired"), 4530),
        ],
        vec![held(), event("lost", Some("expired"), 6520)],
    ] {
        let verdict = paused_across(events.clone());
        assert_eq!(
            verdict.count(Rule::Stream),
            1,
            "{events:?}: {:?}",
            verdict.violations
        );
    }
    // Now: lost, at once after the resume.
    let at_once = paused_across(vec![held(), event("lost", Some("expired"), 4530)]);
    assert!(at_once.violations.is_empty(), "{:?}", at_once.violations);
    // A refresh heard in time, and `expiring` before the expiry, are fine.
    let in_time = paused_across(vec![
        held(),
        event("refreshed", None, 520),
        event("expiring", None, 1200),
        event("lost", Some("expired"), 4530),
    ]);
    assert!(in_time.violations.is_empty(), "{:?}", in_time.violations);

    // A lease lost with Redis's data (at 2 s): `force-released` is wrong
    // (nobody force-released it), `expired` right.
    let lost_with_data = |reason: &str| {
        // (Its release at 5 s: 404, the lease gone.)
        let mut calls = hold(LOCK, Ask::EXCLUSIVE, 1, 0, 10, 5000);
        calls[1].answer = status(404, "lease-not-found");
        let mut history = history(
            vec![calls],
            vec![fault(
                Target::Redis,
                FaultKind::RedisRestart { data_lost: true },
                2000,
                2700,
            )],
        );
        history
            .follows
            .push(followed(vec![held(), event("lost", Some(reason), 2800)]));
        judge(&history, &Rules::default())
    };
    let forced = lost_with_data("force-released");
    assert_eq!(forced.count(Rule::Stream), 1, "{:?}", forced.violations);
    let expired = lost_with_data("expired");
    assert_eq!(expired.count(Rule::Stream), 0, "{:?}", expired.violations);
}

#[test]
fn the_checker_flags_a_claim_s_holder_that_runs_on_past_a_force_release() {
    use support::history::ClaimRun;
    let judged = |forced_name: &str, stopped: u64, faults: Vec<Fault>| {
        let forced = call(
            9,
            forced_name,
            0,
            Op::ForceRelease,
            (2000, 2050),
            status(204, ""),
        );
        let mut history = history(vec![vec![forced]], faults);
        history.claim_runs.push(ClaimRun {
            client: 1,
            names: vec!["claim-x".to_owned(), "claim-w".to_owned()],
            granted: at(1000),
            lost_heard: None,
            stopped: at(stopped),
        });
        judge(&history, &Rules::default())
    };
    // Ran on 7 s past the force-release of one of its names: flagged.
    let ran_on = judged("claim-w", 9000, Vec::new());
    assert_eq!(ran_on.count(Rule::ClaimRanOn), 1, "{:?}", ran_on.violations);
    assert_eq!(ran_on.violations.len(), 1, "{:?}", ran_on.violations);
    // Stopped within the limit, a force-release of another name, or a
    // pause of an instance in between: nothing to flag.
    let pause = vec![fault(
        Target::Instance(0),
        FaultKind::InstancePause,
        2100,
        5000,
    )];
    for (name, stopped, faults) in [
        ("claim-w", 2600, Vec::new()),
        ("claim-q", 9000, Vec::new()),
        ("claim-w", 9000, pause),
    ] {
        let verdict = judged(name, stopped, faults);
        assert!(
            verdict.violations.is_empty(),
            "{name} {stopped}: {:?}",
            verdict.violations
        );
    }
}

#[test]
fn the_checker_takes_a_claim_s_423_only_while_one_of_its_names_may_be_frozen() {
    use support::history::{Claim, Freeze};
    let judged = |frozen_name: &str| {
        let mut history = history(Vec::new(), Vec::new());
        history.freezes.push(Freeze {
            name: frozen_name.to_owned(),
            opened: (at(900), at(1000)),
            made: true,
            until: at(20_000),
            closed: Some((at(6000), at(6100))),
        });
        history.claims.push(Claim {
            client: 1,
            instance: 0,
            names: vec![
                ("claim-x".to_owned(), Ask::EXCLUSIVE),
                ("claim-y".to_owned(), Ask::EXCLUSIVE),
            ],
            ttl_ms: TTL,
            wait_ms: 3000,
            sent: at(2000),
            answered: at(5000),
            answer: status(423, "frozen"),
        });
        judge(&history, &Rules::default())
    };
    let frozen = judged("claim-y");
    assert!(frozen.violations.is_empty(), "{:?}", frozen.violations);
    let not_frozen = judged("claim-q");
    assert_eq!(
        not_frozen.count(Rule::Unclear),
        1,
        "{:?}",
        not_frozen.violations
    );
}
