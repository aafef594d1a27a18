//! Every bad input answers `application/problem+json` naming what is wrong.

use reqwest::Method;

use crate::helpers::{problem, TestApp};

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
        (Method::POST, "/locks/bad%20name".to_owned(), "name"),
        (Method::POST, "/locks/a%2Fb".to_owned(), "name"),
        (Method::POST, format!("/locks/{long}"), "name"),
        (Method::GET, "/locks/caf%C3%A9".to_owned(), "name"),
        (Method::POST, "/semaphores/%7Bx%7D".to_owned(), "name"),
        (Method::DELETE, "/locks/ok/not-a-uuid".to_owned(), "id"),
        (Method::PATCH, "/locks/ok/12345".to_owned(), "id"),
        (Method::GET, "/semaphores/ok/xyz".to_owned(), "id"),
        (Method::DELETE, format!("/locks/b*d/{id}"), "name"),
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
    problem(app.get("/locks/a/b/c").await, 404, "not-found").await;
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
