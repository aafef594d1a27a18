//! Semaphore scripts, branch by branch, and their guarantees: never more than
//! `limit` holders, one script call per acquisition, first come first served.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use baton_testkit::{
    join_line, lease_path, problem, settings_for, take, token_of, unique_prefix, waiting,
    RedisServer, TestApp,
};

#[tokio::test]
async fn slots_are_granted_up_to_the_limit_then_409_with_holders_and_limit() {
    let app = TestApp::spawn().await;
    let first = app
        .post("/semaphores/pool", r#"{"limit": 2, "owner": "a"}"#)
        .await;
    assert_eq!(first.status(), 201);
    let location = first.headers()["location"].to_str().unwrap().to_owned();
    let first: Value = first.json().await.unwrap();
    assert_eq!(location, lease_path("semaphores", &first));
    assert_eq!(first["limit"], 2);
    assert_eq!(first["owner"], "a");
    assert_eq!(first["ttl_ms"], 30_000);
    let second = take(&app, "/semaphores/pool", r#"{"limit": 2}"#).await;
    assert!(
        token_of(&second) > token_of(&first),
        "{second} after {first}"
    );

    let response = app.post("/semaphores/pool", r#"{"limit": 2}"#).await;

    assert!(response.headers().contains_key("retry-after"));
    let body = problem(response, 409, "semaphore-full").await;
    assert_eq!(body["holders"], 2);
    assert_eq!(body["limit"], 2);
}

#[tokio::test]
async fn limit_is_required_and_bounded() {
    let app = TestApp::spawn().await;
    for body in [
        "",
        "{}",
        r#"{"limit": 0}"#,
        r#"{"limit": 100001}"#,
        r#"{"limit": -1}"#,
        r#"{"limit": "2"}"#,
    ] {
        let response = app.post("/semaphores/bounded", body).await;
        let problem = problem(response, 400, "invalid-request").await;
        assert!(
            problem["detail"].as_str().unwrap().contains("limit"),
            "{body}: {problem}"
        );
    }
    take(&app, "/semaphores/bounded", r#"{"limit": 100000}"#).await;
}

#[tokio::test]
async fn expired_leases_are_dropped_and_free_their_slots() {
    let app = TestApp::spawn().await;
    let short = take(
        &app,
        "/semaphores/lapsing",
        r#"{"limit": 1, "ttl_ms": 100}"#,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(250)).await;

    let next = take(&app, "/semaphores/lapsing", r#"{"limit": 1}"#).await;

    assert!(token_of(&next) > token_of(&short), "{next} after {short}");
    let status: Value = app.get("/semaphores/lapsing").await.json().await.unwrap();
    assert_eq!(status["holders"], 1);
    problem(
        app.get(&lease_path("semaphores", &short)).await,
        404,
        "lease-not-found",
    )
    .await;
}

#[tokio::test]
async fn a_refresh_in_time_keeps_the_lease() {
    let app = TestApp::spawn().await;
    let lease = take(&app, "/semaphores/kept", r#"{"limit": 1, "ttl_ms": 500}"#).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let response = app
        .patch(&lease_path("semaphores", &lease), r#"{"ttl_ms": 5000}"#)
        .await;

    assert_eq!(response.status(), 200);
    let refreshed: Value = response.json().await.unwrap();
    assert_eq!(refreshed["ttl_ms"], 5000);
    assert_eq!(refreshed["limit"], 1);
    assert_eq!(refreshed["fencing_token"], lease["fencing_token"]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    problem(
        app.post("/semaphores/kept", r#"{"limit": 1}"#).await,
        409,
        "semaphore-full",
    )
    .await;
    let empty = app.patch(&lease_path("semaphores", &lease), "").await;
    let empty: Value = empty.json().await.unwrap();
    assert_eq!(
        empty["ttl_ms"], 5000,
        "an empty refresh reuses the lease's ttl"
    );
}

#[tokio::test]
async fn a_refresh_too_late_is_refused_and_does_not_bring_the_lease_back() {
    let app = TestApp::spawn().await;
    let lease = take(&app, "/semaphores/late", r#"{"limit": 1, "ttl_ms": 100}"#).await;
    tokio::time::sleep(Duration::from_millis(250)).await;

    let response = app
        .patch(&lease_path("semaphores", &lease), r#"{"ttl_ms": 60000}"#)
        .await;

    problem(response, 404, "lease-not-found").await;
    let status: Value = app.get("/semaphores/late").await.json().await.unwrap();
    assert_eq!(status["holders"], 0);
    take(&app, "/semaphores/late", r#"{"limit": 1}"#).await;
}

#[tokio::test]
async fn releasing_twice_returns_404_and_a_foreign_id_changes_nothing() {
    let app = TestApp::spawn().await;
    let lease = take(&app, "/semaphores/twice", r#"{"limit": 3}"#).await;
    problem(
        app.delete(&format!("/semaphores/twice/{}", uuid::Uuid::new_v4()))
            .await,
        404,
        "lease-not-found",
    )
    .await;
    let status: Value = app.get("/semaphores/twice").await.json().await.unwrap();
    assert_eq!(status["holders"], 1);

    assert_eq!(
        app.delete(&lease_path("semaphores", &lease)).await.status(),
        204
    );
    problem(
        app.delete(&lease_path("semaphores", &lease)).await,
        404,
        "lease-not-found",
    )
    .await;
    let status: Value = app.get("/semaphores/twice").await.json().await.unwrap();
    assert_eq!(status["holders"], 0);
}

#[tokio::test]
async fn status_lists_owners_tokens_and_time_left_in_grant_order_without_ids() {
    let app = TestApp::spawn().await;
    let empty: Value = app.get("/semaphores/listed").await.json().await.unwrap();
    assert_eq!(
        empty,
        json!({"name": "listed", "holders": 0, "leases": [], "waiting": 0, "waiters": []})
    );
    let a = take(
        &app,
        "/semaphores/listed",
        r#"{"limit": 3, "owner": "a", "ttl_ms": 20000}"#,
    )
    .await;
    let b = take(
        &app,
        "/semaphores/listed",
        r#"{"limit": 3, "ttl_ms": 10000}"#,
    )
    .await;

    let response = app.get("/semaphores/listed").await;

    let text = response.text().await.unwrap();
    for lease in [&a, &b] {
        assert!(
            !text.contains(lease["id"].as_str().unwrap()),
            "status shows an id"
        );
    }
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["holders"], 2);
    assert_eq!(status["limit"], 3);
    assert_eq!(status["leases"][0]["owner"], "a");
    assert_eq!(status["leases"][0]["fencing_token"], a["fencing_token"]);
    assert!(status["leases"][1].get("owner").is_none());
    assert_eq!(status["leases"][1]["fencing_token"], b["fencing_token"]);
    assert!(status["leases"][0]["expires_in_ms"].as_u64().unwrap() > 19_000);
    assert!(status["leases"][1]["expires_in_ms"].as_u64().unwrap() <= 10_000);
}

#[tokio::test]
async fn each_acquisition_is_judged_against_its_own_limit() {
    let app = TestApp::spawn().await;
    take(&app, "/semaphores/mixed", r#"{"limit": 2}"#).await;
    take(&app, "/semaphores/mixed", r#"{"limit": 2}"#).await;

    problem(
        app.post("/semaphores/mixed", r#"{"limit": 2}"#).await,
        409,
        "semaphore-full",
    )
    .await;
    take(&app, "/semaphores/mixed", r#"{"limit": 3}"#).await;

    let status: Value = app.get("/semaphores/mixed").await.json().await.unwrap();
    assert_eq!(status["holders"], 3);
    assert_eq!(
        status["limit"], 3,
        "status reports the latest acquisition's limit"
    );
}

#[tokio::test]
async fn one_acquisition_costs_one_script_call_free_or_full() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    take(&app, "/semaphores/counted", r#"{"limit": 1}"#).await;

    // The fewest of a few tries: a call of the instance's own in the
    // background (its freeze list is reloaded every 5 s) only adds.
    let mut free = u64::MAX;
    for i in 0..3 {
        let before = redis.script_calls();
        take(
            &app,
            &format!("/semaphores/counted-free-{i}"),
            r#"{"limit": 1}"#,
        )
        .await;
        free = free.min(redis.script_calls() - before);
    }

    let mut full = u64::MAX;
    for _ in 0..3 {
        let before = redis.script_calls();
        problem(
            app.post("/semaphores/counted", r#"{"limit": 1}"#).await,
            409,
            "semaphore-full",
        )
        .await;
        full = full.min(redis.script_calls() - before);
    }

    assert_eq!(free, 1, "script calls for a free slot");
    assert_eq!(full, 1, "script calls when full");
    // A call that finds the library missing on a fresh Redis also loads it
    // (then calls again); count the steady state.
    app.acquire_lock("warm-up", "{}").await;
    let mut lock = u64::MAX;
    for i in 0..3 {
        let before = redis.script_calls();
        app.acquire_lock(&format!("counted-lock-{i}"), "{}").await;
        lock = lock.min(redis.script_calls() - before);
    }
    assert_eq!(lock, 1, "script calls for a lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_waiting_clients_never_hold_more_than_the_limit_and_all_get_through() {
    const LIMIT: usize = 3;
    const CLIENTS: usize = 12;
    const ROUNDS: usize = 3;
    let redis = baton_testkit::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));

    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let app = if i % 2 == 0 { &first } else { &second };
            let (client, base) = (app.client.clone(), app.base.clone());
            let (holding, most) = (holding.clone(), most.clone());
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let response = client
                        .post(format!("{base}/semaphores/crowd"))
                        .body(format!(
                            r#"{{"limit": {LIMIT}, "wait_ms": 30000, "ttl_ms": 10000}}"#
                        ))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 201);
                    let lease: Value = response.json().await.unwrap();
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    holding.fetch_sub(1, Ordering::SeqCst);
                    let released = client
                        .delete(format!("{base}{}", lease_path("semaphores", &lease)))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(released.status(), 204);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client got through");
    }

    let most = most.load(Ordering::SeqCst);
    assert!(most <= LIMIT, "{most} holders at once, limit {LIMIT}");
    assert!(
        most >= 2,
        "the semaphore was actually shared ({most} at most)"
    );
}

#[tokio::test]
async fn queued_waiters_are_admitted_in_the_order_they_started_waiting() {
    let app = TestApp::spawn().await;
    let holder = take(&app, "/semaphores/fair", r#"{"limit": 1, "ttl_ms": 30000}"#).await;
    let admitted = Arc::new(Mutex::new(Vec::new()));

    let mut waiters = Vec::new();
    for i in 0..5 {
        let (client, base, admitted) = (app.client.clone(), app.base.clone(), admitted.clone());
        waiters.push(tokio::spawn(async move {
            let response = client
                .post(format!("{base}/semaphores/fair"))
                .body(r#"{"limit": 1, "wait_ms": 20000}"#)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 201);
            let lease: Value = response.json().await.unwrap();
            admitted
                .lock()
                .unwrap()
                .push((i, lease["fencing_token"].as_u64().unwrap()));
            tokio::time::sleep(Duration::from_millis(20)).await;
            client
                .delete(format!("{base}{}", lease_path("semaphores", &lease)))
                .send()
                .await
                .unwrap();
        }));
        // Each waiter is queued before the next one starts.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A newcomer that will not wait must not overtake the queue either.
    problem(
        app.post("/semaphores/fair", r#"{"limit": 1}"#).await,
        409,
        "semaphore-full",
    )
    .await;

    let started = Instant::now();
    assert_eq!(
        app.delete(&lease_path("semaphores", &holder))
            .await
            .status(),
        204
    );
    for waiter in waiters {
        waiter.await.unwrap();
    }

    let admitted = admitted.lock().unwrap();
    let order: Vec<usize> = admitted.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, [0, 1, 2, 3, 4]);
    assert!(
        admitted.windows(2).all(|w| w[0].1 < w[1].1),
        "tokens follow the order"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "hand-offs took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_waiter_that_gives_up_leaves_the_queue_for_those_behind_it() {
    let app = TestApp::spawn().await;
    let path = "/semaphores/impatient";
    let holder = take(
        &app,
        "/semaphores/impatient",
        r#"{"limit": 1, "ttl_ms": 30000}"#,
    )
    .await;
    let quitter = join_line(
        &app,
        path,
        r#"{"limit": 1, "wait_ms": 300, "owner": "quitter"}"#,
        &app,
    )
    .await;
    let behind = join_line(
        &app,
        path,
        r#"{"limit": 1, "wait_ms": 20000, "owner": "behind"}"#,
        &app,
    )
    .await;

    problem(quitter.await.unwrap().response, 409, "semaphore-full").await;

    // The quitter is out of the line; the one behind it is first now.
    let status: Value = app.get(path).await.json().await.unwrap();
    assert_eq!(status["waiting"], 1, "{status}");
    assert_eq!(status["waiters"][0]["owner"], "behind", "{status}");
    let released_at = Instant::now();
    assert_eq!(
        app.delete(&lease_path("semaphores", &holder))
            .await
            .status(),
        204
    );
    let answer = behind.await.unwrap();
    let took = answer.at.saturating_duration_since(released_at);
    assert_eq!(answer.response.status(), 201);
    let lease: Value = answer.response.json().await.unwrap();
    assert_eq!(lease["owner"], "behind");
    // At once, not after a grant to the quitter's leftover place lapsed.
    assert!(
        took < Duration::from_secs(1),
        "served {took:?} after the release"
    );
}

/// A waiter of a larger limit deep in a line of smaller ones: serving the
/// line looks past its usual batch while someone further may fit, so it is
/// admitted once there is room for it (1 held + 149 waiting + itself of 151),
/// not left to wait out its wait behind 150 waiters that cannot move.
#[tokio::test]
async fn a_waiter_of_a_larger_limit_past_the_first_hundred_is_admitted_when_it_fits() {
    let app = TestApp::spawn().await;
    let path = "/semaphores/deep-mixed";
    let holder = take(&app, "/semaphores/deep-mixed", r#"{"limit": 1}"#).await;
    let small: Vec<_> = (0..150)
        .map(|_| app.post_in_background(path, r#"{"limit": 1, "wait_ms": 60000}"#))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while waiting(&app, path).await < 150 {
        assert!(Instant::now() < deadline, "the 150 never all joined");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let big = join_line(&app, path, r#"{"limit": 151, "wait_ms": 20000}"#, &app).await;
    assert_eq!(
        app.delete(&lease_path("semaphores", &holder))
            .await
            .status(),
        204
    );
    let big = big.await.unwrap();
    assert_eq!(
        big.response.status(),
        201,
        "the waiter of limit 151 fits beside 1 held and 149 waiting"
    );
    let status: Value = app.get(path).await.json().await.unwrap();
    assert_eq!(
        status["holders"], 2,
        "the head of the line and the large one"
    );
    assert_eq!(status["waiting"], 149);
    for waiter in small {
        waiter.abort();
    }
}
