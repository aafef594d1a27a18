//! The one-step commands as a CI job uses them (a semaphore taken in one step
//! and released in a later one, from the variables alone), and the small
//! things a script meets: `--quiet`, a closed pipe, the names `.` and `..`,
//! values safe to `eval`, and a mistyped `--url`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use baton_testkit::baton_binary;
use baton_testkit::free_port;
use baton_testkit::service::{baton, run, Service};

const LIMIT: Duration = Duration::from_secs(20);

/// `KEY=value` lines as variables.
fn variables(stdout: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

async fn status_of(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_semaphore_taken_in_one_step_is_shown_refreshed_and_released_from_the_variables() {
    let service = Service::on_shared_redis().await;
    let acquired = run(
        baton().args([
            "acquire",
            "--url",
            &service.base,
            "--limit",
            "4",
            "--permits",
            "3",
            "--output",
            "env",
            "builders",
        ]),
        LIMIT,
    );
    assert_eq!(acquired.status.code(), Some(0));
    let vars = variables(&acquired.stdout);
    for (key, value) in [("BATON_KIND", "semaphore"), ("BATON_LIMIT", "4")] {
        assert!(
            vars.iter().any(|(k, v)| k == key && v == value),
            "{key}={value} in {vars:?}"
        );
    }
    // A later step: nothing but those variables and the service's URL.
    let step = |args: &[&str]| {
        run(
            baton()
                .args(args)
                .env("BATON_URL", &service.base)
                .envs(vars.iter().map(|(k, v)| (k, v))),
            LIMIT,
        )
    };
    let shown = step(&["status"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    assert!(
        text.contains("semaphore 'builders': 3 of 4 permits used"),
        "{text}"
    );
    let refreshed = step(&["refresh", "--ttl", "2m"]);
    assert_eq!(refreshed.status.code(), Some(0), "{refreshed:?}");
    let released = step(&["release"]);
    assert_eq!(released.status.code(), Some(0), "{released:?}");
    let status = status_of(&format!("{}/semaphores/builders", service.base)).await;
    assert_eq!(status["holders"], 0, "{status}");
    assert_eq!(status["leases"], serde_json::json!([]), "{status}");
    // Released once: the second time, the lease is gone.
    assert_eq!(step(&["release"]).status.code(), Some(76));
}

#[tokio::test]
async fn status_of_a_name_without_kind_shows_the_semaphore_in_use() {
    let service = Service::on_shared_redis().await;
    for _ in 0..2 {
        let out = run(
            baton().args([
                "acquire",
                "--url",
                &service.base,
                "--limit",
                "2",
                "-q",
                "pool",
            ]),
            LIMIT,
        );
        assert_eq!(out.status.code(), Some(0));
    }
    let out = run(
        baton().args(["status", "--url", &service.base, "pool"]),
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text.contains("semaphore 'pool': 2 of 2 permits used by 2 leases"),
        "{text}"
    );
    // A name that nothing uses reads as a free lock, as before.
    let out = run(
        baton().args(["status", "--url", &service.base, "idle"]),
        LIMIT,
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "lock 'idle': free; 0 waiting\n"
    );
}

/// `baton history NAME` prints who held the name, newest first, and
/// `--output json` the service's page; with `--priority`, `baton run` waits
/// at that priority and the history says so.
#[tokio::test]
async fn history_shows_who_held_a_name_newest_first() {
    let service = Service::on_shared_redis().await;
    for (owner, priority) in [("first", "0"), ("second", "7")] {
        let out = run(
            baton().args([
                "run",
                "--url",
                &service.base,
                "--owner",
                owner,
                "--priority",
                priority,
                "deploy",
                "--",
                "true",
            ]),
            LIMIT,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run(
        baton().args(["history", "--url", &service.base, "deploy"]),
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = text.find("second priority 7 from").expect(&text);
    let first = text.find("first from").expect(&text);
    assert!(text.starts_with("lock 'deploy', newest first:\n"), "{text}");
    assert!(
        second < first && text.contains(", released after "),
        "{text}"
    );
    let out = run(
        baton().args([
            "history",
            "--url",
            &service.base,
            "--output",
            "json",
            "--last",
            "1",
            "deploy",
        ]),
        LIMIT,
    );
    let page: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(page["entries"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["entries"][0]["owner"], "second", "{page}");
    assert!(page["next_cursor"].is_string(), "{page}");
}

#[tokio::test]
async fn quiet_prints_nothing_when_the_lock_is_simply_not_had() {
    let service = Service::on_shared_redis().await;
    let url = format!("{}/locks/cron", service.base);
    let held = reqwest::Client::new()
        .post(&url)
        .body(r#"{"ttl_ms": 60000, "owner": "the other job"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 201);
    for args in [
        &["run", "--quiet", "--wait", "0", "cron", "--", "true"][..],
        &["run", "-q", "--wait", "1s", "cron", "--", "true"],
        &["acquire", "--quiet", "--wait", "0", "cron"],
    ] {
        let out = run(baton().args(args).env("BATON_URL", &service.base), LIMIT);
        assert_eq!(out.status.code(), Some(75), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "{args:?} says nothing"
        );
    }
    // Errors are still said.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let out = run(
        baton().args(["run", "-q", "--url", &closed, "cron", "--", "true"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(69));
    assert!(!out.stderr.is_empty());
}

/// Runs `baton ARGS` with its stdout a pipe that nobody reads.
fn into_a_closed_pipe(args: &[&str], url: &str) -> std::process::Output {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "a pipe");
    // SAFETY: both were just made and are owned here alone.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let child = baton()
        .args(args)
        .env("BATON_URL", url)
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton starts");
    child.wait_with_output().expect("baton ends")
}

#[tokio::test]
async fn output_cut_short_by_a_closed_pipe_ends_quietly() {
    let service = Service::on_shared_redis().await;
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["status", "x", "--output", "json"],
        &["status", "x"],
        &["list"],
        &["completions", "bash"],
        &["man"],
    ] {
        let out = into_a_closed_pipe(args, &service.base);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
    // A lease that nobody could read is not left behind.
    let out = into_a_closed_pipe(&["acquire", "--output", "env", "lost"], &service.base);
    assert_ne!(out.status.code(), Some(0));
    let status = status_of(&format!("{}/locks/lost", service.base)).await;
    assert_eq!(status["held"], false, "{status}");
}

#[test]
fn the_names_dot_and_dot_dot_are_bad_usage() {
    // Nothing listens there: the name is refused before any call.
    let closed = format!("http://127.0.0.1:{}", free_port());
    for args in [
        &["run", ".", "--", "true"][..],
        &["run", "--limit", "2", "..", "-c", "true"],
        &["acquire", ".."],
        &["status", "."],
        &["release", "..", "3b241101-e2bb-4255-8caf-4136c566a962"],
    ] {
        let out = run(baton().args(args).env("BATON_URL", &closed), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains("dot segment"), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn output_shell_is_safe_to_eval_whatever_the_name() {
    let service = Service::on_shared_redis().await;
    let name = r#"it's "deploy" $HOME `id` prod"#;
    let script = r#"eval "$("$BIN" acquire --output shell "$NAME")" || exit 1
        [ "$BATON_LOCK_NAME" = "$NAME" ] || exit 2
        "$BIN" status > "$D" || exit 3
        "$BIN" release"#;
    let status_file = std::env::temp_dir().join(format!("baton-shell-{}", free_port()));
    let out = run(
        Command::new("sh")
            .args(["-c", script])
            .env("BIN", baton_binary())
            .env("NAME", name)
            .env("D", &status_file)
            .env("BATON_URL", &service.base)
            .env_remove("BATON_LOCK_NAME")
            .env_remove("BATON_LEASE_ID"),
        LIMIT,
    );
    let shown = std::fs::read_to_string(&status_file).unwrap_or_default();
    let _ = std::fs::remove_file(&status_file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("held by"), "{shown}");
    // `--output env` stays KEY=value lines, for $GITHUB_ENV.
    let env = run(
        baton().args(["acquire", "--url", &service.base, "--output", "env", "a b"]),
        LIMIT,
    );
    assert!(
        String::from_utf8_lossy(&env.stdout).starts_with("BATON_LOCK_NAME=a b\n"),
        "{env:?}"
    );
}

#[test]
fn a_url_where_nothing_listens_fails_at_once() {
    let closed = format!("http://127.0.0.1:{}", free_port());
    for args in [
        &["run", "--url", &closed, "x", "--", "true"][..],
        &["acquire", "--url", &closed, "x"],
        &[
            "release",
            "--url",
            &closed,
            "x",
            "3b241101-e2bb-4255-8caf-4136c566a962",
        ],
    ] {
        // The default --wait is 10 minutes: LIMIT is far from it.
        let out = run(baton().args(args), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(69), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot reach") && stderr.contains(&closed),
            "{stderr}"
        );
    }
}

#[test]
fn a_service_that_answers_503_is_waited_for() {
    // A server that answers every request 503, counting them.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answered = Arc::new(AtomicU32::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let body = r#"{"type":"/problems/redis-unavailable","title":"t","status":503,"detail":"Redis is down"}"#;
            let _ = write!(
                conn,
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    let out = run(
        baton().args(["acquire", "--url", &url, "--wait", "3s", "x"]),
        LIMIT,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        answered.load(Ordering::SeqCst) >= 2,
        "asked again after a 503: {stderr}"
    );
}
