//! `/metrics` of a baton process of the test's own: its recorder counts only
//! what the test did (the API tests share one recorder in one process, which
//! concurrent tests move), so every value is checked exactly.

use std::time::Duration;

use reqwest::Client;
use serde_json::Value;

use baton_testkit::service::Service;
use baton_testkit::{shared_redis, unique_prefix};

/// A baton process on the shared Redis with a key prefix of its own.
async fn own_service() -> Service {
    Service::start(&[
        ("BATON_REDIS_URL", &shared_redis().url()),
        ("BATON_KEY_PREFIX", &unique_prefix()),
        ("RUST_LOG", "warn"),
    ])
    .await
}

/// One reading of `/metrics`.
struct Reading(String);

impl Reading {
    async fn of(client: &Client, service: &Service) -> Self {
        let response = client
            .get(format!("{}/metrics", service.base))
            .send()
            .await
            .expect("GET /metrics");
        assert_eq!(response.status(), 200);
        Self(response.text().await.expect("metrics text"))
    }

    /// The value of the series written exactly `series` (name and labels as
    /// rendered); `None` when the series is not there.
    fn value(&self, series: &str) -> Option<f64> {
        self.0.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            Some(value.parse().expect("a number"))
        })
    }

    /// [`Self::value`], 0 for a series not there yet.
    fn count(&self, series: &str) -> f64 {
        self.value(series).unwrap_or(0.0)
    }
}

/// Sends a request; the future borrows nothing.
fn send(
    client: &Client,
    method: &str,
    url: String,
    body: &str,
) -> impl std::future::Future<Output = reqwest::Response> {
    let pending = client
        .request(method.parse().unwrap(), url)
        .body(body.to_owned())
        .send();
    async move { pending.await.expect("request sent") }
}

#[tokio::test]
async fn metrics_count_each_request_by_route_and_each_acquisition_by_outcome_exactly() {
    let mut service = own_service().await;
    let client = Client::new();
    let base = service.base.clone();
    let before = Reading::of(&client, &service).await;

    // Twice, so that both the first use of a series and a later one count.
    for _ in 0..2 {
        let response = send(&client, "POST", format!("{base}/locks/measured"), "{}").await;
        assert_eq!(response.status(), 201);
        let lease: Value = response.json().await.unwrap();
        let busy = send(&client, "POST", format!("{base}/locks/measured"), "{}").await;
        assert_eq!(busy.status(), 409);
        let id = lease["id"].as_str().unwrap();
        let released = send(&client, "DELETE", format!("{base}/locks/measured/{id}"), "").await;
        assert_eq!(released.status(), 204);
    }
    let slot = send(
        &client,
        "POST",
        format!("{base}/semaphores/measured"),
        r#"{"limit": 2}"#,
    )
    .await;
    assert_eq!(slot.status(), 201);

    let after = Reading::of(&client, &service).await;
    let delta = |series: &str| after.count(series) - before.count(series);
    let requests = r#"baton_http_requests_total{method="#;
    let lock = r#"{kind="lock",outcome="#;
    let semaphore = r#"{kind="semaphore",outcome="#;
    for (series, expected) in [
        (
            format!(r#"{requests}"POST",route="/locks/{{name}}",status="201"}}"#),
            2.0,
        ),
        (
            format!(r#"{requests}"POST",route="/locks/{{name}}",status="409"}}"#),
            2.0,
        ),
        (
            format!(r#"{requests}"DELETE",route="/locks/{{name}}/{{id}}",status="204"}}"#),
            2.0,
        ),
        (
            format!(r#"{requests}"POST",route="/semaphores/{{name}}",status="201"}}"#),
            1.0,
        ),
        // The first reading itself; the second is counted once answered.
        (
            format!(r#"{requests}"GET",route="/metrics",status="200"}}"#),
            1.0,
        ),
        (
            r#"baton_http_request_duration_seconds_count{method="POST",route="/locks/{name}"}"#
                .to_owned(),
            4.0,
        ),
        (
            format!(r#"baton_acquisitions_total{lock}"acquired"}}"#),
            2.0,
        ),
        (format!(r#"baton_acquisitions_total{lock}"busy"}}"#), 2.0),
        (
            format!(r#"baton_acquisitions_total{semaphore}"acquired"}}"#),
            1.0,
        ),
        (
            format!(r#"baton_acquisitions_total{semaphore}"busy"}}"#),
            0.0,
        ),
        (r#"baton_contention_total{kind="lock"}"#.to_owned(), 2.0),
        (
            r#"baton_contention_total{kind="semaphore"}"#.to_owned(),
            0.0,
        ),
        (
            format!(r#"baton_acquire_wait_seconds_count{lock}"acquired"}}"#),
            2.0,
        ),
        (
            format!(r#"baton_acquire_wait_seconds_count{lock}"busy"}}"#),
            2.0,
        ),
        (r#"baton_leases_expired_total{kind="lock"}"#.to_owned(), 0.0),
        (r#"baton_waiters{kind="lock"}"#.to_owned(), 0.0),
    ] {
        assert!(
            after.value(&series).is_some() || expected == 0.0,
            "no {series}:\n{}",
            after.0
        );
        assert_eq!(delta(&series), expected, "{series}:\n{}", after.0);
    }
    // A process of its own: nothing but this test moved its counters.
    assert_eq!(
        before.count(r#"baton_acquisitions_total{kind="lock",outcome="acquired"}"#),
        0.0,
        "{}",
        before.0
    );
    assert_eq!(service.stop().code(), Some(0));
}

#[tokio::test]
async fn a_script_that_notices_expired_leases_counts_each_exactly_once() {
    let mut service = own_service().await;
    let client = Client::new();
    let base = service.base.clone();
    let lock = r#"baton_leases_expired_total{kind="lock"}"#;
    let semaphore = r#"baton_leases_expired_total{kind="semaphore"}"#;

    // One lock lease and three semaphore leases lapse; one lease is released.
    let post = |path: &str, body: &str| send(&client, "POST", format!("{base}{path}"), body);
    assert_eq!(
        post("/locks/lapsing", r#"{"ttl_ms": 50}"#).await.status(),
        201
    );
    for _ in 0..3 {
        let response = post("/semaphores/lapsing", r#"{"limit": 3, "ttl_ms": 50}"#).await;
        assert_eq!(response.status(), 201);
    }
    let kept: Value = post("/locks/released", "{}").await.json().await.unwrap();
    let id = kept["id"].as_str().unwrap();
    let released = send(&client, "DELETE", format!("{base}/locks/released/{id}"), "").await;
    assert_eq!(released.status(), 204);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = Reading::of(&client, &service).await;
    assert_eq!(before.value(lock), Some(0.0), "{}", before.0);
    assert_eq!(before.value(semaphore), Some(0.0), "{}", before.0);

    // The next acquisitions find them expired.
    assert_eq!(post("/locks/lapsing", "{}").await.status(), 201);
    let response = post("/semaphores/lapsing", r#"{"limit": 3}"#).await;
    assert_eq!(response.status(), 201);
    assert_eq!(post("/locks/released", "{}").await.status(), 201);

    let after = Reading::of(&client, &service).await;
    assert_eq!(after.value(lock), Some(1.0), "{}", after.0);
    assert_eq!(after.value(semaphore), Some(3.0), "{}", after.0);
    // Noticed once: later calls on those names count nothing more.
    assert_eq!(post("/locks/lapsing", "{}").await.status(), 409);
    let again = Reading::of(&client, &service).await;
    assert_eq!(again.value(lock), Some(1.0), "{}", again.0);
    assert_eq!(service.stop().code(), Some(0));
}
