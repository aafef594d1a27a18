//! What the chaos tests share: baton as a real process, the fault timeline,
//! clients that acquire, hold and release while recording what they were
//! told, and the checks every run must pass.
//!
//! A hold lasts, as the client was told, from the receipt of its 201 until
//! it sent the first release that reached baton (after that it no longer
//! relies on the lease, whether or not the release worked), or else until
//! its `expires_at`; the last [`EXPIRY_GRACE`] before an `expires_at` is
//! not counted, for the clocks of the client and of Redis.
//!
//! The checks count capacity, not leases: a lease takes its [`Ask::weight`]
//! of its name's capacity. A lock's capacity is [`LOCK_CAPACITY`], which an
//! exclusive lease takes whole and a shared one by one unit, so a lock is
//! held either by one exclusive lease alone or by shared leases only; a
//! semaphore's capacity is its `limit`, and a lease takes its `permits`.

use std::collections::{BTreeMap, HashSet};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::watch;

use crate::helpers::free_port;

/// The end of a lease as told that the checks ignore.
pub const EXPIRY_GRACE: Duration = Duration::from_millis(200);

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
        instance.launch();
        instance
    }

    /// Starts it again, on the same port.
    pub fn launch(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .env("BATON_LISTEN", format!("127.0.0.1:{}", self.port))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("baton binary");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "baton did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether the process runs (a paused one runs): `false` once it exited
    /// or was killed, which the test must have meant.
    #[allow(dead_code)] // not every test binary checks
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
    #[allow(dead_code)] // not every test binary pauses
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`Self::pause`].
    #[allow(dead_code)]
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGTERM, as an orchestrator stopping it; waits for the exit status.
    #[allow(dead_code)] // not every test binary stops instances
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

/// A lock's capacity in the checks: more than any number of shared leases
/// the clients can hold at once, and all of it an exclusive lease's weight.
pub const LOCK_CAPACITY: u64 = 1_000_000;

/// What one acquisition asks of its name (and what its 201 says it got).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// A lock's lease: shared (a reader) or exclusive (a writer).
    Lock { shared: bool },
    /// A semaphore's lease of `permits` of `limit`.
    Permits { permits: u32, limit: u32 },
}

impl Ask {
    pub const EXCLUSIVE: Self = Self::Lock { shared: false };
    pub const SHARED: Self = Self::Lock { shared: true };

    /// How much of its name's capacity the lease takes.
    pub fn weight(self) -> u64 {
        match self {
            Self::Lock { shared: true } => 1,
            Self::Lock { shared: false } => LOCK_CAPACITY,
            Self::Permits { permits, .. } => u64::from(permits),
        }
    }

    /// Adds what it asks for to an acquire body. The defaults (exclusive, one
    /// permit) are sent as often as not left out.
    fn add_to(self, body: &mut Value, rng: &mut Rng) {
        let explicit = rng.next() % 2 == 0;
        match self {
            Self::Lock { shared } => {
                if shared || explicit {
                    body["shared"] = shared.into();
                }
            }
            Self::Permits { permits, limit } => {
                body["limit"] = limit.into();
                if permits != 1 || explicit {
                    body["permits"] = permits.into();
                }
            }
        }
    }

    /// What a 201's lease body says was granted, as an `Ask` of the same
    /// kind as `self`; `None` when the body lacks it.
    fn granted(self, lease: &Value) -> Option<Self> {
        match self {
            Self::Lock { .. } => Some(Self::Lock {
                shared: lease["shared"].as_bool()?,
            }),
            Self::Permits { .. } => Some(Self::Permits {
                permits: u32::try_from(lease["permits"].as_u64()?).ok()?,
                limit: u32::try_from(lease["limit"].as_u64()?).ok()?,
            }),
        }
    }
}

impl std::fmt::Display for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Lock { shared: true } => f.write_str("shared"),
            Self::Lock { shared: false } => f.write_str("exclusive"),
            Self::Permits { permits, limit } => write!(f, "{permits} of {limit} permits"),
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
                shared: rng.next() % 2 == 0,
            },
            Self::Permits { limit } => Ask::Permits {
                permits: 1 + (rng.next() % u64::from(limit)) as u32,
                limit,
            },
        }
    }
}

