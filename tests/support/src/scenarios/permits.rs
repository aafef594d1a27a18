//! A semaphore's permits across two instances, as scenarios each test of a
//! deployment runs (`tests/api/permits.rs` on one Redis, `modes.rs` on a
//! Redis Cluster and on Sentinel).

use std::time::Instant;

use serde_json::Value;

use crate::app::{
    answer_of, granted, join_line, problem, release, status_of, take, token_of, TestApp,
};

/// A semaphore lease, which must say its permits.
async fn take_permits(app: &TestApp, path: &str, body: &str) -> Value {
    let lease = take(app, path, body).await;
    assert!(
        lease["permits"].is_u64(),
        "a lease says its permits: {lease}"
    );
    lease
}

/// Leases of 2 and 3 permits fill a limit of 5: status and the 409 count
/// permits; releasing the 3 makes room for a 3, not for a 4.
pub async fn permits_are_counted(a: &TestApp, b: &TestApp) {
    let path = "/semaphores/permits";
    let two = take_permits(a, path, r#"{"limit": 5, "permits": 2, "owner": "two"}"#).await;
    assert_eq!(two["permits"], 2, "{two}");
    assert_eq!(two["limit"], 5, "{two}");
    let three = take_permits(b, path, r#"{"limit": 5, "permits": 3, "owner": "three"}"#).await;
    assert_eq!(three["permits"], 3, "{three}");
    assert!(token_of(&three) > token_of(&two));

    let status = status_of(b, path).await;
    assert_eq!(status["holders"], 2, "{status}");
    assert_eq!(status["used"], 5, "{status}");
    assert_eq!(status["limit"], 5, "{status}");
    let mut leases: Vec<(String, u64)> = status["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["owner"].as_str().unwrap().to_owned(),
                l["permits"].as_u64().expect("permits in every lease"),
            )
        })
        .collect();
    leases.sort();
    assert_eq!(
        leases,
        [("three".to_owned(), 3), ("two".to_owned(), 2)],
        "{status}"
    );

    let full = a.post(path, r#"{"limit": 5}"#).await;
    assert!(full.headers().contains_key("retry-after"));
    let body = problem(full, 409, "semaphore-full").await;
    assert_eq!(body["used"], 5, "{body}");
    assert_eq!(body["holders"], 2, "{body}");
    assert_eq!(body["limit"], 5, "{body}");
    assert_eq!(body["waiting"], 0, "{body}");

    release(a, "semaphores", &three).await;
    let status = status_of(a, path).await;
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(status["used"], 2, "{status}");
    let body = problem(
        b.post(path, r#"{"limit": 5, "permits": 4}"#).await,
        409,
        "semaphore-full",
    )
    .await;
    assert_eq!(body["used"], 2, "2 + 4 > 5: {body}");
    assert_eq!(body["holders"], 1, "{body}");
    let again = take_permits(b, path, r#"{"limit": 5, "permits": 3}"#).await;
    assert_eq!(again["permits"], 3);
    let status = status_of(a, path).await;
    assert_eq!(status["used"], 5, "{status}");
    assert_eq!(status["holders"], 2, "{status}");
    release(a, "semaphores", &again).await;
    release(b, "semaphores", &two).await;

    // One permit unless asked (null too); a lease may take the whole limit.
    for body in [r#"{"limit": 5}"#, r#"{"limit": 5, "permits": null}"#] {
        let one = take_permits(b, path, body).await;
        assert_eq!(one["permits"], 1, "{body}: {one}");
        release(a, "semaphores", &one).await;
    }
    let whole = take_permits(a, path, r#"{"limit": 5, "permits": 5}"#).await;
    problem(b.post(path, r#"{"limit": 5}"#).await, 409, "semaphore-full").await;
    release(b, "semaphores", &whole).await;
    let status = status_of(a, path).await;
    assert_eq!(status["holders"], 0, "{status}");
}

/// Limit 4, 3 held: a request for 4 queues, then requests for 1, which would
/// fit beside the 3 at once, queue behind it; the 4 is admitted first.
pub async fn a_large_request_is_not_overtaken(a: &TestApp, b: &TestApp) {
    let path = "/semaphores/big-first";
    let held = take_permits(a, path, r#"{"limit": 4, "permits": 3, "owner": "held"}"#).await;
    let big = join_line(
        b,
        path,
        r#"{"limit": 4, "permits": 4, "wait_ms": 30000, "owner": "big"}"#,
        a,
    )
    .await;
    // join_line fails if one of them is admitted instead of queuing.
    let mut small = Vec::new();
    for (i, app) in [b, a, b].into_iter().enumerate() {
        let body = format!(r#"{{"limit": 4, "wait_ms": 30000, "owner": "small{i}"}}"#);
        small.push(join_line(app, path, &body, a).await);
    }
    // Nor does a request that would not wait overtake them.
    let body = problem(
        b.post(path, r#"{"limit": 4, "permits": 1}"#).await,
        409,
        "semaphore-full",
    )
    .await;
    assert_eq!(body["used"], 3, "{body}");
    assert_eq!(body["waiting"], 4, "{body}");

    let status = status_of(b, path).await;
    assert_eq!(status["used"], 3, "{status}");
    assert_eq!(status["waiting"], 4, "{status}");
    let line: Vec<(String, u64)> = status["waiters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["owner"].as_str().unwrap().to_owned(),
                w["permits"].as_u64().expect("permits in every waiter"),
            )
        })
        .collect();
    assert_eq!(
        line,
        [
            ("big".to_owned(), 4),
            ("small0".to_owned(), 1),
            ("small1".to_owned(), 1),
            ("small2".to_owned(), 1),
        ],
        "{status}"
    );

    let held_left_at = Instant::now();
    release(a, "semaphores", &held).await;
    let (at, big_lease) = granted(answer_of(big, "big").await, "the large request").await;
    assert!(at >= held_left_at);
    assert_eq!(big_lease["permits"], 4);
    let status = status_of(a, path).await;
    assert_eq!(status["used"], 4, "the large request first: {status}");
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(status["waiting"], 3, "{status}");
    assert!(
        small.iter().all(|s| !s.is_finished()),
        "a small request admitted beside the 4"
    );

    let big_left_at = Instant::now();
    release(a, "semaphores", &big_lease).await;
    let mut leases = Vec::new();
    for (i, waiter) in small.into_iter().enumerate() {
        let what = format!("small{i}");
        let (at, lease) = granted(answer_of(waiter, &what).await, &what).await;
        assert!(at >= big_left_at, "{what} answered before the 4 left");
        assert_eq!(lease["permits"], 1);
        assert!(token_of(&lease) > token_of(&big_lease));
        leases.push(lease);
    }
    let status = status_of(b, path).await;
    assert_eq!(status["used"], 3, "{status}");
    assert_eq!(status["holders"], 3, "{status}");
    for lease in &leases {
        release(b, "semaphores", lease).await;
    }
}

/// A large request at the head that gives up leaves the line, and the
/// smaller ones behind it that fit are admitted at once.
pub async fn small_requests_behind_a_large_one_that_gives_up_move_up(a: &TestApp, b: &TestApp) {
    let path = "/semaphores/big-gave-up";
    let held = take_permits(a, path, r#"{"limit": 4, "permits": 2}"#).await;
    let big = join_line(
        b,
        path,
        r#"{"limit": 4, "permits": 4, "wait_ms": 1000, "owner": "big"}"#,
        a,
    )
    .await;
    let small = join_line(
        a,
        path,
        r#"{"limit": 4, "permits": 2, "wait_ms": 30000, "owner": "small"}"#,
        b,
    )
    .await;
    // The small one may be admitted as the large one leaves, before its 409
    // is written: the 409 shows the semaphore as it is then.
    let body = problem(answer_of(big, "big").await.response, 409, "semaphore-full").await;
    assert!(body["used"] == 2 || body["used"] == 4, "{body}");
    let (_, lease) = granted(answer_of(small, "small").await, "small").await;
    let status = status_of(b, path).await;
    assert_eq!(status["used"], 4, "beside the 2 held: {status}");
    release(a, "semaphores", &held).await;
    release(b, "semaphores", &lease).await;
}
