//! A held claim, by its id, from any instance: check, refresh and release,
//! each over the claim's record and then its leases, each an ordinary lease
//! of its name.

use super::held::Held;
use super::record::Record;
use super::{Claim, Claims};
use crate::domain::{ClaimId, Kind, Name, TokenName, Ttl};
use crate::engine::error::Error;

/// What a refresh of a claim came to.
#[derive(Debug)]
pub enum Refreshed {
    /// Every lease refreshed: the claim with its new expiry.
    Whole(Claim),
    /// These leases were gone (expired, force-released, released one by
    /// one): the claim is no longer whole, so the rest were released and
    /// the claim is forgotten.
    Broken(Vec<(Kind, Name)>),
    /// No such claim (never, or forgotten: released, or its record lapsed).
    NotFound,
}

impl Claims {
    /// The names of the claim `id` (for the caller's scopes); `None` when
    /// there is no such claim.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn names(&self, id: &ClaimId) -> Result<Option<Vec<(Kind, Name)>>, Error> {
        let record = self.engine.load_claim(id).await?;
        Ok(record.map(|Record(entries)| {
            entries
                .into_iter()
                .map(|entry| (entry.kind, entry.name))
                .collect()
        }))
    }

    /// The claim `id` with the leases of it still held; `None` when none is.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn check(&self, id: &ClaimId) -> Result<Option<Claim>, Error> {
        let Some(Record(entries)) = self.engine.load_claim(id).await? else {
            return Ok(None);
        };
        let mut held = Vec::new();
        for entry in entries {
            let leases = self.engine.leases(entry.kind);
            if let Some(lease) = leases.check(&entry.name, entry.id).await? {
                held.push((entry.kind, lease));
            }
        }
        Ok((!held.is_empty()).then_some(Claim {
            id: *id,
            leases: held,
        }))
    }

    /// Refreshes every lease of the claim `id` by `ttl` (or each by its own);
    /// `by`: the caller's token name, for the audit lines.
    ///
    /// # Errors
    /// Redis unavailable.
    pub async fn refresh(
        &self,
        id: &ClaimId,
        ttl: Option<Ttl>,
        by: Option<&TokenName>,
    ) -> Result<Refreshed, Error> {
        let Some(Record(entries)) = self.engine.load_claim(id).await? else {
            return Ok(Refreshed::NotFound);
        };
        // The leases are the holder's, not this call's: a refresh that
        // fails half-way (Redis out of reach: the answer is 503, "may or may
        // not have happened") leaves every one of them held, as the holder
        // was last told. (A `Held` would give them back when dropped.) Only
        // a claim found broken is given back, and said so.
        let mut refreshed = Vec::new();
        let mut lost = Vec::new();
        for entry in &entries {
            let leases = self.engine.leases(entry.kind);
            match leases.refresh(&entry.name, entry.id, ttl, by).await? {
                Some(lease) => refreshed.push((entry.kind, lease)),
                None => lost.push((entry.kind, entry.name.clone())),
            }
        }
        if lost.len() == entries.len() {
            self.engine.drop_claim(id).await?;
            return Ok(Refreshed::NotFound);
        }
        if !lost.is_empty() {
            let mut held = Held::new(self.engine.clone(), by.cloned());
            held.leases = refreshed;
            held.release_all().await;
            self.engine.drop_claim(id).await?;
            return Ok(Refreshed::Broken(lost));
        }
        let longest = refreshed
            .iter()
            .map(|(_, lease)| lease.ttl.as_duration())
            .max()
            .unwrap_or_default();
        self.engine
            .save_claim(id, &Record(entries), longest)
            .await?;
        Ok(Refreshed::Whole(Claim {
            id: *id,
            leases: refreshed,
        }))
    }

    /// Releases every lease of the claim `id` and forgets it; `false` when
    /// it had no lease held.
    ///
    /// # Errors
    /// Redis unavailable (what was released stays released; a retry
    /// releases the rest).
    pub async fn release(&self, id: &ClaimId, by: Option<&TokenName>) -> Result<bool, Error> {
        let Some(Record(entries)) = self.engine.load_claim(id).await? else {
            return Ok(false);
        };
        let mut released = false;
        for entry in &entries {
            let leases = self.engine.leases(entry.kind);
            released |= leases.release(&entry.name, entry.id, by).await?;
        }
        self.engine.drop_claim(id).await?;
        Ok(released)
    }
}
