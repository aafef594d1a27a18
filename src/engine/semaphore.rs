//! Fair counting semaphores: at most `limit` live leases per name, granted in
//! the order in which requests reached Redis, waiters first come first served.

use std::time::{Duration, Instant};

use crate::domain::{LeaseId, Limit, Name, Owner, Ttl, WaitTime};
use crate::telemetry::{record_acquisition, Acquired};

use super::acquire::{acquire_with_wait, Abandon, Attempt};
use super::keys::sem_event;
use super::reply::Reply;
use super::scripts;
use super::{Engine, Error};

/// A live semaphore lease, as its holder sees it.
#[derive(Debug, Clone)]
pub struct SemaphoreLease {
    pub name: Name,
    pub id: LeaseId,
    pub owner: Option<Owner>,
    /// The limit this acquisition was judged against.
    pub limit: Limit,
    /// Strictly increasing per semaphore name: the order of the grants.
    pub fencing_token: u64,
    pub ttl: Ttl,
    /// Expiry in milliseconds since the Unix epoch, on Redis's clock.
    pub expires_at_ms: u64,
}

/// Why a semaphore could not be acquired.
#[derive(Debug, Clone)]
pub struct SemaphoreFull {
    pub holders: u64,
    pub limit: Limit,
    /// When the first live lease expires, if any is held.
    pub next_expiry_in: Option<Duration>,
}

/// A semaphore as anyone may see it: never the lease ids.
#[derive(Debug, Clone)]
pub struct SemaphoreStatus {
    pub name: Name,
    /// The limit of the latest acquisition, if the semaphore is in use.
    pub limit: Option<Limit>,
    /// Live leases in the order they were granted.
    pub leases: Vec<SlotStatus>,
}

#[derive(Debug, Clone)]
pub struct SlotStatus {
    pub owner: Option<Owner>,
    pub fencing_token: u64,
    pub expires_in: Duration,
}

/// Semaphore operations; cheap to clone.
#[derive(Clone)]
pub struct Semaphores {
    engine: Engine,
}

