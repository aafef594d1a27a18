//! Locks: at most one live lease per name, each with a fencing token.

use std::time::{Duration, Instant};

use crate::domain::{LeaseId, Name, NamePrefix, Owner, Ttl, WaitTime};
use crate::telemetry::{record_acquisition, Acquired};

use super::acquire::{acquire_with_wait, Abandon, Attempt};
use super::keys::lock_event;
use super::reply::Reply;
use super::scripts;
use super::{Engine, Error};

/// A live lease on a lock, as its holder sees it.
#[derive(Debug, Clone)]
pub struct LockLease {
    pub name: Name,
    pub id: LeaseId,
    pub owner: Option<Owner>,
    pub fencing_token: u64,
    pub ttl: Ttl,
    /// Expiry in milliseconds since the Unix epoch, on Redis's clock.
    pub expires_at_ms: u64,
}

/// Who holds a lock that could not be acquired.
#[derive(Debug, Clone)]
pub struct LockHeld {
    pub owner: Option<Owner>,
    pub expires_in: Duration,
}

/// A lock as anyone may see it: never the lease id.
#[derive(Debug, Clone)]
pub struct LockStatus {
    pub name: Name,
    pub holder: Option<LockHolder>,
}

#[derive(Debug, Clone)]
pub struct LockHolder {
    pub owner: Option<Owner>,
    pub fencing_token: u64,
    pub expires_in: Duration,
}

/// Lock operations; cheap to clone.
#[derive(Clone)]
pub struct Locks {
    engine: Engine,
}

impl Locks {
    pub(super) fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// Acquires `name`, waiting up to `wait` while someone else holds it.
    /// `Ok(Err(held))` when it is still held at the end of the wait.
    ///
    /// # Errors
    /// Redis unavailable, the service shutting down, or too many waiters.
    pub async fn acquire(
        &self,
        name: &Name,
        ttl: Ttl,
        wait: WaitTime,
        owner: Option<Owner>,
    ) -> Result<Result<LockLease, LockHeld>, Error> {
        let started = Instant::now();
        let id = LeaseId::new();
        let undo = {
            let locks = self.clone();
            let name = name.clone();
            move || {
                let (locks, name) = (locks.clone(), name.clone());
                async move { locks.release(&name, id).await }
            }
        };
        let guard = Abandon::new(undo, ttl.as_duration());
        let mut attempts = 0u32;
        let outcome = acquire_with_wait(&self.engine, lock_event(name), wait.as_duration(), || {
            attempts += 1;
            self.try_acquire(name, id, ttl, owner.as_ref())
        })
        .await;
        match &outcome {
            // Known outcomes: acquired, held, or never tried.
            Ok(_) | Err(Error::ShuttingDown | Error::TooManyWaiters) => guard.disarm(),
            // The script may have run: the guard releases in the background.
            Err(_) => drop(guard),
        }
        let outcome = outcome?;
        record_acquisition(Acquired::Lock, outcome.is_ok(), attempts, started.elapsed());
        Ok(outcome)
    }

