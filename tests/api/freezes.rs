//! Freezes: made on one instance, applied by every one within a second;
//! nothing granted inside a window but to an admin's override; the line
//! kept and served in order when the window ends; each bad field named.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::time::Instant;

use baton_testkit::{
    join_line, lease_path, problem, settings_for, shared_redis, token_of, unique_prefix, waiting,
    RedisServer, TestApp,
};

/// Milliseconds since the Unix epoch (the test and the services share a clock).
fn now_ms() -> i64 {
    baton::engine::wall_clock_ms()
}

/// RFC 3339 of `ms`.
fn rfc3339(ms: i64) -> String {
    baton::wire::rfc3339_ms(u64::try_from(ms).unwrap())
}

/// Milliseconds of an RFC 3339 time.
fn ms_of(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .timestamp_millis()
}

/// When a lease was granted: its expiry less its ttl (Redis's clock).
fn granted_at(lease: &Value) -> i64 {
    ms_of(lease["expires_at"].as_str().expect("expires_at")) - lease["ttl_ms"].as_i64().unwrap()
}

/// Makes a freeze on `app` with `body`; its JSON.
async fn freeze(app: &TestApp, body: Value) -> Value {
    let response = app.post("/freezes", &body.to_string()).await;
    let status = response.status();
    let made: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{made}");
    made
}

/// Polls `check` until it is true, for at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_freeze_made_on_one_instance_refuses_on_another_within_a_second() {
    let redis = shared_redis();
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&redis.url()).await;
    let until = now_ms() + 60_000;
    let made = freeze(
        &a,
        json!({"match": "deploy-*", "until": rfc3339(until), "reason": "incident 7"}),
    )
    .await;
    assert_eq!(made["active"], true, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();

    let started = Instant::now();
    eventually(Duration::from_secs(5), "B refuses", || async {
        b.post("/locks/deploy-prod", "").await.status() == 423
    })
    .await;
    let applied = started.elapsed();
    let refused = b.post("/semaphores/deploy-db", r#"{"limit": 2}"#).await;
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=61).contains(&retry), "Retry-After {retry}");
    let body = problem(refused, 423, "frozen").await;
    assert_eq!(body["reason"], "incident 7");
    assert_eq!(body["freeze_id"], id.as_str());
    assert_eq!(ms_of(body["until"].as_str().unwrap()), until);
    // Another name is not frozen.
    assert_eq!(b.post("/locks/build", "").await.status(), 201);
    // Both instances list it.
    let listed: Value = b.get("/freezes").await.json().await.unwrap();
    assert_eq!(listed["freezes"][0]["id"], id.as_str(), "{listed}");
    let shown: Value = b.get(&format!("/freezes/{id}")).await.json().await.unwrap();
    assert_eq!(shown["match"], "deploy-*");

    // Deleted on B: A grants again (on a name nobody took: a request B
    // answered before it knew of the freeze may hold deploy-prod).
    assert_eq!(b.delete(&format!("/freezes/{id}")).await.status(), 204);
    eventually(Duration::from_secs(5), "A grants again", || async {
        a.post("/locks/deploy-after", "").await.status() == 201
    })
    .await;
    assert_eq!(a.get(&format!("/freezes/{id}")).await.status(), 404);
    assert_eq!(a.delete(&format!("/freezes/{id}")).await.status(), 404);
    assert!(
        applied < Duration::from_secs(5),
        "applied on B after {applied:?}"
    );
}

