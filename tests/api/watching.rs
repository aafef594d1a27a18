//! Watching: `GET /events` (server-sent change events from every instance),
//! its cap and its auth, and the dashboard at `GET /`.

use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::events::{open_events, SseEvent, SseStream};
use baton_testkit::{problem, settings_for, shared_redis, unique_prefix, BatonProcess, TestApp};

/// Publishes `event` on the app's events channel, as a script would.
fn publish(app: &TestApp, event: &Value) {
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg(format!("{}events", app.prefix))
        .arg(event.to_string())
        .query(&mut shared_redis().conn())
        .expect("PUBLISH");
    assert!(
        receivers >= 1,
        "the app is subscribed to its events channel"
    );
}

#[tokio::test]
async fn events_relays_published_changes_under_its_prefix_without_lease_ids() {
    let app = TestApp::spawn().await;
    let mut stream = SseStream::new(open_events(&app, "deploy-", None).await);

    publish(
        &app,
        &serde_json::json!({"event": "acquired", "kind": "lock", "name": "other", "waiting": 0}),
    );
    publish(
        &app,
        &serde_json::json!({"event": "force-released", "kind": "lock", "name": "deploy-prod",
            "owner": "ci", "fencing_token": "1763780000000001", "waiting": 1,
            "id": "5f0c6f5e-8d8e-4b7a-9c55-2f1f0e7d9a31"}),
    );
    publish(
        &app,
        &serde_json::json!({"event": "queued", "kind": "semaphore", "name": "deploy-workers",
            "holders": 3, "waiting": 2}),
    );

    let first = stream
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(first.name, "force-released", "other prefixes are left out");
    assert_eq!(
        first.data,
        serde_json::json!({"kind": "lock", "name": "deploy-prod", "owner": "ci",
            "fencing_token": 1_763_780_000_000_001_u64, "waiting": 1})
    );
    assert!(
        !first.raw.contains("5f0c6f5e"),
        "no lease id: {}",
        first.raw
    );
    let second = stream
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(second.name, "queued");
    assert_eq!(second.data["kind"], "semaphore");
    assert_eq!(second.data["holders"], 3);
}

/// Every member an event may carry: nothing else (a lease id above all).
const EVENT_MEMBERS: [&str; 6] = [
    "kind",
    "name",
    "owner",
    "fencing_token",
    "holders",
    "waiting",
];

fn assert_no_lease_id(event: &SseEvent, ids: &[String]) {
    for key in event
        .data
        .as_object()
        .expect("event data is an object")
        .keys()
    {
        assert!(
            EVENT_MEMBERS.contains(&key.as_str()),
            "unexpected member {key} in {}",
            event.raw
        );
    }
    for id in ids {
        assert!(
            !event.raw.contains(id.as_str()),
            "lease id in {}",
            event.raw
        );
    }
}

/// The next event named `name` within `limit`, checking every event on the way.
async fn expect_event(
    stream: &mut SseStream,
    name: &str,
    limit: Duration,
    ids: &[String],
) -> SseEvent {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = stream
            .next_within(left)
            .await
            .unwrap_or_else(|| panic!("no `{name}` event within {limit:?}"));
        assert_no_lease_id(&event, ids);
        if event.name == name {
            return event;
        }
    }
}

