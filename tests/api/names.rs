//! Names as CI systems write them: slashes (sent as `%2F`), spaces, Unicode,
//! glob and hash-tag characters, 200 characters; control characters refused,
//! and a raw `/` answered with how to send it.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::Method;
use serde_json::Value;

use baton_testkit::{problem, TestApp};

fn encoded(name: &str) -> String {
    utf8_percent_encode(name, NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn names_with_slashes_spaces_unicode_and_glob_characters_work_end_to_end() {
    let app = TestApp::spawn().await;
    let longest: String = "é".repeat(199) + "/";
    for name in [
        "review/app-1",
        "org/repo:prod",
        "Deploy prod-refs/heads/main",
        "déploiement 生产 🚀",
        "a*b?[c]\\d",
        "{tag}",
        "x}y{",
        "%2F literally",
        longest.as_str(),
    ] {
        let path = format!("/locks/{}", encoded(name));
        let response = app.post(&path, r#"{"owner": "ci"}"#).await;
        assert_eq!(response.status(), 201, "acquire {name:?}");
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let lease: Value = response.json().await.unwrap();
        assert_eq!(lease["name"], name);
        let id = lease["id"].as_str().unwrap();
        assert!(location.ends_with(id), "{location}");
        // One segment for the name, percent-encoded: /locks/NAME/ID.
        assert!(
            location.is_ascii() && location.matches('/').count() == 3,
            "{location}"
        );
        let status: Value = app.get(&path).await.json().await.unwrap();
        assert_eq!(status["held"], true, "{name:?}: {status}");
        assert_eq!(status["name"], name);
        // The Location header leads back to the lease.
        assert_eq!(app.get(&location).await.status(), 200, "{location}");
        assert_eq!(app.delete(&location).await.status(), 204, "{location}");

        let sem = format!("/semaphores/{}", encoded(name));
        let response = app.post(&sem, r#"{"limit": 1}"#).await;
        assert_eq!(response.status(), 201, "semaphore {name:?}");
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        assert_eq!(app.delete(&location).await.status(), 204, "{location}");
    }
}

#[tokio::test]
async fn names_that_differ_only_in_hash_tag_or_glob_characters_stay_apart() {
    let app = TestApp::spawn().await;
    for name in ["a}", "a", "a}:fence", "a*", "a?"] {
        let response = app.post(&format!("/locks/{}", encoded(name)), "").await;
        assert_eq!(response.status(), 201, "{name:?} is a lock of its own");
    }
}

#[tokio::test]
async fn a_name_of_201_characters_or_with_a_control_character_is_refused() {
    let app = TestApp::spawn().await;
    let long = "é".repeat(201);
    for name in [
        long.as_str(),
        "tab\there",
        "bell\u{7}",
        "line\nbreak",
        "del\u{7f}",
        "rtl\u{202e}",
    ] {
        let response = app.post(&format!("/locks/{}", encoded(name)), "").await;
        let body = problem(response, 400, "invalid-request").await;
        assert!(
            body["detail"].as_str().unwrap().starts_with("name:"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_raw_slash_is_answered_400_saying_to_send_it_as_percent_2f() {
    let app = TestApp::spawn().await;
    for (method, path) in [
        (Method::POST, "/locks/review/x"),
        (Method::POST, "/semaphores/review/x"),
        (Method::GET, "/locks/org/repo/prod"),
        (Method::POST, "/locks/a/b/c/d"),
        (Method::DELETE, "/semaphores/a/b/c"),
        (Method::GET, "/locks/review/app-1"),
    ] {
        let response = app.request(method.clone(), path, Some("")).await;
        let body = problem(response, 400, "invalid-request").await;
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains("%2F"), "{method} {path}: {detail}");
    }
    // A real lease path with a wrong method is still a 405.
    problem(
        app.request(Method::PATCH, "/locks/plain", Some("")).await,
        405,
        "method-not-allowed",
    )
    .await;
}

/// Sends `METHOD PATH` as it is (no URL library in between to resolve dot
/// segments) with an empty body, and returns the status and the body.
async fn raw_request(app: &TestApp, method: &str, path: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = app.base.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    tcp.write_all(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: baton\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .expect("request written");
    let mut seen = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tcp.read_to_end(&mut seen),
    )
    .await
    .expect("an answer in time")
    .expect("read");
    let text = String::from_utf8_lossy(&seen).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/problem+json"),
        "{method} {path}: {head}"
    );
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_names_dot_and_dot_dot_are_refused_even_percent_encoded() {
    let app = TestApp::spawn().await;
    let id = "3b241101-e2bb-4255-8caf-4136c566a962";
    for segment in [".", "..", "%2E", "%2e", "%2E%2E", ".%2E", "%2e."] {
        for (method, path) in [
            ("POST", format!("/locks/{segment}")),
            ("GET", format!("/locks/{segment}")),
            ("POST", format!("/semaphores/{segment}")),
            ("GET", format!("/semaphores/{segment}")),
            ("GET", format!("/locks/{segment}/{id}")),
            ("PATCH", format!("/locks/{segment}/{id}")),
            ("DELETE", format!("/semaphores/{segment}/{id}")),
            ("DELETE", format!("/locks/{segment}")),
        ] {
            let (status, body) = raw_request(&app, method, &path).await;
            assert_eq!(status, 400, "{method} {path}: {body}");
            assert!(
                body["type"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("/problems/invalid-request")),
                "{method} {path}: {body}"
            );
            let detail = body["detail"].as_str().unwrap_or_default();
            assert!(
                detail.starts_with("name:") && detail.contains("dot segment"),
                "{method} {path}: {detail}"
            );
        }
    }
    // Names that only look like them are names as any other.
    for name in ["...", ". ", " ..", "a.", ".hidden", "..x"] {
        let response = app.post(&format!("/locks/{}", encoded(name)), "").await;
        assert_eq!(response.status(), 201, "{name:?}");
        let lease: Value = response.json().await.unwrap();
        assert_eq!(lease["name"], name);
    }
}
