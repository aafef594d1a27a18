//! Faults: Redis down, slow or restarted, and clients that go away. Each test
//! runs its own redis-server so it can stop it.

use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::{
    join_line, lease_path, problem, settings_for, unique_prefix, RedisServer, TestApp,
};

/// Polls `POST /locks/{name}` until it answers 201; returns how long that took.
async fn until_acquired(app: &TestApp, name: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let response = app
            .post(&format!("/locks/{name}"), r#"{"ttl_ms": 1000}"#)
            .await;
        if response.status() == 201 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "not serving again after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn while_redis_is_down_calls_answer_503_promptly_and_service_resumes_after() {
    let mut redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    app.acquire_lock("before", "{}").await;

    redis.kill();

    for (method, path, body) in [
        ("POST", "/locks/during", "{}"),
        ("GET", "/locks/during", ""),
        ("POST", "/semaphores/during", r#"{"limit": 2}"#),
        ("GET", "/readyz", ""),
    ] {
        let started = Instant::now();
        let response = app.request(method.parse().unwrap(), path, Some(body)).await;
        let took = started.elapsed();
        assert!(
            response.headers().contains_key("retry-after"),
            "{method} {path}"
        );
        problem(response, 503, "redis-unavailable").await;
        assert!(
            took < Duration::from_millis(2500),
            "{method} {path} took {took:?}"
        );
    }
    assert_eq!(app.get("/healthz").await.status(), 200);

    redis.restart();
    let back_after = until_acquired(&app, "after", Duration::from_secs(5)).await;
    println!("serving again {back_after:?} after Redis came back");
    assert!(back_after < Duration::from_millis(1500), "{back_after:?}");
    assert_eq!(app.get("/readyz").await.status(), 200);
}

#[tokio::test]
async fn a_waiter_answers_503_only_when_redis_is_still_away_at_the_end_of_its_wait() {
    let mut redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    app.acquire_lock("outage", r#"{"ttl_ms": 60000}"#).await;
    let started = Instant::now();
    let waiter = app.post_in_background("/locks/outage", r#"{"wait_ms": 2000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;

    redis.kill();

    let answer = waiter.await.unwrap();
    let (took, response) = (answer.at - started, answer.response);
    problem(response, 503, "redis-unavailable").await;
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "the waiter answered after {took:?}, its wait was 2 s"
    );
    redis.restart();
    until_acquired(&app, "resumed", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_waiter_keeps_its_place_through_a_redis_stall_and_acquires_after() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let path = "/locks/stalled";
    let held = app.acquire_lock("stalled", r#"{"ttl_ms": 60000}"#).await;
    let waiter = join_line(&app, path, r#"{"wait_ms": 20000, "owner": "first"}"#, &app).await;

    let stall = redis.stall(2);
    tokio::task::spawn_blocking(move || stall.join())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // A newcomer after the stall goes behind the waiter, if it kept its place.
    let newcomer = join_line(
        &app,
        path,
        r#"{"wait_ms": 20000, "owner": "newcomer"}"#,
        &app,
    )
    .await;
    let status: Value = app.get(path).await.json().await.unwrap();
    assert_eq!(status["waiting"], 2, "{status}");
    assert_eq!(status["waiters"][0]["owner"], "first", "{status}");
    assert_eq!(status["waiters"][1]["owner"], "newcomer", "{status}");
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201, "the waiter got the lock");
    let lease: Value = answer.response.json().await.unwrap();
    assert_eq!(lease["owner"], "first");
    assert!(!newcomer.is_finished(), "the newcomer waits behind it");
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
    assert_eq!(newcomer.await.unwrap().response.status(), 201);
}

#[tokio::test]
async fn fencing_tokens_keep_rising_across_a_redis_restart() {
    let mut redis = RedisServer::start_persistent();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let lease = app.acquire_lock("restarts", r#"{"ttl_ms": 100}"#).await;
    let before = lease["fencing_token"].as_u64().unwrap();

    redis.restart();
    until_acquired(&app, "warm", Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let after = app.acquire_lock("restarts", "{}").await["fencing_token"]
        .as_u64()
        .unwrap();

    assert!(after > before, "{after} after {before}");
}

#[tokio::test]
async fn an_acquisition_cut_off_by_a_slow_redis_is_undone_once_redis_answers() {
    let redis = RedisServer::start();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.redis_timeout = Duration::from_millis(300);
    let app = TestApp::spawn_with(settings).await;
    app.acquire_lock("warm-up", "{}").await;
    // Redis stalls for a second: the acquire script runs only after the
    // service has given up on it and answered 503.
    let stall = redis.stall(1);

    let response = app.post("/locks/cut-off", r#"{"ttl_ms": 60000}"#).await;

    problem(response, 503, "redis-unavailable").await;
    stall.join().unwrap().unwrap();
    let started = Instant::now();
    loop {
        let status: Value = app.get("/locks/cut-off").await.json().await.unwrap();
        if status["held"] == false {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the lease nobody was told about is still held: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_waiter_whose_client_disconnects_stops_waiting_and_takes_nothing() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("abandoned", r#"{"ttl_ms": 60000}"#).await;
    let gone = app.post_in_background("/locks/abandoned", r#"{"wait_ms": 30000, "ttl_ms": 60000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    gone.abort();
    tokio::time::sleep(Duration::from_millis(200)).await;

    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let status: Value = app.get("/locks/abandoned").await.json().await.unwrap();
    assert_eq!(
        status["held"], false,
        "a gone client's waiter took the lock: {status}"
    );
}

#[tokio::test]
async fn a_semaphore_waiter_whose_client_disconnects_leaves_the_queue() {
    let app = TestApp::spawn().await;
    let held: Value = app
        .post("/semaphores/abandoned", r#"{"limit": 1}"#)
        .await
        .json()
        .await
        .unwrap();
    let gone = app.post_in_background("/semaphores/abandoned", r#"{"limit": 1, "wait_ms": 30000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    gone.abort();
    tokio::time::sleep(Duration::from_millis(200)).await;

    app.delete(&lease_path("semaphores", &held)).await;

    // Nobody is in line ahead any more, so a caller that does not wait gets in.
    let response = app.post("/semaphores/abandoned", r#"{"limit": 1}"#).await;
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn beyond_the_cap_on_waiters_a_waiter_gets_503_with_retry_after() {
    let mut settings = settings_for(&baton_testkit::shared_redis().url(), &unique_prefix());
    settings.max_waiters = 2;
    let app = TestApp::spawn_with(settings).await;
    let held = app.acquire_lock("capped", r#"{"ttl_ms": 60000}"#).await;
    let waiters: Vec<_> = (0..2)
        .map(|_| app.post_in_background("/locks/capped", r#"{"wait_ms": 10000}"#))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let response = app.post("/locks/capped", r#"{"wait_ms": 10000}"#).await;

    assert!(response.headers().contains_key("retry-after"));
    problem(response, 503, "too-many-waiters").await;
    let no_wait = app.post("/locks/capped", "{}").await;
    problem(no_wait, 409, "lock-held").await;
    app.delete(&lease_path("locks", &held)).await;
    for waiter in waiters {
        let status = waiter.await.unwrap().response.status();
        assert!(status == 201 || status == 409);
    }
}

#[tokio::test]
async fn a_request_over_the_time_limit_answers_503() {
    let redis = RedisServer::start();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.max_wait_ms = 0;
    settings.request_timeout = Duration::from_millis(300);
    settings.redis_timeout = Duration::from_secs(5);
    let app = TestApp::spawn_with(settings).await;
    app.acquire_lock("warm-up", "{}").await;
    let stall = redis.stall(1);
    let started = Instant::now();

    let response = app.get("/locks/slow").await;

    problem(response, 503, "request-timeout").await;
    assert!(started.elapsed() < Duration::from_millis(900));
    stall.join().unwrap().unwrap();
}