#[tokio::test]
async fn events_show_changes_made_on_another_instance_within_a_second() {
    let watcher = TestApp::spawn().await;
    let actor = watcher.sibling_of(&shared_redis().url()).await;
    let mut stream = SseStream::new(open_events(&watcher, "x-", None).await);
    let second = Duration::from_secs(1);
    let mut ids = Vec::new();

    let started = Instant::now();
    let lease = actor
        .acquire_lock(
            "x-deploy",
            r#"{"owner": "https://ci.example.com/jobs/1", "ttl_ms": 60000}"#,
        )
        .await;
    ids.push(lease["id"].as_str().unwrap().to_owned());
    let acquired = expect_event(&mut stream, "acquired", second, &ids).await;
    assert!(started.elapsed() < second);
    assert_eq!(acquired.data["kind"], "lock");
    assert_eq!(acquired.data["name"], "x-deploy");
    assert_eq!(acquired.data["owner"], "https://ci.example.com/jobs/1");
    assert_eq!(acquired.data["fencing_token"], lease["fencing_token"]);

    let waiter = actor.post_in_background(
        "/locks/x-deploy",
        r#"{"owner": "second", "wait_ms": 10000, "ttl_ms": 60000}"#,
    );
    let queued = expect_event(&mut stream, "queued", second, &ids).await;
    assert_eq!(queued.data["waiting"], 1);

    let refreshed = actor
        .patch(&baton_testkit::lease_path("locks", &lease), "{}")
        .await;
    assert_eq!(refreshed.status(), 200);
    expect_event(&mut stream, "refreshed", second, &ids).await;

    let released = Instant::now();
    assert_eq!(
        actor
            .delete(&baton_testkit::lease_path("locks", &lease))
            .await
            .status(),
        204
    );
    let event = expect_event(&mut stream, "released", second, &ids).await;
    assert!(released.elapsed() < second, "{:?}", released.elapsed());
    assert_eq!(event.data["name"], "x-deploy");
    let handed = expect_event(&mut stream, "acquired", second, &ids).await;
    assert_eq!(handed.data["owner"], "second");
    let second_lease: Value = waiter.await.unwrap().response.json().await.unwrap();
    ids.push(second_lease["id"].as_str().unwrap().to_owned());
    assert_eq!(handed.data["fencing_token"], second_lease["fencing_token"]);

    assert_eq!(actor.delete("/locks/x-deploy").await.status(), 204);
    let forced = expect_event(&mut stream, "force-released", second, &ids).await;
    assert_eq!(forced.data["waiting"], 0);

    let slot = actor
        .post("/semaphores/x-workers", r#"{"limit": 2, "owner": "w1"}"#)
        .await
        .json::<Value>()
        .await
        .unwrap();
    ids.push(slot["id"].as_str().unwrap().to_owned());
    let sem = expect_event(&mut stream, "acquired", second, &ids).await;
    assert_eq!(sem.data["kind"], "semaphore");
    assert_eq!(sem.data["holders"], 1);
    assert_eq!(
        actor
            .delete(&baton_testkit::lease_path("semaphores", &slot))
            .await
            .status(),
        204
    );
    let gone = expect_event(&mut stream, "released", second, &ids).await;
    assert_eq!(gone.data["holders"], 0);

    // Another prefix's changes stay out of this stream.
    actor.acquire_lock("y-other", "{}").await;
    let late = stream.next_within(Duration::from_millis(300)).await;
    assert!(late.is_none(), "{late:?}");
}

/// The events channel's subscribers (PSUBSCRIBE does not count).
fn events_subscribers(app: &TestApp) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("{}events", app.prefix))
        .query(&mut shared_redis().conn())
        .expect("PUBSUB NUMSUB");
    reply.1
}

#[tokio::test]
async fn changes_are_published_only_while_an_instance_listens() {
    use futures_util::StreamExt;
    let app = TestApp::spawn().await;
    let other = app.sibling_of(&shared_redis().url()).await;
    assert_eq!(
        events_subscribers(&app),
        0,
        "nobody watches: no subscription"
    );
    // A pattern subscription sees what is published without counting as a
    // listener, as PUBSUB NUMSUB (what the scripts ask) counts them.
    let client = redis::Client::open(shared_redis().url()).unwrap();
    let mut spy = client.get_async_pubsub().await.unwrap();
    spy.psubscribe(format!("{}events", app.prefix))
        .await
        .unwrap();
    let mut heard = spy.on_message();

    let lease = other.acquire_lock("quiet", "{}").await;
    let path = baton_testkit::lease_path("locks", &lease);
    assert_eq!(other.delete(&path).await.status(), 204);
    let nothing = tokio::time::timeout(Duration::from_millis(300), heard.next()).await;
    assert!(nothing.is_err(), "published with nobody listening");

    // One watcher on one instance: every instance's scripts publish.
    let mut stream = SseStream::new(open_events(&app, "", None).await);
    assert_eq!(events_subscribers(&app), 1, "one subscription per instance");
    let lease = other.acquire_lock("loud", "{}").await;
    let message = tokio::time::timeout(Duration::from_secs(2), heard.next())
        .await
        .expect("published once someone listens")
        .expect("a message");
    let payload: Value = serde_json::from_slice(message.get_payload_bytes()).unwrap();
    assert_eq!(payload["event"], "acquired");
    assert_eq!(payload["name"], "loud");
    let seen = expect_event(&mut stream, "acquired", Duration::from_secs(2), &[]).await;
    assert_eq!(seen.data["fencing_token"], lease["fencing_token"]);
}

