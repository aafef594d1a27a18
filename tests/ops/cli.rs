//! `baton --help`, `--version`, `healthcheck`, the exit codes of bad
//! settings and flags, and `baton run --shared` / `acquire --permits`
//! against two instances.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use baton_testkit::service::{baton, run, Service};
use baton_testkit::{free_port, shared_redis, unique_prefix};

const LIMIT: Duration = Duration::from_secs(10);

#[test]
fn help_lists_every_setting_with_its_variable_and_default() {
    let out = run(baton().arg("--help"), LIMIT);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for (variable, default) in [
        ("BATON_LISTEN", "127.0.0.1:8080"),
        ("BATON_REDIS_URL", "redis://127.0.0.1:6379"),
        ("BATON_REDIS_MODE", "standalone"),
        ("BATON_REDIS_SENTINEL_MASTER", "mymaster"),
        ("BATON_REDIS_WAIT_REPLICAS", "0"),
        ("BATON_KEY_PREFIX", "baton:"),
        ("BATON_MAX_WAIT_MS", "300000"),
        ("BATON_LOG_FORMAT", "text"),
        ("BATON_HEADER_TIMEOUT_MS", "10000"),
        ("BATON_IDLE_TIMEOUT_MS", "60000"),
        ("BATON_MAX_CONNECTIONS", "10000"),
        ("BATON_REQUEST_TIMEOUT_MS", "10000"),
        ("BATON_REDIS_TIMEOUT_MS", "1000"),
        ("BATON_MAX_BODY_BYTES", "16384"),
        ("BATON_MAX_WAITERS", "100000"),
        ("BATON_WORKER_THREADS", "auto"),
    ] {
        let at = help
            .find(&format!("[env: {variable}"))
            .unwrap_or_else(|| panic!("{variable} in --help:\n{help}"));
        let entry = &help[at..];
        let entry = &entry[..entry.find("\n\n").unwrap_or(entry.len())];
        assert!(
            entry.contains(&format!("[default: {default}]")),
            "{variable} default {default}: {entry}"
        );
    }
    for variable in ["BATON_API_TOKENS", "BATON_ADMIN_TOKENS"] {
        assert!(help.contains(&format!("[env: {variable}]")), "{variable}");
    }
    assert!(help.contains("healthcheck") && help.contains("RUST_LOG"));
}

#[test]
fn version_prints_the_crate_version_and_the_source_revision() {
    let out = run(baton().arg("--version"), LIMIT);
    assert_eq!(out.status.code(), Some(0));
    let version = String::from_utf8(out.stdout).unwrap();
    let revision = version
        .trim()
        .strip_prefix(&format!("baton {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("baton VERSION (REVISION): {version}"));
    assert!(
        revision == "unknown"
            || revision.len() >= 7 && revision.chars().all(|c| c.is_ascii_hexdigit()),
        "{version}"
    );
}

#[test]
fn each_subcommand_s_help_lists_its_own_options_only() {
    for (subcommand, own) in [
        (
            "run",
            &[
                "--grace",
                "--ttl",
                "--wait",
                "--newest-wins",
                "-c <STRING>",
                "76 ",
            ][..],
        ),
        ("acquire", &["--output", "--ttl", "--wait", "BATON_URL"]),
        ("release", &["BATON_LEASE_ID", "--url"]),
        ("healthcheck", &["--listen"]),
    ] {
        for args in [vec![subcommand, "--help"], vec!["help", subcommand]] {
            let out = run(baton().args(&args), LIMIT);
            let help = String::from_utf8(out.stdout).unwrap();
            assert_eq!(out.status.code(), Some(0), "{args:?}");
            for option in own {
                assert!(help.contains(option), "{args:?} lists {option}:\n{help}");
            }
            for setting in ["--max-wait-ms", "BATON_REDIS_URL", "--key-prefix"] {
                assert!(!help.contains(setting), "{args:?} lists {setting}:\n{help}");
            }
        }
    }
    let out = run(baton().arg("help"), LIMIT);
    let help = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0));
    for subcommand in [
        "run",
        "acquire",
        "release",
        "completions",
        "man",
        "BATON_MAX_WAIT_MS",
    ] {
        assert!(help.contains(subcommand), "baton help lists {subcommand}");
    }
}

