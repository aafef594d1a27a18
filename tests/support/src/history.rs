//! What a chaos run recorded, as plain data: every call a client made (what
//! it asked, through which instance, when it was sent and answered, and the
//! answer), every fault the test injected, and what the run was. The checker
//! ([`crate::checker`]) judges a [`History`] alone, so a synthetic one tests it.

use std::time::{Duration, SystemTime};

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

    /// The capacity of the name it asks of, as the checks count it.
    pub fn capacity(self) -> u64 {
        match self {
            Self::Lock { .. } => LOCK_CAPACITY,
            Self::Permits { limit, .. } => u64::from(limit),
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

/// What a fault touched: Redis, or one baton instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Redis,
    Instance(usize),
}

/// What a fault was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// Redis killed (SIGKILL) and started again; `data_lost` when a key
    /// written before the kill was gone after it.
    RedisRestart { data_lost: bool },
    /// Redis stalled (`DEBUG SLEEP`).
    RedisStall,
    /// A baton killed (SIGKILL) and started again.
    InstanceKill,
    /// A baton stopped (SIGTERM, exit 0) and started again.
    InstanceStop,
    /// A baton paused (SIGSTOP, then SIGCONT).
    InstancePause,
    /// A cluster master killed, its replica promoted, the master back as a
    /// replica.
    MasterKill,
    /// A cluster master killed while its replica was paused
    /// (`CLIENT PAUSE WRITE`, so it lagged), the replica promoted.
    MasterKillLaggingReplica,
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::RedisRestart { data_lost: true } => "redis killed and restarted (data lost)",
            Self::RedisRestart { data_lost: false } => "redis killed and restarted (data kept)",
            Self::RedisStall => "redis stalled (DEBUG SLEEP)",
            Self::InstanceKill => "baton killed (SIGKILL) and restarted",
            Self::InstanceStop => "baton stopped (SIGTERM, exit 0) and restarted",
            Self::InstancePause => "baton paused (SIGSTOP, SIGCONT)",
            Self::MasterKill => "master killed, failed over, back as a replica",
            Self::MasterKillLaggingReplica => {
                "master killed while its replica lagged (CLIENT PAUSE WRITE), failed over"
            }
        })
    }
}

/// One fault: what it touched, and from when until it was over.
#[derive(Debug, Clone)]
pub struct Fault {
    pub target: Target,
    pub kind: FaultKind,
    pub from: SystemTime,
    pub to: SystemTime,
}

/// One acquisition's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire {
    pub ask: Ask,
    pub ttl_ms: u64,
    pub wait_ms: u64,
    pub newest_wins: bool,
    /// Its place in the line's order: higher is served first (0 to 9).
    pub priority: u8,
}

/// What a call asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Acquire(Acquire),
    /// `PATCH` of the lease whose fencing token is `lease`, to `ttl_ms`.
    Refresh {
        lease: u64,
        ttl_ms: u64,
    },
    /// `DELETE` of the lease whose fencing token is `lease`.
    Release {
        lease: u64,
    },
    /// `DELETE` of the name (admin): ends every lease of it.
    ForceRelease,
}

/// What a call was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A lease body (201 of an acquisition, 200 of a refresh).
    Lease {
        token: u64,
        expires_at: SystemTime,
        /// What the body says it holds.
        granted: Ask,
    },
    /// Any other answer that is a problem+json (or empty, for 204): its
    /// status and the slug of its `type`.
    Status { status: u16, slug: String },
    /// An answer that is not what the contract names for it.
    Unclear(String),
    /// No answer: the connection failed or the client gave up (at
    /// [`Call::answered`]). `reached`: the request may have reached baton (a
    /// timeout, a reset mid-call; not a refused connection).
    None { reached: bool },
}

impl Answer {
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Lease { token, .. } => write!(f, "lease {token}"),
            Self::Status { status, slug } => write!(f, "{status} {slug}"),
            Self::Unclear(what) => write!(f, "unclear: {what}"),
            Self::None { reached: true } => f.write_str("no answer (may have reached baton)"),
            Self::None { reached: false } => f.write_str("no answer (not connected)"),
        }
    }
}

/// One call of one client.
#[derive(Debug, Clone)]
pub struct Call {
    pub client: usize,
    pub name: String,
    pub instance: usize,
    pub op: Op,
    pub sent: SystemTime,
    /// When the answer arrived (or the client gave up).
    pub answered: SystemTime,
    pub answer: Answer,
}

/// One event of a lease's own stream, as its holder heard it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    pub at: SystemTime,
    /// `held`, `refreshed`, `expiring`, `released`, `lost`, ...
    pub kind: String,
    /// A `lost` event's reason.
    pub reason: Option<String>,
}

/// A lease's own stream (`GET .../{id}/events`), followed by its holder
/// from its 201 until the stream ended.
#[derive(Debug, Clone)]
pub struct Followed {
    pub client: usize,
    pub name: String,
    /// The lease's fencing token.
    pub lease: u64,
    /// The instance it was opened on.
    pub instance: usize,
    pub opened: SystemTime,
    /// The stream's status (0: no answer).
    pub status: u16,
    pub events: Vec<StreamEvent>,
}

/// The slug a claim's `DELETE` answered 204 is recorded with, as the
/// release of each of its leases: it ends the hold, but does not say that
/// the lease was still held (a claim's 204 releases whatever of it is
/// left, where a lease's own `DELETE` answers 404 for one gone).
pub const CLAIM_RELEASED: &str = "claim-released";

