//! Tickets: a place in line that outlives the request (`keep_place_ms`),
//! with two instances on one Redis.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use baton_testkit::BatonProcess;
use baton_testkit::{
    join_line, lease_path, problem, settings_for, shared_redis, token_of, unique_prefix,
    RedisServer, TestApp,
};

/// Takes a ticket on `path` (wait 0, the name busy): the 202's body, after
/// checking its `Location`.
async fn take_ticket(app: &TestApp, path: &str, body: &str) -> Value {
    let response = app.post(path, body).await;
    assert_eq!(response.status(), 202, "a ticket for {body}");
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("Location");
    let ticket: Value = response.json().await.unwrap();
    assert_eq!(
        location,
        format!("{path}/tickets/{}", ticket["ticket"].as_str().unwrap())
    );
    assert!(ticket["place"].as_u64().unwrap() >= 1, "{ticket}");
    assert!(ticket["place_expires_at"].is_string(), "{ticket}");
    ticket
}

fn ticket_path(path: &str, ticket: &Value) -> String {
    format!("{path}/tickets/{}", ticket["ticket"].as_str().unwrap())
}

/// Polls `check` until it is true, for at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_keeps_its_place_ahead_of_later_waiters_and_is_collected_on_another_instance() {
    let redis = shared_redis();
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&redis.url()).await;
    for (kind, extra) in [("locks", ""), ("semaphores", r#""limit": 1, "#)] {
        let path = format!("/{kind}/ticket-order");
        let held: Value = a
            .post(&path, &format!(r#"{{{extra}"ttl_ms": 60000}}"#))
            .await
            .json()
            .await
            .unwrap();
        let ticket = take_ticket(
            &a,
            &path,
            &format!(r#"{{{extra}"ttl_ms": 30000, "keep_place_ms": 600000, "owner": "ticket"}}"#),
        )
        .await;
        let at = ticket_path(&path, &ticket);
        // A later waiter, on the other instance.
        let later = join_line(
            &b,
            &path,
            &format!(r#"{{{extra}"wait_ms": 30000, "owner": "later"}}"#),
            &a,
        )
        .await;
        // Status (and so the dashboard) shows the ticket in the line, with
        // until when its place is kept, apart from the waiting request.
        let status: Value = b.get(&path).await.json().await.unwrap();
        assert_eq!(status["waiters"][0]["ticket"], true, "{status}");
        assert!(status["waiters"][0]["kept_until"].is_string(), "{status}");
        assert!(status["waiters"][1].get("ticket").is_none(), "{status}");
        let shown: Value = b.get(&at).await.json().await.unwrap();
        assert_eq!(shown["state"], "waiting", "{shown}");
        assert_eq!(shown["place"], 1, "{shown}");
        assert_eq!(shown["waiting"], 2, "{shown}");

        // Released: the ticket's turn, though nobody waits on it.
        assert_eq!(a.delete(&lease_path(kind, &held)).await.status(), 204);
        let shown: Value = b.get(&at).await.json().await.unwrap();
        assert_eq!(shown["state"], "granted", "{shown}");
        assert!(shown["pickup_by"].is_string(), "{shown}");
        assert!(
            !later.is_finished(),
            "{kind}: the later waiter overtook the ticket"
        );

        // Collected on the other instance: 201, the ttl from now.
        let collected = b.post(&at, "").await;
        assert_eq!(collected.status(), 201);
        let lease: Value = collected.json().await.unwrap();
        assert_eq!(lease["id"], ticket["ticket"], "{lease}");
        assert_eq!(lease["owner"], "ticket", "{lease}");
        assert_eq!(lease["ttl_ms"], 30000, "{lease}");
        // Collected again (a retry): the same lease, never a second.
        let again: Value = a.post(&at, "{}").await.json().await.unwrap();
        assert_eq!(token_of(&again), token_of(&lease), "{again}");
        assert_eq!(again["expires_at"], lease["expires_at"], "{again}");
        // Gone as a ticket once collected.
        problem(a.get(&at).await, 404, "ticket-not-found").await;
        assert!(
            !later.is_finished(),
            "{kind}: served beside the ticket's lease"
        );

        assert_eq!(b.delete(&lease_path(kind, &lease)).await.status(), 204);
        let later = later.await.unwrap();
        assert_eq!(later.response.status(), 201, "{kind}");
        let served: Value = later.response.json().await.unwrap();
        assert!(token_of(&served) > token_of(&lease));
        a.delete(&lease_path(kind, &served)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_place_ms_is_checked_and_a_ticket_can_be_left() {
    let app = TestApp::spawn().await;
    let path = "/locks/ticket-checks";
    for bad in [r#"{"keep_place_ms": 0}"#, r#"{"keep_place_ms": 604800001}"#] {
        let body = problem(app.post(path, bad).await, 400, "invalid-request").await;
        assert!(
            body["detail"].as_str().unwrap().contains("keep_place_ms"),
            "{body}"
        );
    }
    // Free: acquired at once, no ticket.
    let lease = app.post(path, r#"{"keep_place_ms": 60000}"#).await;
    assert_eq!(lease.status(), 201);
    let lease: Value = lease.json().await.unwrap();
    let ticket = take_ticket(&app, path, r#"{"keep_place_ms": 60000}"#).await;
    let at = ticket_path(path, &ticket);
    let unknown = format!("{path}/tickets/{}", uuid::Uuid::new_v4());
    problem(app.get(&unknown).await, 404, "ticket-not-found").await;
    problem(app.post(&unknown, "").await, 404, "ticket-not-found").await;
    problem(app.delete(&unknown).await, 404, "ticket-not-found").await;
    problem(
        app.get(&format!("{path}/tickets/x")).await,
        400,
        "invalid-request",
    )
    .await;
    let waiting: Value = app
        .post(&at, r#"{"wait_ms": 50}"#)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(waiting["place"], 1, "{waiting}");
    assert_eq!(app.delete(&at).await.status(), 204);
    problem(app.get(&at).await, 404, "ticket-not-found").await;
    let status: Value = app.get(path).await.json().await.unwrap();
    assert_eq!(status["waiting"], 0, "{status}");
    app.delete(&lease_path("locks", &lease)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_not_collected_by_pickup_by_ends_not_collected_and_the_line_moves_on() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let mut settings = settings_for(&redis.url(), &prefix);
    settings.pickup_ms = 1500;
    let a = TestApp::spawn_with(settings).await;
    let b = a.sibling_of(&redis.url()).await;
    let path = "/locks/ticket-pickup";
    let held = a
        .acquire_lock("ticket-pickup", r#"{"ttl_ms": 60000}"#)
        .await;
    let ticket = take_ticket(&a, path, r#"{"keep_place_ms": 600000, "owner": "away"}"#).await;
    let later = join_line(&b, path, r#"{"wait_ms": 30000, "owner": "later"}"#, &a).await;
    assert_eq!(a.delete(&lease_path("locks", &held)).await.status(), 204);
    let later = later.await.unwrap();
    assert_eq!(later.response.status(), 201);
    let served: Value = later.response.json().await.unwrap();
    assert_eq!(served["owner"], "later");
    problem(
        a.get(&ticket_path(path, &ticket)).await,
        404,
        "ticket-not-found",
    )
    .await;
    let history: Value = a
        .get(&format!("{path}/history"))
        .await
        .json()
        .await
        .unwrap();
    let ends: Vec<(&str, &str)> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["owner"].as_str().unwrap_or(""),
                e["end"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ends,
        vec![
            ("later", "held"),
            ("away", "not-collected"),
            ("", "released")
        ],
        "{history}"
    );
    a.delete(&lease_path("locks", &served)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_is_collected_on_another_instance_after_its_own_was_killed() {
    let redis = shared_redis();
    let app = TestApp::spawn().await;
    let doomed = BatonProcess::start(&app.prefix, &[]).await;
    let path = "/locks/ticket-killed";
    let held = app
        .acquire_lock("ticket-killed", r#"{"ttl_ms": 60000}"#)
        .await;
    let ticket = take_ticket(&app, path, r#"{"keep_place_ms": 600000}"#).await;
    let at = ticket_path(path, &ticket);
    // Waiting on it on the doomed instance.
    let request = reqwest::Client::new()
        .post(format!("{}{at}", doomed.base))
        .body(r#"{"wait_ms": 60000}"#);
    let _waiting = tokio::spawn(async move { request.send().await });
    let later = join_line(&app, path, r#"{"wait_ms": 30000, "owner": "later"}"#, &app).await;
    drop(doomed);
    // Past the time an instance is presumed dead (3 s).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let _ = redis;
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let collected = app.post(&at, r#"{"wait_ms": 10000}"#).await;
    assert_eq!(collected.status(), 201);
    let lease: Value = collected.json().await.unwrap();
    assert!(!later.is_finished(), "the later waiter overtook the ticket");
    app.delete(&lease_path("locks", &lease)).await;
    assert_eq!(later.await.unwrap().response.status(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_collect_after_a_lost_reply_gets_the_same_lease() {
    let redis = RedisServer::start();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.redis_timeout = Duration::from_millis(300);
    let app = TestApp::spawn_with(settings).await;
    let path = "/locks/ticket-lost-reply";
    let held = app
        .acquire_lock("ticket-lost-reply", r#"{"ttl_ms": 60000}"#)
        .await;
    let ticket = take_ticket(&app, path, r#"{"keep_place_ms": 600000}"#).await;
    let at = ticket_path(path, &ticket);
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    // The collect reaches Redis while it stalls: its reply is lost (503).
    let stall = redis.stall(2);
    let lost = app.post(&at, "").await;
    assert_eq!(lost.status(), 503);
    stall.join().unwrap().unwrap();
    let mut leases = Vec::new();
    for _ in 0..2 {
        let retried = app.post(&at, "").await;
        assert_eq!(retried.status(), 201);
        leases.push(retried.json::<Value>().await.unwrap());
    }
    assert_eq!(leases[0]["id"], leases[1]["id"]);
    assert_eq!(token_of(&leases[0]), token_of(&leases[1]));
    assert_eq!(leases[0]["expires_at"], leases[1]["expires_at"]);
    let status: Value = app.get(path).await.json().await.unwrap();
    assert_eq!(status["held"], true, "{status}");
    assert_eq!(status["fencing_token"], token_of(&leases[0]), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_survive_a_freeze_longer_than_the_longest_wait_and_are_served_in_order() {
    let redis = shared_redis();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.max_wait_ms = 1000;
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    let name = "ticket-frozen";
    let path = format!("/locks/{name}");
    let until = chrono::Utc::now() + chrono::Duration::seconds(5);
    let made = a
        .post(
            "/freezes",
            &json!({"match": name, "until": until.to_rfc3339(), "reason": "incident"}).to_string(),
        )
        .await;
    assert_eq!(made.status(), 201);
    // Both wait longer than the service's cap allows, keeping their places.
    let body = r#"{"wait_ms": 60000, "keep_place_ms": 600000}"#;
    let first: Value = a.post(&path, body).await.json().await.unwrap();
    assert!(first["frozen"].is_object(), "{first}");
    let second: Value = b.post(&path, body).await.json().await.unwrap();
    let mut order = Vec::new();
    let mut open = vec![
        (&a, ticket_path(&path, &first)),
        (&b, ticket_path(&path, &second)),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "tickets never served");
        let (app, at) = open.remove(0);
        let answer = app.post(&at, r#"{"wait_ms": 60000}"#).await;
        match answer.status().as_u16() {
            201 => {
                let lease: Value = answer.json().await.unwrap();
                order.push(at.clone());
                app.delete(&lease_path("locks", &lease)).await;
            }
            202 => open.push((app, at)),
            other => panic!("{other}"),
        }
    }
    assert_eq!(
        order,
        vec![ticket_path(&path, &first), ticket_path(&path, &second)]
    );
    eventually(Duration::from_secs(5), "the line empties", || async {
        let status: Value = a.get(&path).await.json().await.unwrap();
        status["waiting"] == 0
    })
    .await;
}

/// Used memory of `redis` (INFO memory), in bytes.
fn used_memory(redis: &RedisServer) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut redis.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

/// Sends `count` POSTs (`path_of(i)`, `body`) 32 at a time; each must answer `status`.
async fn flood(
    app: &TestApp,
    count: usize,
    path_of: impl Fn(usize) -> String,
    body: &str,
    status: u16,
) {
    use futures_util::StreamExt;
    futures_util::stream::iter(0..count)
        .map(|i| {
            let request = app
                .client
                .post(format!("{}{}", app.base, path_of(i)))
                .body(body.to_owned());
            async move { request.send().await.expect("sent").status().as_u16() }
        })
        .buffer_unordered(32)
        .for_each(|got| async move { assert_eq!(got, status) })
        .await;
}

/// Redis commands per second while nothing happens but the instance's own
/// upkeep, over `seconds`.
async fn idle_commands_per_second(redis: &RedisServer, seconds: u64) -> f64 {
    let before = redis.commands().0;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    (redis.commands().0 - before) as f64 / seconds as f64
}

/// The figures of docs/performance.md's "Tickets": what 10,000 tickets cost
/// Redis while they wait (no keep-alive), on one name and on 10,000 names.
/// Run by hand: `cargo test --test api tickets_cost -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, printed; run by hand"]
async fn tickets_cost_redis_no_keep_alive() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let idle = idle_commands_per_second(&redis, 5).await;
    app.acquire_lock("many", r#"{"ttl_ms": 3600000}"#).await;
    let before = used_memory(&redis);
    flood(
        &app,
        10_000,
        |_| "/locks/many".to_owned(),
        r#"{"keep_place_ms": 3600000}"#,
        202,
    )
    .await;
    let per_ticket = (used_memory(&redis) - before) / 10_000;
    let one_name = idle_commands_per_second(&redis, 5).await;
    let start = Instant::now();
    let status: Value = app.get("/locks/many").await.json().await.unwrap();
    assert_eq!(status["waiting"], 10_000);
    let late = app
        .post("/locks/many", r#"{"keep_place_ms": 3600000}"#)
        .await;
    assert_eq!(late.status(), 202);
    let acquire_behind = start.elapsed();
    flood(
        &app,
        10_000,
        |i| format!("/locks/n{i}"),
        r#"{"ttl_ms": 3600000}"#,
        201,
    )
    .await;
    flood(
        &app,
        10_000,
        |i| format!("/locks/n{i}"),
        r#"{"keep_place_ms": 3600000}"#,
        202,
    )
    .await;
    let many_names = idle_commands_per_second(&redis, 5).await;
    println!(
        "idle: {idle:.1} commands/s; 10,000 tickets on one name: {one_name:.1}/s, \
         {per_ticket} bytes each; on 10,000 names: {many_names:.1}/s; a status and an \
         acquire behind 10,000 tickets: {acquire_behind:?}"
    );
}

/// A name that always has a ticket keeps its tickets hash for ever: the
/// tombstones of tickets that ended (so that a paused waiter of one does not
/// rejoin) are dropped by chance as tickets end, as Redis expires keys, so
/// 200 tickets taken and left leave a handful of fields, not 200.
#[tokio::test]
async fn ended_tickets_do_not_pile_up_in_a_name_that_always_has_tickets() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &prefix)).await;
    let path = "/locks/busy-queue";
    app.acquire_lock("busy-queue", r#"{"ttl_ms": 600000}"#)
        .await;
    // One that stays: the hash never expires.
    take_ticket(&app, path, r#"{"keep_place_ms": 600000}"#).await;
    for _ in 0..200 {
        let ticket = take_ticket(&app, path, r#"{"keep_place_ms": 1}"#).await;
        let left = app
            .delete(&format!(
                "{path}/tickets/{}",
                ticket["ticket"].as_str().unwrap()
            ))
            .await;
        assert!(
            matches!(left.status().as_u16(), 204 | 404),
            "{}",
            left.status()
        );
    }
    let fields: u64 = redis::cmd("HLEN")
        .arg(format!("{prefix}{{lock:busy-queue}}:tickets"))
        .query(&mut redis.conn())
        .unwrap();
    assert!(fields >= 1, "the ticket that stays is there");
    assert!(fields < 50, "{fields} fields after 200 tickets ended");
}
