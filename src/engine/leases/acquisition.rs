//! One acquisition under way: what it asks for, how an attempt's reply is
//! answered, how its end is settled (replicas, metrics, audit), and the
//! undo should nobody be told its outcome.

use std::time::Duration;

use tokio::time::Instant;

use super::operations::Leases;
use crate::domain::{AcquireRequest, Demand, LeaseId, Name, TokenName};
use crate::engine::error::Error;
use crate::engine::freezes::wall_clock_ms;
use crate::engine::functions::acquire::Attempt;
use crate::engine::functions::release::{End, Ended};
use crate::engine::functions::ticket::{TicketCall, TicketReply};
use crate::engine::functions::waiter::LineEntry;
use crate::engine::model::{Busy, FrozenBy, Lease, Occupancy, Refusal, TicketPlace};
use crate::engine::waiters::new_tag;
use crate::telemetry::{audit, audit_override, record_acquisition};

/// A granted lease as the holder is told it: its token and when it ends.
pub(super) type Granted = (u64, u64);

/// One acquisition under way: what it asks for, the lease id it acquires
/// under (its id in line while it waits), and the undo should nobody be told
/// its outcome.
///
/// Dropped before [`Acquisition::settle`] (the client went away) or settled with
/// the outcome unknown (a Redis error after the call may have run), the
/// lease or the place in line might exist in Redis with nobody to answer, so
/// it leaves in the background, retrying while Redis is unreachable for up to
/// the longer of the ttl and the wait.
pub(super) struct Acquisition {
    pub(super) leases: Leases,
    pub(super) name: Name,
    pub(super) id: LeaseId,
    /// A number naming it among this instance's waiters (in messages about it).
    pub(super) tag: u64,
    pub(super) demand: Demand,
    pub(super) request: AcquireRequest,
    pub(super) started: std::time::Instant,
    pub(super) armed: bool,
}

impl Acquisition {
    pub(super) fn new(leases: Leases, name: Name, demand: Demand, request: AcquireRequest) -> Self {
        Self::resumed(leases, name, LeaseId::new(), new_tag(), demand, request)
    }

    /// One under the id `id` (a ticket's), as the waiter `tag` of this instance.
    pub(super) fn resumed(
        leases: Leases,
        name: Name,
        id: LeaseId,
        tag: u64,
        demand: Demand,
        request: AcquireRequest,
    ) -> Self {
        Self {
            leases,
            name,
            id,
            tag,
            demand,
            request,
            started: std::time::Instant::now(),
            armed: true,
        }
    }

    /// The name of the token it was made with, for its audit lines.
    pub(super) fn by(&self) -> Option<&TokenName> {
        self.request.by.as_ref()
    }

