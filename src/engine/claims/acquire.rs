//! Taking a claim's names, one by one in the global order, each through its
//! name's own line; all of them, or none.
//!
//! # No deadlock, no starvation
//!
//! Every claim takes its names in the one order of
//! [`ClaimParts`], and waits only for a name that
//! comes after every name it holds: a cycle of claims each waiting for a
//! name another holds cannot form. Each name is taken through its own line,
//! in line order (by priority, then first come, first served), so a claim
//! waiting for a name is served in its turn like any other waiter, and no
//! claim waits behind one that waits for it; the names it holds meanwhile are kept alive,
//! and given back at once when it gives up.
//!
//! # What makes a claim's 201 true
//!
//! Each lease of the claim comes from an ordinary acquisition (see
//! `leases/acquire.rs`: answered only from a reply of Redis saying the lease
//! is held until the expiry answered), or from a refresh that Redis answered
//! with the new expiry. So every lease is held until its own `expires_at`,
//! and the claim's `expires_at` is the earliest of them. Before answering,
//! every lease but the last taken is confirmed held, one call per name (a
//! lease taken long ago, with less than half a ttl left compared with the
//! newest, is refreshed; the others are checked), and its expiry is read
//! from that call; one found gone (expired, force-released, or lost with
//! Redis's data while the claim waited) makes the claim give everything
//! back and start over (or be refused when its wait is over): a claim is
//! never answered with a lease Redis no longer holds.
//!
//! # Freezes
//!
//! While a freeze holds any one of its names, a claim holds none of them
//! (`frozen.rs`): each pass starts by looking, and a waiting pass is ended
//! by a freeze that starts meanwhile, giving everything back. A claim that
//! does not wait is refused as frozen before it takes anything; one that
//! overrides freezes takes its names through them.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use super::frozen::FrozenPart;
use super::held::Held;
use super::record::{Entry, Record};
use super::{Claim, ClaimProgress, ClaimRefused, ClaimWaiting, Claims};
use crate::domain::{AcquireRequest, ClaimId, ClaimParts, Kind, Name, Ttl, WaitTime};
use crate::engine::error::Error;
use crate::engine::leases::Acquiring;
use crate::engine::model::Refusal;

/// How often the leases a waiting claim holds are refreshed: a third of the
/// ttl, so a lost reply or two leave them time.
fn keep_alive_every(ttl: Ttl) -> Duration {
    (ttl.as_duration() / 3).max(Duration::from_millis(20))
}

/// What stopped one pass over the names.
enum Stop {
    Refused(ClaimRefused),
    /// A lease held was lost meanwhile: give back and start over.
    Lost(Kind, Name),
    /// A freeze started holding one of its names: give back, wait for the
    /// window to end, start over.
    Frozen,
}

impl Claims {
    /// Resolves when a freeze starts holding one of the names of `parts`,
    /// for a claim that waits and does not override freezes (never for
    /// another: one that does not wait is answered by its first call).
    async fn freeze_starts(&self, parts: &ClaimParts, request: &AcquireRequest) -> FrozenPart {
        if request.override_reason.is_some() || request.wait.as_duration().is_zero() {
            return std::future::pending().await;
        }
        self.until_frozen(parts).await
    }

