//! Health, readiness, the OpenAPI document and Swagger UI (metrics, which
//! need a process of their own, are in tests/ops/metrics.rs).

use serde_json::Value;

use baton_testkit::{free_port, problem, settings_for, unique_prefix, TestApp};

#[tokio::test]
async fn healthz_and_readyz_answer_200_with_redis_up() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/readyz").await.status(), 200);
}

#[tokio::test]
async fn without_redis_readyz_is_503_healthz_200_and_calls_503_promptly() {
    let nowhere = format!("redis://127.0.0.1:{}", free_port());
    let app = TestApp::spawn_with(settings_for(&nowhere, &unique_prefix())).await;

    assert_eq!(app.get("/healthz").await.status(), 200);
    let response = app.get("/readyz").await;
    assert!(response.headers().contains_key("retry-after"));
    problem(response, 503, "redis-unavailable").await;
    let started = std::time::Instant::now();
    let response = app.post("/locks/offline", r#"{"wait_ms": 1000}"#).await;
    problem(response, 503, "redis-unavailable").await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Compares the committed document with the generated one. With
/// `BATON_UPDATE_OPENAPI` set, a stale document is rewritten, and the test
/// still fails for that run: it never passes on a file it has just written.
#[tokio::test]
async fn the_committed_openapi_document_is_what_the_code_generates() {
    let generated = baton::openapi::document_json();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed != generated && std::env::var_os("BATON_UPDATE_OPENAPI").is_some() {
        std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi")).unwrap();
        std::fs::write(path, &generated).unwrap();
        panic!(
            "openapi/openapi.json was stale and is rewritten now: commit it and run the test again"
        );
    }
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: run `BATON_UPDATE_OPENAPI=1 cargo test --test api openapi` and commit it"
    );
}

#[tokio::test]
async fn the_service_serves_the_openapi_document() {
    // The committed document is served with turn notices on for
    // ci.example.com (so that it documents `notify`).
    let mut settings = settings_for(&baton_testkit::shared_redis().url(), &unique_prefix());
    settings.webhook_hosts = vec!["ci.example.com".into()];
    settings.webhook_secret = "a secret for the test".into();
    let app = TestApp::spawn_with(settings).await;

    let response = app.get("/openapi.json").await;

    assert_eq!(response.status(), 200);
    let doc: Value = response.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in [
        "/locks",
        "/locks/{name}",
        "/locks/{name}/{id}",
        "/semaphores/{name}",
        "/semaphores/{name}/{id}",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is documented");
    }
    let acquire = &doc["paths"]["/locks/{name}"]["post"]["responses"];
    for status in ["201", "400", "409", "413", "503"] {
        assert!(
            acquire.get(status).is_some(),
            "POST /locks/{{name}} documents {status}"
        );
    }
    assert!(doc["components"]["securitySchemes"].get("bearer").is_some());
    assert_eq!(
        doc,
        serde_json::from_str::<Value>(&baton::openapi::document_json()).unwrap()
    );
    // Off (no BATON_WEBHOOK_HOSTS), `notify` is not offered at all.
    let off: Value = TestApp::spawn()
        .await
        .get("/openapi.json")
        .await
        .json()
        .await
        .unwrap();
    assert!(off["components"]["schemas"]["AcquireLock"]["properties"]
        .get("notify")
        .is_none());
}

#[tokio::test]
async fn the_served_document_states_the_configured_maximum_wait() {
    let mut settings = settings_for(&baton_testkit::shared_redis().url(), &unique_prefix());
    settings.max_wait_ms = 5000;
    let app = TestApp::spawn_with(settings).await;

    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();

    for schema in ["AcquireLock", "AcquireSemaphore"] {
        // Bounded unless the request keeps its place (then a longer wait is
        // cut to the maximum): JSON Schema's if/else.
        let body = &doc["components"]["schemas"][schema];
        assert_eq!(
            body["else"]["properties"]["wait_ms"]["maximum"], 5000,
            "{schema}"
        );
        assert_eq!(body["if"]["required"][0], "keep_place_ms", "{schema}");
        assert!(
            body["properties"]["wait_ms"].get("maximum").is_none(),
            "{schema}"
        );
        assert_eq!(
            body["properties"]["keep_place_ms"]["maximum"], 604_800_000_u64,
            "{schema}"
        );
    }
}

#[tokio::test]
async fn swagger_ui_is_served_by_the_service_itself() {
    let app = TestApp::spawn().await;

    let page = app.get("/docs").await;

    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page names no other host"
    );
    for asset in [
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-initializer.js",
    ] {
        let response = app.get(&format!("/docs/{asset}")).await;
        assert_eq!(response.status(), 200, "{asset}");
    }
    let init = app
        .get("/docs/swagger-initializer.js")
        .await
        .text()
        .await
        .unwrap();
    assert!(init.contains("/openapi.json"));
    assert!(
        init.contains("\"validatorUrl\": \"none\""),
        "no online validator: {init}"
    );
    // A bearer token typed into Swagger UI is not kept in localStorage
    // across page loads.
    assert!(
        init.contains("\"persistAuthorization\": false"),
        "the token is not kept: {init}"
    );
}