/// One `POST /claims`: the names it asked for and its answer. Each lease of
/// a claim answered 201 is also recorded in [`History::calls`] as an
/// acquisition of its name (with `wait_ms` 0: a claim's wait is judged here,
/// not by its names' lines), and each `PATCH` or `DELETE` of the claim as a
/// refresh or release of each lease, so its holds are judged like any other.
#[derive(Debug, Clone)]
pub struct Claim {
    pub client: usize,
    pub instance: usize,
    /// Each name and what the claim asked of it.
    pub names: Vec<(String, Ask)>,
    pub ttl_ms: u64,
    pub wait_ms: u64,
    pub sent: SystemTime,
    pub answered: SystemTime,
    /// The claim's own answer: 201 as `Status { status: 201, .. }` (its
    /// leases are in the calls), else as for any call.
    pub answer: Answer,
}

/// A claim held by a holder that runs like `baton run` under it: it follows
/// the holder's stream of every lease of the claim and stops its work as
/// soon as one says `lost`. The checker judges when it stopped against the
/// force-releases of its names.
#[derive(Debug, Clone)]
pub struct ClaimRun {
    pub client: usize,
    pub names: Vec<String>,
    /// When its claim was answered 201.
    pub granted: SystemTime,
    /// When a stream of one of its leases said `lost`, if one did.
    pub lost_heard: Option<SystemTime>,
    /// When it stopped its work (before it released the claim).
    pub stopped: SystemTime,
}

/// A freeze of one name the test made (`POST /freezes`, with an `until` of
/// its own) and deleted (`DELETE /freezes/{id}`) during a run.
#[derive(Debug, Clone)]
pub struct Freeze {
    pub name: String,
    /// When its `POST` was sent and answered.
    pub opened: (SystemTime, SystemTime),
    /// Whether the `POST` was answered 201 (else it may or may not exist).
    pub made: bool,
    /// The `until` it was made with: it ends then if not deleted before.
    pub until: SystemTime,
    /// When its `DELETE` was first sent and last answered, if one was
    /// answered 204 or 404.
    pub closed: Option<(SystemTime, SystemTime)>,
}

/// A call about a ticket: its take (an acquisition with `keep_place_ms`),
/// a collect (`POST .../tickets/{id}`) or a leave (`DELETE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketOp {
    Take,
    Collect,
    Leave,
}

/// One call of a [`Ticket`] and what it said.
#[derive(Debug, Clone)]
pub struct TicketCall {
    pub op: TicketOp,
    pub instance: usize,
    pub sent: SystemTime,
    pub answered: SystemTime,
    /// Its status (0: no answer).
    pub status: u16,
    /// A 201's fencing token.
    pub token: Option<u64>,
}

/// One acquisition with `keep_place_ms` on a name of tickets, and every
/// call about the ticket it became (its take answered 202).
#[derive(Debug, Clone)]
pub struct Ticket {
    pub client: usize,
    pub name: String,
    pub priority: u8,
    /// Whether its client meant to leave it uncollected.
    pub abandoned: bool,
    /// Its take first, then its collects and leave in order.
    pub calls: Vec<TicketCall>,
}

impl Ticket {
    /// Whether its take was answered 202: a ticket.
    pub fn taken(&self) -> bool {
        self.calls.first().is_some_and(|c| c.status == 202)
    }

    /// The tokens of its 201s (its take's or its collects').
    pub fn grants(&self) -> impl Iterator<Item = (&TicketCall, u64)> {
        self.calls
            .iter()
            .filter(|c| c.status == 201)
            .filter_map(|c| Some((c, c.token?)))
    }
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct History {
    pub started: SystemTime,
    pub ended: SystemTime,
    pub calls: Vec<Call>,
    /// Every claim sent (its leases' calls are in `calls`).
    pub claims: Vec<Claim>,
    /// The claims held by holders that run like `baton run`.
    pub claim_runs: Vec<ClaimRun>,
    /// The freezes the test made.
    pub freezes: Vec<Freeze>,
    pub faults: Vec<Fault>,
    /// The leases' own streams that holders followed.
    pub follows: Vec<Followed>,
    /// The acquisitions of names of tickets, each with its ticket's calls.
    pub tickets: Vec<Ticket>,
    /// Whether Redis keeps its data across a restart (`None`: no restarts
    /// in this kind of run).
    pub persistent: Option<bool>,
    /// How far Redis's clock was ahead of the test's (negative: behind),
    /// in milliseconds, as measured with `TIME`.
    pub redis_ahead_ms: i64,
}

impl History {
    pub fn new(started: SystemTime) -> Self {
        Self {
            started,
            ended: started,
            calls: Vec::new(),
            claims: Vec::new(),
            claim_runs: Vec::new(),
            freezes: Vec::new(),
            faults: Vec::new(),
            follows: Vec::new(),
            tickets: Vec::new(),
            persistent: None,
            redis_ahead_ms: 0,
        }
    }

    /// A time on Redis's clock, as the test's clock reads it.
    pub fn local(&self, redis: SystemTime) -> SystemTime {
        let ahead = Duration::from_millis(self.redis_ahead_ms.unsigned_abs());
        if self.redis_ahead_ms >= 0 {
            redis - ahead
        } else {
            redis + ahead
        }
    }
}

/// A time as RFC 3339 with milliseconds, for the reports.
pub fn when(at: SystemTime) -> humantime::Rfc3339Timestamp {
    humantime::format_rfc3339_millis(at)
}
