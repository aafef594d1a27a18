//! Acquiring a lease: at once, or by joining the line and waiting for a
//! grant (the protocol every acquisition follows, whichever kind).
//!
//! # What makes a 201 true
//!
//! An acquisition answers a lease only from a reply of Redis that says the
//! lease is held until the expiry answered: an acquire call that wrote it
//! (a full lease), a grant in a serving call's reply or message marked held
//! (`G`: written full, for a waiter of the caller's instance), or this
//! waiter's own acquire or give-up call that confirmed a provisional grant
//! (`g`) while it was still live. A provisional grant is never answered
//! as it comes: its waiter confirms it first (see [`Waiting::wait`]), and if
//! it lapsed meanwhile (this instance was paused, Redis stalled), the same
//! call puts the waiter back in line.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use super::acquisition::Acquisition;
use super::operations::Leases;
use super::waiting::Waiting;
use crate::domain::{AcquireRequest, Demand, Name, Owner};
use crate::engine::error::Error;
use crate::engine::freezes::FRESH_WAIT;
use crate::engine::functions::acquire::{Acquire, Attempt, Join};
use crate::engine::functions::waiter::LineEntry;
use crate::engine::model::{Lease, Refusal};
use crate::telemetry::audit_yield;

/// How long a waiter waits for its name's channel before joining anyway (it
/// asks Redis again once subscribed, so nothing is lost either way).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// What an acquisition came to at once, or its place in line.
pub enum Acquiring {
    /// Acquired, or refused (busy with no wait, superseded).
    Now(Result<Lease, Refusal>),
    /// Queued: [`Waiting::outcome`] waits for the turn.
    Queued(Box<Waiting>),
}

impl Leases {
    /// Acquires a lease on `name` (its `demand`'s weight judged against its
    /// limit, see [`Demand`]): at once, or by joining the line while it is busy and
    /// `request.wait` is above zero. A request that joined comes
    /// back as [`Acquiring::Queued`], whose [`Waiting::outcome`] waits for its
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
        let mut acquisition = Acquisition::new(self, name, demand, request);
        // Whether a request that does not wait is frozen is judged by a list
        // that is fresh: else its call would hold the line
        // (`FreezeBook::context_field`) and it be refused as frozen by no
        // freeze it could name. Nothing was tried: nothing to undo.
        if acquisition.request.wait.as_duration().is_zero()
            && acquisition.request.keep_place.is_none()
            && acquisition.request.override_reason.is_none()
            && !Box::pin(acquisition.leases.engine.book().fresh_within(FRESH_WAIT)).await
        {
            acquisition.armed = false;
            return Err(Error::Unavailable(
                "the list of freezes could not be read".into(),
            ));
        }
        let (leases, name) = (&acquisition.leases, &acquisition.name);
        let mut attempts = 1u32;

