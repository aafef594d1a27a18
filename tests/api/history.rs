//! A name's history: every lease it had, newest first and paged, with who
//! held it, from when to when and how it ended, read the same on every
//! instance; never a lease id. A lease left to expire reads `expired` at its
//! `expires_at` even when nobody touched the name since. It costs an
//! uncontended acquire and release one Redis command (none with
//! `BATON_HISTORY_MAX=0`).

use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::commands_per_cycle;
use baton_testkit::{answer_of, granted, two_instances};
use baton_testkit::{
    join_line, problem, release, settings_for, take, token_of, unique_prefix, RedisServer, TestApp,
};

/// `GET path` as JSON, after checking it is 200; and its raw text.
async fn history(app: &TestApp, path: &str) -> (Value, String) {
    let response = app.get(path).await;
    let status = response.status();
    let text = response.text().await.expect("body");
    assert_eq!(status, 200, "{path}: {text}");
    (serde_json::from_str(&text).expect("json"), text)
}

/// Waits until `path`'s status says nobody holds it (the lease expired).
async fn until_free(app: &TestApp, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status: Value = app.get(path).await.json().await.expect("status");
        if status["holders"].as_u64().unwrap_or(0) == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{path} never expired: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// On one instance a lock is released, force-released, left to expire,
/// held by a waiter that waited for it, and held; the other instance reads
/// those entries newest first, each with how it ended, and no lease id.
#[tokio::test]
async fn the_other_instance_reads_released_force_released_expired_and_held_in_order() {
    let (a, b) = two_instances().await;
    let path = "/locks/hist-ends";
    let released = take(&a, path, r#"{"ttl_ms": 60000, "owner": "released"}"#).await;
    release(&a, "locks", &released).await;
    let forced = take(&a, path, r#"{"ttl_ms": 60000, "owner": "forced"}"#).await;
    assert_eq!(a.delete(path).await.status(), 204);
    let expired = take(&a, path, r#"{"ttl_ms": 300, "owner": "expired"}"#).await;
    until_free(&a, path).await;
    let first = take(
        &a,
        path,
        r#"{"ttl_ms": 60000, "owner": "held-then-released"}"#,
    )
    .await;
    let waiter = join_line(
        &a,
        path,
        r#"{"ttl_ms": 60000, "wait_ms": 30000, "owner": "waited", "shared": true, "priority": 4}"#,
        &b,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    release(&a, "locks", &first).await;
    let (_, waited) = granted(answer_of(waiter, "waited").await, "waited").await;

    let (page, text) = history(&b, &format!("{path}/history")).await;
    assert_eq!(page["name"], "hist-ends", "{page}");
    assert!(page.get("next_cursor").is_none(), "{page}");
    let entries = page["entries"].as_array().expect("entries");
    let shown: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["owner"].as_str().unwrap(), e["end"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        vec![
            ("waited", "held"),
            ("held-then-released", "released"),
            ("expired", "expired"),
            ("forced", "force-released"),
            ("released", "released"),
        ],
        "{page}"
    );
    let tokens: Vec<u64> = entries.iter().map(token_of).collect();
    let expected: Vec<u64> = [&waited, &first, &expired, &forced, &released]
        .iter()
        .map(|l| token_of(l))
        .collect();
    assert_eq!(tokens, expected, "{page}");
    for lease in [&waited, &first, &expired, &forced, &released] {
        let id = lease["id"].as_str().unwrap();
        assert!(!text.contains(id), "a lease id in the history: {text}");
    }
    // The held lease: no end yet, its expiry, its mode and priority, and
    // the time its request waited in line.
    let held = &entries[0];
    assert!(held.get("ended_at").is_none() && held.get("held_ms").is_none());
    assert_eq!(held["expires_at"], waited["expires_at"], "{held}");
    assert_eq!(
        (held["shared"].as_bool(), held["priority"].as_u64()),
        (Some(true), Some(4))
    );
    assert!(held["waited_ms"].as_u64().unwrap() >= 150, "{held}");
    // The expired one ended at its expiry, and was held as long as its ttl.
    let gone = &entries[2];
    assert_eq!(gone["ended_at"], expired["expires_at"], "{gone}");
    assert!(gone.get("expires_at").is_none(), "{gone}");
    // Every ended lease says when it was acquired and how long it was held.
    for entry in &entries[1..] {
        assert!(entry["acquired_at"].is_string(), "{entry}");
        assert!(entry["held_ms"].is_u64(), "{entry}");
        assert_eq!(entry["shared"], false, "{entry}");
        assert!(entry.get("priority").is_none(), "{entry}");
    }
    assert_eq!(entries[2]["held_ms"], 300, "{page}");
}

/// A lease left to expire with nobody touching the name after it reads
/// `expired`, ended at its `expires_at`, on either instance.
#[tokio::test]
async fn an_untouched_expired_lease_ended_at_its_expiry() {
    let (a, b) = two_instances().await;
    let path = "/semaphores/hist-untouched";
    let lease = take(
        &a,
        path,
        r#"{"limit": 3, "permits": 2, "ttl_ms": 400, "owner": "left"}"#,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    for app in [&b, &a] {
        let (page, _) = history(app, &format!("{path}/history")).await;
        let entries = page["entries"].as_array().expect("entries");
        assert_eq!(entries.len(), 1, "{page}");
        let entry = &entries[0];
        assert_eq!(entry["end"], "expired", "{entry}");
        assert_eq!(entry["ended_at"], lease["expires_at"], "{entry}");
        assert_eq!(entry["permits"], 2, "{entry}");
        assert_eq!(entry["held_ms"], 400, "{entry}");
        assert_eq!(entry["fencing_token"], lease["fencing_token"], "{entry}");
    }
    // Found expired by the next acquisition, it reads the same.
    let next = take(
        &b,
        path,
        r#"{"limit": 3, "ttl_ms": 60000, "owner": "next"}"#,
    )
    .await;
    let (page, _) = history(&a, &format!("{path}/history")).await;
    assert_eq!(page["entries"][0]["owner"], "next", "{page}");
    assert_eq!(
        page["entries"][1]["ended_at"], lease["expires_at"],
        "{page}"
    );
    assert_eq!(page["entries"].as_array().unwrap().len(), 2, "{page}");
    release(&b, "semaphores", &next).await;
}

/// 22 leases, read in pages: 20 then 2 by default, 5 at a time with
/// `limit=5`; each lease once, newest first, the cursor absent on the last.
#[tokio::test]
async fn history_pages_across_twenty_two_entries() {
    let (a, b) = two_instances().await;
    let path = "/semaphores/hist-pages";
    let mut tokens = Vec::new();
    for i in 0..22 {
        let body = format!(r#"{{"limit": 2, "ttl_ms": 60000, "owner": "job-{i}"}}"#);
        let lease = take(&a, path, &body).await;
        tokens.push(token_of(&lease));
        release(&a, "semaphores", &lease).await;
    }
    tokens.reverse();

    let (first, _) = history(&b, &format!("{path}/history")).await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 20, "{first}");
    let cursor = first["next_cursor"].as_str().expect("a cursor").to_owned();
    let (second, _) = history(&b, &format!("{path}/history?before={cursor}")).await;
    assert_eq!(second["entries"].as_array().unwrap().len(), 2, "{second}");
    assert!(second.get("next_cursor").is_none(), "{second}");
    let seen: Vec<u64> = first["entries"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["entries"].as_array().unwrap())
        .map(token_of)
        .collect();
    assert_eq!(seen, tokens);
    assert_eq!(second["entries"][1]["owner"], "job-0");

    let mut seen = Vec::new();
    let mut before = String::new();
    let mut sizes = Vec::new();
    loop {
        let (page, _) = history(&a, &format!("{path}/history?limit=5&before={before}")).await;
        let entries = page["entries"].as_array().unwrap();
        sizes.push(entries.len());
        seen.extend(entries.iter().map(token_of));
        match page["next_cursor"].as_str() {
            Some(next) => before = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(sizes, vec![5, 5, 5, 5, 2]);
    assert_eq!(seen, tokens);
}

/// A page bigger than the leases held now continues into the ended ones;
/// one filled by them continues there on the next page.
#[tokio::test]
async fn held_leases_come_first_and_paging_continues_past_them() {
    let app = TestApp::spawn().await;
    let path = "/semaphores/hist-held";
    let ended = take(
        &app,
        path,
        r#"{"limit": 3, "ttl_ms": 60000, "owner": "ended"}"#,
    )
    .await;
    release(&app, "semaphores", &ended).await;
    let one = take(
        &app,
        path,
        r#"{"limit": 3, "ttl_ms": 60000, "owner": "one"}"#,
    )
    .await;
    let two = take(
        &app,
        path,
        r#"{"limit": 3, "ttl_ms": 60000, "owner": "two"}"#,
    )
    .await;
    let (page, _) = history(&app, &format!("{path}/history?limit=2")).await;
    let owners: Vec<&str> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["owner"].as_str().unwrap())
        .collect();
    assert_eq!(owners, vec!["two", "one"], "{page}");
    let next = page["next_cursor"].as_str().expect("more");
    let (rest, _) = history(&app, &format!("{path}/history?limit=2&before={next}")).await;
    assert_eq!(rest["entries"][0]["owner"], "ended", "{rest}");
    assert_eq!(rest["entries"].as_array().unwrap().len(), 1, "{rest}");
    assert!(rest.get("next_cursor").is_none(), "{rest}");
    release(&app, "semaphores", &one).await;
    release(&app, "semaphores", &two).await;
}

/// `limit` is 1 to 100 and `before` a cursor a page gave: else 400 naming it.
#[tokio::test]
async fn a_bad_limit_or_cursor_is_refused_naming_it() {
    let app = TestApp::spawn().await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("before=abc", "before"),
        ("before=1-2-3", "before"),
        ("before=-1", "before"),
        ("before=1-", "before"),
    ] {
        for kind in ["locks", "semaphores"] {
            let path = format!("/{kind}/hist-bad/history?{query}");
            let refused = problem(app.get(&path).await, 400, "invalid-request").await;
            let detail = refused["detail"].as_str().unwrap_or_default();
            assert!(detail.contains(field), "{path}: {refused}");
        }
    }
    let (page, _) = history(&app, "/locks/hist-bad/history?limit=100&before=").await;
    assert_eq!(page["entries"], serde_json::json!([]));
}

/// History is bounded by `BATON_HISTORY_MAX` entries a name, and its key by
/// `BATON_HISTORY_DAYS` (a TTL); an uncontended acquire and release cost one
/// command more with it, none without (`BATON_HISTORY_MAX=0`).
#[tokio::test]
async fn history_is_bounded_and_costs_one_command_per_uncontended_cycle() {
    let redis = RedisServer::start();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.history_max = 3;
    settings.history_days = 2;
    let app = TestApp::spawn_with(settings.clone()).await;
    let on = commands_per_cycle(&redis, &app, "/locks/cycle", r#"{"ttl_ms": 60000}"#).await;
    assert_eq!(on, 9, "8 without history, and one XADD");
    let ranked = commands_per_cycle(
        &redis,
        &app,
        "/semaphores/cycle",
        r#"{"limit": 2, "ttl_ms": 60000, "priority": 3}"#,
    )
    .await;
    assert_eq!(ranked, 9);
    // Six cycles of /locks/cycle so far: three are kept.
    let (page, _) = history(&app, "/locks/cycle/history?limit=100").await;
    assert_eq!(page["entries"].as_array().unwrap().len(), 3, "{page}");
    let key = format!("{}{{lock:cycle}}:history", app.prefix);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query(&mut redis.conn())
        .expect("PTTL");
    let two_days: i64 = 2 * 86_400_000;
    // Two days after the name's last lease (and a minute, as its other keys).
    assert!(
        ttl > two_days && ttl < two_days + 300_000,
        "{key}: {ttl} ms"
    );

    settings.history_max = 0;
    settings.key_prefix = unique_prefix();
    let off = TestApp::spawn_with(settings).await;
    let without = commands_per_cycle(&redis, &off, "/locks/cycle", r#"{"ttl_ms": 60000}"#).await;
    assert_eq!(without, 8, "two FCALLs and their six commands");
    let (page, _) = history(&off, "/locks/cycle/history").await;
    assert_eq!(page["entries"], serde_json::json!([]), "{page}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*history*", off.prefix))
        .query(&mut redis.conn())
        .expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");
}
