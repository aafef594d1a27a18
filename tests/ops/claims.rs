//! `baton run --lock A --lock B --semaphore POOL:LIMIT` as real processes:
//! COMMAND runs under one claim (every name held, or it does not run), the
//! claim is released when COMMAND ends, a lease of it lost stops COMMAND
//! (76), and a SIGKILL of baton run's group releases the whole claim.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{baton, run, Service};
use crate::helpers::{shared_redis, unique_prefix};

const LIMIT: Duration = Duration::from_secs(60);

async fn service() -> Service {
    let redis = shared_redis();
    let prefix = unique_prefix();
    Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &prefix),
    ])
    .await
}

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
    let service = service().await;
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
    let service = service().await;
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
    let service = service().await;
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
    let service = service().await;
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
    let service = service().await;
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
