//! A holder is told at most once per asker every [`YIELD_EVERY`]: a yield
//! request repeated sooner (by the same token, or on a service without
//! tokens the same `owner`) is answered without telling the holders again.
//! Counted per instance: behind a load balancer an asker can reach each
//! instance once in that time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::{Kind, Name};

/// How often one asker may have the holders of one name told.
pub const YIELD_EVERY: Duration = Duration::from_secs(10);
/// Past this many remembered askers, those older than [`YIELD_EVERY`] are
/// forgotten.
const PRUNE_ABOVE: usize = 4096;

/// When each asker last had each name's holders told, on this instance.
#[derive(Debug, Default)]
pub struct YieldThrottle {
    told: Mutex<HashMap<(String, Kind, String), Instant>>,
}

impl YieldThrottle {
    /// Whether `asker` may have the holders of `name` told now; if so, it is
    /// remembered from now.
    pub fn may_tell(&self, asker: &str, kind: Kind, name: &Name) -> bool {
        let now = Instant::now();
        let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        if told.len() > PRUNE_ABOVE {
            told.retain(|_, at| now.duration_since(*at) < YIELD_EVERY);
        }
        let key = (asker.to_owned(), kind, name.as_str().to_owned());
        match told.get(&key) {
            Some(at) if now.duration_since(*at) < YIELD_EVERY => false,
            _ => {
                told.insert(key, now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_asker_tells_a_name_s_holders_once_every_ten_seconds() {
        let throttle = YieldThrottle::default();
        let (a, b) = (Name::parse("a").unwrap(), Name::parse("b").unwrap());
        assert!(throttle.may_tell("team-a", Kind::Lock, &a));
        assert!(!throttle.may_tell("team-a", Kind::Lock, &a));
        assert!(throttle.may_tell("team-b", Kind::Lock, &a));
        assert!(throttle.may_tell("team-a", Kind::Lock, &b));
        assert!(throttle.may_tell("team-a", Kind::Semaphore, &a));
        tokio::time::advance(YIELD_EVERY).await;
        assert!(throttle.may_tell("team-a", Kind::Lock, &a));
    }
}
