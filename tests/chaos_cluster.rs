//! Chaos on Redis Cluster: two baton processes in cluster mode, clients
//! contending for locks spread over the three shards, while the test kills
//! (SIGKILL) the master of a lock's shard, waits for its replica to take over,
//! and brings the killed node back as a replica. Run twice: with
//! `BATON_REDIS_WAIT_REPLICAS=1` (an acknowledged lease is on a replica, so a
//! failover cannot lose it: 0 violations expected, and asserted) and with 0
//! (asynchronous replication: a lease acknowledged just before the kill can
//! be lost, so another client gets the lock too; the number is reported).

#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;
#[path = "support/chaos.rs"]
mod support;
#[allow(dead_code)]
#[path = "api/topology.rs"]
mod topology;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use support::{check_holds, holds_by_name, Hold, Instance};
use tokio::sync::watch;
use topology::RedisCluster;

const CHAOS_FOR: Duration = Duration::from_secs(20);
const LOCKS: [&str; 3] = ["deploy-a", "deploy-b", "deploy-c"];
const CLIENTS: usize = 9;
const TTL_MS: u64 = 2000;

#[derive(Default)]
struct Record {
    holds: Vec<Hold>,
    outcomes: BTreeMap<String, u64>,
    violations: Vec<String>,
}

async fn client_loop(
    id: usize,
    bases: Vec<String>,
    record: Arc<Mutex<Record>>,
    stop: watch::Receiver<bool>,
) {
    // reqwest's TLS (rustls) needs a crypto provider: ring, as baton's own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(8))
        .build()
        .unwrap();
    let name = LOCKS[id % LOCKS.len()];
    let body = format!(r#"{{"ttl_ms": {TTL_MS}, "wait_ms": 1000, "owner": "client-{id}"}}"#);
    let mut turn = id;
    while !*stop.borrow() {
        turn += 1;
        let base = &bases[turn % bases.len()];
        let requested = SystemTime::now();
        let response = match client
            .post(format!("{base}/locks/{name}"))
            .body(body.clone())
            .send()
            .await
        {
            Ok(response) => response,
            Err(err) => {
                record
                    .lock()
                    .unwrap()
                    .violations
                    .push(format!("acquire failed or hung: {err}"));
                continue;
            }
        };
        let status = response.status().as_u16();
        if status != 201 {
            let has_retry_after = response.headers().contains_key("retry-after");
            let body: Value = response.json().await.unwrap_or(Value::Null);
            let slug = body["type"].as_str().unwrap_or_default().rsplit('/').next();
            {
                let mut record = record.lock().unwrap();
                match (status, slug) {
                    (409, Some("lock-held")) | (503, Some("redis-unavailable"))
                        if has_retry_after =>
                    {
                        *record
                            .outcomes
                            .entry(format!("acquire {status}"))
                            .or_default() += 1;
                    }
                    _ => record
                        .violations
                        .push(format!("unclear answer {status}: {body}")),
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let start = SystemTime::now();
        let lease: Value = response.json().await.unwrap();
        let expires = humantime::parse_rfc3339(lease["expires_at"].as_str().unwrap()).unwrap();
        // The critical section.
        tokio::time::sleep(Duration::from_millis(5 + (turn as u64 % 20))).await;
        let end = SystemTime::now().min(expires);
        {
            let mut record = record.lock().unwrap();
            *record.outcomes.entry("acquire 201".into()).or_default() += 1;
            record.holds.push(Hold {
                name: name.to_owned(),
                token: lease["fencing_token"].as_u64().unwrap(),
                requested,
                start,
                end,
            });
        }
        let path = format!("/locks/{name}/{}", lease["id"].as_str().unwrap());
        for attempt in 0..20 {
            let base = &bases[(turn + attempt) % bases.len()];
            match client.delete(format!("{base}{path}")).send().await {
                Ok(r) if matches!(r.status().as_u16(), 204 | 404) => {
                    let key = format!("release {}", r.status().as_u16());
                    *record.lock().unwrap().outcomes.entry(key).or_default() += 1;
                    break;
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

/// Overlapping holds of one lock, tokens granted twice, and tokens that did
/// not rise after a hold that had ended before the next acquisition was sent.
fn check(record: &mut Record) {
    for (name, holds) in holds_by_name(&record.holds) {
        check_holds(&name, &holds, 1, &mut record.violations);
    }
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
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            tokio::spawn(client_loop(
                id,
                bases.clone(),
                record.clone(),
                stop_rx.clone(),
            ))
        })
        .collect();

    let mut cluster = cluster;
    let mut kills = 0;
    let started = Instant::now();
    // At least three kills, however slow the machine makes each failover.
    while started.elapsed() < CHAOS_FOR || kills < 3 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let key = format!("{prefix}{{lock:{}}}", LOCKS[kills as usize % LOCKS.len()]);
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
        kills += 1;
    }
    stop_tx.send(true).unwrap();
    for client in clients {
        tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .expect("every client stops")
            .expect("client task");
    }
    drop(instances);
    let mut record = std::mem::take(&mut *record.lock().unwrap());
    check(&mut record);
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
        assert!(holds > 50, "too few holds to mean anything");
        assert!(kills >= 3, "too few master kills");
        results.push((wait_replicas, violations));
    }
    let (_, with_wait) = &results[0];
    assert!(
        with_wait.is_empty(),
        "with BATON_REDIS_WAIT_REPLICAS=1 a failover lost an acknowledged lease: {with_wait:?}"
    );
}
