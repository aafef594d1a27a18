//! Shared (read) locks: readers held together, a writer alone; one
//! first-come-first-served line, so a writer waits only for the readers
//! ahead of it and a reader behind a queued writer waits for that writer;
//! tokens rising across both modes; force-release ending every lease.
//!
//! Each scenario (`baton_testkit::scenarios::shared`) runs across two
//! instances on one Redis: holders on one, waiters on the other (and some
//! the other way round). `modes.rs` runs the same scenarios on a Redis
//! Cluster and on Sentinel.

use baton_testkit::scenarios::shared::{
    a_reader_behind_a_queued_writer_waits, a_writer_waits_for_the_last_reader,
    a_writer_waits_for_the_last_reader_to_expire, force_release_ends_every_shared_lease,
    readers_behind_a_writer_that_gives_up_move_up, readers_hold_the_lock_together,
    tokens_rise_across_modes,
};
use baton_testkit::{problem, release, status_of, two_instances, TestApp};

#[tokio::test]
async fn readers_hold_a_lock_together_each_with_its_own_id_and_token() {
    let (a, b) = two_instances().await;
    readers_hold_the_lock_together(&a, &b).await;
}

#[tokio::test]
async fn a_writer_is_excluded_until_the_last_reader_leaves() {
    let (a, b) = two_instances().await;
    a_writer_waits_for_the_last_reader(&a, &b).await;
}

#[tokio::test]
async fn a_reader_behind_a_queued_writer_waits_for_it_so_writers_are_not_starved() {
    let (a, b) = two_instances().await;
    a_reader_behind_a_queued_writer_waits(&a, &b).await;
}

#[tokio::test]
async fn fencing_tokens_strictly_increase_across_shared_and_exclusive_leases() {
    let (a, b) = two_instances().await;
    tokens_rise_across_modes(&a, &b).await;
}

#[tokio::test]
async fn force_releasing_a_lock_ends_every_shared_lease() {
    let (a, b) = two_instances().await;
    force_release_ends_every_shared_lease(&a, &b).await;
}

#[tokio::test]
async fn shared_must_be_a_boolean_and_is_a_lock_s_field_only() {
    let app = TestApp::spawn().await;
    for body in [
        r#"{"shared": "true"}"#,
        r#"{"shared": 1}"#,
        r#"{"shared": 0}"#,
        r#"{"shared": "yes"}"#,
        r#"{"shared": [true]}"#,
    ] {
        let response = app.post("/locks/strict-shared", body).await;
        let problem = problem(response, 400, "invalid-request").await;
        assert!(
            problem["detail"].as_str().unwrap().contains("shared"),
            "{body}: {problem}"
        );
    }
    let response = app
        .post(
            "/semaphores/strict-shared",
            r#"{"limit": 2, "shared": true}"#,
        )
        .await;
    let refused = problem(response, 400, "invalid-request").await;
    assert!(
        refused["detail"].as_str().unwrap().contains("shared"),
        "{refused}"
    );
    let status = status_of(&app, "/locks/strict-shared").await;
    assert_eq!(status["held"], false, "no refused request took the lock");

    // false and null are the default: exclusive.
    for body in [r#"{"shared": false}"#, r#"{"shared": null}"#, "{}"] {
        let lease = app.acquire_lock("strict-shared", body).await;
        assert_eq!(lease["shared"], false, "{body}: {lease}");
        release(&app, "locks", &lease).await;
    }
}

#[tokio::test]
async fn readers_behind_a_writer_that_gives_up_are_admitted_at_once() {
    let (a, b) = two_instances().await;
    readers_behind_a_writer_that_gives_up_move_up(&a, &b).await;
}

#[tokio::test]
async fn a_waiting_writer_is_admitted_when_the_last_reader_expires() {
    let (a, b) = two_instances().await;
    a_writer_waits_for_the_last_reader_to_expire(&a, &b).await;
}