#[test]
fn a_misused_subcommand_exits_64_with_clap_s_suggestion() {
    let out = run(baton().args(["acquire", "--tll", "3s", "deploy"]), LIMIT);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("a similar argument exists: '--ttl'"),
        "{stderr}"
    );
    let out = run(baton().args(["acquier", "deploy"]), LIMIT);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("'acquire'"), "{stderr}");
    // A client does not read the service's settings.
    let out = run(
        baton().env("BATON_MAX_WAIT_MS", "soon").args([
            "run",
            "--wait",
            "0",
            "x",
            "--",
            "/nonexistent/cmd",
        ]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(127));
    let out = run(
        baton().args(["run", "--ttl", "3s", "--grace", "5s", "x", "--", "true"]),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(64));
    // --shared is for a lock, --permits for a semaphore (--limit).
    for misuse in [
        &["run", "--shared", "--limit", "2", "x", "--", "true"][..],
        &["run", "--permits", "2", "x", "--", "true"],
    ] {
        let out = run(baton().args(misuse), LIMIT);
        assert_eq!(out.status.code(), Some(64), "{misuse:?}");
    }
}

#[test]
fn a_bad_setting_exits_2_with_one_line_naming_variable_value_and_form() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    for (variable, value, shown, form) in [
        (
            "BATON_MAX_WAIT_MS",
            "soon",
            "\"soon\"",
            "whole number of milliseconds",
        ),
        (
            "BATON_MAX_WAIT_MS",
            "86400001",
            "\"86400001\"",
            "0 to 86400000",
        ),
        ("BATON_REQUEST_TIMEOUT_MS", "0", "\"0\"", "above 0"),
        (
            "BATON_HEADER_TIMEOUT_MS",
            "-5",
            "\"-5\"",
            "milliseconds above 0",
        ),
        (
            "BATON_MAX_CONNECTIONS",
            "many",
            "\"many\"",
            "whole number above 0",
        ),
        ("BATON_LOG_FORMAT", "xml", "\"xml\"", "one of text, json"),
        (
            "BATON_REDIS_MODE",
            "replica",
            "\"replica\"",
            "one of standalone, cluster, sentinel",
        ),
        ("BATON_LISTEN", "8080", "\"8080\"", "host:port"),
        (
            "BATON_WORKER_THREADS",
            "0",
            "\"0\"",
            "auto or a whole number",
        ),
        (
            "BATON_REDIS_URL",
            "http://:hunter2@redis:6379",
            "\"http://:***@redis:6379\"",
            "redis://",
        ),
    ] {
        let mut cmd = baton();
        cmd.env(variable, value);
        if variable != "BATON_LISTEN" {
            cmd.env("BATON_LISTEN", &listen);
        }
        let out = run(&mut cmd, LIMIT);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{variable}={value}: {stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "one line for {variable}: {stderr}"
        );
        assert!(
            stderr.contains(variable) && stderr.contains(shown) && stderr.contains(form),
            "{variable}={value}: {stderr}"
        );
        assert!(!stderr.contains("hunter2"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
    // Nothing was served meanwhile.
    assert!(std::net::TcpStream::connect(&listen).is_err());
}

#[test]
fn a_flag_is_read_like_its_variable_and_wins_over_it() {
    let out = run(
        baton()
            .env("BATON_MAX_WAIT_MS", "1000")
            .args(["--max-wait-ms", "later"]),
        LIMIT,
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("BATON_MAX_WAIT_MS (--max-wait-ms) = \"later\""),
        "{stderr}"
    );
}

#[test]
fn secret_values_are_never_shown_in_errors() {
    // Tokens are never shown, even in an error about the command line that
    // carries them (as a flag or as a variable).
    for (flag, variable) in [
        (
            &["--api-tokens", "tok-5ecret-flag", "--max-wait-ms", "later"][..],
            None,
        ),
        (&["--admin-tokens", "tok-5ecret-flag", "--bogus"][..], None),
        (&["--bogus"][..], Some("tok-5ecret-variable")),
    ] {
        let mut cmd = baton();
        cmd.args(flag);
        if let Some(token) = variable {
            cmd.env("BATON_API_TOKENS", token);
        }
        let out = run(&mut cmd, LIMIT);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(!stderr.is_empty(), "{flag:?}: an error is shown");
        assert!(!stderr.contains("tok-5ecret"), "{flag:?}: {stderr}");
    }
    let out = run(
        baton().env("BATON_REDIS_URL", "redis+unix:///nowhere?pass=hunter2&db=x"),
        LIMIT,
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("BATON_REDIS_URL") && !stderr.contains("hunter2"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_flag_or_command_exits_2_with_one_line() {
    for args in [&["--bogus"][..], &["serve-forever"], &["--max-wait-ms"]] {
        let out = run(baton().args(args), LIMIT);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("baton --help"), "{stderr}");
    }
}

#[tokio::test]
async fn an_unknown_variable_is_warned_about_with_the_closest_known_one() {
    let redis = shared_redis();
    let mut service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_MAX_WAITMS", "1000"),
        ("BATON_URL", "http://example.invalid"),
    ])
    .await;
    service.stop();
    let log = service.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("unknown variable"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("BATON_MAX_WAITMS")
            && warnings[0].contains("did you mean BATON_MAX_WAIT_MS"),
        "{log}"
    );
}

#[tokio::test]
async fn healthcheck_exits_0_when_the_service_answers_and_1_when_not() {
    let redis = shared_redis();
    let mut service = Service::start(&[("BATON_REDIS_URL", &redis.url())]).await;
    let ok = run(
        baton()
            .env("BATON_LISTEN", &service.listen)
            .arg("healthcheck"),
        LIMIT,
    );
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The flag works as well as the variable.
    let ok = run(
        baton().args(["healthcheck", "--listen", &service.listen]),
        LIMIT,
    );
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(service.stop().code(), Some(0), "SIGTERM exits 0");
    let down = run(
        baton()
            .env("BATON_LISTEN", &service.listen)
            .arg("healthcheck"),
        LIMIT,
    );
    assert_eq!(down.status.code(), Some(1));
    // Something that answers, but not with 200.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = conn.read(&mut buf);
        let _ = conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
    });
    let sick = run(baton().env("BATON_LISTEN", &addr).arg("healthcheck"), LIMIT);
    assert_eq!(sick.status.code(), Some(1));
    server.join().unwrap();
}

