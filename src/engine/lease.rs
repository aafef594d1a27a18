//! The lease core of both kinds: acquire (joining the line and waiting),
//! refresh, check, release, force-release and status, each one script over
//! the name's keys; locks and semaphores differ only in their [`Kind`] and
//! the limit they pass (a lock's is 1).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::keys::Kind;
use super::line::Notice;
use super::reply::Reply;
use super::scripts;
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

    /// One script over `name`'s keys, with the four arguments every script takes.
    fn call<'a>(&self, script: &'a redis::Script, name: &Name) -> redis::ScriptInvocation<'a> {
        let keys = self.engine.keys();
        let mut call = script.prepare_invoke();
        for key in keys.line(self.kind, name) {
            call.key(key);
        }
        call.arg(self.kind.as_str())
            .arg(name.as_str())
            .arg(keys.name_channel(self.kind, name))
            .arg(self.engine.store().shard_publish_command())
            .arg(keys.events_channel());
        call
    }

    async fn eval(&self, call: &redis::ScriptInvocation<'_>) -> Result<Reply, Error> {
        Reply::new(self.engine.store().eval(call).await?)
    }

    /// Acquires a lease on `name`, waiting in line up to `wait` while it is
    /// busy. `Ok(Err(_))` when it was still busy at the end, or superseded.
    ///
    /// # Errors
    /// Redis unavailable (at the end of the wait, for a waiter), the service
    /// shutting down, or too many waiters.
    pub(crate) async fn acquire(
        &self,
        name: &Name,
        limit: Limit,
        request: AcquireRequest,
    ) -> Result<Result<Lease, Refusal>, Error> {
        let started = std::time::Instant::now();
        let id = LeaseId::new();
        let undo = {
            let leases = self.clone();
            let name = name.clone();
            move || {
                let (leases, name) = (leases.clone(), name.clone());
                async move { leases.end(&name, id, "leave").await.map(|r| r == 1) }
            }
        };
        let guard = Abandon::new(
            undo,
            request.ttl.as_duration().max(request.wait.as_duration()),
        );
        let mut attempts = 0u32;
        let outcome = self
            .acquire_as(name, id, limit, &request, &mut attempts)
            .await;
        // With BATON_REDIS_WAIT_REPLICAS, a lease is answered only once the
        // replicas have it, whether this call or a hand-off granted it; else
        // 503, and the guard gives it back.
        let outcome = match outcome {
            Ok(Ok(granted)) => {
                let mark = self.engine.keys().replication_mark(self.kind, name);
                match self.engine.store().wait_for_replicas(&mark).await {
                    Ok(()) => Ok(Ok(granted)),
                    Err(err) => Err(err),
                }
            }
            other => other,
        };
        match &outcome {
            // Known outcomes: acquired, refused (the line left), or never tried.
            Ok(_) | Err(Error::ShuttingDown | Error::TooManyWaiters) => guard.disarm(),
            // The script may have run: the guard leaves in the background.
            Err(_) => drop(guard),
        }
        let outcome = outcome?;
        let kind = match self.kind {
            Kind::Lock => Acquired::Lock,
            Kind::Semaphore => Acquired::Semaphore,
        };
        record_acquisition(kind, outcome.is_ok(), attempts, started.elapsed());
        if let Ok((token, _)) = &outcome {
            audit(
                "acquired",
                self.kind.as_str(),
                name.as_str(),
                request.owner.as_ref().map(Owner::as_str),
                Some(*token),
            );
        }
        Ok(outcome.map(|(token, expires_at_ms)| Lease {
            name: name.clone(),
            id,
            owner: request.owner,
            limit,
            fencing_token: token,
            ttl: request.ttl,
            expires_at_ms,
        }))
    }

    async fn acquire_as(
        &self,
        name: &Name,
        id: LeaseId,
        limit: Limit,
        request: &AcquireRequest,
        attempts: &mut u32,
    ) -> Result<Result<(u64, u64), Refusal>, Error> {
        let wait = request.wait.as_duration();
        if wait.is_zero() {
            *attempts += 1;
            return Ok(
                match self
                    .try_acquire(name, id, limit, request, 0, Join::No)
                    .await?
                {
                    Attempt::Acquired {
                        token,
                        expires_at_ms,
                    } => Ok((token, expires_at_ms)),
                    Attempt::Busy { busy, .. } => Err(Refusal::Busy(busy)),
                    Attempt::Superseded { owner } => Err(Refusal::Superseded { owner }),
                },
            );
        }
        let deadline = Instant::now() + wait;
        let asleep = Instant::now();
        let _waited = WaitingClock(asleep);
        let line = self.engine.line();
        let mut registration = line.register(self.kind, name, id)?;
        registration.subscribed(SUBSCRIBE_WAIT).await;
        let tag = registration.tag;
        let shutdown = self.engine.shutdown_token();
        // Join, riding out Redis errors until the wait ends: the same id and
        // tag make a repeated call find the place (or lease) the first one made.
        let mut backoff = Duration::from_millis(50);
        let mut busy = loop {
            *attempts += 1;
            let join = if *attempts == 1 {
                Join::First
            } else {
                Join::Again
            };
            match self.try_acquire(name, id, limit, request, tag, join).await {
                Ok(Attempt::Acquired {
                    token,
                    expires_at_ms,
                }) => return Ok(Ok((token, expires_at_ms))),
                Ok(Attempt::Busy { busy, .. }) => {
                    super::progress::joined(id);
                    break busy;
                }
                Ok(Attempt::Superseded { owner }) => return Ok(Err(Refusal::Superseded { owner })),
                Err(err @ Error::Unavailable(_)) => {
                    if Instant::now() + backoff >= deadline {
                        return Err(err);
                    }
                    tracing::debug!(%err, "joining the line failed; retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => return Err(Error::ShuttingDown),
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                Err(err) => return Err(err),
            }
        };
        if let Some(expires_in) = busy.next_expiry_in {
            registration.expiry_in(expires_in);
        }
        loop {
            let notice = tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    // Leave now, so the next in line moves up; the guard retries.
                    let _ = self.end(name, id, "leave").await;
                    return Err(Error::ShuttingDown);
                }
                notice = registration.notice() => notice,
                () = tokio::time::sleep_until(deadline) => break,
            };
            match notice {
                Notice::Granted {
                    token,
                    expires_at_ms,
                } => return Ok(Ok((token, expires_at_ms))),
                Notice::Superseded { owner } => {
                    // Takes the note of it out of the line.
                    let _ = self.end(name, id, "leave").await;
                    return Ok(Err(Refusal::Superseded { owner }));
                }
                Notice::Recheck => {
                    *attempts += 1;
                    match self
                        .try_acquire(name, id, limit, request, tag, Join::Again)
                        .await
                    {
                        Ok(Attempt::Acquired {
                            token,
                            expires_at_ms,
                        }) => return Ok(Ok((token, expires_at_ms))),
                        Ok(Attempt::Superseded { owner }) => {
                            return Ok(Err(Refusal::Superseded { owner }))
                        }
                        Ok(Attempt::Busy { busy: now, queued }) => {
                            if let Some(expires_in) = now.next_expiry_in {
                                registration.expiry_in(expires_in);
                            }
                            busy = now;
                            if !queued {
                                // Pruned from the line (this instance looked dead
                                // to Redis): the next check joins it again.
                                tracing::debug!("a waiter rejoined the line");
                            }
                        }
                        // Redis is away: keep the place and wait for the next notice.
                        Err(Error::Unavailable(_)) => {}
                        Err(err) => return Err(err),
                    }
                }
            }
        }
        // The wait is over: leave the line, unless a grant came meanwhile.
        drop(registration);
        let mut call = self.call(&scripts::RELEASE, name);
        call.arg(id.expose()).arg("give-up");
        let reply = self.eval(&call).await?;
        if reply.int(0)? == 3 {
            note_expired(self.kind, name, &reply, 3);
            return Ok(Ok((reply.uint(1)?, reply.uint(2)?)));
        }
        note_expired(self.kind, name, &reply, 7);
        busy.holders = reply.uint(1)?;
        busy.waiting = reply.uint(2)?;
        busy.next_expiry_in = expiry(reply.int(3)?);
        busy.owner = Owner::from_stored(reply.text(4)?);
        Ok(Err(Refusal::Busy(busy)))
    }

    /// One call of `acquire.lua`; `join` says whether it queues when busy,
    /// and whether the id may be known already (a call that may have run
    /// before), which only then is looked up.
    async fn try_acquire(
        &self,
        name: &Name,
        id: LeaseId,
        limit: Limit,
        request: &AcquireRequest,
        tag: u64,
        join: Join,
    ) -> Result<Attempt, Error> {
        let mut call = self.call(&scripts::ACQUIRE, name);
        call.arg(id.expose())
            .arg(tag)
            .arg(self.engine.line().instance())
            .arg(limit.get())
            .arg(request.ttl.as_ms())
            .arg(request.owner.as_ref().map_or("", Owner::as_str))
            .arg(u8::from(join != Join::No))
            .arg(u8::from(request.newest_wins))
            .arg(u8::from(join == Join::Again));
        let reply = self.eval(&call).await?;
        if reply.int(0)? == 2 {
            note_expired(self.kind, name, &reply, 2);
            return Ok(Attempt::Superseded {
                owner: Owner::from_stored(reply.text(1)?),
            });
        }
        if reply.int(0)? == 1 {
            note_expired(self.kind, name, &reply, 3);
            return Ok(Attempt::Acquired {
                token: reply.uint(1)?,
                expires_at_ms: reply.uint(2)?,
            });
        }
        note_expired(self.kind, name, &reply, 7);
        Ok(Attempt::Busy {
            busy: Busy {
                holders: reply.uint(1)?,
                limit,
                waiting: reply.uint(2)?,
                next_expiry_in: expiry(reply.int(3)?),
                owner: Owner::from_stored(reply.text(4)?),
            },
            queued: reply.uint(6)? > 0,
        })
    }

    /// Ends what `id` has on `name` (`mode` as `release.lua` lists); the
    /// script's reply code.
    async fn end(&self, name: &Name, id: LeaseId, mode: &str) -> Result<i64, Error> {
        let mut call = self.call(&scripts::RELEASE, name);
        call.arg(id.expose()).arg(mode);
        let reply = self.eval(&call).await?;
        let code = reply.int(0)?;
        note_expired(self.kind, name, &reply, if code == 3 { 3 } else { 7 });
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
        Ok(self.end(name, id, "release").await? == 1)
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
        let mut call = self.call(&scripts::REFRESH, name);
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
        let mut call = self.call(&scripts::CHECK, name);
        call.arg(id.expose());
        lease_from(name, id, &self.eval(&call).await?)
    }

    /// Ends every lease of `name`, whoever holds it; `false` when none was held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn force_release(&self, name: &Name) -> Result<bool, Error> {
        let reply = self.eval(&self.call(&scripts::FORCE_RELEASE, name)).await?;
        note_expired(self.kind, name, &reply, 1);
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
        let reply = self.eval(&self.call(&scripts::STATUS, name)).await?;
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

