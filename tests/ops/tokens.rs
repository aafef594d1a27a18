//! Scoped tokens on the real binary: a bad token file stops the start with
//! exit 2 and one line naming the entry (never the token); SIGHUP, or a
//! change of the file with no signal (edited in place, or swapped as a
//! Kubernetes Secret volume swaps its `..data` symlink), reads the file
//! again without a restart, and keeps the tokens in force when the new file
//! is bad.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Client;

use baton_testkit::service::{baton, run, Service};
use baton_testkit::{free_port, shared_redis, unique_prefix};

const OLD: &str = "old-token-8c2d1f";
const NEW: &str = "new-token-5e7a90";
const BROKEN: &str = "broken-token-d3b6c4";
const BROKEN_TOO: &str = "broken-too-token-77e0a2";

/// A token file in the temp dir, removed when dropped.
struct TokenFile(PathBuf);

impl TokenFile {
    fn new(text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("baton-ops-tokens-{}.toml", unique_prefix()));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }

    fn rewrite(&self, text: &str) {
        // Written whole, then renamed, as a config manager does.
        let staged = self.0.with_extension("staged");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &self.0).unwrap();
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn one_token(name: &str, token: &str, allow: &str) -> String {
    format!("[[token]]\nname = \"{name}\"\nvalue = \"{token}\"\nallow = [\"{allow}\"]\n")
}

#[test]
fn a_malformed_token_file_exits_2_naming_the_entry_and_never_the_token() {
    let listen = format!("127.0.0.1:{}", free_port());
    for (text, says) in [
        (
            format!(
                "{}{}",
                one_token("fine", OLD, "read:*"),
                one_token("team-a-ci", BROKEN, "wirte:team-a-*")
            ),
            "[[token]] \"team-a-ci\": allow[0] = \"wirte:team-a-*\"",
        ),
        (
            format!("[[token]]\nvalue = \"{BROKEN}\"\nallow = [\"read:*\"]\n"),
            "[[token]] number 1: has no name",
        ),
        (
            format!("[[token]]\nname = \"team-a-ci\"\nvalue = \"{BROKEN}\nallow = [\"read:*\"]\n"),
            "line 3: not valid TOML",
        ),
        (
            format!(
                "[[token]]\nname = \"team-a-ci\"\nsha256 = \"{BROKEN}\"\nallow = [\"read:*\"]\n"
            ),
            "[[token]] \"team-a-ci\": sha256 must be 64 hexadecimal digits",
        ),
        (
            format!(
                "{}{}",
                one_token("team-a-ci", OLD, "read:*"),
                one_token("team-a-ci", BROKEN, "admin:*")
            ),
            "[[token]] \"team-a-ci\": two entries have this name",
        ),
        (
            one_token("team-a-ci", "a", "admin:*"),
            "[[token]] \"team-a-ci\": value is shorter than 16 characters",
        ),
        (
            // Also given by BATON_API_TOKENS (below): one token, one place.
            one_token("team-a-ci", BROKEN_TOO, "read:*"),
            "[[token]] \"team-a-ci\": the same token is given by BATON_API_TOKENS",
        ),
    ] {
        let file = TokenFile::new(&text);
        let out = run(
            baton()
                .env("BATON_LISTEN", &listen)
                .env("BATON_TOKENS_FILE", file.path())
                .env("BATON_API_TOKENS", BROKEN_TOO),
            Duration::from_secs(20),
        );
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            !stderr.contains(BROKEN_TOO),
            "the token is printed: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with("baton: bad setting: BATON_TOKENS_FILE (--tokens-file) = ")
                && stderr.contains(file.path())
                && stderr.contains(says),
            "{says}: {stderr}"
        );
        assert!(!stderr.contains(BROKEN), "the token is printed: {stderr}");
        assert!(out.stdout.is_empty());
    }
    let missing = run(
        baton()
            .env("BATON_LISTEN", &listen)
            .env("BATON_TOKENS_FILE", "/nonexistent/tokens.toml"),
        Duration::from_secs(20),
    );
    assert_eq!(missing.status.code(), Some(2));
    // Nothing was served meanwhile.
    assert!(std::net::TcpStream::connect(&listen).is_err());
}

