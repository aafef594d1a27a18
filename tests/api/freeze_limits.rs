//! What bounds the freezes, so that no team can stall or starve the
//! others: a freeze is checked when it is made (a recurring one opens
//! within 366 days, a one-off ends within `BATON_FREEZE_MAX_DAYS`); one
//! token name keeps at most 100 in force, and the 1,000 in all never
//! refuses an admin of every name; and a thousand freezes that never open,
//! planted straight into Redis, leave every other call answering.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::time::Instant;

use baton_testkit::{problem, settings_for, shared_redis, unique_prefix, RedisServer, TestApp};

/// Milliseconds since the Unix epoch (the test and the services share a clock).
fn now_ms() -> i64 {
    baton::engine::wall_clock_ms()
}

fn rfc3339(ms: i64) -> String {
    baton::wire::rfc3339_ms(u64::try_from(ms).unwrap())
}

const DAY_MS: i64 = 86_400_000;

/// Writes `n` recurring freezes of `pattern` (`start` to `end`, UTC) made by
/// the token `by` straight into Redis under `prefix`, as the service keeps
/// them, past any check and any cap, and tells every instance (the list's
/// version raised, the change published).
fn plant(
    conn: &mut redis::Connection,
    prefix: &str,
    n: usize,
    pattern: &str,
    start: &str,
    end: &str,
) {
    let index = format!("{prefix}{{freezes}}:index");
    let mut pipe = redis::pipe();
    for i in 0..n {
        let id = uuid::Uuid::new_v4().to_string();
        let key = format!("{prefix}{{freezes}}:{id}");
        let stored = json!({
            "id": id, "match": pattern, "freeze_start": start, "freeze_end": end,
            "cron_timezone": "UTC", "created_ms": now_ms() + i64::try_from(i).unwrap(),
            "by": "planted",
        });
        pipe.set(&key, stored.to_string())
            .ignore()
            .zadd(&index, &key, "+inf")
            .ignore();
    }
    pipe.set(
        format!("{prefix}{{freezes}}:version"),
        now_ms() * 1000 + 999,
    )
    .ignore()
    .publish(format!("{prefix}freezes"), "put")
    .ignore();
    pipe.query::<()>(conn).expect("planting freezes");
}

/// How many freezes `app` lists to `token` (none: auth off); `None` when
/// it did not answer 200.
async fn listed(app: &TestApp, token: Option<&str>) -> Option<usize> {
    let mut request = app.client.get(format!("{}/freezes", app.base));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = tokio::time::timeout(Duration::from_secs(20), request.send())
        .await
        .expect("GET /freezes: no answer within 20 s")
        .unwrap();
    let status = answer.status();
    let body: Value = answer.json().await.unwrap();
    if status != 200 {
        eprintln!("GET /freezes: {status} {body}");
        return None;
    }
    Some(body["freezes"].as_array().expect("freezes").len())
}

