//! The operations on the leases of one kind: refresh, check, release,
//! force-release and status, each one function of the library over the
//! name's keys (acquiring has rooms of its own: `acquire.rs`). Locks and
//! semaphores differ only in the [`Kind`] a [`Leases`] is bound to and the
//! demand each acquisition carries.

use super::run_to_end::RunToEnd;
use crate::domain::{Kind, LeaseId, Name, TokenName, Ttl};
use crate::engine::error::Error;
use crate::engine::freezes::FRESH_WAIT;
use crate::engine::functions::check::{Check, Stored};
use crate::engine::functions::force_release::ForceRelease;
use crate::engine::functions::library::{Function, Serving};
use crate::engine::functions::refresh::Extend;
use crate::engine::functions::release::{End, Ended};
use crate::engine::functions::status::ReadStatus;
use crate::engine::handle::Engine;
use crate::engine::model::{Lease, Status};
use crate::telemetry::{audit, audit_more};

impl Engine {
    /// The operations on the leases of `kind`.
    pub fn leases(&self, kind: Kind) -> Leases {
        Leases {
            engine: self.clone(),
            kind,
        }
    }
}

/// Operations on the leases of one kind; cheap to clone.
#[derive(Clone)]
pub struct Leases {
    pub(super) engine: Engine,
    pub(super) kind: Kind,
}

impl Leases {
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Runs a function that does not serve the line.
    pub(super) async fn run<F: Function>(
        &self,
        name: &Name,
        function: &F,
    ) -> Result<F::Reply, Error> {
        self.engine.invoker().run(self.kind, name, function).await
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
    pub(super) async fn serve<F: Serving>(
        &self,
        name: &Name,
        function: &F,
    ) -> Result<F::Reply, Error>
    where
        F::Reply: Send + 'static,
    {
        // A call that serves the line may grant: built with a list of
        // freezes this instance found to be Redis's moments ago (else it
        // would hold the line back, `FreezeBook::context_field`). Nothing
        // is sent while it waits: cancelled here, it changes nothing.
        self.engine.book().ready(FRESH_WAIT).await;
        let call = self.engine.invoker().call(self.kind, name, function);
        let (engine, kind, name) = (self.engine.clone(), self.kind, name.clone());
        RunToEnd::new(async move {
            let waiters = engine.waiters();
            match engine.invoker().run_serving::<F>(&call).await {
                Ok((reply, tail)) => {
                    waiters.heard(kind, &name, tail);
                    Ok(reply)
                }
                Err(err) => {
                    waiters.ask_again(kind, &name);
                    Err(err)
                }
            }
        })
        .await
    }

    /// Ends what `end` names on `name`, auditing a release as made `by`
    /// that token.
    pub(super) async fn end(
        &self,
        name: &Name,
        end: End<'_>,
        by: Option<&TokenName>,
    ) -> Result<Ended, Error> {
        let ended = self.serve(name, &end).await?;
        if let Ended::Released {
            fencing_token,
            owner,
        } = &ended
        {
            audit(
                "released",
                self.kind,
                name,
                owner.as_ref(),
                *fencing_token,
                by,
            );
        }
        Ok(ended)
    }

    /// Releases the lease `id` and serves the line; `false` when no live
    /// lease had that id. `by`: the name of the token that asked, for the
    /// audit line.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn release(
        &self,
        name: &Name,
        id: LeaseId,
        by: Option<&TokenName>,
    ) -> Result<bool, Error> {
        let ended = self.end(name, End::Release(id), by).await?;
        Ok(matches!(ended, Ended::Released { .. }))
    }

    /// Extends the lease `id` by `ttl` (or its own ttl); `None` when it is not
    /// live (expired, released, or never this name's). An expired lease is
    /// never brought back. `by`: the name of the token that asked, for the
    /// audit line.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn refresh(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Option<Ttl>,
        by: Option<&TokenName>,
    ) -> Result<Option<Lease>, Error> {
        let stored = self.run(name, &Extend { id, ttl }).await?;
        let lease = stored.map(|stored| lease_of(name, id, stored));
        if lease.is_some() {
            // The new expiry is a promise like a grant's: with
            // BATON_REDIS_WAIT_REPLICAS it is answered only once the replicas
            // have it, else 503, and the holder keeps the expiry it was told
            // before (which the replicas had when it was answered).
            let mark = self.engine.keys().replication_mark(self.kind, name);
            self.engine.store().wait_for_replicas(&mark).await?;
        }
        if let Some(lease) = &lease {
            let owner = lease.owner.as_ref();
            audit("refreshed", self.kind, name, owner, lease.fencing_token, by);
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
    /// for each lease it ended (the first 100, then one for the rest), made
    /// `by` that token, and serves the line; `false` when none was held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn force_release(&self, name: &Name, by: Option<&TokenName>) -> Result<bool, Error> {
        let Some(ended) = self.serve(name, &ForceRelease { by }).await? else {
            return Ok(false);
        };
        for lease in &ended.shown {
            let owner = lease.owner.as_ref();
            audit(
                "force-released",
                self.kind,
                name,
                owner,
                lease.fencing_token,
                by,
            );
        }
        let rest = ended.count.saturating_sub(ended.shown.len() as u64);
        if rest > 0 {
            audit_more("force-released", self.kind, name, rest, by);
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

    /// [`Self::status`] for a caller that has the turn (a listing page).
    pub(crate) async fn status_now(&self, name: &Name) -> Result<Status, Error> {
        let snapshot = self.run(name, &ReadStatus).await?;
        Ok(Status {
            name: name.clone(),
            holders: snapshot.holders,
            used: snapshot.used,
            limit: snapshot.limit,
            leases: snapshot.leases,
            waiting: snapshot.waiting,
            waiters: snapshot.waiters,
            frozen: self.frozen_now(name),
        })
    }
}

pub(super) fn lease_of(name: &Name, id: LeaseId, stored: Stored) -> Lease {
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
