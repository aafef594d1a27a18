//! The lease core of both kinds: acquire (joining the line and waiting),
//! refresh, check, release, force-release and status, each one script over
//! the name's keys; locks and semaphores differ only in their [`Kind`] and
//! the limit they pass (a lock's is 1).

use std::time::Duration;

use tokio::time::Instant;

use super::keys::Kind;
use super::line::{Notice, Registration};
use super::reply::Reply;
use super::scripts::{self, Op};
use super::{Engine, Error};
use crate::domain::{AcquireRequest, LeaseId, Limit, Name, Owner, Ttl};
use crate::telemetry::{audit, record_acquisition, Acquired};

/// How long a waiter waits for its name's channel before joining anyway (it
/// asks Redis again once subscribed, so nothing is lost either way).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// A live lease, as its holder sees it.
#[derive(Debug, Clone)]
pub struct Lease {
    pub name: Name,
    pub id: LeaseId,
    pub owner: Option<Owner>,
    /// The limit this acquisition was judged against (1 for a lock).
    pub limit: Limit,
    /// Strictly increasing per name: the order of the grants.
    pub fencing_token: u64,
    pub ttl: Ttl,
    /// Expiry in milliseconds since the Unix epoch, on Redis's clock.
    pub expires_at_ms: u64,
}

/// Why an acquisition got no lease.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// Held (full) for the whole wait.
    Busy(Busy),
    /// A newer `newest_wins` request took this waiter's place in line.
    Superseded { owner: Option<Owner> },
}

/// The name was held (a semaphore: full) when the wait ended.
#[derive(Debug, Clone)]
pub struct Busy {
    /// Live leases.
    pub holders: u64,
    /// The limit the acquisition was judged against.
    pub limit: Limit,
    /// Requests queued in the line.
    pub waiting: u64,
    /// The lease that ends first: its owner (a lock's holder) and time left.
    pub owner: Option<Owner>,
    pub next_expiry_in: Option<Duration>,
}

/// One live lease as anyone may see it: never its id.
#[derive(Debug, Clone)]
pub struct Holder {
    pub owner: Option<Owner>,
    pub fencing_token: u64,
    pub expires_in: Duration,
}

/// One queued request as anyone may see it.
#[derive(Debug, Clone)]
pub struct Waiter {
    /// 1 for the next to be served.
    pub position: u64,
    pub owner: Option<Owner>,
    pub waited: Duration,
}

/// A lock or semaphore as anyone may see it.
#[derive(Debug, Clone)]
pub struct Status {
    pub name: Name,
    /// Live leases in all.
    pub holders: u64,
    /// The limit of the latest acquisition, while known.
    pub limit: Option<Limit>,
    /// At most 100 live leases, in the order they were granted.
    pub leases: Vec<Holder>,
    /// Requests queued in all.
    pub waiting: u64,
    /// At most the first 100 of them, in the order they will be served.
    pub waiters: Vec<Waiter>,
}

impl Status {
    /// A lock's holder (a semaphore's first lease).
    pub fn holder(&self) -> Option<&Holder> {
        self.leases.first()
    }
}

/// Whether an acquisition call queues when busy, and whether it is the first
/// call with its id (a fresh id has no lease and no place in line yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Answer at once when busy (`wait_ms` 0); the only call with its id.
    No,
    /// Queue when busy; the first call with its id.
    First,
    /// Queue when busy, or find the place or lease an earlier call made.
    Again,
}

/// The outcome of one acquire script call.
enum Attempt {
    Acquired {
        token: u64,
        expires_at_ms: u64,
    },
    Busy {
        busy: Busy,
        queued: bool,
    },
    /// A newer `newest_wins` request took this waiter's place (learnt when
    /// asking again after a missed message).
    Superseded {
        owner: Option<Owner>,
    },
}

/// Operations on the leases of one kind; cheap to clone.
#[derive(Clone)]
pub(crate) struct Leases {
    engine: Engine,
    kind: Kind,
}

