//! The formats Redis keeps a name's leases and waiters in (`core/state.lua`)
//! grew fields (priority, when a lease was granted and how long it waited,
//! the token's name, an override reason). A rolling upgrade leaves leases
//! and waiters of the version before in Redis for a while: they are read,
//! shown, refreshed, released and served as they were.

use serde_json::Value;

use baton_testkit::{settings_for, shared_redis, unique_prefix, TestApp};

/// Redis's clock, in ms and µs.
fn redis_now(conn: &mut redis::Connection) -> (u64, u64) {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    (secs * 1000 + micros / 1000, secs * 1_000_000 + micros)
}

#[tokio::test]
async fn a_solo_lease_of_the_version_before_is_shown_refreshed_and_released() {
    let app = TestApp::spawn().await;
    let mut conn = shared_redis().conn();
    let (now_ms, now_us) = redis_now(&mut conn);
    let id = uuid::Uuid::new_v4().to_string();
    let owners = format!("{}{{lock:older-solo}}:owners", app.prefix);
    // "expires_ms|token|" then "id|tag|instance|ttl_ms|limit|weight|newest|owner".
    let solo = format!(
        "{}|{now_us}|{id}|7|0123456789abcdef|60000|1000000000|1000000000|0|ci|job 1",
        now_ms + 60_000
    );
    let _: () = redis::pipe()
        .hset_multiple(
            &owners,
            &[
                ("solo", solo),
                ("fence", now_us.to_string()),
                ("until", (now_ms + 120_000).to_string()),
            ],
        )
        .pexpire(&owners, 120_000)
        .query(&mut conn)
        .expect("plant");

    let status: Value = app.get("/locks/older-solo").await.json().await.unwrap();
    assert_eq!(status["owner"], "ci|job 1", "{status}");
    assert_eq!(status["fencing_token"], now_us, "{status}");
    let path = format!("/locks/older-solo/{id}");
    let refreshed = app.patch(&path, r#"{"ttl_ms": 50000}"#).await;
    assert_eq!(refreshed.status(), 200);
    let refreshed: Value = refreshed.json().await.unwrap();
    assert_eq!(refreshed["owner"], "ci|job 1", "{refreshed}");
    assert_eq!(app.delete(&path).await.status(), 204);
    assert_eq!(app.delete(&path).await.status(), 404);
    let lease = app.acquire_lock("older-solo", r#"{"owner": "next"}"#).await;
    assert!(lease["fencing_token"].as_u64().unwrap() > now_us, "{lease}");
}

#[tokio::test]
async fn a_lease_and_a_waiter_of_the_version_before_are_shown_released_and_served() {
    let app = TestApp::spawn().await;
    let mut conn = shared_redis().conn();
    let (now_ms, now_us) = redis_now(&mut conn);
    let key = |suffix: &str| format!("{}{{lock:older-line}}:{suffix}", app.prefix);
    let (held, waiting) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let instance = "fedcba9876543210";
    // "token|ttl_ms|limit|weight|expires_ms|full_ms|owner"
    let lease = format!(
        "{now_us}|60000|1000000000|1000000000|{}|0|holder",
        now_ms + 60_000
    );
    // "id|tag|instance|ttl_ms|limit|weight|newest|owner"
    let waiter = format!("{waiting}|9|{instance}|60000|1000000000|1000000000|0|waiter|one");
    let _: () = redis::pipe()
        .zadd(key("leases"), held.to_string(), now_ms + 60_000)
        .hset_multiple(
            key("owners"),
            &[
                (held.to_string(), lease),
                ("fence".into(), now_us.to_string()),
                ("until".into(), (now_ms + 120_000).to_string()),
                ("slow".into(), "1".into()),
                ("used".into(), "1000000000".into()),
                ("queued".into(), "1|1000000000".into()),
            ],
        )
        .zadd(key("queue"), &waiter, now_us)
        .zadd(key("byinst"), format!("{instance}|{waiter}"), 0)
        .zadd(key("instances"), instance, now_ms + 60_000)
        .pexpire(key("leases"), 120_000)
        .pexpire(key("owners"), 120_000)
        .pexpire(key("queue"), 60_000)
        .pexpire(key("byinst"), 60_000)
        .pexpire(key("instances"), 60_000)
        .query(&mut conn)
        .expect("plant");

    let status: Value = app.get("/locks/older-line").await.json().await.unwrap();
    assert_eq!(status["owner"], "holder", "{status}");
    assert_eq!(status["waiting"], 1, "{status}");
    assert_eq!(status["waiters"][0]["owner"], "waiter|one", "{status}");
    let checked = app.get(&format!("/locks/older-line/{held}")).await;
    assert_eq!(checked.status(), 200);

    // Released: the waiter of the version before is granted the lock.
    assert_eq!(
        app.delete(&format!("/locks/older-line/{held}"))
            .await
            .status(),
        204
    );
    let status: Value = app.get("/locks/older-line").await.json().await.unwrap();
    assert_eq!(status["owner"], "waiter|one", "{status}");
    assert!(
        status["fencing_token"].as_u64().unwrap() > now_us,
        "{status}"
    );
    assert_eq!(status["waiting"], 0, "{status}");
}

/// What this version writes: a solo, a lease and a waiter, each with its
/// priority, when it was granted and how long it waited (a lease), and the
/// name of the token that asked (`by`: here the variable's name).
#[tokio::test]
async fn leases_and_waiters_are_kept_in_this_version_s_format() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.api_tokens = vec!["format-token".into()];
    let app = TestApp::spawn_with(settings).await;
    let mut conn = shared_redis().conn();
    let key = |suffix: &str| format!("{}{{lock:formats}}:{suffix}", app.prefix);
    let post = |body: &'static str| {
        app.client
            .post(format!("{}/locks/formats", app.base))
            .bearer_auth("format-token")
            .body(body)
            .send()
    };
    let (before_ms, _) = redis_now(&mut conn);
    let first: Value = post(r#"{"shared": true, "owner": "a|b"}"#)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (after_ms, _) = redis_now(&mut conn);
    let id = first["id"].as_str().unwrap();
    let solo: String = redis::cmd("HGET")
        .arg(key("owners"))
        .arg("solo")
        .query(&mut conn)
        .unwrap();
    let fields: Vec<&str> = solo.splitn(13, '|').collect();
    assert_eq!(fields[1], first["fencing_token"].to_string(), "{solo}");
    let acquired: u64 = fields[2].parse().unwrap();
    assert!((before_ms..=after_ms).contains(&acquired), "{solo}");
    assert_eq!(fields[3], "0", "waited: {solo}");
    assert_eq!(fields[4], id, "{solo}");
    assert_eq!(
        &fields[7..],
        [
            "30000",
            "1000000000",
            "1",
            "0",
            "0",
            "a|b\nBATON_API_TOKENS\n"
        ],
        "{solo}"
    );

    // A second shared lease moves the first into leases.
    let second = post(r#"{"shared": true}"#).await.unwrap();
    assert_eq!(second.status(), 201);
    let lease: String = redis::cmd("HGET")
        .arg(key("owners"))
        .arg(id)
        .query(&mut conn)
        .unwrap();
    let fields: Vec<&str> = lease.splitn(10, '|').collect();
    assert_eq!(fields[0], first["fencing_token"].to_string(), "{lease}");
    assert_eq!(fields[6], acquired.to_string(), "{lease}");
    assert_eq!(
        &fields[7..],
        ["0", "0", "a|b\nBATON_API_TOKENS\n"],
        "{lease}"
    );

    // A writer waits behind them.
    let waiter = post(r#"{"wait_ms": 10000, "owner": "w"}"#);
    let waiter = tokio::spawn(waiter);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let queued = loop {
        let line: Vec<String> = redis::cmd("ZRANGE")
            .arg(key("queue"))
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .unwrap();
        if let Some(waiter) = line.into_iter().next() {
            break waiter;
        }
        assert!(std::time::Instant::now() < deadline, "nobody joined");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let fields: Vec<&str> = queued.splitn(9, '|').collect();
    assert_eq!(
        &fields[3..],
        [
            "30000",
            "1000000000",
            "1000000000",
            "0",
            "0",
            "w\nBATON_API_TOKENS\n"
        ],
        "{queued}"
    );
    waiter.abort();
}
