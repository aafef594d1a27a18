//! Claims: several names at once, all or nothing, never a deadlock. Each
//! scenario that waits runs across two instances on one Redis; the race of
//! overlapping claims also runs on a Redis Cluster with names on different
//! masters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton::config::Settings;
use serde_json::{json, Value};

use baton_testkit::topology::{
    cluster_settings, sentinel_settings, shared_cluster, shared_sentinels,
};
use baton_testkit::{answer_of, status_of, two_instances};
use baton_testkit::{lease_path, problem, settings_for, unique_prefix, RedisServer, TestApp};

/// Commands per uncontended claim of two names, taken and released.
const CLAIM_OF_TWO_COMMANDS: u64 = 25;

/// Waits (generously) until `check` holds of `path`'s status.
async fn until_status(app: &TestApp, path: &str, what: &str, check: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = status_of(app, path).await;
        if check(&status) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn held(status: &Value) -> bool {
    status["held"] == true || status["holders"].as_u64().unwrap_or(0) > 0
}

/// The claim of a 201 answer, checked: a `Location`, every lease, the
/// earliest expiry.
async fn claimed(response: reqwest::Response, names: usize) -> Value {
    assert_eq!(response.status(), 201);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let claim: Value = response.json().await.unwrap();
    assert_eq!(
        location,
        format!("/claims/{}", claim["id"].as_str().unwrap())
    );
    let leases = claim["leases"].as_array().unwrap();
    assert_eq!(leases.len(), names, "{claim}");
    let earliest = leases
        .iter()
        .map(|l| l["expires_at"].as_str().unwrap())
        .min()
        .unwrap();
    assert_eq!(claim["expires_at"], earliest, "{claim}");
    claim
}

fn claim_path(claim: &Value) -> String {
    format!("/claims/{}", claim["id"].as_str().unwrap())
}

#[tokio::test]
async fn a_held_name_refuses_the_claim_and_leaves_the_others_free() {
    let app = TestApp::spawn().await;
    let b = app.acquire_lock("b", r#"{"owner": "other"}"#).await;

    let body = r#"{"locks": [{"name": "a"}, {"name": "b"}], "semaphores": [{"name": "pool", "limit": 2}]}"#;
    let refused = problem(app.post("/claims", body).await, 409, "claim-refused").await;
    assert_eq!(refused["names"], json!(["b"]), "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("'b'"),
        "{refused}"
    );

    assert!(!held(&status_of(&app, "/locks/a").await), "a stays free");
    assert!(!held(&status_of(&app, "/semaphores/pool").await));
    // b's own holder was never touched.
    assert_eq!(app.get(&lease_path("locks", &b)).await.status(), 200);
}

#[tokio::test]
async fn a_waiting_claim_gets_every_name_once_they_are_free() {
    let (a, b) = two_instances().await;
    let holder = a.acquire_lock("y", r#"{"owner": "first"}"#).await;

    let body = r#"{"locks": [{"name": "y"}, {"name": "x"}], "wait_ms": 30000, "ttl_ms": 600, "owner": "claim"}"#;
    let waiting = b.post_in_background("/claims", body);
    // It holds x (first in the order) while it waits in y's line, and keeps
    // x alive meanwhile: x's ttl (600 ms) passes several times.
    until_status(&a, "/locks/y", "the claim waits for y", |s| {
        s["waiting"] == 1
    })
    .await;
    let x = status_of(&a, "/locks/x").await;
    assert_eq!(x["owner"], "claim", "{x}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let x_later = status_of(&a, "/locks/x").await;
    assert_eq!(
        x_later["fencing_token"], x["fencing_token"],
        "x kept alive, the same lease: {x_later}"
    );

    assert_eq!(a.delete(&lease_path("locks", &holder)).await.status(), 204);
    let answer = answer_of(waiting, "the claim").await;
    let claim = claimed(answer.response, 2).await;
    let names: Vec<_> = claim["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["x", "y"], "locks in the order taken");
    for lease in claim["leases"].as_array().unwrap() {
        assert_eq!(a.get(&lease_path("locks", lease)).await.status(), 200);
    }
}

#[tokio::test]
async fn a_claim_is_refreshed_shown_and_released_from_any_instance() {
    let (a, b) = two_instances().await;
    let body = r#"{"locks": [{"name": "r1"}, {"name": "r2"}], "ttl_ms": 5000}"#;
    let claim = claimed(a.post("/claims", body).await, 2).await;
    let path = claim_path(&claim);

    let refreshed = b.patch(&path, r#"{"ttl_ms": 60000}"#).await;
    assert_eq!(refreshed.status(), 200);
    let refreshed: Value = refreshed.json().await.unwrap();
    assert_eq!(refreshed["id"], claim["id"]);
    assert!(refreshed["expires_at"].as_str() > claim["expires_at"].as_str());
    for lease in refreshed["leases"].as_array().unwrap() {
        assert_eq!(lease["ttl_ms"], 60000, "{lease}");
    }
    let shown = b.get(&path).await;
    assert_eq!(shown.status(), 200);
    let shown: Value = shown.json().await.unwrap();
    assert_eq!(shown["leases"].as_array().unwrap().len(), 2);

    assert_eq!(b.delete(&path).await.status(), 204);
    problem(a.get(&path).await, 404, "claim-not-found").await;
    problem(a.delete(&path).await, 404, "claim-not-found").await;
    problem(a.patch(&path, "{}").await, 404, "claim-not-found").await;
    assert!(!held(&status_of(&a, "/locks/r1").await));
    assert!(!held(&status_of(&a, "/locks/r2").await));
    problem(a.get("/claims/not-an-id").await, 400, "invalid-request").await;
}

#[tokio::test]
async fn a_claim_with_a_lease_gone_is_broken_and_gives_back_the_rest() {
    let app = TestApp::spawn().await;
    let body = r#"{"locks": [{"name": "g1"}, {"name": "g2"}]}"#;
    let claim = claimed(app.post("/claims", body).await, 2).await;
    assert_eq!(app.delete("/locks/g2").await.status(), 204, "force-release");
    // GET shows what is still held.
    let shown: Value = app.get(&claim_path(&claim)).await.json().await.unwrap();
    assert_eq!(shown["leases"].as_array().unwrap().len(), 1, "{shown}");
    let broken = problem(
        app.patch(&claim_path(&claim), "{}").await,
        404,
        "claim-not-found",
    )
    .await;
    assert_eq!(broken["names"], json!(["g2"]), "{broken}");
    assert!(
        !held(&status_of(&app, "/locks/g1").await),
        "the rest released"
    );
}

#[tokio::test]
async fn a_mixed_claim_takes_shared_locks_and_permits() {
    let app = TestApp::spawn().await;
    let body = r#"{"locks": [{"name": "m", "shared": true}], "semaphores": [{"name": "pool", "limit": 3, "permits": 2}], "owner": "mixed"}"#;
    let claim = claimed(app.post("/claims", body).await, 2).await;
    let leases = claim["leases"].as_array().unwrap();
    assert_eq!(leases[0]["name"], "m");
    assert_eq!(leases[0]["shared"], true);
    assert_eq!(leases[1]["name"], "pool");
    assert_eq!(
        (leases[1]["limit"].clone(), leases[1]["permits"].clone()),
        (json!(3), json!(2))
    );
    assert_ne!(leases[0]["id"], leases[1]["id"]);

    let pool = status_of(&app, "/semaphores/pool").await;
    assert_eq!(
        (pool["used"].clone(), pool["holders"].clone()),
        (json!(2), json!(1))
    );
    // A reader beside it is fine; two more permits are not.
    let reader = app.acquire_lock("m", r#"{"shared": true}"#).await;
    let body = r#"{"locks": [{"name": "m2"}], "semaphores": [{"name": "pool", "limit": 3, "permits": 2}]}"#;
    let refused = problem(app.post("/claims", body).await, 409, "claim-refused").await;
    assert_eq!(refused["names"], json!(["pool"]));
    assert!(!held(&status_of(&app, "/locks/m2").await));
    assert_eq!(
        app.delete(&lease_path("locks", &reader)).await.status(),
        204
    );
    assert_eq!(app.delete(&claim_path(&claim)).await.status(), 204);
    assert!(!held(&status_of(&app, "/semaphores/pool").await));
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_wait_leaves_nothing_behind() {
    let (a, b) = two_instances().await;
    let holder = a.acquire_lock("h2", "{}").await;
    let body = r#"{"locks": [{"name": "h1"}, {"name": "h2"}], "wait_ms": 60000}"#;
    let waiting = b.post_in_background("/claims", body);
    until_status(&a, "/locks/h2", "the claim waits for h2", |s| {
        s["waiting"] == 1
    })
    .await;
    assert!(
        held(&status_of(&a, "/locks/h1").await),
        "it holds h1 meanwhile"
    );

    waiting.abort();
    until_status(&a, "/locks/h1", "h1 released", |s| !held(s)).await;
    until_status(&a, "/locks/h2", "the line left", |s| s["waiting"] == 0).await;
    assert_eq!(a.get(&lease_path("locks", &holder)).await.status(), 200);
}

#[tokio::test]
async fn a_waiting_claim_says_which_names_it_holds() {
    let app = TestApp::spawn().await;
    let holder = app.acquire_lock("p2", "{}").await;
    let events = app
        .client
        .post(format!("{}/claims", app.base))
        .header("accept", "text/event-stream")
        .body(r#"{"locks": [{"name": "p1"}, {"name": "p2"}], "wait_ms": 30000}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut events = events;
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text.contains("event: queued") {
        assert!(Instant::now() < deadline, "no queued event: {text}");
        let chunk = tokio::time::timeout(Duration::from_secs(20), events.chunk()).await;
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap().unwrap()));
    }
    assert!(
        text.contains(r#""held":[{"kind":"lock","name":"p1"}]"#),
        "{text}"
    );
    assert!(
        text.contains(r#""waiting_for":{"kind":"lock","name":"p2"}"#),
        "{text}"
    );
    assert_eq!(
        app.delete(&lease_path("locks", &holder)).await.status(),
        204
    );
    while !text.contains("event: acquired") {
        assert!(Instant::now() < deadline, "no acquired event: {text}");
        let chunk = tokio::time::timeout(Duration::from_secs(20), events.chunk()).await;
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap().unwrap()));
    }
}

#[tokio::test]
async fn a_claim_names_one_to_sixteen_names_each_once() {
    let app = TestApp::spawn().await;
    let seventeen: Vec<Value> = (0..17).map(|i| json!({"name": format!("n{i}")})).collect();
    // One name is a claim too (a pipeline template's list may have one).
    let one = claimed(
        app.post("/claims", r#"{"locks": [{"name": "alone"}]}"#)
            .await,
        1,
    )
    .await;
    let id = one["id"].as_str().expect("id");
    assert_eq!(app.delete(&format!("/claims/{id}")).await.status(), 204);
    let cases = [
        (json!({}), "names"),
        (json!({"locks": seventeen}), "names"),
        (json!({"locks": [{"name": "a"}, {"name": "a"}]}), "twice"),
        (
            json!({"locks": [{"name": "a"}], "semaphores": [{"name": "s"}]}),
            "semaphores[0].limit",
        ),
        (
            json!({"locks": [{"name": "a"}], "semaphores": [{"name": "s", "limit": 1, "permits": 2}]}),
            "permits",
        ),
        (
            json!({"locks": [{"name": "a"}, {"name": ""}]}),
            "locks[1].name",
        ),
        (
            json!({"locks": [{"name": "a"}, {"name": "b"}], "priority": 10}),
            "priority",
        ),
        (
            json!({"locks": [{"name": "a"}, {"name": "b"}], "ttl_ms": 0}),
            "ttl_ms",
        ),
        (
            json!({"locks": [{"name": "a"}, {"name": "b"}], "newest_wins": true}),
            "newest_wins",
        ),
    ];
    for (body, field) in cases {
        let refused = problem(
            app.post("/claims", &body.to_string()).await,
            400,
            "invalid-request",
        )
        .await;
        assert!(
            refused["detail"].as_str().unwrap().contains(field),
            "{body}: {refused}"
        );
    }
    // The same name as a lock and as a semaphore: two resources.
    let body = r#"{"locks": [{"name": "a"}], "semaphores": [{"name": "a", "limit": 1}]}"#;
    claimed(app.post("/claims", body).await, 2).await;
}

/// Four clients on two instances take overlapping claims, each listing its
/// names in its own order, many times: every claim succeeds, and no lock is
/// ever held by two claims at once (nor a semaphore past its limit).
async fn overlapping_claims(apps: [TestApp; 2], names: [&'static str; 4], rounds: usize) {
    let apps = Arc::new(apps);
    let inside: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let mut clients = Vec::new();
    for client in 0..4usize {
        let (apps, inside) = (apps.clone(), inside.clone());
        clients.push(tokio::spawn(async move {
            let app = &apps[client % 2];
            // Overlapping sets, listed in opposite orders.
            let mut mine: Vec<&str> = names.iter().copied().skip(client % 2).take(3).collect();
            if client >= 2 {
                mine.reverse();
            }
            let locks: Vec<Value> = mine.iter().map(|n| json!({"name": n})).collect();
            let body = json!({"locks": locks, "semaphores": [{"name": "seats", "limit": 2}],
                "wait_ms": 120_000, "ttl_ms": 10_000, "owner": format!("client-{client}")});
            for round in 0..rounds {
                let response = app.post("/claims", &body.to_string()).await;
                let status = response.status();
                let claim: Value = response.json().await.unwrap();
                assert_eq!(status, 201, "client {client} round {round}: {claim}");
                {
                    let mut inside = inside.lock().unwrap();
                    for name in &mine {
                        let n = inside.entry((*name).to_owned()).or_default();
                        *n += 1;
                        assert_eq!(*n, 1, "{name} held twice");
                    }
                    let seats = inside.entry("seats".into()).or_default();
                    *seats += 1;
                    assert!(*seats <= 2, "seats past its limit");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                {
                    let mut inside = inside.lock().unwrap();
                    for name in mine.iter().copied().chain(["seats"]) {
                        *inside.get_mut(name).unwrap() -= 1;
                    }
                }
                let path = claim_path(&claim);
                assert_eq!(app.delete(&path).await.status(), 204, "release {claim}");
            }
        }));
    }
    for client in clients {
        tokio::time::timeout(Duration::from_secs(240), client)
            .await
            .expect("no claim waits forever (no deadlock)")
            .expect("client");
    }
}

#[tokio::test]
async fn overlapping_claims_in_opposite_orders_all_succeed_and_never_overlap() {
    let (a, b) = two_instances().await;
    overlapping_claims([a, b], ["o1", "o2", "o3", "o4"], 25).await;
}

#[tokio::test]
async fn overlapping_claims_on_a_cluster_with_names_on_different_masters() {
    let cluster = shared_cluster();
    let settings: Settings = cluster_settings(cluster);
    let names = ["c-alpha", "c-bravo", "c-charlie", "c-delta"];
    let masters: std::collections::HashSet<u16> = names
        .iter()
        .map(|n| cluster.master_of(&format!("{}{{lock:{n}}}:owners", settings.key_prefix)))
        .collect();
    assert!(masters.len() >= 2, "the names live on different masters");
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    // A claim's record works from any instance there too.
    let body = json!({"locks": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()});
    let claim = claimed(a.post("/claims", &body.to_string()).await, 4).await;
    assert_eq!(b.patch(&claim_path(&claim), "{}").await.status(), 200);
    assert_eq!(b.get(&claim_path(&claim)).await.status(), 200);
    assert_eq!(b.delete(&claim_path(&claim)).await.status(), 204);
    overlapping_claims([a, b], names, 10).await;
}

#[tokio::test]
async fn a_claim_whose_held_lease_lapses_in_a_stall_starts_over_and_answers_only_held_leases() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let b = a.sibling_of(&redis.url()).await;
    let holder = a.acquire_lock("s2", r#"{"ttl_ms": 60000}"#).await;
    let body = r#"{"locks": [{"name": "s1"}, {"name": "s2"}], "wait_ms": 60000, "ttl_ms": 1000}"#;
    let waiting = b.post_in_background("/claims", body);
    until_status(&a, "/locks/s2", "the claim waits for s2", |s| {
        s["waiting"] == 1
    })
    .await;
    let first = status_of(&a, "/locks/s1").await;
    assert!(held(&first), "{first}");

    // Redis stalls for 3 s: the claim's lease of s1 (ttl 1 s) lapses before
    // its keep-alive can refresh it, so the claim gives back and starts over.
    redis
        .stall(3)
        .join()
        .expect("stall thread")
        .expect("DEBUG SLEEP");
    assert_eq!(a.delete(&lease_path("locks", &holder)).await.status(), 204);
    let answer = answer_of(waiting, "the claim").await;
    let claim = claimed(answer.response, 2).await;
    // Every lease answered is held (s1's is a new lease, not the lapsed one).
    for lease in claim["leases"].as_array().unwrap() {
        let check = a.get(&lease_path("locks", lease)).await;
        assert_eq!(check.status(), 200, "{lease} answered but not held");
    }
    let s1 = &claim["leases"][0];
    assert!(
        s1["fencing_token"].as_u64() > first["fencing_token"].as_u64(),
        "s1 taken again after it lapsed: {s1} after {first}"
    );
}

#[tokio::test]
async fn a_claim_s_priority_places_it_in_each_name_s_line() {
    let app = TestApp::spawn().await;
    let holder = app.acquire_lock("q2", "{}").await;
    let plain = app.post_in_background("/locks/q2", r#"{"wait_ms": 30000, "owner": "plain"}"#);
    until_status(&app, "/locks/q2", "the plain waiter joins", |s| {
        s["waiting"] == 1
    })
    .await;
    let body = r#"{"locks": [{"name": "q1"}, {"name": "q2"}], "wait_ms": 30000, "priority": 5, "owner": "urgent"}"#;
    let claim = app.post_in_background("/claims", body);
    until_status(&app, "/locks/q2", "the claim joins", |s| s["waiting"] == 2).await;
    let line = status_of(&app, "/locks/q2").await;
    assert_eq!(line["waiters"][0]["owner"], "urgent", "{line}");
    assert_eq!(line["waiters"][0]["priority"], 5, "{line}");

    assert_eq!(
        app.delete(&lease_path("locks", &holder)).await.status(),
        204
    );
    let claim = claimed(answer_of(claim, "the claim").await.response, 2).await;
    assert_eq!(app.delete(&claim_path(&claim)).await.status(), 204);
    assert_eq!(
        answer_of(plain, "the plain waiter").await.response.status(),
        201
    );
}

#[tokio::test]
async fn a_claim_s_leases_are_ordinary_leases_of_their_names() {
    let app = TestApp::spawn().await;
    let body = r#"{"locks": [{"name": "o-a"}], "semaphores": [{"name": "o-b", "limit": 2}], "owner": "claimer"}"#;
    let claim = claimed(app.post("/claims", body).await, 2).await;
    let lock = &claim["leases"][0];

    // Status and listing show it; the holder's stream follows it.
    assert_eq!(status_of(&app, "/locks/o-a").await["owner"], "claimer");
    let listing: Value = app.get("/semaphores?prefix=o-").await.json().await.unwrap();
    assert_eq!(listing["semaphores"][0]["name"], "o-b", "{listing}");
    let mut stream = app
        .client
        .get(format!("{}{}/events", app.base, lease_path("locks", lock)))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(20), stream.chunk()).await;
    let first = String::from_utf8_lossy(&first.unwrap().unwrap().unwrap()).into_owned();
    assert!(first.contains("event: held"), "{first}");
    drop(stream);

    // Its history has it, held, then released by the claim.
    let history: Value = app.get("/locks/o-a/history").await.json().await.unwrap();
    assert_eq!(history["entries"][0]["end"], "held", "{history}");
    assert_eq!(
        history["entries"][0]["fencing_token"],
        lock["fencing_token"]
    );
    assert_eq!(app.delete(&claim_path(&claim)).await.status(), 204);
    let history: Value = app.get("/locks/o-a/history").await.json().await.unwrap();
    assert_eq!(history["entries"][0]["end"], "released", "{history}");
}

/// A claim costs its names' ordinary calls and its record, nothing per
/// name beyond a lease's: an uncontended claim of two free names, taken and
/// released, runs this many Redis commands (the fewest of five tries, since
/// a keep-alive may fall into one).
#[tokio::test]
async fn an_uncontended_claim_of_two_names_costs_a_fixed_number_of_commands() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with(settings_for(&redis.url(), &unique_prefix())).await;
    let body = r#"{"locks": [{"name": "c1"}, {"name": "c2"}]}"#;
    let mut fewest = u64::MAX;
    for _ in 0..5 {
        let before = redis.commands().0;
        let claim = claimed(app.post("/claims", body).await, 2).await;
        assert_eq!(app.delete(&claim_path(&claim)).await.status(), 204);
        fewest = fewest.min(redis.commands().0 - before);
    }
    // Each name's acquire and release as a single lease's cycle (9 with
    // history), the check that the first lease is still held before the
    // 201 (3: a lease Redis lost while the claim took the second must not
    // be answered), and four for the record: its SET when taken; two GETs (the
    // caller's scopes, then the release) and its DEL when released.
    assert_eq!(fewest, CLAIM_OF_TWO_COMMANDS, "commands per claim cycle");
}

#[tokio::test]
async fn overlapping_claims_on_sentinel() {
    let settings = sentinel_settings(shared_sentinels());
    let a = TestApp::spawn_with(settings.clone()).await;
    let b = TestApp::spawn_with(settings).await;
    overlapping_claims([a, b], ["s-1", "s-2", "s-3", "s-4"], 8).await;
}