/// Adds the time a request spent in line to its waiting time when dropped.
struct WaitingClock(Instant);

impl Drop for WaitingClock {
    fn drop(&mut self) {
        crate::telemetry::add_waiting_time(self.0.elapsed());
    }
}

/// The audit lines and the count of the expired leases a script noticed,
/// listed in its reply from field `at` on (`lua/line.lua`: `noticed()`).
pub(super) fn note_expired(kind: Kind, name: &Name, reply: &Reply, at: usize) {
    let Ok(n) = reply.uint(at) else {
        return;
    };
    if n == 0 {
        return;
    }
    crate::telemetry::record_expired(kind.as_str(), n);
    for i in 0..n as usize {
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

/// Undoes an acquisition unless disarmed: dropped mid-call (the client went
/// away) or failed with the outcome unknown, the lease or the place in line
/// might exist in Redis with nobody to answer, so it leaves in the
/// background, retrying while Redis is unreachable for up to `give_up_after`.
struct Abandon<F, Fut>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, Error>> + Send + 'static,
{
    undo: Option<F>,
    give_up_after: Duration,
}

impl<F, Fut> Abandon<F, Fut>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, Error>> + Send + 'static,
{
    fn new(undo: F, give_up_after: Duration) -> Self {
        Self {
            undo: Some(undo),
            give_up_after,
        }
    }

    /// The caller was told the outcome: nothing to undo.
    fn disarm(mut self) {
        self.undo = None;
    }
}

impl<F, Fut> Drop for Abandon<F, Fut>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, Error>> + Send + 'static,
{
    fn drop(&mut self) {
        let Some(undo) = self.undo.take() else {
            return;
        };
        let give_up_at = Instant::now() + self.give_up_after;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                match undo().await {
                    Ok(released) => {
                        if released {
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

    /// A waiting request's future holds its state for the whole wait, so it
    /// must not carry the space of the Redis calls it makes (boxed in
    /// `Store::bounded`): about 1 KiB today, 4.4 KiB before.
    #[tokio::test]
    async fn an_acquisition_future_stays_small() {
        let mut settings = crate::config::Settings::from_lookup(|_| None).unwrap();
        settings.redis_url = "redis://127.0.0.1:1".into();
        let engine = Engine::start(&settings).await.unwrap();
        let leases = Leases::new(engine, Kind::Lock);
        let name = Name::parse("x").unwrap();
        let request = AcquireRequest {
            ttl: Ttl::default(),
            wait: crate::domain::WaitTime::from_ms(1000, 10_000).unwrap(),
            owner: None,
            newest_wins: false,
        };
        let size = std::mem::size_of_val(&leases.acquire(&name, Limit::ONE, request));
        assert!(size <= 2048, "an acquisition's future is {size} bytes");
    }
}
