//! Chaos test of mutual exclusion: two baton processes on one persistent Redis,
//! many clients contending for a few locks and a semaphore through both, while
//! the test kills and restarts Redis and the baton processes (which always
//! have waiters queued in the line). A checker then asserts that no two
//! leases of a lock overlapped, the semaphore never went over its limit,
//! fencing tokens never went backwards (across Redis restarts too), every
//! request got its lease or a clear error, and no waiter of a live instance
//! was left waiting more than 5 s while its lock was free.

#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;
#[path = "support/chaos.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use helpers::RedisServer;
use serde_json::Value;
use support::{check_holds, holds_by_name, Hold, Instance};
use tokio::sync::watch;

const CHAOS_FOR: Duration = Duration::from_secs(40);
const LOCKS: [&str; 3] = ["deploy-a", "deploy-b", "deploy-c"];
const SEMAPHORE: &str = "workers";
const LIMIT: usize = 2;
const LOCK_CLIENTS: usize = 9;
const SEMAPHORE_CLIENTS: usize = 5;
const TTL_MS: u64 = 2000;
/// Lock waiters wait this long, so a line stuck behind a dead waiter shows.
const LOCK_WAIT_MS: u64 = 7000;
/// A lock free this long with a live waiter in line is a violation.
const STUCK: Duration = Duration::from_secs(5);

/// A lock request that a live instance answered (201 or 409): it waited in
/// line from `requested` to `answered`.
#[derive(Debug, Clone)]
struct Wait {
    name: String,
    requested: SystemTime,
    answered: SystemTime,
}

#[derive(Default)]
struct Record {
    holds: Vec<Hold>,
    waits: Vec<Wait>,
    outcomes: BTreeMap<String, u64>,
    violations: Vec<String>,
}

impl Record {
    fn count(&mut self, outcome: impl Into<String>) {
        *self.outcomes.entry(outcome.into()).or_default() += 1;
    }
}

/// Classifies a non-201 answer: a clear error is a problem+json with a known
/// status; anything else is a violation.
async fn classify(response: reqwest::Response) -> Result<String, String> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let slug = body["type"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    if content_type == "application/problem+json" && matches!(status, 404 | 409 | 503) {
        Ok(format!("{status} {slug}"))
    } else {
        Err(format!("unclear answer {status} {content_type}: {body}"))
    }
}

