//! The expected wait (`eta_ms`, `eta_basis`): absent below 3 finished holds;
//! on a steady workload (fixed holds, several waiters) each waiter's
//! estimate, read from the status and from a ticket, is within 25% of the
//! wait it then had, for a lock and for a semaphore of limit 3.

use std::time::Duration;

use serde_json::Value;
use std::time::Instant;

use baton_testkit::{join_line, lease_path, TestApp};

/// Every hold of the workload.
const HOLD: Duration = Duration::from_millis(1200);
/// What the machine's scheduling may add to a real wait, besides the 25%.
const JITTER: Duration = Duration::from_millis(150);

/// Takes `path` with `body` (201), holds it for [`HOLD`] and releases it.
async fn one_hold(app: &TestApp, path: &str, body: &str) {
    let response = app.post(path, body).await;
    assert_eq!(response.status(), 201);
    let lease: Value = response.json().await.expect("lease");
    tokio::time::sleep(HOLD).await;
    let kind = path.split('/').nth(1).expect("kind");
    assert_eq!(app.delete(&lease_path(kind, &lease)).await.status(), 204);
}

/// Releases `lease` (of `kind`) [`HOLD`] after `acquired`.
fn release_after_hold(
    app: &TestApp,
    kind: &'static str,
    lease: Value,
    acquired: Instant,
) -> tokio::task::JoinHandle<()> {
    let client = app.client.clone();
    let url = format!("{}{}", app.base, lease_path(kind, &lease));
    tokio::spawn(async move {
        tokio::time::sleep_until((acquired + HOLD).into()).await;
        let released = client.delete(url).send().await.expect("release");
        assert_eq!(released.status(), 204);
    })
}

/// The steady workload on `path` (a lock, or a semaphore of `holders`
/// permits): `holders` leases taken a hold apart divided among them, three
/// waiters behind them, each holding [`HOLD`] once granted. Returns each
/// waiter's estimate (from the status read right after they joined) and its
/// real wait from that read.
async fn steady(
    app: &TestApp,
    path: &str,
    hold_body: &str,
    wait_body: &str,
    holders: u32,
) -> Vec<(u64, u64)> {
    let kind = if path.starts_with("/locks/") {
        "locks"
    } else {
        "semaphores"
    };
    // The history: 3 finished holds of HOLD.
    for _ in 0..3 {
        one_hold(app, path, hold_body).await;
    }
    let mut releases = Vec::new();
    for i in 0..holders {
        if i > 0 {
            tokio::time::sleep(HOLD / holders).await;
        }
        let response = app.post(path, hold_body).await;
        assert_eq!(response.status(), 201);
        let lease: Value = response.json().await.expect("lease");
        releases.push(release_after_hold(app, kind, lease, Instant::now()));
    }
    let mut waiters = Vec::new();
    for _ in 0..3 {
        waiters.push(join_line(app, path, wait_body, app).await);
    }
    let read = Instant::now();
    let status: Value = app.get(path).await.json().await.expect("status");
    let estimates: Vec<u64> = status["waiters"]
        .as_array()
        .expect("waiters")
        .iter()
        .map(|w| {
            assert!(
                w["eta_basis"]["holds"].as_u64().is_some_and(|n| n >= 3),
                "{w}"
            );
            w["eta_ms"]
                .as_u64()
                .unwrap_or_else(|| panic!("no eta: {status}"))
        })
        .collect();
    assert_eq!(estimates.len(), 3, "{status}");
    let mut real = Vec::new();
    for waiter in waiters {
        let answer = waiter.await.expect("waiter");
        let granted = answer.at;
        assert_eq!(answer.response.status(), 201);
        let lease: Value = answer.response.json().await.expect("lease");
        real.push(u64::try_from((granted - read).as_millis()).expect("ms"));
        releases.push(release_after_hold(app, kind, lease, granted));
    }
    for release in releases {
        release.await.expect("release");
    }
    estimates.into_iter().zip(real).collect()
}

fn assert_within_a_quarter(what: &str, pairs: &[(u64, u64)]) {
    println!("{what}: place, estimate ms, real wait ms");
    for (place, (estimate, real)) in pairs.iter().enumerate() {
        println!("  {} {estimate} {real}", place + 1);
    }
    for (place, &(estimate, real)) in pairs.iter().enumerate() {
        let margin = real / 4 + u64::try_from(JITTER.as_millis()).expect("ms");
        assert!(
            estimate.abs_diff(real) <= margin,
            "{what}: place {} estimated {estimate} ms, waited {real} ms",
            place + 1
        );
    }
}

#[tokio::test]
async fn no_estimate_below_three_finished_holds() {
    let app = TestApp::spawn().await;
    one_hold(&app, "/locks/eta-new", r#"{"ttl_ms": 30000}"#).await;
    let lease = app.acquire_lock("eta-new", r#"{"ttl_ms": 30000}"#).await;
    let waiter = join_line(&app, "/locks/eta-new", r#"{"wait_ms": 10000}"#, &app).await;
    let status: Value = app
        .get("/locks/eta-new")
        .await
        .json()
        .await
        .expect("status");
    assert_eq!(status["waiters"][0]["position"], 1, "{status}");
    assert!(status["waiters"][0].get("eta_ms").is_none(), "{status}");
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
    assert_eq!(waiter.await.expect("waiter").response.status(), 201);
}

#[tokio::test]
async fn a_lock_s_estimates_are_within_a_quarter_of_the_real_waits() {
    let app = TestApp::spawn().await;
    let pairs = steady(
        &app,
        "/locks/eta-lock",
        r#"{"ttl_ms": 30000}"#,
        r#"{"ttl_ms": 30000, "wait_ms": 30000}"#,
        1,
    )
    .await;
    assert_within_a_quarter("lock", &pairs);
}

#[tokio::test]
async fn a_semaphore_s_estimates_are_within_a_quarter_of_the_real_waits() {
    let app = TestApp::spawn().await;
    let pairs = steady(
        &app,
        "/semaphores/eta-pool",
        r#"{"ttl_ms": 30000, "limit": 3}"#,
        r#"{"ttl_ms": 30000, "limit": 3, "wait_ms": 30000}"#,
        3,
    )
    .await;
    assert_within_a_quarter("semaphore of 3", &pairs);
}

#[tokio::test]
async fn a_ticket_shows_its_expected_wait() {
    let app = TestApp::spawn().await;
    for _ in 0..3 {
        one_hold(&app, "/locks/eta-ticket", r#"{"ttl_ms": 30000}"#).await;
    }
    let lease = app.acquire_lock("eta-ticket", r#"{"ttl_ms": 30000}"#).await;
    let taken = app
        .post("/locks/eta-ticket", r#"{"keep_place_ms": 60000}"#)
        .await;
    assert_eq!(taken.status(), 202);
    let ticket: Value = taken.json().await.expect("ticket");
    let at = format!(
        "/locks/eta-ticket/tickets/{}",
        ticket["ticket"].as_str().expect("id")
    );
    let shown: Value = app.get(&at).await.json().await.expect("ticket state");
    assert_eq!(shown["state"], "waiting", "{shown}");
    let eta = shown["eta_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("{shown}"));
    // Place 1 behind a lease just taken: about one typical hold.
    let hold = u64::try_from(HOLD.as_millis()).expect("ms");
    assert!(eta.abs_diff(hold) <= hold / 4, "{shown}");
    assert_eq!(shown["eta_basis"]["holds"], 3, "{shown}");
    assert_eq!(app.delete(&at).await.status(), 204);
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
}