/// A lease as a client was told it.
#[derive(Debug, Clone)]
pub struct Hold {
    pub name: String,
    pub token: u64,
    /// What its 201 said it holds: how much of the name's capacity it takes.
    pub ask: Ask,
    /// When the acquisition was sent: it was granted after this.
    pub requested: SystemTime,
    /// When its 201 arrived.
    pub start: SystemTime,
    /// When the client sent the first release that reached baton, or its
    /// `expires_at` if none did.
    pub end: SystemTime,
    /// Its `expires_at`.
    pub expires: SystemTime,
}

impl Hold {
    /// Until when the checks count it held.
    pub fn told_until(&self) -> SystemTime {
        self.end.min(self.expires - EXPIRY_GRACE)
    }

    /// Whether the checks count it held at `at`.
    fn held_at(&self, at: SystemTime) -> bool {
        self.start <= at && at < self.told_until()
    }
}

/// A time as RFC 3339 with milliseconds, for the reports.
pub fn when(at: SystemTime) -> humantime::Rfc3339Timestamp {
    humantime::format_rfc3339_millis(at)
}

/// The holds of each name, each list in the order they started.
pub fn holds_by_name(holds: &[Hold]) -> BTreeMap<String, Vec<Hold>> {
    let mut by_name: BTreeMap<String, Vec<Hold>> = BTreeMap::new();
    for hold in holds {
        by_name
            .entry(hold.name.clone())
            .or_default()
            .push(hold.clone());
    }
    for holds in by_name.values_mut() {
        holds.sort_by_key(|h| h.start);
    }
    by_name
}

/// How much of a name `holds` take (as told), at each time that changes, in
/// order: (when, in use from then on). Every change at one instant counts
/// at once: holds that touch do not overlap.
pub fn usage(holds: &[Hold]) -> Vec<(SystemTime, i64)> {
    let mut changes: BTreeMap<SystemTime, i64> = BTreeMap::new();
    for h in holds {
        if h.told_until() > h.start {
            let weight = h.ask.weight() as i64;
            *changes.entry(h.start).or_default() += weight;
            *changes.entry(h.told_until()).or_default() -= weight;
        }
    }
    let mut used = 0;
    changes
        .into_iter()
        .map(|(at, delta)| {
            used += delta;
            (at, used)
        })
        .collect()
}

/// The times `holds` take more than `capacity` at once (as told), in order:
/// (when, how much).
fn crowded(holds: &[Hold], capacity: u64) -> Vec<(SystemTime, i64)> {
    let mut over = Vec::new();
    for (at, used) in usage(holds) {
        if used > capacity as i64 {
            over.push((at, used));
        }
    }
    over
}

/// The violations in the holds of one name: more than `capacity` held at
/// once as told (for a lock: an exclusive lease beside any other), a token
/// granted twice, or a token not above every token of a hold that had been
/// told (its 201 had arrived) before the acquisition was sent.
pub fn check_holds(name: &str, holds: &[Hold], capacity: u64, violations: &mut Vec<String>) {
    for (at, used) in crowded(holds, capacity) {
        let held: Vec<String> = holds
            .iter()
            .filter(|h| h.held_at(at))
            .map(|h| {
                format!(
                    "token {} {} ({} .. {}, expires {})",
                    h.token,
                    h.ask,
                    when(h.start),
                    when(h.end),
                    when(h.expires)
                )
            })
            .collect();
        let used = if capacity == LOCK_CAPACITY {
            format!("{} leases", held.len())
        } else {
            format!("{used} of {capacity}")
        };
        violations.push(format!(
            "{name}: {used} held at {}: {}",
            when(at),
            held.join("; ")
        ));
    }
    let mut tokens = HashSet::new();
    for h in holds {
        if !tokens.insert(h.token) {
            violations.push(format!("{name}: token {} granted twice", h.token));
        }
    }
    // Tokens rise in grant order, across shared and exclusive leases alike.
    // An acquisition sent after another's 201 arrived was granted after that
    // one, so it must carry a larger token (across Redis restarts, data loss
    // and failovers too).
    let mut by_start = holds.to_vec();
    by_start.sort_by_key(|h| h.start);
    let mut by_request = holds.to_vec();
    by_request.sort_by_key(|h| h.requested);
    let mut max_told: Option<&Hold> = None;
    let mut j = 0;
    for h in &by_request {
        while j < by_start.len() && by_start[j].start < h.requested {
            if max_told.is_none_or(|m| by_start[j].token > m.token) {
                max_told = Some(&by_start[j]);
            }
            j += 1;
        }
        if let Some(m) = max_told.filter(|m| h.token <= m.token) {
            violations.push(format!(
                "{name}: token {} ({}, sent {}) after token {} ({}, told {})",
                h.token,
                h.ask,
                when(h.requested),
                m.token,
                m.ask,
                when(m.start)
            ));
        }
    }
}

