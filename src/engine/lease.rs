//! The lease core of both kinds: acquire (joining the line and waiting),
//! refresh, check, release, force-release and status, each one function of
//! the library over the name's keys; locks and semaphores differ only in
//! the [`Kind`] a [`Leases`] is bound to and the limit they pass (a lock's is 1).
//!
//! # What makes a 201 true
//!
//! An acquisition answers a lease only from a reply of Redis that says the
//! lease is held until the expiry answered: an acquire call that wrote it
//! (a full lease), a grant in a serving call's reply or message marked held
//! (`G`: written full, for a waiter of the caller's instance), or this
//! waiter's own acquire or give-up call that confirmed a provisional grant
//! (`g`) while it was still live. A provisional grant is never answered
//! as it comes: its waiter confirms it first (see [`Queued::wait`]), and if
//! it lapsed meanwhile (this instance was paused, Redis stalled), the same
//! call puts the waiter back in line.

use std::time::Duration;

use tokio::time::Instant;

use super::functions::acquire::{Acquire, Attempt, Join};
use super::functions::check::{Check, Stored};
use super::functions::force_release::ForceRelease;
use super::functions::library::{Function, Serving};
use super::functions::refresh::Refresh;
use super::functions::release::{End, Ended};
use super::functions::status::Status as StatusCall;
use super::functions::waiter::Entry;
use super::listing::{self, Cursor, Page, PageLimit};
use super::model::{Busy, Lease, Refusal, Status};
use super::waiters::{new_tag, Registration, WaiterNotice};
use super::{Engine, Error};
use crate::domain::{AcquireRequest, Demand, Kind, LeaseId, Name, NamePrefix, Owner, Ttl};
use crate::telemetry::{audit, record_acquisition};

/// How long a waiter waits for its name's channel before joining anyway (it
/// asks Redis again once subscribed, so nothing is lost either way).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// Operations on the leases of one kind; cheap to clone.
#[derive(Clone)]
pub struct Leases {
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

    /// Runs a function that does not serve the line.
    async fn run<F: Function>(&self, name: &Name, function: &F) -> Result<F::Reply, Error> {
        self.engine.caller().run(self.kind, name, function).await
    }

    /// Runs a function that serves the line, and hears what its reply ends
    /// with: the expiries it noticed, the messages for this instance's
    /// waiters (grants among them).
    ///
    /// The call runs to its end ([`RunToEnd`]): once sent, its reply is heard
    /// even if the request that made it goes away (its client hung up), so a
    /// grant it made to a waiter here is never lost with it.
    ///
    /// # Errors
    /// Redis unavailable; the call may have run and granted to this
    /// instance's waiters on `name`, so they ask Redis again.
    async fn serve<F: Serving>(&self, name: &Name, function: &F) -> Result<F::Reply, Error>
    where
        F::Reply: Send + 'static,
    {
        let call = self.engine.caller().call(self.kind, name, function);
        let (engine, kind, name) = (self.engine.clone(), self.kind, name.clone());
        RunToEnd::new(async move {
            let line = engine.waiters();
            match engine.caller().run_serving::<F>(&call).await {
                Ok((reply, tail)) => {
                    line.heard(kind, &name, tail);
                    Ok(reply)
                }
                Err(err) => {
                    line.ask_again(kind, &name);
                    Err(err)
                }
            }
        })
        .await
    }