impl Leases {
    pub(crate) fn new(engine: Engine, kind: Kind) -> Self {
        Self { engine, kind }
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// One operation over `name`'s keys, with the arguments every operation takes.
    fn call(&self, op: Op, name: &Name) -> redis::Cmd {
        let engine = &self.engine;
        scripts::invocation(
            op,
            engine.keys(),
            self.kind,
            name,
            engine.store().shard_publish_command(),
            engine.line().instance(),
        )
    }

    async fn eval(&self, call: &redis::Cmd) -> Result<Reply, Error> {
        Reply::new(self.engine.store().fcall(call).await?)
    }

    /// Runs an operation that serves the line (its reply ends with
    /// `finish()`, `lua/line.lua`) with `args` after the common ones; `fields`
    /// says where the operation's own reply ends. What the reply ends with is
    /// heard: the expiries it noticed, the messages for this instance's waiters.
    ///
    /// # Errors
    /// Redis unavailable; the call may have run and granted to this
    /// instance's waiters on `name`, so they ask Redis again.
    async fn serve(
        &self,
        op: Op,
        name: &Name,
        args: impl FnOnce(&mut redis::Cmd),
        fields: impl FnOnce(&Reply) -> Result<usize, Error>,
    ) -> Result<Reply, Error> {
        let line = self.engine.line();
        let mut call = self.call(op, name);
        args(&mut call);
        match self.eval(&call).await {
            Ok(reply) => {
                line.heard(self.kind, name, &reply, fields(&reply)?);
                Ok(reply)
            }
            Err(err) => {
                line.ask_again(self.kind, name);
                Err(err)
            }
        }
    }

    /// Acquires a lease on `name`: at once, or by joining the line while it
    /// is busy and `request.wait` is above zero. A request that joined comes
    /// back as [`Acquiring::Queued`], whose [`Queued::outcome`] waits for its
    /// turn; what a waiting request keeps while it waits is that small value,
    /// not this call's state.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub(crate) async fn acquire(
        self,
        name: Name,
        limit: Limit,
        request: AcquireRequest,
    ) -> Result<Acquiring, Error> {
        // What a request keeps while it waits for its turn to join is this
        // future: every call it makes along the way is boxed, so that its
        // space is not the future's.
        let claim = Claim::new(self, name, limit, request);
        let (leases, name) = (&claim.leases, &claim.name);
        let mut attempts = 1u32;
        if claim.request.wait.as_duration().is_zero() {
            let turn = leases.engine.join_turn().await;
            let attempt = leases.try_acquire(name, claim.waiter(), Join::No);
            let outcome = Box::pin(attempt).await.map(Attempt::refused_or_granted);
            drop(turn);
            return Box::pin(claim.settle(attempts, outcome))
                .await
                .map(Acquiring::Now);
        }
        let deadline = Instant::now() + claim.request.wait.as_duration();
        let line = leases.engine.line();
        let registration = match line.register(leases.kind, name, claim.id, claim.tag) {
            Ok(registration) => registration,
            Err(err) => {
                return Box::pin(claim.settle(0, Err(err)))
                    .await
                    .map(Acquiring::Now)
            }
        };
        Box::pin(registration.subscribed(SUBSCRIBE_WAIT)).await;
        // Join, riding out Redis errors until the wait ends: the same waiter
        // makes a repeated call find the place (or lease) the first one made.
        let mut backoff = Duration::from_millis(50);
        let outcome = loop {
            let join = if attempts == 1 {
                Join::First
            } else {
                Join::Again
            };
            let turn = leases.engine.join_turn().await;
            let attempt = Box::pin(leases.try_acquire(name, claim.waiter(), join)).await;
            drop(turn);
            match attempt {
                Ok(Attempt::Busy { busy, .. }) => {
                    if let Some(expires_in) = busy.next_expiry_in {
                        registration.expiry_in(expires_in);
                    }
                    return Ok(Acquiring::Queued(Box::new(Queued {
                        claim,
                        registration: Some(registration),
                        deadline,
                        attempts,
                    })));
                }
                Ok(attempt) => break Ok(attempt.refused_or_granted()),
                Err(err @ Error::Unavailable(_)) => {
                    if Instant::now() + backoff >= deadline {
                        break Err(err);
                    }
                    tracing::debug!(%err, "joining the line failed; retrying");
                    if !Box::pin(leases.engine.pause(backoff)).await {
                        break Err(Error::ShuttingDown);
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    attempts += 1;
                }
                Err(err) => break Err(err),
            }
        };
        drop(registration);
        Box::pin(claim.settle(attempts, outcome))
            .await
            .map(Acquiring::Now)
    }

    /// Leaves `name`'s line at the end of a wait, keeping a lease granted
    /// meanwhile; else the refusal (judged against `limit`), with the name's
    /// state as it is now.
    async fn give_up(
        &self,
        name: &Name,
        id: LeaseId,
        waiter: String,
        limit: Limit,
    ) -> Result<Result<(u64, u64), Refusal>, Error> {
        let args = |call: &mut redis::Cmd| {
            call.arg(id.expose()).arg("give-up").arg(waiter);
        };
        let reply = self.serve(Op::Release, name, args, release_fields).await?;
        if reply.int(0)? == 3 {
            return Ok(Ok((reply.uint(1)?, reply.uint(2)?)));
        }
        Ok(Err(Refusal::Busy(Busy {
            holders: reply.uint(1)?,
            limit,
            waiting: reply.uint(2)?,
            next_expiry_in: expiry(reply.int(3)?),
            owner: Owner::from_stored(reply.text(4)?),
        })))
    }

    /// One call of `acquire.lua` for `waiter` (as the line keeps it); `join`
    /// says whether it queues when busy, and whether its id may be known
    /// already (a call that may have run before), which only then is looked up.
    async fn try_acquire(&self, name: &Name, waiter: String, join: Join) -> Result<Attempt, Error> {
        let args = |call: &mut redis::Cmd| {
            call.arg(waiter)
                .arg(u8::from(join != Join::No))
                .arg(u8::from(join == Join::Again));
        };
        let reply = self
            .serve(Op::Acquire, name, args, |r| Ok(attempt_from(r)?.1))
            .await?;
        Ok(attempt_from(&reply)?.0)
    }

    /// Ends what `id` has on `name` (`mode` as `release.lua` lists; `waiter`
    /// its place in line, "" for a release); the script's reply code.
    async fn end(
        &self,
        name: &Name,
        id: LeaseId,
        mode: &str,
        waiter: String,
    ) -> Result<i64, Error> {
        let args = |call: &mut redis::Cmd| {
            call.arg(id.expose()).arg(mode).arg(waiter);
        };
        let reply = self.serve(Op::Release, name, args, release_fields).await?;
        let code = reply.int(0)?;
        if code == 1 {
            let owner = reply.text(6).ok().and_then(Owner::from_stored);
            audit(
                "released",
                self.kind.as_str(),
                name.as_str(),
                owner.as_ref().map(Owner::as_str),
                reply.uint(5).ok(),
            );
        }
        Ok(code)
    }

    /// Releases the lease `id`; `false` when no live lease had that id.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn release(&self, name: &Name, id: LeaseId) -> Result<bool, Error> {
        Ok(self.end(name, id, "release", String::new()).await? == 1)
    }