    /// Its place in line as Redis keeps it (the same for the whole wait).
    pub(super) fn entry(&self) -> LineEntry<'_> {
        LineEntry {
            id: self.id,
            tag: self.tag,
            instance: self.leases.engine.waiters().instance(),
            ttl: self.request.ttl,
            demand: self.demand,
            newest: self.request.newest_wins,
            priority: self.request.priority,
            owner: self.request.owner.as_ref(),
            by: self.request.by.as_ref(),
            override_reason: self.request.override_reason.as_deref(),
        }
    }

    /// An attempt that ended the acquisition as the client is told it: a
    /// lease (held until the expiry Redis replied), or a refusal judged
    /// against this acquisition's limit.
    pub(super) fn answer(&self, attempt: Attempt) -> Result<Granted, Refusal> {
        match attempt {
            Attempt::Acquired {
                token,
                expires_at_ms,
            } => Ok((token, expires_at_ms)),
            Attempt::Superseded { owner } => Err(Refusal::Superseded { owner }),
            Attempt::Refused(state) => Err(Refusal::Busy(Busy::new(state, self.demand))),
            Attempt::Frozen => Err(Refusal::Frozen(self.frozen_by().unwrap_or(FrozenBy {
                // Deleted since (the window was sent with the call).
                freeze_id: None,
                reason: None,
                until_ms: wall_clock_ms() + 1000,
            }))),
            // Only a call that asks again with its place replies it, and the
            // wait answers that itself (Waiting::wait): never here.
            Attempt::TicketGone => Err(Refusal::Busy(Busy {
                holders: 0,
                used: 0,
                demand: self.demand,
                waiting: 0,
                owner: None,
                next_expiry_in: None,
            })),
            Attempt::Queued { next_expiry_in, .. } => Err(Refusal::Busy(Busy {
                holders: 0,
                used: 0,
                demand: self.demand,
                waiting: 0,
                owner: None,
                next_expiry_in,
            })),
        }
    }

    /// A call on its ticket, answered: the lease (held until the expiry
    /// Redis replied: `ticket.lua` wrote, confirmed or collected it so), or
    /// its place kept as a ticket (202).
    pub(super) fn ticketed(&self, reply: TicketReply) -> Result<Result<Granted, Refusal>, Error> {
        match reply {
            TicketReply::Lease {
                token,
                expires_at_ms,
                ..
            } => Ok(Ok((token, expires_at_ms))),
            TicketReply::Waiting {
                place,
                waiting,
                place_expires_at_ms,
                ..
            } => Ok(Err(Refusal::Ticketed(Box::new(TicketPlace {
                ticket: self.id,
                place,
                waiting,
                place_expires_at_ms,
                frozen: self.frozen_by(),
                pickup_by_ms: None,
                eta: None,
                notice: None,
            })))),
            // Its ticket ended while it was out of line (park): gone.
            TicketReply::Gone => Err(Error::TicketGone),
            other => Err(Error::Protocol(format!(
                "a ticket's call replied {other:?}"
            ))),
        }
    }

    /// A request that keeps its place and does not wait: acquired now (a
    /// full lease, written by the call that replied), or in line as a ticket.
    pub(super) async fn take_ticket(self) -> Result<Result<Lease, Refusal>, Error> {
        let turn = self.leases.engine.join_turn().await;
        let reply = match &self.request.keep_place {
            Some(keep) => {
                let watched = match keep.notify {
                    Some(_) => self.leases.watch_notices(&self.name).await,
                    None => Ok(()),
                };
                let take = TicketCall::Take(self.entry(), keep);
                match watched {
                    Ok(()) => self.leases.serve(&self.name, &take).await,
                    Err(err) => Err(err),
                }
            }
            None => Err(Error::Protocol(
                "a ticket taken without keep_place_ms".into(),
            )),
        };
        drop(turn);
        let outcome = reply.and_then(|reply| self.ticketed(reply));
        if self.request.ask_yield && matches!(outcome, Ok(Err(Refusal::Ticketed(_)))) {
            // A ticket joins the line as a waiting request does: it asks the
            // holders once, as it joins (a request, not a condition).
            let asked = self
                .leases
                .ask_yield(&self.name, self.request.owner.as_ref(), None);
            if let Err(err) = asked.await {
                tracing::debug!(%err, "asking the holders to yield failed");
            }
        }
        self.settle(1, outcome).await
    }

    /// A waiting request that keeps its place, just queued: its place
    /// outlives the request (and this instance) from now on.
    pub(super) async fn adopt(&self) {
        let Some(keep) = &self.request.keep_place else {
            return;
        };
        if keep.notify.is_some() {
            if let Err(err) = self.leases.watch_notices(&self.name).await {
                tracing::debug!(%err, "listing a name with turn notices failed");
            }
        }
        let adopt = TicketCall::Adopt(self.entry(), keep);
        if let Err(err) = self.leases.serve(&self.name, &adopt).await {
            tracing::debug!(%err, "keeping a waiter's place failed");
        }
    }

    /// The freeze that holds its name now, as this instance knows it, unless
    /// the request overrides freezes.
    pub(super) fn frozen_by(&self) -> Option<FrozenBy> {
        if self.request.override_reason.is_some() {
            return None;
        }
        let book = self.leases.engine.book();
        let now = wall_clock_ms();
        let freeze = book
            .for_name(self.leases.kind, self.name.as_str(), now)
            .filter(|f| f.holds(now))?;
        Some(FrozenBy {
            freeze_id: Some(freeze.freeze_id),
            reason: freeze.reason,
            until_ms: freeze.window.end_ms,
        })
    }

    /// Refused at once: a freeze holds the name (as this instance knows it).
    pub(super) async fn refuse_frozen(self) -> Result<Result<Lease, Refusal>, Error> {
        let frozen = self.frozen_by().unwrap_or(FrozenBy {
            freeze_id: None,
            reason: None,
            until_ms: wall_clock_ms() + 1000,
        });
        self.settle(0, Ok(Err(Refusal::Frozen(frozen)))).await
    }

    /// A wait that ended with the name `state` busy: frozen, when a freeze
    /// holds it now (the request was held back by it), else busy.
    pub(super) fn refused(&self, state: Occupancy) -> Refusal {
        match self.frozen_by() {
            Some(frozen) => Refusal::Frozen(frozen),
            None => Refusal::Busy(Busy::new(state, self.demand)),
        }
    }

    /// The end of the acquisition: with `BATON_REDIS_WAIT_REPLICAS`, a lease
    /// is answered only once the replicas have it, whether this request's call
    /// or a hand-off granted it (else 503, and the lease is given back); then
    /// its metrics and audit line, and the lease as its holder sees it.
    pub(super) async fn settle(
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
        // any other error may have left something in Redis, which the acquisition
        // undoes when dropped.
        self.armed = !matches!(
            outcome,
            Ok(_) | Err(Error::ShuttingDown | Error::TooManyWaiters | Error::TicketGone)
        );
        let outcome = outcome?;
        record_acquisition(kind, outcome.is_ok(), attempts, self.started.elapsed());
        let request = &self.request;
        if let Ok((token, _)) = &outcome {
            match &request.override_reason {
                None => audit(
                    "acquired",
                    kind,
                    name,
                    request.owner.as_ref(),
                    *token,
                    self.by(),
                ),
                Some(reason) => audit_override(
                    kind,
                    name,
                    request.owner.as_ref(),
                    *token,
                    self.by(),
                    reason,
                ),
            }
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

impl Drop for Acquisition {
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
                let ended = if let Some(keep) = &parting.request.keep_place {
                    if keep.forsaken.is_set() {
                        // Its token was taken away: the ticket is given up
                        // (its place left, a lease granted meanwhile
                        // released); not yet a ticket, it leaves as a waiter.
                        let leave = TicketCall::Leave(parting.id);
                        match parting.leases.serve(&parting.name, &leave).await {
                            Ok(TicketReply::Gone) => {
                                let leave = End::Leave(parting.entry());
                                parting
                                    .leases
                                    .end(&parting.name, leave, parting.by())
                                    .await
                                    .map(|_| ())
                            }
                            other => other.map(|_| ()),
                        }
                    } else {
                        // Its place (or a lease granted meanwhile, held for
                        // pickup) is kept as its ticket.
                        let park = TicketCall::Park(parting.entry(), keep, true);
                        parting.leases.serve(&parting.name, &park).await.map(|_| ())
                    }
                } else {
                    let leave = End::Leave(parting.entry());
                    parting
                        .leases
                        .end(&parting.name, leave, parting.by())
                        .await
                        .map(|ended| {
                            if matches!(ended, Ended::Released { .. }) {
                                tracing::info!("released a lease whose requester was gone");
                            }
                        })
                };
                match ended {
                    Ok(()) => return,
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