impl Semaphores {
    pub(super) fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// Takes a slot of `name`, waiting in line up to `wait` while it is full.
    /// `Ok(Err(full))` when no slot came free for it in time.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub async fn acquire(
        &self,
        name: &Name,
        limit: Limit,
        ttl: Ttl,
        wait: WaitTime,
        owner: Option<Owner>,
    ) -> Result<Result<SemaphoreLease, SemaphoreFull>, Error> {
        let started = Instant::now();
        let id = LeaseId::new();
        let undo = {
            let sems = self.clone();
            let name = name.clone();
            move || {
                let (sems, name) = (sems.clone(), name.clone());
                async move { sems.release(&name, id).await }
            }
        };
        // Long enough to outlive both a lease and a place in the queue.
        let guard = Abandon::new(undo, ttl.as_duration().max(wait.as_duration()));
        let deadline = Instant::now() + wait.as_duration();
        let mut attempts = 0u32;
        let outcome = acquire_with_wait(&self.engine, sem_event(name), wait.as_duration(), || {
            attempts += 1;
            // Redis keeps the place in line a little past the wait, so it never
            // drops a waiter that is still trying.
            let queue_for = if wait.as_duration().is_zero() {
                Duration::ZERO
            } else {
                deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1)
            };
            self.try_acquire(name, id, limit, ttl, owner.as_ref(), queue_for)
        })
        .await;
        match &outcome {
            // Gave up while queued: leave the queue now, so the next in line moves up.
            Ok(Err(_)) | Err(Error::ShuttingDown) if !wait.as_duration().is_zero() => {
                guard.disarm();
                if let Err(err) = self.release(name, id).await {
                    tracing::warn!(%err, "could not leave a semaphore queue; its deadline will");
                }
            }
            // Acquired, or refused before queueing.
            Ok(_) | Err(Error::ShuttingDown | Error::TooManyWaiters) => guard.disarm(),
            // The outcome is unknown: the guard undoes it in the background.
            Err(_) => drop(guard),
        }
        let outcome = outcome?;
        record_acquisition(
            Acquired::Semaphore,
            outcome.is_ok(),
            attempts,
            started.elapsed(),
        );
        Ok(outcome)
    }

    async fn try_acquire(
        &self,
        name: &Name,
        id: LeaseId,
        limit: Limit,
        ttl: Ttl,
        owner: Option<&Owner>,
        queue_for: Duration,
    ) -> Result<Attempt<SemaphoreLease, SemaphoreFull>, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::SEM_ACQUIRE.key(keys.sem_leases(name));
        call.key(keys.sem_owners(name))
            .key(keys.sem_queue(name))
            .key(keys.sem_deadlines(name))
            .key(keys.sem_fence(name))
            .arg(id.expose())
            .arg(limit.get())
            .arg(ttl.as_ms())
            .arg(owner.map_or("", Owner::as_str))
            .arg(queue_for.as_millis() as u64)
            .arg(keys.channel())
            .arg(sem_event(name));
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        if reply.int(0)? == 1 {
            return Ok(Attempt::Acquired(SemaphoreLease {
                name: name.clone(),
                id,
                owner: owner.cloned(),
                limit,
                fencing_token: reply.uint(1)?,
                ttl,
                expires_at_ms: reply.uint(2)?,
            }));
        }
        let next_expiry = reply.int(2)?;
        let next_expiry_in = (next_expiry >= 0).then(|| Duration::from_millis(next_expiry as u64));
        let ticket = reply.uint(3)?;
        Ok(Attempt::Busy {
            busy: SemaphoreFull {
                holders: reply.uint(1)?,
                limit,
                next_expiry_in,
            },
            retry_in: next_expiry_in,
            ticket: (ticket > 0).then_some(ticket),
        })
    }

    /// Extends the lease `id` by `ttl` (or its own ttl); `None` when it is not
    /// live. An expired lease is never brought back.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn refresh(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Option<Ttl>,
    ) -> Result<Option<SemaphoreLease>, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::SEM_REFRESH.key(keys.sem_leases(name));
        call.key(keys.sem_owners(name))
            .arg(id.expose())
            .arg(ttl.map_or(String::new(), |t| t.as_ms().to_string()));
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        lease_from(name, id, &reply)
    }

    /// The lease `id` if it is live.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn get(&self, name: &Name, id: LeaseId) -> Result<Option<SemaphoreLease>, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::SEM_GET.key(keys.sem_leases(name));
        call.key(keys.sem_owners(name)).arg(id.expose());
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        lease_from(name, id, &reply)
    }

    /// Releases the lease `id` (or takes it out of the queue); `false` when no
    /// live lease had that id.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn release(&self, name: &Name, id: LeaseId) -> Result<bool, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::SEM_RELEASE.key(keys.sem_leases(name));
        call.key(keys.sem_owners(name))
            .key(keys.sem_queue(name))
            .key(keys.sem_deadlines(name))
            .arg(id.expose())
            .arg(keys.channel())
            .arg(sem_event(name));
        let released: i64 = redis::from_redis_value(self.engine.store.eval(&call).await?)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        Ok(released == 1)
    }

    /// The live leases of `name`, in the order they were granted.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn status(&self, name: &Name) -> Result<SemaphoreStatus, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::SEM_STATUS.key(keys.sem_leases(name));
        call.key(keys.sem_owners(name));
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        let limit = Limit::new(reply.uint(0)?).ok();
        let mut leases = Vec::with_capacity(reply.len() / 3);
        let mut i = 1;
        while i + 2 < reply.len() {
            leases.push(SlotStatus {
                fencing_token: reply.uint(i)?,
                expires_in: Duration::from_millis(reply.uint(i + 1)?),
                owner: Owner::from_stored(reply.text(i + 2)?),
            });
            i += 3;
        }
        leases.sort_by_key(|l| l.fencing_token);
        Ok(SemaphoreStatus {
            name: name.clone(),
            limit,
            leases,
        })
    }
}

fn lease_from(name: &Name, id: LeaseId, reply: &Reply) -> Result<Option<SemaphoreLease>, Error> {
    if reply.int(0)? != 1 {
        return Ok(None);
    }
    let protocol = |e: crate::domain::Invalid| Error::Protocol(e.0);
    Ok(Some(SemaphoreLease {
        name: name.clone(),
        id,
        fencing_token: reply.uint(1)?,
        expires_at_ms: reply.uint(2)?,
        ttl: Ttl::from_ms(reply.uint(3)?).map_err(protocol)?,
        limit: Limit::new(reply.uint(4)?).map_err(protocol)?,
        owner: Owner::from_stored(reply.text(5)?),
    }))
}
