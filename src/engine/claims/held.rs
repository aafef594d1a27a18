//! The leases a claim holds so far: kept alive while the claim waits for
//! its next name, and given back at once when it gives up, or in the
//! background when nobody is left to hear its outcome (the client hung up
//! mid-wait): a claim leaves nothing behind.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::{Kind, Name, TokenName, Ttl};
use crate::engine::error::Error;
use crate::engine::handle::Engine;
use crate::engine::model::Lease;

/// The leases a claim holds so far, in the order taken; released when
/// dropped unless handed over ([`Held::into_leases`]).
pub(super) struct Held {
    engine: Engine,
    by: Option<TokenName>,
    pub(super) leases: Vec<(Kind, Lease)>,
}

impl Held {
    pub(super) fn new(engine: Engine, by: Option<TokenName>) -> Self {
        Self {
            engine,
            by,
            leases: Vec::new(),
        }
    }

    pub(super) fn names(&self) -> Vec<(Kind, Name)> {
        self.leases
            .iter()
            .map(|(kind, lease)| (*kind, lease.name.clone()))
            .collect()
    }

    /// Runs `taking` (the acquisition of the next name) while refreshing the
    /// leases held every `every`; `Err` names a lease that was lost
    /// meanwhile (expired during a stall, force-released): the claim then
    /// gives everything back, `taking` included (dropping an acquisition
    /// leaves the line and gives back what it was granted).
    pub(super) async fn keep_alive_while<T>(
        &mut self,
        taking: impl Future<Output = T>,
        every: Duration,
    ) -> Result<T, (Kind, Name)> {
        tokio::pin!(taking);
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                out = &mut taking => return Ok(out),
                _ = tick.tick() => match self.refresh(|_| true).await {
                    Ok(None) => {}
                    Ok(Some(lost)) => return Err(lost),
                    // Tried again at the next turn.
                    Err(err) => tracing::debug!(%err, "keeping a claim's leases alive failed"),
                },
            }
        }
    }

    /// Refreshes (with their own ttl) the leases `which` picks; names the
    /// first one found gone.
    ///
    /// # Errors
    /// Redis unavailable (the leases after it are not tried).
    pub(super) async fn refresh(
        &mut self,
        which: impl Fn(&Lease) -> bool,
    ) -> Result<Option<(Kind, Name)>, Error> {
        for (kind, lease) in &mut self.leases {
            if !which(lease) {
                continue;
            }
            let leases = self.engine.leases(*kind);
            let refreshed = leases
                .refresh(&lease.name, lease.id, None, self.by.as_ref())
                .await?;
            match refreshed {
                Some(refreshed) => *lease = refreshed,
                None => return Ok(Some((*kind, lease.name.clone()))),
            }
        }
        Ok(None)
    }

    /// Makes sure, one call per name, that every lease but the last taken
    /// (which Redis has just answered) is still held, and reads its expiry
    /// from that call: a lease expiring before `floor` is refreshed, the
    /// others are checked. Names the first one found gone (expired, forced,
    /// or lost with Redis's data while the claim waited on a later name).
    ///
    /// # Errors
    /// Redis unavailable (the leases after it are not tried).
    pub(super) async fn confirm(&mut self, floor: u64) -> Result<Option<(Kind, Name)>, Error> {
        let earlier = self.leases.len().saturating_sub(1);
        for (kind, lease) in &mut self.leases[..earlier] {
            let leases = self.engine.leases(*kind);
            // (Boxed as a trait object: a claim's future type stays shallow
            // enough for the compiler to see that it is `Send`.)
            let call: Pin<Box<dyn Future<Output = Result<Option<Lease>, Error>> + Send + '_>> =
                if lease.expires_at_ms < floor {
                    Box::pin(leases.refresh(&lease.name, lease.id, None, self.by.as_ref()))
                } else {
                    Box::pin(leases.check(&lease.name, lease.id))
                };
            let found = call.await?;
            match found {
                Some(found) => *lease = found,
                None => return Ok(Some((*kind, lease.name.clone()))),
            }
        }
        Ok(None)
    }

    /// Releases every lease held, now; those Redis did not answer for are
    /// left to the background (see [`Drop`]).
    pub(super) async fn release_all(&mut self) {
        let mut left = Vec::new();
        for (kind, lease) in std::mem::take(&mut self.leases) {
            let leases = self.engine.leases(kind);
            if let Err(err) = leases
                .release(&lease.name, lease.id, self.by.as_ref())
                .await
            {
                tracing::debug!(%err, "releasing a claim's lease failed; retrying in the background");
                left.push((kind, lease));
            }
        }
        self.leases = left;
    }

    /// The leases, handed over: no longer released when this is dropped.
    pub(super) fn into_leases(mut self) -> Vec<(Kind, Lease)> {
        std::mem::take(&mut self.leases)
    }
}

impl Drop for Held {
    /// Releases what is still held, in the background, retrying while Redis
    /// does not answer for up to the longest ttl (after which the leases
    /// have lapsed anyway).
    fn drop(&mut self) {
        if self.leases.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let leases = std::mem::take(&mut self.leases);
        let (engine, by) = (self.engine.clone(), self.by.clone());
        let longest = leases
            .iter()
            .map(|(_, l)| l.ttl)
            .max_by_key(|ttl| ttl.as_ms())
            .unwrap_or_default();
        runtime.spawn(release_in_background(engine, by, leases, longest));
    }
}

async fn release_in_background(
    engine: Engine,
    by: Option<TokenName>,
    mut leases: Vec<(Kind, Lease)>,
    longest: Ttl,
) {
    let give_up_at = Instant::now() + longest.as_duration();
    let mut backoff = Duration::from_millis(100);
    loop {
        let mut left = Vec::new();
        for (kind, lease) in leases {
            let released = engine
                .leases(kind)
                .release(&lease.name, lease.id, by.as_ref())
                .await;
            if released.is_err() {
                left.push((kind, lease));
            }
        }
        if left.is_empty() {
            tracing::info!("released the leases of a claim whose requester was gone");
            return;
        }
        if Instant::now() + backoff >= give_up_at {
            tracing::warn!(
                "gave up releasing an abandoned claim's leases; their ttl will end them"
            );
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
        leases = left;
    }
}