/// The status of `POST /locks/{name}` with `token`.
async fn acquire_status(client: &Client, service: &Service, name: &str, token: &str) -> u16 {
    client
        .post(format!("{}/locks/{name}", service.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Waits (up to 10 s) until `done` holds; the signal is handled by the
/// service on its own time, so the test waits for the effect, not a delay.
async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sighup_reads_the_token_file_again_without_a_restart() {
    let file = TokenFile::new(&one_token("team-a-ci", OLD, "write:team-a-*"));
    let (url, prefix) = (shared_redis().url(), unique_prefix());
    let mut service = Service::start(&[
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_TOKENS_FILE", file.path()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await;
    let client = Client::new();
    assert_eq!(
        acquire_status(&client, &service, "team-a-1", OLD).await,
        201
    );
    assert_eq!(
        acquire_status(&client, &service, "team-b-1", OLD).await,
        403
    );
    assert_eq!(
        acquire_status(&client, &service, "team-b-1", NEW).await,
        401
    );

    // A new file: the new token in force, the old one gone, the same process.
    file.rewrite(&one_token("team-b-ci", NEW, "write:team-b-*"));
    service.signal(libc::SIGHUP);
    eventually("the new token is in force", || async {
        acquire_status(&client, &service, "team-b-2", NEW).await == 201
    })
    .await;
    assert_eq!(
        acquire_status(&client, &service, "team-a-2", OLD).await,
        401
    );
    assert_eq!(
        acquire_status(&client, &service, "team-a-2", NEW).await,
        403
    );

    // A bad file: logged, and the tokens in force kept.
    file.rewrite(&one_token("team-c-ci", BROKEN, "wirte:*"));
    service.signal(libc::SIGHUP);
    eventually("the bad file is logged", || async {
        service
            .log()
            .contains("SIGHUP: the tokens in force are kept")
    })
    .await;
    assert!(service.is_running());
    assert_eq!(
        acquire_status(&client, &service, "team-b-3", NEW).await,
        201
    );
    assert_eq!(
        acquire_status(&client, &service, "team-b-3", BROKEN).await,
        401
    );

    assert_eq!(service.stop().code(), Some(0));
    let lines = service.json_lines();
    let refused: Vec<_> = lines
        .iter()
        .filter(|l| l["level"] == "ERROR")
        .map(|l| l["message"].as_str().unwrap_or_default())
        .collect();
    // The file is also looked at every second: a look between the rename
    // and the signal logs the same refusal once more, as a change.
    assert!(
        refused.iter().any(|m| m.starts_with("SIGHUP: ")),
        "{refused:?}"
    );
    for message in &refused {
        assert!(
            message.contains("[[token]] \"team-c-ci\": allow[0] = \"wirte:*\""),
            "{message}"
        );
    }
    let reloaded = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("SIGHUP: the token file was read again"))
        })
        .count();
    assert_eq!(reloaded, 1, "{}", service.log());
    let log = service.log();
    for token in [OLD, NEW, BROKEN] {
        assert!(!log.contains(token), "{token} is in the log:\n{log}");
    }
}

/// A token file as Kubernetes mounts a Secret: `tokens.toml` ->
/// `..data/tokens.toml`, `..data` -> `..v1`; an update writes `..vN` and
/// swaps `..data` by renaming a new symlink over it.
struct SecretVolume {
    dir: PathBuf,
    version: u32,
}

impl SecretVolume {
    fn new(text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("baton-ops-secret-{}", unique_prefix()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut volume = Self { dir, version: 0 };
        volume.swap(text);
        std::os::unix::fs::symlink("..data/tokens.toml", volume.dir.join("tokens.toml")).unwrap();
        volume
    }

    fn path(&self) -> String {
        self.dir.join("tokens.toml").to_str().unwrap().to_owned()
    }

    /// Kubernetes' atomic update.
    fn swap(&mut self, text: &str) {
        self.version += 1;
        let version = format!("..v{}", self.version);
        std::fs::create_dir(self.dir.join(&version)).unwrap();
        std::fs::write(self.dir.join(&version).join("tokens.toml"), text).unwrap();
        let staged = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &staged).unwrap();
        std::fs::rename(&staged, self.dir.join("..data")).unwrap();
        if self.version > 1 {
            let old = self.dir.join(format!("..v{}", self.version - 1));
            std::fs::remove_dir_all(old).unwrap();
        }
    }

    /// An edit of the file in place, through the symlinks.
    fn edit(&self, text: &str) {
        std::fs::write(self.path(), text).unwrap();
    }
}

impl Drop for SecretVolume {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_changed_token_file_is_read_again_without_sighup() {
    const SWAPPED: &str = "swapped-token-a41f07";
    let mut volume = SecretVolume::new(&one_token("team-a-ci", OLD, "write:team-a-*"));
    let (url, prefix) = (shared_redis().url(), unique_prefix());
    let path = volume.path();
    let service = Service::start(&[
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_TOKENS_FILE", path.as_str()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await;
    let client = Client::new();
    assert_eq!(
        acquire_status(&client, &service, "team-a-1", OLD).await,
        201
    );

    // Edited in place: no signal, the new token in force, the old one gone.
    volume.edit(&one_token("team-b-ci", NEW, "write:team-b-*"));
    eventually("the edited file's token is in force", || async {
        acquire_status(&client, &service, "team-b-1", NEW).await == 201
    })
    .await;
    eventually("the removed token is refused", || async {
        acquire_status(&client, &service, "team-a-2", OLD).await == 401
    })
    .await;

    // Swapped as Kubernetes updates a mounted Secret.
    volume.swap(&one_token("team-c-ci", SWAPPED, "write:team-c-*"));
    eventually("the swapped file's token is in force", || async {
        acquire_status(&client, &service, "team-c-1", SWAPPED).await == 201
    })
    .await;
    assert_eq!(
        acquire_status(&client, &service, "team-b-2", NEW).await,
        401
    );

    // A bad file: logged as a change, the tokens in force kept.
    volume.swap(&one_token("team-d-ci", BROKEN, "wirte:*"));
    eventually("the bad file is logged", || async {
        service
            .log()
            .contains("the token file changed: the tokens in force are kept")
    })
    .await;
    assert_eq!(
        acquire_status(&client, &service, "team-c-2", SWAPPED).await,
        201
    );
    assert_eq!(
        acquire_status(&client, &service, "team-c-3", BROKEN).await,
        401
    );
    let log = service.log();
    for token in [OLD, NEW, SWAPPED, BROKEN] {
        assert!(!log.contains(token), "{token} is in the log:\n{log}");
    }
}

/// One series of `/metrics`, as rendered; `None` when absent.
async fn metric(client: &Client, service: &Service, series: &str) -> Option<f64> {
    let text = client
        .get(format!("{}/metrics", service.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(value.parse().expect("a number"))
    })
}

#[cfg(unix)]
#[tokio::test]
async fn a_readable_file_of_values_is_warned_of_and_reloads_show_in_metrics() {
    use std::os::unix::fs::PermissionsExt;
    let file = TokenFile::new(&one_token("team-a-ci", OLD, "write:team-a-*"));
    std::fs::set_permissions(&file.0, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (url, prefix) = (shared_redis().url(), unique_prefix());
    let service = Service::start(&[
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_TOKENS_FILE", file.path()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await;
    let client = Client::new();
    eventually("the start warns of the readable file", || async {
        service.json_lines().iter().any(|line| {
            line["level"] == "WARN"
                && line["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(file.path()) && m.contains("group or others"))
        })
    })
    .await;
    assert!(!service.log().contains(OLD), "the token is logged");
    assert_eq!(metric(&client, &service, "baton_tokens").await, Some(1.0));
    let loaded = metric(&client, &service, "baton_tokens_loaded_timestamp_seconds")
        .await
        .expect("loaded at start");
    assert!(loaded > 1.7e9, "{loaded}");
    let ok = "baton_tokens_reloads_total{result=\"ok\"}";
    let error = "baton_tokens_reloads_total{result=\"error\"}";
    assert_eq!(metric(&client, &service, error).await, Some(0.0));

    // A bad file: counted as an error, the set in force kept.
    file.rewrite(&format!(
        "{}{}",
        one_token("team-a-ci", OLD, "write:team-a-*"),
        one_token("team-a-ci", NEW, "read:*")
    ));
    service.signal(libc::SIGHUP);
    eventually("the failed reload is counted", || async {
        // (At least once: the look at the file every second may read it too.)
        metric(&client, &service, error).await >= Some(1.0)
    })
    .await;
    assert_eq!(metric(&client, &service, "baton_tokens").await, Some(1.0));
    assert_eq!(
        acquire_status(&client, &service, "team-a-1", OLD).await,
        201
    );

    // A good one: counted, and the new count in force.
    file.rewrite(&format!(
        "{}{}",
        one_token("team-a-ci", OLD, "write:team-a-*"),
        one_token("team-b-ci", NEW, "read:*")
    ));
    service.signal(libc::SIGHUP);
    eventually("the reload is counted", || async {
        metric(&client, &service, ok).await >= Some(1.0)
    })
    .await;
    assert_eq!(metric(&client, &service, "baton_tokens").await, Some(2.0));
}

#[tokio::test]
async fn a_yield_request_is_audited_by_the_asking_token_s_name() {
    let file = TokenFile::new(&format!(
        "{}{}",
        one_token("team-a-ci", OLD, "write:team-a-*"),
        one_token("team-a-other", NEW, "write:team-a-*")
    ));
    let (url, prefix) = (shared_redis().url(), unique_prefix());
    let service = Service::start(&[
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_TOKENS_FILE", file.path()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await;
    let client = Client::new();
    assert_eq!(
        acquire_status(&client, &service, "team-a-y", NEW).await,
        201
    );
    let asked = client
        .post(format!("{}/locks/team-a-y/yield", service.base))
        .bearer_auth(OLD)
        .body(r#"{"owner": "typed-by-the-asker", "reason": "release train"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 202);
    eventually("the yield is audited", || async {
        service.json_lines().iter().any(|line| {
            line["message"] == "audit"
                && line["event"] == "yield-requested"
                && line["by"] == "team-a-ci"
                && line["name"] == "team-a-y"
                && line["holders"] == 1
        })
    })
    .await;
    assert!(!service.log().contains(OLD), "the token is logged");
}
