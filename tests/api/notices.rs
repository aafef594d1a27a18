//! Turn notices (`notify`): a ticket granted while nobody waits on it tells
//! a receiver, signed, once per grant, retried while the receiver fails;
//! a receiver that never answers delays nothing else. The receivers are
//! real HTTP servers on free ports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

use baton_testkit::{problem, settings_for, shared_redis, unique_prefix, TestApp};

const SECRET: &str = "a secret for the tests";

/// What a receiver does with each notice, in turn; the last repeats.
#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    Never,
}

/// One notice as the receiver got it.
#[derive(Clone)]
struct Received {
    signature: Option<String>,
    body: Bytes,
}

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Vec<Answer>>,
}

impl Receiver {
    /// A receiver on 127.0.0.1 answering `answers` in turn: its URL.
    async fn start(answers: Vec<Answer>) -> (Self, String) {
        let receiver = Self {
            got: Arc::default(),
            answers: Arc::new(answers),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, url)
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The notices received, each parsed, by ticket.
    fn by_ticket(&self) -> HashMap<String, Vec<Value>> {
        let mut by = HashMap::<String, Vec<Value>>::new();
        for r in self.got() {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            by.entry(body["ticket"].as_str().unwrap().to_owned())
                .or_default()
                .push(body);
        }
        by
    }

    /// Waits until `n` notices came, for at most `within`.
    async fn wait_for(&self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.got().len() < n {
            assert!(
                Instant::now() < deadline,
                "{n} notices within {within:?}: got {}",
                self.got().len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let answer = {
        let mut got = receiver.got.lock().unwrap();
        got.push(Received {
            signature: headers
                .get("baton-signature")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body,
        });
        let i = (got.len() - 1).min(receiver.answers.len() - 1);
        receiver.answers[i]
    };
    match answer {
        Answer::Status(code) => StatusCode::from_u16(code).unwrap(),
        Answer::Never => std::future::pending().await,
    }
}

/// A service that may notify 127.0.0.1 (`prefix`: another instance's, or
/// a fresh one).
async fn service(prefix: Option<&str>) -> TestApp {
    let redis = shared_redis();
    let prefix = prefix.map_or_else(unique_prefix, str::to_owned);
    let mut settings = settings_for(&redis.url(), &prefix);
    settings.webhook_hosts = vec!["127.0.0.1".into()];
    settings.webhook_secret = SECRET.into();
    TestApp::spawn_with(settings).await
}

/// Holds `name` on `app`: the lease's path.
async fn hold(app: &TestApp, name: &str) -> String {
    let lease = app.acquire_lock(name, r#"{"ttl_ms": 60000}"#).await;
    format!("/locks/{name}/{}", lease["id"].as_str().unwrap())
}

/// Takes a ticket with a notice to `url` on busy lock `name`: the ticket.
async fn ticket(app: &TestApp, name: &str, url: &str) -> String {
    let body = format!(r#"{{"wait_ms": 0, "keep_place_ms": 600000, "notify": "{url}"}}"#);
    let response = app.post(&format!("/locks/{name}"), &body).await;
    assert_eq!(response.status(), 202, "a ticket on {name}");
    let taken: Value = response.json().await.unwrap();
    taken["ticket"].as_str().unwrap().to_owned()
}

/// `Baton-Signature` as GitHub's webhooks have it, checked independently.
fn assert_signed(received: &Received) {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(&received.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        received.signature.as_deref(),
        Some(format!("sha256={expected}").as_str())
    );
}

async fn ticket_state(app: &TestApp, name: &str, ticket: &str) -> Value {
    let response = app.get(&format!("/locks/{name}/tickets/{ticket}")).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_granted_while_nobody_waits_sends_one_signed_notice() {
    let (receiver, url) = Receiver::start(vec![Answer::Status(204)]).await;
    let app = service(None).await;
    let lease = hold(&app, "deploy").await;
    let ticket = ticket(&app, "deploy", &url).await;

    assert_eq!(app.delete(&lease).await.status(), 204);
    receiver.wait_for(1, Duration::from_secs(10)).await;

    let got = receiver.got();
    assert_signed(&got[0]);
    let notice: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(notice["event"], "granted");
    assert_eq!(notice["kind"], "lock");
    assert_eq!(notice["name"], "deploy");
    assert_eq!(notice["ticket"], ticket.as_str());
    assert!(notice["fencing_token"].as_u64().unwrap() > 0, "{notice}");
    let shown = ticket_state(&app, "deploy", &ticket).await;
    assert_eq!(shown["state"], "granted");
    assert_eq!(notice["pickup_by"], shown["pickup_by"]);
    // Told sent once the receiver answered.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ticket_state(&app, "deploy", &ticket).await["notified_at"].is_string() {
        assert!(Instant::now() < deadline, "notified_at is shown");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The receiver's job collects the lease, with the token the notice said.
    let collected = app
        .post(&format!("/locks/deploy/tickets/{ticket}"), "")
        .await;
    assert_eq!(collected.status(), 201);
    let lease: Value = collected.json().await.unwrap();
    assert_eq!(lease["fencing_token"], notice["fencing_token"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.got().len(), 1, "one notice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_answers_500_twice_gets_the_notice_a_third_time() {
    let (receiver, url) = Receiver::start(vec![
        Answer::Status(500),
        Answer::Status(500),
        Answer::Status(200),
    ])
    .await;
    let app = service(None).await;
    let lease = hold(&app, "flaky").await;
    let ticket = ticket(&app, "flaky", &url).await;
    assert_eq!(app.delete(&lease).await.status(), 204);

    // While it fails, the ticket says why.
    receiver.wait_for(1, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let shown = ticket_state(&app, "flaky", &ticket).await;
        if shown["notify_error"] == "receiver answered 500" {
            assert!(shown.get("notified_at").is_none(), "{shown}");
            break;
        }
        assert!(Instant::now() < deadline, "notify_error is shown: {shown}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    receiver.wait_for(3, Duration::from_secs(20)).await;
    let got = receiver.got();
    for r in &got {
        assert_signed(r);
        assert_eq!(r.body, got[0].body, "the same notice each time");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let shown = ticket_state(&app, "flaky", &ticket).await;
        if shown["notified_at"].is_string() {
            assert!(shown.get("notify_error").is_none(), "{shown}");
            break;
        }
        assert!(Instant::now() < deadline, "notified_at is shown: {shown}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.got().len(), 3, "no try after the one that worked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_delays_no_grant_and_no_request() {
    let (receiver, url) = Receiver::start(vec![Answer::Never]).await;
    let app = service(None).await;
    let lease = hold(&app, "stuck").await;
    let ticket = ticket(&app, "stuck", &url).await;

    let started = Instant::now();
    assert_eq!(app.delete(&lease).await.status(), 204);
    receiver.wait_for(1, Duration::from_secs(10)).await;
    // The notice hangs; everything else goes on at once (generous margins).
    let shown = ticket_state(&app, "stuck", &ticket).await;
    assert_eq!(shown["state"], "granted");
    app.acquire_lock("other", r#"{"ttl_ms": 1000}"#).await;
    let lease = hold(&app, "stuck-2").await;
    assert_eq!(app.delete(&lease).await.status(), 204);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "requests waited for the receiver: {:?}",
        started.elapsed()
    );
    // Its timeout is a failure like any other: said, and tried again.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let shown = ticket_state(&app, "stuck", &ticket).await;
        if let Some(error) = shown["notify_error"].as_str() {
            assert!(error.contains("did not answer"), "{error}");
            break;
        }
        assert!(Instant::now() < deadline, "notify_error is shown: {shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Collecting does not wait for it either.
    let collect = Instant::now();
    let collected = app
        .post(&format!("/locks/stuck/tickets/{ticket}"), "")
        .await;
    assert_eq!(collected.status(), 201);
    assert!(collect.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_send_one_notice_per_grant() {
    let (receiver, url) = Receiver::start(vec![Answer::Status(200)]).await;
    let a = service(None).await;
    let b = service(Some(&a.prefix)).await;
    let names = ["one", "two", "three", "four"];
    let mut tickets = Vec::new();
    for (i, name) in names.iter().enumerate() {
        // Held on one instance, the ticket taken on the other, released on
        // either: whichever call grants, one instance sends.
        let (holder, taker) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let lease = hold(holder, name).await;
        tickets.push(ticket(taker, name, &url).await);
        let releaser = if i < 2 { holder } else { taker };
        assert_eq!(releaser.delete(&lease).await.status(), 204);
    }
    receiver
        .wait_for(names.len(), Duration::from_secs(10))
        .await;
    // Both instances look at the index meanwhile (every 5 s): still one each.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let by = receiver.by_ticket();
    for ticket in &tickets {
        assert_eq!(
            by.get(ticket).map(Vec::len),
            Some(1),
            "one notice per grant"
        );
    }
    assert_eq!(receiver.got().len(), names.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_url_the_service_may_not_call_is_refused_naming_notify() {
    let app = service(None).await;
    for (path, body) in [
        (
            "/locks/n",
            r#"{"keep_place_ms": 60000, "notify": "https://elsewhere.example.com/hook"}"#,
        ),
        (
            "/semaphores/n",
            r#"{"limit": 2, "keep_place_ms": 60000, "notify": "https://elsewhere.example.com/"}"#,
        ),
        (
            "/locks/n",
            r#"{"keep_place_ms": 60000, "notify": "ftp://127.0.0.1/hook"}"#,
        ),
        (
            "/locks/n",
            r#"{"keep_place_ms": 60000, "notify": "not a url"}"#,
        ),
        // A notice is for a ticket.
        ("/locks/n", r#"{"notify": "http://127.0.0.1/hook"}"#),
    ] {
        let refused = problem(app.post(path, body).await, 400, "invalid-request").await;
        assert!(
            refused["detail"].as_str().unwrap().starts_with("notify"),
            "{body}: {refused}"
        );
    }
    // With no BATON_WEBHOOK_HOSTS, notices are off: any URL is refused.
    let off = TestApp::spawn().await;
    let body = r#"{"keep_place_ms": 60000, "notify": "http://127.0.0.1/hook"}"#;
    let refused = problem(off.post("/locks/n", body).await, 400, "invalid-request").await;
    assert!(refused["detail"].as_str().unwrap().starts_with("notify"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_its_granting_instance_did_not_send_is_sent_by_another() {
    // The grant is made by an instance that sends no notices (as one that
    // died right after the grant would): another finds it in the index
    // (looked at every 30 s at most) and sends it.
    let (receiver, url) = Receiver::start(vec![Answer::Status(200)]).await;
    let sender = service(None).await;
    let silent = TestApp::spawn_with(settings_for(&shared_redis().url(), &sender.prefix)).await;
    let lease = hold(&silent, "handover").await;
    let ticket = ticket(&sender, "handover", &url).await;
    assert_eq!(silent.delete(&lease).await.status(), 204);

    receiver.wait_for(1, Duration::from_secs(60)).await;
    let got = receiver.got();
    assert_signed(&got[0]);
    let notice: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(notice["ticket"], ticket.as_str());
    let collected = silent
        .post(&format!("/locks/handover/tickets/{ticket}"), "")
        .await;
    assert_eq!(collected.status(), 201);
}
