//! `baton run` as real processes: a nested run goes ahead only under a lease
//! that the service confirms still covers it, and a `baton run` killed with
//! SIGKILL (its whole process group, as a CI runner's hard timeout does) does
//! not leave COMMAND running beside the next holder.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use baton_testkit::baton_binary;
use baton_testkit::service::{baton, run, Service};

const LIMIT: Duration = Duration::from_secs(30);

/// A fresh directory for one test's files.
fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "baton-{what}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

async fn post(url: &str, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .body(body.to_owned())
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(url: &str) -> (u16, Value) {
    let response = reqwest::get(url).await.expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// How a nested run of the same name went.
#[derive(Debug, PartialEq, Eq)]
enum Nested {
    /// It ran its command at once, under the outer lease (same fencing token).
    AtOnce,
    /// It waited in line like any other, and `--wait 1s` ran out (75).
    Waited,
}

/// What a third party holds of the same name: its kind's path and the body.
type Third = Option<(&'static str, &'static str)>;

#[tokio::test]
async fn a_nested_run_goes_ahead_only_under_a_lease_that_covers_it() {
    let service = Service::on_shared_redis().await;
    // (outer options, nested options, held by a third party, what the nested run does)
    let cases: [(&str, &str, Third, Nested); 9] = [
        ("", "", None, Nested::AtOnce),
        ("", "--shared", None, Nested::AtOnce),
        ("--shared", "--shared", None, Nested::AtOnce),
        // A shared lease does not cover an exclusive ask: the nested run
        // waits, for its own outer lease among others.
        ("--shared", "", None, Nested::Waited),
        ("--limit 2 --permits 2", "--limit 2", None, Nested::AtOnce),
        (
            "--limit 2 --permits 1",
            "--limit 2 --permits 2",
            None,
            Nested::Waited,
        ),
        // A lock run inside a semaphore run of the same name (and the other
        // way round) takes its own kind: here someone else holds that.
        (
            "--limit 2",
            "",
            Some(("locks", r#"{"ttl_ms": 60000}"#)),
            Nested::Waited,
        ),
        (
            "",
            "--limit 1",
            Some(("semaphores", r#"{"limit": 1, "ttl_ms": 60000}"#)),
            Nested::Waited,
        ),
        // Covered: no waiting at all, so --wait 0 is no obstacle.
        ("--shared", "--shared --wait 0", None, Nested::AtOnce),
    ];
    for (n, (outer, nested, third, expected)) in cases.into_iter().enumerate() {
        let dir = scratch("nested");
        let name = format!("nest/{n} x");
        if let Some((kind, body)) = third {
            let url = format!("{}/{kind}/nest%2F{n}%20x", service.base);
            assert_eq!(post(&url, body).await.0, 201, "case {n}: third holder");
        }
        let script = r#"echo "$BATON_FENCING_TOKEN" > "$D/outer"
            echo "$BATON_KIND ${BATON_LIMIT:-}" > "$D/kind"
            "$BIN" run $NESTED "$NAME" -c 'echo "$BATON_FENCING_TOKEN" > "$D/nested"'
            echo $? > "$D/rc""#;
        let out = run(
            baton()
                .args(["run", "--url", &service.base, "--wait", "20s"])
                .args(outer.split_whitespace())
                .args([&name, "-c", script])
                .env("BIN", baton_binary())
                .env("D", &dir)
                .env("NAME", &name)
                // The nested run finds the service from the outer one's --url.
                .env(
                    "NESTED",
                    if nested.contains("--wait") {
                        nested.to_owned()
                    } else {
                        format!("{nested} --wait 1s")
                    },
                )
                // A limit left from a semaphore around is not this lease's.
                .env("BATON_LIMIT", "9"),
            LIMIT,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "case {n}: {stderr}");
        let kind = match outer
            .split_whitespace()
            .skip_while(|o| *o != "--limit")
            .nth(1)
        {
            Some(limit) => format!("semaphore {limit}"),
            None => "lock".to_owned(),
        };
        assert_eq!(
            read(&dir.join("kind")),
            kind,
            "case {n}: BATON_KIND and BATON_LIMIT"
        );
        let (rc, outer_token, nested_token) = (
            read(&dir.join("rc")),
            read(&dir.join("outer")),
            read(&dir.join("nested")),
        );
        let got = match (rc.as_str(), nested_token.as_str()) {
            ("0", token) if token == outer_token => Nested::AtOnce,
            ("75", "") => Nested::Waited,
            _ => panic!(
                "case {n} ({outer:?} around {nested:?}): status {rc}, tokens {outer_token} \
                 and {nested_token:?}; {stderr}"
            ),
        };
        assert_eq!(
            got, expected,
            "case {n}: {outer:?} around {nested:?}; {stderr}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[tokio::test]
async fn a_lease_left_in_the_environment_that_is_no_longer_held_does_not_skip_the_line() {
    let service = Service::on_shared_redis().await;
    // An earlier step took the lock and wrote its lease as variables...
    let acquired = run(
        baton().args([
            "acquire",
            "--url",
            &service.base,
            "--output",
            "env",
            "deploy/prod",
        ]),
        LIMIT,
    );
    assert_eq!(acquired.status.code(), Some(0));
    let vars: Vec<(String, String)> = String::from_utf8(acquired.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert!(vars.iter().any(|(k, _)| k == "BATON_LEASE_ID"), "{vars:?}");
    // ... which has ended since (released here; an expiry is the same), and
    // someone else holds the lock now.
    let released = run(
        baton()
            .args(["release", "--url", &service.base])
            .envs(vars.iter().map(|(k, v)| (k, v))),
        LIMIT,
    );
    assert_eq!(released.status.code(), Some(0));
    let url = format!("{}/locks/deploy%2Fprod", service.base);
    let (status, _) = post(&url, r#"{"owner": "someone else", "ttl_ms": 60000}"#).await;
    assert_eq!(status, 201);

    let dir = scratch("stale");
    let out = run(
        baton()
            .args(["run", "--url", &service.base, "--wait", "1s", "deploy/prod"])
            .args(["--", "touch"])
            .arg(dir.join("ran"))
            .envs(vars.iter().map(|(k, v)| (k, v))),
        LIMIT,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(!dir.join("ran").exists(), "COMMAND ran unlocked: {stderr}");
    assert!(stderr.contains("someone else"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether process `pid` still runs (a zombie has ended).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A `baton run` whose COMMAND and grandchild are both deaf to SIGTERM (so
/// only a SIGKILL ends them), in a process group of its own as a CI runner
/// starts a step.
struct Holding {
    outer: std::process::Child,
    dir: PathBuf,
    command: i32,
    grandchild: i32,
    /// The lease's URL (COMMAND wrote its lease id, for the test to follow it).
    lease: String,
}

impl Holding {
    async fn start(service: &Service, name: &str, ttl: &str) -> Self {
        use std::os::unix::process::CommandExt;
        let dir = scratch(name);
        let script = r#"trap "" TERM
            printf '%s' "$BATON_LEASE_ID" > "$D/id"
            sleep 600 & echo $! > "$D/grandchild"
            echo $$ > "$D/command"
            wait"#;
        let log = std::fs::File::create(dir.join("baton.log")).unwrap();
        let outer = baton()
            .args(["run", "--url", &service.base, "--ttl", ttl, "--grace", "2s"])
            .args([name, "-c", script])
            .env("D", &dir)
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("baton run starts");
        let deadline = Instant::now() + LIMIT;
        while read(&dir.join("command")).is_empty() {
            assert!(
                Instant::now() < deadline,
                "COMMAND never started: {}",
                read(&dir.join("baton.log"))
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = |file: &str| -> i32 { read(&dir.join(file)).parse().expect("a pid") };
        let lease = format!("{}/locks/{name}/{}", service.base, read(&dir.join("id")));
        let (status, body) = get(&lease).await;
        assert_eq!(status, 200, "{body}");
        Self {
            outer,
            command: pid("command"),
            grandchild: pid("grandchild"),
            dir,
            lease,
        }
    }

    /// Signals baton run's whole group.
    fn signal(&self, signal: i32) {
        let pgid = i32::try_from(self.outer.id()).unwrap();
        // SAFETY: killpg of the group our own child leads.
        assert_eq!(unsafe { libc::killpg(pgid, signal) }, 0);
    }

    /// Waits until the lease ends, and checks that it ended before it could
    /// have lapsed (the last `expires_at` it had: refreshes stopped) and that
    /// neither COMMAND nor the grandchild ran any more by then.
    async fn ends_in_time_with_command_gone(&self) {
        let mut expires_at: Option<SystemTime> = None;
        let ended = loop {
            let (status, body) = get(&self.lease).await;
            match status {
                200 => {
                    let at =
                        humantime::parse_rfc3339(body["expires_at"].as_str().unwrap()).unwrap();
                    expires_at = Some(at);
                    if SystemTime::now() > at {
                        break false;
                    }
                }
                404 => break true,
                other => panic!("{other}: {body}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let gone_at = SystemTime::now();
        let (command_ran, grandchild_ran) = (running(self.command), running(self.grandchild));
        let log = read(&self.dir.join("baton.log"));
        assert!(ended, "the lease still held at {expires_at:?}; {log}");
        assert!(
            expires_at.is_none_or(|at| gone_at < at),
            "the lease ended at its expiry, not before it; {log}"
        );
        assert!(
            !command_ran && !grandchild_ran,
            "COMMAND ({command_ran}) or its grandchild ({grandchild_ran}) still ran when the lease ended; {log}"
        );
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        // Whatever happened, nothing of the test stays behind.
        for pid in [self.command, self.grandchild] {
            // SAFETY: kill(2) of a pid this test's COMMAND wrote; no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.outer.kill();
        let _ = self.outer.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn sigkill_of_baton_run_s_group_stops_command_s_group_before_the_lease_can_lapse() {
    let service = Service::on_shared_redis().await;
    let holding = Holding::start(&service, "killed", "30s").await;
    // The runner's hard timeout: SIGKILL to baton run's whole group.
    holding.signal(libc::SIGKILL);
    holding.ends_in_time_with_command_gone().await;
    // The guard said what it did.
    let log = read(&holding.dir.join("baton.log"));
    assert!(
        log.contains("guard: COMMAND's group has ended; the lease is released"),
        "{log}"
    );
    // The next holder gets the lock at once.
    let (status, body) = post(&format!("{}/locks/killed", service.base), "").await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn a_stopped_baton_run_does_not_let_command_outlive_its_lease() {
    let service = Service::on_shared_redis().await;
    let holding = Holding::start(&service, "stopped", "6s").await;
    // Ctrl-Z or SIGSTOP: baton run stops refreshing, COMMAND (in its own
    // group) goes on.
    holding.signal(libc::SIGSTOP);
    holding.ends_in_time_with_command_gone().await;
    holding.signal(libc::SIGCONT);
    let mut holding = holding;
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = holding.outer.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "baton run never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Lost (76), or COMMAND's own end by SIGKILL (137): never a success.
    let log = read(&holding.dir.join("baton.log"));
    assert!(matches!(status.code(), Some(76 | 137)), "{status:?}; {log}");
}
