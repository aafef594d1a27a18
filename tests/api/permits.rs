//! Semaphore leases of several permits: `used` counts permits where
//! `holders` counts leases; the line is first come, first served, so a large
//! request at its head is never overtaken by smaller ones that would fit;
//! `permits` is an integer from 1 to the limit.
//!
//! Each scenario (`baton_testkit::scenarios::permits`) runs across two
//! instances on one Redis (holders on one, waiters on the other); `modes.rs`
//! runs them on a Redis Cluster and on Sentinel.

use baton_testkit::scenarios::permits::{
    a_large_request_is_not_overtaken, permits_are_counted,
    small_requests_behind_a_large_one_that_gives_up_move_up,
};
use baton_testkit::{problem, status_of, take, two_instances, TestApp};

#[tokio::test]
async fn permits_are_counted_in_status_409_and_lease_and_freed_on_release() {
    let (a, b) = two_instances().await;
    permits_are_counted(&a, &b).await;
}

#[tokio::test]
async fn a_large_request_at_the_head_is_not_overtaken_by_smaller_ones() {
    let (a, b) = two_instances().await;
    a_large_request_is_not_overtaken(&a, &b).await;
}

#[tokio::test]
async fn permits_must_be_an_integer_from_1_to_the_limit() {
    let app = TestApp::spawn().await;
    let path = "/semaphores/strict-permits";
    for body in [
        r#"{"limit": 5, "permits": 0}"#,
        r#"{"limit": 5, "permits": 6}"#,
        r#"{"limit": 100000, "permits": 100001}"#,
        r#"{"limit": 5, "permits": -1}"#,
        r#"{"limit": 5, "permits": 1.5}"#,
        r#"{"limit": 5, "permits": 2.0}"#,
        r#"{"limit": 5000, "permits": 1e3}"#,
        r#"{"limit": 5, "permits": "2"}"#,
        r#"{"limit": 5, "permits": true}"#,
        r#"{"limit": 5, "permits": 18446744073709551616}"#,
    ] {
        let response = app.post(path, body).await;
        let problem = problem(response, 400, "invalid-request").await;
        assert!(
            problem["detail"].as_str().unwrap().contains("permits"),
            "{body}: {problem}"
        );
    }
    let status = status_of(&app, path).await;
    assert_eq!(
        status["holders"], 0,
        "no refused request took a slot: {status}"
    );
    // Permits are a semaphore's: a lock refuses them.
    let response = app.post("/locks/strict-permits", r#"{"permits": 2}"#).await;
    let refused = problem(response, 400, "invalid-request").await;
    assert!(
        refused["detail"].as_str().unwrap().contains("permits"),
        "{refused}"
    );

    let lease = take(&app, path, r#"{"limit": 5, "permits": 5}"#).await;
    assert_eq!(lease["permits"], 5);
}

#[tokio::test]
async fn smaller_requests_behind_a_large_one_that_gives_up_are_admitted_at_once() {
    let (a, b) = two_instances().await;
    small_requests_behind_a_large_one_that_gives_up_move_up(&a, &b).await;
}
