//! A reload reaches what is already open (issue 45, item 2), on the real
//! binary and a real SIGHUP: once a token is removed from the file, its
//! `/events` stream and its holder's stream end, and its waiting requests
//! (a plain acquire, one with progress events, a claim) leave the line and
//! are answered 401, never 201; a token narrowed from `read:*` to
//! `read:team-a-*` stops seeing team-b's names on the stream it opened
//! before.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::{Client, Response};
use serde_json::{json, Value};

use baton_testkit::service::Service;
use baton_testkit::{shared_redis, unique_prefix};

const HOLDER: &str = "holder-token-9b1c04e2";
const REVOKED: &str = "revoked-token-5f3a7d18";
const WATCHER: &str = "watcher-token-2c8e6b90";

/// Generous: the contract says within 1 s; a loaded machine may be slower.
const LIMIT: Duration = Duration::from_secs(10);

struct TokenFile(PathBuf);

impl TokenFile {
    fn new(text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("baton-revocation-{}.toml", unique_prefix()));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }

    fn rewrite(&self, text: &str) {
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

fn entry(name: &str, token: &str, allow: &str) -> String {
    format!("[[token]]\nname = \"{name}\"\nvalue = \"{token}\"\nallow = [\"{allow}\"]\n")
}

async fn start(file: &TokenFile) -> Service {
    let (url, prefix) = (shared_redis().url(), unique_prefix());
    Service::start(&[
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_TOKENS_FILE", file.path()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await
}

/// A server-sent event stream, read event by event.
struct Sse {
    response: Response,
    buffer: String,
}

/// What reading a stream gave.
#[derive(Debug)]
enum Read {
    Event(String, Value),
    Ended,
    Nothing,
}

impl Sse {
    fn new(response: Response) -> Self {
        assert_eq!(response.status(), 200, "an event stream");
        Self {
            response,
            buffer: String::new(),
        }
    }

    async fn next(&mut self, limit: Duration) -> Read {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data = Some(serde_json::from_str(v.trim()).expect("JSON data"));
                    }
                }
                if let Some(data) = data {
                    return Read::Event(name, data);
                }
                continue;
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None) | Err(_)) => return Read::Ended,
                Err(_) => return Read::Nothing,
            }
        }
    }

    /// Reads until the stream ends; panics if it is still open after `LIMIT`.
    async fn ends(&mut self) -> Vec<(String, Value)> {
        let deadline = Instant::now() + LIMIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Read::Event(name, data) => seen.push((name, data)),
                Read::Ended => return seen,
                Read::Nothing => panic!("the stream is still open; it sent {seen:?}"),
            }
        }
    }
}

fn post(
    client: &Client,
    service: &Service,
    path: &str,
    token: &str,
    body: Value,
) -> reqwest::RequestBuilder {
    client
        .post(format!("{}{path}", service.base))
        .bearer_auth(token)
        .json(&body)
}

