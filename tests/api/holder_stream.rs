//! The holder's own stream (`GET /locks/{name}/{id}/events`) and yield
//! requests, across two instances on one Redis.

use std::time::Duration;

use serde_json::Value;

use baton_testkit::commands_per_cycle;
use baton_testkit::events::{SseEvent, SseStream};
use baton_testkit::{lease_path, problem, shared_redis, TestApp};

/// Generous: a shared, noisy machine; each event comes within about a second.
const SOON: Duration = Duration::from_secs(10);

/// Opens the holder's stream of `lease` (a lease body of `kind`) on `app`.
async fn follow(app: &TestApp, kind: &str, lease: &Value) -> reqwest::Response {
    app.client
        .get(format!("{}{}/events", app.base, lease_path(kind, lease)))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("request sent")
}

/// The next event, checked for the lease's id (never shown) and its token
/// (always shown).
async fn next(stream: &mut SseStream, lease: &Value) -> SseEvent {
    let event = stream.next_within(SOON).await.expect("an event in time");
    let id = lease["id"].as_str().expect("lease id");
    assert!(!event.raw.contains(id), "lease id in {}", event.raw);
    assert_eq!(
        event.data["fencing_token"], lease["fencing_token"],
        "{}",
        event.raw
    );
    event
}

#[tokio::test]
async fn a_stream_on_another_instance_sees_a_refresh_and_then_a_force_release() {
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&shared_redis().url()).await;
    let lease = a
        .acquire_lock("hs-force", r#"{"ttl_ms":60000,"owner":"job 7"}"#)
        .await;
    let mut stream = SseStream::new(follow(&b, "locks", &lease).await);
    let held = next(&mut stream, &lease).await;
    assert_eq!(held.name, "held");
    assert_eq!(held.data["name"], "hs-force");
    assert_eq!(held.data["owner"], "job 7");
    assert_eq!(held.data["expires_at"], lease["expires_at"]);

    let path = lease_path("locks", &lease);
    let refreshed = a.patch(&path, r#"{"ttl_ms":90000}"#).await;
    assert_eq!(refreshed.status(), 200);
    let refreshed: Value = refreshed.json().await.expect("lease");
    let event = next(&mut stream, &lease).await;
    assert_eq!(event.name, "refreshed");
    assert_eq!(event.data["expires_at"], refreshed["expires_at"]);

    assert_eq!(a.delete("/locks/hs-force").await.status(), 204);
    let event = next(&mut stream, &lease).await;
    assert_eq!(event.name, "lost");
    assert_eq!(event.data["reason"], "force-released");
    assert!(
        stream.ends_within(SOON).await,
        "the stream ends after `lost`"
    );
}

#[tokio::test]
async fn a_stream_on_another_instance_says_expiring_then_lost_when_the_lease_expires() {
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&shared_redis().url()).await;
    let lease = a.acquire_lock("hs-expire", r#"{"ttl_ms":1500}"#).await;
    let mut stream = SseStream::new(follow(&b, "locks", &lease).await);
    assert_eq!(next(&mut stream, &lease).await.name, "held");
    let expiring = next(&mut stream, &lease).await;
    assert_eq!(expiring.name, "expiring");
    assert_eq!(expiring.data["expires_at"], lease["expires_at"]);
    let lost = next(&mut stream, &lease).await;
    assert_eq!(lost.name, "lost");
    assert_eq!(lost.data["reason"], "expired");
    assert!(
        stream.ends_within(SOON).await,
        "the stream ends after `lost`"
    );
    // Redis confirmed it: the lease is gone.
    assert_eq!(
        a.get(&lease_path("locks", &lease)).await.status(),
        404,
        "lost only once the lease is gone"
    );
}

#[tokio::test]
async fn a_release_on_another_instance_ends_the_stream_with_released() {
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&shared_redis().url()).await;
    let lease = a.acquire_lock("hs-release", r#"{"ttl_ms":60000}"#).await;
    let mut stream = SseStream::new(follow(&b, "locks", &lease).await);
    assert_eq!(next(&mut stream, &lease).await.name, "held");
    assert_eq!(a.delete(&lease_path("locks", &lease)).await.status(), 204);
    assert_eq!(next(&mut stream, &lease).await.name, "released");
    assert!(stream.ends_within(SOON).await);
}

#[tokio::test]
async fn a_yield_request_made_on_another_instance_reaches_the_holder() {
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&shared_redis().url()).await;
    let lease = a.acquire_lock("hs-yield", r#"{"ttl_ms":60000}"#).await;
    let mut stream = SseStream::new(follow(&a, "locks", &lease).await);
    assert_eq!(next(&mut stream, &lease).await.name, "held");

    let asked = b
        .post(
            "/locks/hs-yield/yield",
            r#"{"owner":"release bot","reason":"train at 5"}"#,
        )
        .await;
    assert_eq!(asked.status(), 202);
    let asked: Value = asked.json().await.expect("json");
    assert_eq!(asked["holders"], 1);
    let event = next(&mut stream, &lease).await;
    assert_eq!(event.name, "yield-requested");
    assert_eq!(event.data["by"], "release bot");
    assert_eq!(event.data["reason"], "train at 5");
    assert_eq!(event.data["waiting"], 0);

    // A waiter that asks as it joins the line (on B) asks once too.
    let waiter = b.post_in_background(
        "/locks/hs-yield",
        r#"{"wait_ms":30000,"owner":"next job","ask_yield":true}"#,
    );
    let event = next(&mut stream, &lease).await;
    assert_eq!(event.name, "yield-requested");
    assert_eq!(event.data["by"], "next job");
    assert_eq!(event.data["waiting"], 1);
    // Nothing was taken: the holder still holds it, until it releases.
    assert_eq!(a.get(&lease_path("locks", &lease)).await.status(), 200);
    assert_eq!(a.delete(&lease_path("locks", &lease)).await.status(), 204);
    assert_eq!(next(&mut stream, &lease).await.name, "released");
    assert_eq!(waiter.await.expect("waiter").response.status(), 201);

    // Nobody holds it now: nobody is asked.
    let asked: Value = b
        .post("/locks/hs-yield-free/yield", "")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(asked["holders"], 0);
}

#[tokio::test]
async fn a_semaphore_holder_s_stream_ends_lost_when_force_released() {
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&shared_redis().url()).await;
    let response = a
        .post("/semaphores/hs-sem", r#"{"limit":3,"ttl_ms":60000}"#)
        .await;
    assert_eq!(response.status(), 201);
    let lease: Value = response.json().await.expect("lease");
    let other = a
        .post("/semaphores/hs-sem", r#"{"limit":3,"ttl_ms":60000}"#)
        .await;
    assert_eq!(other.status(), 201);
    let mut stream = SseStream::new(follow(&b, "semaphores", &lease).await);
    assert_eq!(next(&mut stream, &lease).await.name, "held");
    // Another holder's release is not this lease's.
    let other: Value = other.json().await.expect("lease");
    assert_eq!(
        a.delete(&lease_path("semaphores", &other)).await.status(),
        204
    );
    assert_eq!(a.delete("/semaphores/hs-sem").await.status(), 204);
    let event = next(&mut stream, &lease).await;
    assert_eq!(event.name, "lost", "{}", event.raw);
    assert_eq!(event.data["reason"], "force-released");
}

#[tokio::test]
async fn a_lease_not_held_has_no_stream() {
    let a = TestApp::spawn().await;
    let lease = a.acquire_lock("hs-404", r#"{"ttl_ms":60000}"#).await;
    assert_eq!(a.delete(&lease_path("locks", &lease)).await.status(), 204);
    problem(follow(&a, "locks", &lease).await, 404, "lease-not-found").await;
    let stranger = a
        .get("/locks/hs-404/00000000-0000-4000-8000-000000000000/events")
        .await;
    problem(stranger, 404, "lease-not-found").await;
    // A semaphore lease id is no lock's.
    let response = a.post("/semaphores/hs-404", r#"{"limit":1}"#).await;
    let sem: Value = response.json().await.expect("lease");
    let as_lock = a
        .get(&format!(
            "/locks/hs-404/{}/events",
            sem["id"].as_str().unwrap()
        ))
        .await;
    problem(as_lock, 404, "lease-not-found").await;
}

/// An expiry during a Redis stall is said only once Redis answers again and
/// confirms the lease is gone; a refresh made meanwhile on the other instance
/// (here: before the stall) moves the expiry instead.
#[tokio::test]
async fn an_expiry_during_a_redis_stall_is_said_only_once_redis_confirms_it() {
    let redis = baton_testkit::RedisServer::start();
    let a = TestApp::spawn_with(baton_testkit::settings_for(
        &redis.url(),
        &baton_testkit::unique_prefix(),
    ))
    .await;
    let b = a.sibling_of(&redis.url()).await;
    let lease = a.acquire_lock("hs-stall", r#"{"ttl_ms":1000}"#).await;
    let mut stream = SseStream::new(follow(&b, "locks", &lease).await);
    assert_eq!(next(&mut stream, &lease).await.name, "held");
    // Refreshed on A: B's timer moves with it.
    let path = lease_path("locks", &lease);
    assert_eq!(a.patch(&path, r#"{"ttl_ms":1500}"#).await.status(), 200);
    let mut event = next(&mut stream, &lease).await;
    if event.name == "expiring" {
        event = next(&mut stream, &lease).await;
    }
    assert_eq!(event.name, "refreshed", "{}", event.raw);
    // Redis stalls across the expiry: nothing is said until it answers.
    let stalled_at = std::time::Instant::now();
    let stall = redis.stall(4);
    let mut seen = Vec::new();
    let lost = loop {
        let event = next(&mut stream, &lease).await;
        if event.name == "lost" {
            break event;
        }
        seen.push(event.name);
    };
    // Redis answers nothing for 4 s from a moment after `stalled_at`.
    assert!(
        stalled_at.elapsed() >= Duration::from_millis(3900),
        "`lost` came while Redis stalled ({:?})",
        stalled_at.elapsed()
    );
    stall.join().expect("stall thread").expect("DEBUG SLEEP");
    assert_eq!(lost.data["reason"], "expired");
    assert!(seen.iter().all(|name| name == "expiring"), "{seen:?}");
    assert!(stream.ends_within(SOON).await);
}

/// A lease nobody follows costs nothing: an uncontended acquire+release
/// cycle runs its 8 commands whether or not a holder's stream is open on
/// another name (a stream marks only its own name followed).
#[tokio::test]
async fn a_stream_on_one_name_costs_the_cycles_of_another_nothing() {
    let redis = baton_testkit::RedisServer::start();
    let mut settings = baton_testkit::settings_for(&redis.url(), &baton_testkit::unique_prefix());
    // (History's one command is counted in history.rs.)
    settings.history_max = 0;
    let app = TestApp::spawn_with(settings).await;
    let body = r#"{"ttl_ms": 60000}"#;
    let plain = commands_per_cycle(&redis, &app, "/locks/cheap", body).await;
    assert_eq!(plain, 8, "two FCALLs and their six commands");
    let lease = app.acquire_lock("followed", r#"{"ttl_ms":60000}"#).await;
    let mut stream = SseStream::new(follow(&app, "locks", &lease).await);
    assert_eq!(next(&mut stream, &lease).await.name, "held");
    let beside = commands_per_cycle(&redis, &app, "/locks/cheap", body).await;
    assert_eq!(
        beside, plain,
        "a stream elsewhere added commands to this name's cycle"
    );
    // Its own name's release tells it (one publish more, for a followed lease).
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
    assert_eq!(next(&mut stream, &lease).await.name, "released");
}

/// Figures for the report, not a check: the memory that 10,000 open
/// holders' streams (one per lock, over one HTTP/2 connection) cost a baton
/// process, and the commands Redis runs a second while they are open and
/// nothing changes. Run with
/// `cargo test --test api measure_holder_streams -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_holder_streams() {
    use futures_util::StreamExt;

    const STREAMS: usize = 10_000;
    let redis = baton_testkit::RedisServer::start();
    let prefix = baton_testkit::unique_prefix();
    let baton =
        baton_testkit::BatonProcess::start(&prefix, &[("BATON_REDIS_URL", redis.url().as_str())])
            .await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let leases: Vec<Value> = futures_util::stream::iter(0..STREAMS)
        .map(|i| {
            let (h2, base) = (h2.clone(), baton.base.clone());
            async move {
                let response = h2
                    .post(format!("{base}/locks/m-{i}"))
                    .body(r#"{"ttl_ms":600000}"#)
                    .send()
                    .await
                    .expect("acquire");
                assert_eq!(response.status(), 201);
                response.json::<Value>().await.expect("lease")
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    // Warm up: the first stream allocates what every later one reuses.
    let first = h2
        .get(format!(
            "{}{}/events",
            baton.base,
            lease_path("locks", &leases[0])
        ))
        .send()
        .await
        .expect("stream");
    drop(SseStream::new(first));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = baton.rss_kib();
    let idle_before = redis.commands().0;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = redis.commands().0 - idle_before;

    let mut streams: Vec<SseStream> = futures_util::stream::iter(leases.iter().skip(1))
        .map(|lease| {
            let (h2, url) = (
                h2.clone(),
                format!("{}{}/events", baton.base, lease_path("locks", lease)),
            );
            async move { SseStream::new(h2.get(url).send().await.expect("stream")) }
        })
        .buffer_unordered(256)
        .collect()
        .await;
    for stream in &mut streams {
        let held = stream.next_within(SOON).await.expect("held");
        assert_eq!(held.name, "held");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = baton.rss_kib();
    let open = streams.len();
    println!(
        "{open} open holders' streams (HTTP/2, one connection): RSS {before} KiB -> {after} KiB, \
         +{} KiB ({:.2} KiB a stream)",
        after - before,
        (after - before) as f64 / open as f64
    );
    let busy_before = redis.commands().0;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let busy = redis.commands().0 - busy_before;
    println!(
        "Redis commands a second, nothing changing: {:.0} without streams, {:.0} with {open} \
         (renewals of the names' mark, one call per name every 10 s)",
        idle as f64 / 10.0,
        busy as f64 / 20.0
    );
}
