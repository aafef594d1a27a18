//! Lock scripts, branch by branch: free, held, expired, foreign id, refresh,
//! release, status, listing and force-release.

use std::time::Duration;

use serde_json::Value;

use baton_testkit::{lease_path, problem, shared_redis, token_of, TestApp};

#[tokio::test]
async fn acquiring_a_free_lock_returns_201_a_lease_and_its_location() {
    let app = TestApp::spawn().await;

    let response = app
        .post(
            "/locks/deploy-prod",
            r#"{"ttl_ms": 5000, "owner": "ci job 42"}"#,
        )
        .await;

    assert_eq!(response.status(), 201);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let lease: Value = response.json().await.unwrap();
    assert_eq!(location, lease_path("locks", &lease));
    assert_eq!(lease["name"], "deploy-prod");
    assert_eq!(lease["owner"], "ci job 42");
    assert_eq!(lease["ttl_ms"], 5000);
    assert!(uuid::Uuid::parse_str(lease["id"].as_str().unwrap()).is_ok());
    assert!(lease["fencing_token"].as_u64().unwrap() > 0);
    let expires_at = lease["expires_at"].as_str().unwrap();
    let expires = humantime::parse_rfc3339(expires_at).expect("RFC 3339");
    let from_now = expires
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(
        from_now > Duration::from_secs(3) && from_now <= Duration::from_secs(6),
        "expires_at {expires_at} should be about 5 s from now"
    );
}

#[tokio::test]
async fn an_empty_body_means_all_defaults() {
    let app = TestApp::spawn().await;

    let response = app.post("/locks/defaults", "").await;

    assert_eq!(response.status(), 201);
    let lease: Value = response.json().await.unwrap();
    assert_eq!(lease["ttl_ms"], 30_000);
    assert!(lease.get("owner").is_none());
}

#[tokio::test]
async fn a_body_is_read_as_json_whatever_its_content_type() {
    let app = TestApp::spawn().await;

    let response = app
        .client
        .post(format!("{}/locks/form", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(r#"{"ttl_ms":1234}"#)
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 201);
    let lease: Value = response.json().await.unwrap();
    assert_eq!(lease["ttl_ms"], 1234);
}

#[tokio::test]
async fn acquiring_a_held_lock_returns_409_with_the_holder_and_retry_after() {
    let app = TestApp::spawn().await;
    app.acquire_lock("busy", r#"{"ttl_ms": 10000, "owner": "first"}"#)
        .await;

    let response = app.post("/locks/busy", "{}").await;

    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = problem(response, 409, "lock-held").await;
    assert_eq!(body["owner"], "first");
    let expires_in = body["expires_in_ms"].as_u64().unwrap();
    assert!(expires_in > 8000 && expires_in <= 10_000, "{body}");
    assert_eq!(retry_after, 10);
}

#[tokio::test]
async fn fencing_tokens_strictly_increase_with_every_acquisition() {
    let app = TestApp::spawn().await;
    let mut last = 0;
    for _ in 0..20 {
        let lease = app.acquire_lock("fenced", "{}").await;
        let token = lease["fencing_token"].as_u64().unwrap();
        assert!(token > last, "{token} after {last}");
        last = token;
        assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
    }
}

#[tokio::test]
async fn fencing_tokens_keep_rising_when_redis_loses_the_counter() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("amnesia", "{}").await;
    let before = lease["fencing_token"].as_u64().unwrap();
    app.delete(&lease_path("locks", &lease)).await;
    // As if Redis restarted without its data.
    let _: () = redis::cmd("DEL")
        .arg(format!("{}{{lock:amnesia}}:owners", app.prefix))
        .query(&mut shared_redis().conn())
        .unwrap();

    let after = app.acquire_lock("amnesia", "{}").await["fencing_token"]
        .as_u64()
        .unwrap();

    assert!(after > before, "{after} must exceed {before}");
}

#[tokio::test]
async fn releasing_frees_the_lock_for_the_next_caller() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("handover", "{}").await;

    let response = app.delete(&lease_path("locks", &lease)).await;

    assert_eq!(response.status(), 204);
    app.acquire_lock("handover", "{}").await;
}

#[tokio::test]
async fn releasing_twice_returns_404() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("twice", "{}").await;
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);

    let response = app.delete(&lease_path("locks", &lease)).await;

    problem(response, 404, "lease-not-found").await;
}