/// A `baton run` in the background against `url`, its output piped.
fn run_in_background(url: &str, args: &[&str], script: &str) -> Child {
    baton()
        .args(["run", "--url", url, "--ttl", "20s", "--wait", "30s"])
        .args(args)
        .args(["-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton run starts")
}

/// Waits (at most 15 s) until `done` holds.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for a child to exit 0 within 15 s; its stderr otherwise.
async fn exits_0(mut child: Child, what: &str) {
    eventually(&format!("{what} exits"), || {
        child.try_wait().expect("try_wait").is_some()
    })
    .await;
    let out = child.wait_with_output().expect("output");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn token_in(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("a fencing token in {}", file.display()))
}

async fn status_of(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn two_shared_runs_overlap_across_instances_while_a_plain_run_waits_for_both() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let env = [
        ("BATON_REDIS_URL", redis.url()),
        ("BATON_KEY_PREFIX", prefix),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = Service::start(&env).await;
    let b = Service::start(&env).await;
    let dir: PathBuf = std::env::temp_dir().join(format!("baton-shared-run-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display().to_string();
    let status_url = format!("{}/locks/docs%2Fsite", b.base);
    // Each command writes its token, then holds until told to end.
    let hold = |me: &str| {
        format!(
            "echo \"$BATON_FENCING_TOKEN\" > {d}/{me}.tmp && mv {d}/{me}.tmp {d}/{me}; \
             until [ -e {d}/end ]; do sleep 0.05; done"
        )
    };

    // Two readers, one on each instance: both run at once.
    let reader_1 = run_in_background(&a.base, &["--shared", "docs/site"], &hold("r1"));
    let reader_2 = run_in_background(&b.base, &["--shared", "docs/site"], &hold("r2"));
    eventually("both readers run at once", || {
        dir.join("r1").exists() && dir.join("r2").exists()
    })
    .await;
    let status = status_of(&status_url).await;
    assert_eq!(status["mode"], "shared", "{status}");
    assert_eq!(status["holders"], 2, "{status}");
    let text = run(
        baton().args(["status", "--url", &a.base, "docs/site"]),
        LIMIT,
    );
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("held shared by 2"), "{text}");

    // A plain (exclusive) run waits for both; a reader behind it waits too.
    let writer = run_in_background(
        &a.base,
        &["docs/site"],
        &format!("echo \"$BATON_FENCING_TOKEN\" > {d}/w"),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while status_of(&status_url).await["waiting"] != 1 {
        assert!(Instant::now() < deadline, "the writer never queued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reader_3 = run_in_background(
        &b.base,
        &["--shared", "docs/site"],
        &format!("echo \"$BATON_FENCING_TOKEN\" > {d}/r3"),
    );
    while status_of(&status_url).await["waiting"] != 2 {
        assert!(Instant::now() < deadline, "the third reader never queued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = status_of(&status_url).await;
    assert_eq!(status["waiters"][0].get("shared"), None, "{status}");
    assert_eq!(status["waiters"][1]["shared"], true, "{status}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !dir.join("w").exists() && !dir.join("r3").exists(),
        "nothing runs beside the readers but readers admitted together"
    );

    // The readers end: the writer runs, then the reader behind it.
    std::fs::write(dir.join("end"), "").unwrap();
    exits_0(reader_1, "reader 1").await;
    exits_0(reader_2, "reader 2").await;
    exits_0(writer, "the writer").await;
    exits_0(reader_3, "reader 3").await;
    let (r1, r2, w, r3) = (
        token_in(&dir.join("r1")),
        token_in(&dir.join("r2")),
        token_in(&dir.join("w")),
        token_in(&dir.join("r3")),
    );
    assert!(r1.max(r2) < w && w < r3, "tokens {r1} {r2} {w} {r3}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn acquire_with_permits_takes_that_many_of_the_limit() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &prefix),
    ])
    .await;
    let acquire = |permits: &str| {
        run(
            baton().args([
                "acquire",
                "--url",
                &service.base,
                "--limit",
                "5",
                "--permits",
                permits,
                "--wait",
                "0",
                "--output",
                "json",
                "pool",
            ]),
            LIMIT,
        )
    };
    let first = acquire("3");
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let lease: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(
        (lease["permits"].as_u64(), lease["limit"].as_u64()),
        (Some(3), Some(5))
    );
    let second = acquire("3");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("3 of 5 permits used"), "{stderr}");
    assert_eq!(acquire("2").status.code(), Some(0));
    // More permits than the limit: the service's 400, bad usage.
    assert_eq!(acquire("6").status.code(), Some(64));
    let out = run(
        baton().args(["status", "--url", &service.base, "--limit", "5", "pool"]),
        LIMIT,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("5 of 5 permits used by 2 leases") && text.contains("3 permits"),
        "{text}"
    );
}
