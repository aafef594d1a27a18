//! `baton run` follows its own lease's stream: a force-release stops
//! COMMAND at once (76), not at the next refresh, and `--on-yield SIGNAL`
//! passes a yield request (`baton yield NAME`) on to COMMAND.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use baton_testkit::service::{baton, Service};

fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "baton-{what}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A `baton run` of lock `name` in the background, with `args`, running `script`.
fn run_in_background(url: &str, name: &str, args: &[&str], script: &str) -> Child {
    baton()
        .args(["run", "--url", url, "--wait", "30s"])
        .args(args)
        .arg(name)
        .args(["-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton run starts")
}

/// Waits until `path` exists, at most `limit`.
async fn appears(path: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
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

#[tokio::test]
async fn a_force_release_stops_baton_run_with_76_long_before_its_next_refresh() {
    let service = Service::on_shared_redis().await;
    let dir = scratch("forced");
    let started = dir.join("started");
    // A ttl of 5 minutes: the first refresh is due 100 s after the grant,
    // so an exit within the 30 s below can only come from the stream.
    let mut run = run_in_background(
        &service.base,
        "forced",
        &["--ttl", "300s", "--grace", "2s"],
        &format!("touch {}; sleep 600", started.display()),
    );
    appears(&started, Duration::from_secs(15)).await;
    let granted = Instant::now();
    // The stream may open a moment after COMMAND starts: a force-release
    // before it is heard at once too (the stream finds the lease gone).
    let response = reqwest::Client::new()
        .delete(format!("{}/locks/forced", service.base))
        .send()
        .await
        .expect("force-release sent");
    assert_eq!(response.status(), 204);
    let (code, stderr) = exit_within(&mut run, Duration::from_secs(30)).await;
    assert_eq!(code, Some(76), "{stderr}");
    assert!(
        granted.elapsed() < Duration::from_secs(60),
        "ended by the stream, not by a refresh: {stderr}"
    );
    assert!(
        stderr.contains("lost")
            && (stderr.contains("force-released") || stderr.contains("no longer has it")),
        "{stderr}"
    );
}

#[tokio::test]
async fn on_yield_term_delivers_term_to_command_when_baton_yield_asks() {
    let service = Service::on_shared_redis().await;
    let dir = scratch("yield");
    let (started, yielded) = (dir.join("started"), dir.join("yielded"));
    let mut run = run_in_background(
        &service.base,
        "yielding",
        &["--ttl", "60s", "--on-yield", "TERM"],
        &format!(
            "trap 'echo yes > {}; exit 0' TERM; touch {}; while :; do sleep 0.1; done",
            yielded.display(),
            started.display()
        ),
    );
    appears(&started, Duration::from_secs(15)).await;
    // The stream opens a moment after COMMAND starts: ask until heard (one
    // asker tells a holder at most once every 10 s: the asks between say so).
    let deadline = Instant::now() + Duration::from_secs(40);
    while !yielded.exists() {
        assert!(Instant::now() < deadline, "COMMAND never got TERM");
        let out = baton()
            .args([
                "yield",
                "--url",
                &service.base,
                "--reason",
                "release train",
                "yielding",
            ])
            .output()
            .expect("baton yield runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("asked the holder of lock 'yielding'")
                || said.contains("they were not asked again"),
            "{said}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (code, stderr) = exit_within(&mut run, Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "COMMAND's own status: {stderr}");
    assert!(stderr.contains("asked to yield"), "{stderr}");
    // Released at the end as usual: nobody holds it now, nobody is asked.
    let out = baton()
        .args(["yield", "--url", &service.base, "yielding"])
        .output()
        .expect("baton yield runs");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nobody holds"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
