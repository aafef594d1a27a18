//! Chaos on Redis Cluster, where `BATON_REDIS_WAIT_REPLICAS` must make the
//! difference: two baton processes in cluster mode, clients contending for
//! locks spread over the three shards (each acquisition shared or exclusive
//! at random), while the test makes the replica of a lock's shard lag
//! (`CLIENT PAUSE WRITE` on the replica: it stops applying its master's
//! writes, as a replica behind on a slow link), kills (SIGKILL) the master
//! while it lags, lets the lagging replica take over (it never gets the
//! writes of the lag), and brings the killed node back as a replica.
//!
//! Run twice on one cluster: with `BATON_REDIS_WAIT_REPLICAS=1` a grant is
//! answered 201 only once the replica has it (during the lag: 503), so the
//! failover loses no lease anyone was told of: 0 violations, asserted. With
//! 0 a grant made during the lag is answered 201 and lost at the failover:
//! its holder's release finds nothing (404 while it was told it held the
//! lease), and another client may get the lock beside it; the checker must
//! see at least one violation, asserted, or the run proves nothing about
//! `WAIT`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use baton_testkit::chaos::{client_loop, redis_ahead_ms, Asks, Instance, Rng, Run, Workload};
use baton_testkit::checker::{judge, Path, Rules, Verdict};
use baton_testkit::history::{Fault, FaultKind, History, Target};
use baton_testkit::topology::RedisCluster;
use tokio::sync::watch;

const CHAOS_FOR: Duration = Duration::from_secs(20);
const LOCKS: [&str; 6] = [
    "deploy-a", "deploy-b", "deploy-c", "deploy-d", "deploy-e", "deploy-f",
];
const CLIENTS: usize = 18;
/// Leases outlive a failover (about 3 s here) by far, and clients hold them
/// up to 6 s: a lease granted during the lag is often still held, as told,
/// when the promoted replica takes over (its release then finds nothing).
const TTL_MS: u64 = 15_000;
const HOLD_UP_TO: Duration = Duration::from_secs(6);
/// At least this many lagging failovers a run.
const FAILOVERS: u32 = 3;
/// Without `WAIT`, lagging failovers go on (up to this many) until the
/// checker sees a lease lost: each loses one only if a grant of the lag is
/// still held at the failover.
const MOST_FAILOVERS: u32 = 8;

/// What the cluster runs must show: a release lost at a failover leaves
/// its lease until it expires, so the line may wait that long after one.
fn rules() -> Rules {
    Rules {
        required: vec![Path::Exclusive, Path::Shared, Path::Release],
        failover_settle: Duration::from_millis(TTL_MS + 2000),
    }
}

/// Makes the replica of `key`'s master lag for a while, kills the master,
/// lets the replica take over without the writes of the lag, and brings the
/// master back as a replica. Blocking.
fn lagging_failover(cluster: &mut RedisCluster, key: &str, lag: Duration) {
    let master = cluster.master_of(key);
    let replica = cluster.replica_of(master).expect("a replica in sync");
    let mut conn = cluster.node(replica).conn().expect("the replica");
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(30_000)
        .arg("WRITE")
        .query::<()>(&mut conn)
        .expect("CLIENT PAUSE WRITE on the replica");
    std::thread::sleep(lag);
    cluster.kill(master);
    // The replica sees its master's link drop before it applies anything
    // more: what it had not applied is gone.
    std::thread::sleep(Duration::from_millis(500));
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query::<()>(&mut conn)
        .expect("CLIENT UNPAUSE");
    cluster.wait_for_failover(key, master, Duration::from_secs(20));
    cluster.node(master).restart();
    cluster.wait_for_replicas(Duration::from_secs(30));
}