    /// Acquires a lease on `name` (its `demand`'s weight judged against its
    /// limit, see [`Demand`]): at once, or by joining the line while it is busy and
    /// `request.wait` is above zero. A request that joined comes
    /// back as [`Acquiring::Queued`], whose [`Queued::outcome`] waits for its
    /// turn; what a waiting request keeps while it waits is that small value,
    /// not this call's state.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub async fn acquire(
        self,
        name: Name,
        demand: Demand,
        request: AcquireRequest,
    ) -> Result<Acquiring, Error> {
        // What a request keeps while it waits for its turn to join is this
        // future: every call it makes along the way is boxed, so that its
        // space is not the future's.
        let claim = Claim::new(self, name, demand, request);
        let (leases, name) = (&claim.leases, &claim.name);
        let mut attempts = 1u32;
        if claim.request.wait.as_duration().is_zero() {
            let turn = leases.engine.join_turn().await;
            let attempt = leases.try_acquire(name, claim.entry(), Join::No);
            let outcome = Box::pin(attempt).await.map(|a| claim.answer(a));
            drop(turn);
            return Box::pin(claim.settle(attempts, outcome))
                .await
                .map(Acquiring::Now);
        }
        let deadline = Instant::now() + claim.request.wait.as_duration();
        let line = leases.engine.waiters();
        let registration = match line.register(leases.kind, name, claim.tag) {
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
            let turn = leases.engine.join_turn().await;
            let attempt = Box::pin(leases.try_acquire(name, claim.entry(), Join::Queue)).await;
            drop(turn);
            match attempt {
                Ok(Attempt::Queued { next_expiry_in }) => {
                    registration.in_line(next_expiry_in);
                    return Ok(Acquiring::Queued(Box::new(Queued {
                        claim,
                        registration: Some(registration),
                        deadline,
                        attempts,
                    })));
                }
                Ok(attempt) => break Ok(claim.answer(attempt)),
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

    /// One acquire call for `waiter`; `join` says whether it queues when
    /// busy (and then finds what an earlier call with the same waiter made).
    async fn try_acquire(
        &self,
        name: &Name,
        waiter: Entry<'_>,
        join: Join,
    ) -> Result<Attempt, Error> {
        self.serve(name, &Acquire { waiter, join }).await
    }

    /// Ends what `end` names on `name`, auditing a release.
    async fn end(&self, name: &Name, end: End<'_>) -> Result<Ended, Error> {
        let ended = self.serve(name, &end).await?;
        if let Ended::Released {
            fencing_token,
            owner,
        } = &ended
        {
            audit(
                "released",
                self.kind.as_str(),
                name.as_str(),
                owner.as_ref().map(Owner::as_str),
                Some(*fencing_token),
            );
        }
        Ok(ended)
    }

    /// Releases the lease `id` and serves the line; `false` when no live
    /// lease had that id.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn release(&self, name: &Name, id: LeaseId) -> Result<bool, Error> {
        let ended = self.end(name, End::Release(id)).await?;
        Ok(matches!(ended, Ended::Released { .. }))
    }

    /// Extends the lease `id` by `ttl` (or its own ttl); `None` when it is not
    /// live (expired, released, or never this name's). An expired lease is
    /// never brought back.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn refresh(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Option<Ttl>,
    ) -> Result<Option<Lease>, Error> {
        let stored = self.run(name, &Refresh { id, ttl }).await?;
        let lease = stored.map(|stored| lease_of(name, id, stored));
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
    pub async fn check(&self, name: &Name, id: LeaseId) -> Result<Option<Lease>, Error> {
        let stored = self.run(name, &Check(id)).await?;
        Ok(stored.map(|stored| lease_of(name, id, stored)))
    }

    /// Ends every lease of `name`, whoever holds it, writing one audit line
    /// for each lease it ended (the first 100, then one for the rest), and
    /// serves the line; `false` when none was held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn force_release(&self, name: &Name) -> Result<bool, Error> {
        let Some(ended) = self.serve(name, &ForceRelease).await? else {
            return Ok(false);
        };
        for lease in &ended.shown {
            audit(
                "force-released",
                self.kind.as_str(),
                name.as_str(),
                lease.owner.as_ref().map(Owner::as_str),
                Some(lease.fencing_token),
            );
        }
        let rest = ended.count.saturating_sub(ended.shown.len() as u64);
        if rest > 0 {
            tracing::info!(
                target: "baton::audit",
                event = "force-released",
                kind = self.kind.as_str(),
                name = name.as_str(),
                more_leases = rest,
                "audit"
            );
        }
        Ok(true)
    }

    /// The leases and the line of `name`, at most 100 of each, in its turn
    /// among the reads whose cost grows with the data.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn status(&self, name: &Name) -> Result<Status, Error> {
        let _turn = self.engine.read_turn().await;
        self.status_now(name).await
    }

    /// One page of those in use whose names start with `prefix`, sorted by
    /// name (see [`listing`]).
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn list(
        &self,
        prefix: &NamePrefix,
        limit: PageLimit,
        cursor: Cursor,
    ) -> Result<Page<Status>, Error> {
        listing::page(self, prefix, limit, cursor).await
    }

    /// [`Self::status`] for a caller that has the turn (a listing page).
    pub(crate) async fn status_now(&self, name: &Name) -> Result<Status, Error> {
        let snapshot = self.run(name, &StatusCall).await?;
        Ok(Status {
            name: name.clone(),
            holders: snapshot.holders,
            used: snapshot.used,
            limit: snapshot.limit,
            leases: snapshot.leases,
            waiting: snapshot.waiting,
            waiters: snapshot.waiters,
        })
    }
}

