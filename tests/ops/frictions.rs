//! The command line's smaller frictions, on the real binary: `--override`
//! and `--ask-yield`, `history` and `yield` of a semaphore without
//! `--limit`, a `--url` that does not speak HTTP, a frozen wait's quiet
//! waiting line, help pages that list only the exit statuses their command
//! can return, `--until` as a date, and `baton freeze --check`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::service::{baton, run, Service};
use baton_testkit::shared_redis;

const LIMIT: Duration = Duration::from_secs(30);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `POST /freezes` with `body` (the service has no tokens: anyone may).
async fn freeze(service: &Service, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/freezes", service.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

/// An RFC 3339 time `ahead` from now.
fn from_now(ahead: Duration) -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now() + ahead).to_string()
}

#[tokio::test]
async fn override_takes_a_frozen_name_and_the_history_keeps_the_reason() {
    let service = Service::on_shared_redis().await;
    freeze(
        &service,
        serde_json::json!({"match": "deploy", "until": from_now(Duration::from_secs(3600)),
            "reason": "weekend"}),
    )
    .await;
    let out = run(
        baton().args([
            "acquire",
            "--url",
            &service.base,
            "--wait",
            "0",
            "--override",
            "hotfix 1234",
            "--output",
            "json",
            "deploy",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page: Value = reqwest::get(format!("{}/locks/deploy/history", service.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["entries"][0]["override"], "hotfix 1234", "{page}");
}

/// A claim takes `--override` and `--priority` as one lease does: `baton
/// run --lock A --lock B --override REASON` runs through a freeze of both,
/// and each lease's history entry keeps the reason.
#[tokio::test]
async fn a_claim_takes_override_and_its_leases_keep_the_reason() {
    let service = Service::on_shared_redis().await;
    freeze(
        &service,
        serde_json::json!({"match": "claim-deploy-*", "until": from_now(Duration::from_secs(3600)),
            "reason": "weekend"}),
    )
    .await;
    let out = run(
        baton().args([
            "run",
            "--url",
            &service.base,
            "--wait",
            "0",
            "--priority",
            "3",
            "--override",
            "hotfix 99",
            "--lock",
            "claim-deploy-a",
            "--lock",
            "claim-deploy-b",
            "--",
            "true",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for name in ["claim-deploy-a", "claim-deploy-b"] {
        let page: Value = reqwest::get(format!("{}/locks/{name}/history", service.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(page["entries"][0]["override"], "hotfix 99", "{page}");
        assert_eq!(page["entries"][0]["priority"], 3, "{page}");
    }
}

#[tokio::test]
async fn ask_yield_asks_the_holder_when_the_request_has_to_wait() {
    let service = Service::on_shared_redis().await;
    let client = reqwest::Client::new();
    let lease: Value = client
        .post(format!("{}/locks/busy", service.base))
        .body(r#"{"ttl_ms": 60000, "owner": "the holder"}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut events = client
        .get(format!("{}/events?prefix=busy", service.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut waiter = baton()
        .args([
            "acquire",
            "--url",
            &service.base,
            "--wait",
            "30s",
            "--owner",
            "the hotfix",
            "--ask-yield",
            "busy",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while !seen.contains("event: yield-requested") {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            _ => {
                let _ = waiter.kill();
                let mut stderr = String::new();
                let _ = waiter.stderr.take().unwrap().read_to_string(&mut stderr);
                panic!("no yield-requested event; events: {seen}; baton: {stderr}");
            }
        }
    }
    let id = lease["id"].as_str().unwrap();
    let released = client
        .delete(format!("{}/locks/busy/{id}", service.base))
        .send()
        .await
        .unwrap();
    assert_eq!(released.status(), 204);
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = waiter.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the waiter never got the lock");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn history_and_yield_of_a_semaphore_need_no_limit() {
    let service = Service::on_shared_redis().await;
    let client = reqwest::Client::new();
    let url = format!("{}/semaphores/pool", service.base);
    let take = || async {
        let lease: Value = client
            .post(&url)
            .body(r#"{"limit": 3, "ttl_ms": 60000, "owner": "builder"}"#)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        lease
    };
    let first = take().await;
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        client
            .delete(format!("{url}/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let out = run(
        baton().args(["history", "--url", &service.base, "pool"]),
        LIMIT,
    );
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        said.starts_with("semaphore 'pool', newest first:\n") && said.contains("builder"),
        "{said}"
    );
    // Of a name nobody ever held, it says so of both kinds.
    let out = run(
        baton().args(["history", "--url", &service.base, "never"]),
        LIMIT,
    );
    assert!(
        text(&out.stdout).contains("neither the lock nor the semaphore 'never'"),
        "{}",
        text(&out.stdout)
    );

    take().await;
    let out = run(
        baton().args(["yield", "--url", &service.base, "pool"]),
        LIMIT,
    );
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("asked the holder of semaphore 'pool' to yield"),
        "{said}"
    );
}

/// A listener that greets every connection as an SSH server does.
fn ssh_like() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            let _ = conn.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
        }
    });
    url
}

#[test]
fn a_url_that_does_not_speak_http_fails_at_once() {
    // Redis closes a connection that sends it HTTP; an SSH server greets.
    let redis = format!("http://127.0.0.1:{}", shared_redis().port);
    for url in [redis, ssh_like()] {
        for args in [
            &["acquire", "--url", &url, "--wait", "10m", "x"][..],
            &["run", "--url", &url, "x", "--", "true"],
            &["status", "--url", &url, "x"],
        ] {
            // The --wait is 10 minutes, and failures that may pass are retried
            // for a minute: LIMIT is far from either.
            let out = run(baton().args(args), LIMIT);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(69), "{args:?}: {stderr}");
            assert!(stderr.contains("does not speak HTTP"), "{args:?}: {stderr}");
        }
    }
}

#[tokio::test]
async fn a_frozen_wait_says_its_waiting_line_once_while_it_does_not_change() {
    let service = Service::on_shared_redis().await;
    freeze(
        &service,
        serde_json::json!({"match": "frozen-name", "until": from_now(Duration::from_secs(14)),
            "reason": "incident"}),
    )
    .await;
    let out = run(
        baton().args([
            "run",
            "--url",
            &service.base,
            "--wait",
            "60s",
            "frozen-name",
            "--",
            "true",
        ]),
        Duration::from_secs(60),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // (A line that the grant changes, "granted, collecting", may follow.)
    let frozen = stderr
        .lines()
        .filter(|l| l.contains("waiting for") && l.contains("frozen until"))
        .count();
    // Every 5 s, this would be about three lines.
    assert_eq!(frozen, 1, "{stderr}");
}

#[test]
fn help_pages_list_only_the_exit_statuses_their_command_can_return() {
    let help = |command: &str| {
        let out = run(baton().args([command, "--help"]), LIMIT);
        assert!(out.status.success(), "{command}");
        let said = text(&out.stdout);
        let statuses = said
            .split_once("Exit status:\n")
            .unwrap_or_else(|| panic!("{command}: {said}"))
            .1
            .to_owned();
        statuses
    };
    let has = |statuses: &str, status: &str| {
        statuses
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{status} ")))
    };
    for (command, yes, no) in [
        (
            "history",
            &["64", "69", "77"][..],
            &["66", "75", "76", "79"][..],
        ),
        ("status", &["64", "69", "77"], &["75", "76", "79"]),
        ("yield", &["64", "69", "77"], &["75", "76", "79"]),
        ("release", &["64", "69", "76", "77"], &["75", "79"]),
        ("refresh", &["64", "69", "76", "77"], &["75", "79"]),
        ("acquire", &["64", "69", "75", "77", "79"], &["76"]),
        ("unfreeze", &["64", "66", "69", "77"], &["75", "76", "79"]),
        ("freeze", &["64", "69", "75", "77"], &["76", "79"]),
        ("leave", &["64", "66", "69", "77"], &["75", "76", "79"]),
    ] {
        let statuses = help(command);
        for status in yes {
            assert!(
                has(&statuses, status),
                "{command} lists {status}: {statuses}"
            );
        }
        for status in no {
            assert!(
                !has(&statuses, status),
                "{command} cannot return {status}: {statuses}"
            );
        }
    }
}

#[tokio::test]
async fn unfreeze_of_an_unknown_id_exits_66_not_64() {
    let service = Service::on_shared_redis().await;
    let out = run(
        baton().args([
            "unfreeze",
            "--url",
            &service.base,
            "3b241101-e2bb-4255-8caf-4136c566a962",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(66), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no freeze"));
    // Not a UUID at all: that is bad usage.
    let out = run(
        baton().args(["unfreeze", "--url", &service.base, "x"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(64));
}

#[tokio::test]
async fn until_takes_a_date_as_midnight_utc_at_its_start() {
    let service = Service::on_shared_redis().await;
    let day = (chrono::Utc::now() + chrono::Duration::days(3))
        .format("%Y-%m-%d")
        .to_string();
    let out = run(
        baton().args([
            "freeze",
            "--url",
            &service.base,
            "--until",
            &day,
            "--output",
            "json",
            "dated",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let made: Value = serde_json::from_slice(&out.stdout).expect("json");
    let until = made["until"].as_str().expect("until");
    assert!(until.starts_with(&format!("{day}T00:00:00")), "{made}");
    assert!(until.ends_with('Z'), "{made}");
    let out = run(
        baton().args([
            "freeze",
            "--url",
            &service.base,
            "--until",
            "2026-13-01",
            "x",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
}

#[tokio::test]
async fn freeze_check_exits_75_while_the_name_is_frozen_and_0_when_not() {
    let service = Service::on_shared_redis().await;
    let check = |extra: &[&str]| {
        let mut cmd = baton();
        cmd.args(["freeze", "--url", &service.base, "--check"])
            .args(extra)
            .arg("deploy-prod");
        run(&mut cmd, LIMIT)
    };
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");

    let made = freeze(
        &service,
        serde_json::json!({"match": "deploy-*", "kind": "lock",
            "until": from_now(Duration::from_secs(3600)), "reason": "release weekend"}),
    )
    .await;
    let out = check(&[]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    assert!(
        said.contains(made["id"].as_str().unwrap()) && said.contains("release weekend"),
        "{said}"
    );
    // The freeze holds locks only.
    let out = check(&["--kind", "semaphore"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // A freeze that starts later does not hold it now.
    let out = run(
        baton().args([
            "freeze",
            "--url",
            &service.base,
            "--check",
            "--kind",
            "lock",
            "staging",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0));
    freeze(
        &service,
        serde_json::json!({"match": "staging", "from": from_now(Duration::from_secs(3600)),
            "until": from_now(Duration::from_secs(7200))}),
    )
    .await;
    let out = run(
        baton().args(["freeze", "--url", &service.base, "--check", "staging"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}
