//! Tickets: a place in line that outlives the request (`ticket.lua`). A
//! request with `keep_place_ms` that ends before its grant keeps its place
//! as a ticket ([`super::acquire`], [`super::waiting`]); these are the
//! calls on a ticket itself: look at it, wait on it again (on any
//! instance) or collect its lease, give it up.

use std::time::Duration;

use tokio::time::Instant;

use super::acquire::Acquiring;
use super::acquisition::Acquisition;
use super::operations::Leases;
use super::waiting::Waiting;
use crate::domain::{AcquireRequest, Demand, Forsaken, KeepPlace, LeaseId, Name, Ttl, WaitTime};
use crate::engine::error::Error;
use crate::engine::freezes::wall_clock_ms;
use crate::engine::functions::acquire::{Attempt, Join};
use crate::engine::functions::ticket::{TicketCall, TicketReply};
use crate::engine::functions::waiter::StoredWaiter;
use crate::engine::model::{FrozenBy, Lease, NoticeState, Refusal, TicketPlace};
use crate::engine::waiters::new_tag;

/// How long a wait on a ticket waits for its name's channel (as an acquire).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// What waiting on a ticket asks.
#[derive(Debug, Clone)]
pub struct TicketWait {
    pub wait: WaitTime,
    /// `keep_place_ms` of the call: renews the place for this long (`None`:
    /// as long as the ticket was taken for).
    pub keep_ms: Option<u64>,
    /// The service's `BATON_PICKUP_MS`.
    pub pickup_ms: u64,
    /// Set by whoever ends the wait early and wants the ticket given up
    /// rather than kept (its token taken away).
    pub forsaken: Forsaken,
}

impl Leases {
    /// The ticket `ticket` on `name`: its place, or its grant waiting for
    /// pickup; `None` once it is gone (left, expired, collected, not
    /// collected in time, or lost with Redis's data).
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn ticket(&self, name: &Name, ticket: LeaseId) -> Result<Option<TicketPlace>, Error> {
        let reply = self.serve(name, &TicketCall::Show(ticket)).await?;
        let frozen = self.frozen_now(name);
        let eta = match &reply {
            TicketReply::Waiting { place, .. } => self.eta_at(name, *place).await,
            _ => None,
        };
        Ok(match reply {
            TicketReply::Waiting {
                place,
                waiting,
                place_expires_at_ms,
                ..
            } => Some(TicketPlace {
                ticket,
                place,
                waiting,
                place_expires_at_ms,
                frozen,
                pickup_by_ms: None,
                eta,
                notice: None,
            }),
            TicketReply::Granted {
                pickup_by_ms,
                waiting,
                place_expires_at_ms,
                notice,
            } => Some(TicketPlace {
                ticket,
                place: 0,
                waiting,
                place_expires_at_ms,
                frozen,
                pickup_by_ms: Some(pickup_by_ms),
                eta: None,
                notice: (notice != NoticeState::default()).then(|| Box::new(notice)),
            }),
            _ => None,
        })
    }