/// A call that may grant, awaited in place; if whoever awaits it goes away
/// before its end, a task of its own finishes it (and so hears its reply).
/// Only an abandoned call costs a task.
struct RunToEnd<T: Send + 'static> {
    call: Option<std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> RunToEnd<T> {
    fn new(call: impl std::future::Future<Output = T> + Send + 'static) -> Self {
        Self {
            call: Some(Box::pin(call)),
        }
    }
}

impl<T: Send + 'static> std::future::Future for RunToEnd<T> {
    type Output = T;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<T> {
        let this = self.get_mut();
        let Some(call) = this.call.as_mut() else {
            return std::task::Poll::Pending;
        };
        let done = call.as_mut().poll(cx);
        if done.is_ready() {
            this.call = None;
        }
        done
    }
}

impl<T: Send + 'static> Drop for RunToEnd<T> {
    fn drop(&mut self) {
        if let (Some(call), Ok(runtime)) = (self.call.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move {
                let _ = call.await;
            });
        }
    }
}

fn lease_of(name: &Name, id: LeaseId, stored: Stored) -> Lease {
    Lease {
        name: name.clone(),
        id,
        owner: stored.owner,
        demand: stored.demand,
        fencing_token: stored.fencing_token,
        ttl: stored.ttl,
        expires_at_ms: stored.expires_at_ms,
    }
}

/// What an acquisition came to at once, or its place in line.
pub enum Acquiring {
    /// Acquired, or refused (busy with no wait, superseded).
    Now(Result<Lease, Refusal>),
    /// Queued: [`Queued::outcome`] waits for the turn.
    Queued(Box<Queued>),
}

/// A request waiting in line: what it keeps while it waits, and nothing more.
/// Dropping it before its outcome (the client went away) leaves the line and
/// gives back a lease granted meanwhile.
pub struct Queued {
    claim: Claim,
    /// Its place in this instance's registry, until the wait ends.
    registration: Option<Registration>,
    deadline: Instant,
    attempts: u32,
}

/// A granted lease as the holder is told it: its token and when it ends.
type Granted = (u64, u64);

