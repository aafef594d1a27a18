//! Baton services on free ports for the tests, each with its own key prefix,
//! and the requests and answers the tests share.

use std::time::{Duration, Instant};

use baton::config::Settings;
use baton::startup::Application;
use reqwest::{Method, Response};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::redis_server::{shared_redis, RedisServer};

/// A baton service for one test, on a free port, with its own key prefix.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub prefix: String,
    /// The service's engine (e.g. how many requests wait on it).
    pub engine: baton::engine::Engine,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

pub fn settings_for(redis_url: &str, prefix: &str) -> Settings {
    let mut settings = Settings::from_lookup(|_| None).expect("default settings");
    settings.listen = "127.0.0.1:0".into();
    settings.redis_url = redis_url.to_owned();
    settings.key_prefix = prefix.to_owned();
    settings
}

pub fn unique_prefix() -> String {
    format!("t{}:", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

impl TestApp {
    /// A service on the shared Redis with a fresh prefix.
    pub async fn spawn() -> Self {
        let redis = shared_redis();
        Self::spawn_with(settings_for(&redis.url(), &unique_prefix())).await
    }

    /// A service with these settings.
    pub async fn spawn_with(settings: Settings) -> Self {
        let prefix = settings.key_prefix.clone();
        let app = Application::build(settings).await.expect("service starts");
        let base = format!("http://{}", app.local_addr());
        let engine = app.engine().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(app.run_until(async move {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .expect("client"),
            prefix,
            engine,
            stop: Some(stop),
            handle: Some(handle),
        }
    }

    /// A second service over the same Redis and prefix (another instance).
    pub async fn sibling_of(&self, redis_url: &str) -> Self {
        Self::spawn_with(settings_for(redis_url, &self.prefix)).await
    }

    /// Stops the service the way SIGTERM would, and waits for it to finish.
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.handle.take() {
            Some(handle) => handle.await.expect("service task"),
            None => Ok(()),
        }
    }

    pub async fn request(&self, method: Method, path: &str, body: Option<&str>) -> Response {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            req = req.body(body.to_owned());
        }
        req.send().await.expect("request sent")
    }

    pub async fn post(&self, path: &str, body: &str) -> Response {
        self.request(Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> Response {
        self.request(Method::GET, path, None).await
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.request(Method::DELETE, path, None).await
    }

    pub async fn patch(&self, path: &str, body: &str) -> Response {
        self.request(Method::PATCH, path, Some(body)).await
    }

    /// Sends `POST path` with `body` in the background (a waiting client);
    /// resolves to the answer and when it arrived.
    pub fn post_in_background(&self, path: &str, body: &str) -> JoinHandle<Answer> {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .body(body.to_owned());
        tokio::spawn(async move {
            let response = request.send().await.expect("request sent");
            Answer {
                at: Instant::now(),
                response,
            }
        })
    }

    /// Acquires lock `name` and returns the lease body; panics unless 201.
    pub async fn acquire_lock(&self, name: &str, body: &str) -> Value {
        let response = self.post(&format!("/locks/{name}"), body).await;
        let status = response.status();
        let body: Value = response.json().await.expect("lease json");
        assert_eq!(status, 201, "acquire {name}: {body}");
        body
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// An answer to a request sent in the background.
pub struct Answer {
    pub at: Instant,
    pub response: Response,
}

/// The JSON body of a problem response, after checking its content type and status.
pub async fn problem(response: Response, status: u16, slug: &str) -> Value {
    assert_eq!(response.status(), status, "status of a {slug} problem");
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json"),
        "content type of a {slug} problem"
    );
    let body: Value = response.json().await.expect("problem json");
    assert!(
        body["type"]
            .as_str()
            .unwrap_or_default()
            .ends_with(&format!("/problems/{slug}")),
        "type of {body}"
    );
    assert_eq!(body["status"], status);
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    body
}

/// The fencing token of a lease body; panics when it has none, so that a
/// comparison of tokens never compares a missing one.
pub fn token_of(lease: &Value) -> u64 {
    lease["fencing_token"]
        .as_u64()
        .unwrap_or_else(|| panic!("a lease with a fencing token: {lease}"))
}

pub fn lease_path(kind: &str, lease: &Value) -> String {
    format!(
        "/{kind}/{}/{}",
        lease["name"].as_str().expect("name"),
        lease["id"].as_str().expect("id")
    )
}

/// Joins `body`'s request on `app` in the background and waits until Redis
/// counts one more in `name`'s line, so that joining order is certain.
pub async fn join_line(
    app: &TestApp,
    path: &str,
    body: &str,
    status_of: &TestApp,
) -> JoinHandle<Answer> {
    let before = waiting(status_of, path).await;
    let answer = app.post_in_background(path, body);
    let deadline = Instant::now() + Duration::from_secs(5);
    while waiting(status_of, path).await <= before {
        assert!(Instant::now() < deadline, "{body} never joined the line");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    answer
}

pub async fn waiting(app: &TestApp, path: &str) -> u64 {
    let status: Value = app.get(path).await.json().await.unwrap();
    status["waiting"].as_u64().expect("waiting")
}

/// `POST path` with `body`, which must be answered 201; the lease body.
pub async fn take(app: &TestApp, path: &str, body: &str) -> Value {
    let response = app.post(path, body).await;
    let status = response.status();
    let lease: Value = response.json().await.expect("lease json");
    assert_eq!(status, 201, "{path} {body}: {lease}");
    lease
}

/// Releases `lease` of `kind` (`locks` or `semaphores`), which must be
/// answered 204.
pub async fn release(app: &TestApp, kind: &str, lease: &Value) {
    assert_eq!(
        app.delete(&lease_path(kind, lease)).await.status(),
        204,
        "release {lease}"
    );
}

/// Two instances over the shared Redis, with one key prefix.
pub async fn two_instances() -> (TestApp, TestApp) {
    let a = TestApp::spawn().await;
    let b = a.sibling_of(&shared_redis().url()).await;
    (a, b)
}

pub async fn status_of(app: &TestApp, path: &str) -> Value {
    let response = app.get(path).await;
    assert_eq!(response.status(), 200, "status of {path}");
    response.json().await.expect("status json")
}

/// The answer to a request sent in the background; its `wait_ms` bounds it,
/// and this bound only turns a hang into a failure.
pub async fn answer_of(request: JoinHandle<Answer>, what: &str) -> Answer {
    tokio::time::timeout(Duration::from_secs(60), request)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer in 60 s"))
        .expect("request task")
}

/// The lease of a 201 answer.
pub async fn granted(answer: Answer, what: &str) -> (Instant, Value) {
    assert_eq!(answer.response.status(), 201, "{what}");
    let lease: Value = answer.response.json().await.expect("lease json");
    (answer.at, lease)
}

/// The commands Redis runs for the fewest of five acquire+release cycles of
/// `body` on a free name (a keep-alive or a listener count may fall into one).
pub async fn commands_per_cycle(redis: &RedisServer, app: &TestApp, path: &str, body: &str) -> u64 {
    // The first cycle makes the name's keys.
    let lease = take(app, path, body).await;
    release(app, path.split('/').nth(1).expect("kind"), &lease).await;
    let mut fewest = u64::MAX;
    for _ in 0..5 {
        let before = redis.commands().0;
        let lease = take(app, path, body).await;
        release(app, path.split('/').nth(1).expect("kind"), &lease).await;
        fewest = fewest.min(redis.commands().0 - before);
    }
    fewest
}