async fn client_loop(
    id: usize,
    bases: Vec<String>,
    record: Arc<Mutex<Record>>,
    mut stop: watch::Receiver<bool>,
) {
    // reqwest's TLS (rustls) needs a crypto provider: ring, as baton's own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(LOCK_WAIT_MS + 5000))
        .build()
        .unwrap();
    let (kind, name, body) = if id < LOCK_CLIENTS {
        let name = LOCKS[id % LOCKS.len()];
        (
            "locks",
            name,
            format!(r#"{{"ttl_ms": {TTL_MS}, "wait_ms": {LOCK_WAIT_MS}, "owner": "client-{id}"}}"#),
        )
    } else {
        (
            "semaphores",
            SEMAPHORE,
            format!(
                r#"{{"limit": {LIMIT}, "ttl_ms": {TTL_MS}, "wait_ms": 1000, "owner": "client-{id}"}}"#
            ),
        )
    };
    let mut turn = id;
    while !*stop.borrow() {
        turn += 1;
        let base = &bases[turn % bases.len()];
        let requested = SystemTime::now();
        let sent = client
            .post(format!("{base}/{kind}/{name}"))
            .body(body.clone())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(err) if err.is_timeout() => {
                record
                    .lock()
                    .unwrap()
                    .violations
                    .push(format!("acquire hung: {err}"));
                continue;
            }
            Err(_) => {
                // The instance is down: a clear error for the client.
                record.lock().unwrap().count("connection refused");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if kind == "locks" && matches!(response.status().as_u16(), 201 | 409) {
            record.lock().unwrap().waits.push(Wait {
                name: name.to_owned(),
                requested,
                answered: SystemTime::now(),
            });
        }
        if response.status() != 201 {
            let outcome = classify(response).await;
            {
                let mut record = record.lock().unwrap();
                match outcome {
                    Ok(outcome) => record.count(format!("acquire {outcome}")),
                    Err(violation) => record.violations.push(violation),
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let start = SystemTime::now();
        let lease: Value = response.json().await.unwrap();
        let token = lease["fencing_token"].as_u64().unwrap();
        let expires = humantime::parse_rfc3339(lease["expires_at"].as_str().unwrap()).unwrap();
        record.lock().unwrap().count("acquire 201");
        // The critical section.
        tokio::time::sleep(Duration::from_millis(5 + (turn as u64 % 20))).await;
        let end = SystemTime::now().min(expires);
        record.lock().unwrap().holds.push(Hold {
            name: name.to_owned(),
            token,
            requested,
            start,
            end,
        });
        // Release, through either instance, until some answer comes.
        let path = format!("/{kind}/{name}/{}", lease["id"].as_str().unwrap());
        for attempt in 0..20 {
            let base = &bases[(turn + attempt) % bases.len()];
            match client.delete(format!("{base}{path}")).send().await {
                Ok(response) if response.status() == 204 => {
                    record.lock().unwrap().count("release 204");
                    break;
                }
                Ok(response) => {
                    let outcome = classify(response).await;
                    let mut record = record.lock().unwrap();
                    match outcome {
                        Ok(outcome) if outcome.starts_with("404") => {
                            record.count(format!("release {outcome}"));
                            break;
                        }
                        Ok(outcome) => record.count(format!("release {outcome}")),
                        Err(violation) => {
                            record.violations.push(violation);
                            break;
                        }
                    }
                }
                Err(_) => record.lock().unwrap().count("connection refused"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if stop.has_changed().unwrap_or(true) && *stop.borrow_and_update() {
            break;
        }
    }
}

fn check(record: &mut Record) {
    for (name, holds) in holds_by_name(&record.holds) {
        let limit = if name == SEMAPHORE { LIMIT } else { 1 };
        check_holds(&name, &holds, limit, &mut record.violations);
        if name != SEMAPHORE {
            stuck_waiters(&name, &holds, &record.waits, &mut record.violations);
        }
    }
}

/// Finds the times `name` was free for more than [`STUCK`] while a waiter of a
/// live instance was in line all along.
fn stuck_waiters(name: &str, holds: &[Hold], waits: &[Wait], violations: &mut Vec<String>) {
    let mut free_since: Option<SystemTime> = None;
    let mut gaps = Vec::new();
    for hold in holds {
        if let Some(since) = free_since {
            if hold.start > since {
                gaps.push((since, hold.start));
            }
        }
        free_since = Some(free_since.map_or(hold.end, |s| s.max(hold.end)));
    }
    for (free, taken) in gaps {
        let Ok(length) = taken.duration_since(free) else {
            continue;
        };
        if length <= STUCK {
            continue;
        }
        if let Some(w) = waits
            .iter()
            .find(|w| w.name == name && w.requested <= free && w.answered >= free + STUCK)
        {
            violations.push(format!(
                "{name}: free for {length:?} from {free:?} while a waiter (sent {:?}) was in line",
                w.requested
            ));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutual_exclusion_holds_through_redis_restarts_and_baton_crashes() {
    let mut redis = RedisServer::start_persistent();
    let prefix = helpers::unique_prefix();
    let mut instances = [
        Instance::start(&[
            ("BATON_REDIS_URL", &redis.url()),
            ("BATON_KEY_PREFIX", &prefix),
        ]),
        Instance::start(&[
            ("BATON_REDIS_URL", &redis.url()),
            ("BATON_KEY_PREFIX", &prefix),
        ]),
    ];
    let bases: Vec<String> = instances.iter().map(Instance::base).collect();
    let record = Arc::new(Mutex::new(Record::default()));
    let (stop_tx, stop_rx) = watch::channel(false);

    let clients: Vec<_> = (0..LOCK_CLIENTS + SEMAPHORE_CLIENTS)
        .map(|id| {
            tokio::spawn(client_loop(
                id,
                bases.clone(),
                record.clone(),
                stop_rx.clone(),
            ))
        })
        .collect();

    let mut faults: BTreeMap<&str, u32> = BTreeMap::new();
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < CHAOS_FOR {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        round += 1;
        match round % 3 {
            0 => {
                tokio::task::block_in_place(|| redis.kill());
                tokio::time::sleep(Duration::from_millis(700)).await;
                tokio::task::block_in_place(|| redis.restart());
                *faults.entry("redis killed and restarted").or_default() += 1;
            }
            1 => {
                let victim = &mut instances[round % 2];
                tokio::task::block_in_place(|| victim.kill());
                tokio::time::sleep(Duration::from_millis(500)).await;
                tokio::task::block_in_place(|| victim.launch());
                *faults
                    .entry("baton killed (SIGKILL) and restarted")
                    .or_default() += 1;
            }
            _ => {
                let victim = &mut instances[round % 2];
                let status = tokio::task::block_in_place(|| victim.terminate());
                assert!(
                    status.is_some_and(|s| s.success()),
                    "SIGTERM exit status {status:?}"
                );
                tokio::task::block_in_place(|| victim.launch());
                *faults
                    .entry("baton stopped (SIGTERM, exit 0) and restarted")
                    .or_default() += 1;
            }
        }
    }
    stop_tx.send(true).unwrap();
    for client in clients {
        tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .expect("every client stops")
            .expect("client task");
    }

    let mut record = record.lock().unwrap();
    check(&mut record);
    println!(
        "chaos: {:?} with {} lock clients on {} locks and {} semaphore clients (limit {LIMIT})",
        CHAOS_FOR,
        LOCK_CLIENTS,
        LOCKS.len(),
        SEMAPHORE_CLIENTS
    );
    println!("holds checked: {}", record.holds.len());
    println!(
        "lock waits checked for a stuck line: {}",
        record.waits.len()
    );
    for (fault, n) in &faults {
        println!("fault: {fault}: {n}");
    }
    for (outcome, n) in &record.outcomes {
        println!("outcome: {outcome}: {n}");
    }
    println!("violations: {}", record.violations.len());
    for v in record.violations.iter().take(20) {
        println!("  {v}");
    }
    assert!(
        record.violations.is_empty(),
        "{} violations",
        record.violations.len()
    );
    assert!(record.holds.len() > 100, "too few holds to mean anything");
    assert!(faults.values().sum::<u32>() >= 6, "too few faults injected");
}

#[test]
fn the_checker_catches_overlaps_excess_holders_and_backward_tokens() {
    let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    let hold = |name: &str, token, requested, start, end| Hold {
        name: name.into(),
        token,
        requested: at(requested),
        start: at(start),
        end: at(end),
    };
    let mut fine = Record {
        holds: vec![
            hold("deploy-a", 1, 0, 10, 20),
            hold("deploy-a", 2, 5, 20, 30),
            hold(SEMAPHORE, 5, 0, 0, 50),
            hold(SEMAPHORE, 6, 0, 10, 60),
        ],
        ..Record::default()
    };
    check(&mut fine);
    assert!(fine.violations.is_empty(), "{:?}", fine.violations);

    let mut overlap = Record {
        holds: vec![
            hold("deploy-a", 1, 0, 10, 20),
            hold("deploy-a", 2, 0, 15, 30),
        ],
        ..Record::default()
    };
    check(&mut overlap);
    assert_eq!(overlap.violations.len(), 1, "{:?}", overlap.violations);

    let mut crowded = Record {
        holds: (0..3).map(|i| hold(SEMAPHORE, 10 + i, 0, 10, 20)).collect(),
        ..Record::default()
    };
    check(&mut crowded);
    assert!(!crowded.violations.is_empty());

    let mut backwards = Record {
        holds: vec![
            hold("deploy-b", 9, 0, 10, 20),
            hold("deploy-b", 3, 25, 30, 40),
        ],
        ..Record::default()
    };
    check(&mut backwards);
    assert_eq!(backwards.violations.len(), 1, "{:?}", backwards.violations);

    let wait = |requested, answered| Wait {
        name: "deploy-c".into(),
        requested: at(requested),
        answered: at(answered),
    };
    let mut stuck = Record {
        holds: vec![
            hold("deploy-c", 1, 0, 0, 1000),
            hold("deploy-c", 2, 500, 7000, 8000),
        ],
        waits: vec![wait(500, 8000)],
        ..Record::default()
    };
    check(&mut stuck);
    assert_eq!(stuck.violations.len(), 1, "{:?}", stuck.violations);

    let mut served = Record {
        holds: vec![
            hold("deploy-c", 1, 0, 0, 1000),
            hold("deploy-c", 2, 500, 1010, 2000),
            hold("deploy-c", 3, 9000, 9000, 9500),
        ],
        waits: vec![wait(500, 1010)],
        ..Record::default()
    };
    check(&mut served);
    assert!(served.violations.is_empty(), "{:?}", served.violations);
}