        if acquisition.request.wait.as_duration().is_zero() {
            if acquisition.request.keep_place.is_some() {
                // Acquired now, or in line as a ticket: one call either way.
                return Box::pin(acquisition.take_ticket())
                    .await
                    .map(Acquiring::Now);
            }
            // Frozen, as this instance knows it: refused without a call
            // (Redis judges it again for a call that is made).
            if acquisition.frozen_by().is_some() {
                return Box::pin(acquisition.refuse_frozen())
                    .await
                    .map(Acquiring::Now);
            }
            let turn = leases.engine.join_turn().await;
            let attempt = leases.try_now(&acquisition, &mut attempts);
            let outcome = Box::pin(attempt).await.map(|a| acquisition.answer(a));
            drop(turn);
            return Box::pin(acquisition.settle(attempts, outcome))
                .await
                .map(Acquiring::Now);
        }
        let deadline = Instant::now() + acquisition.request.wait.as_duration();
        let waiters = leases.engine.waiters();
        let registration = match waiters.register(leases.kind, name, acquisition.tag) {
            Ok(registration) => registration,
            Err(err) => {
                return Box::pin(acquisition.settle(0, Err(err)))
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
            let attempt =
                Box::pin(leases.try_acquire(name, acquisition.entry(), Join::Queue, None)).await;
            drop(turn);
            match attempt {
                Ok(Attempt::Queued {
                    next_expiry_in,
                    place,
                }) => {
                    registration.in_line(next_expiry_in);
                    if acquisition.request.keep_place.is_some() {
                        // Its place outlives this request (and this instance).
                        Box::pin(acquisition.adopt()).await;
                    }
                    if acquisition.request.ask_yield {
                        // Asked once, as it joins: a request, not a condition;
                        // `by` the token's name (its owner on a service
                        // without tokens).
                        let request = &acquisition.request;
                        let by = match &request.by {
                            Some(token) => {
                                Owner::parse(Some(token.as_str().to_owned())).ok().flatten()
                            }
                            None => request.owner.clone(),
                        };
                        let asked = leases.ask_yield(name, by.as_ref(), None);
                        match Box::pin(asked).await {
                            Ok(holders) => audit_yield(
                                leases.kind,
                                name,
                                request.owner.as_ref(),
                                request.by.as_ref(),
                                holders,
                                None,
                            ),
                            Err(err) => {
                                tracing::debug!(%err, "asking the holders to yield failed");
                            }
                        }
                    }
                    return Ok(Acquiring::Queued(Box::new(Waiting {
                        acquisition,
                        registration: Some(registration),
                        deadline,
                        attempts,
                        place,
                    })));
                }
                Ok(attempt) => break Ok(acquisition.answer(attempt)),
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
        Box::pin(acquisition.settle(attempts, outcome))
            .await
            .map(Acquiring::Now)
    }

    /// The one acquire call of a request that does not wait; if a freeze
    /// this instance does not know of held it back, its list stopped being
    /// fresh before the call ran (by Redis's clock, `core/state.lua`): then
    /// once more, with a fresh list.
    async fn try_now(
        &self,
        acquisition: &Acquisition,
        attempts: &mut u32,
    ) -> Result<Attempt, Error> {
        let name = &acquisition.name;
        let attempt = self
            .try_acquire(name, acquisition.entry(), Join::No, None)
            .await;
        if !matches!(attempt, Ok(Attempt::Frozen)) || acquisition.frozen_by().is_some() {
            return attempt;
        }
        if !self.engine.book().fresh_within(FRESH_WAIT).await {
            return attempt;
        }
        *attempts += 1;
        self.try_acquire(name, acquisition.entry(), Join::No, None)
            .await
    }

    /// One acquire call for `waiter`; `join` says whether it queues when
    /// busy (and then finds what an earlier call with the same waiter made),
    /// `place` where it was in line, if it was ([`Acquire::place`]).
    pub(super) async fn try_acquire(
        &self,
        name: &Name,
        waiter: LineEntry<'_>,
        join: Join,
        place: Option<i64>,
    ) -> Result<Attempt, Error> {
        self.serve(
            name,
            &Acquire {
                waiter,
                join,
                place,
            },
        )
        .await
    }
}

impl Leases {
    /// Lists `name` among the names with turn notices (engine/notices):
    /// before a ticket there asks one, so some instance looks at it.
    pub(super) fn watch_notices<'a>(
        &'a self,
        name: &'a Name,
    ) -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>> {
        Box::pin(async move {
            match self.engine.notices() {
                Some(notices) => notices.watch(self.kind, name).await,
                None => Ok(()),
            }
        })
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

    /// A waiting request keeps a [`Waiting`] and the future of its outcome for
    /// the whole wait, and the future of its acquisition while it waits for
    /// its turn to join the line (a flood of requests may wait there): none
    /// may carry the space of the Redis calls it makes.
    #[test]
    fn what_a_waiting_request_keeps_stays_small() {
        let queued = std::mem::size_of::<Waiting>();
        // (304 and 720: an override reason's pointer, boxed, a ticket's
        // terms (keep_place_ms and its notify URL's pointer, 32 bytes, held
        // twice while joining) among the request's fields, and its place in
        // line, 8 bytes, to rejoin there.)
        assert!(queued <= 304, "a queued acquisition is {queued} bytes");
        let waiting = size_of_return(Waiting::outcome);
        assert!(
            waiting <= 384,
            "a queued acquisition's outcome future is {waiting} bytes"
        );
        let joining = size_of_return4(Leases::acquire);
        assert!(joining <= 720, "an acquisition's future is {joining} bytes");
    }
}