/// What a fault touched: Redis, or one baton instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Redis,
    Instance(usize),
}

/// One fault: what it touched, and from when until it was over.
#[derive(Debug, Clone)]
pub struct Fault {
    pub target: Target,
    pub what: &'static str,
    pub from: SystemTime,
    pub to: SystemTime,
}

/// A request answered (or not) through one instance.
#[derive(Debug, Clone)]
pub struct Wait {
    pub name: String,
    /// What it asked for.
    pub ask: Ask,
    pub instance: usize,
    pub requested: SystemTime,
    pub answered: SystemTime,
    /// Its answer's status, or "no answer".
    pub outcome: String,
}

/// Everything the clients saw.
#[derive(Default)]
pub struct Record {
    pub holds: Vec<Hold>,
    /// Acquisitions that were answered (201, 409, ...).
    pub waits: Vec<Wait>,
    /// Requests that got no answer (connection failed, timed out).
    pub failures: Vec<Wait>,
    pub outcomes: BTreeMap<String, u64>,
    pub violations: Vec<String>,
    /// What the checks found worth showing beside the violations: the
    /// timelines around them.
    pub evidence: Vec<String>,
}

impl Record {
    pub fn count(&mut self, outcome: impl Into<String>) {
        *self.outcomes.entry(outcome.into()).or_default() += 1;
    }
}

/// What one kind of client does.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `locks/NAME` or `semaphores/NAME`.
    pub path: String,
    /// The acquire body, less what it asks for (`shared`, `limit`,
    /// `permits`), which [`Self::asks`] adds to each.
    pub body: Value,
    /// What its acquisitions ask for.
    pub asks: Asks,
    /// How long a client holds a lease before releasing it, at most (the
    /// least is 0).
    pub hold_up_to: Duration,
    /// A request with no answer within this counts as failed.
    pub timeout: Duration,
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

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A duration from `low` to `high` (milliseconds).
    pub fn ms(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.next() % (high - low + 1))
    }
}

/// Classifies a non-201 answer: a clear error is a problem+json with a
/// status the contract names for it; anything else is a violation.
async fn classify(response: reqwest::Response) -> Result<String, String> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let slug = body["type"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    if content_type == "application/problem+json" && matches!(status, 404 | 409 | 503) {
        Ok(format!("{status} {slug}"))
    } else {
        Err(format!("unclear answer {status} {content_type}: {body}"))
    }
}