async fn status(client: &Client, service: &Service, name: &str) -> Value {
    client
        .get(format!("{}/locks/{name}", service.base))
        .bearer_auth(HOLDER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits until `name`'s line holds `count` requests.
async fn line_holds(client: &Client, service: &Service, name: &str, count: u64) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = status(client, service, name).await;
        if now["waiting"].as_u64() == Some(count) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}'s line never held {count}: {now}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `token` is refused (401) by the service.
async fn refused(client: &Client, service: &Service, token: &str) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let answer = client
            .get(format!("{}/locks/team-a-probe", service.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        if answer.status() == 401 {
            return;
        }
        assert!(Instant::now() < deadline, "the token is still taken");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_removed_token_s_streams_end_and_its_waits_answer_401_never_201() {
    let kept = entry("holder", HOLDER, "write:*");
    let file = TokenFile::new(&format!("{kept}{}", entry("revoked", REVOKED, "write:*")));
    let service = start(&file).await;
    let client = Client::new();

    // The holder keeps team-a-1 and team-a-2 busy.
    let mut ids = Vec::new();
    for name in ["team-a-1", "team-a-2"] {
        let answer = post(
            &client,
            &service,
            &format!("/locks/{name}"),
            HOLDER,
            json!({"ttl_ms": 60_000}),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(answer.status(), 201);
        let lease: Value = answer.json().await.unwrap();
        ids.push(lease["id"].as_str().unwrap().to_owned());
    }
    let held: Value = post(
        &client,
        &service,
        "/locks/team-a-h",
        REVOKED,
        json!({"ttl_ms": 60_000}),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let id = held["id"].as_str().unwrap().to_owned();

    // What the token to be removed opens: both streams, three waits.
    let mut events = Sse::new(
        client
            .get(format!("{}/events?prefix=team-", service.base))
            .bearer_auth(REVOKED)
            .send()
            .await
            .unwrap(),
    );
    let mut own = Sse::new(
        client
            .get(format!("{}/locks/team-a-h/{id}/events", service.base))
            .header("accept", "text/event-stream")
            .bearer_auth(REVOKED)
            .send()
            .await
            .unwrap(),
    );
    assert!(matches!(own.next(LIMIT).await, Read::Event(name, _) if name == "held"));
    let plain = tokio::spawn(
        post(
            &client,
            &service,
            "/locks/team-a-1",
            REVOKED,
            json!({"ttl_ms": 60_000, "wait_ms": 60_000}),
        )
        .send(),
    );
    line_holds(&client, &service, "team-a-1", 1).await;
    let mut progress = Sse::new(
        post(
            &client,
            &service,
            "/locks/team-a-1",
            REVOKED,
            json!({"ttl_ms": 60_000, "wait_ms": 60_000}),
        )
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap(),
    );
    line_holds(&client, &service, "team-a-1", 2).await;
    let claim = tokio::spawn(
        post(
            &client,
            &service,
            "/claims",
            REVOKED,
            json!({"locks": [{"name": "team-a-2"}], "ttl_ms": 60_000, "wait_ms": 60_000}),
        )
        .send(),
    );
    line_holds(&client, &service, "team-a-2", 1).await;

    // Removed, and SIGHUP.
    file.rewrite(&kept);
    service.signal(libc::SIGHUP);

    let plain = tokio::time::timeout(LIMIT, plain)
        .await
        .expect("the waiting acquire is answered")
        .unwrap()
        .unwrap();
    assert_eq!(plain.status(), 401, "the waiting acquire");
    let claim = tokio::time::timeout(LIMIT, claim)
        .await
        .expect("the waiting claim is answered")
        .unwrap()
        .unwrap();
    assert_eq!(claim.status(), 401, "the waiting claim");
    let last = progress.ends().await;
    let (name, data) = last.last().expect("a last event").clone();
    assert_eq!(name, "problem", "{last:?}");
    assert_eq!(data["status"], 401, "{data}");
    assert!(last.iter().all(|(name, _)| name != "acquired"), "{last:?}");
    events.ends().await;
    let own_seen = own.ends().await;
    assert!(
        own_seen
            .iter()
            .all(|(name, _)| name != "released" && name != "lost"),
        "the stream ended because of the token, not the lease: {own_seen:?}"
    );
    refused(&client, &service, REVOKED).await;

    // Nobody of the removed token is left in either line, and nothing is
    // granted to it once the holder lets go.
    line_holds(&client, &service, "team-a-1", 0).await;
    line_holds(&client, &service, "team-a-2", 0).await;
    let free = client
        .delete(format!("{}/locks/team-a-1/{}", service.base, ids[0]))
        .bearer_auth(HOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(free.status(), 204);
    let after = status(&client, &service, "team-a-1").await;
    assert_eq!(after["held"], false, "granted to a removed token: {after}");
    // The lease the token holds stays until it ends.
    let check = client
        .get(format!("{}/locks/team-a-h", service.base))
        .bearer_auth(HOLDER)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(check["held"], true, "{check}");
}

#[tokio::test]
async fn a_token_narrowed_to_team_a_no_longer_sees_team_b_on_its_open_stream() {
    let holder = entry("holder", HOLDER, "write:*");
    let file = TokenFile::new(&format!("{holder}{}", entry("watcher", WATCHER, "read:*")));
    let service = start(&file).await;
    let client = Client::new();
    let mut events = Sse::new(
        client
            .get(format!("{}/events?prefix=team-", service.base))
            .bearer_auth(WATCHER)
            .send()
            .await
            .unwrap(),
    );
    let acquire = |name: &'static str| {
        post(
            &client,
            &service,
            &format!("/locks/{name}"),
            HOLDER,
            json!({"ttl_ms": 60_000}),
        )
        .send()
    };
    assert_eq!(acquire("team-b-1").await.unwrap().status(), 201);
    let seen = loop {
        match events.next(LIMIT).await {
            Read::Event(name, data) if name == "acquired" => break data,
            Read::Event(..) => {}
            other => panic!("no acquired event: {other:?}"),
        }
    };
    assert_eq!(seen["name"], "team-b-1");

    file.rewrite(&format!(
        "{holder}{}",
        entry("watcher", WATCHER, "read:team-a-*")
    ));
    service.signal(libc::SIGHUP);
    let deadline = Instant::now() + LIMIT;
    loop {
        let answer = client
            .get(format!("{}/locks/team-b-1", service.base))
            .bearer_auth(WATCHER)
            .send()
            .await
            .unwrap();
        if answer.status() == 403 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the narrowed token is not in force"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert_eq!(acquire("team-b-2").await.unwrap().status(), 201);
    assert_eq!(acquire("team-a-3").await.unwrap().status(), 201);
    let mut names = Vec::new();
    loop {
        match events.next(LIMIT).await {
            Read::Event(_, data) => {
                let name = data["name"].as_str().unwrap_or_default().to_owned();
                let last = name == "team-a-3";
                names.push(name);
                if last {
                    break;
                }
            }
            other => panic!("team-a-3 never came: {other:?} after {names:?}"),
        }
    }
    assert!(
        names.iter().all(|name| name.starts_with("team-a-")),
        "team-b's names after the narrowing: {names:?}"
    );
}