/// Polls until `app` lists `n` freezes.
async fn until_listed(app: &TestApp, token: Option<&str>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = listed(app, token).await;
        if seen == Some(n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{seen:?} freezes listed, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `request`'s answer, its status and how long it took; a call that takes
/// more than a generous 20 s fails the test (unbounded, working out a
/// thousand freezes that never open took minutes in a debug build).
async fn timed(what: &str, request: reqwest::RequestBuilder) -> (u16, Duration) {
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(20), request.send())
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 20 s"))
        .unwrap();
    (answer.status().as_u16(), started.elapsed())
}

#[tokio::test]
async fn a_thousand_freezes_that_never_open_leave_every_call_answering() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    // Every 30 February (never), all on one team's names.
    plant(
        &mut redis.conn(),
        &app.prefix,
        1000,
        "team-a-*",
        "0 0 30 2 *",
        "0 0 31 2 *",
    );
    until_listed(&app, None, 1000).await;

    let base = &app.base;
    let client = &app.client;
    let mut report = Vec::new();
    for round in 0..3 {
        let calls = [
            ("GET /freezes", client.get(format!("{base}/freezes"))),
            (
                "status of a frozen name",
                client.get(format!("{base}/locks/team-a-x")),
            ),
            (
                "acquire of a frozen name",
                client.post(format!("{base}/locks/team-a-{round}")),
            ),
            (
                "acquire of another name",
                client.post(format!("{base}/locks/team-b-{round}")),
            ),
            ("GET /healthz", client.get(format!("{base}/healthz"))),
        ];
        for (what, request) in calls {
            let (status, took) = timed(what, request).await;
            assert!(
                matches!(status, 200 | 201),
                "{what}: {status} (a freeze that never opens holds nothing)"
            );
            report.push(format!("{what}: {status} in {took:?}"));
        }
        // Past a reload of the list (every 5 s): nothing is worked out again.
        if round == 1 {
            tokio::time::sleep(Duration::from_secs(6)).await;
        }
    }
    eprintln!(
        "with 1,000 freezes that never open:\n  {}",
        report.join("\n  ")
    );
}

/// A service with a token file: `team-a-ops` administers `team-a-*`,
/// `team-b-ops` `team-b-*`, and the admin variable's token every name.
async fn two_teams() -> (TestApp, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("baton-freeze-limits-{}.toml", unique_prefix()));
    std::fs::write(
        &path,
        r#"
        [[token]]
        name = "team-a-ops"
        value = "team-a-ops-token-91c2"
        allow = ["admin:team-a-*"]

        [[token]]
        name = "team-b-ops"
        value = "team-b-ops-token-4e7d"
        allow = ["admin:team-b-*"]
        "#,
    )
    .unwrap();
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.tokens_file = Some(path.clone());
    settings.admin_tokens = vec!["root-admin-token".into()];
    (TestApp::spawn_with(settings).await, path)
}

const TEAM_A: &str = "team-a-ops-token-91c2";
const TEAM_B: &str = "team-b-ops-token-4e7d";
const ROOT: &str = "root-admin-token";