    /// Takes every name of `parts` (each with its demand) for one claim with
    /// the fields of `request` (its `wait` the wait of the whole claim):
    /// the claim with every lease held, or the name in its way once the wait
    /// is over, with nothing held. `progress` hears where a waiting claim
    /// stands each time it joins a name's line.
    ///
    /// Dropped before its end (the client hung up), it leaves every line it
    /// is in and releases what it took.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, too many waiters; the
    /// leases taken are given back.
    pub async fn acquire(
        &self,
        parts: ClaimParts,
        request: AcquireRequest,
        progress: Option<UnboundedSender<ClaimProgress>>,
    ) -> Result<Result<Claim, ClaimRefused>, Error> {
        let deadline = Instant::now() + request.wait.as_duration();
        let mut held = Held::new(self.engine.clone(), request.by.clone());
        let overrides = request.override_reason.is_some();
        loop {
            // While a freeze holds one of its names, a claim holds none of
            // them (each pass starts with nothing held) and is in no line.
            if let Some((kind, name, frozen)) = self.frozen_part(&parts).filter(|_| !overrides) {
                if Instant::now() >= deadline {
                    return Ok(Err(ClaimRefused {
                        kind,
                        name,
                        refusal: Some(Refusal::Frozen(frozen)),
                    }));
                }
                if let Some(progress) = &progress {
                    let _ = progress.send(ClaimProgress {
                        held: Vec::new(),
                        waiting_for: (kind, name),
                        waiting: ClaimWaiting::Frozen(frozen.clone()),
                    });
                }
                if !self.thaw(frozen.until_ms, deadline).await {
                    return Err(Error::ShuttingDown);
                }
                continue;
            }
            match self
                .take_all(&parts, &request, deadline, &mut held, progress.as_ref())
                .await
            {
                Ok(None) => break,
                Ok(Some(Stop::Refused(refused))) => {
                    held.release_all().await;
                    return Ok(Err(refused));
                }
                Ok(Some(Stop::Lost(kind, name))) => {
                    held.release_all().await;
                    if Instant::now() >= deadline {
                        return Ok(Err(ClaimRefused {
                            kind,
                            name,
                            refusal: None,
                        }));
                    }
                    tracing::info!(%kind, %name, "a claim lost a lease while it waited; it starts over");
                }
                Ok(Some(Stop::Frozen)) => {
                    held.release_all().await;
                    tracing::info!("a freeze holds a name of a waiting claim; it gives back what it took until the window ends");
                }
                Err(err) => {
                    held.release_all().await;
                    return Err(err);
                }
            }
        }
        let id = ClaimId::new();
        let record = Record(
            held.leases
                .iter()
                .map(|(kind, lease)| Entry {
                    kind: *kind,
                    name: lease.name.clone(),
                    id: lease.id,
                })
                .collect(),
        );
        // Without its record nobody could refresh or release the claim by
        // its id: a claim whose record Redis did not take is given back.
        if let Err(err) = self
            .engine
            .save_claim(&id, &record, request.ttl.as_duration())
            .await
        {
            held.release_all().await;
            return Err(err);
        }
        Ok(Ok(Claim {
            id,
            leases: held.into_leases(),
        }))
    }

    /// One pass: takes the names not held yet, in order, then makes sure
    /// every lease held has time left (see the module).
    async fn take_all(
        &self,
        parts: &ClaimParts,
        request: &AcquireRequest,
        deadline: Instant,
        held: &mut Held,
        progress: Option<&UnboundedSender<ClaimProgress>>,
    ) -> Result<Option<Stop>, Error> {
        let every = keep_alive_every(request.ttl);
        while let Some(part) = parts.get(held.leases.len()) {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut ask = request.clone();
            // The claim's wait is one: each name waits for what is left of it.
            ask.wait = WaitTime::from_ms(left.as_millis() as u64, u64::MAX)
                .map_err(|e| Error::Protocol(e.0))?;
            let (kind, name) = (part.kind, part.name.clone());
            let leases = self.engine.leases(kind);
            let progress = progress.cloned();
            let held_names = held.names();
            let taking = async move {
                match leases.acquire(name.clone(), part.demand, ask).await? {
                    Acquiring::Now(outcome) => Ok(outcome),
                    Acquiring::Queued(queued) => {
                        if let Some(progress) = progress {
                            let _ = progress.send(ClaimProgress {
                                held: held_names,
                                waiting_for: (kind, name),
                                waiting: ClaimWaiting::InLine(queued.in_line()),
                            });
                        }
                        queued.outcome().await
                    }
                }
            };
            // A freeze that starts holding one of its names (held or not)
            // while it waits ends the pass: dropping `taking` leaves the
            // line and gives back what it was granted.
            let freeze_starts = self.freeze_starts(parts, request);
            let taking = async move {
                tokio::select! {
                    taken = taking => Some(taken),
                    _ = freeze_starts => None,
                }
            };
            match held.keep_alive_while(Box::pin(taking), every).await {
                Ok(None) => return Ok(Some(Stop::Frozen)),
                Ok(Some(Ok(Ok(lease)))) => held.leases.push((kind, lease)),
                Ok(Some(Ok(Err(refusal)))) => {
                    return Ok(Some(Stop::Refused(ClaimRefused {
                        kind,
                        name: part.name.clone(),
                        refusal: Some(refusal),
                    })))
                }
                Ok(Some(Err(err))) => return Err(err),
                Err((kind, name)) => return Ok(Some(Stop::Lost(kind, name))),
            }
        }
        // Every name is held, as last heard. Before the claim is answered,
        // every earlier lease is confirmed held by Redis now, one call per
        // name (Redis may have lost it while the claim waited on a later
        // name: a restart without persistence keeps no lease), and the
        // claim's expiries are those calls' answers. A lease with less than
        // half a ttl left, compared with the newest, is refreshed rather
        // than checked, so that the claim's expiry is not much earlier than
        // a ttl from now; one found gone starts the claim over.
        let newest = held.leases.iter().map(|(_, l)| l.expires_at_ms).max();
        let floor = newest.unwrap_or(0).saturating_sub(request.ttl.as_ms() / 2);
        let lost = held.confirm(floor).await?;
        Ok(lost.map(|(kind, name)| Stop::Lost(kind, name)))
    }
}
