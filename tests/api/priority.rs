//! Priority in the waiting line: a waiter of higher priority is placed ahead
//! of every waiter of a lower one and behind those of its own that joined
//! before it; nobody is taken off a lease. The one admission rule stays: it
//! is judged in the new order, for waiters as for requests that have not
//! queued (exactly, past the hundred waiters one call looks at). Each
//! scenario runs across two instances on one Redis.

use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::{answer_of, commands_per_cycle, granted, status_of, two_instances};
use baton_testkit::{
    join_line, problem, release, settings_for, take, token_of, unique_prefix, RedisServer, TestApp,
};

/// The waiters of a status as (owner, priority), in order.
fn line_of(status: &Value) -> Vec<(String, Option<u64>)> {
    status["waiters"]
        .as_array()
        .expect("waiters")
        .iter()
        .map(|w| {
            (
                w["owner"].as_str().expect("owner").to_owned(),
                w["priority"].as_u64(),
            )
        })
        .collect()
}

/// Two waiters at priority 0, then two at 5: served 5, 5, 0, 0, each pair
/// in its joining order, and status shows that order before anyone is
/// served. The holder keeps its lease until it releases it.
#[tokio::test]
async fn higher_priority_is_served_first_and_each_priority_in_joining_order() {
    let (a, b) = two_instances().await;
    let path = "/locks/prio-order";
    let holder = take(&a, path, r#"{"ttl_ms": 60000, "owner": "holder"}"#).await;
    let mut waiters = Vec::new();
    for (owner, priority) in [("0a", 0), ("0b", 0), ("5a", 5), ("5b", 5)] {
        let body = format!(
            r#"{{"ttl_ms": 60000, "wait_ms": 50000, "owner": "{owner}", "priority": {priority}}}"#
        );
        waiters.push((owner, join_line(&b, path, &body, &a).await));
    }
    let status = status_of(&a, path).await;
    assert_eq!(
        line_of(&status),
        vec![
            ("5a".to_owned(), Some(5)),
            ("5b".to_owned(), Some(5)),
            ("0a".to_owned(), None),
            ("0b".to_owned(), None),
        ],
        "{status}"
    );
    assert_eq!(status["owner"], "holder", "nobody took the lease: {status}");

    release(&a, "locks", &holder).await;
    let mut waiters: std::collections::HashMap<_, _> = waiters.into_iter().collect();
    let mut last_token = token_of(&holder);
    for owner in ["5a", "5b", "0a", "0b"] {
        let request = waiters.remove(owner).expect("a waiter");
        let (_, lease) = granted(answer_of(request, owner).await, owner).await;
        assert_eq!(lease["owner"], owner, "{lease}");
        assert!(
            token_of(&lease) > last_token,
            "{owner} after the one before"
        );
        last_token = token_of(&lease);
        let status = status_of(&a, path).await;
        assert_eq!(status["owner"], owner, "{status}");
        release(&b, "locks", &lease).await;
    }
}

/// Readers and writers with priorities: readers of priority 5 that join
/// behind a queued writer of priority 0 are admitted beside the readers
/// holding the lock (they are ahead of it), as is a reader of priority 5
/// that does not wait; a reader of priority 0 that does not wait is not
/// (the writer is ahead of it). The writer gets the lock when the last
/// reader leaves; an exclusive holder is never taken off by priority.
#[tokio::test]
async fn shared_readers_are_admitted_in_priority_order() {
    let (a, b) = two_instances().await;
    let path = "/locks/prio-shared";
    let writer = take(&a, path, r#"{"ttl_ms": 60000, "owner": "w"}"#).await;
    // A reader of priority 9 waits for the exclusive holder like anyone.
    let high = join_line(
        &b,
        path,
        r#"{"shared": true, "ttl_ms": 60000, "wait_ms": 50000, "owner": "r9", "priority": 9}"#,
        &a,
    )
    .await;
    let refused = b
        .post(
            path,
            r#"{"shared": true, "ttl_ms": 60000, "owner": "r9-now", "priority": 9}"#,
        )
        .await;
    problem(refused, 409, "lock-held").await;
    release(&a, "locks", &writer).await;
    let (_, r9) = granted(answer_of(high, "r9").await, "r9").await;
    assert_eq!(r9["shared"], true, "{r9}");

    // A writer of priority 0 waits behind the reader.
    let queued_writer = join_line(
        &b,
        path,
        r#"{"ttl_ms": 60000, "wait_ms": 50000, "owner": "w0"}"#,
        &a,
    )
    .await;
    // Readers of priority 5, with or without a wait, go ahead of it.
    let r5 = take(
        &b,
        path,
        r#"{"shared": true, "ttl_ms": 60000, "owner": "r5", "priority": 5}"#,
    )
    .await;
    let r5_waits = take(
        &a,
        path,
        r#"{"shared": true, "ttl_ms": 60000, "wait_ms": 30000, "owner": "r5w", "priority": 5}"#,
    )
    .await;
    // A reader of priority 0 is behind the writer.
    let refused = a
        .post(path, r#"{"shared": true, "ttl_ms": 60000, "owner": "r0"}"#)
        .await;
    let body = problem(refused, 409, "lock-held").await;
    assert_eq!(body["waiting"], 1, "{body}");
    let status = status_of(&a, path).await;
    assert_eq!(status["holders"], 3, "{status}");
    assert_eq!(status["mode"], "shared", "{status}");
    assert_eq!(line_of(&status), vec![("w0".to_owned(), None)], "{status}");

    for reader in [&r9, &r5, &r5_waits] {
        release(&a, "locks", reader).await;
    }
    let (_, w0) = granted(answer_of(queued_writer, "w0").await, "w0").await;
    assert!(token_of(&w0) > token_of(&r5_waits));
    assert_eq!(status_of(&b, path).await["mode"], "exclusive");
}

/// Permits with priorities: a request of priority 5 is judged behind the
/// waiters of priority 5 and above only, so it takes room that a queued
/// request of priority 0 cannot use yet; one of priority 0 waits behind it.
#[tokio::test]
async fn permits_are_admitted_in_priority_order() {
    let (a, b) = two_instances().await;
    let path = "/semaphores/prio-permits";
    let three = take(&a, path, r#"{"limit": 5, "permits": 3, "ttl_ms": 60000}"#).await;
    // 3 held + 3 asked > 5: it waits.
    let big = join_line(
        &b,
        path,
        r#"{"limit": 5, "permits": 3, "ttl_ms": 60000, "wait_ms": 50000, "owner": "big0"}"#,
        &a,
    )
    .await;
    // 3 held + 2 fits, and nobody of priority 5 or more waits: at once.
    let two = take(
        &a,
        path,
        r#"{"limit": 5, "permits": 2, "ttl_ms": 60000, "owner": "two5", "priority": 5}"#,
    )
    .await;
    assert_eq!(two["permits"], 2, "{two}");
    // Of priority 0 it would be behind big0: refused.
    let refused = b
        .post(path, r#"{"limit": 6, "permits": 1, "ttl_ms": 60000}"#)
        .await;
    problem(refused, 409, "semaphore-full").await;

    // A priority-5 request of 3 waits, ahead of big0.
    let mid = join_line(
        &b,
        path,
        r#"{"limit": 5, "permits": 3, "ttl_ms": 60000, "wait_ms": 50000, "owner": "mid5", "priority": 5}"#,
        &a,
    )
    .await;
    let status = status_of(&a, path).await;
    assert_eq!(
        line_of(&status),
        vec![("mid5".to_owned(), Some(5)), ("big0".to_owned(), None)],
        "{status}"
    );
    assert_eq!(status["waiters"][0]["permits"], 3, "{status}");
    release(&a, "semaphores", &three).await;
    let (_, mid) = granted(answer_of(mid, "mid5").await, "mid5").await;
    assert_eq!(mid["owner"], "mid5");
    let status = status_of(&a, path).await;
    assert_eq!(status["used"], 5, "{status}");
    assert_eq!(line_of(&status), vec![("big0".to_owned(), None)]);
    release(&a, "semaphores", &two).await;
    release(&b, "semaphores", &mid).await;
    let (_, big) = granted(answer_of(big, "big0").await, "big0").await;
    assert_eq!(big["permits"], 3, "{big}");
}

/// Sends `n` waiting requests with `body` over one HTTP/2 connection and
/// waits until Redis counts `until` in line.
async fn fill(app: &TestApp, path: &str, body: &str, n: usize, until: u64) {
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    for _ in 0..n {
        let request = client
            .post(format!("{}{path}", app.base))
            .body(body.to_owned());
        tokio::spawn(async move {
            // Answered 503 when the service stops at the end of the test.
            let _ = request.send().await;
        });
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status: Value = app.get(path).await.json().await.unwrap();
        match status["waiting"].as_u64() {
            Some(n) if n == until => break,
            Some(n) => assert!(n < until, "{n} waiting, {until} sent"),
            None => {}
        }
        assert!(Instant::now() < deadline, "never {until} waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Past the hundred waiters one call looks at, a request that does not
/// wait is admitted exactly when it fits beside the leases and the waiters
/// of its priority and above, as the line's sums for each priority count
/// them: 150 waiters of priority 5, then 50 of priority 0.
#[tokio::test]
async fn a_newcomer_counts_exactly_the_waiters_of_its_priority_and_above_in_a_long_line() {
    let (a, b) = two_instances().await;
    let path = "/semaphores/prio-long";
    take(&a, path, r#"{"limit": 1, "ttl_ms": 120000}"#).await;
    let five = r#"{"limit": 1, "ttl_ms": 60000, "wait_ms": 110000, "priority": 5}"#;
    fill(&b, path, five, 150, 150).await;
    let zero = r#"{"limit": 1, "ttl_ms": 60000, "wait_ms": 110000}"#;
    fill(&b, path, zero, 50, 200).await;

    // Priority 5 (and 1): 1 held + 150 ahead + 1 = 152.
    for priority in [1, 5] {
        let body = format!(r#"{{"limit": 151, "ttl_ms": 60000, "priority": {priority}}}"#);
        problem(a.post(path, &body).await, 409, "semaphore-full").await;
    }
    let lease = take(
        &a,
        path,
        r#"{"limit": 152, "ttl_ms": 60000, "priority": 5}"#,
    )
    .await;
    release(&a, "semaphores", &lease).await;
    // Priority 9 has nobody ahead of it: 1 + 0 + 1.
    let lease = take(&a, path, r#"{"limit": 2, "ttl_ms": 60000, "priority": 9}"#).await;
    release(&a, "semaphores", &lease).await;
    // Priority 0: 1 + 200 + 1 = 202.
    problem(
        a.post(path, r#"{"limit": 201, "ttl_ms": 60000}"#).await,
        409,
        "semaphore-full",
    )
    .await;
    take(&a, path, r#"{"limit": 202, "ttl_ms": 60000}"#).await;
    let status = status_of(&b, path).await;
    assert_eq!(status["waiting"], 200, "nobody was overtaken: {status}");
    assert_eq!(status["waiters"][0]["priority"], 5, "{status}");
}

/// A progress event says the waiter's priority when it is not 0.
#[tokio::test]
async fn progress_events_carry_the_priority() {
    let (a, b) = two_instances().await;
    let path = "/locks/prio-progress";
    let holder = take(&a, path, r#"{"ttl_ms": 60000}"#).await;
    let response = b
        .client
        .post(format!("{}{path}", b.base))
        .header("accept", "text/event-stream")
        .body(r#"{"ttl_ms": 60000, "wait_ms": 30000, "priority": 3}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let mut response = response;
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !text.contains("event: queued") || !text.contains("\n\n") {
        assert!(Instant::now() < deadline, "no queued event: {text}");
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("an event in time")
            .expect("a chunk")
            .expect("not the end");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let data = text
        .lines()
        .skip_while(|l| *l != "event: queued")
        .find_map(|l| l.strip_prefix("data: "))
        .expect("queued data");
    let queued: Value = serde_json::from_str(data).expect("json");
    assert_eq!(queued["priority"], 3, "{queued}");
    assert_eq!(queued["position"], 1, "{queued}");
    release(&a, "locks", &holder).await;
}

/// A priority is an integer from 0 to 9: anything else is 400 naming it.
#[tokio::test]
async fn a_bad_priority_is_refused_naming_it() {
    let app = TestApp::spawn().await;
    for body in [
        r#"{"priority": 10}"#,
        r#"{"priority": -1}"#,
        r#"{"priority": 1.5}"#,
        r#"{"priority": "high"}"#,
        r#"{"priority": 1e0}"#,
    ] {
        for path in ["/locks/prio-bad", "/semaphores/prio-bad"] {
            let body = if path.starts_with("/semaphores") {
                body.replace('{', r#"{"limit": 2, "#)
            } else {
                body.to_owned()
            };
            let refused = problem(app.post(path, &body).await, 400, "invalid-request").await;
            let detail = refused["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("priority"), "{body}: {refused}");
        }
    }
    let lease = take(&app, "/locks/prio-bad", r#"{"priority": 0}"#).await;
    release(&app, "locks", &lease).await;
}

/// Priority costs a request nothing when nobody waits: an uncontended
/// acquire+release cycle runs the same commands with a priority as without.
#[tokio::test]
async fn priority_costs_an_uncontended_cycle_nothing() {
    let redis = RedisServer::start();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    // (History's one command is counted in history.rs.)
    settings.history_max = 0;
    let app = TestApp::spawn_with(settings).await;
    let plain = commands_per_cycle(&redis, &app, "/locks/cheap", r#"{"ttl_ms": 60000}"#).await;
    assert_eq!(plain, 8, "two FCALLs and their six commands");
    let ranked = commands_per_cycle(
        &redis,
        &app,
        "/locks/cheap",
        r#"{"ttl_ms": 60000, "priority": 7}"#,
    )
    .await;
    assert_eq!(ranked, plain);
    let semaphore = commands_per_cycle(
        &redis,
        &app,
        "/semaphores/cheap",
        r#"{"limit": 3, "ttl_ms": 60000, "priority": 2}"#,
    )
    .await;
    assert_eq!(semaphore, plain);
}