#[tokio::test]
async fn a_foreign_id_can_neither_release_nor_refresh_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("mine", r#"{"ttl_ms": 10000}"#).await;
    let foreign = format!("/locks/mine/{}", uuid::Uuid::new_v4());

    problem(app.delete(&foreign).await, 404, "lease-not-found").await;
    problem(
        app.patch(&foreign, r#"{"ttl_ms": 99999}"#).await,
        404,
        "lease-not-found",
    )
    .await;
    problem(app.get(&foreign).await, 404, "lease-not-found").await;

    let status: Value = app.get("/locks/mine").await.json().await.unwrap();
    assert_eq!(status["held"], true);
    assert_eq!(status["fencing_token"], lease["fencing_token"]);
    assert!(status["expires_in_ms"].as_u64().unwrap() <= 10_000);
    // The id of one lock is foreign to every other lock too.
    let other_lock = format!("/locks/other/{}", lease["id"].as_str().unwrap());
    problem(app.delete(&other_lock).await, 404, "lease-not-found").await;
    assert_eq!(app.get(&lease_path("locks", &lease)).await.status(), 200);
}

#[tokio::test]
async fn an_expired_lease_frees_the_lock_and_its_id_is_refused() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("short", r#"{"ttl_ms": 100}"#).await;

    tokio::time::sleep(Duration::from_millis(250)).await;

    let status: Value = app.get("/locks/short").await.json().await.unwrap();
    assert_eq!(status["held"], false);
    problem(
        app.delete(&lease_path("locks", &lease)).await,
        404,
        "lease-not-found",
    )
    .await;
    let next = app.acquire_lock("short", "{}").await;
    let (before, after) = (token_of(&lease), token_of(&next));
    assert!(after > before, "token {after} after {before}");
}

#[tokio::test]
async fn refreshing_extends_the_lease_by_the_given_ttl() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("long-job", r#"{"ttl_ms": 1000}"#).await;

    let response = app
        .patch(&lease_path("locks", &lease), r#"{"ttl_ms": 60000}"#)
        .await;

    assert_eq!(response.status(), 200);
    let refreshed: Value = response.json().await.unwrap();
    assert_eq!(refreshed["ttl_ms"], 60_000);
    assert_eq!(refreshed["id"], lease["id"]);
    assert_eq!(refreshed["fencing_token"], lease["fencing_token"]);
    let expiry = |lease: &Value| {
        humantime::parse_rfc3339(lease["expires_at"].as_str().expect("expires_at"))
            .expect("RFC 3339")
    };
    assert!(
        expiry(&refreshed) > expiry(&lease),
        "{refreshed} after {lease}"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let status: Value = app.get("/locks/long-job").await.json().await.unwrap();
    assert_eq!(status["held"], true, "still held after the first ttl");
    assert!(status["expires_in_ms"].as_u64().unwrap() > 50_000);
}

#[tokio::test]
async fn refreshing_with_an_empty_body_reuses_the_lease_ttl() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("same-ttl", r#"{"ttl_ms": 4000}"#).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let response = app.patch(&lease_path("locks", &lease), "").await;

    assert_eq!(response.status(), 200);
    let refreshed: Value = response.json().await.unwrap();
    assert_eq!(refreshed["ttl_ms"], 4000);
    let status: Value = app.get("/locks/same-ttl").await.json().await.unwrap();
    assert!(status["expires_in_ms"].as_u64().unwrap() > 3500, "{status}");
}

#[tokio::test]
async fn refreshing_an_expired_lease_returns_404_and_does_not_bring_it_back() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("lapsed", r#"{"ttl_ms": 100}"#).await;
    tokio::time::sleep(Duration::from_millis(250)).await;

    let response = app
        .patch(&lease_path("locks", &lease), r#"{"ttl_ms": 60000}"#)
        .await;

    problem(response, 404, "lease-not-found").await;
    let status: Value = app.get("/locks/lapsed").await.json().await.unwrap();
    assert_eq!(status["held"], false);
}

#[tokio::test]
async fn checking_a_lease_shows_it_while_held_and_404_after() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("checked", r#"{"owner": "me"}"#).await;

    let response = app.get(&lease_path("locks", &lease)).await;

    assert_eq!(response.status(), 200);
    let seen: Value = response.json().await.unwrap();
    assert_eq!(seen["id"], lease["id"]);
    assert_eq!(seen["owner"], "me");
    assert_eq!(seen["fencing_token"], lease["fencing_token"]);
    assert_eq!(seen["ttl_ms"], 30_000);
    app.delete(&lease_path("locks", &lease)).await;
    problem(
        app.get(&lease_path("locks", &lease)).await,
        404,
        "lease-not-found",
    )
    .await;
}

#[tokio::test]
async fn status_shows_the_holder_but_never_the_lease_id() {
    let app = TestApp::spawn().await;
    let free: Value = app.get("/locks/watched").await.json().await.unwrap();
    assert_eq!(
        free,
        serde_json::json!({"name": "watched", "held": false, "waiting": 0, "waiters": []})
    );
    let lease = app
        .acquire_lock("watched", r#"{"owner": "https://ci.example.com/jobs/7"}"#)
        .await;

    let response = app.get("/locks/watched").await;

    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(!text.contains(lease["id"].as_str().unwrap()));
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["held"], true);
    assert_eq!(status["owner"], "https://ci.example.com/jobs/7");
    assert_eq!(status["fencing_token"], lease["fencing_token"]);
    assert!(status["expires_in_ms"].as_u64().unwrap() > 29_000);
}

#[tokio::test]
async fn listing_shows_held_locks_by_prefix_sorted_by_name() {
    let app = TestApp::spawn().await;
    for name in ["deploy-b", "deploy-a", "build-x"] {
        app.acquire_lock(name, r#"{"owner": "o"}"#).await;
    }
    let released = app.acquire_lock("deploy-c", "{}").await;
    app.delete(&lease_path("locks", &released)).await;

    let all: Value = app.get("/locks").await.json().await.unwrap();
    let deploys: Value = app.get("/locks?prefix=deploy-").await.json().await.unwrap();

    let names = |v: &Value| -> Vec<String> {
        v["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&all), ["build-x", "deploy-a", "deploy-b"]);
    assert_eq!(names(&deploys), ["deploy-a", "deploy-b"]);
    assert!(deploys["locks"][0]["held"].as_bool().unwrap());
    assert!(deploys["locks"][0].get("id").is_none());
    problem(app.get("/locks?prefix=a%07").await, 400, "invalid-request").await;
}

#[tokio::test]
async fn force_release_frees_a_held_lock_and_404s_a_free_one() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("stuck", r#"{"ttl_ms": 600000}"#).await;

    let response = app.delete("/locks/stuck").await;

    assert_eq!(response.status(), 204);
    let status: Value = app.get("/locks/stuck").await.json().await.unwrap();
    assert_eq!(status["held"], false);
    problem(
        app.patch(&lease_path("locks", &lease), "").await,
        404,
        "lease-not-found",
    )
    .await;
    problem(app.delete("/locks/stuck").await, 404, "lock-not-held").await;
}

#[tokio::test]
async fn null_means_default() {
    let app = TestApp::spawn().await;

    let lease = app
        .acquire_lock("nulled-owner", r#"{"ttl_ms": 5000, "owner": null}"#)
        .await;
    let defaults = app.acquire_lock("nulled", "null").await;

    assert_eq!(lease["ttl_ms"], 5000);
    assert!(lease.get("owner").is_none());
    assert_eq!(defaults["ttl_ms"], 30_000);
}
