//! Bearer tokens: API tokens guard /locks and /semaphores, admin tokens may
//! force-release, the service endpoints stay open.

use reqwest::Method;

use baton_testkit::{problem, settings_for, shared_redis, unique_prefix, TestApp};

async fn guarded_app() -> TestApp {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.api_tokens = vec!["user-token".into(), "second-user".into()];
    settings.admin_tokens = vec!["admin-token".into()];
    TestApp::spawn_with(settings).await
}

async fn send(app: &TestApp, method: Method, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = app.client.request(method, format!("{}{path}", app.base));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn without_a_valid_token_the_api_answers_401() {
    let app = guarded_app().await;
    for token in [
        None,
        Some("wrong"),
        Some("user-toke"),
        Some("user-token-and-more"),
    ] {
        for (method, path) in [
            (Method::POST, "/locks/guarded"),
            (Method::GET, "/locks"),
            (Method::GET, "/locks/guarded"),
            (Method::POST, "/semaphores/guarded"),
            (Method::DELETE, "/locks/guarded"),
        ] {
            let response = send(&app, method.clone(), path, token).await;
            problem(response, 401, "unauthorized").await;
        }
    }
    let raw = app
        .client
        .post(format!("{}/locks/guarded", app.base))
        .header("authorization", "Basic dXNlci10b2tlbg==")
        .send()
        .await
        .unwrap();
    problem(raw, 401, "unauthorized").await;
}

#[tokio::test]
async fn a_401_challenges_for_a_bearer_token() {
    let app = guarded_app().await;

    let response = send(&app, Method::POST, "/locks/challenged", None).await;

    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    problem(response, 401, "unauthorized").await;
}

#[tokio::test]
async fn admin_tokens_alone_turn_authentication_on() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.admin_tokens = vec!["admin-token".into()];
    let app = TestApp::spawn_with(settings).await;

    for (method, path) in [
        (Method::POST, "/locks/admin-guarded"),
        (Method::GET, "/locks"),
        (Method::POST, "/semaphores/admin-guarded"),
        (Method::DELETE, "/locks/admin-guarded"),
    ] {
        for token in [None, Some("anything")] {
            let response = send(&app, method.clone(), path, token).await;
            problem(response, 401, "unauthorized").await;
        }
    }
    let acquired = send(
        &app,
        Method::POST,
        "/locks/admin-guarded",
        Some("admin-token"),
    )
    .await;
    assert_eq!(acquired.status(), 201);
    let released = send(
        &app,
        Method::DELETE,
        "/locks/admin-guarded",
        Some("admin-token"),
    )
    .await;
    assert_eq!(released.status(), 204);
    assert_eq!(
        send(&app, Method::GET, "/healthz", None).await.status(),
        200
    );
}

#[tokio::test]
async fn api_and_admin_tokens_both_use_the_api() {
    let app = guarded_app().await;
    for token in ["user-token", "second-user", "admin-token"] {
        let response = send(
            &app,
            Method::POST,
            &format!("/locks/by-{token}"),
            Some(token),
        )
        .await;
        assert_eq!(response.status(), 201, "{token}");
    }
}

#[tokio::test]
async fn force_release_needs_an_admin_token() {
    let app = guarded_app().await;
    assert_eq!(
        send(&app, Method::POST, "/locks/admin-only", Some("user-token"))
            .await
            .status(),
        201
    );

    let as_user = send(
        &app,
        Method::DELETE,
        "/locks/admin-only",
        Some("user-token"),
    )
    .await;
    problem(as_user, 403, "forbidden").await;

    let as_admin = send(
        &app,
        Method::DELETE,
        "/locks/admin-only",
        Some("admin-token"),
    )
    .await;
    assert_eq!(as_admin.status(), 204);
}

#[tokio::test]
async fn service_endpoints_stay_open() {
    let app = guarded_app().await;
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/docs",
        "/docs/swagger-ui.css",
    ] {
        assert_eq!(
            send(&app, Method::GET, path, None).await.status(),
            200,
            "{path}"
        );
    }
}

#[tokio::test]
async fn with_no_tokens_everything_is_open_force_release_included() {
    let app = TestApp::spawn().await;
    app.acquire_lock("open", "{}").await;
    assert_eq!(app.delete("/locks/open").await.status(), 204);
}
