//! Paged listings of locks and semaphores, and semaphore force-release.

use std::collections::HashSet;

use serde_json::Value;

use baton_testkit::{problem, settings_for, shared_redis, unique_prefix, RedisServer, TestApp};

/// Every page of `path` (which has a `?`), following `next_cursor`; the pages.
async fn pages(app: &TestApp, path: &str, key: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}&cursor={c}"),
            None => path.to_owned(),
        };
        let response = app.get(&url).await;
        assert_eq!(response.status(), 200, "{url}");
        let body: Value = response.json().await.unwrap();
        let names: Vec<String> = body[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect();
        pages.push(names);
        match body.get("next_cursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => return pages,
        }
        assert!(pages.len() < 100, "the pages never end");
    }
}

fn check_pages(pages: &[Vec<String>], limit: usize, expected: &HashSet<String>) {
    let mut seen = HashSet::new();
    for page in pages {
        assert!(page.len() <= limit, "a page of {}", page.len());
        let mut sorted = page.clone();
        sorted.sort();
        assert_eq!(&sorted, page, "a page sorted by name");
        for name in page {
            assert!(seen.insert(name.clone()), "{name} listed twice");
        }
    }
    assert_eq!(&seen, expected);
}

#[tokio::test]
async fn two_hundred_fifty_locks_come_back_in_pages_of_100_each_once() {
    let app = TestApp::spawn().await;
    let mut expected = HashSet::new();
    let mut acquires = Vec::new();
    for i in 0..250 {
        let name = format!("page/{i:03}");
        expected.insert(name.clone());
        let app = &app;
        acquires.push(async move {
            app.post(&format!("/locks/page%2F{i:03}"), r#"{"ttl_ms": 600000}"#)
                .await
        });
    }
    for response in futures_util::future::join_all(acquires).await {
        assert_eq!(response.status(), 201);
    }
    app.post("/locks/other", "").await;

    let pages = pages(&app, "/locks?prefix=page%2F", "locks").await;

    assert!(pages.len() >= 3, "{} pages", pages.len());
    assert_eq!(pages[0].len(), 100, "the first page is full");
    check_pages(&pages, 100, &expected);
    // The default page size is 100 too, and the other lock is there.
    let first: Value = app.get("/locks").await.json().await.unwrap();
    assert_eq!(first["locks"].as_array().unwrap().len(), 100);
    assert!(first["next_cursor"].is_string());
    let small = pages_of(&app, "/locks?prefix=page%2F&limit=7").await;
    check_pages(&small, 7, &expected);
}

async fn pages_of(app: &TestApp, path: &str) -> Vec<Vec<String>> {
    pages(app, path, "locks").await
}

#[tokio::test]
async fn a_prefix_with_glob_characters_matches_only_itself() {
    let app = TestApp::spawn().await;
    for name in ["a*1", "a*2", "ab", "a?", "a[b]", "a\\x"] {
        app.post(&format!("/locks/{}", percent(name)), "").await;
    }
    let names = |prefix: &'static str| {
        let app = &app;
        async move {
            let body: Value = app
                .get(&format!("/locks?prefix={}", percent(prefix)))
                .await
                .json()
                .await
                .unwrap();
            body["locks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("a*").await, ["a*1", "a*2"]);
    assert_eq!(names("a?").await, ["a?"]);
    assert_eq!(names("a[").await, ["a[b]"]);
    assert_eq!(names("a\\").await, ["a\\x"]);
}

fn percent(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn bad_prefix_limit_or_cursor_is_400_naming_it() {
    let app = TestApp::spawn().await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=1e3", "limit"),
        ("limit=-1", "limit"),
        ("cursor=abc", "cursor"),
        ("cursor=1.zz", "cursor"),
        ("prefix=a%0A", "prefix"),
    ] {
        for list in ["/locks", "/semaphores"] {
            let body = problem(
                app.get(&format!("{list}?{query}")).await,
                400,
                "invalid-request",
            )
            .await;
            assert!(
                body["detail"].as_str().unwrap().contains(field),
                "{list}?{query}: {body}"
            );
        }
    }
    assert_eq!(app.get("/locks?limit=1000").await.status(), 200);
}

#[tokio::test]
async fn semaphores_with_holders_are_listed_by_prefix_in_pages() {
    let app = TestApp::spawn().await;
    let mut expected = HashSet::new();
    for i in 0..25 {
        let name = format!("pool/{i:02}");
        expected.insert(name.clone());
        let path = format!("/semaphores/pool%2F{i:02}");
        for _ in 0..2 {
            let response = app.post(&path, r#"{"limit": 3, "owner": "w"}"#).await;
            assert_eq!(response.status(), 201);
        }
    }
    let lease: Value = app
        .post("/semaphores/pool%2Fgone", r#"{"limit": 1}"#)
        .await
        .json()
        .await
        .unwrap();
    let id = lease["id"].as_str().unwrap();
    app.delete(&format!("/semaphores/pool%2Fgone/{id}")).await;
    app.post("/semaphores/elsewhere", r#"{"limit": 1}"#).await;

    let pages = pages(&app, "/semaphores?prefix=pool%2F&limit=10", "semaphores").await;

    check_pages(&pages, 10, &expected);
    let first: Value = app
        .get("/semaphores?prefix=pool%2F&limit=1")
        .await
        .json()
        .await
        .unwrap();
    let entry = &first["semaphores"][0];
    assert_eq!(entry["holders"], 2, "{first}");
    assert_eq!(entry["limit"], 3);
    assert_eq!(entry["leases"][0]["owner"], "w");
    assert!(entry["leases"][0].get("id").is_none());
}

#[tokio::test]
async fn listings_show_shared_holders_and_permits_as_the_status_does() {
    let app = TestApp::spawn().await;
    for owner in ["reader-1", "reader-2"] {
        let body = format!(r#"{{"shared": true, "owner": "{owner}", "ttl_ms": 60000}}"#);
        assert_eq!(app.post("/locks/mixed%2Fdocs", &body).await.status(), 201);
    }
    app.acquire_lock("mixed%2Fdeploy", r#"{"owner": "writer", "ttl_ms": 60000}"#)
        .await;
    let _writer_2 = app.post_in_background(
        "/locks/mixed%2Fdocs",
        r#"{"owner": "writer-2", "wait_ms": 20000}"#,
    );
    for (owner, permits) in [("big", 3), ("small", 1)] {
        let body = format!(r#"{{"limit": 5, "permits": {permits}, "owner": "{owner}"}}"#);
        assert_eq!(
            app.post("/semaphores/mixed%2Fpool", &body).await.status(),
            201
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while baton_testkit::waiting(&app, "/locks/mixed%2Fdocs").await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never queued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let locks: Value = app
        .get("/locks?prefix=mixed%2F")
        .await
        .json()
        .await
        .unwrap();
    let semaphores: Value = app
        .get("/semaphores?prefix=mixed%2F")
        .await
        .json()
        .await
        .unwrap();

    let deploy = &locks["locks"][0];
    assert_eq!(deploy["name"], "mixed/deploy", "{locks}");
    assert_eq!(deploy["mode"], "exclusive");
    assert_eq!(
        (&deploy["owner"], &deploy["holders"]),
        (&"writer".into(), &1.into())
    );
    assert_eq!(deploy["leases"][0]["shared"], false);
    let docs = &locks["locks"][1];
    assert_eq!(docs["name"], "mixed/docs", "{locks}");
    assert_eq!(
        (&docs["mode"], &docs["holders"]),
        (&"shared".into(), &2.into())
    );
    let readers: Vec<(&Value, &Value)> = docs["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (&l["owner"], &l["shared"]))
        .collect();
    assert_eq!(
        readers,
        [
            (&"reader-1".into(), &true.into()),
            (&"reader-2".into(), &true.into())
        ]
    );
    assert!(
        docs.get("owner").is_none(),
        "a shared lock has no one holder: {docs}"
    );
    assert_eq!(docs["waiting"], 1);
    assert_eq!(docs["waiters"][0]["owner"], "writer-2");
    let pool = &semaphores["semaphores"][0];
    assert_eq!(pool["name"], "mixed/pool", "{semaphores}");
    assert_eq!(
        (&pool["holders"], &pool["used"], &pool["limit"]),
        (&2.into(), &4.into(), &5.into())
    );
    let permits: Vec<&Value> = pool["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["permits"])
        .collect();
    assert_eq!(permits, [&Value::from(3), &Value::from(1)]);
    // Each entry is the status of its name.
    for (list, path) in [
        (deploy, "/locks/mixed%2Fdeploy"),
        (docs, "/locks/mixed%2Fdocs"),
        (pool, "/semaphores/mixed%2Fpool"),
    ] {
        let status: Value = app.get(path).await.json().await.unwrap();
        for field in ["mode", "holders", "used", "limit", "waiting"] {
            assert_eq!(list.get(field), status.get(field), "{field} of {path}");
        }
    }
}

#[tokio::test]
async fn force_releasing_a_semaphore_frees_every_slot_and_wakes_a_waiter() {
    let app = TestApp::spawn().await;
    let mut leases = Vec::new();
    for _ in 0..2 {
        let lease: Value = app
            .post(
                "/semaphores/stuck%2Fpool",
                r#"{"limit": 2, "ttl_ms": 600000}"#,
            )
            .await
            .json()
            .await
            .unwrap();
        leases.push(lease);
    }
    let waiter = app.post_in_background(
        "/semaphores/stuck%2Fpool",
        r#"{"limit": 2, "wait_ms": 10000}"#,
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let started = std::time::Instant::now();
    assert_eq!(app.delete("/semaphores/stuck%2Fpool").await.status(), 204);

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    assert!(answer.at.duration_since(started) < std::time::Duration::from_secs(2));
    for lease in &leases {
        let id = lease["id"].as_str().unwrap();
        let path = format!("/semaphores/stuck%2Fpool/{id}");
        problem(app.patch(&path, "").await, 404, "lease-not-found").await;
    }
    let status: Value = app
        .get("/semaphores/stuck%2Fpool")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(status["holders"], 1, "only the woken waiter: {status}");
    let waiter_lease: Value = answer.response.json().await.unwrap();
    let id = waiter_lease["id"].as_str().unwrap();
    app.delete(&format!("/semaphores/stuck%2Fpool/{id}")).await;
    problem(
        app.delete("/semaphores/stuck%2Fpool").await,
        404,
        "semaphore-not-held",
    )
    .await;
    problem(
        app.delete("/semaphores/never-used").await,
        404,
        "semaphore-not-held",
    )
    .await;
}

#[tokio::test]
async fn force_releasing_a_semaphore_needs_an_admin_token_when_tokens_are_set() {
    let mut settings =
        baton_testkit::settings_for(&shared_redis().url(), &baton_testkit::unique_prefix());
    settings.api_tokens = vec!["user-token".into()];
    settings.admin_tokens = vec!["admin-token".into()];
    let app = TestApp::spawn_with(settings).await;
    let send = |method: reqwest::Method, path: &str, token: Option<&str>| {
        let mut req = app.client.request(method, format!("{}{path}", app.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        req.body(r#"{"limit": 1}"#).send()
    };
    assert_eq!(
        send(
            reqwest::Method::POST,
            "/semaphores/admin",
            Some("user-token")
        )
        .await
        .unwrap()
        .status(),
        201
    );
    problem(
        send(reqwest::Method::DELETE, "/semaphores/admin", None)
            .await
            .unwrap(),
        401,
        "unauthorized",
    )
    .await;
    problem(
        send(
            reqwest::Method::DELETE,
            "/semaphores/admin",
            Some("user-token"),
        )
        .await
        .unwrap(),
        403,
        "forbidden",
    )
    .await;
    assert_eq!(
        send(
            reqwest::Method::DELETE,
            "/semaphores/admin",
            Some("admin-token")
        )
        .await
        .unwrap()
        .status(),
        204
    );
}

#[tokio::test]
async fn the_service_serves_its_own_with_lock_launcher() {
    let app = TestApp::spawn().await;
    let response = app.get("/with-lock").await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/x-shellscript"),
        "{content_type}"
    );
    let body = response.text().await.unwrap();
    let file =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/with-lock")).unwrap();
    assert_eq!(body, file);
    assert!(body.starts_with("#!/bin/sh"));
}

#[tokio::test]
async fn the_service_serves_its_own_binary_and_its_sha256() {
    use sha2::{Digest, Sha256};
    let app = TestApp::spawn().await;

    let sum = app.get("/baton.sha256").await;
    assert_eq!(sum.status(), 200);
    let sum = sum.text().await.unwrap();
    let binary = app.get("/baton").await;
    assert_eq!(binary.status(), 200);
    assert_eq!(binary.headers()["content-type"], "application/octet-stream");
    let bytes = binary.bytes().await.unwrap();

    // The running binary (here: this test's), byte for byte, and its checksum
    // as `sha256sum -c` reads it.
    let running = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(
        bytes.as_ref() == running.as_slice(),
        "not the running binary"
    );
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sum, format!("{hex}  baton\n"));
    // Open to everyone, like /with-lock: no token is needed.
    let mut settings = baton_testkit::settings_for(
        &baton_testkit::shared_redis().url(),
        &baton_testkit::unique_prefix(),
    );
    settings.api_tokens = vec!["api-token".into()];
    let guarded = TestApp::spawn_with(settings).await;
    assert_eq!(guarded.get("/baton.sha256").await.status(), 200);
    assert_eq!(guarded.get("/baton").await.status(), 200);
}

#[tokio::test]
async fn on_a_cluster_the_pages_walk_every_master_and_list_each_lock_once() {
    let settings =
        baton_testkit::topology::cluster_settings(baton_testkit::topology::shared_cluster());
    let app = TestApp::spawn_with(settings).await;
    let mut expected = HashSet::new();
    for i in 0..60 {
        // Different hash tags: the names spread over the masters.
        let name = format!("spread/{i:02}");
        expected.insert(name.clone());
        let response = app.post(&format!("/locks/spread%2F{i:02}"), "").await;
        assert_eq!(response.status(), 201);
    }

    let pages = pages(&app, "/locks?prefix=spread%2F&limit=25", "locks").await;

    check_pages(&pages, 25, &expected);
}

/// The status of a semaphore with 10,000 holders lists the 100 leases that
/// expire first, and no call it makes is slow for Redis: the SLOWLOG of a
/// Redis of the test's own (threshold 10 ms) stays empty. The 100 that expire
/// first (a shorter TTL) are spread over the order of granting, so neither
/// the first nor the last 100 granted are they.
#[tokio::test]
async fn status_of_ten_thousand_holders_lists_the_hundred_that_expire_first_and_is_never_slow() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let app = std::sync::Arc::new(app);
    let holders = 10_000;
    // One holder in a hundred, from the 38th granted to the 9,938th.
    let expires_first = |i: usize| i % 100 == 37;
    let early: HashSet<String> = (0..holders)
        .filter(|&i| expires_first(i))
        .map(|i| format!("h{i}"))
        .collect();
    assert_eq!(early.len(), 100);
    let tasks: Vec<_> = (0..16)
        .map(|worker| {
            let app = app.clone();
            tokio::spawn(async move {
                for i in (worker..holders).step_by(16) {
                    let ttl = if expires_first(i) { 300_000 } else { 600_000 };
                    let body =
                        format!(r#"{{"limit": {holders}, "owner": "h{i}", "ttl_ms": {ttl}}}"#);
                    let response = app.post("/semaphores/crowd", &body).await;
                    assert_eq!(response.status(), 201, "holder {i}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut conn = redis.conn();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(10_000)
        .query::<()>(&mut conn)
        .unwrap();
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query::<()>(&mut conn)
        .unwrap();

    for _ in 0..20 {
        let status: Value = app.get("/semaphores/crowd").await.json().await.unwrap();
        assert_eq!(status["holders"], holders, "{}", status["holders"]);
        let leases = status["leases"].as_array().unwrap();
        assert_eq!(leases.len(), 100);
        let listed: HashSet<String> = leases
            .iter()
            .map(|l| l["owner"].as_str().expect("owner").to_owned())
            .collect();
        assert_eq!(listed, early, "the 100 that expire first");
        for lease in leases {
            let left = lease["expires_in_ms"].as_u64().expect("expires_in_ms");
            assert!(left <= 300_000, "{lease}");
        }
    }

    let slow: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(10)
        .query(&mut conn)
        .unwrap();
    assert!(slow.is_empty(), "slow calls: {slow:?}");
}
