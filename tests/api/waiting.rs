//! Waiting with `wait_ms`: woken by a release (on this or another instance),
//! woken at expiry, timing out; no Redis traffic while asleep; many contenders.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::{
    join_line, lease_path, problem, settings_for, unique_prefix, waiting, RedisServer, TestApp,
};

#[tokio::test]
async fn a_waiter_is_woken_by_the_release_within_milliseconds() {
    let app = TestApp::spawn().await;
    let mut wakeups = Vec::new();
    for _ in 0..10 {
        let held = app.acquire_lock("relay", r#"{"ttl_ms": 30000}"#).await;
        let waiter = app.post_in_background("/locks/relay", r#"{"wait_ms": 10000}"#);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released_at = Instant::now();
        assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
        let answer = waiter.await.unwrap();
        assert_eq!(answer.response.status(), 201);
        let (acquired_at, lease): (_, Value) = (answer.at, answer.response.json().await.unwrap());
        wakeups.push(acquired_at - released_at);
        app.delete(&lease_path("locks", &lease)).await;
    }
    wakeups.sort();
    let median = wakeups[wakeups.len() / 2];
    let worst = wakeups[wakeups.len() - 1];
    println!(
        "wake-up after release (DELETE sent -> waiter's 201): median {median:?}, max {worst:?}"
    );
    // Generous slack for a shared 2-core machine; the design goal is a few ms.
    assert!(
        median < Duration::from_millis(50),
        "median wake-up {median:?}"
    );
    assert!(
        worst < Duration::from_millis(500),
        "slowest wake-up {worst:?}"
    );
}

#[tokio::test]
async fn a_waiter_is_woken_when_the_holder_s_lease_expires() {
    let app = TestApp::spawn().await;
    app.acquire_lock("expiring", r#"{"ttl_ms": 400}"#).await;
    let started = Instant::now();

    let response = app.post("/locks/expiring", r#"{"wait_ms": 5000}"#).await;

    let waited = started.elapsed();
    assert_eq!(response.status(), 201);
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(1500),
        "acquired after {waited:?}, the lease expired after about 400 ms"
    );
}

#[tokio::test]
async fn a_waiter_gives_up_after_wait_ms_with_409() {
    let app = TestApp::spawn().await;
    app.acquire_lock("patience", r#"{"ttl_ms": 30000, "owner": "slowpoke"}"#)
        .await;
    let started = Instant::now();

    let response = app.post("/locks/patience", r#"{"wait_ms": 400}"#).await;

    let waited = started.elapsed();
    let body = problem(response, 409, "lock-held").await;
    assert_eq!(body["owner"], "slowpoke");
    assert!(
        waited >= Duration::from_millis(390) && waited < Duration::from_millis(1500),
        "gave up after {waited:?}"
    );
}

#[tokio::test]
async fn a_waiter_on_one_instance_is_woken_by_a_release_on_another() {
    let redis = baton_testkit::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let held = first.acquire_lock("shared", r#"{"ttl_ms": 30000}"#).await;
    let waiter = second.post_in_background("/locks/shared", r#"{"wait_ms": 10000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let released_at = Instant::now();
    assert_eq!(
        first.delete(&lease_path("locks", &held)).await.status(),
        204
    );

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    let latency = answer.at - released_at;
    println!("cross-instance wake-up: {latency:?}");
    assert!(
        latency < Duration::from_millis(500),
        "woken after {latency:?}"
    );
}

#[tokio::test]
async fn waiting_requests_cost_redis_one_keep_alive_a_second_however_many_wait() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let held = app.acquire_lock("quiet", r#"{"ttl_ms": 60000}"#).await;
    // What the instance costs with nobody waiting: keeping its list of
    // freezes fresh (a version check about every 300 ms, a reload every 5 s).
    let idle_before = redis.script_calls();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let idle = redis.script_calls() - idle_before;
    assert!(idle <= 12, "{idle} scripts in 3 s with nobody waiting");
    let waiters: Vec<_> = (0..20)
        .map(|_| app.post_in_background("/locks/quiet", r#"{"wait_ms": 20000}"#))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let scripts_before = redis.script_calls();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let scripts_after = redis.script_calls();

    // One keep-alive a second for the (instance, name), not one per waiter,
    // beside what the instance costs idle (give or take a check or a reload).
    let scripts = (scripts_after - scripts_before).saturating_sub(idle);
    assert!(
        scripts <= 6,
        "{scripts} scripts in 3 s while 20 requests waited, beyond {idle} idle"
    );
    app.delete(&lease_path("locks", &held)).await;
    for waiter in waiters {
        let status = waiter.await.unwrap().response.status();
        assert!(status == 201 || status == 409, "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contenders_never_overlap_all_get_their_turn_and_tokens_follow_the_turns() {
    const CLIENTS: usize = 12;
    const ROUNDS: usize = 5;
    let redis = baton_testkit::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let inside = Arc::new(AtomicBool::new(false));
    let turns = Arc::new(Mutex::new(Vec::new()));

    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let app = if i % 2 == 0 { &first } else { &second };
            let (client, base) = (app.client.clone(), app.base.clone());
            let (inside, turns) = (inside.clone(), turns.clone());
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let response = client
                        .post(format!("{base}/locks/critical"))
                        .body(r#"{"wait_ms": 30000, "ttl_ms": 10000}"#)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 201);
                    let lease: Value = response.json().await.unwrap();
                    assert!(
                        !inside.swap(true, Ordering::SeqCst),
                        "two holders inside the critical section"
                    );
                    turns
                        .lock()
                        .unwrap()
                        .push(lease["fencing_token"].as_u64().unwrap());
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    inside.store(false, Ordering::SeqCst);
                    let released = client
                        .delete(format!("{base}{}", lease_path("locks", &lease)))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(released.status(), 204);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client finished");
    }

    let turns = turns.lock().unwrap();
    assert_eq!(turns.len(), CLIENTS * ROUNDS, "every client got every turn");
    assert!(
        turns.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens follow the order of the turns: {turns:?}"
    );
}

#[tokio::test]
async fn shutdown_answers_waiters_at_once_with_503() {
    let mut app = TestApp::spawn().await;
    app.acquire_lock("closing", r#"{"ttl_ms": 60000}"#).await;
    let waiter = app.post_in_background("/locks/closing", r#"{"wait_ms": 60000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();

    app.shutdown().await.expect("clean shutdown");

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    let response = waiter.await.unwrap().response;
    problem(response, 503, "shutting-down").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_three_instances_are_served_in_joining_order_and_status_shows_the_line() {
    let redis = baton_testkit::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let third = first.sibling_of(&redis.url()).await;
    let instances = [&first, &second, &third];
    for (kind, extra) in [("locks", ""), ("semaphores", r#""limit": 1, "#)] {
        let path = format!("/{kind}/fifo");
        let held: Value = first
            .post(&path, &format!(r#"{{{extra}"ttl_ms": 30000}}"#))
            .await
            .json()
            .await
            .unwrap();
        let mut answers = Vec::new();
        for i in 0..6 {
            let body = format!(r#"{{{extra}"wait_ms": 20000, "owner": "w{i}"}}"#);
            answers.push(join_line(instances[i % 3], &path, &body, &first).await);
        }

        let status: Value = third.get(&path).await.json().await.unwrap();
        assert_eq!(status["waiting"], 6, "{status}");
        let line = status["waiters"].as_array().unwrap();
        assert_eq!(line.len(), 6, "every waiter listed: {status}");
        for (i, waiter) in line.iter().enumerate() {
            assert_eq!(waiter["position"], i + 1);
            assert_eq!(waiter["owner"], format!("w{i}"));
            assert!(waiter["waited_ms"].as_u64().unwrap() > 0);
        }
        assert!(!status.to_string().contains(held["id"].as_str().unwrap()));

        // Each waiter releases as soon as it is served.
        let served = Arc::new(Mutex::new(Vec::new()));
        let releases: Vec<_> = answers
            .into_iter()
            .enumerate()
            .map(|(i, answer)| {
                let (client, base, served) =
                    (first.client.clone(), first.base.clone(), served.clone());
                tokio::spawn(async move {
                    let response = answer.await.unwrap().response;
                    assert_eq!(response.status(), 201, "waiter {i}");
                    let lease: Value = response.json().await.unwrap();
                    served
                        .lock()
                        .unwrap()
                        .push((i, lease["fencing_token"].as_u64().unwrap()));
                    client
                        .delete(format!(
                            "{base}/{}/{}/{}",
                            if lease.get("limit").is_some() {
                                "semaphores"
                            } else {
                                "locks"
                            },
                            lease["name"].as_str().unwrap(),
                            lease["id"].as_str().unwrap()
                        ))
                        .send()
                        .await
                        .unwrap()
                })
            })
            .collect();
        assert_eq!(first.delete(&lease_path(kind, &held)).await.status(), 204);
        for release in releases {
            assert_eq!(release.await.unwrap().status(), 204);
        }
        let served = served.lock().unwrap().clone();
        let order: Vec<usize> = served.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            order,
            (0..6).collect::<Vec<_>>(),
            "{kind}: served in joining order"
        );
        assert!(
            served.windows(2).all(|w| w[0].1 < w[1].1),
            "{kind}: tokens in joining order: {served:?}"
        );
    }
}

/// A baton process of its own, so that it can be killed with SIGKILL.
struct Process {
    child: std::process::Child,
    base: String,
}

impl Process {
    fn start(redis_url: &str, prefix: &str) -> Self {
        let port = baton_testkit::free_port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .env("BATON_LISTEN", format!("127.0.0.1:{port}"))
            .env("BATON_REDIS_URL", redis_url)
            .env("BATON_KEY_PREFIX", prefix)
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("baton binary");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "baton did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_behind_those_of_a_killed_instance_are_served_within_5_s_of_the_release() {
    let redis = baton_testkit::shared_redis();
    let app = TestApp::spawn().await;
    let mut doomed = Process::start(&redis.url(), &app.prefix);
    let client = reqwest::Client::new();
    for (kind, extra) in [("locks", ""), ("semaphores", r#""limit": 1, "#)] {
        let path = format!("/{kind}/crash");
        let held: Value = app
            .post(&path, &format!(r#"{{{extra}"ttl_ms": 60000}}"#))
            .await
            .json()
            .await
            .unwrap();
        // The killed instance's waiter is first in line.
        let request = client
            .post(format!("{}{path}", doomed.base))
            .body(format!(r#"{{{extra}"wait_ms": 60000, "owner": "doomed"}}"#));
        let _doomed_waiter = tokio::spawn(async move { request.send().await });
        let deadline = Instant::now() + Duration::from_secs(5);
        while waiting(&app, &path).await < 1 {
            assert!(Instant::now() < deadline, "the doomed waiter never joined");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let behind = join_line(
            &app,
            &path,
            &format!(r#"{{{extra}"wait_ms": 30000, "owner": "behind"}}"#),
            &app,
        )
        .await;

        // Killed just before the release: Redis still counts its waiter as
        // alive, so the release grants to it; the grant, never confirmed,
        // lapses within seconds and passes on.
        let _ = doomed.child.kill();
        let _ = doomed.child.wait();
        assert_eq!(app.delete(&lease_path(kind, &held)).await.status(), 204);
        let released_at = Instant::now();
        let answer = behind.await.unwrap();
        assert_eq!(answer.response.status(), 201, "{kind}");
        let took = answer.at - released_at;
        println!("{kind}: served {took:?} after the release, behind a killed instance");
        assert!(
            took < Duration::from_secs(5),
            "{kind}: served after {took:?}"
        );
        let lease: Value = answer.response.json().await.unwrap();
        app.delete(&lease_path(kind, &lease)).await;
        doomed = Process::start(&redis.url(), &app.prefix);
    }
}

#[tokio::test]
async fn a_client_that_disconnects_leaves_the_line_at_once() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("impatient", r#"{"ttl_ms": 30000}"#).await;
    let quitter = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gone = quitter
        .post(format!("{}/locks/impatient", app.base))
        .body(r#"{"wait_ms": 20000, "owner": "quitter"}"#)
        .send();
    assert!(gone.await.is_err(), "the client gave up");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        waiting(&app, "/locks/impatient").await,
        0,
        "it left at once"
    );

    let next = join_line(&app, "/locks/impatient", r#"{"wait_ms": 5000}"#, &app).await;
    let released_at = Instant::now();
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);

    let answer = next.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    assert!(answer.at - released_at < Duration::from_millis(500));
}

#[tokio::test]
async fn a_refresh_that_shortens_the_lease_wakes_the_line_at_the_new_expiry() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("shortened", r#"{"ttl_ms": 30000}"#).await;
    let waiter = join_line(&app, "/locks/shortened", r#"{"wait_ms": 10000}"#, &app).await;
    let started = Instant::now();

    let refreshed = app
        .patch(&lease_path("locks", &held), r#"{"ttl_ms": 500}"#)
        .await;
    assert_eq!(refreshed.status(), 200);

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    let took = answer.at - started;
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(1500),
        "acquired {took:?} after the refresh to 500 ms"
    );
}

#[tokio::test]
async fn a_force_release_hands_the_lock_to_the_next_in_line() {
    let app = TestApp::spawn().await;
    app.acquire_lock("seized", r#"{"ttl_ms": 30000}"#).await;
    let waiter = join_line(&app, "/locks/seized", r#"{"wait_ms": 10000}"#, &app).await;
    let released_at = Instant::now();

    assert_eq!(app.delete("/locks/seized").await.status(), 204);

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    assert!(answer.at - released_at < Duration::from_millis(500));
}

#[tokio::test]
async fn with_mixed_limits_a_waiter_that_fits_is_served_past_one_that_does_not() {
    let app = TestApp::spawn().await;
    let path = "/semaphores/mixed";
    let mut held = Vec::new();
    for _ in 0..3 {
        let response = app.post(path, r#"{"limit": 3, "ttl_ms": 30000}"#).await;
        assert_eq!(response.status(), 201);
        held.push(response.json::<Value>().await.unwrap());
    }
    let narrow = join_line(&app, path, r#"{"limit": 2, "wait_ms": 3000}"#, &app).await;
    let wide = join_line(&app, path, r#"{"limit": 4, "wait_ms": 10000}"#, &app).await;
    let released_at = Instant::now();

    assert_eq!(
        app.delete(&lease_path("semaphores", &held[0]))
            .await
            .status(),
        204
    );

    // 2 holders: the head (limit 2) does not fit, the one behind (limit 4) does.
    let answer = wide.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    assert!(answer.at - released_at < Duration::from_millis(500));
    assert_eq!(waiting(&app, path).await, 1, "the narrow one still waits");
    let refused = narrow.await.unwrap().response;
    let body = problem(refused, 409, "semaphore-full").await;
    assert_eq!(body["holders"], 3);
    assert_eq!(body["waiting"], 0);
}

/// Lock "deploy" held for 30 s, and "v1" waiting for it with `newest_wins`.
async fn held_with_newest_wins_waiter(
    app: &TestApp,
) -> (Value, tokio::task::JoinHandle<baton_testkit::Answer>) {
    let held = app.acquire_lock("deploy", r#"{"ttl_ms": 30000}"#).await;
    let v1 = join_line(
        app,
        "/locks/deploy",
        r#"{"wait_ms": 10000, "owner": "v1", "newest_wins": true}"#,
        app,
    )
    .await;
    (held, v1)
}

#[tokio::test]
async fn newest_wins_supersedes_the_queued_newest_wins_waiter_and_no_holder() {
    let app = TestApp::spawn().await;
    let (held, v1) = held_with_newest_wins_waiter(&app).await;
    let plain = join_line(&app, "/locks/deploy", r#"{"wait_ms": 10000}"#, &app).await;

    let v2 = app.post_in_background(
        "/locks/deploy",
        r#"{"wait_ms": 10000, "owner": "v2", "newest_wins": true}"#,
    );

    let body = problem(v1.await.unwrap().response, 409, "superseded").await;
    assert_eq!(body["owner"], "v2");
    let status: Value = app.get("/locks/deploy").await.json().await.unwrap();
    assert_eq!(
        status["fencing_token"], held["fencing_token"],
        "the holder stays"
    );
    assert_eq!(status["waiting"], 2, "{status}");
    assert_eq!(status["waiters"][1]["owner"], "v2");

    // Without a wait nothing is superseded: it never joins the line.
    let busy = app
        .post("/locks/deploy", r#"{"newest_wins": true, "owner": "v3"}"#)
        .await;
    let busy = problem(busy, 409, "lock-held").await;
    assert_eq!(busy["waiting"], 2);

    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let first: Value = plain.await.unwrap().response.json().await.unwrap();
    assert_eq!(app.delete(&lease_path("locks", &first)).await.status(), 204);
    assert_eq!(v2.await.unwrap().response.status(), 201);
}

/// A newest_wins waiter that missed the message saying it was superseded
/// (its instance was resubscribing) asks Redis again, learns it there, and
/// answers 409 `superseded`: it neither takes its place back, superseding
/// the newer request in turn, nor acquires.
#[tokio::test]
async fn a_superseded_waiter_that_missed_the_message_learns_it_when_it_asks_again() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let (_held, v1) = held_with_newest_wins_waiter(&app).await;

    // v2 joins through the acquire function itself, with its message to v1's
    // instance sent to a channel nobody hears: v1 misses it.
    let mut conn = redis.conn();
    let mut eval = redis::cmd("FCALL");
    let name = baton::domain::Name::parse("deploy").unwrap();
    let keys = baton::engine::Keys::new(app.prefix.clone());
    eval.arg(baton::engine::function_name("acquire").unwrap())
        .arg(1)
        .arg(keys.owners(baton::domain::Kind::Lock, &name));
    // The waiter as the line keeps it: id|tag|instance|ttl_ms|limit|weight|newest|owner
    // (an exclusive lock's lease takes all of the lock's capacity).
    let capacity = baton::domain::Demand::LOCK_CAPACITY;
    let waiter = format!(
        "{}|1|another-instance|30000|{capacity}|{capacity}|1|v2",
        uuid::Uuid::new_v4()
    );
    eval.arg(format!("{}events", app.prefix))
        .arg(baton::engine::call_context(
            "",
            baton::domain::Kind::Lock,
            "PUBLISH",
            "another-instance",
            "nowhere",
            &baton::engine::history_terms(0, 7),
            &name,
        ))
        .arg(waiter)
        .arg(1)
        .arg(1);
    let joined: Vec<redis::Value> = eval.query(&mut conn).unwrap();
    assert_eq!(joined[0], redis::Value::Int(0), "v2 queued: {joined:?}");
    assert!(!v1.is_finished(), "v1 heard nothing");

    // Its instance resubscribes, and every waiter asks Redis again.
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query::<()>(&mut conn)
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), v1)
        .await
        .expect("v1 answers once it asks again")
        .unwrap();
    let body = problem(answer.response, 409, "superseded").await;
    assert_eq!(body["owner"], "v2");
    let status: Value = app.get("/locks/deploy").await.json().await.unwrap();
    assert_eq!(status["waiting"], 1, "{status}");
    assert_eq!(status["waiters"][0]["owner"], "v2", "v2 keeps its place");
}

#[tokio::test]
async fn every_key_baton_writes_has_a_ttl() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let mut leases = Vec::new();
    for i in 0..300 {
        let (kind, body) = if i % 2 == 0 {
            ("locks", r#"{"ttl_ms": 60000}"#.to_owned())
        } else {
            ("semaphores", r#"{"limit": 1, "ttl_ms": 60000}"#.to_owned())
        };
        let response = app.post(&format!("/{kind}/name-{i}"), &body).await;
        assert_eq!(response.status(), 201);
        let lease: Value = response.json().await.unwrap();
        if i % 3 == 0 {
            app.delete(&lease_path(kind, &lease)).await;
        } else {
            leases.push((kind, lease));
        }
    }
    // Some waiters that give up, some that are served.
    for (kind, lease) in leases.iter().take(10) {
        let name = lease["name"].as_str().unwrap();
        let extra = if *kind == "semaphores" {
            r#""limit": 1, "#
        } else {
            ""
        };
        let refused = app
            .post(
                &format!("/{kind}/{name}"),
                &format!(r#"{{{extra}"wait_ms": 100}}"#),
            )
            .await;
        assert_eq!(refused.status(), 409);
    }
    let (kind, lease) = leases.iter().find(|(k, _)| *k == "semaphores").unwrap();
    let name = lease["name"].as_str().unwrap();
    let waiter = app.post_in_background(
        &format!("/{kind}/{name}"),
        r#"{"limit": 1, "wait_ms": 5000}"#,
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    app.delete(&lease_path(kind, lease)).await;
    assert_eq!(waiter.await.unwrap().response.status(), 201);

    let mut conn = redis.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", app.prefix))
        .query(&mut conn)
        .unwrap();
    assert!(keys.len() > 300, "{} keys", keys.len());
    let forever: Vec<&String> = keys
        .iter()
        .filter(|key| {
            redis::cmd("PTTL")
                .arg(key.as_str())
                .query::<i64>(&mut conn)
                .unwrap()
                == -1
        })
        .collect();
    assert!(forever.is_empty(), "keys without a TTL: {forever:?}");
}

#[tokio::test]
async fn a_fencing_counter_that_cannot_grow_exactly_is_refused_not_wrapped() {
    let redis = baton_testkit::shared_redis();
    let app = TestApp::spawn().await;
    redis::cmd("HSET")
        .arg(format!("{}{{lock:exhausted}}:owners", app.prefix))
        .arg("fence")
        .arg("9007199254740991")
        .query::<()>(&mut redis.conn())
        .unwrap();

    let response = app.post("/locks/exhausted", "{}").await;

    problem(response, 500, "internal-error").await;
    let status: Value = app.get("/locks/exhausted").await.json().await.unwrap();
    assert_eq!(status["held"], false, "nothing half-done");
}

#[tokio::test]
async fn a_lease_handed_to_a_waiter_is_confirmed_and_keeps_its_full_ttl() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("confirmed", r#"{"ttl_ms": 30000}"#).await;
    let waiter = join_line(
        &app,
        "/locks/confirmed",
        r#"{"wait_ms": 5000, "ttl_ms": 20000}"#,
        &app,
    )
    .await;
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let lease: Value = waiter.await.unwrap().response.json().await.unwrap();

    // Past the 3 s an unconfirmed grant lives.
    tokio::time::sleep(Duration::from_millis(3500)).await;

    let check = app.get(&lease_path("locks", &lease)).await;
    assert_eq!(check.status(), 200, "the handed-off lease is still held");
    let status: Value = app.get("/locks/confirmed").await.json().await.unwrap();
    assert!(
        status["expires_in_ms"].as_u64().unwrap() > 15_000,
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_asks_again_after_a_redis_restart_and_gets_the_lock_freed_meanwhile() {
    let mut redis = RedisServer::start_persistent();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    app.acquire_lock("restarted", r#"{"ttl_ms": 800}"#).await;
    let waiter = join_line(&app, "/locks/restarted", r#"{"wait_ms": 30000}"#, &app).await;

    // The lease expires while Redis is down; after the restart the waiter's
    // instance resubscribes and asks again, and gets the lock: within seconds,
    // not at the end of its 30 s wait.
    tokio::task::block_in_place(|| redis.kill());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    tokio::task::block_in_place(|| redis.restart());
    let restarted = Instant::now();

    let answer = waiter.await.unwrap();
    assert_eq!(answer.response.status(), 201);
    let took = answer.at.saturating_duration_since(restarted);
    assert!(
        took < Duration::from_secs(10),
        "served {took:?} after the restart"
    );
}

/// What is published on `name`'s channel (the messages about its waiters),
/// heard through a pattern subscription of the tests' own.
async fn spy_on_channel(app: &TestApp, name: &str) -> redis::aio::PubSub {
    let client = redis::Client::open(baton_testkit::shared_redis().url()).unwrap();
    let mut spy = client.get_async_pubsub().await.unwrap();
    spy.psubscribe(format!("{}{{lock:{name}}}:events", app.prefix))
        .await
        .unwrap();
    spy
}

/// A hand-off to a waiter of the instance that released is told in the
/// release's own reply: nothing goes over the name's channel. A hand-off to
/// another instance's waiter is published there, for that instance.
#[tokio::test]
async fn a_hand_off_to_a_waiter_of_the_same_instance_is_told_in_the_reply_not_on_the_channel() {
    use futures_util::StreamExt;
    let redis = baton_testkit::shared_redis();
    let first = TestApp::spawn().await;
    let second = first.sibling_of(&redis.url()).await;
    let mut spy = spy_on_channel(&first, "handed").await;

    let held = first.acquire_lock("handed", r#"{"ttl_ms": 30000}"#).await;
    let local = first.post_in_background("/locks/handed", r#"{"wait_ms": 10000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        first.delete(&lease_path("locks", &held)).await.status(),
        204
    );
    let local: Value = local.await.unwrap().response.json().await.unwrap();
    {
        let mut heard = spy.on_message();
        let nothing = tokio::time::timeout(Duration::from_millis(300), heard.next()).await;
        assert!(nothing.is_err(), "a local hand-off published {nothing:?}");
    }

    let remote = second.post_in_background("/locks/handed", r#"{"wait_ms": 10000}"#);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        first.delete(&lease_path("locks", &local)).await.status(),
        204
    );
    assert_eq!(remote.await.unwrap().response.status(), 201);
    let mut heard = spy.on_message();
    let message = tokio::time::timeout(Duration::from_secs(2), heard.next())
        .await
        .expect("a hand-off to another instance is published")
        .expect("a message");
    let payload: String = message.get_payload().unwrap();
    assert!(payload.starts_with("g "), "a provisional grant: {payload}");
}

/// A release whose reply never came back (Redis stalled past the call
/// timeout) may still have granted the lease to a waiter of this instance:
/// the waiter asks Redis again once it answers, and gets the lease then, not
/// at the end of its wait.
#[tokio::test]
async fn a_waiter_granted_by_a_release_whose_reply_was_lost_gets_its_lease_soon_after() {
    let redis = RedisServer::start();
    let mut settings = settings_for(&redis.url(), &unique_prefix());
    settings.redis_timeout = Duration::from_millis(300);
    let app = TestApp::spawn_with(settings).await;
    let held = app.acquire_lock("lost-reply", r#"{"ttl_ms": 30000}"#).await;
    let waiter = app.post_in_background("/locks/lost-reply", r#"{"wait_ms": 20000}"#);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let stall = redis.stall(1);
    let response = app.delete(&lease_path("locks", &held)).await;
    problem(response, 503, "redis-unavailable").await;
    stall.join().unwrap().unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter is answered within seconds of Redis answering again")
        .unwrap();
    assert_eq!(answered.response.status(), 201);
}

/// The operations are a Redis Functions library: a Redis that lost it (a
/// restart without persistence, `FUNCTION FLUSH`) gets it again with the
/// first call that needs it.
#[tokio::test]
async fn the_library_of_operations_is_loaded_again_where_redis_lost_it() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    app.acquire_lock("before", "{}").await;
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();

    app.acquire_lock("after", "{}").await;

    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(libraries.len(), 1, "one library: {libraries:?}");
}