impl Queued {
    /// Its place in line, for [`Engine::place`].
    pub fn in_line(&self) -> super::progress::InLine {
        let claim = &self.claim;
        super::progress::InLine {
            kind: claim.leases.kind,
            name: claim.name.clone(),
            waiter: claim.entry().encode(),
        }
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
    /// messages may have been missed and confirming a provisional grant
    /// before taking it; then gives up (which takes a lease granted
    /// meanwhile, or room the name has now).
    async fn wait(&mut self) -> Result<Result<Granted, Refusal>, Error> {
        let claim = &self.claim;
        let (leases, name) = (&claim.leases, &claim.name);
        while let Some(registration) = self.registration.as_mut() {
            let notice = tokio::select! {
                biased;
                notice = registration.notice() => notice,
                () = tokio::time::sleep_until(self.deadline) => break,
            };
            match notice {
                WaiterNotice::ShuttingDown => {
                    // Leave now, so the next in line moves up (and a lease
                    // granted meanwhile goes back); the claim retries.
                    let _ = Box::pin(leases.end(name, End::Leave(claim.entry()))).await;
                    return Err(Error::ShuttingDown);
                }
                // Held until its expiry already (written full for this instance).
                WaiterNotice::Granted {
                    token,
                    expires_at_ms,
                    held: true,
                } => return Ok(Ok((token, expires_at_ms))),
                WaiterNotice::Superseded { owner } => {
                    // Takes the note of it out of the line.
                    let _ = Box::pin(leases.end(name, End::Leave(claim.entry()))).await;
                    return Ok(Err(Refusal::Superseded { owner }));
                }
                // Asking again is for a waiter whose wait goes on.
                WaiterNotice::Recheck if Instant::now() >= self.deadline => break,
                // A provisional grant (another instance's call made it) is
                // confirmed by asking again, whatever the deadline: the call
                // confirms it if it is still live, and answers Acquired with
                // the expiry Redis now holds it to; if it lapsed, the call
                // puts this waiter back in line (or gives it room there is).
                WaiterNotice::Granted { held: false, .. } | WaiterNotice::Recheck => {
                    self.attempts += 1;
                    let again = leases.try_acquire(name, claim.entry(), Join::Queue);
                    match Box::pin(again).await {
                        Ok(Attempt::Queued { next_expiry_in }) => {
                            if let Some(registration) = &self.registration {
                                registration.in_line(next_expiry_in);
                            }
                        }
                        Ok(attempt) => return Ok(claim.answer(attempt)),
                        // Redis is away: keep the place and wait for the next
                        // notice (a failed call makes this name's waiters ask
                        // again once Redis answers).
                        Err(Error::Unavailable(_)) => {}
                        Err(err) => return Err(err),
                    }
                }
            }
        }
        // The wait is over: take a lease granted meanwhile (or room there is
        // now), else leave the line.
        self.registration = None;
        let ended = Box::pin(leases.end(name, End::GiveUp(claim.entry()))).await?;
        Ok(match ended {
            Ended::Kept {
                token,
                expires_at_ms,
            } => Ok((token, expires_at_ms)),
            Ended::Left(state) | Ended::Nothing(state) => {
                Err(Refusal::Busy(Busy::new(state, claim.demand)))
            }
            Ended::Released { .. } => {
                return Err(Error::Protocol("a give-up released a lease".into()))
            }
        })
    }
}

/// One acquisition under way: what it asks for, the lease id it acquires
/// under (its id in line while it waits), and the undo should nobody be told
/// its outcome.
///
/// Dropped before [`Claim::settle`] (the client went away) or settled with
/// the outcome unknown (a Redis error after the call may have run), the
/// lease or the place in line might exist in Redis with nobody to answer, so
/// it leaves in the background, retrying while Redis is unreachable for up to
/// the longer of the ttl and the wait.
struct Claim {
    leases: Leases,
    name: Name,
    id: LeaseId,
    /// A number naming it among this instance's waiters (in messages about it).
    tag: u64,
    demand: Demand,
    request: AcquireRequest,
    started: std::time::Instant,
    armed: bool,
}

impl Claim {
    fn new(leases: Leases, name: Name, demand: Demand, request: AcquireRequest) -> Self {
        Self {
            leases,
            name,
            id: LeaseId::new(),
            tag: new_tag(),
            demand,
            request,
            started: std::time::Instant::now(),
            armed: true,
        }
    }

    /// Its place in line as Redis keeps it (the same for the whole wait).
    fn entry(&self) -> Entry<'_> {
        Entry {
            id: self.id,
            tag: self.tag,
            instance: self.leases.engine.waiters().instance(),
            ttl: self.request.ttl,
            demand: self.demand,
            newest: self.request.newest_wins,
            owner: self.request.owner.as_ref(),
        }
    }

    /// An attempt that ended the acquisition as the client is told it: a
    /// lease (held until the expiry Redis replied), or a refusal judged
    /// against this acquisition's limit.
    fn answer(&self, attempt: Attempt) -> Result<Granted, Refusal> {
        match attempt {
            Attempt::Acquired {
                token,
                expires_at_ms,
            } => Ok((token, expires_at_ms)),
            Attempt::Superseded { owner } => Err(Refusal::Superseded { owner }),
            Attempt::Refused(state) => Err(Refusal::Busy(Busy::new(state, self.demand))),
            // Only asked of a call that did not queue.
            Attempt::Queued { next_expiry_in } => Err(Refusal::Busy(Busy {
                holders: 0,
                used: 0,
                demand: self.demand,
                waiting: 0,
                owner: None,
                next_expiry_in,
            })),
        }
    }

    /// The end of the acquisition: with `BATON_REDIS_WAIT_REPLICAS`, a lease
    /// is answered only once the replicas have it, whether this request's call
    /// or a hand-off granted it (else 503, and the lease is given back); then
    /// its metrics and audit line, and the lease as its holder sees it.
    async fn settle(
        mut self,
        attempts: u32,
        outcome: Result<Result<Granted, Refusal>, Error>,
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
        record_acquisition(kind, outcome.is_ok(), attempts, self.started.elapsed());
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
            demand: self.demand,
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
        // A copy that undoes nothing itself: it only names the place to leave.
        let parting = Self {
            leases: self.leases.clone(),
            name: self.name.clone(),
            request: self.request.clone(),
            armed: false,
            ..*self
        };
        runtime.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let leave = End::Leave(parting.entry());
                match parting.leases.end(&parting.name, leave).await {
                    Ok(ended) => {
                        if matches!(ended, Ended::Released { .. }) {
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
