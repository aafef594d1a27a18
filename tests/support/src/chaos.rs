//! What the chaos tests share: baton as a real process, clients that
//! acquire, refresh, hold and release (and force-release) while recording
//! every call and its answer into a [`History`], and a seeded random
//! source. What the run must show is judged from the history alone, by
//! [`crate::checker`]. The clients of claims, freezes and tickets are in
//! the files of this folder.

pub mod claims;
pub mod freezes;
pub mod tickets;

use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::history::{Acquire, Answer, Ask, Call, Followed, History, Op, StreamEvent};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::baton_process::baton_binary;
use crate::redis_server::free_port;

/// reqwest's TLS (rustls) needs a crypto provider: ring, as baton's own. A
/// test process builds its clients before any baton starts in it.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// One baton process on a fixed port, so a restart comes back where it was.
pub struct Instance {
    port: u16,
    env: Vec<(String, String)>,
    child: Option<Child>,
}

impl Instance {
    /// Starts baton with these `BATON_*` settings (and `RUST_LOG=error`) on a
    /// free port, and waits until it listens.
    pub fn start(env: &[(&str, &str)]) -> Self {
        let mut instance = Self {
            port: free_port(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            child: None,
        };
        // A port found free can be taken by another test before baton binds
        // it: baton then exits, and the port's other listener answers the
        // connect. Such a start is tried again on another port.
        for _ in 0..5 {
            instance.launch();
            // Long enough for a baton that lost the port to have exited.
            std::thread::sleep(Duration::from_millis(300));
            if instance.alive() {
                return instance;
            }
            instance.port = free_port();
        }
        panic!("baton did not start: {}", instance.last_words());
    }

    /// Starts it again, on the same port.
    pub fn launch(&mut self) {
        let child = Command::new(baton_binary())
            .env("BATON_LISTEN", format!("127.0.0.1:{}", self.port))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(self.log_file())
            .spawn()
            .expect("baton binary");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "baton did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where its standard error goes (errors only, `RUST_LOG=error`):
    /// appended across restarts, read by [`Self::last_words`].
    fn log_path(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "baton-chaos-instance-{}-{}.log",
            std::process::id(),
            self.port
        ))
    }

    fn log_file(&self) -> Stdio {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_or_else(|_| Stdio::null(), Stdio::from)
    }

