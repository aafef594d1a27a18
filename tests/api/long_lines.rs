//! Lines longer than one call looks at: a request that has not queued is
//! admitted exactly when it fits beside the leases and every waiter, however
//! many wait, by the sums of the line that Redis keeps on every way in and
//! out of it; and the call that decides it does the same work beside ten
//! thousand waiters as beside a hundred and fifty.

use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::{
    join_line, lease_path, problem, settings_for, unique_prefix, waiting, RedisServer, TestApp,
};

/// Sends `n` waiting requests with `body` to `path` through `client` (at
/// `base`) and waits until Redis counts `until` in line.
async fn fill(
    client: &reqwest::Client,
    base: &str,
    app: &TestApp,
    path: &str,
    body: &str,
    n: usize,
    until: u64,
) {
    for _ in 0..n {
        let request = client.post(format!("{base}{path}")).body(body.to_owned());
        tokio::spawn(async move {
            // Answered 503 when the service stops at the end of the test.
            let _ = request.send().await;
        });
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // (A status may find Redis busy with the joins: 503, asked again.)
        let status: Value = app.get(path).await.json().await.unwrap();
        match status["waiting"].as_u64() {
            Some(n) if n == until => break,
            Some(n) => assert!(n < until, "{n} waiting, {until} sent"),
            None => {}
        }
        assert!(
            Instant::now() < deadline,
            "{path} never had {until} waiting"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn acquire(app: &TestApp, path: &str, body: &str) -> Value {
    let response = app.post(path, body).await;
    let status = response.status();
    let lease: Value = response.json().await.expect("lease json");
    assert_eq!(status, 201, "{body}: {lease}");
    lease
}

/// One lease of limit 1 and 101 waiters of limit 1: past the hundred waiters
/// that one call looks at. A newcomer fits when 1 + 101 + its own 1 is at
/// most its limit, with or without a wait, and not when it is over.
#[tokio::test]
async fn a_newcomer_is_admitted_exactly_when_it_fits_beside_a_hundred_and_one_waiters() {
    let app = TestApp::spawn().await;
    let path = "/semaphores/long";
    acquire(&app, path, r#"{"limit": 1, "ttl_ms": 60000}"#).await;
    let body = r#"{"limit": 1, "ttl_ms": 60000, "wait_ms": 60000}"#;
    fill(&app.client, &app.base, &app, path, body, 101, 101).await;

    // 1 + 101 + 1 = 103.
    let over = app.post(path, r#"{"limit": 102, "ttl_ms": 60000}"#).await;
    let refused = problem(over, 409, "semaphore-full").await;
    assert_eq!(refused["waiting"], 101, "{refused}");
    acquire(&app, path, r#"{"limit": 103, "ttl_ms": 60000}"#).await;
    // 2 held now: 2 + 101 + 1 = 104, and one with a wait fits at once.
    let started = Instant::now();
    acquire(
        &app,
        path,
        r#"{"limit": 104, "ttl_ms": 60000, "wait_ms": 30000}"#,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it waited for room it had"
    );
    let status: Value = app.get(path).await.json().await.unwrap();
    assert_eq!(status["holders"], 3, "{status}");
    assert_eq!(status["waiting"], 101, "nobody was overtaken: {status}");
    let over = app.post(path, r#"{"limit": 104, "ttl_ms": 60000}"#).await;
    problem(over, 409, "semaphore-full").await;
}

/// The commands Redis runs for one acquisition on `app` by a newcomer that
/// fits (then released), and the time Redis spent in the calls: the fewest
/// of five tries, since a keep-alive or a listener count of an instance may
/// fall into one.
async fn newcomer_work(redis: &RedisServer, app: &TestApp, path: &str) -> (u64, u64) {
    let mut fewest = (u64::MAX, 0);
    for _ in 0..5 {
        let before = redis.commands();
        let lease = acquire(app, path, r#"{"limit": 100000, "ttl_ms": 60000}"#).await;
        let after = redis.commands();
        assert_eq!(
            app.delete(&lease_path("semaphores", &lease)).await.status(),
            204
        );
        let work = (after.0 - before.0, after.1 - before.1);
        if work.0 < fewest.0 {
            fewest = work;
        }
    }
    fewest
}

/// Admission beside a line of any length needs no walk of the line: an
/// acquisition (on another instance than the waiters', so that the most is
/// looked up for each waiter it looks at) runs as many Redis commands beside
/// 10,000 waiters as beside 150.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_beside_ten_thousand_waiters_does_the_work_it_does_beside_a_hundred_and_fifty(
) {
    let redis = RedisServer::start();
    // Calls that wait their turn behind thousands of joins on a busy machine
    // are not lost replies.
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.redis_timeout = Duration::from_secs(5);
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    let path = "/semaphores/crowded";
    acquire(&a, path, r#"{"limit": 1, "ttl_ms": 600000}"#).await;
    // One HTTP/2 connection carries every wait.
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let body = r#"{"limit": 1, "ttl_ms": 60000, "wait_ms": 300000}"#;

    fill(&h2, &a.base, &a, path, body, 150, 150).await;
    let (short, short_usec) = newcomer_work(&redis, &b, path).await;
    fill(&h2, &a.base, &a, path, body, 9_850, 10_000).await;
    let (long, long_usec) = newcomer_work(&redis, &b, path).await;

    println!(
        "an acquisition beside 150 waiters: {short} commands, {short_usec} µs in Redis; \
         beside 10,000: {long} commands, {long_usec} µs"
    );
    assert_eq!(long, short, "the work grew with the line");
}

/// Waits until `path` has `n` in line.
async fn until_waiting(app: &TestApp, path: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while waiting(app, path).await != n {
        assert!(Instant::now() < deadline, "{path} never had {n} waiting");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A waiting request's body: `permits` of 10, waiting `wait_ms`.
fn waiter(permits: u64, wait_ms: u64, newest_wins: bool) -> String {
    format!(
        r#"{{"limit": 10, "permits": {permits}, "ttl_ms": 60000, "wait_ms": {wait_ms}, "newest_wins": {newest_wins}}}"#
    )
}

/// The sums of the line that admission counts on (how many wait, and their
/// weight) stay those of the line through every way in and out of it:
/// joins, a client that hangs up, a wait that ends, a supersede, grants, the
/// queue's key lost (its waiters rejoin), a force-release. (An instance
/// presumed dead: `tests/faults.rs`.)
#[tokio::test]
async fn the_line_s_sums_stay_those_of_the_line_through_every_way_in_and_out() {
    let app = TestApp::spawn().await;
    let redis = baton_testkit::shared_redis();
    let path = "/semaphores/sums";
    let check = |step: &str| {
        let (kept, line) = redis.line_sums(&app.prefix, "sem:sums");
        assert_eq!(kept, line, "the sums kept after {step}, and the line's");
        line
    };
    let holder = acquire(
        &app,
        path,
        r#"{"limit": 10, "permits": 10, "ttl_ms": 60000}"#,
    )
    .await;

    let mut waiters = Vec::new();
    for permits in [3, 1, 4, 1, 5] {
        waiters.push(join_line(&app, path, &waiter(permits, 60_000, false), &app).await);
    }
    assert_eq!(check("joins"), (5, 14));

    waiters.remove(1).abort();
    until_waiting(&app, path, 4).await;
    assert_eq!(check("a client that hung up"), (4, 13));

    let gave_up = app.post(path, &waiter(2, 300, false)).await;
    problem(gave_up, 409, "semaphore-full").await;
    assert_eq!(check("a wait that ended"), (4, 13));

    let older = join_line(&app, path, &waiter(2, 60_000, true), &app).await;
    assert_eq!(check("a newest_wins join"), (5, 15));
    let newer = app.post_in_background(path, &waiter(3, 60_000, true));
    let superseded = older.await.unwrap().response;
    problem(superseded, 409, "superseded").await;
    until_waiting(&app, path, 5).await;
    assert_eq!(check("a supersede"), (5, 16));

    // 3, 4 and 1 fit in the 10 permits the holder frees; 5 and 3 wait on.
    assert_eq!(
        app.delete(&lease_path("semaphores", &holder))
            .await
            .status(),
        204
    );
    for granted in waiters.drain(..3) {
        assert_eq!(granted.await.unwrap().response.status(), 201);
    }
    until_waiting(&app, path, 2).await;
    assert_eq!(check("grants"), (2, 8));

    let deleted: u32 = redis::cmd("DEL")
        .arg(format!("{}{{sem:sums}}:queue", app.prefix))
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(deleted, 1);
    until_waiting(&app, path, 2).await;
    assert_eq!(check("the queue's key lost, and its waiters back"), (2, 8));

    let last = join_line(&app, path, &waiter(10, 60_000, false), &app).await;
    assert_eq!(check("a join"), (3, 18));
    // The leases end: 5 and 3 fit, 10 waits on.
    assert_eq!(app.delete(path).await.status(), 204);
    let served = [waiters.remove(0), newer];
    for granted in served {
        assert_eq!(granted.await.unwrap().response.status(), 201);
    }
    until_waiting(&app, path, 1).await;
    assert_eq!(check("a force-release"), (1, 10));
    assert!(!last.is_finished());
}
