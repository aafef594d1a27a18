//! A request waiting in line: what it keeps while it waits, and the wait
//! itself (notices, confirming a provisional grant, giving up at the end).

use tokio::time::Instant;

use super::acquisition::{Acquisition, Granted};
use super::progress::InLine;
use crate::engine::error::Error;
use crate::engine::functions::acquire::{Attempt, Join};
use crate::engine::functions::release::{End, Ended};
use crate::engine::functions::ticket::TicketCall;
use crate::engine::model::{Lease, Refusal};
use crate::engine::waiters::{Registration, WaiterNotice};

/// A request waiting in line: what it keeps while it waits, and nothing more.
/// Dropping it before its outcome (the client went away) leaves the line and
/// gives back a lease granted meanwhile.
pub struct Waiting {
    pub(super) acquisition: Acquisition,
    /// Its place in this instance's registry, until the wait ends.
    pub(super) registration: Option<Registration>,
    pub(super) deadline: Instant,
    pub(super) attempts: u32,
    /// Its place in line as Redis last replied it: should it be dropped from
    /// the line (its instance presumed dead, its grant lapsed), it asks to
    /// join again there.
    pub(super) place: i64,
}

impl Waiting {
    /// Its place in line, for [`Engine::place`](crate::engine::handle::Engine::place).
    pub fn in_line(&self) -> InLine {
        let acquisition = &self.acquisition;
        InLine {
            kind: acquisition.leases.kind,
            name: acquisition.name.clone(),
            waiter: acquisition.entry().encode(),
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
            acquisition,
            attempts,
            ..
        } = *self;
        // Boxed: the wait is over, and its space need not be the waiter's.
        Box::pin(acquisition.settle(attempts, outcome)).await
    }

    /// Waits in line for a grant until the deadline, asking Redis again when
    /// messages may have been missed and confirming a provisional grant
    /// before taking it; then gives up (which takes a lease granted
    /// meanwhile, or room the name has now).
    async fn wait(&mut self) -> Result<Result<Granted, Refusal>, Error> {
        let acquisition = &self.acquisition;
        let (leases, name) = (&acquisition.leases, &acquisition.name);
        while let Some(registration) = self.registration.as_mut() {
            let notice = tokio::select! {
                biased;
                notice = registration.notice() => notice,
                () = tokio::time::sleep_until(self.deadline) => break,
            };
            match notice {
                WaiterNotice::ShuttingDown if acquisition.request.keep_place.is_some() => {
                    // Its place is kept as a ticket, which any instance serves.
                    break;
                }
                WaiterNotice::ShuttingDown => {
                    // Leave now, so the next in line moves up (and a lease
                    // granted meanwhile goes back); the acquisition retries.
                    let _ = Box::pin(leases.end(
                        name,
                        End::Leave(acquisition.entry()),
                        acquisition.by(),
                    ))
                    .await;
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
                    let _ = Box::pin(leases.end(
                        name,
                        End::Leave(acquisition.entry()),
                        acquisition.by(),
                    ))
                    .await;
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
                    let again = leases.try_acquire(
                        name,
                        acquisition.entry(),
                        Join::Queue,
                        Some(self.place),
                    );
                    match Box::pin(again).await {
                        Ok(Attempt::Queued {
                            next_expiry_in,
                            place,
                        }) => {
                            self.place = place;
                            if let Some(registration) = &self.registration {
                                registration.in_line(next_expiry_in);
                            }
                        }
                        // Its ticket ended while this instance was paused.
                        Ok(Attempt::TicketGone) => return Err(Error::TicketGone),
                        Ok(attempt) => return Ok(acquisition.answer(attempt)),
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
        if let Some(keep) = &acquisition.request.keep_place {
            // Its place is kept as a ticket (or it takes a lease granted
            // meanwhile, or room there is now).
            let park = TicketCall::Park(acquisition.entry(), keep, false);
            let reply = Box::pin(leases.serve(name, &park)).await?;
            return acquisition.ticketed(reply);
        }
        let ended =
            Box::pin(leases.end(name, End::GiveUp(acquisition.entry()), acquisition.by())).await?;
        Ok(match ended {
            Ended::Kept {
                token,
                expires_at_ms,
            } => Ok((token, expires_at_ms)),
            Ended::Left(state) | Ended::Nothing(state) => Err(acquisition.refused(state)),
            Ended::Released { .. } => {
                return Err(Error::Protocol("a give-up released a lease".into()))
            }
        })
    }
}