    /// The last lines it wrote to standard error, for a test that finds it
    /// died unasked.
    pub fn last_words(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        if tail.is_empty() {
            "(it wrote nothing to standard error)".to_owned()
        } else {
            tail
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether the process runs (a paused one runs): `false` once it exited
    /// or was killed, which the test must have meant.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// SIGKILL, as a crash. Panics if the process had died already: a crash
    /// the test did not cause must not pass unnoticed.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            assert!(
                matches!(child.try_wait(), Ok(None)),
                "baton had exited before the test killed it"
            );
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` to the process, if it runs.
    fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: sending a signal to our own child process.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// SIGSTOP: the process is frozen (a VM freeze, CPU throttling) until
    /// [`Self::resume`].
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`Self::pause`].
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGTERM, as an orchestrator stopping it; waits for the exit status.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        child.wait().ok()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.resume();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the acquisitions of one workload ask for, picked at random for each.
#[derive(Debug, Clone, Copy)]
pub enum Asks {
    /// Shared or exclusive, as a coin falls.
    SharedOrExclusive,
    /// 1 to `limit` permits of `limit`, uniformly.
    Permits { limit: u32 },
}

impl Asks {
    fn pick(self, rng: &mut Rng) -> Ask {
        match self {
            Self::SharedOrExclusive => Ask::Lock {
                shared: rng.next_u64().is_multiple_of(2),
            },
            Self::Permits { limit } => Ask::Permits {
                permits: 1 + (rng.next_u64() % u64::from(limit)) as u32,
                limit,
            },
        }
    }

    /// `locks` or `semaphores`.
    fn kind(self) -> &'static str {
        match self {
            Self::SharedOrExclusive => "locks",
            Self::Permits { .. } => "semaphores",
        }
    }
}

/// Adds what `ask` asks for to an acquire body. The defaults (exclusive, one
/// permit) are sent as often as not left out.
fn add_ask(ask: Ask, body: &mut Value, rng: &mut Rng) {
    let explicit = rng.next_u64().is_multiple_of(2);
    match ask {
        Ask::Lock { shared } => {
            if shared || explicit {
                body["shared"] = shared.into();
            }
        }
        Ask::Permits { permits, limit } => {
            body["limit"] = limit.into();
            if permits != 1 || explicit {
                body["permits"] = permits.into();
            }
        }
    }
}

/// What a lease body says was granted, as an `Ask` of the same kind as
/// `asked`; `None` when the body lacks it.
fn granted(asked: Ask, lease: &Value) -> Option<Ask> {
    match asked {
        Ask::Lock { .. } => Some(Ask::Lock {
            shared: lease["shared"].as_bool()?,
        }),
        Ask::Permits { .. } => Some(Ask::Permits {
            permits: u32::try_from(lease["permits"].as_u64()?).ok()?,
            limit: u32::try_from(lease["limit"].as_u64()?).ok()?,
        }),
    }
}

/// What one client does, over and over.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The lock or semaphore it uses.
    pub name: String,
    /// What its acquisitions ask for (and so whether `name` is a lock).
    pub asks: Asks,
    pub ttl_ms: u64,
    /// Its acquisitions' `wait_ms`, each picked from these.
    pub waits: Vec<u64>,
    pub newest_wins: bool,
    /// Its acquisitions' `priority`, each picked from these.
    pub priorities: Vec<u8>,
    /// Whether it follows each lease's own stream while it holds it.
    pub follows: bool,
    /// How long a client holds a lease before releasing it, at most (the
    /// least is 0).
    pub hold_up_to: Duration,
    /// Whether it refreshes a third of its leases mid-hold, to a ttl shorter
    /// or longer than the one asked.
    pub refreshes: bool,
    /// How long it rests between one release and the next acquisition, at
    /// most.
    pub rest_up_to: Duration,
}

impl Workload {
    /// The defaults: one wait, no `newest_wins`, no refreshes, no rest.
    pub fn new(name: &str, asks: Asks, ttl_ms: u64, wait_ms: u64, hold_up_to: Duration) -> Self {
        Self {
            name: name.to_owned(),
            asks,
            ttl_ms,
            waits: vec![wait_ms],
            newest_wins: false,
            priorities: vec![0],
            follows: false,
            hold_up_to,
            refreshes: false,
            rest_up_to: Duration::ZERO,
        }
    }
}

/// The shared record of a run, which every client writes to.
pub type Recorder = Arc<Mutex<History>>;

/// What every client of a run shares.
#[derive(Clone)]
pub struct Run {
    /// The base URL of each instance.
    pub bases: Vec<String>,
    /// One HTTP client for all (building one per client task would block
    /// the runtime at the start, loading certificates, and look like a
    /// stuck line).
    pub http: reqwest::Client,
    pub record: Recorder,
    pub stop: watch::Receiver<bool>,
    pub seed: u64,
}

impl Run {
    pub fn new(
        bases: Vec<String>,
        record: Recorder,
        stop: watch::Receiver<bool>,
        seed: u64,
    ) -> Self {
        install_crypto();
        Self {
            bases,
            http: reqwest::Client::new(),
            record,
            stop,
            seed,
        }
    }
}

/// A small random source (xorshift), seeded so a run can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// A seed from `CHAOS_SEED`, else the clock.
    pub fn seed() -> u64 {
        std::env::var("CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            })
    }

    /// The next number of the sequence (xorshift64).
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A duration from `low` to `high` (milliseconds).
    pub fn ms(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.next_u64() % (high - low + 1))
    }
}

/// The answer to one call, as the checker reads it, and the lease id of a
/// lease body (kept by the client, never recorded); `asked` (for a call
/// that may answer a lease body) says what kind of lease.
async fn answer_of(
    sent: Result<reqwest::Response, reqwest::Error>,
    asked: Option<Ask>,
) -> (Answer, Option<String>) {
    let response = match sent {
        Ok(response) => response,
        Err(err) => {
            let reached = !err.is_connect();
            return (Answer::None { reached }, None);
        }
    };
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if status == 204 {
        let slug = String::new();
        return (Answer::Status { status, slug }, None);
    }
    let text = match response.text().await {
        Ok(text) => text,
        // The body cut off: as good as no answer.
        Err(_) => return (Answer::None { reached: true }, None),
    };
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if matches!(status, 200 | 201) {
        let lease = || {
            let token = body["fencing_token"].as_u64()?;
            let expires_at = humantime::parse_rfc3339(body["expires_at"].as_str()?).ok()?;
            let granted = granted(asked?, &body)?;
            let id = body["id"].as_str()?.to_owned();
            Some((
                Answer::Lease {
                    token,
                    expires_at,
                    granted,
                },
                Some(id),
            ))
        };
        return lease().unwrap_or_else(|| (Answer::Unclear(format!("{status}: {text}")), None));
    }
    let slug = body["type"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let answer = if content_type == "application/problem+json" && !slug.is_empty() {
        Answer::Status { status, slug }
    } else {
        Answer::Unclear(format!("{status} {content_type}: {text}"))
    };
    (answer, None)
}

/// Sends `request` with `timeout` and records it as a call of `client` on
/// `name`; returns its answer and the id of a lease body.
async fn record_call(
    record: &Recorder,
    (client, name, instance): (usize, &str, usize),
    op: Op,
    request: reqwest::RequestBuilder,
    timeout: Duration,
    asked: Option<Ask>,
) -> (Answer, Option<String>) {
    let sent = SystemTime::now();
    let (answer, id) = answer_of(request.timeout(timeout).send().await, asked).await;
    let answered = SystemTime::now();
    record.lock().unwrap().calls.push(Call {
        client,
        name: name.to_owned(),
        instance,
        op,
        sent,
        answered,
        answer: answer.clone(),
    });
    (answer, id)
}

/// One client, `id`: acquires through the instances in turn, holds for a
/// random while (refreshing some leases, shorter or longer), releases
/// through either instance until a release is answered, and records every
/// call, until `stop`.
pub async fn client_loop(id: usize, work: Workload, run: Run) {
    let Run {
        bases,
        http,
        record,
        stop,
        seed,
    } = run;
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let kind = work.asks.kind();
    let name = work.name.as_str();
    let mut turn = id;
    while !*stop.borrow() {
        turn += 1;
        let instance = turn % bases.len();
        let ask = work.asks.pick(&mut rng);
        let wait_ms = work.waits[(rng.next_u64() % work.waits.len() as u64) as usize];
        let owner = format!("client-{id}");
        let mut body = json!({"ttl_ms": work.ttl_ms, "wait_ms": wait_ms, "owner": owner});
        if work.newest_wins {
            body["newest_wins"] = true.into();
        }
        let priority = work.priorities[(rng.next_u64() % work.priorities.len() as u64) as usize];
        if priority > 0 {
            body["priority"] = priority.into();
        }
        add_ask(ask, &mut body, &mut rng);
        let acquire = Acquire {
            ask,
            ttl_ms: work.ttl_ms,
            wait_ms,
            newest_wins: work.newest_wins,
            priority,
        };
        // Past the wait an answer is due at once; a few seconds more for a
        // busy machine.
        let timeout = Duration::from_millis(wait_ms) + Duration::from_secs(5);
        let request = http
            .post(format!("{}/{kind}/{name}", bases[instance]))
            .body(body.to_string());
        let who = (id, name, instance);
        let op = Op::Acquire(acquire);
        let (answer, lease_id) = record_call(&record, who, op, request, timeout, Some(ask)).await;
        let (Answer::Lease { token, .. }, Some(lease_id)) = (answer, lease_id) else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let acquired = SystemTime::now();
        let lease_path = format!("{kind}/{name}/{lease_id}");
        if work.follows {
            let instance = turn % bases.len();
            let url = format!("{}/{lease_path}/events", bases[instance]);
            let (http, record, name) = (http.clone(), record.clone(), name.to_owned());
            tokio::spawn(follow(http, url, (id, name, token, instance), record, None));
        }
        // The critical section, with a refresh in a third of them: to a
        // ttl shorter (a third to half) or longer (up to twice) than asked.
        let mut hold_up_to = work.hold_up_to.as_millis() as u64;
        tokio::time::sleep(rng.ms(0, hold_up_to / 2)).await;
        let mut rest = rng.ms(0, hold_up_to / 2);
        if work.refreshes && rng.next_u64().is_multiple_of(3) {
            let extend = rng.next_u64().is_multiple_of(2);
            let ttl_ms = if extend {
                rng.ms(work.ttl_ms + 1000, 2 * work.ttl_ms).as_millis() as u64
            } else {
                rng.ms(work.ttl_ms / 3, work.ttl_ms / 2).as_millis() as u64
            };
            // The rest of the hold fits the new ttl.
            hold_up_to = hold_up_to.min(ttl_ms / 2);
            rest = rng.ms(0, hold_up_to / 2);
            let instance = (turn + 1) % bases.len();
            let request = http
                .patch(format!("{}/{lease_path}", bases[instance]))
                .body(json!({ "ttl_ms": ttl_ms }).to_string());
            let op = Op::Refresh {
                lease: token,
                ttl_ms,
            };
            let who = (id, name, instance);
            let timeout = Duration::from_millis(2500);
            let (answer, _) = record_call(&record, who, op, request, timeout, Some(ask)).await;
            // An extended lease is held past the expiry it had before, as
            // only the extension allows.
            if let (true, Answer::Lease { .. }) = (extend, answer) {
                let before = acquired + Duration::from_millis(work.ttl_ms);
                let past = before.duration_since(SystemTime::now()).unwrap_or_default();
                rest = past + rng.ms(300, 1000);
            }
        }
        tokio::time::sleep(rest).await;
        // Release, through either instance, until one is answered 204 or
        // 404 (a 503 or no answer: again).
        for attempt in 0..30 {
            let instance = (turn + attempt) % bases.len();
            let request = http.delete(format!("{}/{lease_path}", bases[instance]));
            let who = (id, name, instance);
            let op = Op::Release { lease: token };
            let timeout = Duration::from_millis(2500);
            let (answer, _) = record_call(&record, who, op, request, timeout, None).await;
            if matches!(
                answer,
                Answer::Status {
                    status: 204 | 404,
                    ..
                } | Answer::Unclear(_)
            ) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(rng.ms(0, work.rest_up_to.as_millis() as u64)).await;
    }
}

/// Follows a lease's own stream at `url` until its last event (or 30 s),
/// and records what it heard; tells `lost` when it hears the lease lost.
async fn follow(
    http: reqwest::Client,
    url: String,
    (client, name, lease, instance): (usize, String, u64, usize),
    record: Recorder,
    lost: Option<tokio::sync::mpsc::UnboundedSender<SystemTime>>,
) {
    let opened = SystemTime::now();
    let mut followed = Followed {
        client,
        name,
        lease,
        instance,
        opened,
        status: 0,
        events: Vec::new(),
    };
    let sent = http
        .get(url)
        .header("accept", "text/event-stream")
        .timeout(Duration::from_secs(30))
        .send()
        .await;
    if let Ok(mut response) = sent {
        followed.status = response.status().as_u16();
        let (mut buffer, mut event) = (String::new(), None::<String>);
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find('\n') {
                let line = buffer[..end].trim_end_matches('\r').to_owned();
                buffer.drain(..=end);
                if let Some(kind) = line.strip_prefix("event:") {
                    event = Some(kind.trim().to_owned());
                } else if let (Some(data), Some(kind)) = (line.strip_prefix("data:"), &event) {
                    let data: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
                    let at = SystemTime::now();
                    if kind == "lost" {
                        if let Some(lost) = &lost {
                            let _ = lost.send(at);
                        }
                    }
                    followed.events.push(StreamEvent {
                        at,
                        kind: kind.clone(),
                        reason: data["reason"].as_str().map(str::to_owned),
                    });
                    event = None;
                }
            }
            if followed
                .events
                .last()
                .is_some_and(|e| e.kind == "released" || e.kind == "lost")
            {
                break;
            }
        }
    }
    record.lock().unwrap().follows.push(followed);
}

/// An admin: force-releases `name` (a lock) through the instances in turn,
/// every `every` or so, until `stop`.
pub async fn force_release_loop(id: usize, name: String, every: Duration, run: Run) {
    let Run {
        bases,
        http,
        record,
        stop,
        seed,
    } = run;
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut turn = id;
    let every = every.as_millis() as u64;
    while !*stop.borrow() {
        tokio::time::sleep(rng.ms(every / 2, every * 3 / 2)).await;
        turn += 1;
        let instance = turn % bases.len();
        let request = http.delete(format!("{}/locks/{name}", bases[instance]));
        let who = (id, name.as_str(), instance);
        let timeout = Duration::from_millis(2500);
        record_call(&record, who, Op::ForceRelease, request, timeout, None).await;
    }
}

/// One acquisition and release through each of `bases`, so that the run
/// starts with every instance connected and Redis's functions loaded (the
/// first calls of a fresh instance are slow, and would look like a stuck
/// line).
pub async fn warm_up(bases: &[String]) {
    install_crypto();
    let http = reqwest::Client::new();
    for (i, base) in bases.iter().enumerate() {
        let lease: Value = http
            .post(format!("{base}/locks/warm-up-{i}"))
            .body(r#"{"ttl_ms": 5000}"#)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("a warm-up acquisition")
            .json()
            .await
            .expect("a lease body");
        let id = lease["id"].as_str().expect("a lease id");
        http.delete(format!("{base}/locks/warm-up-{i}/{id}"))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("a warm-up release");
    }
}

/// How far Redis's clock (`TIME`) is ahead of this process's, in
/// milliseconds: the middle of the call against Redis's answer.
pub fn redis_ahead_ms(conn: &mut redis::Connection) -> i64 {
    let before = SystemTime::now();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    let after = SystemTime::now();
    let middle = before + after.duration_since(before).unwrap_or_default() / 2;
    let redis = SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
    match redis.duration_since(middle) {
        Ok(ahead) => ahead.as_millis() as i64,
        Err(behind) => -(behind.duration().as_millis() as i64),
    }
}
