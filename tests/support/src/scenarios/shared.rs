//! Shared (read) locks across two instances, as scenarios each test of a
//! deployment runs (`tests/api/shared.rs` on one Redis, `modes.rs` on a
//! Redis Cluster and on Sentinel).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::app::{
    answer_of, granted, join_line, lease_path, problem, release, status_of, token_of, TestApp,
};

async fn read(app: &TestApp, name: &str, owner: &str, ttl_ms: u64) -> Value {
    let lease = app
        .acquire_lock(
            name,
            &format!(r#"{{"shared": true, "ttl_ms": {ttl_ms}, "owner": "{owner}"}}"#),
        )
        .await;
    assert_eq!(lease["shared"], true, "a shared lease says so: {lease}");
    lease
}

/// The owners of a status's `waiters`, in order, each with its `shared`.
fn line_of(status: &Value) -> Vec<(String, Option<bool>)> {
    status["waiters"]
        .as_array()
        .expect("waiters")
        .iter()
        .enumerate()
        .map(|(i, w)| {
            assert_eq!(w["position"], i + 1, "{status}");
            (
                w["owner"].as_str().unwrap_or_default().to_owned(),
                w.get("shared")
                    .map(|s| s.as_bool().expect("shared is a boolean")),
            )
        })
        .collect()
}

/// Several readers hold the lock at once, across instances, each with its
/// own id and token; each is checked, refreshed and released on its own.
pub async fn readers_hold_the_lock_together(a: &TestApp, b: &TestApp) {
    let path = "/locks/readers";
    let mut leases = Vec::new();
    for (i, app) in [a, b, a].into_iter().enumerate() {
        let response = app
            .post(
                path,
                &format!(r#"{{"shared": true, "ttl_ms": 30000, "owner": "r{i}"}}"#),
            )
            .await;
        assert_eq!(
            response.status(),
            201,
            "reader {i} admitted beside the others"
        );
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let lease: Value = response.json().await.unwrap();
        assert_eq!(location, lease_path("locks", &lease));
        assert_eq!(lease["shared"], true, "{lease}");
        assert_eq!(lease["owner"], format!("r{i}"));
        leases.push(lease);
    }
    let ids: HashSet<&str> = leases.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3, "each reader has its own id: {leases:?}");
    let tokens: Vec<u64> = leases.iter().map(token_of).collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "each reader has its own token, rising: {tokens:?}"
    );

    let status = status_of(b, path).await;
    assert_eq!(status["held"], true, "{status}");
    assert_eq!(status["mode"], "shared", "{status}");
    assert_eq!(status["holders"], 3, "{status}");
    for field in ["owner", "fencing_token", "expires_in_ms"] {
        assert!(
            status.get(field).is_none(),
            "{field} describes an exclusive holder only: {status}"
        );
    }
    let shown = status["leases"].as_array().expect("leases");
    assert_eq!(shown.len(), 3, "{status}");
    assert!(shown.iter().all(|l| l["shared"] == true), "{status}");
    let mut shown_tokens: Vec<u64> = shown.iter().map(token_of).collect();
    shown_tokens.sort_unstable();
    assert_eq!(shown_tokens, tokens, "{status}");
    let mut owners: Vec<&str> = shown.iter().map(|l| l["owner"].as_str().unwrap()).collect();
    owners.sort_unstable();
    assert_eq!(owners, ["r0", "r1", "r2"]);
    assert!(
        !ids.iter().any(|id| status.to_string().contains(id)),
        "no lease id in a status: {status}"
    );

    // Each lease is its own: checked on either instance, refreshed, released.
    for lease in &leases {
        for app in [a, b] {
            let checked = app.get(&lease_path("locks", lease)).await;
            assert_eq!(checked.status(), 200);
            let checked: Value = checked.json().await.unwrap();
            assert_eq!(checked["shared"], true);
            assert_eq!(checked["fencing_token"], lease["fencing_token"]);
        }
    }
    let refreshed = b
        .patch(&lease_path("locks", &leases[0]), r#"{"ttl_ms": 60000}"#)
        .await;
    assert_eq!(refreshed.status(), 200);
    let refreshed: Value = refreshed.json().await.unwrap();
    assert_eq!(refreshed["ttl_ms"], 60000);
    assert_eq!(refreshed["shared"], true);
    assert_eq!(refreshed["fencing_token"], leases[0]["fencing_token"]);
    release(b, "locks", &leases[1]).await;
    problem(
        a.get(&lease_path("locks", &leases[1])).await,
        404,
        "lease-not-found",
    )
    .await;
    let status = status_of(a, path).await;
    assert_eq!(status["holders"], 2, "one reader left, two hold: {status}");
    assert_eq!(status["mode"], "shared");
    let mut left: Vec<u64> = status["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(token_of)
        .collect();
    left.sort_unstable();
    assert_eq!(left, [tokens[0], tokens[2]], "{status}");
    release(a, "locks", &leases[0]).await;
    release(b, "locks", &leases[2]).await;

    let status = status_of(b, path).await;
    assert_eq!(status["held"], false, "{status}");
    assert!(status.get("mode").is_none(), "{status}");

    // A writer is held alone, and said so.
    let writer = a
        .acquire_lock("readers", r#"{"owner": "w", "ttl_ms": 30000}"#)
        .await;
    assert_eq!(writer["shared"], false, "{writer}");
    assert!(token_of(&writer) > tokens[2]);
    let status = status_of(b, path).await;
    assert_eq!(status["mode"], "exclusive", "{status}");
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(status["owner"], "w", "{status}");
    assert_eq!(status["fencing_token"], writer["fencing_token"], "{status}");
    assert_eq!(status["leases"].as_array().unwrap().len(), 1, "{status}");
    assert_eq!(status["leases"][0]["shared"], false, "{status}");
    let refused = b.post(path, r#"{"shared": true}"#).await;
    let body = problem(refused, 409, "lock-held").await;
    assert_eq!(body["mode"], "exclusive", "{body}");
    assert_eq!(body["holders"], 1, "{body}");
    assert_eq!(body["owner"], "w", "{body}");
    release(b, "locks", &writer).await;
}

/// A writer is refused while readers hold (409 naming the last lease in its
/// way), and one that waits is admitted only when the last reader leaves.
pub async fn a_writer_waits_for_the_last_reader(a: &TestApp, b: &TestApp) {
    let path = "/locks/excluded";
    let early = read(a, "excluded", "early", 20_000).await;
    let late = read(a, "excluded", "late", 60_000).await;

    let refused = b.post(path, r#"{"owner": "writer"}"#).await;
    assert!(refused.headers().contains_key("retry-after"));
    let body = problem(refused, 409, "lock-held").await;
    assert_eq!(body["mode"], "shared", "{body}");
    assert_eq!(body["holders"], 2, "{body}");
    assert_eq!(body["waiting"], 0, "{body}");
    let expires_in = body["expires_in_ms"].as_u64().expect("expires_in_ms");
    assert!(
        expires_in > 40_000 && expires_in <= 60_000,
        "the last lease in its way is the 60 s one: {body}"
    );
    assert_eq!(body["owner"], "late", "{body}");

    let writer = join_line(b, path, r#"{"wait_ms": 30000, "owner": "writer"}"#, a).await;
    release(a, "locks", &early).await;
    // One reader still holds: the writer still waits.
    let status = status_of(b, path).await;
    assert_eq!(status["mode"], "shared", "{status}");
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(line_of(&status), [("writer".to_owned(), None)], "{status}");
    assert!(!writer.is_finished(), "a writer admitted beside a reader");

    let last_left_at = Instant::now();
    release(a, "locks", &late).await;
    let (at, lease) = granted(answer_of(writer, "writer").await, "the writer").await;
    assert!(
        at >= last_left_at,
        "the writer was answered before the last reader left"
    );
    assert_eq!(lease["shared"], false, "{lease}");
    assert!(token_of(&lease) > token_of(&late), "{lease} after {late}");
    let status = status_of(a, path).await;
    assert_eq!(status["mode"], "exclusive", "{status}");
    assert_eq!(status["owner"], "writer", "{status}");
    assert_eq!(status["waiting"], 0, "{status}");
    release(b, "locks", &lease).await;
}

/// Readers hold, a writer queues, and readers that come after it wait for
/// it (a reader that would not wait is refused): the writer is not starved.
pub async fn a_reader_behind_a_queued_writer_waits(a: &TestApp, b: &TestApp) {
    let path = "/locks/no-starving";
    let first = read(a, "no-starving", "r1", 30_000).await;
    let second = read(a, "no-starving", "r2", 30_000).await;
    let writer = join_line(b, path, r#"{"wait_ms": 30000, "owner": "writer"}"#, a).await;

    // It would fit beside the readers, but the writer is ahead of it.
    let refused = b.post(path, r#"{"shared": true, "owner": "eager"}"#).await;
    let body = problem(refused, 409, "lock-held").await;
    assert_eq!(body["mode"], "shared", "{body}");
    assert_eq!(body["holders"], 2, "{body}");
    assert_eq!(body["waiting"], 1, "{body}");
    // Readers that wait join the line behind the writer, on either instance
    // (join_line fails if one is admitted instead).
    let late_b = join_line(
        b,
        path,
        r#"{"shared": true, "wait_ms": 30000, "owner": "late-b"}"#,
        a,
    )
    .await;
    let late_a = join_line(
        a,
        path,
        r#"{"shared": true, "wait_ms": 30000, "owner": "late-a"}"#,
        b,
    )
    .await;
    let status = status_of(b, path).await;
    assert_eq!(status["holders"], 2, "{status}");
    assert_eq!(status["waiting"], 3, "{status}");
    assert_eq!(
        line_of(&status),
        [
            ("writer".to_owned(), None),
            ("late-b".to_owned(), Some(true)),
            ("late-a".to_owned(), Some(true)),
        ],
        "{status}"
    );

    release(a, "locks", &first).await;
    let status = status_of(b, path).await;
    assert_eq!(status["mode"], "shared", "{status}");
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(status["waiting"], 3, "nobody admitted yet: {status}");

    let readers_left_at = Instant::now();
    release(a, "locks", &second).await;
    let (at, writer_lease) = granted(answer_of(writer, "writer").await, "the writer").await;
    assert!(at >= readers_left_at);
    assert_eq!(writer_lease["shared"], false);
    assert!(token_of(&writer_lease) > token_of(&second));
    let status = status_of(a, path).await;
    assert_eq!(status["mode"], "exclusive", "the writer first: {status}");
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(
        line_of(&status),
        [
            ("late-b".to_owned(), Some(true)),
            ("late-a".to_owned(), Some(true)),
        ],
        "{status}"
    );
    assert!(
        !late_a.is_finished() && !late_b.is_finished(),
        "a reader admitted beside the writer"
    );

    let writer_left_at = Instant::now();
    release(b, "locks", &writer_lease).await;
    let mut readers = Vec::new();
    for (reader, what) in [(late_b, "late-b"), (late_a, "late-a")] {
        let (at, lease) = granted(answer_of(reader, what).await, what).await;
        assert!(
            at >= writer_left_at,
            "{what} answered before the writer left"
        );
        assert_eq!(lease["shared"], true);
        assert!(
            token_of(&lease) > token_of(&writer_lease),
            "{lease} after {writer_lease}"
        );
        readers.push(lease);
    }
    let status = status_of(b, path).await;
    assert_eq!(status["mode"], "shared", "both together: {status}");
    assert_eq!(status["holders"], 2, "{status}");
    assert_eq!(status["waiting"], 0, "{status}");
    release(a, "locks", &readers[0]).await;
    release(b, "locks", &readers[1]).await;
}

/// One fencing sequence per name, whatever the mode and however a lease
/// was granted (a free name, beside readers, from the line on a release).
pub async fn tokens_rise_across_modes(a: &TestApp, b: &TestApp) {
    let (name, path) = ("fenced-modes", "/locks/fenced-modes");
    let mut tokens: Vec<(&str, u64)> = Vec::new();
    for round in 0..3 {
        let (x, y) = if round % 2 == 0 { (a, b) } else { (b, a) };
        let r1 = read(x, name, "r1", 30_000).await;
        let r2 = read(y, name, "r2", 30_000).await;
        tokens.push(("reader on a free name", token_of(&r1)));
        tokens.push(("reader beside a reader", token_of(&r2)));
        let writer = join_line(y, path, r#"{"wait_ms": 30000}"#, x).await;
        release(x, "locks", &r1).await;
        release(x, "locks", &r2).await;
        let (_, w) = granted(answer_of(writer, "writer").await, "writer").await;
        tokens.push(("writer from the line", token_of(&w)));
        let reader = join_line(x, path, r#"{"shared": true, "wait_ms": 30000}"#, y).await;
        release(y, "locks", &w).await;
        let (_, r3) = granted(answer_of(reader, "reader").await, "reader").await;
        tokens.push(("reader from the line", token_of(&r3)));
        release(x, "locks", &r3).await;
        let alone = y.acquire_lock(name, "{}").await;
        tokens.push(("writer on a free name", token_of(&alone)));
        release(x, "locks", &alone).await;
    }
    for pair in tokens.windows(2) {
        assert!(
            pair[0].1 < pair[1].1,
            "{:?} then {:?}: {tokens:?}",
            pair[0],
            pair[1]
        );
    }
}

/// `DELETE /locks/{name}` ends every shared lease: their ids are refused
/// everywhere, and a queued writer is admitted at once.
pub async fn force_release_ends_every_shared_lease(a: &TestApp, b: &TestApp) {
    let (name, path) = ("evicted", "/locks/evicted");
    let readers = vec![
        read(a, name, "r1", 60_000).await,
        read(b, name, "r2", 60_000).await,
        read(a, name, "r3", 60_000).await,
    ];
    let writer = join_line(b, path, r#"{"wait_ms": 30000, "owner": "writer"}"#, a).await;

    let forced_at = Instant::now();
    assert_eq!(a.delete(path).await.status(), 204);

    let (at, lease) = granted(answer_of(writer, "writer").await, "the writer").await;
    assert!(at >= forced_at);
    assert!(token_of(&lease) > token_of(&readers[2]));
    for reader in &readers {
        let lease_at = lease_path("locks", reader);
        for app in [a, b] {
            problem(app.get(&lease_at).await, 404, "lease-not-found").await;
            problem(
                app.patch(&lease_at, r#"{"ttl_ms": 60000}"#).await,
                404,
                "lease-not-found",
            )
            .await;
        }
        problem(b.delete(&lease_at).await, 404, "lease-not-found").await;
    }
    let status = status_of(b, path).await;
    assert_eq!(status["mode"], "exclusive", "only the writer: {status}");
    assert_eq!(status["holders"], 1, "{status}");
    assert_eq!(status["owner"], "writer", "{status}");

    // Readers alone, force-released: nothing is held any more.
    release(a, "locks", &lease).await;
    read(a, name, "r4", 60_000).await;
    read(b, name, "r5", 60_000).await;
    assert_eq!(b.delete(path).await.status(), 204);
    let status = status_of(a, path).await;
    assert_eq!(status["held"], false, "{status}");
    problem(a.delete(path).await, 404, "lock-not-held").await;
    a.acquire_lock(name, "{}").await;
}

/// A queued writer that gives up leaves the line, and the readers queued
/// behind it are admitted at once beside the readers that hold.
pub async fn readers_behind_a_writer_that_gives_up_move_up(a: &TestApp, b: &TestApp) {
    let (name, path) = ("gave-up", "/locks/gave-up");
    let holder = read(a, name, "holder", 60_000).await;
    let writer = join_line(b, path, r#"{"wait_ms": 1000, "owner": "writer"}"#, a).await;
    let reader = join_line(
        a,
        path,
        r#"{"shared": true, "wait_ms": 30000, "owner": "reader"}"#,
        b,
    )
    .await;

    // The reader may be admitted as the writer leaves, before its 409 is
    // written: the 409 shows the lock as it is then.
    let body = problem(answer_of(writer, "writer").await.response, 409, "lock-held").await;
    assert_eq!(body["mode"], "shared", "{body}");
    assert!(body["holders"] == 1 || body["holders"] == 2, "{body}");

    let (_, lease) = granted(answer_of(reader, "reader").await, "the reader").await;
    assert_eq!(lease["shared"], true);
    assert!(
        a.get(&lease_path("locks", &holder)).await.status() == 200,
        "admitted beside the reader that holds, not after it"
    );
    let status = status_of(b, path).await;
    assert_eq!(status["holders"], 2, "{status}");
    release(a, "locks", &holder).await;
    release(b, "locks", &lease).await;
}

/// Readers that expire: a waiting writer is admitted when the last of them
/// has expired, not the first.
pub async fn a_writer_waits_for_the_last_reader_to_expire(a: &TestApp, b: &TestApp) {
    let (name, path) = ("expiring-readers", "/locks/expiring-readers");
    read(a, name, "short", 300).await;
    let long = read(a, name, "long", 1500).await;
    let long_acquired_at = Instant::now();
    let writer = b.post_in_background(path, r#"{"wait_ms": 20000}"#);
    let (at, lease) = granted(answer_of(writer, "writer").await, "the writer").await;
    assert!(
        at.duration_since(long_acquired_at) >= Duration::from_millis(1400),
        "admitted {:?} after the 1.5 s reader was granted",
        at.duration_since(long_acquired_at)
    );
    assert!(token_of(&lease) > token_of(&long));
    release(a, "locks", &lease).await;
}
