//! The test harness: private redis-servers on free ports, and baton services
//! on free ports, each test with its own key prefix.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use baton::config::Settings;
use baton::startup::Application;
use reqwest::{Method, Response};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A redis-server of the tests' own, killed when dropped or when the test
/// process dies.
pub struct RedisServer {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    appendonly: bool,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl RedisServer {
    /// Starts a new redis-server on a free port.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Starts one with append-only persistence (fsync on every write), so it
    /// keeps its data across restarts, even a kill.
    pub fn start_persistent() -> Self {
        Self::start_with(true)
    }

    fn start_with(appendonly: bool) -> Self {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("baton-test-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("redis dir");
        let mut server = Self {
            port,
            dir,
            child: None,
            appendonly,
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", if self.appendonly { "yes" } else { "no" }])
        // Persistent servers fsync every write, so a kill loses nothing.
        .args(["--appendfsync", "always"])
        // DEBUG SLEEP stalls Redis in the fault tests; the server is loopback-only.
        .args(["--enable-debug-command", "yes"])
        .arg("--dir")
        .arg(&self.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        self.child = Some(spawn_dying_with_parent(&mut cmd));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(client) = redis::Client::open(self.url()) {
                if let Ok(mut conn) = client.get_connection() {
                    if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not start", self.port);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (no shutdown save), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// A synchronous connection for assertions.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("test connection to redis")
    }

    /// Makes Redis stall (DEBUG SLEEP) for `seconds`, from another thread;
    /// join the handle to wait for the end of the stall.
    pub fn stall(&self, seconds: u64) -> std::thread::JoinHandle<redis::RedisResult<()>> {
        let mut conn = self.conn();
        let stall = std::thread::spawn(move || {
            redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(seconds)
                .query::<()>(&mut conn)
        });
        // Let the DEBUG command reach Redis first.
        std::thread::sleep(Duration::from_millis(50));
        stall
    }

    /// How many commands Redis has run, those that baton's operations ran
    /// inside them included (the `calls` of INFO commandstats, less the
    /// INFO calls that read them), and how many microseconds it spent in
    /// `FCALL`s (each call's own commands included).
    pub fn commands(&self) -> (u64, u64) {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .expect("INFO");
        let stat = |line: &str, field: &str| -> u64 {
            line.split(&format!("{field}="))
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let calls = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
            .map(|l| stat(l, "calls"))
            .sum();
        let usec = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_fcall:"))
            .map(|l| stat(l, "usec"))
            .sum();
        (calls, usec)
    }

    /// The sums of the waiting line of `tag` (`sem:NAME` or `lock:NAME`)
    /// under `prefix`, (waiters, their weight): as the owners hash keeps them
    /// (its field `queued`, "count|weight"; none: 0 and 0), and as the queue
    /// holds them (a waiter's weight is the sixth field of its entry); both
    /// read at one instant.
    pub fn line_sums(&self, prefix: &str, tag: &str) -> ((u64, u64), (u64, u64)) {
        let (kept, line): (Option<String>, Vec<String>) = redis::pipe()
            .atomic()
            .hget(format!("{prefix}{{{tag}}}:owners"), "queued")
            .zrange(format!("{prefix}{{{tag}}}:queue"), 0, -1)
            .query(&mut self.conn())
            .expect("the line");
        let kept = kept.map_or((0, 0), |kept| {
            let (count, weight) = kept.split_once('|').expect("count|weight");
            (
                count.parse().expect("count"),
                weight.parse().expect("weight"),
            )
        });
        let weight = line
            .iter()
            .map(|waiter| {
                waiter
                    .split('|')
                    .nth(5)
                    .and_then(|w| w.parse::<u64>().ok())
                    .expect("a waiter's weight")
            })
            .sum();
        (kept, (line.len() as u64, weight))
    }

    /// How many times Redis ran one of baton's operations (FCALL; EVALSHA
    /// and EVAL too, should anything run a script), from INFO commandstats.
    pub fn script_calls(&self) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .expect("INFO");
        info.lines()
            .filter(|l| {
                ["cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_eval:"]
                    .iter()
                    .any(|stat| l.starts_with(stat))
            })
            .filter_map(|l| l.split("calls=").nth(1))
            .filter_map(|rest| rest.split(',').next())
            .filter_map(|n| n.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `cmd` (a redis-server), asking the kernel to kill it when the
/// thread that started it is gone, so no server outlives the tests.
pub fn spawn_dying_with_parent(cmd: &mut Command) -> Child {
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill
    // the server when the thread that started it is gone.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
        .expect("redis-server is installed (scripts/test.sh installs it)")
}

/// The redis-server shared by the tests of this process, started once from a
/// thread that lives as long as the process (so the server dies with it).
pub fn shared_redis() -> &'static RedisServer {
    static SHARED: OnceLock<RedisServer> = OnceLock::new();
    SHARED.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(RedisServer::start()).expect("send");
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("shared redis started")
    })
}

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