    /// Extends the lease `id` by `ttl` (or its own ttl); `None` when it is not
    /// live. An expired lease is never brought back.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn refresh(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Option<Ttl>,
    ) -> Result<Option<Lease>, Error> {
        let mut call = self.call(Op::Refresh, name);
        call.arg(id.expose())
            .arg(ttl.map_or(String::new(), |t| t.as_ms().to_string()));
        let lease = lease_from(name, id, &self.eval(&call).await?)?;
        if let Some(lease) = &lease {
            audit(
                "refreshed",
                self.kind.as_str(),
                name.as_str(),
                lease.owner.as_ref().map(Owner::as_str),
                Some(lease.fencing_token),
            );
        }
        Ok(lease)
    }

    /// The lease `id` if it is live.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn check(&self, name: &Name, id: LeaseId) -> Result<Option<Lease>, Error> {
        let mut call = self.call(Op::Check, name);
        call.arg(id.expose());
        lease_from(name, id, &self.eval(&call).await?)
    }

    /// Ends every lease of `name`, whoever holds it; `false` when none was held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn force_release(&self, name: &Name) -> Result<bool, Error> {
        let reply = self
            .serve(Op::ForceRelease, name, |_| {}, |_| Ok(1))
            .await?;
        let released = reply.int(0)?;
        if released == 1 {
            audit(
                "force-released",
                self.kind.as_str(),
                name.as_str(),
                None,
                None,
            );
        }
        Ok(released == 1)
    }

    /// The leases and the line of `name`, at most 100 of each, in its turn
    /// among the reads whose cost grows with the data.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn status(&self, name: &Name) -> Result<Status, Error> {
        let _turn = self.engine.read_turn().await;
        self.status_now(name).await
    }

    /// [`Self::status`] for a caller that has the turn (a listing page).
    pub(crate) async fn status_now(&self, name: &Name) -> Result<Status, Error> {
        let reply = self.eval(&self.call(Op::Status, name)).await?;
        let n = reply.uint(3)? as usize;
        let mut leases = Vec::with_capacity(n);
        for i in 0..n {
            let at = 4 + 3 * i;
            leases.push(Holder {
                fencing_token: reply.uint(at)?,
                expires_in: Duration::from_millis(reply.int(at + 1)?.max(0) as u64),
                owner: Owner::from_stored(reply.text(at + 2)?),
            });
        }
        leases.sort_by_key(|l| l.fencing_token);
        let at = 4 + 3 * n;
        let m = reply.uint(at)? as usize;
        let mut waiters = Vec::with_capacity(m);
        for i in 0..m {
            let field = at + 1 + 2 * i;
            waiters.push(Waiter {
                position: i as u64 + 1,
                owner: Owner::from_stored(reply.text(field)?),
                waited: Duration::from_millis(reply.uint(field + 1)?),
            });
        }
        Ok(Status {
            name: name.clone(),
            holders: reply.uint(0)?,
            limit: Limit::new(reply.uint(1)?).ok(),
            leases,
            waiting: reply.uint(2)?,
            waiters,
        })
    }
}

