//! `baton run --lock A --lock B --semaphore POOL:LIMIT` as real processes:
//! COMMAND runs under one claim (every name held, or it does not run), the
//! claim is released when COMMAND ends, a lease of it lost stops COMMAND
//! (76), and a SIGKILL of baton run's group releases the whole claim.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::service::{baton, run, Service};

const LIMIT: Duration = Duration::from_secs(60);

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "baton-claim-{}",
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

async fn call(method: reqwest::Method, url: &str, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, url)
        .body(body.to_owned())
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn held(service: &Service, path: &str) -> bool {
    let (_, status) = call(reqwest::Method::GET, &format!("{}{path}", service.base), "").await;
    status["held"] == true || status["holders"].as_u64().unwrap_or(0) > 0
}

/// COMMAND writes the claim's variables, then waits for `go` (or forever).
const SCRIPT: &str = r#"printf '%s' "$BATON_CLAIM_ID" > "$D/id"
    printf '%s' "$BATON_CLAIM_LEASES" > "$D/leases"
    while [ ! -e "$D/go" ]; do sleep 0.1; done"#;

/// A `baton run` of a claim in a process group of its own, once COMMAND runs.
async fn start(service: &Service, dir: &Path, names: &[&str], ttl: &str) -> (Child, String) {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(dir.join("baton.log")).unwrap();
    let child = baton()
        .args(["run", "--url", &service.base, "--ttl", ttl, "--wait", "30s"])
        .args(names)
        .args(["-c", SCRIPT])
        .env("D", dir)
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("baton run starts");
    let deadline = Instant::now() + LIMIT;
    while read(&dir.join("leases")).is_empty() {
        assert!(
            Instant::now() < deadline,
            "COMMAND never started: {}",
            read(&dir.join("baton.log"))
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let claim = format!("{}/claims/{}", service.base, read(&dir.join("id")));
    (child, claim)
}

async fn exit_of(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "baton run never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn baton_run_runs_command_under_one_claim_and_releases_it() {
    let service = Service::on_shared_redis().await;
    let dir = scratch();
    let names = [
        "--lock",
        "env/prod",
        "--lock",
        "db",
        "--semaphore",
        "farm:2",
    ];
    let (mut child, claim) = start(&service, &dir, &names, "30s").await;

    let (status, body) = call(reqwest::Method::GET, &claim, "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["leases"].as_array().unwrap().len(), 3, "{body}");
    let leases: Value = serde_json::from_str(&read(&dir.join("leases"))).unwrap();
    assert_eq!(leases.as_array().unwrap().len(), 3, "{leases}");
    assert!(
        leases.to_string().contains(r#""name":"env/prod""#),
        "{leases}"
    );
    assert!(held(&service, "/locks/env%2Fprod").await);
    assert!(held(&service, "/semaphores/farm").await);

    std::fs::write(dir.join("go"), "").unwrap();
    assert_eq!(
        exit_of(&mut child).await,
        Some(0),
        "{}",
        read(&dir.join("baton.log"))
    );
    assert!(!held(&service, "/locks/env%2Fprod").await, "released");
    assert!(!held(&service, "/locks/db").await);
    assert!(!held(&service, "/semaphores/farm").await);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_claim_not_had_within_wait_does_not_run_command() {
    let service = Service::on_shared_redis().await;
    let (status, _) = call(
        reqwest::Method::POST,
        &format!("{}/locks/busy", service.base),
        r#"{"ttl_ms": 60000}"#,
    )
    .await;
    assert_eq!(status, 201);
    let dir = scratch();
    let out = run(
        baton()
            .args(["run", "--url", &service.base, "--wait", "1s"])
            .args(["--lock", "free", "--lock", "busy", "--", "touch"])
            .arg(dir.join("ran")),
        LIMIT,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(!dir.join("ran").exists());
    assert!(stderr.contains("busy"), "{stderr}");
    assert!(!held(&service, "/locks/free").await, "nothing left held");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_lease_of_the_claim_lost_stops_command_with_76() {
    let service = Service::on_shared_redis().await;
    let dir = scratch();
    let (mut child, _claim) = start(&service, &dir, &["--lock", "l1", "--lock", "l2"], "3s").await;
    // An administrator force-releases one of its names.
    let (status, _) = call(
        reqwest::Method::DELETE,
        &format!("{}/locks/l2", service.base),
        "",
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(
        exit_of(&mut child).await,
        Some(76),
        "{}",
        read(&dir.join("baton.log"))
    );
    assert!(!held(&service, "/locks/l1").await, "the rest released");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sigkill_of_baton_run_releases_the_whole_claim() {
    let service = Service::on_shared_redis().await;
    let dir = scratch();
    let (mut child, claim) = start(
        &service,
        &dir,
        &["--lock", "k1", "--semaphore", "k2:1"],
        "30s",
    )
    .await;
    let pgid = i32::try_from(child.id()).unwrap();
    // SAFETY: killpg of the group our own child leads.
    assert_eq!(unsafe { libc::killpg(pgid, libc::SIGKILL) }, 0);
    let _ = child.wait();
    let deadline = Instant::now() + LIMIT;
    while call(reqwest::Method::GET, &claim, "").await.0 != 404 {
        assert!(Instant::now() < deadline, "the claim outlived baton run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!held(&service, "/locks/k1").await);
    assert!(!held(&service, "/semaphores/k2").await);
    // SAFETY: the script's loop is in that group too; make sure it is gone.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--semaphore NAME:LIMIT:PERMITS` takes PERMITS of the semaphore NAME (not a
/// semaphore named `NAME:LIMIT`), and a claim of one name runs like any other.
#[tokio::test]
async fn a_claim_takes_permits_and_may_have_one_name() {
    let service = Service::on_shared_redis().await;
    let dir = scratch();
    let (mut child, claim) = start(&service, &dir, &["--semaphore", "test-envs:3:2"], "30s").await;
    let (status, body) = call(reqwest::Method::GET, &claim, "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["leases"].as_array().unwrap().len(), 1, "{body}");
    let (status, shown) = call(
        reqwest::Method::GET,
        &format!("{}/semaphores/test-envs", service.base),
        "",
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["used"], 2, "{shown}");
    assert_eq!(shown["limit"], 3, "{shown}");
    std::fs::write(dir.join("go"), "").unwrap();
    assert_eq!(
        exit_of(&mut child).await,
        Some(0),
        "{}",
        read(&dir.join("baton.log"))
    );
    assert!(!held(&service, "/semaphores/test-envs").await, "released");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `baton run` of a claim with `options`, in the background, running
/// `script`; its stderr piped.
fn run_claim_in_background(service: &Service, options: &[&str], script: &str) -> Child {
    baton()
        .args(["run", "--url", &service.base, "--wait", "30s"])
        .args(options)
        .args(["-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton run starts")
}

/// Waits until `path` exists, at most [`LIMIT`].
async fn appears(path: &Path) {
    let deadline = Instant::now() + LIMIT;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for `child` to exit, at most `limit`; its exit code and stderr.
async fn exit_within(child: &mut Child, limit: Duration) -> (Option<i32>, String) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut stderr = String::new();
            if let Some(mut err) = child.stderr.take() {
                use std::io::Read;
                let _ = err.read_to_string(&mut stderr);
            }
            return (status.code(), stderr);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("baton run did not exit within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Under a claim, `baton run` follows the holder's stream of every lease: a
/// force-release of any one name stops COMMAND at once (76), not at the
/// claim's next refresh, and the rest of the claim is given back.
#[tokio::test]
async fn a_force_release_of_one_name_stops_command_long_before_the_claim_s_next_refresh() {
    let service = Service::on_shared_redis().await;
    let dir = scratch();
    let started = dir.join("started");
    // A ttl of 5 minutes: the claim's first refresh is due 100 s after the
    // grant, so an exit within the 30 s below can only come from a stream.
    let mut child = run_claim_in_background(
        &service,
        &[
            "--ttl",
            "300s",
            "--grace",
            "2s",
            "--lock",
            "f1",
            "--lock",
            "f2",
            "--semaphore",
            "f3:2",
        ],
        &format!("touch {}; sleep 600", started.display()),
    );
    appears(&started).await;
    // The streams may open a moment after COMMAND starts: a force-release
    // before that is heard at once too (the stream finds the lease gone).
    let (status, _) = call(
        reqwest::Method::DELETE,
        &format!("{}/locks/f2", service.base),
        "",
    )
    .await;
    assert_eq!(status, 204);
    let (code, stderr) = exit_within(&mut child, Duration::from_secs(30)).await;
    assert_eq!(code, Some(76), "{stderr}");
    assert!(
        stderr.contains("lock 'f2'") && stderr.contains("force-released"),
        "the loss names the lease lost: {stderr}"
    );
    assert!(!held(&service, "/locks/f1").await, "the rest given back");
    assert!(
        !held(&service, "/semaphores/f3").await,
        "the rest given back"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--on-yield TERM` under a claim: a yield request on any of its names
/// sends TERM to COMMAND.
#[tokio::test]
async fn on_yield_passes_a_yield_request_on_any_name_of_the_claim_to_command() {
    let service = Service::on_shared_redis().await;
    let dir = scratch();
    let (started, yielded) = (dir.join("started"), dir.join("yielded"));
    let mut child = run_claim_in_background(
        &service,
        &[
            "--ttl",
            "60s",
            "--on-yield",
            "TERM",
            "--lock",
            "y1",
            "--semaphore",
            "y2:3",
        ],
        &format!(
            "trap 'echo yes > {}; exit 0' TERM; touch {}; while :; do sleep 0.1; done",
            yielded.display(),
            started.display()
        ),
    );
    appears(&started).await;
    // The streams open a moment after COMMAND starts: ask until heard.
    let deadline = Instant::now() + LIMIT;
    while !yielded.exists() {
        assert!(Instant::now() < deadline, "COMMAND never got TERM");
        let (status, body) = call(
            reqwest::Method::POST,
            &format!("{}/semaphores/y2/yield", service.base),
            r#"{"reason": "release train"}"#,
        )
        .await;
        assert_eq!(status, 202, "{body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (code, stderr) = exit_within(&mut child, LIMIT).await;
    assert_eq!(code, Some(0), "COMMAND's own status: {stderr}");
    assert!(stderr.contains("asked to yield"), "{stderr}");
    assert!(!held(&service, "/locks/y1").await, "released at the end");
    let _ = std::fs::remove_dir_all(&dir);
}

/// How a nested `baton run` inside a claim's COMMAND went.
#[derive(Debug, PartialEq, Eq)]
enum Nested {
    /// It ran its command at once, under the claim's lease of its name (the
    /// same fencing token, in its variables).
    AtOnce,
    /// It waited in line like any other, and its `--wait 1s` ran out (75).
    Waited,
}

/// A nested `baton run NAME` inside a claim that holds NAME, in a mode the
/// claim's lease covers, runs at once (the service confirms the claim's
/// lease); a name the claim does not hold, or holds in a mode that does not
/// cover the nested ask, waits in line like any other.
#[tokio::test]
async fn a_nested_run_of_a_name_the_claim_holds_runs_at_once_when_its_lease_covers_it() {
    let service = Service::on_shared_redis().await;
    // Someone else holds `other`, which no claim below names.
    let (status, _) = call(
        reqwest::Method::POST,
        &format!("{}/locks/other", service.base),
        r#"{"ttl_ms": 60000}"#,
    )
    .await;
    assert_eq!(status, 201);
    // (the claim's options, the nested run's options and name, what it does)
    // (A, B and P stand for names of each case's own)
    let cases: [(&str, &str, Nested); 7] = [
        ("--lock A --lock B", "A", Nested::AtOnce),
        ("--lock A --lock B", "--shared B", Nested::AtOnce),
        (
            "--lock A --semaphore P:3:2",
            "--limit 3 --permits 2 P",
            Nested::AtOnce,
        ),
        // A shared lease does not cover an exclusive ask.
        ("--shared --lock A --lock B", "A", Nested::Waited),
        // Fewer permits than asked do not cover it.
        (
            "--lock A --semaphore P:2",
            "--limit 2 --permits 2 P",
            Nested::Waited,
        ),
        // A lock's lease does not cover a semaphore of the same name, which
        // someone else holds.
        ("--lock A --lock B", "--limit 1 A", Nested::Waited),
        // A name the claim does not hold.
        ("--lock A --lock B", "other", Nested::Waited),
    ];
    for (n, (outer, nested, expected)) in cases.into_iter().enumerate() {
        let dir = scratch();
        let names = |text: &str| {
            text.replace('A', &format!("a{n}"))
                .replace('B', &format!("b{n}"))
                .replace('P', &format!("pool{n}"))
        };
        let (outer, nested) = (names(outer), names(nested));
        if nested.contains("--limit 1") {
            let url = format!("{}/semaphores/a{n}", service.base);
            let (status, _) = call(
                reqwest::Method::POST,
                &url,
                r#"{"limit": 1, "ttl_ms": 60000}"#,
            )
            .await;
            assert_eq!(status, 201, "case {n}");
        }
        let script = r#"printf '%s' "$BATON_CLAIM_LEASES" > "$D/leases"
            "$BIN" run --wait 1s $NESTED -c 'echo "$BATON_LOCK_NAME $BATON_FENCING_TOKEN" > "$D/nested"'
            echo $? > "$D/rc""#;
        let out = run(
            baton()
                .args(["run", "--url", &service.base, "--wait", "20s"])
                .args(outer.split_whitespace())
                .args(["-c", script])
                .env("BIN", baton_testkit::baton_binary())
                .env("D", &dir)
                .env("NESTED", &nested),
            LIMIT,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "case {n}: {stderr}");
        let rc = read(&dir.join("rc"));
        let got = match rc.as_str() {
            "0" => {
                // Under the claim's own lease of that name.
                let name = nested.split_whitespace().last().unwrap();
                let leases: Value = serde_json::from_str(&read(&dir.join("leases"))).unwrap();
                let token = leases
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["name"] == name)
                    .map(|l| l["fencing_token"].to_string())
                    .unwrap_or_default();
                assert_eq!(
                    read(&dir.join("nested")),
                    format!("{name} {token}"),
                    "case {n}: {stderr}"
                );
                Nested::AtOnce
            }
            "75" => {
                assert_eq!(read(&dir.join("nested")), "", "case {n}");
                Nested::Waited
            }
            _ => panic!("case {n} ({outer:?} around {nested:?}): status {rc}; {stderr}"),
        };
        assert_eq!(
            got, expected,
            "case {n}: {outer:?} around {nested:?}; {stderr}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
