//! The core of the contract against Redis Cluster and Redis Sentinel (every
//! endpoint, waiting, wake-ups across instances), and failovers: a master
//! killed with SIGKILL while baton serves.
//!
//! The core tests share one cluster and one Sentinel set per test process;
//! each failover test starts its own. `BATON_REDIS_WAIT_REPLICAS` is tested
//! on a master and a replica of the test's own, whose replica it stops.

use std::time::{Duration, Instant};

use baton::config::Settings;
use serde_json::Value;

use baton_testkit::scenarios::{permits, shared};
use baton_testkit::topology::{
    cluster_settings, sentinel_settings, shared_cluster, shared_sentinels, RedisCluster,
    ReplicatedPair, SentinelSet,
};
use baton_testkit::{lease_path, problem, settings_for, token_of, unique_prefix, TestApp};

/// Every lock call: acquire, held, status, check, refresh, list, release,
/// force-release.
async fn locks_core(settings: Settings) {
    let app = TestApp::spawn_with(settings).await;

    // Names spread over every master of a cluster.
    let mut leases = Vec::new();
    for i in 0..12 {
        let lease = app
            .acquire_lock(&format!("core-{i}"), r#"{"ttl_ms": 30000, "owner": "ci"}"#)
            .await;
        leases.push(lease);
    }
    let first = &leases[0];
    problem(app.post("/locks/core-0", "{}").await, 409, "lock-held").await;

    let status: Value = app.get("/locks/core-0").await.json().await.unwrap();
    assert_eq!(status["held"], true);
    assert_eq!(status["owner"], "ci");
    assert_eq!(status["fencing_token"], first["fencing_token"]);

    assert_eq!(app.get(&lease_path("locks", first)).await.status(), 200);
    let refreshed = app
        .patch(&lease_path("locks", first), r#"{"ttl_ms": 60000}"#)
        .await;
    assert_eq!(refreshed.status(), 200);
    let refreshed: Value = refreshed.json().await.unwrap();
    assert_eq!(refreshed["ttl_ms"], 60000);

    let list: Value = app.get("/locks?prefix=core-").await.json().await.unwrap();
    let mut names: Vec<&str> = list["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    let mut expected: Vec<String> = (0..12).map(|i| format!("core-{i}")).collect();
    expected.sort();
    assert_eq!(
        names, expected,
        "every held lock listed once, from every master"
    );

    assert_eq!(app.delete(&lease_path("locks", first)).await.status(), 204);
    problem(
        app.delete(&lease_path("locks", first)).await,
        404,
        "lease-not-found",
    )
    .await;
    let again = app.acquire_lock("core-0", "{}").await;
    assert!(
        token_of(&again) > token_of(first),
        "tokens rise: {again} after {first}"
    );

    assert_eq!(app.delete("/locks/core-1").await.status(), 204);
    problem(app.delete("/locks/core-1").await, 404, "lock-not-held").await;
    let status: Value = app.get("/locks/core-1").await.json().await.unwrap();
    assert_eq!(status["held"], false);
}

/// Every semaphore call: acquire to the limit, full, status, check, refresh,
/// release.
async fn semaphores_core(settings: Settings) {
    let app = TestApp::spawn_with(settings).await;
    let body = r#"{"limit": 2, "ttl_ms": 30000}"#;
    let one: Value = app
        .post("/semaphores/pool", body)
        .await
        .json()
        .await
        .unwrap();
    let two: Value = app
        .post("/semaphores/pool", body)
        .await
        .json()
        .await
        .unwrap();
    assert!(token_of(&two) > token_of(&one), "{two} after {one}");
    problem(
        app.post("/semaphores/pool", body).await,
        409,
        "semaphore-full",
    )
    .await;

    let status: Value = app.get("/semaphores/pool").await.json().await.unwrap();
    assert_eq!(status["holders"], 2, "{status}");
    assert_eq!(app.get(&lease_path("semaphores", &one)).await.status(), 200);
    assert_eq!(
        app.patch(&lease_path("semaphores", &one), r#"{"ttl_ms": 5000}"#)
            .await
            .status(),
        200
    );
    assert_eq!(
        app.delete(&lease_path("semaphores", &one)).await.status(),
        204
    );
    problem(
        app.delete(&lease_path("semaphores", &one)).await,
        404,
        "lease-not-found",
    )
    .await;
    assert_eq!(app.post("/semaphores/pool", body).await.status(), 201);
}

/// A waiter on one instance is woken by a release on another, at once; and
/// by an expiry.
async fn waiting_core(settings: Settings) {
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;

    let held = a.acquire_lock("handoff", r#"{"ttl_ms": 30000}"#).await;
    let waiter = b.post_in_background("/locks/handoff", r#"{"wait_ms": 10000}"#);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    assert_eq!(a.delete(&lease_path("locks", &held)).await.status(), 204);
    let answer = waiter.await.unwrap();
    let woken_after = answer.at - released_at;
    assert_eq!(answer.response.status(), 201);
    println!("woken {woken_after:?} after a release on another instance");
    assert!(woken_after < Duration::from_millis(500), "{woken_after:?}");

    let sem = r#"{"limit": 1, "ttl_ms": 30000}"#;
    let slot: Value = a.post("/semaphores/line", sem).await.json().await.unwrap();
    let waiter = b.post_in_background(
        "/semaphores/line",
        r#"{"limit": 1, "ttl_ms": 30000, "wait_ms": 10000}"#,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    assert_eq!(
        a.delete(&lease_path("semaphores", &slot)).await.status(),
        204
    );
    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    assert!(answer.at - released_at < Duration::from_millis(500));

    a.acquire_lock("expiry", r#"{"ttl_ms": 400}"#).await;
    let started = Instant::now();
    let response = b.post("/locks/expiry", r#"{"wait_ms": 5000}"#).await;
    assert_eq!(response.status(), 201);
    assert!(started.elapsed() < Duration::from_millis(1500));
}

/// Shared locks and permits across two instances: readers together, a
/// writer waiting for the last of them, readers queued behind a writer,
/// tokens across modes, force-release, a writer that gives up or readers
/// that expire; permits counted, and a large request at the head of the
/// line not overtaken (and leaving room when it gives up).
async fn shared_and_permits_core(settings: Settings) {
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    shared::readers_hold_the_lock_together(&a, &b).await;
    shared::a_writer_waits_for_the_last_reader(&a, &b).await;
    shared::a_reader_behind_a_queued_writer_waits(&a, &b).await;
    shared::tokens_rise_across_modes(&a, &b).await;
    shared::force_release_ends_every_shared_lease(&a, &b).await;
    shared::readers_behind_a_writer_that_gives_up_move_up(&a, &b).await;
    shared::a_writer_waits_for_the_last_reader_to_expire(&a, &b).await;
    permits::permits_are_counted(&a, &b).await;
    permits::a_large_request_is_not_overtaken(&a, &b).await;
    permits::small_requests_behind_a_large_one_that_gives_up_move_up(&a, &b).await;
}

/// The service endpoints see the deployment.
async fn service_core(settings: Settings) {
    let app = TestApp::spawn_with(settings).await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/readyz").await.status(), 200);
    assert_eq!(app.get("/metrics").await.status(), 200);
    assert_eq!(app.get("/openapi.json").await.status(), 200);
}

macro_rules! core_suite {
    ($mode:ident, $settings:expr) => {
        mod $mode {
            use super::*;

            #[tokio::test]
            async fn locks() {
                locks_core($settings).await;
            }

            #[tokio::test]
            async fn semaphores() {
                semaphores_core($settings).await;
            }

            #[tokio::test]
            async fn waiting_across_instances() {
                waiting_core($settings).await;
            }

            #[tokio::test]
            async fn shared_locks_and_permits_across_instances() {
                shared_and_permits_core($settings).await;
            }

            #[tokio::test]
            async fn service() {
                service_core($settings).await;
            }
        }
    };
}

core_suite!(cluster, cluster_settings(shared_cluster()));

/// On a cluster a waiter's instance listens on the name's shard only
/// (SSUBSCRIBE on a channel in the name's slot), and only while it waits.
#[tokio::test]
async fn cluster_wake_ups_use_sharded_pub_sub_on_the_names_shard_while_waiting() {
    let cluster = shared_cluster();
    let settings = cluster_settings(cluster);
    let channel = format!("{}{{lock:sharded}}:events", settings.key_prefix);
    let app = TestApp::spawn_with(settings).await;
    let master = cluster
        .nodes
        .iter()
        .find(|n| n.port == cluster.master_of(&channel))
        .expect("the channel's master");
    let listeners = |sharded: bool| -> i64 {
        let mut conn = master.conn().unwrap();
        let counts: Vec<redis::Value> = redis::cmd("PUBSUB")
            .arg(if sharded { "SHARDNUMSUB" } else { "NUMSUB" })
            .arg(&channel)
            .query(&mut conn)
            .unwrap();
        match counts.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("PUBSUB answered {other:?}"),
        }
    };

    let held = app.acquire_lock("sharded", r#"{"ttl_ms": 30000}"#).await;
    let waiter = app.post_in_background("/locks/sharded", r#"{"wait_ms": 10000}"#);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(listeners(true), 1, "one shard subscription while waiting");
    assert_eq!(listeners(false), 0, "no classic subscription");
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    assert_eq!(waiter.await.unwrap().response.status(), 201);
    let deadline = Instant::now() + Duration::from_secs(5);
    while listeners(true) != 0 {
        assert!(
            Instant::now() < deadline,
            "still subscribed with nobody waiting"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
core_suite!(sentinel, sentinel_settings(shared_sentinels()));

/// Polls `POST /locks/{name}` while Redis fails over: every answer is 201 or a
/// prompt 503 `redis-unavailable` with `Retry-After` (or 409 while an old
/// lease lasts); returns when the first 201 came and its token.
async fn serve_through(app: &TestApp, name: &str, within: Duration) -> (Instant, u64) {
    let started = Instant::now();
    let deadline_per_call = Duration::from_millis(2500);
    let (mut unavailable, mut slowest) = (0, Duration::ZERO);
    loop {
        let sent = Instant::now();
        let response = app
            .post(&format!("/locks/{name}"), r#"{"ttl_ms": 200}"#)
            .await;
        let took = sent.elapsed();
        slowest = slowest.max(took);
        assert!(took < deadline_per_call, "a call hung for {took:?}");
        if response.status() == 201 {
            println!("{unavailable} answers 503 meanwhile, the slowest call took {slowest:?}");
            assert!(unavailable > 0, "the failover was not seen at all");
            let lease: Value = response.json().await.unwrap();
            return (Instant::now(), lease["fencing_token"].as_u64().unwrap());
        }
        assert!(
            response.headers().contains_key("retry-after"),
            "503 without Retry-After"
        );
        let status = response.status().as_u16();
        assert!(
            status == 503 || status == 409,
            "unexpected {status} during a failover"
        );
        if status == 503 {
            unavailable += 1;
            problem(response, 503, "redis-unavailable").await;
        }
        assert!(
            started.elapsed() < within,
            "not serving again after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Acquires `name` a few times; returns the largest token.
async fn tokens_before(app: &TestApp, name: &str) -> u64 {
    let mut largest = 0;
    for _ in 0..5 {
        let lease = app.acquire_lock(name, r#"{"ttl_ms": 30000}"#).await;
        largest = largest.max(lease["fencing_token"].as_u64().unwrap());
        assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
    }
    largest
}

#[tokio::test]
async fn cluster_master_killed_baton_serves_again_without_restart_and_tokens_rise() {
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let settings = cluster_settings(&cluster);
    let key = format!("{}{{lock:victim}}", settings.key_prefix);
    let app = TestApp::spawn_with(settings).await;
    let largest = tokens_before(&app, "victim").await;
    // Held across the kill, briefly, so that it is gone by the time a replica
    // has taken over, whether it was replicated or not.
    let held = app.acquire_lock("victim", r#"{"ttl_ms": 1000}"#).await;

    let master = cluster.master_of(&key);
    cluster.kill(master);
    let killed_at = Instant::now();
    // Calls go on while the cluster fails over, so the outage is seen.
    let failing_over = tokio::task::spawn_blocking(move || {
        let took = cluster.wait_for_failover(&key, master, Duration::from_secs(20));
        (cluster, took)
    });
    let (serving_at, token) = serve_through(&app, "victim", Duration::from_secs(30)).await;
    let (cluster, failover) = failing_over.await.unwrap();
    println!("cluster failover took {failover:?}");
    let back_after = serving_at.duration_since(killed_at);
    println!("serving again {back_after:?} after the kill ({failover:?} failover)");
    assert!(
        back_after < failover + Duration::from_secs(2),
        "serving again {back_after:?} after the kill, failover took {failover:?}"
    );
    assert!(token > largest, "token {token} after {largest}");
    assert!(token > token_of(&held), "token {token} after {held}");

    // The killed master comes back as a replica of its successor; baton
    // keeps serving from the new master.
    let mut cluster = cluster;
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.node(master).restart();
        cluster.wait_for_replicas(Duration::from_secs(20));
        cluster
    })
    .await
    .unwrap();
    let after = app.acquire_lock("victim", "{}").await;
    assert!(token_of(&after) > token, "{after} after token {token}");
    drop(cluster);
}

#[tokio::test]
async fn sentinel_master_killed_baton_follows_the_failover_and_tokens_rise() {
    let mut set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap();
    let app = TestApp::spawn_with(sentinel_settings(&set)).await;
    let largest = tokens_before(&app, "victim").await;
    let old_master = set.master.port;
    // A waiter on another instance, in line behind a holder, across the failover.
    let mut other_settings = sentinel_settings(&set);
    other_settings.key_prefix = app.prefix.clone();
    let other = TestApp::spawn_with(other_settings).await;
    let held = app.acquire_lock("line", r#"{"ttl_ms": 60000}"#).await;
    let waiter = other.post_in_background("/locks/line", r#"{"wait_ms": 30000}"#);
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_until_replicated(&set);

    set.master.kill();
    let killed_at = Instant::now();
    // Calls go on while the sentinels fail over, so the outage is seen.
    let failing_over = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        while set.master_port() == Some(old_master) {
            assert!(started.elapsed() < Duration::from_secs(30), "no failover");
            std::thread::sleep(Duration::from_millis(50));
        }
        (set, started.elapsed())
    });
    let (serving_at, token) = serve_through(&app, "victim", Duration::from_secs(30)).await;
    let (set, failover) = failing_over.await.unwrap();
    println!("sentinel failover took {failover:?}");
    assert_eq!(set.master_port(), Some(set.replica.port));
    let back_after = serving_at.duration_since(killed_at);
    println!("serving again {back_after:?} after the kill ({failover:?} failover)");
    assert!(
        back_after < failover + Duration::from_secs(2),
        "serving again {back_after:?} after the kill, failover took {failover:?}"
    );
    assert!(token > largest, "token {token} after {largest}");

    // The waiter kept its place; the release on the new master reaches it.
    let released_at = Instant::now();
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let answer = waiter.await.unwrap();
    assert_eq!(
        answer.response.status(),
        201,
        "the waiter is served after the failover"
    );
    let woken_after = answer.at.saturating_duration_since(released_at);
    println!("waiter served {woken_after:?} after the release on the new master");
    assert!(woken_after < Duration::from_secs(1), "{woken_after:?}");
}

/// Waits until the replica has everything the master has.
fn wait_until_replicated(set: &SentinelSet) {
    let offset = |node: &baton_testkit::topology::Node, field: &str| -> Option<i64> {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut node.conn().ok()?)
            .ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().parse().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while offset(&set.master, "master_repl_offset:") != offset(&set.replica, "slave_repl_offset:") {
        assert!(Instant::now() < deadline, "the replica does not catch up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `check` every 20 ms until it holds; panics with `what` after `within`.
async fn until(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} (after {within:?})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Settings for a baton on `pair`'s master, asking `replicas` replicas for
/// every acquisition, with `redis_timeout` (WAIT gets half of it).
fn waiting_for_replicas(pair: &ReplicatedPair, replicas: u32, redis_timeout: Duration) -> Settings {
    let mut settings = settings_for(&pair.master.url(), &unique_prefix());
    settings.redis_wait_replicas = replicas;
    settings.redis_timeout = redis_timeout;
    settings
}

/// With `BATON_REDIS_WAIT_REPLICAS=1`, a 201 waits for the replica. The
/// replica is stopped (SIGSTOP) before the acquisition: the acquisition
/// reaches the master and blocks there in `WAIT` (the master counts a blocked
/// client), is not answered while the replica stays stopped, and is answered
/// 201 only after the replica resumes, with the lease on the replica. No
/// duration is asserted: `WAIT` gets 10 s here, and the stop is ended as soon
/// as the blocked client is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_a_201_is_answered_only_after_a_stopped_replica_resumes() {
    let pair = tokio::task::spawn_blocking(ReplicatedPair::start)
        .await
        .unwrap();
    let app = TestApp::spawn_with(waiting_for_replicas(&pair, 1, Duration::from_secs(20))).await;
    app.acquire_lock("warm-up", "{}").await;
    assert_eq!(pair.master.info_field("blocked_clients"), Some(0));

    pair.replica.pause();
    let acquisition = app.post_in_background("/locks/durable", r#"{"ttl_ms": 60000}"#);
    until(
        Duration::from_secs(10),
        "the acquisition never waited for the replica on the master",
        || {
            assert!(
                !acquisition.is_finished(),
                "answered while the replica was stopped, without waiting for it"
            );
            pair.master.info_field("blocked_clients") == Some(1)
        },
    )
    .await;
    // Blocked in WAIT it stays, however long the replica is stopped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !acquisition.is_finished(),
        "answered while the replica was stopped"
    );
    let resumed_at = Instant::now();
    pair.replica.resume();

    let answer = acquisition.await.unwrap();
    assert!(
        answer.at >= resumed_at,
        "answered before the replica resumed"
    );
    assert_eq!(answer.response.status(), 201);
    let lease: Value = answer.response.json().await.unwrap();
    let key = format!("{}{{lock:durable}}:owners", app.prefix);
    let on_replica: bool = redis::cmd("EXISTS")
        .arg(&key)
        .query(&mut pair.replica.conn().unwrap())
        .unwrap();
    assert!(on_replica, "the 201 lease is on the replica");
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
}

/// With `BATON_REDIS_WAIT_REPLICAS`, an acquisition the replicas do not
/// acknowledge in time is answered 503 while the replica is still stopped,
/// and what it took is given back; as when more replicas are asked for than
/// exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_a_stopped_replica_or_too_few_replicas_answer_503_and_leave_nothing_held(
) {
    let pair = tokio::task::spawn_blocking(ReplicatedPair::start)
        .await
        .unwrap();
    let settings = waiting_for_replicas(&pair, 1, Duration::from_millis(1000));
    let prefix = settings.key_prefix.clone();
    let one = TestApp::spawn_with(settings).await;
    one.acquire_lock("warm-up", "{}").await;

    pair.replica.pause();
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        one.post_in_background("/locks/durable", "{}"),
    )
    .await
    .expect("an answer while the replica is stopped")
    .unwrap();
    assert!(answer.response.headers().contains_key("retry-after"));
    problem(answer.response, 503, "redis-unavailable").await;
    pair.replica.resume();

    // Two replicas are asked for, one exists: 503 too.
    let mut settings = waiting_for_replicas(&pair, 2, Duration::from_millis(1000));
    settings.key_prefix = prefix;
    let two = TestApp::spawn_with(settings).await;
    let response = two.post("/locks/durable", "{}").await;
    assert!(response.headers().contains_key("retry-after"));
    problem(response, 503, "redis-unavailable").await;
    let sem = two.post("/semaphores/durable", r#"{"limit": 1}"#).await;
    problem(sem, 503, "redis-unavailable").await;

    // The undone acquisitions leave the names free.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let lock: Value = one.get("/locks/durable").await.json().await.unwrap();
        let sem: Value = one.get("/semaphores/durable").await.json().await.unwrap();
        if lock["held"] == false && sem["holders"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "left held: {lock} {sem}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// With `BATON_REDIS_WAIT_REPLICAS`, a refresh's new expiry is a promise
/// like a grant's: while the replica is stopped the refresh is answered 503
/// (the holder keeps the expiry it was told before, which the replica has),
/// and once it resumes the refresh is answered 200, with the new expiry on
/// the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_a_refresh_is_answered_only_once_the_replica_has_it() {
    let pair = tokio::task::spawn_blocking(ReplicatedPair::start)
        .await
        .unwrap();
    let app =
        TestApp::spawn_with(waiting_for_replicas(&pair, 1, Duration::from_millis(1000))).await;
    let lease = app.acquire_lock("extended", r#"{"ttl_ms": 60000}"#).await;
    let path = lease_path("locks", &lease);

    pair.replica.pause();
    let refreshed = tokio::time::timeout(
        Duration::from_secs(30),
        app.patch(&path, r#"{"ttl_ms": 600000}"#),
    )
    .await
    .expect("an answer while the replica is stopped");
    problem(refreshed, 503, "redis-unavailable").await;
    pair.replica.resume();

    let refreshed = app.patch(&path, r#"{"ttl_ms": 600000}"#).await;
    assert_eq!(refreshed.status(), 200);
    let body: Value = refreshed.json().await.unwrap();
    let promised = body["expires_at"].as_str().unwrap().to_owned();
    // The replica has the new expiry: the lease's score there is at least
    // nine minutes away (its ttl was 60 s before the refresh).
    let key = format!("{}{{lock:extended}}:owners", app.prefix);
    let mut replica = pair.replica.conn().unwrap();
    let packed: Option<String> = redis::cmd("HGET")
        .arg(&key)
        .arg("solo")
        .query(&mut replica)
        .unwrap();
    let (expires_ms, _) = packed
        .as_deref()
        .and_then(|p| p.split_once('|'))
        .expect("the solo lease on the replica");
    let now_ms: Vec<u64> = redis::cmd("TIME").query(&mut replica).unwrap();
    let left = expires_ms.parse::<u64>().unwrap() - now_ms[0] * 1000;
    assert!(
        left > 540_000,
        "{left} ms left on the replica, promised {promised}"
    );
    assert_eq!(app.delete(&path).await.status(), 204);
}