    async fn try_acquire(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Ttl,
        owner: Option<&Owner>,
    ) -> Result<Attempt<LockLease, LockHeld>, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::LOCK_ACQUIRE.key(keys.lock(name));
        call.key(keys.lock_fence(name))
            .arg(id.expose())
            .arg(ttl.as_ms())
            .arg(owner.map_or("", Owner::as_str));
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        if reply.int(0)? == 1 {
            Ok(Attempt::Acquired(LockLease {
                name: name.clone(),
                id,
                owner: owner.cloned(),
                fencing_token: reply.uint(1)?,
                ttl,
                expires_at_ms: reply.uint(2)?,
            }))
        } else {
            // PTTL is -1 only for a lease hash without expiry, which no script writes.
            let expires_in = Duration::from_millis(reply.int(1)?.max(0) as u64);
            Ok(Attempt::Busy {
                busy: LockHeld {
                    owner: Owner::from_stored(reply.text(2)?),
                    expires_in,
                },
                retry_in: Some(expires_in),
                ticket: None,
            })
        }
    }

    /// Extends the lease `id` by `ttl` (or its own ttl); `None` when it is not
    /// held (expired, released, or never this lock's).
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn refresh(
        &self,
        name: &Name,
        id: LeaseId,
        ttl: Option<Ttl>,
    ) -> Result<Option<LockLease>, Error> {
        let mut call = scripts::LOCK_REFRESH.key(self.engine.keys.lock(name));
        call.arg(id.expose())
            .arg(ttl.map_or(String::new(), |t| t.as_ms().to_string()));
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        lease_from(name, id, &reply)
    }

    /// The lease `id` if it is still held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn get(&self, name: &Name, id: LeaseId) -> Result<Option<LockLease>, Error> {
        let mut call = scripts::LOCK_GET.key(self.engine.keys.lock(name));
        call.arg(id.expose());
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        lease_from(name, id, &reply)
    }

    /// Releases the lease `id`; `false` when it was not held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn release(&self, name: &Name, id: LeaseId) -> Result<bool, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::LOCK_RELEASE.key(keys.lock(name));
        call.arg(id.expose())
            .arg(keys.channel())
            .arg(lock_event(name));
        let released: i64 = redis::from_redis_value(self.engine.store.eval(&call).await?)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        Ok(released == 1)
    }

    /// Releases `name` whoever holds it; `false` when it was not held.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn force_release(&self, name: &Name) -> Result<bool, Error> {
        let keys = &self.engine.keys;
        let mut call = scripts::LOCK_FORCE_RELEASE.key(keys.lock(name));
        call.arg(keys.channel()).arg(lock_event(name));
        let released: i64 = redis::from_redis_value(self.engine.store.eval(&call).await?)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        Ok(released == 1)
    }

    /// Who holds `name`, if anyone.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn status(&self, name: &Name) -> Result<LockStatus, Error> {
        let call = scripts::LOCK_STATUS.key(self.engine.keys.lock(name));
        let reply = Reply::new(self.engine.store.eval(&call).await?)?;
        let holder = if reply.int(0)? == 1 {
            Some(LockHolder {
                fencing_token: reply.uint(1)?,
                expires_in: Duration::from_millis(reply.int(2)?.max(0) as u64),
                owner: Owner::from_stored(reply.text(3)?),
            })
        } else {
            None
        };
        Ok(LockStatus {
            name: name.clone(),
            holder,
        })
    }

    /// The held locks whose names start with `prefix`, sorted by name.
    ///
    /// Found with SCAN, so a lock acquired or released meanwhile may or may not
    /// be listed; each one listed is read atomically.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LockStatus>, Error> {
        let keys = &self.engine.keys;
        let pattern = keys.lock_scan_pattern(prefix);
        let mut names = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .arg("TYPE")
                .arg("hash");
            let (next, found): (u64, Vec<String>) = self.engine.store.query(&cmd).await?;
            names.extend(
                found
                    .iter()
                    .filter_map(|key| keys.lock_name_of(key))
                    .filter_map(|name| Name::parse(name).ok()),
            );
            if next == 0 {
                break;
            }
            cursor = next;
        }
        names.sort();
        names.dedup();
        let statuses =
            futures_util::future::try_join_all(names.iter().map(|n| self.status(n))).await?;
        Ok(statuses
            .into_iter()
            .filter(|s| s.holder.is_some())
            .collect())
    }
}

fn lease_from(name: &Name, id: LeaseId, reply: &Reply) -> Result<Option<LockLease>, Error> {
    if reply.int(0)? != 1 {
        return Ok(None);
    }
    Ok(Some(LockLease {
        name: name.clone(),
        id,
        fencing_token: reply.uint(1)?,
        expires_at_ms: reply.uint(2)?,
        ttl: Ttl::from_ms(reply.uint(3)?).map_err(|e| Error::Protocol(e.0))?,
        owner: Owner::from_stored(reply.text(4)?),
    }))
}
