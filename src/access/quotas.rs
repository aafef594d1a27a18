//! No token may hold more than half of an instance's waiters
//! (`BATON_MAX_WAITERS`) or event streams (`BATON_MAX_EVENT_STREAMS`, the
//! holders' streams counted with `/events`): one team's runaway job cannot
//! take every slot from the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::digest::TokenDigest;
use crate::domain::TokenName;

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quota {
    /// Requests waiting in line (acquisitions, claims, tickets).
    Waiters,
    /// `/events` streams and holders' streams.
    Streams,
}

impl Quota {
    /// The setting whose half it is, as refusals name it.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Waiters => "BATON_MAX_WAITERS",
            Self::Streams => "BATON_MAX_EVENT_STREAMS",
        }
    }
}

/// Whose slots they are: a token of the set in force, by its digest (each
/// token of `BATON_API_TOKENS` on its own), or a job's token by its rule's
/// name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Whose {
    Token(TokenDigest),
    Named(TokenName),
}

/// A token already holds its share: 503 to that token only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this token already holds {max} of this instance's slots (half of {})", quota.setting())]
pub struct OverQuota {
    pub quota: Quota,
    /// The token's share.
    pub max: usize,
}

/// Each named token's slots in use on this instance.
#[derive(Debug)]
pub struct Quotas {
    max_waiters: usize,
    max_streams: usize,
    held: Arc<Mutex<HashMap<(Whose, Quota), usize>>>,
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub struct QuotaSlot {
    held: Arc<Mutex<HashMap<(Whose, Quota), usize>>>,
    key: (Whose, Quota),
}

impl Quotas {
    /// Half (at least one) of each instance cap per token.
    pub fn new(max_waiters: usize, max_streams: usize) -> Self {
        Self {
            max_waiters: (max_waiters / 2).max(1),
            max_streams: (max_streams / 2).max(1),
            held: Arc::default(),
        }
    }

    /// A token's share of `quota`.
    pub fn share(&self, quota: Quota) -> usize {
        match quota {
            Quota::Waiters => self.max_waiters,
            Quota::Streams => self.max_streams,
        }
    }

    /// A slot of `quota` for `whose` token; `None` (nothing counted) on a
    /// service without tokens, where everyone is anyone.
    ///
    /// # Errors
    /// [`OverQuota`] when the token holds its share already.
    pub fn take(&self, whose: Option<Whose>, quota: Quota) -> Result<Option<QuotaSlot>, OverQuota> {
        let Some(whose) = whose else {
            return Ok(None);
        };
        let max = self.share(quota);
        let key = (whose, quota);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(key.clone()).or_insert(0);
        if *count >= max {
            return Err(OverQuota { quota, max });
        }
        *count += 1;
        drop(held);
        Ok(Some(QuotaSlot {
            held: self.held.clone(),
            key,
        }))
    }
}

impl Drop for QuotaSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_half_and_the_others_are_still_served() {
        let quotas = Quotas::new(4, 21);
        let a = || Some(Whose::Named(TokenName::parse("team-a").unwrap()));
        let b = || Some(Whose::Token(TokenDigest::of(b"team-b-token")));
        let first = quotas.take(a(), Quota::Waiters).unwrap();
        let _second = quotas.take(a(), Quota::Waiters).unwrap();
        let over = quotas.take(a(), Quota::Waiters).unwrap_err();
        assert_eq!(over.max, 2);
        assert!(over.to_string().contains("half of BATON_MAX_WAITERS"));
        assert!(quotas.take(b(), Quota::Waiters).unwrap().is_some());
        assert!(quotas.take(a(), Quota::Streams).unwrap().is_some());
        drop(first);
        assert!(quotas.take(a(), Quota::Waiters).is_ok());
        assert_eq!(quotas.share(Quota::Streams), 10);
        assert!(quotas.take(None, Quota::Waiters).unwrap().is_none());
    }
}