/// The audit lines and the count of the expired leases a script noticed,
/// listed in its reply from field `at` on (`lua/line.lua`: `finish()`); the
/// field after them, or `None` when the reply has no such list.
pub(super) fn note_expired(kind: Kind, name: &Name, reply: &Reply, at: usize) -> Option<usize> {
    let n = reply.uint(at).ok()? as usize;
    if n > 0 {
        crate::telemetry::record_expired(kind.as_str(), n as u64);
    }
    for i in 0..n {
        let field = at + 1 + 2 * i;
        let owner = reply.text(field).ok().and_then(Owner::from_stored);
        audit(
            "expired",
            kind.as_str(),
            name.as_str(),
            owner.as_ref().map(Owner::as_str),
            reply.uint(field + 1).ok(),
        );
    }
    Some(at + 1 + 2 * n)
}

/// Where `release.lua`'s own reply ends.
fn release_fields(reply: &Reply) -> Result<usize, Error> {
    Ok(if reply.int(0)? == 3 { 3 } else { 7 })
}

/// What one `acquire.lua` reply says, and where it ends.
fn attempt_from(reply: &Reply) -> Result<(Attempt, usize), Error> {
    match reply.int(0)? {
        2 => Ok((
            Attempt::Superseded {
                owner: Owner::from_stored(reply.text(1)?),
            },
            2,
        )),
        1 => Ok((
            Attempt::Acquired {
                token: reply.uint(1)?,
                expires_at_ms: reply.uint(2)?,
            },
            3,
        )),
        _ => Ok((
            Attempt::Busy {
                busy: Busy {
                    holders: reply.uint(1)?,
                    limit: Limit::ONE,
                    waiting: reply.uint(2)?,
                    next_expiry_in: expiry(reply.int(3)?),
                    owner: Owner::from_stored(reply.text(4)?),
                },
                queued: reply.uint(5)? > 0,
            },
            6,
        )),
    }
}

