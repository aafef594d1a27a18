//! Chaos on Redis Cluster: two baton processes in cluster mode, clients
//! contending for locks spread over the three shards (each acquisition shared
//! or exclusive at random), while the test kills
//! (SIGKILL) the master of a lock's shard, waits for its replica to take over,
//! and brings the killed node back as a replica. Run twice: with
//! `BATON_REDIS_WAIT_REPLICAS=1` (an acknowledged lease is on a replica, so a
//! failover cannot lose it: 0 violations expected, and asserted) and with 0
//! (asynchronous replication: a lease acknowledged just before the kill can
//! be lost, so another client gets the lock too; the number is reported).
//! The checks count capacity: a lock is held by one exclusive lease alone or
//! by shared leases only.

#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;
#[allow(dead_code)] // the fault tests use the rest
#[path = "support/chaos.rs"]
mod support;
#[allow(dead_code)]
#[path = "api/topology.rs"]
mod topology;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use support::{
    check_holds, client_loop, holds_by_name, unexplained_failures, Asks, Fault, Instance, Record,
    Rng, Target, Workload, LOCK_CAPACITY,
};
use tokio::sync::watch;
use topology::RedisCluster;

const CHAOS_FOR: Duration = Duration::from_secs(20);
const LOCKS: [&str; 6] = [
    "deploy-a", "deploy-b", "deploy-c", "deploy-d", "deploy-e", "deploy-f",
];
const CLIENTS: usize = 12;
/// Leases outlive a failover (about 3 s here) by far, and clients hold them
/// up to 4 s: a lease acknowledged just before its master is killed is still
/// held, as told, when the promoted replica could grant it again.
const TTL_MS: u64 = 12_000;
const HOLD_UP_TO: Duration = Duration::from_secs(4);

/// Overlapping holds of one lock (an exclusive one beside any other), tokens
/// granted twice, and tokens that did not rise after a hold whose 201 had
/// arrived before the next acquisition was sent.
fn check(record: &mut Record, faults: &[Fault]) {
    let mut violations = Vec::new();
    for (name, holds) in holds_by_name(&record.holds) {
        check_holds(&name, &holds, LOCK_CAPACITY, &mut violations);
    }
    unexplained_failures(record, faults, &mut violations);
    record.violations.extend(violations);
}

/// Runs the clients against a fresh pair of batons while killing masters;
/// returns (violations, holds, kills, outcomes).
async fn run(
    cluster: RedisCluster,
    wait_replicas: u32,
) -> (RedisCluster, Vec<String>, usize, u32, BTreeMap<String, u64>) {
    let prefix = helpers::unique_prefix();
    let (seeds, wait) = (cluster.seeds(), wait_replicas.to_string());
    let env = [
        ("BATON_REDIS_MODE", "cluster"),
        ("BATON_REDIS_URL", seeds.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_REDIS_WAIT_REPLICAS", wait.as_str()),
    ];
    let instances = [Instance::start(&env), Instance::start(&env)];
    let bases: Vec<String> = instances.iter().map(Instance::base).collect();
    let record = Arc::new(Mutex::new(Record::default()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let seed = Rng::seed();
    println!("chaos seed: {seed}");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let work = Workload {
                path: format!("locks/{}", LOCKS[id % LOCKS.len()]),
                body: json!({"ttl_ms": TTL_MS, "wait_ms": 1000, "owner": format!("client-{id}")}),
                asks: Asks::SharedOrExclusive,
                hold_up_to: HOLD_UP_TO,
                timeout: Duration::from_secs(12),
            };
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
    let mut faults = Vec::new();

    let mut cluster = cluster;
    let mut kills = 0;
    let started = Instant::now();
    // At least three kills, however slow the machine makes each failover.
    while started.elapsed() < CHAOS_FOR || kills < 3 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let key = format!("{prefix}{{lock:{}}}", LOCKS[kills as usize % LOCKS.len()]);
        let from = SystemTime::now();
        cluster = tokio::task::spawn_blocking(move || {
            let master = cluster.master_of(&key);
            cluster.kill(master);
            cluster.wait_for_failover(&key, master, Duration::from_secs(20));
            cluster.node(master).restart();
            cluster.wait_for_replicas(Duration::from_secs(30));
            cluster
        })
        .await
        .unwrap();
        faults.push(Fault {
            target: Target::Redis,
            what: "master killed, failed over, back as a replica",
            from,
            to: SystemTime::now(),
        });
        kills += 1;
    }
    stop_tx.send(true).unwrap();
    for client in clients {
        tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .expect("every client stops")
            .expect("client task");
    }
    let mut instances = instances;
    for (i, instance) in instances.iter_mut().enumerate() {
        assert!(instance.alive(), "baton instance {i} died unasked");
    }
    drop(instances);
    let mut record = std::mem::take(&mut *record.lock().unwrap());
    check(&mut record, &faults);
    (
        cluster,
        record.violations,
        record.holds.len(),
        kills,
        record.outcomes,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn master_kills_on_a_cluster_with_and_without_waiting_for_replicas() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let mut results = Vec::new();
    let mut cluster = Some(cluster);
    for wait_replicas in [1, 0] {
        let (back, violations, holds, kills, outcomes) =
            run(cluster.take().unwrap(), wait_replicas).await;
        cluster = Some(back);
        println!(
            "BATON_REDIS_WAIT_REPLICAS={wait_replicas}: {} violations in {holds} holds, {kills} master kills; {outcomes:?}",
            violations.len()
        );
        for v in violations.iter().take(10) {
            println!("  {v}");
        }
        assert!(holds > 30, "too few holds to mean anything");
        assert!(kills >= 3, "too few master kills");
        results.push((wait_replicas, violations));
    }
    let (_, with_wait) = &results[0];
    assert!(
        with_wait.is_empty(),
        "with BATON_REDIS_WAIT_REPLICAS=1 a failover lost an acknowledged lease: {with_wait:?}"
    );
}