/// Runs the clients against a fresh pair of batons while failing over
/// lagging shards (without `WAIT`, until the checker sees a violation, up
/// to [`MOST_FAILOVERS`]); returns the cluster back and the history.
async fn run(cluster: RedisCluster, wait_replicas: u32) -> (RedisCluster, History) {
    let prefix = baton_testkit::unique_prefix();
    let (seeds, wait) = (cluster.seeds(), wait_replicas.to_string());
    let env = [
        ("BATON_REDIS_MODE", "cluster"),
        ("BATON_REDIS_URL", seeds.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_REDIS_WAIT_REPLICAS", wait.as_str()),
    ];
    let instances = [Instance::start(&env), Instance::start(&env)];
    let bases: Vec<String> = instances.iter().map(Instance::base).collect();
    baton_testkit::chaos::warm_up(&bases).await;
    let mut history = History::new(SystemTime::now());
    history.redis_ahead_ms = redis_ahead_ms(&mut cluster.any_conn());
    let record = Arc::new(Mutex::new(history));
    let (stop_tx, stop_rx) = watch::channel(false);
    let seed = Rng::seed();
    println!("chaos seed: {seed}");
    let mut rng = Rng::new(seed);
    let shared = Run::new(bases, record.clone(), stop_rx, seed);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let name = LOCKS[id % LOCKS.len()];
            let work = Workload::new(name, Asks::SharedOrExclusive, TTL_MS, 1000, HOLD_UP_TO);
            tokio::spawn(client_loop(id, work, shared.clone()))
        })
        .collect();
    let mut faults = Vec::new();
    let mut cluster = cluster;
    let mut failovers = 0;
    let started = Instant::now();
    // At least FAILOVERS, however slow the machine makes each.
    loop {
        let enough = started.elapsed() >= CHAOS_FOR && failovers >= FAILOVERS;
        if enough && (wait_replicas > 0 || failovers >= MOST_FAILOVERS) {
            break;
        }
        if enough {
            let mut so_far = record.lock().unwrap().clone();
            so_far.faults = faults.clone();
            if !judge(&so_far, &rules()).violations.is_empty() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let key = format!(
            "{prefix}{{lock:{}}}",
            LOCKS[failovers as usize % LOCKS.len()]
        );
        let lag = rng.ms(2500, 3500);
        let from = SystemTime::now();
        cluster = tokio::task::spawn_blocking(move || {
            lagging_failover(&mut cluster, &key, lag);
            cluster
        })
        .await
        .unwrap();
        faults.push(Fault {
            target: Target::Redis,
            kind: FaultKind::MasterKillLaggingReplica,
            from,
            to: SystemTime::now(),
        });
        failovers += 1;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_tx.send(true).unwrap();
    for client in clients {
        tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .expect("every client stops")
            .expect("client task");
    }
    let mut instances = instances;
    for (i, instance) in instances.iter_mut().enumerate() {
        assert!(
            instance.alive(),
            "baton instance {i} died unasked; its last words:\n{}",
            instance.last_words()
        );
    }
    drop(instances);
    let mut history = std::mem::replace(
        &mut *record.lock().unwrap(),
        History::new(SystemTime::now()),
    );
    history.faults = faults;
    history.ended = SystemTime::now();
    (cluster, history)
}

fn report(wait_replicas: u32, history: &History, verdict: &Verdict) {
    let failovers = history.faults.len();
    println!(
        "BATON_REDIS_WAIT_REPLICAS={wait_replicas}: {} violations in {} holds, {failovers} lagging failovers, {} calls",
        verdict.violations.len(),
        verdict.holds.len(),
        history.calls.len()
    );
    for (path, (n, faulted)) in &verdict.paths {
        println!("  path {path:?}: {n} ({faulted} during a fault)");
    }
    for v in verdict.violations.iter().take(10) {
        println!("  {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_to_a_lagging_replica_loses_a_told_lease_only_without_waiting_for_replicas() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let mut cluster = Some(cluster);
    let mut verdicts = Vec::new();
    for wait_replicas in [1, 0] {
        let (back, history) = run(cluster.take().unwrap(), wait_replicas).await;
        cluster = Some(back);
        let verdict = judge(&history, &rules());
        report(wait_replicas, &history, &verdict);
        assert!(verdict.holds.len() > 30, "too few holds to mean anything");
        verdicts.push(verdict);
    }
    assert!(
        verdicts[0].violations.is_empty(),
        "with BATON_REDIS_WAIT_REPLICAS=1 a failover lost a lease its holder was told of: {:?}",
        verdicts[0].violations
    );
    assert!(
        !verdicts[1].violations.is_empty(),
        "with BATON_REDIS_WAIT_REPLICAS=0 no lease was lost at a failover to a lagging replica: the run proves nothing about WAIT"
    );
}