fn expiry(ms: i64) -> Option<Duration> {
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

fn lease_from(name: &Name, id: LeaseId, reply: &Reply) -> Result<Option<Lease>, Error> {
    if reply.int(0)? != 1 {
        return Ok(None);
    }
    let protocol = |e: crate::domain::Invalid| Error::Protocol(e.0);
    Ok(Some(Lease {
        name: name.clone(),
        id,
        fencing_token: reply.uint(1)?,
        expires_at_ms: reply.uint(2)?,
        ttl: Ttl::from_ms(reply.uint(3)?).map_err(protocol)?,
        limit: Limit::new(reply.uint(4)?).map_err(protocol)?,
        owner: Owner::from_stored(reply.text(5)?),
    }))
}

/// What an acquisition came to at once, or its place in line.
pub enum Acquiring {
    /// Acquired, or refused (busy with no wait, superseded).
    Now(Result<Lease, Refusal>),
    /// Queued: [`Queued::outcome`] waits for the turn.
    Queued(Box<Queued>),
}

/// A request waiting in line: what it keeps while it waits, and nothing more.
/// Dropping it before its outcome (the client went away) leaves the line, or
/// gives back a lease granted meanwhile.
pub struct Queued {
    claim: Claim,
    /// Its place in this instance's registry, until the wait ends.
    registration: Option<Registration>,
    deadline: Instant,
    attempts: u32,
}

impl Queued {
    /// Its place in line, as the line keeps it (for [`Engine::place`]).
    pub fn waiter(&self) -> String {
        self.claim.waiter()
    }

    /// Waits for its turn until the deadline: the lease, or the refusal
    /// when the name was still busy at the end (or a newer `newest_wins`
    /// request took its place).
    ///
    /// # Errors
    /// Redis unavailable at the end of the wait, or the service shutting down.
    pub async fn outcome(mut self: Box<Self>) -> Result<Result<Lease, Refusal>, Error> {
        // The wait works on the boxed state in place: a waiting request's
        // future holds a pointer to it and the wait's own few locals.
        let outcome = self.wait().await;
        let Self {
            claim, attempts, ..
        } = *self;
        // Boxed: the wait is over, and its space need not be the waiter's.
        Box::pin(claim.settle(attempts, outcome)).await
    }

    /// Waits in line for a grant until the deadline, asking Redis again when
    /// messages may have been missed; then leaves the line, unless a grant
    /// came meanwhile.
    async fn wait(&mut self) -> Result<Result<(u64, u64), Refusal>, Error> {
        let claim = &self.claim;
        let (leases, name, id) = (&claim.leases, &claim.name, claim.id);
        while let Some(registration) = self.registration.as_mut() {
            let notice = tokio::select! {
                biased;
                notice = registration.notice() => notice,
                () = tokio::time::sleep_until(self.deadline) => break,
            };
            match notice {
                Notice::ShuttingDown => {
                    // Leave now, so the next in line moves up; the claim retries.
                    let _ = Box::pin(leases.end(name, id, "leave", claim.waiter())).await;
                    return Err(Error::ShuttingDown);
                }
                Notice::Granted {
                    token,
                    expires_at_ms,
                } => return Ok(Ok((token, expires_at_ms))),
                Notice::Superseded { owner } => {
                    // Takes the note of it out of the line.
                    let _ = Box::pin(leases.end(name, id, "leave", claim.waiter())).await;
                    return Ok(Err(Refusal::Superseded { owner }));
                }
                // Asking again is for a waiter whose wait goes on.
                Notice::Recheck if Instant::now() >= self.deadline => break,
                Notice::Recheck => {
                    self.attempts += 1;
                    let again = leases.try_acquire(name, claim.waiter(), Join::Again);
                    match Box::pin(again).await {
                        Ok(Attempt::Busy { busy, queued }) => {
                            if let (Some(expires_in), Some(registration)) =
                                (busy.next_expiry_in, &self.registration)
                            {
                                registration.expiry_in(expires_in);
                            }
                            if !queued {
                                // Pruned from the line (this instance looked dead
                                // to Redis): the next check joins it again.
                                tracing::debug!("a waiter rejoined the line");
                            }
                        }
                        Ok(attempt) => return Ok(attempt.refused_or_granted()),
                        // Redis is away: keep the place and wait for the next notice.
                        Err(Error::Unavailable(_)) => {}
                        Err(err) => return Err(err),
                    }
                }
            }
        }
        // The wait is over: leave the line, unless a grant came meanwhile.
        self.registration = None;
        Box::pin(leases.give_up(name, id, claim.waiter(), claim.limit)).await
    }
}

impl Attempt {
    /// A lease, or a refusal; a waiter that queued is neither.
    fn refused_or_granted(self) -> Result<(u64, u64), Refusal> {
        match self {
            Self::Acquired {
                token,
                expires_at_ms,
            } => Ok((token, expires_at_ms)),
            Self::Busy { busy, .. } => Err(Refusal::Busy(busy)),
            Self::Superseded { owner } => Err(Refusal::Superseded { owner }),
        }
    }
}

/// One acquisition under way: what it asks for, the lease id it acquires
/// under (its id in line while it waits), and the undo should nobody be told
/// its outcome.
///
/// Dropped before [`Claim::settle`] (the client went away) or settled with
/// the outcome unknown (a Redis error after the script may have run), the
/// lease or the place in line might exist in Redis with nobody to answer, so
/// it leaves in the background, retrying while Redis is unreachable for up to
/// the longer of the ttl and the wait.
struct Claim {
    leases: Leases,
    name: Name,
    id: LeaseId,
    /// A number naming it among this instance's waiters (in messages about it).
    tag: u64,
    limit: Limit,
    request: AcquireRequest,
    started: std::time::Instant,
    armed: bool,
}

impl Claim {
    fn new(leases: Leases, name: Name, limit: Limit, request: AcquireRequest) -> Self {
        Self {
            leases,
            name,
            id: LeaseId::new(),
            tag: super::line::new_tag(),
            limit,
            request,
            started: std::time::Instant::now(),
            armed: true,
        }
    }

    /// The waiter as the line keeps it: `id|tag|instance|ttl_ms|limit|newest|owner`
    /// (`lua/line.lua` reads it). Made again when needed rather than kept.
    fn waiter(&self) -> String {
        let request = &self.request;
        format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.id.expose(),
            self.tag,
            self.leases.engine.line().instance(),
            request.ttl.as_ms(),
            self.limit.get(),
            u8::from(request.newest_wins),
            request.owner.as_ref().map_or("", Owner::as_str),
        )
    }

    /// The end of the acquisition: with `BATON_REDIS_WAIT_REPLICAS`, a lease
    /// is answered only once the replicas have it, whether this request's call
    /// or a hand-off granted it (else 503, and the lease is given back); then
    /// its metrics and audit line, and the lease as its holder sees it.
    async fn settle(
        mut self,
        attempts: u32,
        outcome: Result<Result<(u64, u64), Refusal>, Error>,
    ) -> Result<Result<Lease, Refusal>, Error> {
        let (kind, name) = (self.leases.kind, &self.name);
        let outcome = match outcome {
            Ok(Ok(granted)) => {
                let mark = self.leases.engine.keys().replication_mark(kind, name);
                match Box::pin(self.leases.engine.store().wait_for_replicas(&mark)).await {
                    Ok(()) => Ok(Ok(granted)),
                    Err(err) => Err(err),
                }
            }
            // The refusal speaks of the limit this acquisition was judged against.
            Ok(Err(Refusal::Busy(mut busy))) => {
                busy.limit = self.limit;
                Ok(Err(Refusal::Busy(busy)))
            }
            other => other,
        };
        // Known outcomes: acquired, refused (the line left), or never tried;
        // any other error may have left something in Redis, which the claim
        // undoes when dropped.
        self.armed = !matches!(
            outcome,
            Ok(_) | Err(Error::ShuttingDown | Error::TooManyWaiters)
        );
        let outcome = outcome?;
        let acquired = match kind {
            Kind::Lock => Acquired::Lock,
            Kind::Semaphore => Acquired::Semaphore,
        };
        record_acquisition(acquired, outcome.is_ok(), attempts, self.started.elapsed());
        let request = &self.request;
        if let Ok((token, _)) = &outcome {
            audit(
                "acquired",
                kind.as_str(),
                name.as_str(),
                request.owner.as_ref().map(Owner::as_str),
                Some(*token),
            );
        }
        Ok(outcome.map(|(token, expires_at_ms)| Lease {
            name: name.clone(),
            id: self.id,
            owner: request.owner.clone(),
            limit: self.limit,
            fencing_token: token,
            ttl: request.ttl,
            expires_at_ms,
        }))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let give_up_after = self
            .request
            .ttl
            .as_duration()
            .max(self.request.wait.as_duration());
        let give_up_at = Instant::now() + give_up_after;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (leases, name, id, waiter) = (
            self.leases.clone(),
            self.name.clone(),
            self.id,
            self.waiter(),
        );
        runtime.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                match leases.end(&name, id, "leave", waiter.clone()).await {
                    Ok(released) => {
                        if released == 1 {
                            tracing::info!("released a lease whose requester was gone");
                        }
                        return;
                    }
                    Err(err) if Instant::now() + backoff < give_up_at => {
                        tracing::debug!(%err, "undo of an abandoned acquisition failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                    Err(err) => {
                        tracing::warn!(%err, "gave up undoing an abandoned acquisition; its ttl will end it");
                        return;
                    }
                }
            }
        });
    }
}