#[tokio::test]
async fn waiters_queued_before_and_during_a_freeze_are_served_in_order_after_it() {
    let redis = shared_redis();
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&redis.url()).await;
    let path = "/semaphores/release-train";
    let holder: Value = a
        .post(path, r#"{"limit": 1, "ttl_ms": 60000}"#)
        .await
        .json()
        .await
        .unwrap();
    let wait = r#"{"limit": 1, "ttl_ms": 60000, "wait_ms": 30000}"#;
    let wait_3 = r#"{"limit": 3, "ttl_ms": 60000, "wait_ms": 30000}"#;
    // Before the freeze.
    let first = join_line(&a, path, wait, &a).await;
    let until = now_ms() + 3_000;
    freeze(
        &a,
        json!({"match": "release-train", "kind": "semaphore", "until": rfc3339(until)}),
    )
    .await;
    eventually(Duration::from_secs(5), "B knows the freeze", || async {
        b.post(path, r#"{"limit": 5}"#).await.status() == 423
    })
    .await;
    // During it, on both instances.
    let second = join_line(&b, path, wait_3, &a).await;
    let third = join_line(&a, path, wait_3, &a).await;
    // The holder leaves: nobody is granted inside the window.
    assert_eq!(
        a.delete(&lease_path("semaphores", &holder)).await.status(),
        204
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status: Value = a.get(path).await.json().await.unwrap();
    if now_ms() < until {
        // Read inside the window (a slow answer proves nothing).
        assert_eq!(status["holders"], 0, "granted inside the window: {status}");
        assert_eq!(status["waiting"], 3, "{status}");
    }

    let mut leases = Vec::new();
    for answer in [first, second, third] {
        let answer = answer.await.unwrap();
        assert_eq!(answer.response.status(), 201);
        leases.push(answer.response.json::<Value>().await.unwrap());
    }
    for lease in &leases {
        assert!(
            granted_at(lease) >= until,
            "granted inside the window: {lease}"
        );
    }
    let tokens: Vec<u64> = leases.iter().map(token_of).collect();
    assert!(
        tokens.windows(2).all(|t| t[0] < t[1]),
        "served out of line order: {tokens:?}"
    );
}

/// A service with an API token and an admin token.
async fn guarded() -> TestApp {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.api_tokens = vec!["user-token".into()];
    settings.admin_tokens = vec!["admin-token".into()];
    TestApp::spawn_with(settings).await
}

async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: &str,
) -> reqwest::Response {
    app.client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_override_with_an_admin_token_is_granted_through_a_freeze_and_403_with_an_api_token() {
    let app = guarded().await;
    let body = json!({"match": "ops-*", "until": rfc3339(now_ms() + 60_000), "reason": "freeze"})
        .to_string();
    // Making a freeze is an administrator's.
    let refused = send(&app, Method::POST, "/freezes", "user-token", &body).await;
    problem(refused, 403, "forbidden").await;
    let made = send(&app, Method::POST, "/freezes", "admin-token", &body).await;
    assert_eq!(made.status(), 201);
    // Reading them is anyone's with a token.
    let listed = send(&app, Method::GET, "/freezes", "user-token", "").await;
    assert_eq!(listed.status(), 200);

    let plain = send(&app, Method::POST, "/locks/ops-1", "admin-token", "").await;
    problem(plain, 423, "frozen").await;
    let overriding = r#"{"override": "hotfix for incident 7"}"#;
    let refused = send(&app, Method::POST, "/locks/ops-1", "user-token", overriding).await;
    let body = problem(refused, 403, "forbidden").await;
    assert_eq!(body["scope"], "admin");
    let granted = send(
        &app,
        Method::POST,
        "/locks/ops-1",
        "admin-token",
        overriding,
    )
    .await;
    assert_eq!(granted.status(), 201);
    let lease: Value = granted.json().await.unwrap();

    // A second override waits in line behind the first, and gets it when
    // it is released: in line order, through the freeze.
    let waiting_override = r#"{"override": "second hotfix", "wait_ms": 20000}"#;
    let second = {
        let request = app
            .client
            .post(format!("{}/locks/ops-1", app.base))
            .bearer_auth("admin-token")
            .body(waiting_override);
        tokio::spawn(async move { request.send().await.unwrap() })
    };
    eventually(
        Duration::from_secs(5),
        "the second override queued",
        || async {
            let status: Value = send(&app, Method::GET, "/locks/ops-1", "user-token", "")
                .await
                .json()
                .await
                .unwrap();
            status["waiting"] == 1
        },
    )
    .await;
    let released = send(
        &app,
        Method::DELETE,
        &lease_path("locks", &lease),
        "admin-token",
        "",
    )
    .await;
    assert_eq!(released.status(), 204);
    let second = second.await.unwrap();
    assert_eq!(second.status(), 201);
}

#[tokio::test]
async fn a_recurring_window_that_holds_now_freezes_at_once() {
    let app = TestApp::spawn().await;
    // Every 1 January, until the next 1 January: always.
    let made = freeze(
        &app,
        json!({"match": "yearly", "freeze_start": "0 0 1 1 *", "freeze_end": "0 0 1 1 *",
               "cron_timezone": "Europe/Berlin", "reason": "always"}),
    )
    .await;
    assert_eq!(made["active"], true, "{made}");
    assert!(made["ends_at"].is_string(), "{made}");
    assert_eq!(made["cron_timezone"], "Europe/Berlin");
    problem(app.post("/locks/yearly", "").await, 423, "frozen").await;
    // A window that does not hold now: listed, not active, with its next start.
    let later = freeze(
        &app,
        json!({"match": "nightly", "freeze_start": "0 0 1 1 *", "freeze_end": "1 0 1 1 *"}),
    )
    .await;
    if later["active"] == false {
        assert!(later["next_start"].is_string(), "{later}");
        assert_eq!(app.post("/locks/nightly", "").await.status(), 201);
    }
}

#[tokio::test]
async fn each_bad_freeze_answers_400_naming_its_field() {
    let app = TestApp::spawn().await;
    let soon = rfc3339(now_ms() + 60_000);
    let past = rfc3339(now_ms() - 60_000);
    let cases = [
        (json!({"until": soon}), "match"),
        (
            json!({"match": "a", "freeze_start": "0 25 * * *", "freeze_end": "0 7 * * 1"}),
            "freeze_start",
        ),
        (
            json!({"match": "a", "freeze_start": "0 23 * * 5", "freeze_end": "every monday"}),
            "freeze_end",
        ),
        (
            json!({"match": "a", "freeze_start": "0 23 * * 5", "freeze_end": "0 7 * * 1",
                "cron_timezone": "Mars/Olympus_Mons"}),
            "cron_timezone",
        ),
        (json!({"match": "a", "until": past}), "until"),
        (
            json!({"match": "a", "from": rfc3339(now_ms() + 120_000), "until": soon}),
            "until",
        ),
        (json!({"match": "a", "until": "tomorrow"}), "until"),
        (json!({"match": "a"}), "until"),
        (
            json!({"match": "a", "freeze_start": "0 23 * * 5"}),
            "freeze_end",
        ),
        (json!({"match": "a\u{7}", "until": soon}), "match"),
        (
            json!({"match": "a", "until": soon, "kind": "mutex"}),
            "kind",
        ),
    ];
    for (body, field) in cases {
        let answer = app.post("/freezes", &body.to_string()).await;
        let problem = problem(answer, 400, "invalid-request").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("{field}: ")) || detail.starts_with(field),
            "{body}: {detail}"
        );
    }
    let listed: Value = app.get("/freezes").await.json().await.unwrap();
    assert_eq!(listed["freezes"], json!([]), "nothing was made");
}

