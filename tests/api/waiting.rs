//! Waiting with `wait_ms`: woken by a release (on this or another instance),
//! woken at expiry, timing out; no Redis traffic while asleep; many contenders.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{lease_path, problem, settings_for, unique_prefix, RedisServer, TestApp};

#[tokio::test]
async fn a_waiter_is_woken_by_the_release_within_milliseconds() {
    let app = TestApp::spawn().await;
    let mut wakeups = Vec::new();
    for _ in 0..10 {
        let held = app.acquire_lock("relay", r#"{"ttl_ms": 30000}"#).await;
        let waiter = app.post_in_background("/locks/relay", r#"{"wait_ms": 10000}"#);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released_at = Instant::now();
        assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
        let answer = waiter.await.unwrap();
        assert_eq!(answer.response.status(), 201);
        let (acquired_at, lease): (_, Value) = (answer.at, answer.response.json().await.unwrap());
        wakeups.push(acquired_at - released_at);
        app.delete(&lease_path("locks", &lease)).await;
    }
    wakeups.sort();
    let median = wakeups[wakeups.len() / 2];
    let worst = wakeups[wakeups.len() - 1];
    println!(
        "wake-up after release (DELETE sent -> waiter's 201): median {median:?}, max {worst:?}"
    );
    // Generous slack for a shared 2-core machine; the design goal is a few ms.
    assert!(
        median < Duration::from_millis(50),
        "median wake-up {median:?}"
    );
    assert!(
        worst < Duration::from_millis(500),
        "slowest wake-up {worst:?}"
    );
}

#[tokio::test]
async fn a_waiter_is_woken_when_the_holder_s_lease_expires() {
    let app = TestApp::spawn().await;
    app.acquire_lock("expiring", r#"{"ttl_ms": 400}"#).await;
    let started = Instant::now();

    let response = app.post("/locks/expiring", r#"{"wait_ms": 5000}"#).await;

    let waited = started.elapsed();
    assert_eq!(response.status(), 201);
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(1500),
        "acquired after {waited:?}, the lease expired after about 400 ms"
    );
}

#[tokio::test]
async fn a_waiter_gives_up_after_wait_ms_with_409() {
    let app = TestApp::spawn().await;
    app.acquire_lock("patience", r#"{"ttl_ms": 30000, "owner": "slowpoke"}"#)
        .await;
    let started = Instant::now();

    let response = app.post("/locks/patience", r#"{"wait_ms": 400}"#).await;

    let waited = started.elapsed();
    let body = problem(response, 409, "lock-held").await;
    assert_eq!(body["owner"], "slowpoke");
    assert!(
        waited >= Duration::from_millis(390) && waited < Duration::from_millis(1500),
        "gave up after {waited:?}"
    );
}

#[tokio::test]
async fn a_waiter_on_one_instance_is_woken_by_a_release_on_another() {
    let redis = crate::helpers::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let held = first.acquire_lock("shared", r#"{"ttl_ms": 30000}"#).await;
    let waiter = second.post_in_background("/locks/shared", r#"{"wait_ms": 10000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let released_at = Instant::now();
    assert_eq!(
        first.delete(&lease_path("locks", &held)).await.status(),
        204
    );

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    let latency = answer.at - released_at;
    println!("cross-instance wake-up: {latency:?}");
    assert!(
        latency < Duration::from_millis(500),
        "woken after {latency:?}"
    );
}

#[tokio::test]
async fn a_waiting_request_sends_redis_nothing_until_it_is_woken() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let held = app.acquire_lock("quiet", r#"{"ttl_ms": 60000}"#).await;
    let waiters: Vec<_> = (0..5)
        .map(|_| app.post_in_background("/locks/quiet", r#"{"wait_ms": 20000}"#))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let scripts_before = redis.script_calls();
    let commands_before = redis.commands_processed();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let scripts_after = redis.script_calls();
    let commands_after = redis.commands_processed();

    assert_eq!(
        scripts_after, scripts_before,
        "scripts run while 5 requests waited"
    );
    // Only our own two INFO calls.
    assert!(
        commands_after - commands_before <= 2,
        "{} commands while waiting",
        commands_after - commands_before
    );
    app.delete(&lease_path("locks", &held)).await;
    for waiter in waiters {
        let status = waiter.await.unwrap().response.status();
        assert!(status == 201 || status == 409, "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contenders_never_overlap_all_get_their_turn_and_tokens_follow_the_turns() {
    const CLIENTS: usize = 12;
    const ROUNDS: usize = 5;
    let redis = crate::helpers::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let inside = Arc::new(AtomicBool::new(false));
    let turns = Arc::new(Mutex::new(Vec::new()));

    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let app = if i % 2 == 0 { &first } else { &second };
            let (client, base) = (app.client.clone(), app.base.clone());
            let (inside, turns) = (inside.clone(), turns.clone());
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let response = client
                        .post(format!("{base}/locks/critical"))
                        .body(r#"{"wait_ms": 30000, "ttl_ms": 10000}"#)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 201);
                    let lease: Value = response.json().await.unwrap();
                    assert!(
                        !inside.swap(true, Ordering::SeqCst),
                        "two holders inside the critical section"
                    );
                    turns
                        .lock()
                        .unwrap()
                        .push(lease["fencing_token"].as_u64().unwrap());
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    inside.store(false, Ordering::SeqCst);
                    let released = client
                        .delete(format!("{base}{}", lease_path("locks", &lease)))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(released.status(), 204);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client finished");
    }

    let turns = turns.lock().unwrap();
    assert_eq!(turns.len(), CLIENTS * ROUNDS, "every client got every turn");
    assert!(
        turns.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens follow the order of the turns: {turns:?}"
    );
}

#[tokio::test]
async fn shutdown_answers_waiters_at_once_with_503() {
    let mut app = TestApp::spawn().await;
    app.acquire_lock("closing", r#"{"ttl_ms": 60000}"#).await;
    let waiter = app.post_in_background("/locks/closing", r#"{"wait_ms": 60000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();

    app.shutdown().await.expect("clean shutdown");

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    let response = waiter.await.unwrap().response;
    problem(response, 503, "shutting-down").await;
}