/// The operations both kinds share, each a plain delegation to the one lease
/// core: a kind's type ([`super::Locks`], [`super::Semaphores`]) states only
/// what differs (acquire's limit).
macro_rules! shared_lease_ops {
    ($kind:ty) => {
        impl $kind {
            /// One page of those in use whose names start with `prefix`,
            /// sorted by name (see [`super::listing`]).
            ///
            /// # Errors
            /// Redis unavailable.
            pub async fn list(
                &self,
                prefix: &$crate::domain::NamePrefix,
                limit: $crate::engine::PageLimit,
                cursor: $crate::engine::Cursor,
            ) -> Result<$crate::engine::Page<$crate::engine::Status>, $crate::engine::Error> {
                $crate::engine::listing::page(&self.0, prefix, limit, cursor).await
            }

            /// Extends the lease `id` by `ttl` (or its own ttl); `None` when it
            /// is not live (expired, released, or never this name's). An
            /// expired lease is never brought back.
            ///
            /// # Errors
            /// Redis unavailable.
            pub async fn refresh(
                &self,
                name: &$crate::domain::Name,
                id: $crate::domain::LeaseId,
                ttl: Option<$crate::domain::Ttl>,
            ) -> Result<Option<$crate::engine::Lease>, $crate::engine::Error> {
                self.0.refresh(name, id, ttl).await
            }

            /// The lease `id` if it is live.
            ///
            /// # Errors
            /// Redis unavailable.
            pub async fn check(
                &self,
                name: &$crate::domain::Name,
                id: $crate::domain::LeaseId,
            ) -> Result<Option<$crate::engine::Lease>, $crate::engine::Error> {
                self.0.check(name, id).await
            }

            /// Releases the lease `id` and serves the line; `false` when no
            /// live lease had that id.
            ///
            /// # Errors
            /// Redis unavailable.
            pub async fn release(
                &self,
                name: &$crate::domain::Name,
                id: $crate::domain::LeaseId,
            ) -> Result<bool, $crate::engine::Error> {
                self.0.release(name, id).await
            }

            /// Ends every lease of `name`, whoever holds it, and serves the
            /// line; `false` when none was held.
            ///
            /// # Errors
            /// Redis unavailable.
            pub async fn force_release(
                &self,
                name: &$crate::domain::Name,
            ) -> Result<bool, $crate::engine::Error> {
                self.0.force_release(name).await
            }

            /// Who holds `name` (at most 100 leases) and the first 100 of its line.
            ///
            /// # Errors
            /// Redis unavailable.
            pub async fn status(
                &self,
                name: &$crate::domain::Name,
            ) -> Result<$crate::engine::Status, $crate::engine::Error> {
                self.0.status(name).await
            }
        }
    };
}
pub(super) use shared_lease_ops;

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn size_of_return<A, F: FnOnce(A) -> Fut, Fut>(_: F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// The same for a function of four arguments.
    fn size_of_return4<A, B, C, D, F: FnOnce(A, B, C, D) -> Fut, Fut>(_: F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// A waiting request keeps a [`Queued`] and the future of its outcome for
    /// the whole wait, and the future of its acquisition while it waits for
    /// its turn to join the line (a flood of requests may wait there): none
    /// may carry the space of the Redis calls it makes.
    #[test]
    fn what_a_waiting_request_keeps_stays_small() {
        let queued = std::mem::size_of::<Queued>();
        assert!(queued <= 256, "a queued acquisition is {queued} bytes");
        let waiting = size_of_return(Queued::outcome);
        assert!(
            waiting <= 384,
            "a queued acquisition's outcome future is {waiting} bytes"
        );
        let joining = size_of_return4(Leases::acquire);
        assert!(joining <= 640, "an acquisition's future is {joining} bytes");
    }
}
