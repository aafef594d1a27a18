//! `baton run --wait` keeps its place in line across the service's longest
//! wait (`BATON_MAX_WAIT_MS`): through a freeze longer than it, the runs go
//! in the order they joined, and exit 0.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use baton_testkit::service::{baton, run, Service};
use baton_testkit::{shared_redis, unique_prefix};

#[tokio::test]
async fn runs_wait_through_a_freeze_longer_than_the_longest_wait_in_line_order() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &prefix),
        ("BATON_MAX_WAIT_MS", "1000"),
    ])
    .await;
    let url = service.base.clone();
    let made = run(
        baton().args(["freeze", "--url", &url, "--for", "5s", "ship"]),
        Duration::from_secs(30),
    );
    assert!(made.status.success(), "{made:?}");
    let out = std::env::temp_dir().join(format!("baton-ticket-order-{}", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let client = reqwest::Client::new();
    let mut runs = Vec::new();
    for n in 1..=2 {
        let script = format!("echo {n} >> '{}'", out.display());
        let child = baton()
            .args([
                "run", "--url", &url, "--wait", "60s", "ship", "--", "sh", "-c", &script,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton run");
        runs.push(child);
        // In line before the next one joins.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status: Value = client
                .get(format!("{url}/locks/ship"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if status["waiting"] == json!(n) {
                break;
            }
            assert!(Instant::now() < deadline, "run {n} never joined: {status}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for child in runs {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .expect("run ends");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let order = std::fs::read_to_string(&out).expect("both ran");
    assert_eq!(order, "1\n2\n");
    let _ = std::fs::remove_file(&out);
}

#[tokio::test]
async fn enqueue_prints_a_ticket_that_run_waits_on_and_leave_gives_up() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &prefix),
    ])
    .await;
    let url = service.base.clone();
    let limit = Duration::from_secs(30);
    let held = run(
        baton().args(["acquire", "--url", &url, "--output", "env", "queue-me"]),
        limit,
    );
    assert!(held.status.success(), "{held:?}");
    let vars = |out: &std::process::Output| -> Vec<(String, String)> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let lease = vars(&held);
    let enqueued = run(
        baton().args([
            "enqueue", "--url", &url, "--keep", "1h", "--output", "env", "queue-me",
        ]),
        limit,
    );
    assert!(enqueued.status.success(), "{enqueued:?}");
    let ticket = vars(&enqueued);
    assert!(
        ticket.iter().any(|(k, _)| k == "BATON_TICKET"),
        "{ticket:?}"
    );
    assert!(
        ticket.contains(&("BATON_KIND".into(), "lock".into())),
        "{ticket:?}"
    );
    // Released: the ticket's turn; `baton run` with BATON_TICKET collects it.
    let released = run(
        baton()
            .args(["release", "--url", &url])
            .envs(lease.iter().map(|(k, v)| (k, v))),
        limit,
    );
    assert!(released.status.success(), "{released:?}");
    let ran = run(
        baton()
            .args([
                "run", "--url", &url, "--wait", "10s", "queue-me", "--", "true",
            ])
            .envs(ticket.iter().map(|(k, v)| (k, v))),
        limit,
    );
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    // A second ticket (behind a holder), given up.
    let held = run(baton().args(["acquire", "--url", &url, "queue-me"]), limit);
    assert!(held.status.success(), "{held:?}");
    let again = run(
        baton().args(["enqueue", "--url", &url, "--output", "env", "queue-me"]),
        limit,
    );
    let again = vars(&again);
    let left = run(
        baton()
            .args(["leave", "--url", &url])
            .envs(again.iter().map(|(k, v)| (k, v))),
        limit,
    );
    assert!(left.status.success(), "{left:?}");
    let left_again = run(
        baton()
            .args(["leave", "--url", &url])
            .envs(again.iter().map(|(k, v)| (k, v))),
        limit,
    );
    assert!(!left_again.status.success(), "{left_again:?}");
    // Waiting on a ticket, the progress line shows the ticket's place; when
    // --wait runs out the run exits 75 (the lock is still held).
    let third = run(
        baton().args(["enqueue", "--url", &url, "--output", "env", "queue-me"]),
        limit,
    );
    let third = vars(&third);
    let waited = run(
        baton()
            .args([
                "run", "--url", &url, "--wait", "6s", "queue-me", "--", "true",
            ])
            .envs(third.iter().map(|(k, v)| (k, v))),
        limit,
    );
    let stderr = String::from_utf8_lossy(&waited.stderr);
    assert_eq!(waited.status.code(), Some(75), "{stderr}");
    assert!(
        stderr.contains("waiting for lock 'queue-me': place 1 of 1 in line; held by "),
        "{stderr}"
    );
}