async fn make(app: &TestApp, token: &str, body: &Value) -> reqwest::Response {
    app.client
        .request(Method::POST, format!("{}/freezes", app.base))
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// A one-off freeze of `pattern` for an hour.
fn for_an_hour(pattern: &str) -> Value {
    json!({"match": pattern, "until": rfc3339(now_ms() + 3_600_000)})
}

#[tokio::test]
async fn one_token_name_keeps_at_most_100_freezes_in_force_and_others_still_make_theirs() {
    let (app, file) = two_teams().await;
    let mut ids = Vec::new();
    for i in 0..100 {
        let made = make(&app, TEAM_A, &for_an_hour(&format!("team-a-{i}"))).await;
        assert_eq!(made.status(), 201, "freeze {i}");
        let made: Value = made.json().await.unwrap();
        ids.push(made["id"].as_str().unwrap().to_owned());
    }
    let refused = make(&app, TEAM_A, &for_an_hour("team-a-101")).await;
    let body = problem(refused, 400, "invalid-request").await;
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.starts_with("match: "), "{detail}");
    assert!(detail.contains("100"), "{detail}");
    // A recurring one counts as well.
    let recurring =
        json!({"match": "team-a-*", "freeze_start": "0 23 * * 5", "freeze_end": "0 7 * * 1"});
    assert_eq!(make(&app, TEAM_A, &recurring).await.status(), 400);
    // Another team, and the root admin, are not held back by it.
    assert_eq!(
        make(&app, TEAM_B, &for_an_hour("team-b-1")).await.status(),
        201
    );
    assert_eq!(
        make(&app, ROOT, &for_an_hour("team-a-incident"))
            .await
            .status(),
        201
    );
    // One deleted: room for one more.
    let deleted = app
        .client
        .delete(format!("{}/freezes/{}", app.base, ids[0]))
        .bearer_auth(TEAM_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(make(&app, TEAM_A, &recurring).await.status(), 201);
    assert_eq!(
        make(&app, TEAM_A, &for_an_hour("team-a-102"))
            .await
            .status(),
        400
    );
    let _ = std::fs::remove_file(file);
}

#[tokio::test]
async fn a_full_list_refuses_a_team_but_never_an_admin_of_every_name() {
    let (app, file) = two_teams().await;
    // The list full: 1,000 in force (planted, on names of no team here).
    plant(
        &mut shared_redis().conn(),
        &app.prefix,
        1000,
        "elsewhere",
        "0 23 * * 5",
        "0 7 * * 1",
    );
    until_listed(&app, Some(ROOT), 1000).await;
    let refused = make(&app, TEAM_A, &for_an_hour("team-a-1")).await;
    let body = problem(refused, 400, "invalid-request").await;
    assert!(body["detail"].as_str().unwrap().contains("1000"), "{body}");
    // The root admin's incident freeze goes through, and works.
    let incident = json!({"match": "team-a-*", "until": rfc3339(now_ms() + 60_000),
                          "reason": "incident 9"});
    assert_eq!(make(&app, ROOT, &incident).await.status(), 201);
    let frozen = app
        .client
        .post(format!("{}/locks/team-a-deploy", app.base))
        .bearer_auth(TEAM_A)
        .send()
        .await
        .unwrap();
    assert_eq!(problem(frozen, 423, "frozen").await["reason"], "incident 9");
    let _ = std::fs::remove_file(file);
}

#[tokio::test]
async fn a_recurring_freeze_must_open_within_366_days_naming_the_field_at_fault() {
    let app = TestApp::spawn().await;
    for (start, end, field) in [
        // 30 February: never.
        ("0 0 30 2 *", "0 0 31 2 *", "freeze_start"),
        // Opens tonight, never ends.
        ("0 0 * * *", "0 0 30 2 *", "freeze_end"),
    ] {
        let body = json!({"match": "team-a-x", "freeze_start": start, "freeze_end": end});
        let refused = app.post("/freezes", &body.to_string()).await;
        let problem = problem(refused, 400, "invalid-request").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("{field}: ")),
            "{body}: {detail}"
        );
        assert!(detail.contains("366"), "{detail}");
    }
    // Once a year is fine: it opens within 366 days.
    let yearly =
        json!({"match": "team-a-x", "freeze_start": "0 0 24 12 *", "freeze_end": "0 0 27 12 *"});
    assert_eq!(
        app.post("/freezes", &yearly.to_string()).await.status(),
        201
    );
}

#[tokio::test]
async fn a_one_off_until_past_freeze_max_days_is_refused_naming_until() {
    let app = TestApp::spawn().await;
    let at =
        |days: i64| json!({"match": "x", "until": rfc3339(now_ms() + days * DAY_MS)}).to_string();
    let refused = app.post("/freezes", &at(401)).await;
    let body = problem(refused, 400, "invalid-request").await;
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("until: ") && detail.contains("400"),
        "{detail}"
    );
    // The year 9998: refused.
    let far =
        json!({"match": "x", "from": "9998-01-01T00:00:00Z", "until": "9998-01-02T00:00:00Z"});
    problem(
        app.post("/freezes", &far.to_string()).await,
        400,
        "invalid-request",
    )
    .await;
    assert_eq!(app.post("/freezes", &at(399)).await.status(), 201);

    // Configured shorter.
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.freeze_max_days = 2;
    let short = TestApp::spawn_with(settings).await;
    let body = problem(short.post("/freezes", &at(3)).await, 400, "invalid-request").await;
    assert!(
        body["detail"].as_str().unwrap().starts_with("until: "),
        "{body}"
    );
    assert_eq!(short.post("/freezes", &at(1)).await.status(), 201);
}
