//! A holder is told at most once per asker every [`YIELD_EVERY`]: a yield
//! request repeated sooner (by the same token, or on a service without
//! tokens the same `owner`) to the same holders is answered without telling
//! them again. Holders are known by their fencing token, so a new holder of
//! the name is told at once. Counted per instance: behind a load balancer an
//! asker can reach each instance once in that time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::{Kind, Name};

/// How often one asker may have one holder told.
pub const YIELD_EVERY: Duration = Duration::from_secs(10);
/// Past this many remembered (asker, holder) pairs, those older than
/// [`YIELD_EVERY`] are forgotten.
const PRUNE_ABOVE: usize = 4096;

/// Who asked whom, and when (asker, kind, name, the holder's fencing token).
type Key = (String, Kind, String, u64);

/// When each asker last had each holder told, on this instance.
#[derive(Debug, Default)]
pub struct YieldThrottle {
    told: Mutex<HashMap<Key, Instant>>,
}

impl YieldThrottle {
    /// Whether `asker` may have the `holders` of `name` (their fencing
    /// tokens) told now: yes unless every one of them was told by it less
    /// than [`YIELD_EVERY`] ago. When yes, each is remembered as told now.
    pub fn may_tell(&self, asker: &str, kind: Kind, name: &Name, holders: &[u64]) -> bool {
        let now = Instant::now();
        let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        if told.len() > PRUNE_ABOVE {
            told.retain(|_, at| now.duration_since(*at) < YIELD_EVERY);
        }
        let key = |token: u64| (asker.to_owned(), kind, name.as_str().to_owned(), token);
        let recent = |token: &u64| {
            told.get(&key(*token))
                .is_some_and(|at| now.duration_since(*at) < YIELD_EVERY)
        };
        if !holders.is_empty() && holders.iter().all(recent) {
            return false;
        }
        for token in holders {
            told.insert(key(*token), now);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_asker_tells_a_holder_once_every_ten_seconds() {
        let throttle = YieldThrottle::default();
        let (a, b) = (Name::parse("a").unwrap(), Name::parse("b").unwrap());
        assert!(throttle.may_tell("team-a", Kind::Lock, &a, &[7]));
        assert!(!throttle.may_tell("team-a", Kind::Lock, &a, &[7]));
        // Another asker, another name or kind, a new holder: told.
        assert!(throttle.may_tell("team-b", Kind::Lock, &a, &[7]));
        assert!(throttle.may_tell("team-a", Kind::Lock, &b, &[7]));
        assert!(throttle.may_tell("team-a", Kind::Semaphore, &a, &[7]));
        assert!(throttle.may_tell("team-a", Kind::Lock, &a, &[8]));
        assert!(!throttle.may_tell("team-a", Kind::Lock, &a, &[7, 8]));
        assert!(throttle.may_tell("team-a", Kind::Lock, &a, &[7, 8, 9]));
        // Nobody holds it: nothing to hold back.
        assert!(throttle.may_tell("team-a", Kind::Lock, &a, &[]));
        tokio::time::advance(YIELD_EVERY).await;
        assert!(throttle.may_tell("team-a", Kind::Lock, &a, &[7]));
    }
}