/// One client: acquires through the instances in turn, holds for a random
/// while, releases, and records all it was told, until `stop`.
pub async fn client_loop(
    id: usize,
    work: Workload,
    bases: Vec<String>,
    record: Arc<Mutex<Record>>,
    stop: watch::Receiver<bool>,
    seed: u64,
) {
    install_crypto();
    let client = reqwest::Client::builder()
        .timeout(work.timeout)
        .build()
        .unwrap();
    let releaser = reqwest::Client::builder()
        .timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let name = work.path.rsplit('/').next().unwrap_or_default().to_owned();
    let mut turn = id;
    while !*stop.borrow() {
        turn += 1;
        let instance = turn % bases.len();
        let ask = work.asks.pick(&mut rng);
        let mut body = work.body.clone();
        ask.add_to(&mut body, &mut rng);
        let requested = SystemTime::now();
        let sent = client
            .post(format!("{}/{}", bases[instance], work.path))
            .body(body.to_string())
            .send()
            .await;
        let answered = SystemTime::now();
        let wait = Wait {
            name: name.clone(),
            ask,
            instance,
            requested,
            answered,
            outcome: sent.as_ref().map_or_else(
                |_| "no answer".to_owned(),
                |response| response.status().as_u16().to_string(),
            ),
        };
        let response = match sent {
            Ok(response) => response,
            Err(_) => {
                // Judged by the checks against the fault timeline.
                {
                    let mut record = record.lock().unwrap();
                    record.failures.push(wait);
                    record.count("acquire: no answer");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        record.lock().unwrap().waits.push(wait);
        if response.status() != 201 {
            let outcome = classify(response).await;
            {
                let mut record = record.lock().unwrap();
                match outcome {
                    Ok(outcome) => record.count(format!("acquire {outcome}")),
                    Err(violation) => record.violations.push(violation),
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let start = answered;
        let lease: Value = response.json().await.unwrap();
        let token = lease["fencing_token"].as_u64().unwrap();
        let expires = humantime::parse_rfc3339(lease["expires_at"].as_str().unwrap()).unwrap();
        // The checks count what the 201 says was granted, which must be what
        // was asked.
        let granted = ask.granted(&lease);
        {
            let mut record = record.lock().unwrap();
            record.count(format!("acquire 201 {}", granted.unwrap_or(ask)));
            if granted != Some(ask) {
                record.violations.push(format!(
                    "{name}: asked for {ask}, told {}: {lease}",
                    granted.map_or_else(|| "nothing".to_owned(), |g| g.to_string())
                ));
            }
        }
        // The critical section.
        tokio::time::sleep(rng.ms(0, work.hold_up_to.as_millis() as u64)).await;
        // Release, through either instance, until some answer comes; the
        // hold ends when the first release that reached baton was sent.
        let path = format!("{}/{}", work.path, lease["id"].as_str().unwrap());
        let mut end = None;
        for attempt in 0..20 {
            let instance = (turn + attempt) % bases.len();
            let sent = SystemTime::now();
            match releaser
                .delete(format!("{}/{path}", bases[instance]))
                .send()
                .await
            {
                Ok(response) => {
                    end.get_or_insert(sent);
                    let status = response.status().as_u16();
                    if status == 204 {
                        record.lock().unwrap().count("release 204");
                        break;
                    }
                    let outcome = classify(response).await;
                    let mut record = record.lock().unwrap();
                    match outcome {
                        Ok(outcome) if outcome.starts_with("404") => {
                            record.count(format!("release {outcome}"));
                            break;
                        }
                        Ok(outcome) => record.count(format!("release {outcome}")),
                        Err(violation) => {
                            record.violations.push(violation);
                            break;
                        }
                    }
                }
                Err(err) => {
                    // A release that timed out may have reached baton.
                    if err.is_timeout() {
                        end.get_or_insert(sent);
                    }
                    record.lock().unwrap().count("release: no answer");
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        record.lock().unwrap().holds.push(Hold {
            name: name.clone(),
            token,
            ask: granted.unwrap_or(ask),
            requested,
            start,
            end: end.unwrap_or(expires).min(expires),
            expires,
        });
    }
}

/// The violations in the fault timeline of a run: a request that got no
/// answer from an instance outside any fault of it or of Redis (a crash the
/// test did not cause passes nowhere unnoticed).
pub fn unexplained_failures(record: &Record, faults: &[Fault], violations: &mut Vec<String>) {
    let slack = Duration::from_secs(1);
    for failure in &record.failures {
        let explained = faults.iter().any(|f| {
            (f.target == Target::Instance(failure.instance) || f.target == Target::Redis)
                && failure.requested <= f.to + slack
                && failure.answered + slack >= f.from
        });
        if !explained {
            violations.push(format!(
                "instance {} gave no answer outside any fault ({:?} .. {:?})",
                failure.instance, failure.requested, failure.answered
            ));
        }
    }
}