/// Sends an acquisition that asks for progress; returns its event stream.
async fn acquire_with_progress(app: &TestApp, path: &str, body: &str) -> SseStream {
    let response = app
        .client
        .post(format!("{}{path}", app.base))
        .header("accept", "text/event-stream")
        .body(body.to_owned())
        .send()
        .await
        .expect("request sent");
    SseStream::new(response)
}

#[tokio::test]
async fn waiting_with_progress_reports_the_line_as_it_moves_then_the_lease() {
    let app = TestApp::spawn().await;
    let first = app
        .acquire_lock("p", r#"{"owner": "first", "ttl_ms": 60000}"#)
        .await;
    let second = app.post_in_background("/locks/p", r#"{"owner": "second", "wait_ms": 10000}"#);
    // `second` joins the line first.
    let deadline = Instant::now() + Duration::from_secs(2);
    while app.get("/locks/p").await.json::<Value>().await.unwrap()["waiting"] != 1 {
        assert!(Instant::now() < deadline, "the plain waiter joins the line");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut stream =
        acquire_with_progress(&app, "/locks/p", r#"{"owner": "third", "wait_ms": 10000}"#).await;

    let joined = stream
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(joined.name, "queued", "{joined:?}");
    assert_eq!(joined.data["position"], 2);
    assert_eq!(joined.data["waiting"], 2);
    let holders = joined.data["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0]["owner"], "first");
    assert!(holders[0]["expires_in_ms"].as_u64().unwrap() > 50_000);

    assert_eq!(
        app.delete(&baton_testkit::lease_path("locks", &first))
            .await
            .status(),
        204
    );
    let moved = stream
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(moved.name, "queued", "{moved:?}");
    assert_eq!(moved.data["position"], 1);
    assert_eq!(moved.data["waiting"], 1);
    assert_eq!(moved.data["holders"][0]["owner"], "second");
    let second: Value = second.await.unwrap().response.json().await.unwrap();

    assert_eq!(
        app.delete(&baton_testkit::lease_path("locks", &second))
            .await
            .status(),
        204
    );
    let last = stream
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(last.name, "acquired", "{last:?}");
    let lease = last.data;
    assert_eq!(lease["name"], "p");
    assert_eq!(lease["owner"], "third");
    assert!(lease["fencing_token"].as_u64().unwrap() > second["fencing_token"].as_u64().unwrap());
    // Exactly one final event, then the end.
    assert!(stream.ends_within(Duration::from_secs(2)).await);

    // The lease is usable.
    let path = baton_testkit::lease_path("locks", &lease);
    assert_eq!(app.get(&path).await.status(), 200);
    assert_eq!(app.patch(&path, r#"{"ttl_ms": 5000}"#).await.status(), 200);
    assert_eq!(app.delete(&path).await.status(), 204);
}

#[tokio::test]
async fn waiting_with_progress_ends_with_a_problem_at_the_timeout() {
    let app = TestApp::spawn().await;
    app.acquire_lock("busy", r#"{"owner": "holder", "ttl_ms": 60000}"#)
        .await;
    let mut stream = acquire_with_progress(&app, "/locks/busy", r#"{"wait_ms": 400}"#).await;
    let queued = stream
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(queued.name, "queued");
    let last = stream
        .next_within(Duration::from_secs(3))
        .await
        .expect("an event");
    assert_eq!(last.name, "problem", "{last:?}");
    assert!(last.data["type"]
        .as_str()
        .unwrap()
        .ends_with("/problems/lock-held"));
    assert_eq!(last.data["status"], 409);
    assert_eq!(last.data["owner"], "holder");
    assert!(stream.ends_within(Duration::from_secs(2)).await);
    let status: Value = app.get("/locks/busy").await.json().await.unwrap();
    assert_eq!(status["waiting"], 0, "the line is empty again");
}

#[tokio::test]
async fn a_semaphore_waits_with_progress_too_and_a_free_slot_answers_at_once() {
    let app = TestApp::spawn().await;
    let mut at_once =
        acquire_with_progress(&app, "/semaphores/s", r#"{"limit": 1, "wait_ms": 5000}"#).await;
    let first = at_once
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(first.name, "acquired", "a free slot: no queued event");
    let mut waiting = acquire_with_progress(
        &app,
        "/semaphores/s",
        r#"{"limit": 1, "wait_ms": 5000, "owner": "w"}"#,
    )
    .await;
    let queued = waiting
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(queued.name, "queued");
    assert_eq!(queued.data["position"], 1);
    assert_eq!(
        app.delete(&baton_testkit::lease_path("semaphores", &first.data))
            .await
            .status(),
        204
    );
    let got = waiting
        .next_within(Duration::from_secs(2))
        .await
        .expect("an event");
    assert_eq!(got.name, "acquired");
    assert_eq!(got.data["limit"], 1);
    assert_eq!(got.data["owner"], "w");
}

#[tokio::test]
async fn a_client_waiting_with_progress_that_disconnects_leaves_the_line() {
    let app = TestApp::spawn().await;
    let holder = app.acquire_lock("gone", r#"{"ttl_ms": 60000}"#).await;
    let mut stream = acquire_with_progress(&app, "/locks/gone", r#"{"wait_ms": 60000}"#).await;
    assert_eq!(
        stream
            .next_within(Duration::from_secs(2))
            .await
            .expect("an event")
            .name,
        "queued"
    );
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status: Value = app.get("/locks/gone").await.json().await.unwrap();
        if status["waiting"] == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waiter left the line within 5 s: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.delete(&baton_testkit::lease_path("locks", &holder))
            .await
            .status(),
        204
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status: Value = app.get("/locks/gone").await.json().await.unwrap();
    assert_eq!(status["held"], false, "nobody got the lock: {status}");
}

#[tokio::test]
async fn events_are_capped_per_instance_with_a_clear_problem() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.max_event_streams = 2;
    let app = TestApp::spawn_with(settings).await;

    let first = SseStream::new(open_events(&app, "", None).await);
    let _second = SseStream::new(open_events(&app, "a", None).await);
    let refused = open_events(&app, "", None).await;
    assert!(refused.headers().contains_key("retry-after"));
    let body = problem(refused, 503, "too-many-streams").await;
    assert!(
        body["detail"].as_str().unwrap().contains('2'),
        "the detail names the cap: {body}"
    );

    drop(first);
    // The server notices the closed stream at its next write; keep-alives
    // come every 15 s, so wait for the count to drop by retrying.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let again = open_events(&app, "", None).await;
        if again.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "a closed stream frees its place");
        drop(again);
        // Any published event makes the server write, and so notice the close.
        publish(
            &app,
            &serde_json::json!({"event": "released", "kind": "lock", "name": "x", "waiting": 0}),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn events_need_a_token_when_the_api_has_tokens() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.api_tokens = vec!["user-token".into()];
    let app = TestApp::spawn_with(settings).await;

    problem(open_events(&app, "", None).await, 401, "unauthorized").await;
    problem(
        open_events(&app, "", Some("nope")).await,
        401,
        "unauthorized",
    )
    .await;
    let mut stream = SseStream::new(open_events(&app, "", Some("user-token")).await);
    publish(
        &app,
        &serde_json::json!({"event": "released", "kind": "lock", "name": "n", "waiting": 0}),
    );
    let event = stream.next_within(Duration::from_secs(2)).await;
    assert_eq!(event.map(|e| e.name).as_deref(), Some("released"));
}

#[tokio::test]
async fn an_idle_event_stream_gets_a_keep_alive_comment_every_15_s() {
    let app = TestApp::spawn().await;
    let mut stream = SseStream::new(open_events(&app, "", None).await);
    let started = Instant::now();
    assert!(
        stream.next_within(Duration::from_secs(16)).await.is_none(),
        "no event on an idle stream"
    );
    assert_eq!(stream.comments, 1, "one keep-alive comment in 16 s");
    assert!(started.elapsed() >= Duration::from_secs(15));
}

#[tokio::test]
async fn a_bad_prefix_is_refused() {
    let app = TestApp::spawn().await;
    // A control character: no name can have one.
    let body = problem(
        open_events(&app, "a%01", None).await,
        400,
        "invalid-request",
    )
    .await;
    assert!(body["detail"].as_str().unwrap().starts_with("prefix"));
}

#[tokio::test]
async fn event_streams_end_cleanly_at_shutdown() {
    let mut app = TestApp::spawn().await;
    let mut stream = SseStream::new(open_events(&app, "", None).await);
    let started = Instant::now();
    app.shutdown().await.expect("clean shutdown");
    assert!(
        stream.ends_within(Duration::from_secs(2)).await,
        "the stream ends"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "shutdown does not wait for open streams: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_dashboard_is_served_by_the_service_alone() {
    let app = TestApp::spawn().await;
    let response = app.get("/").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/html; charset=utf-8")
    );
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    let page = response.text().await.unwrap();
    assert!(page.contains("href=\"docs\""), "links Swagger UI");
    for foreign in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!page.contains(foreign), "the page loads {foreign}…");
    }
    // The token never goes into a URL: /events is read with fetch() and a header.
    assert!(page.contains("Authorization"));
    assert!(!page.contains("EventSource("));

    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    let description = doc["info"]["description"].as_str().unwrap();
    assert!(description.contains("[dashboard](../)"), "{description}");
    assert!(doc["paths"]["/events"]["get"].is_object());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Figures for the report, not a check: the memory that 1,000 open event
/// streams cost a baton process, and how long a change takes to reach them.
/// Run with `cargo test --test api measure_event_streams -- --ignored --nocapture`
/// (it uses the binary of the same profile: add `--release` for release figures).
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn measure_event_streams() {
    const STREAMS: usize = 1000;
    let prefix = unique_prefix();
    let baton = BatonProcess::start(&prefix, &[("BATON_MAX_EVENT_STREAMS", "5000")]).await;
    let app = TestApp::spawn_with(settings_for(&shared_redis().url(), &prefix)).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let open = |prefix: &'static str| {
        let client = client.clone();
        let url = format!("{}/events?prefix={prefix}", baton.base);
        async move { SseStream::new(client.get(url).send().await.expect("stream opens")) }
    };
    // Warm up: the first stream and request allocate what every later one reuses.
    drop(open("").await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = baton.rss_kib();

    let mut streams = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        streams.push(open("m-").await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = baton.rss_kib();
    println!(
        "{STREAMS} open event streams: RSS {before} KiB -> {after} KiB, +{} KiB ({:.1} KiB a stream)",
        after - before,
        (after - before) as f64 / STREAMS as f64
    );

    // Fan-out: one change published (as a script does) until every stream has it.
    let mut fan_out = Vec::new();
    for round in 0..20 {
        let sent = Instant::now();
        publish(
            &app,
            &serde_json::json!({"event": "released", "kind": "lock", "name": format!("m-{round}"), "waiting": 0}),
        );
        let mut last = Duration::ZERO;
        for stream in &mut streams {
            let event = stream
                .next_within(Duration::from_secs(5))
                .await
                .expect("every stream gets the event");
            assert_eq!(event.data["name"], format!("m-{round}"));
            last = last.max(sent.elapsed());
        }
        fan_out.push(last);
    }
    fan_out.sort();
    println!(
        "PUBLISH -> event read on all {STREAMS} streams: median {:?}, max {:?}",
        percentile(&fan_out, 0.5),
        fan_out[fan_out.len() - 1]
    );
    drop(streams);

    // A release through the API until its event arrives, on one stream.
    let mut stream = open("m-").await;
    let mut delays = Vec::new();
    for round in 0..50 {
        let name = format!("m-release-{round}");
        let lease = app.acquire_lock(&name, "{}").await;
        // Skip the acquisition's own event, if scripts publish one.
        while let Some(event) = stream.next_within(Duration::from_millis(300)).await {
            if event.name == "acquired" {
                break;
            }
        }
        let sent = Instant::now();
        let response = app
            .delete(&baton_testkit::lease_path("locks", &lease))
            .await;
        assert_eq!(response.status(), 204);
        loop {
            match stream.next_within(Duration::from_secs(2)).await {
                Some(event) if event.name == "released" && event.data["name"] == name => {
                    delays.push(sent.elapsed());
                    break;
                }
                Some(_) => {}
                None => {
                    println!("no `released` event from the scripts (not publishing yet?)");
                    return;
                }
            }
        }
    }
    delays.sort();
    println!(
        "DELETE sent -> `released` event read: median {:?}, p99 {:?}, max {:?}",
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays[delays.len() - 1]
    );
}