    /// Gives the ticket up: leaves the line, or releases its lease granted
    /// and not collected; `false` when there was no such ticket.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn leave_ticket(&self, name: &Name, ticket: LeaseId) -> Result<bool, Error> {
        let reply = self.serve(name, &TicketCall::Leave(ticket)).await?;
        Ok(matches!(reply, TicketReply::Done))
    }

    /// Waits again on `ticket` in its place, with the terms it was taken
    /// with: its lease once granted (collected: its ttl runs from now; a
    /// retried collect finds the same lease), else its place kept again
    /// ([`crate::engine::Refusal::Ticketed`]). `Ok(None)`: no such ticket.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub async fn wait_on_ticket(
        self,
        name: Name,
        ticket: LeaseId,
        asked: TicketWait,
    ) -> Result<Option<Acquiring>, Error> {
        if asked.wait.as_duration().is_zero() {
            let resume = TicketCall::Resume {
                ticket,
                tag: None,
                keep_ms: asked.keep_ms,
            };
            let reply = Box::pin(self.serve(&name, &resume)).await?;
            return Box::pin(self.answer_at_once(name, ticket, reply)).await;
        }
        let deadline = Instant::now() + asked.wait.as_duration();
        let tag = new_tag();
        let registration = self.engine.waiters().register(self.kind, &name, tag)?;
        Box::pin(registration.subscribed(SUBSCRIBE_WAIT)).await;
        let resume = TicketCall::Resume {
            ticket,
            tag: Some(tag),
            keep_ms: asked.keep_ms,
        };
        let reply = Box::pin(self.serve(&name, &resume)).await?;
        let TicketReply::Waiting {
            place_expires_at_ms,
            entry,
            ..
        } = reply
        else {
            drop(registration);
            return Box::pin(self.answer_at_once(name, ticket, reply)).await;
        };
        let stored = StoredWaiter::parse(&entry)?;
        if stored.id != ticket {
            return Err(Error::Protocol("a ticket's entry names another id".into()));
        }
        let keep_ms = asked
            .keep_ms
            .unwrap_or_else(|| place_expires_at_ms.saturating_sub(wall_clock_ms_u64()));
        let request = AcquireRequest {
            ttl: stored.ttl,
            wait: asked.wait,
            owner: stored.owner,
            newest_wins: stored.newest,
            ask_yield: false,
            priority: stored.priority,
            // As the line keeps it: the entry this waiter names is that one.
            by: stored.by,
            override_reason: stored.override_reason.map(Box::new),
            keep_place: Some(KeepPlace {
                keep_ms: keep_ms.max(1),
                pickup_ms: asked.pickup_ms,
                // The ticket's notice, if it asked one, stays as it was.
                notify: None,
                forsaken: asked.forsaken.clone(),
            }),
        };
        let acquisition =
            Acquisition::resumed(self.clone(), name, ticket, tag, stored.demand, request);
        // In line as this instance's waiter now: one acquire call serves the
        // line with it in its place (and confirms a grant), as a join would.
        let attempt =
            Box::pin(self.try_acquire(&acquisition.name, acquisition.entry(), Join::Queue, None))
                .await;
        match attempt {
            Ok(Attempt::Queued {
                next_expiry_in,
                place,
            }) => {
                registration.in_line(next_expiry_in);
                Ok(Some(Acquiring::Queued(Box::new(Waiting {
                    acquisition,
                    registration: Some(registration),
                    deadline,
                    attempts: 1,
                    place,
                }))))
            }
            Ok(attempt) => {
                drop(registration);
                let outcome = Ok(acquisition.answer(attempt));
                Ok(Some(Acquiring::Now(
                    Box::pin(acquisition.settle(1, outcome)).await?,
                )))
            }
            // Redis away: the acquisition, dropped, keeps the place as a ticket.
            Err(err) => Err(err),
        }
    }

    /// A call on a ticket that did not wait, answered: the lease (once the
    /// replicas have it, with `BATON_REDIS_WAIT_REPLICAS`), its place, or
    /// `None` when there is no such ticket.
    async fn answer_at_once(
        &self,
        name: Name,
        ticket: LeaseId,
        reply: TicketReply,
    ) -> Result<Option<Acquiring>, Error> {
        match reply {
            TicketReply::Lease {
                token,
                expires_at_ms,
                ttl_ms,
                limit,
                weight,
                owner,
            } => {
                let mark = self.engine.keys().replication_mark(self.kind, &name);
                Box::pin(self.engine.store().wait_for_replicas(&mark)).await?;
                let bad = |_| Error::Protocol("a ticket's lease is malformed".into());
                // Held until expires_at_ms: ticket.lua collected or confirmed
                // it so in the call that replied, or a call before it did.
                Ok(Some(Acquiring::Now(Ok(Lease {
                    name,
                    id: ticket,
                    owner,
                    demand: Demand::from_stored(weight, limit).map_err(bad)?,
                    fencing_token: token,
                    ttl: Ttl::from_ms(ttl_ms).map_err(bad)?,
                    expires_at_ms,
                }))))
            }
            TicketReply::Waiting {
                place,
                waiting,
                place_expires_at_ms,
                ..
            } => {
                let frozen = self.frozen_now(&name);
                Ok(Some(Acquiring::Now(Err(Refusal::Ticketed(Box::new(
                    TicketPlace {
                        ticket,
                        place,
                        waiting,
                        place_expires_at_ms,
                        frozen,
                        pickup_by_ms: None,
                        eta: None,
                        notice: None,
                    },
                ))))))
            }
            TicketReply::Gone | TicketReply::Done | TicketReply::Granted { .. } => Ok(None),
        }
    }

    /// The freeze that holds `name` now, as this instance knows it.
    pub(super) fn frozen_now(&self, name: &Name) -> Option<FrozenBy> {
        let now = wall_clock_ms();
        let freeze = self
            .engine
            .book()
            .for_name(self.kind, name.as_str(), now)
            .filter(|f| f.holds(now))?;
        Some(FrozenBy {
            freeze_id: Some(freeze.freeze_id),
            reason: freeze.reason,
            until_ms: freeze.window.end_ms,
        })
    }
}

fn wall_clock_ms_u64() -> u64 {
    u64::try_from(wall_clock_ms()).unwrap_or(0)
}
