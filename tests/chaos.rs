//! Chaos test of what a 201 promises, judged over the whole run: two baton
//! processes on one Redis, clients taking every path (locks shared or
//! exclusive, a semaphore's permits, names used alone, refreshes that
//! shorten and extend, `newest_wins`, force-release, claims of several
//! names, a freeze opened and deleted) through both, while the
//! test kills (SIGKILL), stops (SIGTERM) and pauses (SIGSTOP, 1-6 s) the
//! baton processes, stalls Redis (DEBUG SLEEP, 1-4 s), and kills and
//! restarts Redis. Every call and its answer is recorded into a history,
//! and the checker (`baton_testkit::checker`, a pure function of the
//! history) judges it: its module doc lists each rule. The checker's own
//! tests sit beside each rule in that crate (`cargo test -p baton-testkit`):
//! each rule flags a synthetic history that breaks it and passes the same
//! history without the break.
//!
//! `CHAOS_SECONDS` sets how long the main run lasts (default 40; the run
//! without persistence lasts half as long), `CHAOS_SEED` replays a run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use baton_testkit::chaos::claims::{claim_loop, ClaimWork};
use baton_testkit::chaos::freezes::freeze_once;
use baton_testkit::chaos::tickets::{ticket_loop, PICKUP_MS};
use baton_testkit::chaos::{
    client_loop, force_release_loop, redis_ahead_ms, warm_up, Asks, Instance, Rng, Run, Workload,
};
use baton_testkit::checker::{judge, Path, Rules, Verdict, SETTLE};
use baton_testkit::history::{Answer, Ask, Call, Fault, FaultKind, History, Op, Target, TicketOp};
use baton_testkit::RedisServer;
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
    let prefix = baton_testkit::unique_prefix();
    let url = redis.url();
    let pickup = PICKUP_MS.to_string();
    let env = [
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_PICKUP_MS", pickup.as_str()),
    ];
    let mut instances = [Instance::start(&env), Instance::start(&env)];
    let bases: Vec<String> = instances.iter().map(Instance::base).collect();
    warm_up(&bases).await;
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
        let victim = (rng.next_u64() % 2) as usize;
        // Without persistence, a restart (which loses the data) comes by
        // the middle of the run whatever the dice say.
        let must_restart = persistence == Persistence::None
            && !restarted(&faults)
            && started.elapsed() >= length / 2;
        // Every kind comes once in each five faults, in a random order.
        if deck.is_empty() {
            deck = (0..5).collect();
            for i in (1..deck.len()).rev() {
                deck.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
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
    tokio::time::sleep(SETTLE + Duration::from_secs(2)).await;
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
            Op::Acquire(_) => "acquire",
            Op::Refresh { .. } => "refresh",
            Op::Release { .. } => "release",
            Op::ForceRelease => "force-release",
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
        let during =
            |c: &&Call| c.name == freeze.name && c.answered > freeze.opened.1 && c.answered < to;
        let answers: Vec<String> = history
            .calls
            .iter()
            .filter(during)
            .filter(|c| matches!(c.op, Op::Acquire(_)))
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