/// The commands Redis runs for one uncontended acquire and release of `path`
/// on `app`: the fewest of five cycles (a keep-alive or a reload may fall
/// into one).
async fn cycle_commands(redis: &RedisServer, app: &TestApp, path: &str) -> u64 {
    let mut fewest = u64::MAX;
    for _ in 0..5 {
        let before = redis.commands().0;
        let lease: Value = app.post(path, "").await.json().await.unwrap();
        assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
        fewest = fewest.min(redis.commands().0 - before);
    }
    fewest
}

#[tokio::test]
async fn a_name_no_freeze_matches_costs_what_it_cost_before() {
    let redis = RedisServer::start();
    // Counted without history's command, as the other cost tests count.
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.history_max = 0;
    let app = TestApp::spawn_with(settings).await;
    let plain = cycle_commands(&redis, &app, "/locks/plain").await;
    freeze(
        &app,
        json!({"match": "frozen-*", "until": rfc3339(now_ms() + 60_000)}),
    )
    .await;
    let beside = cycle_commands(&redis, &app, "/locks/plain").await;
    assert_eq!(plain, 8, "an uncontended cycle");
    assert_eq!(
        beside, plain,
        "a freeze of other names costs this one nothing"
    );
}

#[tokio::test]
async fn a_waiting_request_hears_that_the_name_is_frozen_and_until_when() {
    let app = TestApp::spawn().await;
    let until = now_ms() + 2_000;
    freeze(
        &app,
        json!({"match": "watched", "until": rfc3339(until), "reason": "audit"}),
    )
    .await;
    let response = app
        .client
        .post(format!("{}/locks/watched", app.base))
        .header("accept", "text/event-stream")
        .body(r#"{"wait_ms": 20000}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(15), response.text())
        .await
        .expect("the stream ends")
        .expect("the stream reads");
    let frozen = text
        .split("\n\n")
        .find(|e| e.contains("event: frozen"))
        .unwrap_or_else(|| panic!("no frozen event in {text}"));
    let data: Value = serde_json::from_str(
        frozen
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ms_of(data["until"].as_str().unwrap()), until);
    assert_eq!(data["reason"], "audit");
    let acquired = text
        .split("\n\n")
        .find(|e| e.contains("event: acquired"))
        .unwrap_or_else(|| panic!("not acquired after the window: {text}"));
    let lease: Value = serde_json::from_str(
        acquired
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap(),
    )
    .unwrap();
    assert!(granted_at(&lease) >= until, "{lease}");
}

/// A freeze whose window ends while Redis stalls (`DEBUG SLEEP`): nothing is
/// granted inside it, and the line is served in order once Redis answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_that_ends_while_redis_stalls_serves_the_line_in_order_afterwards() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let b = a.sibling_of(&redis.url()).await;
    let path = "/semaphores/stalled";
    let until = now_ms() + 2_500;
    freeze(&a, json!({"match": "stalled", "until": rfc3339(until)})).await;
    eventually(Duration::from_secs(5), "B knows the freeze", || async {
        b.post(path, r#"{"limit": 5}"#).await.status() == 423
    })
    .await;
    let body = r#"{"limit": 3, "ttl_ms": 60000, "wait_ms": 30000}"#;
    let mut answers = Vec::new();
    for app in [&a, &b, &a] {
        answers.push(join_line(app, path, body, &a).await);
    }
    // Redis stalls across the end of the window (for less than the time an
    // instance that does not call is presumed alive, so that nobody's
    // waiters are taken for dead ones: that is another story).
    let left = u64::try_from((until - now_ms() - 300).max(0)).unwrap();
    tokio::time::sleep(Duration::from_millis(left)).await;
    let stall = redis.stall(1);
    let mut leases = Vec::new();
    for answer in answers {
        let answer = answer.await.unwrap();
        assert_eq!(answer.response.status(), 201);
        leases.push(answer.response.json::<Value>().await.unwrap());
    }
    stall.join().unwrap().unwrap();
    for lease in &leases {
        assert!(
            granted_at(lease) >= until,
            "granted inside the window: {lease}"
        );
    }
    let tokens: Vec<u64> = leases.iter().map(token_of).collect();
    assert!(
        tokens.windows(2).all(|t| t[0] < t[1]),
        "served out of line order: {tokens:?}"
    );
    assert_eq!(waiting(&a, path).await, 0);
}

/// While a name is frozen its status says which freeze holds it, until when
/// and why, and a free name with a queue behind the freeze is listed
/// (`held: false`, its `waiting`), so that the dashboard shows it.
#[tokio::test]
async fn a_queue_behind_a_freeze_shows_in_status_and_listings() {
    let app = TestApp::spawn().await;
    let until = now_ms() + 60_000;
    let made = freeze(
        &app,
        json!({"match": "rel-*", "until": rfc3339(until), "reason": "release"}),
    )
    .await;
    eventually(Duration::from_secs(5), "rel-a frozen", || async {
        app.post("/locks/rel-a", "").await.status() == 423
    })
    .await;
    let waiter = join_line(&app, "/locks/rel-a", r#"{"wait_ms": 20000}"#, &app).await;

    let status: Value = app.get("/locks/rel-a").await.json().await.unwrap();
    assert_eq!(status["held"], false, "{status}");
    assert_eq!(status["waiting"], 1, "{status}");
    assert_eq!(status["frozen"]["freeze_id"], made["id"], "{status}");
    assert_eq!(status["frozen"]["reason"], "release", "{status}");
    assert_eq!(ms_of(status["frozen"]["until"].as_str().unwrap()), until);
    let listed: Value = app.get("/locks?prefix=rel-").await.json().await.unwrap();
    let entry = listed["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .find(|e| e["name"] == "rel-a")
        .cloned()
        .unwrap_or_else(|| panic!("a queue behind a freeze is not listed: {listed}"));
    assert_eq!(entry["held"], false, "{entry}");
    assert_eq!(entry["waiting"], 1, "{entry}");
    let other: Value = app.get("/locks/build").await.json().await.unwrap();
    assert!(other.get("frozen").is_none(), "{other}");

    let id = made["id"].as_str().expect("id");
    assert_eq!(app.delete(&format!("/freezes/{id}")).await.status(), 204);
    assert_eq!(waiter.await.expect("waiter").response.status(), 201);
}

/// A call carries until when (Redis's clock) the list of freezes it was
/// chosen from counts as fresh: one that reaches Redis after that (built,
/// then its instance stopped or its connection stalled) grants nothing, as
/// a freeze would, though it carries no window; one in time is served.
#[tokio::test]
async fn a_call_that_reaches_redis_after_its_list_of_freezes_went_stale_grants_nothing() {
    let redis = shared_redis();
    let app = TestApp::spawn().await;
    // (Its first call loads the library where it is missing.)
    assert_eq!(app.get("/locks/stale").await.status(), 200);
    let mut conn = redis.conn();
    let keys = baton::engine::Keys::new(app.prefix.clone());
    let capacity = baton::domain::Demand::LOCK_CAPACITY;
    let acquire = |name: &str, freeze: &str| {
        let name = baton::domain::Name::parse(name).unwrap();
        let mut call = redis::cmd("FCALL");
        call.arg(baton::engine::function_name("acquire").unwrap())
            .arg(1)
            .arg(keys.owners(baton::domain::Kind::Lock, &name))
            .arg("")
            .arg(baton::engine::call_context(
                freeze,
                baton::domain::Kind::Lock,
                "PUBLISH",
                "an-instance",
                "nowhere",
                &baton::engine::history_terms(0, 7),
                &name,
            ))
            .arg(format!(
                "{}|1|an-instance|30000|{capacity}|{capacity}|0|0|\n\n",
                uuid::Uuid::new_v4()
            ))
            .arg(0);
        call
    };
    let stale = format!("||{}", now_ms() - 1);
    let reply: Vec<redis::Value> = acquire("stale", &stale).query(&mut conn).unwrap();
    assert_eq!(reply[0], redis::Value::Int(3), "held back: {reply:?}");
    let fresh = format!("||{}", now_ms() + 60_000);
    let reply: Vec<redis::Value> = acquire("stale", &fresh).query(&mut conn).unwrap();
    assert_eq!(reply[0], redis::Value::Int(1), "acquired: {reply:?}");
}

/// Reads `events` until `text` holds an event named `name`.
async fn read_until(events: &mut reqwest::Response, text: &mut String, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !text.contains(&format!("event: {name}")) {
        assert!(Instant::now() < deadline, "no {name} event: {text}");
        let chunk = tokio::time::timeout(Duration::from_secs(30), events.chunk()).await;
        let chunk = chunk
            .unwrap_or_else(|_| panic!("no {name} event: {text}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before a {name} event: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// The data of the first event named `name` in `text`.
fn event_data(text: &str, name: &str) -> Value {
    let block = text
        .split("\n\n")
        .find(|block| block.lines().any(|l| l == format!("event: {name}")))
        .unwrap_or_else(|| panic!("no {name} event: {text}"));
    let data = block
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or_else(|| panic!("no data: {block}"));
    serde_json::from_str(data.trim()).unwrap()
}

/// A claim with progress events on `app`; its response, status checked.
async fn claim_with_events(app: &TestApp, body: &str) -> reqwest::Response {
    let events = app
        .client
        .post(format!("{}/claims", app.base))
        .header("accept", "text/event-stream")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    events
}

fn held(status: &Value) -> bool {
    status["held"] == true || status["holders"].as_u64().unwrap_or(0) > 0
}

async fn status(app: &TestApp, path: &str) -> Value {
    app.get(path).await.json().await.unwrap()
}

#[tokio::test]
async fn a_claim_that_does_not_wait_gets_423_frozen_like_a_single_request() {
    let redis = shared_redis();
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&redis.url()).await;
    let until = now_ms() + 60_000;
    let made = freeze(
        &a,
        json!({"match": "deploy-*", "until": rfc3339(until), "reason": "release weekend"}),
    )
    .await;
    eventually(Duration::from_secs(5), "B knows the freeze", || async {
        b.post("/locks/deploy-probe", "").await.status() == 423
    })
    .await;

    let body = r#"{"locks": [{"name": "db-migration"}, {"name": "deploy-prod"}], "semaphores": [{"name": "deploy-pool", "limit": 2}]}"#;
    let refused = b.post("/claims", body).await;
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=61).contains(&retry), "Retry-After {retry}");
    let problem_body = problem(refused, 423, "frozen").await;
    assert_eq!(problem_body["reason"], "release weekend", "{problem_body}");
    assert_eq!(problem_body["freeze_id"], made["id"], "{problem_body}");
    assert_eq!(ms_of(problem_body["until"].as_str().unwrap()), until);
    assert!(
        problem_body["detail"]
            .as_str()
            .unwrap()
            .contains("deploy-prod"),
        "{problem_body}"
    );
    // Nothing held: not even the name before the frozen one.
    assert!(!held(&status(&a, "/locks/db-migration").await));
    assert_eq!(a.post("/locks/db-migration", "").await.status(), 201);
}

#[tokio::test]
async fn a_waiting_claim_holds_none_of_its_names_while_one_is_frozen_and_takes_them_when_the_window_ends(
) {
    let redis = shared_redis();
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&redis.url()).await;
    let until = now_ms() + 8_000;
    freeze(
        &a,
        json!({"match": "deploy-*", "until": rfc3339(until), "reason": "release weekend"}),
    )
    .await;
    eventually(Duration::from_secs(5), "B knows the freeze", || async {
        b.post("/locks/deploy-probe", "").await.status() == 423
    })
    .await;

    let mut events = claim_with_events(
        &b,
        r#"{"locks": [{"name": "db-migration"}, {"name": "deploy-prod"}], "wait_ms": 30000, "owner": "claim"}"#,
    )
    .await;
    let mut text = String::new();
    read_until(&mut events, &mut text, "frozen").await;
    let frozen = event_data(&text, "frozen");
    assert_eq!(frozen["held"], json!([]), "{text}");
    assert_eq!(
        frozen["waiting_for"],
        json!({"kind": "lock", "name": "deploy-prod"}),
        "{text}"
    );
    assert_eq!(ms_of(frozen["until"].as_str().unwrap()), until, "{text}");
    assert!(!text.contains("event: queued"), "in no line: {text}");

    // An unrelated job that needs only db-migration takes it at once, on
    // the other instance, and nobody waits in the frozen name's line.
    assert!(!held(&status(&a, "/locks/db-migration").await));
    let job = a.acquire_lock("db-migration", r#"{"owner": "job"}"#).await;
    assert_eq!(waiting(&a, "/locks/deploy-prod").await, 0);
    assert_eq!(a.delete(&lease_path("locks", &job)).await.status(), 204);

    // When the window ends, the claim takes its names.
    read_until(&mut events, &mut text, "acquired").await;
    let claim = event_data(&text, "acquired");
    let leases = claim["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 2, "{claim}");
    for lease in leases {
        assert!(
            granted_at(lease) >= until,
            "granted inside the window: {lease}"
        );
        assert_eq!(a.get(&lease_path("locks", lease)).await.status(), 200);
    }
}

#[tokio::test]
async fn a_freeze_that_starts_while_a_claim_waits_makes_it_give_back_what_it_took() {
    let redis = shared_redis();
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&redis.url()).await;
    let holder = a.acquire_lock("deploy-api", r#"{"owner": "holder"}"#).await;
    let mut events = claim_with_events(
        &b,
        r#"{"locks": [{"name": "cache-warm"}, {"name": "deploy-api"}], "wait_ms": 30000, "owner": "claim"}"#,
    )
    .await;
    let mut text = String::new();
    // It holds cache-warm while it waits in deploy-api's line.
    read_until(&mut events, &mut text, "queued").await;
    assert_eq!(status(&a, "/locks/cache-warm").await["owner"], "claim");

    let made = freeze(
        &a,
        json!({"match": "deploy-*", "until": rfc3339(now_ms() + 60_000), "reason": "incident 9"}),
    )
    .await;
    read_until(&mut events, &mut text, "frozen").await;
    let frozen = event_data(&text, "frozen");
    assert_eq!(frozen["held"], json!([]), "{text}");
    assert_eq!(frozen["freeze_id"], made["id"], "{text}");
    eventually(Duration::from_secs(5), "cache-warm given back", || async {
        !held(&status(&a, "/locks/cache-warm").await)
    })
    .await;
    assert_eq!(waiting(&a, "/locks/deploy-api").await, 0, "left the line");
    assert_eq!(
        a.post("/locks/cache-warm", r#"{"ttl_ms": 1}"#)
            .await
            .status(),
        201
    );

    // The freeze lifted and the holder gone, the claim takes both.
    let id = made["id"].as_str().unwrap();
    assert_eq!(a.delete(&format!("/freezes/{id}")).await.status(), 204);
    assert_eq!(a.delete(&lease_path("locks", &holder)).await.status(), 204);
    read_until(&mut events, &mut text, "acquired").await;
    let claim = event_data(&text, "acquired");
    assert_eq!(claim["leases"].as_array().unwrap().len(), 2, "{claim}");
}

#[tokio::test]
async fn a_claim_s_override_needs_an_admin_token_and_is_granted_through_a_freeze() {
    let app = guarded().await;
    let body = json!({"match": "ops-*", "until": rfc3339(now_ms() + 60_000), "reason": "freeze"})
        .to_string();
    assert_eq!(
        send(&app, Method::POST, "/freezes", "admin-token", &body)
            .await
            .status(),
        201
    );
    let claim = r#"{"locks": [{"name": "ops-db"}, {"name": "ops-web"}]}"#;
    let plain = send(&app, Method::POST, "/claims", "admin-token", claim).await;
    problem(plain, 423, "frozen").await;

    let overriding =
        r#"{"locks": [{"name": "ops-db"}, {"name": "ops-web"}], "override": "hotfix 12"}"#;
    let refused = send(&app, Method::POST, "/claims", "user-token", overriding).await;
    let body = problem(refused, 403, "forbidden").await;
    assert_eq!(body["scope"], "admin", "{body}");
    let granted = send(&app, Method::POST, "/claims", "admin-token", overriding).await;
    assert_eq!(granted.status(), 201);
    let granted: Value = granted.json().await.unwrap();
    assert_eq!(granted["leases"].as_array().unwrap().len(), 2, "{granted}");
    for name in ["ops-db", "ops-web"] {
        let history: Value = send(
            &app,
            Method::GET,
            &format!("/locks/{name}/history"),
            "user-token",
            "",
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(history["entries"][0]["override"], "hotfix 12", "{history}");
    }
}
