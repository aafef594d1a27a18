//! Every bad input answers `application/problem+json` naming what is wrong.

use reqwest::Method;

use baton_testkit::{lease_path, problem, settings_for, shared_redis, unique_prefix, TestApp};

#[tokio::test]
async fn bad_bodies_are_400_and_name_the_field() {
    let app = TestApp::spawn().await;
    let cases = [
        ("{bad json", "malformed"),
        ("[1, 2]", "body"),
        (r#"{"ttl_ms": 0}"#, "ttl_ms"),
        (r#"{"ttl_ms": 86400001}"#, "ttl_ms"),
        (r#"{"ttl_ms": -5}"#, "ttl_ms"),
        (r#"{"ttl_ms": 1.5}"#, "ttl_ms"),
        (r#"{"ttl_ms": "30000"}"#, "ttl_ms"),
        (r#"{"wait_ms": 300001}"#, "wait_ms"),
        (r#"{"wait_ms": -1}"#, "wait_ms"),
        (r#"{"owner": 7}"#, "owner"),
        (r#"{"ttl_ms": 1000, "colour": "red"}"#, "colour"),
        (r#"{"ttl_ms": 1000} trailing"#, "body"),
    ];
    for (body, field) in cases {
        let response = app.post("/locks/validated", body).await;
        let problem = problem(response, 400, "invalid-request").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains(field),
            "{body}: detail {detail:?} should name {field}"
        );
    }
    let long_owner = format!(r#"{{"owner": "{}"}}"#, "x".repeat(201));
    let response = app.post("/locks/validated", &long_owner).await;
    let body = problem(response, 400, "invalid-request").await;
    assert!(body["detail"].as_str().unwrap().contains("owner"));
    let status: serde_json::Value = app.get("/locks/validated").await.json().await.unwrap();
    assert_eq!(status["held"], false, "no bad request took the lock");
}

#[tokio::test]
async fn bad_names_and_ids_are_400() {
    let app = TestApp::spawn().await;
    let long = "n".repeat(201);
    let id = uuid::Uuid::new_v4();
    let cases = [
        (Method::POST, "/locks/bad%0Aname".to_owned(), "name"),
        (Method::POST, "/locks/a%1Bb".to_owned(), "name"),
        (Method::POST, format!("/locks/{long}"), "name"),
        (Method::GET, "/locks/caf%E2%80%AE".to_owned(), "name"),
        (Method::POST, "/semaphores/%7F".to_owned(), "name"),
        (Method::DELETE, "/locks/ok/not-a-uuid".to_owned(), "id"),
        (Method::PATCH, "/locks/ok/12345".to_owned(), "id"),
        (Method::GET, "/semaphores/ok/xyz".to_owned(), "id"),
        (Method::DELETE, format!("/locks/b%09d/{id}"), "name"),
    ];
    for (method, path, field) in cases {
        let response = app.request(method.clone(), &path, None).await;
        let problem = problem(response, 400, "invalid-request").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(field), "{method} {path}: {detail:?}");
    }
    let longest = "n".repeat(200);
    assert_eq!(
        app.post(&format!("/locks/{longest}"), "").await.status(),
        201
    );
}

#[tokio::test]
async fn unknown_paths_and_methods_are_problems_too() {
    let app = TestApp::spawn().await;
    problem(app.get("/nowhere").await, 404, "not-found").await;
    problem(app.get("/nowhere/a/b/c").await, 404, "not-found").await;
    problem(
        app.request(Method::PUT, "/locks/x", Some("{}")).await,
        405,
        "method-not-allowed",
    )
    .await;
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let app = TestApp::spawn().await;
    let huge = format!(r#"{{"owner": "{}"}}"#, "x".repeat(20 * 1024));

    let response = app.post("/locks/big", &huge).await;

    problem(response, 413, "payload-too-large").await;
}

#[tokio::test]
async fn problem_types_lead_to_a_description() {
    let app = TestApp::spawn().await;
    let response = app.post("/locks/x", "{bad").await;
    let body = problem(response, 400, "invalid-request").await;

    let described = app.get(body["type"].as_str().unwrap()).await;

    assert_eq!(described.status(), 200);
    assert!(described.text().await.unwrap().contains("Invalid request"));
}

#[tokio::test]
async fn every_problem_type_is_described_from_the_one_table() {
    let app = TestApp::spawn().await;
    for &kind in baton::wire::ProblemType::ALL {
        let facts = kind.facts();

        let described = app.get(&kind.uri()).await;

        assert_eq!(described.status(), 200, "{}", facts.slug);
        let text = described.text().await.unwrap();
        assert!(text.starts_with(&format!(
            "{} ({}, {})",
            facts.title, facts.status, facts.slug
        )));
        assert!(text.contains(facts.description));
    }
    problem(app.get("/problems/no-such-type").await, 404, "not-found").await;
}

#[tokio::test]
async fn numbers_must_be_json_integers() {
    let app = TestApp::spawn().await;
    let lease = app.acquire_lock("strict-numbers", "{}").await;
    let refresh = lease_path("locks", &lease);
    let cases = [
        (
            Method::POST,
            "/locks/strict",
            r#"{"ttl_ms": 1e3}"#,
            "ttl_ms",
        ),
        (
            Method::POST,
            "/locks/strict",
            r#"{"ttl_ms": 1000.0}"#,
            "ttl_ms",
        ),
        (
            Method::POST,
            "/locks/strict",
            r#"{"ttl_ms": 1000.0000000000001}"#,
            "ttl_ms",
        ),
        (
            Method::POST,
            "/locks/strict",
            r#"{"ttl_ms": 5.5}"#,
            "ttl_ms",
        ),
        (
            Method::POST,
            "/locks/strict",
            r#"{"wait_ms": 1e2}"#,
            "wait_ms",
        ),
        (
            Method::POST,
            "/locks/strict",
            r#"{"wait_ms": 100.0}"#,
            "wait_ms",
        ),
        (
            Method::POST,
            "/semaphores/strict",
            r#"{"limit": 2.0}"#,
            "limit",
        ),
        (
            Method::POST,
            "/semaphores/strict",
            r#"{"limit": 2, "ttl_ms": 1E4}"#,
            "ttl_ms",
        ),
        (
            Method::PATCH,
            refresh.as_str(),
            r#"{"ttl_ms": 60000.0}"#,
            "ttl_ms",
        ),
    ];
    for (method, path, body, field) in cases {
        let response = app.request(method.clone(), path, Some(body)).await;
        let problem = problem(response, 400, "invalid-request").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(field), "{method} {body}: {detail:?}");
    }
    let status: serde_json::Value = app.get("/locks/strict").await.json().await.unwrap();
    assert_eq!(status["held"], false, "no refused request took the lock");
    let status: serde_json::Value = app.get("/semaphores/strict").await.json().await.unwrap();
    assert_eq!(status["holders"], 0, "nor the semaphore: {status}");
    let kept: serde_json::Value = app.get(&refresh).await.json().await.unwrap();
    assert_eq!(
        kept["ttl_ms"], 30_000,
        "the refused refresh changed nothing"
    );
}

#[tokio::test]
async fn owners_must_be_printable() {
    let app = TestApp::spawn().await;
    let cases = [
        ("tab", r"a\tb"),
        ("escape", r"a\u001b[31mred"),
        ("next line", r"a\u0085b"),
        ("right-to-left override", r"a\u202eb"),
        ("left-to-right isolate", r"a\u2066b"),
        ("zero-width space", r"a\u200bb"),
        ("line separator", r"a\u2028b"),
        ("paragraph separator", r"a\u2029b"),
        ("byte-order mark", r"\ufeffa"),
    ];
    for (what, owner) in cases {
        for kind in ["locks", "semaphores"] {
            let body = format!(r#"{{"limit": 1, "owner": "{owner}"}}"#);
            let body = if kind == "locks" {
                body.replace(r#""limit": 1, "#, "")
            } else {
                body
            };
            let response = app.post(&format!("/{kind}/printable"), &body).await;
            let problem = problem(response, 400, "invalid-request").await;
            let detail = problem["detail"].as_str().unwrap();
            assert!(detail.contains("owner"), "{kind}, {what}: {detail:?}");
        }
    }
    let lease = app
        .acquire_lock("printable", r#"{"owner": "Zoë's job 東京 🚀"}"#)
        .await;
    assert_eq!(lease["owner"], "Zoë's job 東京 🚀");
}

#[tokio::test]
async fn a_wait_over_the_maximum_says_the_maximum() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.max_wait_ms = 5000;
    let app = TestApp::spawn_with(settings).await;
    let cases = [
        ("/locks/patient", r#"{"wait_ms": 5001}"#),
        ("/semaphores/patient", r#"{"limit": 1, "wait_ms": 5001}"#),
        ("/locks/patient", r#"{"wait_ms": 86400000}"#),
    ];

    for (path, body) in cases {
        let response = app.post(path, body).await;

        let problem = problem(response, 400, "invalid-request").await;
        assert_eq!(problem["max_wait_ms"], 5000, "{path} {body}");
        assert!(problem["detail"].as_str().unwrap().contains("wait_ms"));
    }
    let within = app.post("/locks/patient", r#"{"wait_ms": 5000}"#).await;
    assert_eq!(within.status(), 201);
    let other = problem(
        app.post("/locks/x", r#"{"ttl_ms": 0}"#).await,
        400,
        "invalid-request",
    )
    .await;
    assert!(
        other.get("max_wait_ms").is_none(),
        "only a wait too long carries it"
    );
}

/// A body of whitespace alone (a form feed, or JSON's own) is not an empty
/// body: 400, on every endpoint that takes an optional body.
#[tokio::test]
async fn a_body_of_a_form_feed_is_invalid_json() {
    let app = TestApp::spawn().await;
    for path in ["/locks/ff", "/semaphores/ff/yield", "/locks/ff/yield"] {
        let answer = app.post(path, "\u{c}").await;
        problem(answer, 400, "invalid-request").await;
    }
    // JSON's own whitespace around nothing is not JSON either (the fuzz
    // run's `\t` on a yield); no bytes at all, and `null`, are all defaults.
    for path in ["/locks/ws", "/semaphores/ws/yield", "/locks/ws/yield"] {
        for body in ["\t", " \r\n\t"] {
            problem(app.post(path, body).await, 400, "invalid-request").await;
        }
    }
    assert_eq!(app.post("/locks/ff-ok", "").await.status(), 201);
    assert_eq!(app.post("/locks/ff-null", " null ").await.status(), 201);
}
